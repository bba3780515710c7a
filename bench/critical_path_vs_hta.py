"""`cutrace report --critical-path` against HTA's critical_path_analysis on one Kineto trace.

usage: python3 bench/critical_path_vs_hta.py TRACE.json[.gz] [REPS] [HTA_PYTHON]

Both over the whole trace (HTA: annotation "", instance_id None; cutrace: its window path),
alternating, REPS times each (default 3), in separate processes: wall time (including the
interpreter's or process's start) and peak RSS of each child (os.wait4). Prints a Markdown
table of medians and ratios, and each tool's path length.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

trace = os.path.abspath(sys.argv[1])
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
hta_py = sys.argv[3] if len(sys.argv) > 3 else sys.executable
here = os.path.dirname(os.path.abspath(__file__))
cutrace = os.environ.get("CUTRACE", os.path.join(here, "..", "target", "release", "cutrace"))


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"{cmd} failed with status {status}")
    return wall, ru.ru_maxrss / 1024, out


with tempfile.TemporaryDirectory() as d:
    os.symlink(trace, os.path.join(d, os.path.basename(trace)))
    variants = {
        "cutrace report --critical-path --format json": [cutrace, "report", "--critical-path", "--format", "json", trace],
        "HTA critical_path_analysis": [hta_py, os.path.join(here, "hta_critical_path.py"), d, "", "none"],
    }
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")
    results = {k: [] for k in variants}
    lengths = {}
    for _ in range(reps):
        for name, cmd in variants.items():
            wall, rss, out = run(cmd, env)
            results[name].append((wall, rss))
            j = json.loads(out)
            lengths[name] = (j["critical_path"]["window"]["length_ns"] / 1000 if "critical_path" in j
                             else j["length_us"])

base_w = statistics.median(w for w, _ in results[next(iter(variants))])
base_r = statistics.median(r for _, r in results[next(iter(variants))])
print("| tool | wall (s), median | peak RSS (MiB), median | wall ÷ cutrace | RSS ÷ cutrace | path length (µs) |")
print("|---|---|---|---|---|---|")
for name, rs in results.items():
    w = statistics.median(x for x, _ in rs)
    r = statistics.median(x for _, x in rs)
    print(f"| {name} | {w:.2f} | {r:.0f} | {w / base_w:.1f}× | {r / base_r:.1f}× | {lengths[name]:,.0f} |")
