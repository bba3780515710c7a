#!/usr/bin/env python3
"""The Python package against hostile names and directories, and its notebook view's sandbox.

- Trace paths that look like options: a trace file named `--help`, `-` or `--html=x.html` is
  read as a trace by cutrace.report(), cutrace.Report (its data and page),
  cutrace.tables() (when pandas and pyarrow are installed) and cutrace.dask.rank_summary(),
  never taken as an option or as stdin.
- cutrace.dask.analyze_job(summaries=DIR), with an in-process stand-in for a Dask client (so
  no dask is needed): links planted in DIR at the summaries' names (one to a victim file, one
  dangling) make it fail with FileExistsError naming the path, and the victim and the links'
  targets are left untouched, with no temporary file left behind; into a new DIR it writes
  mode-0600 regular files in a 0700 directory; and summaries swapped in DIR after they are
  written (before the reduce) do not change the job report, which equals `cutrace report JOB`.
- Report._repr_html_(): one iframe, sandbox="allow-scripts" and no allow-same-origin, whose
  srcdoc is the page. With chromium, chromium-driver and selenium (as tests/html_browser.py
  finds them): inside that sandboxed iframe the page's script runs (an opaque origin, no way to
  the notebook's document, the timeline zooms, a table sorts, the style sheet applies, no
  console error); and a script element and an event handler attribute added to the page are not
  run by the browser (its policy allows only the page's own script). Without a browser those
  checks print SKIPPED; every other check still runs.

usage: PYTHONPATH=python python3 tests/python_hostile.py CUTRACE_BINARY
Prints one line per check; exit 1 on the first failure. Everything it writes is in one
temporary directory, removed at the end.
"""

from __future__ import annotations

import html
import html.parser
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples/two_streams.json.gz")
OTHER = os.path.join(ROOT, "tests/fixtures/kineto/profiler_steps.json.gz")


def check(what: str, ok: bool, detail: object = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        print("python hostile-input checks: FAIL")
        sys.exit(1)


def cli_json(*args: str, cwd: str) -> Dict[str, Any]:
    p = subprocess.run([os.environ["CUTRACE_BIN"], *args], cwd=cwd, capture_output=True,
                       text=True)
    check(f"cutrace {' '.join(args)} exits 0", p.returncode == 0, p.stderr)
    data: Dict[str, Any] = json.loads(p.stdout)
    return data


def raises(fn: Any) -> "BaseException | None":
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any failure is the answer here
        return e
    return None


def option_like_paths(scratch: str) -> None:
    import cutrace
    import cutrace.dask

    names = ["--help", "-", "--html=planted.html"]
    for n in names:
        shutil.copy(EXAMPLE, os.path.join(scratch, n))
    want = cli_json("report", "--format", "json", "--", EXAMPLE, cwd=scratch)
    os.chdir(scratch)
    for n in names:
        try:
            got = cutrace.report(n, progress=False)
        except Exception as e:  # noqa: BLE001
            check(f"cutrace.report({n!r}) reads the file {n!r} as a trace", False, repr(e))
        check(f"cutrace.report({n!r}) gives the example's devices",
              got["devices"] == want["devices"], got.get("trace"))
    check("no option was taken from a file name (no planted.html written)",
          not os.path.exists("planted.html"))
    r = cutrace.Report("--help", progress=False)
    check("cutrace.Report('--help').data is the trace's report",
          r.data["devices"] == want["devices"])
    page = r.html()
    check("cutrace.Report('--help').html() is the trace's page",
          page.startswith("<!DOCTYPE html>") and "cutrace report: --help" in page)
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        print("SKIPPED cutrace.tables('--help'): pandas or pyarrow is not installed")
    else:
        frames = cutrace.tables("--help", progress=False)
        check("cutrace.tables('--help') reads the trace's tables",
              len(frames.get("kernels", ())) == sum(d["kernels"] for d in want["devices"]),
              {k: len(v) for k, v in frames.items()})
    for n in ("--help", "-"):
        try:
            text = cutrace.dask.rank_summary(n)
            summary = json.loads(text)
        except Exception as e:  # noqa: BLE001
            check(f"cutrace.dask.rank_summary({n!r}) is the file's summary", False, repr(e))
        reference = json.loads(cutrace.dask.rank_summary(EXAMPLE))
        check(f"cutrace.dask.rank_summary({n!r}) is the file's summary",
              isinstance(summary, dict) and summary.pop("paths", None) != ["-"]
              and summary == {k: v for k, v in reference.items() if k != "paths"},
              text[:200])
        binary = os.environ["CUTRACE_BIN"]
        check(f"cutrace.dask.rank_summary({n!r}, binary=...) gives the same",
              cutrace.dask.rank_summary(n, binary=binary) == text)
    from cutrace._api import _flags

    check("an option value beginning with '-' stays that option's value",
          _flags({"steps": "-x", "limit": {"string_bytes": "1M"}, "top": [1, 2]})
          == ["--steps=-x", "--limit=string-bytes=1M", "--top=1", "--top=2"],
          _flags({"steps": "-x"}))
    check("an option that would be '--' is refused",
          isinstance(raises(lambda: _flags({"_": True})), TypeError))
    os.chdir(ROOT)


class InProcessClient:
    """What analyze_job needs of a distributed.Client, run here: map, then gather."""

    def map(self, fn: Any, items: List[str], **kw: Any) -> List[Any]:
        kw.pop("pure", None)
        return [fn(x, **kw) for x in items]

    def gather(self, futures: List[Any]) -> List[Any]:
        return futures


def summaries_dir(scratch: str) -> None:
    import cutrace.dask

    job = os.path.join(scratch, "job")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests/tools/gen_job.py"), job,
                    "--ranks", "3"], check=True, stdout=subprocess.DEVNULL)
    want = cli_json("report", "--format", "json", "--", job, cwd=scratch)
    client = InProcessClient()

    # Links planted at the summaries' names: one to a victim, one dangling.
    planted = os.path.join(scratch, "planted")
    os.mkdir(planted)
    victim = os.path.join(scratch, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    dangling_target = os.path.join(scratch, "created-through-a-link")
    os.symlink(victim, os.path.join(planted, "rank-summary-00000.json"))
    os.symlink(dangling_target, os.path.join(planted, "rank-summary-00001.json"))
    before = sorted(os.listdir(planted))
    err = raises(lambda: cutrace.dask.analyze_job([job], client, summaries=planted,
                                                  progress=False))
    with open(victim) as f:
        kept = f.read()
    check("a link planted in summaries=DIR leaves its victim untouched", kept == "precious\n",
          kept[:80])
    check("a dangling link planted there creates nothing at its target",
          not os.path.lexists(dangling_target))
    check("a taken summary name is a FileExistsError that names it",
          isinstance(err, FileExistsError) and "rank-summary-00000.json" in str(err), repr(err))
    check("nothing is left in DIR but what was planted (no temporary file)",
          sorted(os.listdir(planted)) == before, os.listdir(planted))
    check("the planted links are still links",
          all(os.path.islink(os.path.join(planted, n)) for n in before))

    # A new DIR: the summaries are new private files, the report the one-process report.
    fresh = os.path.join(scratch, "fresh", "summaries")
    got = cutrace.dask.analyze_job([job], client, summaries=fresh, progress=False)
    check("analyze_job(summaries=DIR) equals `cutrace report JOB`", got == want)
    files = sorted(os.listdir(fresh))
    check("DIR holds the summaries, one per rank, in job order",
          files == [f"rank-summary-{i:05d}.json" for i in range(len(want["ranks"]))], files)
    modes = {n: os.lstat(os.path.join(fresh, n)).st_mode for n in files}
    check("each summary is a regular file of mode 0600",
          all(stat.S_ISREG(m) and stat.S_IMODE(m) == 0o600 for m in modes.values()),
          {n: oct(m) for n, m in modes.items()})
    check("DIR was created with mode 0700", stat.S_IMODE(os.stat(fresh).st_mode) == 0o700,
          oct(os.stat(fresh).st_mode))
    traces = cutrace.dask.job_traces([job])
    with open(os.path.join(fresh, files[0])) as f:
        check("a kept summary is the map's output",
              f.read() == cutrace.dask.rank_summary(traces[0]))
    again = raises(lambda: cutrace.dask.analyze_job([job], client, summaries=fresh,
                                                    progress=False))
    check("a second run into the same DIR fails instead of replacing its summaries",
          isinstance(again, FileExistsError), repr(again))

    # Summaries swapped in DIR once written (another user who can write DIR, winning the race
    # before the reduce): the report is still the job's own.
    swapped_dir = os.path.join(scratch, "swapped")
    hostile = cutrace.dask.rank_summary(OTHER)
    real_run = cutrace.dask.run
    swaps: List[str] = []

    def swap_then_run(args: List[str], **kw: Any) -> str:
        if "--rank-summary" not in args and os.path.isdir(swapped_dir):
            for n in os.listdir(swapped_dir):
                tmp = os.path.join(swapped_dir, ".swap")
                with open(tmp, "w") as f:
                    f.write(hostile)
                os.replace(tmp, os.path.join(swapped_dir, n))
                swaps.append(n)
        return real_run(args, **kw)

    cutrace.dask.run = swap_then_run  # type: ignore[assignment]
    try:
        got = cutrace.dask.analyze_job([job], client, summaries=swapped_dir, progress=False)
    finally:
        cutrace.dask.run = real_run  # type: ignore[assignment]
    check("the stand-in swapped every kept summary before the reduce",
          len(swaps) == len(want["ranks"]), swaps)
    check("summaries swapped in DIR after they are written do not change the job report",
          got == want)


class Frames(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.iframes: List[Dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: List[Any]) -> None:
        if tag == "iframe":
            self.iframes.append({k: v or "" for k, v in attrs})


def notebook_view(scratch: str) -> None:
    import cutrace

    r = cutrace.Report(EXAMPLE, progress=False)
    shown = r._repr_html_()
    p = Frames()
    p.feed(shown)
    check("Report._repr_html_() is one iframe", len(p.iframes) == 1, shown[:200])
    frame = p.iframes[0]
    check("the iframe is sandboxed with allow-scripts only",
          frame.get("sandbox", None) is not None and frame["sandbox"].split() == ["allow-scripts"],
          frame.get("sandbox"))
    check("the iframe does not allow the notebook's origin",
          "allow-same-origin" not in shown.replace(frame["srcdoc"], "")
          and "allow-same-origin" not in frame["sandbox"])
    check("the iframe's srcdoc is the page", frame["srcdoc"] == r.html())
    browser_checks(scratch, shown, r.html())


def browser(scratch: str) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return "selenium is not installed"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        return "no chromium or chromedriver on PATH"
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--disable-background-networking", "--no-first-run",
              "--disable-component-update"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The browser's own temporary files (its profile's lock socket) go into scratch too.
    tmp = os.path.join(scratch, "browser-tmp")
    os.mkdir(tmp)
    service = Service(driver, env={**os.environ, "TMPDIR": tmp})
    return webdriver.Chrome(service=service, options=opts)


def wait_ready(d: Any, what: str) -> None:
    t0 = time.monotonic()
    while not d.execute_script("return document.body && document.body.getAttribute('data-ready')"):
        if time.monotonic() - t0 > 30:
            check(f"{what}: the page's script ran", False, "data-ready was never set")
        time.sleep(0.02)
    check(f"{what}: the page's script ran", True)


def browser_checks(scratch: str, shown: str, page: str) -> None:
    d = browser(scratch)
    if isinstance(d, str):
        print(f"SKIPPED the browser checks of the sandboxed iframe and the page's policy ({d})")
        return
    from selenium.webdriver.common.by import By

    try:
        host = os.path.join(scratch, "notebook.html")
        with open(host, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><head><title>notebook</title></head><body>"
                    + shown + "</body></html>")
        d.get_log("browser")
        d.get("file://" + host)
        d.switch_to.frame(d.find_element(By.TAG_NAME, "iframe"))
        wait_ready(d, "in the sandboxed iframe")
        check("the page runs in an opaque origin",
              d.execute_script("return window.origin") == "null",
              d.execute_script("return window.origin"))
        reach = d.execute_script(
            "try { return parent.document.title; } catch (e) { return 'blocked'; }")
        check("the page cannot reach the notebook's document", reach == "blocked", reach)
        rng = d.find_element(By.CSS_SELECTOR, ".tl-range")
        before = int(rng.get_attribute("data-to")) - int(rng.get_attribute("data-from"))
        d.find_element(By.CSS_SELECTOR, ".tl-in").click()
        after = int(rng.get_attribute("data-to")) - int(rng.get_attribute("data-from"))
        check("the timeline zooms in the sandboxed iframe", after < before * 0.3,
              (before, after))
        sort = d.execute_script("""
            var t = document.querySelector('table.sortable'), h = t.tHead.rows[0].cells;
            var col = Array.from(h).findIndex(function (c) {
              return c.getAttribute('data-type') === 'num'; });
            h[col].click();
            return [h[col].getAttribute('aria-sort'),
                    Array.from(t.tBodies[0].rows).map(function (r) {
                      return parseFloat(r.cells[col].getAttribute('data-sort')); })];""")
        check("a table sorts on a click in the sandboxed iframe",
              sort[0] == "descending" and sort[1] == sorted(sort[1], reverse=True), sort)
        color = d.execute_script(
            "return getComputedStyle(document.querySelector('footer')).color")
        check("the page's style sheet applies in the sandboxed iframe",
              color == "rgb(119, 119, 119)", color)
        errors = [e["message"] for e in d.get_log("browser")
                  if e.get("level") in ("SEVERE", "WARNING")]
        check("no console error or warning in the sandboxed iframe", not errors, errors)
        d.switch_to.default_content()

        # Markup that got into the page past escaping: the page's policy does not run it.
        marker = "document.documentElement.setAttribute('data-injected', '%s')"
        injected = ("<script>" + marker % "script" + "</script>"
                    + '<svg onload="' + marker % "handler" + '"></svg>'
                    + '<b style="display:block" id="injected-style">x</b>')
        hostile = os.path.join(scratch, "hostile.html")
        with open(hostile, "w", encoding="utf-8") as f:
            f.write(page.replace("<footer>", injected + "<footer>", 1))
        d.get("file://" + hostile)
        wait_ready(d, "with markup injected into the page")
        ran = d.execute_script("return document.documentElement.getAttribute('data-injected')")
        check("an injected script element and event handler attribute are not run", ran is None,
              ran)
        shown_as = d.execute_script(
            "return getComputedStyle(document.getElementById('injected-style')).display")
        check("an injected style attribute is not applied", shown_as == "inline", shown_as)
    finally:
        d.quit()


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.environ["CUTRACE_BIN"] = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="cutrace-hostile-") as scratch:
        try:
            names = os.path.join(scratch, "names")
            os.mkdir(names)
            option_like_paths(names)
            summaries_dir(scratch)
            notebook_view(scratch)
        finally:
            os.chdir(ROOT)
    print("python hostile-input checks: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
