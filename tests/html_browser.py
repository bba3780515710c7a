#!/usr/bin/env python3
"""The HTML report in a real browser: Debian's chromium, headless, driven through selenium and
chromium-driver. For each page (`cutrace report --html` of several fixtures, `cutrace diff
--html`): it loads with no console error, makes no network request (the performance log's
Network events name only the page itself), opens with the verdict, whose shares and gap counts
are the JSON `summary`'s, draws every chart (each SVG has drawn shapes with a
non-zero bounding box, each timeline lane has shapes), shows the busy %, gap counts and step
durations of `--format json`, zooms (the buttons and a drag change the visible time range) and
sorts a table on a click. The new plots answer with the JSON's numbers: the gap histogram's
bars are each bucket's idle time and its dots the gap count, each step is one bar (at most 60 px
wide) of the step's duration filled by each GPU's busy share, a trace with CUDA calls has host
lanes and a GPU with copies a copies lane, and each largest gap's table row and hovered tooltip
say what the host was doing (the JSON's `host`). The diff page opens with each GPU's wall time,
busy and idle split of both traces and their change, the diff JSON's. For a `cutrace profile` trace: the counters table is drawn, shows the
JSON report's values per kernel name (n/a for none) and sorts on a click. For a distributed job
(tests/tools/gen_job.py's, `cutrace report JOB --html`): the verdict is the first content, each of
its numbers and each rank's busy, compute, communication, exposed and wait shown equal the job
JSON's (`summary`, `ranks`), and the timeline has one drawn lane per rank. With `--critical-path`
(a trace with steps, and the job with PyTorch's stream waits): the timeline's first lane draws
the path, each step's path length (and a job's time waited for other ranks) shown is the JSON's,
and a click on a segment's row zooms the timeline to that segment. Exit 1 on any failure;
exit 77 with a SKIPPED line when no browser, driver or selenium is available.

usage: html_browser.py CUTRACE_BINARY
       html_browser.py --timing PAGE.html    (only: load the page, print when it was interactive)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS = [
    "examples/two_streams.json.gz",
    "tests/fixtures/kineto/profiler_steps.json.gz",
    "tests/fixtures/kineto/copy_overlap.json.gz",
    "tests/fixtures/native/multiproc",
    "tests/fixtures/kineto/hta_memory.json.gz",
    "tests/fixtures/kineto/tb_resnet50_2021_operators.json.gz",
    "tests/fixtures/native/two_streams",
]
# A real `cutrace profile --set basic` trace. Only its counters are checked here: the profiler
# replays kernels and CUPTI writes 0 timestamps for most of them, so its timeline spans 736 ns
# and a lane may have nothing to draw.
COUNTERS = "tests/fixtures/native/counters_basic"
DIFF = ("tests/fixtures/kineto/two_streams.json.gz", "tests/fixtures/kineto/profiler_steps.json.gz")


def skip(why):
    sys.stderr.write(f"SKIPPED: html_browser.py: {why}: the HTML report was NOT tested in a browser\n")
    sys.exit(77)


def browser(scratch):
    """Chromium through chromedriver, with its temporary profile and files in `scratch` (a
    directory the caller removes): it leaves `org.chromium.Chromium.*` behind in $TMPDIR."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("selenium is not installed (pip install selenium)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        skip("no chromium or chromedriver on PATH (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--disable-background-networking",
              "--no-first-run", "--disable-component-update"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(driver, env={**os.environ, "TMPDIR": scratch})
    return webdriver.Chrome(service=service, options=opts)


def short_ns(ns):
    """cutrace's durations in a sentence (crates/cutrace-export/src/text/verdict.rs): three
    significant digits at most."""
    if ns < 1000:
        return f"{ns} ns"
    v, unit = (ns / 1e3, "µs") if ns < 1_000_000 else (ns / 1e6, "ms") if ns < 1_000_000_000 else (ns / 1e9, "s")
    digits = 0 if v >= 100 else 1 if v >= 10 else 2
    return f"{v:.{digits}f} {unit}"


def fmt_ns(ns):
    """cutrace's durations (crates/cutrace-analysis/src/units.rs): three decimals, half up."""
    if ns < 1_000:
        return f"{ns} ns"
    div, unit = (1_000, "µs") if ns < 1_000_000 else (1_000_000, "ms") if ns < 1_000_000_000 else (1_000_000_000, "s")
    milli = (ns * 1000 + div // 2) // div
    return f"{milli // 1000}.{milli % 1000:03} {unit}"


class Page:
    def __init__(self, d, path):
        self.d, self.path, self.fails, self.saw_page = d, path, [], False
        d.get_log("browser")
        d.get_log("performance")
        t0 = time.monotonic()
        d.get("file://" + path)
        while not d.execute_script("return document.body && document.body.getAttribute('data-ready')"):
            if time.monotonic() - t0 > 30:
                self.fail("the page's script never finished")
                break
            time.sleep(0.02)
        self.ready_ms = d.execute_script("return +document.body.getAttribute('data-ready')")

    def fail(self, what):
        self.fails.append(what)

    def check_verdict(self, summary):
        """The verdict is the page's first section, and says each GPU's busy, compute,
        communication and idle shares (one decimal) and gap count as the JSON `summary`."""
        got = self.d.execute_script("""
            var first = document.querySelector('section'), v = document.getElementById('verdict');
            return {first: first && first.id, text: v ? v.innerText : ''};""")
        if got["first"] != "verdict":
            self.fail(f"the first section is {got['first']!r}, not the verdict")
        text = got["text"]
        for dv in summary["devices"]:
            want = [f"GPU {dv['device']}: busy {dv['busy_pct']:.1f} % of",
                    f"(compute {dv['compute_pct']:.1f} %, communication {dv['communication_pct']:.1f} %"]
            if dv["copy_ns"]:
                want.append(f"; copies {short_ns(dv['copy_ns'])}")
            if dv["idle_ns"]:
                want.append(f"; idle {dv['idle_pct']:.1f} % in {dv['gaps']} gap")
            for w in want:
                if w not in text:
                    self.fail(f"the verdict lacks {w!r} (summary of GPU {dv['device']}): {text!r}")
        if not summary["devices"]:
            self.fail("no GPU in the JSON summary to check the verdict against")

    def check_console_and_network(self):
        for e in self.d.get_log("browser"):
            if e.get("level") in ("SEVERE", "WARNING"):
                self.fail(f"console: {e.get('message')}")
        url = "file://" + self.path
        for e in self.d.get_log("performance"):
            m = json.loads(e["message"])["message"]
            if m.get("method") == "Network.requestWillBeSent":
                u = m["params"]["request"]["url"]
                if u == url:
                    self.saw_page = True
                else:
                    self.fail(f"network request: {u}")

    def check_logged(self):
        # The network check means something only if the log saw the page's own load.
        if not self.saw_page:
            self.fail("the performance log did not record the page's own load")

    def check_charts(self):
        svgs = self.d.execute_script("""
            return Array.from(document.querySelectorAll('svg')).map(function (s) {
              var shapes = Array.from(s.querySelectorAll('rect,circle,path,line')).filter(function (e) {
                var b = e.getBoundingClientRect(); return b.width > 0 || b.height > 0; });
              var b = s.getBoundingClientRect();
              return {cls: s.getAttribute('class'), w: b.width, h: b.height, shapes: shapes.length,
                      lanes: Array.from(s.querySelectorAll('g.lane')).map(function (g) {
                        return g.querySelectorAll('rect').length; })};
            });""")
        if not svgs:
            self.fail("no chart at all")
        for s in svgs:
            if s["w"] <= 0 or s["h"] <= 0 or s["shapes"] == 0:
                self.fail(f"blank chart {s}")
            if "tl-svg" in (s["cls"] or "") and (not s["lanes"] or 0 in s["lanes"]):
                self.fail(f"a timeline lane has nothing drawn: {s['lanes']}")
        return svgs

    def checks(self):
        return self.d.execute_script("""
            return Array.from(document.querySelectorAll('[data-check]')).map(function (e) {
              var b = e.getBoundingClientRect();
              return {what: e.getAttribute('data-check'), device: e.getAttribute('data-device'),
                      step: e.getAttribute('data-step'), pool: e.getAttribute('data-pool'),
                      bucket: e.getAttribute('data-bucket'), value: e.getAttribute('data-value'),
                      w: b.width, h: b.height, text: e.textContent}; });""")

    def check_gap_context(self, rep):
        """Each largest gap's row in the table and its tooltip on the timeline (hovered) say its
        reading and what the host was doing, with the JSON's durations."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        want = [gap_context(g) for dv in rep["devices"] for g in dv["largest_gaps"]]
        rows = self.d.execute_script("""
            var t = document.querySelector('table.gaps');
            return t ? Array.from(t.tBodies[0].rows).map(function (r) {
              return Array.from(r.querySelector('td.context').childNodes).filter(function (n) {
                return n.nodeType === 3; }).map(function (n) { return n.textContent; }); }) : [];""")
        if rows != want:
            self.fail(f"the largest gaps' host context: page {rows[:2]}, JSON {want[:2]}")
        marks = self.d.find_elements(By.CSS_SELECTOR, "#tl .gaphit, .timeline .gaphit")
        if want and not marks:
            self.fail("no gap to hover on the timeline")
        for m in marks[:3]:
            n = int(m.get_attribute("data-gap"))
            self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", m)
            ActionChains(self.d).move_to_element(m).perform()
            tip = self.d.execute_script("""
                var t = arguments[0].closest('.timeline').querySelector('.tip');
                return t && !t.hidden && t.getBoundingClientRect().height > 0 ?
                  Array.from(t.children).map(function (c) { return c.textContent; }) : null;""", m)
            if tip is None or tip[1:] != want[n]:
                self.fail(f"gap {n}'s tooltip: page {tip}, JSON {want[n]}")
            ActionChains(self.d).move_to_element(self.d.find_element(By.TAG_NAME, "h1")).perform()
        return len(want)

    def check_zoom(self):
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        tls = self.d.find_elements(By.CSS_SELECTOR, ".timeline")
        if not tls:
            self.fail("no timeline")
        for tl in tls:
            rng = tl.find_element(By.CSS_SELECTOR, ".tl-range")

            def view():
                return int(rng.get_attribute("data-from")), int(rng.get_attribute("data-to")), rng.text

            a = view()
            tl.find_element(By.CSS_SELECTOR, ".tl-in").click()
            b = view()
            if not (b[1] - b[0] < (a[1] - a[0]) * 0.3 and b[2] != a[2]):
                self.fail(f"zoom in did not narrow the time range: {a} -> {b}")
            tl.find_element(By.CSS_SELECTOR, ".tl-reset").click()
            svg = tl.find_element(By.CSS_SELECTOR, ".tl-svg")
            # A drag needs its element in the viewport, wherever the page's layout put it.
            self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", svg)
            w = svg.size["width"]
            ActionChains(self.d).move_to_element_with_offset(svg, int(w * 0.1), 5).click_and_hold() \
                .move_by_offset(int(w * 0.2), 0).release().perform()
            c = view()
            if not (c[1] - c[0] < (a[1] - a[0]) * 0.5 and c[0] > a[0]):
                self.fail(f"dragging across a range did not zoom to it: {a} -> {c}")

    def check_sort(self):
        heads = self.d.execute_script("""
            var t = document.querySelector('table.sortable.kernels') || document.querySelector('table.sortable');
            if (!t) return null;
            var col = Array.from(t.tHead.rows[0].cells).findIndex(function (h) { return h.getAttribute('data-type') === 'num'; });
            t.tHead.rows[0].cells[col].click();
            return Array.from(t.tBodies[0].rows).map(function (r) { return parseFloat(r.cells[col].getAttribute('data-sort')); });""")
        if heads is not None and heads != sorted(heads, reverse=True):
            self.fail(f"a click did not sort the column: {heads}")


    def check_counters(self, c):
        """The counters table: drawn, one row per kernel name with the JSON's values (n/a for
        none), and a click on a metric's head sorts by it."""
        rows = self.d.execute_script("""
            var t = document.querySelector('table.sortable.counters');
            if (!t) return null;
            return Array.from(t.tBodies[0].rows).map(function (r) {
              var b = r.getBoundingClientRect();
              return {h: b.height, cells: Array.from(r.cells).map(function (c) { return c.textContent; })}; });""")
        if rows is None:
            self.fail("no counters table")
            return
        if len(rows) != len(c["by_kernel"]):
            self.fail(f"counters table: {len(rows)} rows, JSON {len(c['by_kernel'])}")
        for r, k in zip(rows, c["by_kernel"]):
            want = [counter_value(v) for v in k["values"]]
            if r["h"] <= 0 or r["cells"][3:] != want:
                self.fail(f"counters of {k['name']}: page {r['cells'][3:]}, JSON {want}")
        keys = self.d.execute_script("""
            var t = document.querySelector('table.sortable.counters');
            t.tHead.rows[0].cells[3].click();
            return Array.from(t.tBodies[0].rows).map(function (r) {
              var v = r.cells[3].getAttribute('data-sort'); return v === null ? null : parseFloat(v); });""")
        nums = [k for k in keys if k is not None]
        if nums != sorted(nums, reverse=True) or keys[:len(nums)] != nums:
            self.fail(f"a click did not sort the counters column: {keys}")


def gap_context(g):
    """What the host was doing in a gap, line by line, as the page says it from the JSON's
    `host` (crates/cutrace-export/src/html/report.rs, gap_context)."""
    h, lines = g.get("host"), []
    if not h:
        return lines
    nl = h.get("next_launch")
    if nl:
        r = nl["returned_into_gap_ns"]
        when = (f"{fmt_ns(-r)} before the gap began" if r < 0 else
                f"{fmt_ns(r)} into the gap, after the kernel had started" if r > g["length_ns"] else
                f"{fmt_ns(r)} into the gap")
        lines.append(f"the next kernel's {nl['name']} returned {when}")

    def spans(v):
        return ", ".join(f"{x['name']} {fmt_ns(x['ns'])}" for x in v)
    if h["calls"]:
        lines.append(f"recorded API calls covered {fmt_ns(h['in_calls_ns'])} of it: {spans(h['calls'])}")
    elif nl:
        lines.append("no recorded API call ran in it")
    if h["ranges"]:
        lines.append(f"in ranges: {spans(h['ranges'])}")
    if h.get("cpu_ops"):
        lines.append("in CPU ops: " + ", ".join(f"{o['name']} {fmt_ns(o['in_gap_ns'])} of it" for o in h["cpu_ops"]))
    if g.get("copy_ns"):
        lines.append(f"copies ran {fmt_ns(g['copy_ns'])} of it")
    return lines


def counter_value(v):
    """The text report's counter values: integers without decimals, others with 3, n/a for none."""
    if v is None:
        return "n/a"
    if v == int(v) and abs(v) < 1e15:
        return f"{v:.0f}"
    return f"{v:.3f}"


def cutrace(binary, *args):
    return subprocess.run([binary, *args], cwd=ROOT, check=True, capture_output=True).stdout


def check_report(d, binary, tmp, rel):
    path = os.path.join(tmp, os.path.basename(rel.rstrip("/")) + ".html")
    cutrace(binary, "report", rel, "--html", path)
    rep = json.loads(cutrace(binary, "report", rel, "--format", "json"))
    p = Page(d, path)
    p.check_console_and_network()
    p.check_verdict(rep["summary"])
    svgs = p.check_charts()
    marks = p.checks()
    seen = {(c["what"], c["device"] or c["step"] or c["pool"]): c for c in marks
            if c["bucket"] is None and c["what"] != "step_busy_pct"}
    want = check_new_plots(p, rep, marks)
    for dev in rep["devices"]:
        key = str(dev["device"])
        c = seen.get(("busy_pct", key))
        if not c or abs(float(c["text"].rstrip(" %")) - dev["busy_pct"]) > 0.005 + 1e-9:
            p.fail(f"GPU {key} busy %: page {c and c['text']}, JSON {dev['busy_pct']}")
        c = seen.get(("gaps", key))
        if not c or int(c["text"]) != dev["gaps"]:
            p.fail(f"GPU {key} gaps: page {c and c['text']}, JSON {dev['gaps']}")
        want += 2
        # Compute and communication apart, as the JSON summary has them.
        sv = next(v for v in rep["summary"]["devices"] if v["device"] == dev["device"])
        for k in ("compute_ns", "communication_ns"):
            c = seen.get((k, key))
            if not c or c["text"] != fmt_ns(sv[k]) or int(c["value"]) != sv[k]:
                p.fail(f"GPU {key} {k}: page {c and c['text']}, JSON {fmt_ns(sv[k])}")
            want += 1
        for k in ("before_launch", "after_launch", "unknown") if "idle_split" in dev else ():
            c = seen.get((f"gaps_{k}", key))
            if not c or int(c["text"]) != dev["idle_split"][f"gaps_{k}"]:
                p.fail(f"GPU {key} gaps_{k}: page {c and c['text']}")
            want += 1
    steps = rep.get("steps", {})
    for s in steps.get("steps", []):
        c = seen.get(("step_duration_ns", str(s["index"])))
        if not c or c["text"] != fmt_ns(s["duration_ns"]) or int(c["value"]) != s["duration_ns"]:
            p.fail(f"step {s['index']}: page {c and c['text']}, JSON {fmt_ns(s['duration_ns'])}")
        want += 1
    for what in ("min", "median", "max") if steps else ():
        c = seen.get((f"step_duration_{what}_ns", None))
        ns = steps[f"duration_{what}_ns"]
        if not c or c["text"] != fmt_ns(ns):
            p.fail(f"step duration {what}: page {c and c['text']}, JSON {fmt_ns(ns)}")
        want += 1
    pools = rep.get("memory", {}).get("pools", [])
    for i, pool in enumerate(pools):
        if pool["peak"] is None:
            continue
        c = seen.get(("memory_peak_bytes", str(i)))
        if not c or int(c["value"]) != pool["peak"]["bytes"]:
            p.fail(f"memory pool {i} peak: page {c and c['value']}, JSON {pool['peak']['bytes']}")
        want += 1
    if pools and not any("memory" in (s["cls"] or "") for s in svgs):
        p.fail("no memory plot")
    if len(marks) != want or want == 0:
        p.fail(f"{len(marks)} numbers marked on the page, {want} checked")
    if rep.get("steps") and not any("steps" in (s["cls"] or "") for s in svgs):
        p.fail("no step chart")
    gaps = p.check_gap_context(rep)
    p.check_zoom()
    p.check_sort()
    p.check_console_and_network()
    p.check_logged()
    return p, f"{want} numbers, {len(svgs)} charts, {gaps} gaps' host context"


def check_new_plots(p, rep, marks):
    """The gap histogram (idle time per bucket as bars, the count as dots: the JSON's), the step
    bars (one per step, the JSON's duration, filled by each GPU's busy share) and the host and
    copies lanes, each drawn. Returns the numbers checked."""
    n = 0
    by = {}
    for c in marks:
        by.setdefault(c["what"], []).append(c)
    for dv in rep["devices"]:
        dev, hist = str(dv["device"]), dv["gap_histogram"]
        used = [i for i, b in enumerate(hist) if b["count"]]
        for what, field in (("gap_bucket_count", "count"), ("gap_bucket_total_ns", "total_ns")):
            got = sorted((int(c["bucket"]), int(c["value"]), c["w"] > 0 and c["h"] > 0)
                         for c in by.get(what, []) if c["device"] == dev)
            exp = [(i, hist[i][field], True) for i in range(used[0], used[-1] + 1)
                   if what == "gap_bucket_count" or hist[i]["total_ns"]] if used else []
            if got != exp:
                p.fail(f"GPU {dev} gap histogram {what}: page {got}, JSON {exp}")
            n += len(got)
    steps = rep.get("steps", {}).get("steps", [])
    bars = {c["step"]: c for c in by.get("step_bar_ns", [])}
    fills = {(c["step"], c["device"]): c for c in by.get("step_busy_pct", [])}
    for s in steps if len(steps) <= 400 else ():
        b = bars.get(str(s["index"]))
        if not b or int(b["value"]) != s["duration_ns"] or not (0 < b["w"] <= 60) or b["h"] <= 0:
            p.fail(f"step {s['index']}'s bar: {b}, JSON {s['duration_ns']}")
        n += 1
        for d in s["devices"]:
            f = fills.get((str(s["index"]), str(d["device"])))
            if not f or float(f["value"]) != d["busy_pct"] or (b and abs(f["h"] / b["h"] * 100 - d["busy_pct"]) > 1.5):
                p.fail(f"step {s['index']} GPU {d['device']} busy fill: {f}, JSON {d['busy_pct']}")
            n += 1
    lanes = p.d.execute_script("""
        return Array.from(document.querySelectorAll('#tl g.lane[data-role]')).map(function (g) {
          return {role: g.getAttribute('data-role'), device: g.getAttribute('data-device'),
                  rects: Array.from(g.querySelectorAll('rect')).filter(function (r) {
                    return r.getBoundingClientRect().height > 0; }).length}; });""")
    hosts = [l for l in lanes if l["role"] == "host"]
    if (rep["trace"]["api_calls"] > 0) != bool(hosts) or any(not l["rects"] for l in hosts):
        p.fail(f"host lanes {hosts} for a trace of {rep['trace']['api_calls']} API calls")
    for dv in rep["devices"]:
        if dv["copy_busy_ns"]:
            c = [l for l in lanes if l["role"] == "copies" and l["device"] == str(dv["device"])]
            if not c or not c[0]["rects"]:
                p.fail(f"GPU {dv['device']} copies for {dv['copy_busy_ns']} ns, lane {c}")
    return n


def check_job(d, binary, tmp):
    """A 4-rank job of gen_job.py: the verdict first, its numbers and the ranks' the JSON's, a lane
    per rank."""
    job = os.path.join(tmp, "job")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests/tools/gen_job.py"), job,
                    "--ranks", "4", "--steps", "3", "--seed", "5"], check=True, capture_output=True)
    path = os.path.join(tmp, "job.html")
    cutrace(binary, "report", job, "--html", path)
    rep = json.loads(cutrace(binary, "report", job, "--format", "json"))
    p = Page(d, path)
    p.check_console_and_network()
    first = d.execute_script("""
        var v = document.getElementById('verdict'), h = document.querySelector('h2');
        var s = document.querySelector('section');
        return {first: s && s.id, above: !!(v && h && v.getBoundingClientRect().bottom <= h.getBoundingClientRect().top),
                text: v ? v.innerText : ''};""")
    if first["first"] != "verdict" or not first["above"]:
        p.fail(f"the verdict is not the page's first content: {first}")
    ranks = {str(r["rank"]): r for r in rep["ranks"]}
    n, per_rank = 0, {}
    for c in d.execute_script("""
            return Array.from(document.querySelectorAll('[data-check]')).map(function (e) {
              return {what: e.getAttribute('data-check'), rank: e.getAttribute('data-rank'),
                      step: e.getAttribute('data-step'), value: e.getAttribute('data-value'),
                      text: e.textContent, shown: e.getBoundingClientRect().height > 0}; });"""):
        what = c["what"]
        if what.startswith("summary."):
            want = rep
            for k in what.split("."):
                want = want[k]
            text = (f"{want:.1f} %" if what.endswith("pct") else
                    short_ns(want) if what.endswith("ns") else str(want))
            if c["text"] != text or float(c["value"]) != want or not c["shown"]:
                p.fail(f"verdict {what}: page {c['text']!r} ({c['value']}), JSON {text!r} ({want})")
            if c["text"] not in first["text"]:
                p.fail(f"verdict {what}: {c['text']!r} is not in the verdict's text")
        elif c["rank"] is not None:
            want = ranks[c["rank"]][what]
            if c["text"] != fmt_ns(want) or int(c["value"]) != want:
                p.fail(f"rank {c['rank']} {what}: page {c['text']!r}, JSON {fmt_ns(want)!r}")
            per_rank[c["rank"]] = per_rank.get(c["rank"], 0) + 1
        elif c["step"] is not None:
            step = rep["steps"]["steps"][int(c["step"]) - 1]
            want = step[what[len("step_"):]]
            if int(c["value"]) != want:
                p.fail(f"step {c['step']} {what}: page {c['value']}, JSON {want}")
        n += 1
    if sorted(per_rank) != sorted(ranks) or set(per_rank.values()) != {5}:
        p.fail(f"each rank's five figures are not all shown: {per_rank}")
    for k in ("busy_pct", "compute_pct", "comm_pct", "idle_pct"):
        if f"{rep['summary'][k]:.1f} %" not in first["text"]:
            p.fail(f"the verdict does not say summary.{k}: {first['text']!r}")
    lanes = d.execute_script("""
        return Array.from(document.querySelectorAll('.tl-svg g.lane')).map(function (g) {
          return {rank: g.getAttribute('data-rank'), rects: g.querySelectorAll('rect').length,
                  comm: g.querySelectorAll('rect.comm').length}; });""")
    if [l["rank"] for l in lanes] != sorted(ranks, key=int) or any(not l["rects"] or not l["comm"] for l in lanes):
        p.fail(f"not one drawn lane per rank with communication in it: {lanes}")
    p.check_charts()
    p.check_zoom()
    p.check_sort()
    p.check_console_and_network()
    p.check_logged()
    return p, f"{n} numbers, {len(lanes)} rank lanes"


def check_counter_report(d, binary, tmp):
    path = os.path.join(tmp, "counters.html")
    cutrace(binary, "report", COUNTERS, "--html", path)
    c = json.loads(cutrace(binary, "report", COUNTERS, "--format", "json"))["counters"]
    p = Page(d, path)
    p.check_console_and_network()
    p.check_counters(c)
    p.check_console_and_network()
    p.check_logged()
    return p, f"counters of {len(c['by_kernel'])} kernel names x {len(c['metrics'])} metrics"


def check_diff(d, binary, tmp):
    path = os.path.join(tmp, "diff.html")
    cutrace(binary, "diff", *DIFF, "--html", path)
    dj = json.loads(cutrace(binary, "diff", *DIFF, "--format", "json"))
    p = Page(d, path)
    p.check_console_and_network()
    svgs = p.check_charts()
    seen = {(c["what"], c["device"]): c for c in p.checks()}
    n = 0
    for g in dj["devices"]:
        for side in ("base", "new"):
            if g[side] is None:
                continue
            c = seen.get((f"{side}_busy_pct", str(g["device"])))
            if not c or abs(float(c["text"].rstrip(" %")) - g[side]["busy_pct"]) > 0.005 + 1e-9:
                p.fail(f"diff GPU {g['device']} {side} busy %: page {c and c['text']}")
            c = seen.get((f"{side}_gaps", str(g["device"])))
            if not c or int(c["text"]) != g[side]["gaps"]:
                p.fail(f"diff GPU {g['device']} {side} gaps: page {c and c['text']}")
            n += 2
    n += check_headline(p, dj)
    if len(d.find_elements("css selector", ".timeline")) != 2:
        p.fail("the diff page does not show both timelines")
    p.check_zoom()
    p.check_console_and_network()
    p.check_logged()
    return p, f"{n} diff numbers, {len(svgs)} charts"


def check_headline(p, dj):
    """The diff page opens with the headline: per GPU the wall time, busy and idle split of both
    traces and their change, the diff JSON's, and their bars drawn."""
    got = p.d.execute_script("""
        var h = document.getElementById('headline'), c = document.getElementById('caveats');
        var first = document.querySelector('h2');
        return {first: !!h && h.contains(first), before: !!(h && c && (h.compareDocumentPosition(c) & 4)),
                bars: h ? Array.from(h.querySelectorAll('svg rect')).filter(function (r) {
                  return r.getBoundingClientRect().width > 0; }).length : 0,
                marks: h ? Array.from(h.querySelectorAll('[data-check]')).map(function (e) {
                  return [e.getAttribute('data-check'), e.getAttribute('data-device'),
                          e.getAttribute('data-value'), e.textContent]; }) : []};""")
    if not got["first"] or not got["before"] or not got["bars"]:
        p.fail(f"the diff page does not open with the headline: {got['first']}, {got['before']}, {got['bars']} bars")
    marks = {(m[0], m[1]): m for m in got["marks"]}
    n = 0
    for g in dj["devices"]:
        dev = str(g["device"])
        for key in ("window_ns", "busy_ns", "idle_ns", "idle_before_launch_ns", "idle_after_launch_ns",
                    "idle_unknown_ns"):
            vals = {side: (g[side] or {}).get(key) for side in ("base", "new")}
            for side, v in vals.items():
                if v is None:
                    continue
                m = marks.get((f"{side}_{key}", dev))
                if not m or int(m[2]) != v or m[3] != fmt_ns(v):
                    p.fail(f"headline GPU {dev} {side} {key}: page {m}, JSON {v}")
                n += 1
            if None not in vals.values():
                m = marks.get((f"change_{key}", dev))
                ch = vals["new"] - vals["base"]
                if not m or int(m[2]) != ch or not m[3].startswith(("−" if ch < 0 else "+") + fmt_ns(abs(ch))):
                    p.fail(f"headline GPU {dev} change of {key}: page {m}, JSON {ch}")
                n += 1
    if len(got["marks"]) != n + 4 * len([g for g in dj["devices"] if g["base"] and g["new"]]):
        p.fail(f"{len(got['marks'])} numbers in the headline, {n} checked beside busy % and gaps")
    return n


def check_critical_path(d, binary, tmp):
    """`--critical-path` pages of a trace with steps and of gen_job.py's job with stream waits:
    the path's lane is the timeline's first and drawn, the marked path lengths are the JSON's,
    and a click on each of the first segments' rows shows that segment on the timeline."""
    job = os.path.join(tmp, "job-path")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests/tools/gen_job.py"), job, "--ranks", "4",
                    "--steps", "3", "--seed", "7", "--syncs"], check=True, capture_output=True)
    fails, told = [], []
    for name, src in (("trace", "tests/fixtures/kineto/profiler_steps.json.gz"), ("job", job)):
        path = os.path.join(tmp, f"path-{name}.html")
        cutrace(binary, "report", src, "--critical-path", "--html", path)
        cp = json.loads(cutrace(binary, "report", src, "--critical-path", "--format", "json"))["critical_path"]
        p = Page(d, path)
        p.check_console_and_network()
        lane = d.execute_script("""
            var g = document.querySelector('.tl-svg g.lane');
            return g && {role: g.getAttribute('data-role'),
                         drawn: Array.from(g.querySelectorAll('rect')).filter(function (r) {
                           var b = r.getBoundingClientRect(); return b.width > 0 && b.height > 0; }).length};""")
        if not lane or lane["role"] != "path" or not lane["drawn"]:
            p.fail(f"{name}: the timeline's first lane is not a drawn critical path: {lane}")
        n = 0
        for c in p.checks():
            if c["what"] == "cp_step_length_ns":
                want = cp["steps"][int(c["step"]) - 1]["length_ns"]
                if int(c["value"]) != want or c["text"] != fmt_ns(want):
                    p.fail(f"{name}: step {c['step']} path: page {c['text']!r}, JSON {fmt_ns(want)!r}")
                n += 1
        if n != len(cp["steps"]) or not n:
            p.fail(f"{name}: {n} step path lengths shown, {len(cp['steps'])} in the JSON")
        rows = d.find_elements("css selector", "table.cp-segments tbody tr.zoom")
        if not rows:
            p.fail(f"{name}: no segment rows")
        for r in rows[:3]:
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})", r)
            r.click()
            a, b = int(r.get_attribute("data-from")), int(r.get_attribute("data-to"))
            got = d.execute_script("""
                var t = document.getElementById(arguments[0]).querySelector('.tl-range');
                return [+t.getAttribute('data-from'), +t.getAttribute('data-to')];""",
                                   r.get_attribute("data-timeline"))
            # The view holds the segment (5 % either side, or the shortest view around it).
            if not (got[0] <= a and got[1] >= b and got[1] - got[0] < max(4 * (b - a), 20000)):
                p.fail(f"{name}: a click on the segment {a}–{b} ns showed {got}")
        p.check_console_and_network()
        p.check_logged()
        fails += p.fails
        told.append(f"{name}: {n} path lengths, {len(rows)} segment rows")
    p.fails = fails
    return p, "; ".join(told)


def main():
    with tempfile.TemporaryDirectory(prefix="cutrace-chromium-") as scratch:
        return run(scratch)


def run(scratch):
    if len(sys.argv) == 3 and sys.argv[1] == "--timing":
        d = browser(scratch)
        try:
            p = Page(d, os.path.abspath(sys.argv[2]))
            p.check_console_and_network()
            p.check_logged()
            zoom_ms = d.execute_script("""
                var b = document.querySelector('.tl-in'); if (!b) return null;
                var t = performance.now(); b.click(); return performance.now() - t;""")
            print(f"{sys.argv[2]}: interactive {p.ready_ms} ms after navigation began; "
                  f"a zoom-in redraws in {zoom_ms and round(zoom_ms, 1)} ms; "
                  f"{len(p.fails)} failures {p.fails[:3]}")
            return 1 if p.fails else 0
        finally:
            d.quit()
    binary = os.path.abspath(sys.argv[1])
    d = browser(scratch)
    bad = 0
    try:
        with tempfile.TemporaryDirectory(prefix="cutrace-html-") as tmp:
            results = [check_report(d, binary, tmp, r) for r in REPORTS]
            results.append(check_diff(d, binary, tmp))
            results.append(check_counter_report(d, binary, tmp))
            results.append(check_job(d, binary, tmp))
            results.append(check_critical_path(d, binary, tmp))
            names = REPORTS + ["diff " + " ".join(DIFF), COUNTERS, "job (tests/tools/gen_job.py, 4 ranks)",
                               "--critical-path (a trace with steps, a job with stream waits)"]
            for (p, what), name in zip(results, names):
                status = "ok" if not p.fails else "FAIL"
                print(f"{status}: {name}: {what}, interactive in {p.ready_ms} ms")
                for f in p.fails:
                    print(f"    {f}")
                bad += bool(p.fails)
    finally:
        d.quit()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
