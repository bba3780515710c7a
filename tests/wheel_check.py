"""Checks an installed cutrace wheel from inside its virtualenv (run by tests/wheel_check.sh).

Usage: python tests/wheel_check.py TRACE, with CLI set to the checkout's release binary (the
reference the wheel must agree with). Every check prints one line; the first failure ends the run
with a non-zero status. A check that cannot run here says SKIPPED and why.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any, Dict, List

import cutrace

TRACE = sys.argv[1]
CLI = os.environ["CLI"]
BIN = Path(sys.prefix) / "bin"


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    if not ok:
        sys.exit(1)


def out(cmd: List[str], **kw: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def cli_json(exe: str, *flags: str) -> Dict[str, Any]:
    p = out([exe, "report", "--format", "json", *flags, TRACE])
    check(f"{exe} report --format json {' '.join(flags)} exits 0", p.returncode == 0, p.stderr)
    data: Dict[str, Any] = json.loads(p.stdout)
    return data


# The package runs the wheel's own binary, which carries the injection library: no second copy.
exe = cutrace.binary()
check("cutrace.binary() is the wheel's, in the virtualenv's bin/", exe == str(BIN / "cutrace"), exe)
check(
    "no second copy of libcutrace_inject.so is installed (the binary carries it)",
    not (BIN / "libcutrace_inject.so").exists(),
)
check("py.typed is installed", (Path(cutrace.__file__).parent / "py.typed").is_file())

# Same numbers: the wheel's command, the Python API and the checkout's CLI.
reference = cli_json(CLI)
wheel = cli_json(exe)
api = cutrace.report(TRACE)
check("the wheel's JSON report equals the CLI's", wheel == reference)
check("cutrace.report() equals the CLI's JSON report", api == reference)
flags = ["--from", "3ms", "--to", "5ms", "--top", "2"]
check(
    "cutrace.report(from_=, to=, top=) equals the CLI with --from --to --top",
    cutrace.report(TRACE, from_="3ms", to="5ms", top=2) == cli_json(CLI, *flags),
)
check("the windowed report differs from the whole one", cli_json(CLI, *flags) != reference)
text = out([exe, "report", TRACE])
check("the wheel's text report equals the CLI's", text.stdout == out([CLI, "report", TRACE]).stdout)
def fmt_ns(ns, res):
    """A duration as the text writes it (crates/cutrace-export/src/text/mod.rs, `Col`): unit by
    size, three decimals at most and none below the trace's resolution, rounded half up."""
    div, unit = ((1, "ns") if ns < 1_000 else (1_000, "µs") if ns < 1_000_000 else
                 (1_000_000, "ms") if ns < 1_000_000_000 else (1_000_000_000, "s"))
    decimals = min(3, max(0, len(str(div)) - len(str(res))))
    q = (ns * 10 ** decimals + div // 2) // div
    return f"{q // 10 ** decimals}.{q % 10 ** decimals:0{decimals}} {unit}" if decimals else f"{q} {unit}"


for dev in api["devices"]:
    busy = f"{fmt_ns(dev['busy_ns'], api['trace']['resolution_ns'])} = {dev['busy_pct']:.1f} % of the window"
    check(f"GPU {dev['device']}: the text report shows busy {busy}", busy in text.stdout)
    gaps = f"in {dev['gaps']} gaps"
    check(f"GPU {dev['device']}: the text report shows {gaps}", gaps in text.stdout)

# python -m cutrace is the command, exit status included.
m = out([sys.executable, "-m", "cutrace", "report", "--format", "json", TRACE])
check("python -m cutrace report gives the same JSON", json.loads(m.stdout) == reference)
m = out([sys.executable, "-m", "cutrace", "report", "no-such-trace.json"])
check("python -m cutrace passes the exit status through (2)", m.returncode == 2, str(m.returncode))

# Errors: the command's own message, as an exception.
try:
    cutrace.report("no-such-trace.json", progress=False)
    check("a missing trace raises CutraceError", False)
except cutrace.CutraceError as e:
    check(
        "a missing trace raises CutraceError with the command's message", "No such file" in str(e)
    )

# stderr (progress, notes) is passed on as it comes, unless progress=False.
with tempfile.TemporaryDirectory() as tmp:
    said = io.StringIO()
    with redirect_stderr(said):
        cutrace.run(["convert", "--parquet", Path(tmp) / "a", TRACE])
    check("cutrace.run passes the command's stderr on", "cutrace: wrote" in said.getvalue())
    said = io.StringIO()
    with redirect_stderr(said):
        cutrace.run(["convert", "--parquet", Path(tmp) / "b", TRACE], progress=False)
    check("progress=False keeps stderr quiet", said.getvalue() == "")

# ... and as it comes, not when the command ends: a stand-in binary says a line, then works 1 s.
with tempfile.TemporaryDirectory() as tmp:
    slow = Path(tmp) / "cutrace"
    slow.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "print('cutrace: reading t: 1 MB', file=sys.stderr, flush=True)\n"
        "time.sleep(1)\nprint('{}')\n"
    )
    slow.chmod(0o755)

    class Stamped(io.StringIO):
        first: float = 0.0

        def write(self, text: str) -> int:
            self.first = self.first or time.monotonic()
            return super().write(text)

    said = Stamped()
    os.environ["CUTRACE_BIN"] = str(slow)
    try:
        with redirect_stderr(said):
            cutrace.report(TRACE)
        ended = time.monotonic()
    finally:
        del os.environ["CUTRACE_BIN"]
    check(
        "stderr lines reach sys.stderr while the command still runs",
        said.first > 0 and ended - said.first > 0.5,
        f"first line {ended - said.first:.2f} s before the end",
    )

check("Report(path).data equals the CLI's JSON report", cutrace.Report(TRACE).data == reference)

# tables(): DataFrames through the Parquet export, or the optional extra named.
if all(importlib.util.find_spec(m) for m in ("pandas", "pyarrow")):
    frames = cutrace.tables(TRACE, progress=False)
    kernels = sum(d["kernels"] for d in api["devices"])
    check("tables() has a kernels table", "kernels" in frames)
    check(
        f"tables()['kernels'] has the report's {kernels} kernels", len(frames["kernels"]) == kernels
    )
else:
    try:
        cutrace.tables(TRACE)
        check("tables() without pandas raises ImportError", False)
    except ImportError as e:
        check("tables() without pandas names the extra to install", "pip install pandas pyarrow" in str(e))
    print("SKIPPED tables() DataFrames: pandas/pyarrow not installed in this virtualenv")

# _repr_html_: against a stand-in binary that writes what `report --html OUT` would.
with tempfile.TemporaryDirectory() as tmp:
    fake = Path(tmp) / "cutrace"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\na = sys.argv\n"
        # The JSON report first (Report asks whether the input is a job), then the page.
        "if '--html' not in a:\n    print('{\"schema_version\": 1, \"devices\": []}')\n    sys.exit(0)\n"
        "open(a[a.index('--html') + 1], 'w').write('<p>page for ' + a[-1] + ' & co</p>')\n"
    )
    fake.chmod(0o755)
    os.environ["CUTRACE_BIN"] = str(fake)
    try:
        r = cutrace.Report(TRACE)
        page = r.html()
        shown = r._repr_html_()
    finally:
        del os.environ["CUTRACE_BIN"]
    check(
        "Report.html() returns the file `report --html` wrote",
        page == f"<p>page for {TRACE} & co</p>",
    )
    check(
        "Report._repr_html_() puts it in an iframe, escaped", 'srcdoc="&lt;p&gt;page for' in shown
    )
if "--html" in out([exe, "report", "--help"]).stdout:
    page = cutrace.Report(TRACE).html()
    check("the real report --html page is HTML", "<html" in page.lower())
else:
    print("SKIPPED Report.html() with the real binary: this build's `cutrace report` has no --html")

# record: the program's output and exit status pass through, with no GPU or CUDA here.
with tempfile.TemporaryDirectory() as tmp:
    prog = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(7)"
    p = out([exe, "record", "-o", str(Path(tmp) / "t"), "--", sys.executable, "-c", prog])
    check("record passes the program's exit status through (7)", p.returncode == 7, p.stderr)
    check("record passes the program's stdout through", p.stdout == "to stdout\n", p.stdout)
    check("record passes the program's stderr through", "to stderr\n" in p.stderr, p.stderr)
    # The library the binary carries, unpacked once into the user's cache (0700 directories, a
    # 0600 file), is the only copy: the wheel installs none beside the binary.
    cache = os.environ.get("XDG_CACHE_HOME")
    libs = list((Path(cache) / "cutrace").glob("*/libcutrace_inject.so")) if cache else []
    check(
        "record unpacked the binary's own library into the cache, once, privately",
        len(libs) == 1
        and libs[0].read_bytes()[:4] == b"\x7fELF"
        and (libs[0].stat().st_mode & 0o777) == 0o600
        and (libs[0].parent.stat().st_mode & 0o777) == 0o700,
        str(libs),
    )
print("all wheel checks passed")
