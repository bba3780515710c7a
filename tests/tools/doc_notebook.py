#!/usr/bin/env python3
"""Writes docs/examples/python.ipynb from docs/PYTHON.md's ```python blocks, so that the two
cannot drift: the notebook is the page's examples, verbatim, one cell each.

    doc_notebook.py           write the notebook
    doc_notebook.py --check   exit 1 when the committed notebook is not what this would write

Around the page's cells the notebook adds two of its own. The first makes a scratch directory
holding `run1/` (a copy of tests/fixtures/native/nvtx, a `cutrace record -o` directory) and
`job/` (4 ranks written by tests/tools/gen_job.py), works there, and from then on checks every
top-level expression of every cell: an empty DataFrame, Series, dict, list or string fails the
cell, and so does a `cutrace.Report` whose notebook view is an error. The last cell removes the
scratch directory and fails unless every expression of the page's examples was checked.
Executed by `jupyter nbconvert --to notebook --execute` (.ci/run), an exception in any cell
fails the run. Standard library only.
"""

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "PYTHON.md"
NOTEBOOK = ROOT / "docs" / "examples" / "python.ipynb"

SETUP = '''\
# Not from docs/PYTHON.md: the traces its examples name, in a scratch directory, and a check on
# every top-level expression of the cells below (an empty table, dict, list or string, or a
# Report whose view is an error, fails the cell).
import ast, atexit, os, shutil, subprocess, sys, tempfile
from pathlib import Path

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "docs" / "PYTHON.md").is_file())
SCRATCH = Path(tempfile.mkdtemp(prefix="cutrace-notebook-"))
atexit.register(shutil.rmtree, SCRATCH, True)
shutil.copytree(ROOT / "tests" / "fixtures" / "native" / "nvtx", SCRATCH / "run1")
subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "gen_job.py"), str(SCRATCH / "job"),
                "--ranks", "4"], check=True)
os.chdir(SCRATCH)
checked = []


def nonempty(value, source):
    """The value of the expression `source`, after checking that it is not empty."""
    checked.append(source)
    if type(value).__name__ == "Report" and hasattr(value, "_repr_html_"):
        view = value._repr_html_()
        assert view and "cutrace could not" not in view, f"{source}: its view is an error: {view}"
    elif hasattr(value, "shape") and hasattr(value, "__len__"):
        assert len(value) > 0, f"{source} is an empty table"
    elif isinstance(value, (dict, list, tuple, str)):
        assert len(value) > 0, f"{source} is empty"
    elif isinstance(value, float):
        assert value == value, f"{source} is NaN"
    return value


class CheckEachExpression(ast.NodeTransformer):
    """Wraps each top-level expression `e` of a cell as `nonempty(e, "e")`; the cell's last one
    is still shown, as its value is returned."""

    def visit_Module(self, node):
        for stmt in node.body:
            if isinstance(stmt, ast.Expr):
                source = ast.Constant(ast.unparse(stmt.value))
                stmt.value = ast.Call(ast.Name("nonempty", ast.Load()), [stmt.value, source], [])
        return ast.fix_missing_locations(node)


get_ipython().ast_transformers.append(CheckEachExpression())
'''

CLEANUP = '''\
# Not from docs/PYTHON.md: every expression above was checked; the scratch directory goes.
assert len(checked) == {count}, f"checked {{len(checked)}} expressions, the page has {count}"
os.chdir(ROOT)
shutil.rmtree(SCRATCH)
print("docs/PYTHON.md: {count} expressions in {blocks} examples ran, none empty")
'''


def examples(text):
    """(heading, code) of each ```python block, with the `## ` heading above it."""
    heading, out = "", []
    for m in re.finditer(r"^## ([^\n]*)$|^```python\n(.*?)^```$", text, re.M | re.S):
        if m.group(1) is not None:
            heading = m.group(1)
        else:
            out.append((heading, m.group(2)))
    return out


def cell(kind, source, n):
    lines = source.splitlines(keepends=True)
    c = {"cell_type": kind, "id": f"cell-{n}", "metadata": {}, "source": lines}
    if kind == "code":
        c.update(execution_count=None, outputs=[])
    return c


def notebook():
    blocks = examples(DOC.read_text(encoding="utf-8"))
    if not blocks:
        sys.exit(f"{DOC} has no ```python blocks")
    count = sum(isinstance(s, ast.Expr) for _, code in blocks for s in ast.parse(code).body)
    intro = (
        "# docs/PYTHON.md's examples\n\nMade by `tests/tools/doc_notebook.py` from "
        "docs/PYTHON.md's code blocks: edit the page, then run that script, not this notebook. "
        "Run from a checkout (`pip install '.[pandas,dask]'`, or `PYTHONPATH=python` with "
        "`CUTRACE_BIN` set to a built `cutrace`); .ci/run executes it with "
        "`jupyter nbconvert --execute`.\n"
    )
    cells = [cell("markdown", intro, 0), cell("code", SETUP, 1)]
    for heading, code in blocks:
        cells.append(cell("markdown", f"## {heading}\n", len(cells)))
        cells.append(cell("code", code.rstrip("\n") + "\n", len(cells)))
    cleanup = CLEANUP.format(count=count, blocks=len(blocks))
    cells.append(cell("code", cleanup, len(cells)))
    for c in cells:  # nbformat's convention: the last line of a cell has no newline
        if c["source"]:
            c["source"][-1] = c["source"][-1].rstrip("\n")
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main():
    want = notebook()
    if sys.argv[1:] == ["--check"]:
        have = NOTEBOOK.read_text(encoding="utf-8") if NOTEBOOK.is_file() else ""
        if have != want:
            sys.exit(f"FAIL {NOTEBOOK.relative_to(ROOT)} is not docs/PYTHON.md's examples: "
                     "run tests/tools/doc_notebook.py and commit it")
        print(f"ok   {NOTEBOOK.relative_to(ROOT)} is docs/PYTHON.md's examples")
    elif not sys.argv[1:]:
        NOTEBOOK.parent.mkdir(parents=True, exist_ok=True)
        NOTEBOOK.write_text(want, encoding="utf-8")
        print(f"wrote {NOTEBOOK.relative_to(ROOT)}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
