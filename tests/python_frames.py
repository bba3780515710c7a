#!/usr/bin/env python3
"""cutrace.Report's DataFrames beside its dict, with pandas and without it.

- With pandas: each table is its rows of the JSON report, column for column and value for value
  (summary() is summary.devices, kernels() kernel_summary, api_calls() api_summary, gaps() every
  GPU's largest_gaps with a device column and dotted columns for nested objects, steps()
  steps.steps); on a job of 4 ranks (tests/tools/gen_job.py) summary() is ranks() is the report's
  ranks, and steps() and collectives() are its steps and largest collectives. Integer columns
  stay int64, and a column of integers with nulls is Int64, exact beyond 2**53. A trace's table
  asked of a job, and a job's of a trace, raise ValueError saying what to use.
- The dict API is unchanged: Report.data is cutrace.report()'s dict.
- A job's notebook view: the HTML page where `cutrace report JOB --html` makes one, else the text
  report (`cutrace report JOB`) with why there is no page, and nothing on stderr.
- Without pandas (its import made to fail): each table raises ImportError naming
  `pip install pandas`, while .data and the notebook view still work.

usage: PYTHONPATH=python python3 tests/python_frames.py CUTRACE_BINARY
Without pandas installed the first part prints SKIPPED. Everything it writes is in one temporary
directory, removed at the end.
"""

import contextlib
import html
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["CUTRACE_BIN"] = os.path.abspath(sys.argv[1])
import cutrace  # noqa: E402
from cutrace._api import _frame  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "fixtures" / "native" / "nvtx"


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        print(f"     {detail}")
        print("python frames: FAIL")
        sys.exit(1)


def same_rows(frame, rows):
    """Whether the DataFrame holds `rows` (the report's dicts, nested ones dotted), exactly."""
    flat = [flatten(r) for r in rows]
    columns = list(dict.fromkeys(c for r in flat for c in r))
    if list(frame.columns) != columns or len(frame) != len(rows):
        return False
    return all(
        [None if v is cutrace_na() else v for v in frame[c].tolist()] == [r.get(c) for r in flat]
        for c in columns
    )


def cutrace_na():
    import pandas as pd

    return pd.NA


def flatten(row, prefix=""):
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def raises(fn, kind, words):
    try:
        fn()
    except kind as e:
        return all(w in str(e) for w in words)
    return False


def trace_frames():
    r = cutrace.Report(TRACE, progress=False, steps="step")
    d = r.data
    check("summary() is summary.devices", same_rows(r.summary(), d["summary"]["devices"]))
    check("kernels() is kernel_summary", same_rows(r.kernels(), d["kernel_summary"]))
    check("api_calls() is api_summary", same_rows(r.api_calls(), d["api_summary"]))
    gaps = [{"device": x["device"], **g} for x in d["devices"] for g in x["largest_gaps"]]
    check("gaps() is every GPU's largest_gaps, with a device column", same_rows(r.gaps(), gaps))
    check("gaps() has dotted columns for nested objects",
          {"before.name", "after.name", "host.reading"} <= set(r.gaps().columns))
    check("steps() is steps.steps", same_rows(r.steps(), d["steps"]["steps"]))
    check("the trace's tables are not empty",
          all(len(t) > 0 for t in (r.summary(), r.kernels(), r.gaps(), r.steps())))
    s = r.summary()
    check("integer columns are int64", str(s["busy_ns"].dtype) == "int64", s.dtypes)
    check("a trace has no ranks(): ValueError saying what to use",
          raises(r.ranks, ValueError, ["job's table", "summary()"]))
    check("steps() without matched steps is an empty table",
          len(cutrace.Report(ROOT / "examples/two_streams.json.gz", progress=False).steps()) == 0)
    big = 2**62 + 1
    f = _frame([{"a": big, "b": "x"}, {"a": None, "b": None}], "test")
    check("a column of integers with nulls is Int64, exact beyond 2**53",
          str(f["a"].dtype) == "Int64" and f["a"][0] == big and f["a"].isna()[1], f.dtypes)


def job_frames(job):
    j = cutrace.Report(job, progress=False)
    d = j.data
    check("a job's report is_job", j.is_job and not cutrace.Report(TRACE).is_job)
    check("a job's summary() is ranks() is its ranks",
          same_rows(j.summary(), d["ranks"]) and same_rows(j.ranks(), d["ranks"]))
    check("a job's summary() has one row per rank",
          j.summary()["rank"].tolist() == [0, 1, 2, 3], j.summary()["rank"].tolist())
    check("a job's steps() is its steps", same_rows(j.steps(), d["steps"]["steps"]))
    check("a job's collectives() is its largest collectives",
          same_rows(j.collectives(), d["collectives"]["largest"]))
    check("the job's tables are not empty",
          all(len(t) > 0 for t in (j.summary(), j.steps(), j.collectives())))
    for name in ("kernels", "api_calls", "gaps"):
        check(f"a job has no {name}(): ValueError saying what to use",
              raises(getattr(j, name), ValueError, ["job of 4 ranks"]))
    check("kernels() of a job names cutrace.tables(JOB)",
          raises(j.kernels, ValueError, ["cutrace.tables(JOB)['kernels']"]))


def job_view(job):
    page = subprocess.run([os.environ["CUTRACE_BIN"], "report", "--html", "-", "--", job],
                          capture_output=True, text=True)
    text = subprocess.run([os.environ["CUTRACE_BIN"], "report", "--", job],
                          capture_output=True, text=True, check=True).stdout
    err = io.StringIO()
    rep = cutrace.Report(job)
    with contextlib.redirect_stderr(err):
        view = rep._repr_html_()
    if page.returncode == 0:
        check("a job's view is its HTML page (cutrace report JOB --html makes one)",
              view.startswith('<iframe sandbox="allow-scripts"')
              and f'srcdoc="{html.escape(rep.html(), quote=True)}"' in view, view[:300])
    else:
        check("a job's view is the text report, as `cutrace report JOB` prints it",
              view.startswith('<pre class="cutrace-report">' + html.escape(text) + "</pre>"),
              view[:300])
        why = page.stderr.strip().splitlines()[-1]
        check("and says in one line why there is no page", html.escape(why) in view, view[-300:])
        check("the job's read, not the refused page, is what shows on stderr",
              "--html" not in err.getvalue(), err.getvalue())
    check("the view is no error", "cutrace could not" not in view)


def without_pandas(job):
    saved = sys.modules.get("pandas")
    sys.modules["pandas"] = None  # import pandas now raises ImportError
    try:
        r = cutrace.Report(TRACE, progress=False)
        j = cutrace.Report(job, progress=False)
        for rep, name in [(r, "summary"), (r, "kernels"), (r, "gaps"), (r, "steps"),
                          (r, "api_calls"), (j, "summary"), (j, "ranks"), (j, "collectives")]:
            check(f"without pandas, {name}() raises ImportError naming pip install pandas",
                  raises(getattr(rep, name), ImportError, ["pip install pandas", f"{name}()"]))
        check("without pandas, .data is the dict report",
              r.data == cutrace.report(TRACE, progress=False) and j.data["kind"] == "job")
        check("without pandas, the views work",
              "cutrace could not" not in r._repr_html_() and "cutrace could not" not in j._repr_html_())
    finally:
        if saved is None:
            del sys.modules["pandas"]
        else:
            sys.modules["pandas"] = saved


def main():
    with tempfile.TemporaryDirectory(prefix="cutrace-frames-") as tmp:
        job = os.path.join(tmp, "job")
        subprocess.run([sys.executable, str(ROOT / "tests/tools/gen_job.py"), job, "--ranks", "4"],
                       check=True)
        try:
            import pandas  # noqa: F401
        except ImportError:
            print("SKIPPED Report's DataFrames with pandas (pandas is not installed)")
        else:
            trace_frames()
            job_frames(job)
        job_view(job)
        without_pandas(job)
    print("python frames: PASS")


if __name__ == "__main__":
    main()
