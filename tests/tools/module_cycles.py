#!/usr/bin/env python3
"""Fails when modules of one crate import each other in a circle.

A module is a file under crates/<crate>/src (`a/b.rs` and `a/b/mod.rs` are module `a::b`; a
submodule counts as part of its top-level module, so `kineto::scan` is `kineto`). An edge
a -> b is any `crate::b` path or `use crate::{b, ...}` in a's files, or `super::b` from a
top-level file, outside the file's `#[cfg(test)]` unit tests. Cycles between top-level modules are reported; a module may use its own
submodules freely. Prints `module cycles: N passed, M failed` (crates checked, crates with a
cycle) and exits 1 on any cycle.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]


def top_module(src: pathlib.Path, f: pathlib.Path) -> str:
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if not parts or parts == ["lib"] or parts == ["main"]:
        return "<root>"
    return parts[0]


def edges_of(text: str, here: str, is_top_file: bool):
    # Unit tests (the `#[cfg(test)]` module at a file's end) may drive sibling modules.
    text = text.split("#[cfg(test)]")[0]
    text = re.sub(r"//[^\n]*", "", text)
    out = set()
    for m in re.finditer(r"crate::([a-z_][a-z0-9_]*)", text):
        out.add(m.group(1))
    for m in re.finditer(r"use\s+crate::\{([^}]*)\}", text):
        for name in re.findall(r"\b([a-z_][a-z0-9_]*)\b", m.group(1)):
            out.add(name)
    if is_top_file:
        for m in re.finditer(r"super::([a-z_][a-z0-9_]*)", text):
            out.add(m.group(1))
    out.discard(here)
    return out


def cycles(graph):
    seen, stack, on, found = set(), [], set(), []

    def visit(n):
        seen.add(n)
        stack.append(n)
        on.add(n)
        for m in sorted(graph.get(n, ())):
            if m in on:
                found.append(stack[stack.index(m):] + [m])
            elif m not in seen:
                visit(m)
        stack.pop()
        on.discard(n)

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    return found


ok = bad = 0
for src in sorted(root.glob("crates/*/src")):
    files = list(src.rglob("*.rs"))
    mods = {top_module(src, f) for f in files}
    graph = {}
    for f in files:
        here = top_module(src, f)
        is_top = len(f.relative_to(src).parts) == 1
        for e in edges_of(f.read_text(), here, is_top):
            if e in mods and e != "<root>":
                graph.setdefault(here, set()).add(e)
    graph.pop("<root>", None)
    found = cycles(graph)
    if found:
        bad += 1
        for c in found:
            print(f"{src.parent.name}: {' -> '.join(c)}")
    else:
        ok += 1
print(f"module cycles: {ok} passed, {bad} failed")
sys.exit(1 if bad else 0)
