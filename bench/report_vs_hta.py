"""`cutrace report --format json` against HTA's temporal breakdown on one Kineto trace, side by side.

usage: python3 bench/report_vs_hta.py TRACE.json [REPS] [HTA_PYTHON]

Alternates the runs (cutrace, HTA default, HTA with HTA_DISABLE_NS_ROUNDING=1), REPS times each
(default 3), measuring wall time and the peak RSS of each child (os.wait4). Prints a Markdown
table of medians and ratios, and how far HTA's idle time is from the exact answer in ns.
The exact answer is cutrace's; tests/oracle/kineto_oracle.py checks it independently.
"""
import json
import os
import statistics
import subprocess
import sys
import time

trace = sys.argv[1]
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
    return wall, ru.ru_maxrss / 1024, out  # MiB (ru_maxrss is KiB on Linux)


variants = {
    "cutrace report --format json": ([cutrace, "report", "--format", "json", trace], None),
    "HTA get_temporal_breakdown (default)": ([hta_py, os.path.join(here, "hta_breakdown.py"), trace],
                                             dict(os.environ, HTA_DISABLE_NS_ROUNDING="0")),
    "HTA get_temporal_breakdown (HTA_DISABLE_NS_ROUNDING=1)": (
        [hta_py, os.path.join(here, "hta_breakdown.py"), trace], dict(os.environ, HTA_DISABLE_NS_ROUNDING="1")),
}
results = {k: [] for k in variants}
outputs = {}
for r in range(reps):
    for name, (cmd, env) in variants.items():
        wall, rss, out = run(cmd, env)
        results[name].append((wall, rss))
        outputs[name] = out
        print(f"rep {r + 1}/{reps} {name}: {wall:.2f} s, {rss:.0f} MiB", file=sys.stderr, flush=True)

ours = json.loads(outputs["cutrace report --format json"])
dev = ours["devices"][0]
base_wall = statistics.median(w for w, _ in results["cutrace report --format json"])
base_rss = statistics.median(m for _, m in results["cutrace report --format json"])
size_mb = os.path.getsize(trace) / 1e6
print(f"\ntrace: {os.path.basename(trace)}, {size_mb:.0f} MB, {dev['kernels']} kernels; medians of {reps} alternating runs\n")
print("| tool | wall (s) | peak RSS (MiB) | wall ÷ cutrace | RSS ÷ cutrace | idle (ns) | idle − exact (ns) |")
print("|---|---|---|---|---|---|---|")
for name in variants:
    wall = statistics.median(w for w, _ in results[name])
    rss = statistics.median(m for _, m in results[name])
    if name.startswith("cutrace"):
        idle = dev["idle_ns"]
    else:
        idle = json.loads(outputs[name])["idle_us"] * 1000
    print(f"| {name} | {wall:.2f} | {rss:.0f} | {wall / base_wall:.1f}× | {rss / base_rss:.1f}× | "
          f"{idle:.1f} | {idle - dev['idle_ns']:+.1f} |")
