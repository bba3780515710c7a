"""Kineto import throughput, one thread against all threads, alternating runs.

usage: python3 bench/import_bench.py TRACE.json [REPS]
Runs target/release/examples/bench_import (build it with
`cargo build --release -p cutrace-trace --example bench_import`) REPS times (default 7) with
CUTRACE_IMPORT_THREADS=1 and with the default thread count, alternating, and prints the medians
with [min..max] of MB/s and peak RSS.
"""
import os
import re
import statistics
import subprocess
import sys

trace = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 7
exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "examples", "bench_import")
variants = {"1 thread": {"CUTRACE_IMPORT_THREADS": "1"}, f"{os.cpu_count()} threads (default)": {}}
res = {k: [] for k in variants}
for _ in range(reps):
    for name, env in variants.items():
        out = subprocess.run([exe, trace, "1"], env=dict(os.environ, **env), capture_output=True, text=True, check=True).stdout
        m = re.search(r"= (\d+) MB/s, (\d+) kernels, peak RSS (\d+) MiB", out)
        res[name].append((int(m.group(1)), int(m.group(3))))
size = os.path.getsize(trace) / 1e6
print(f"{os.path.basename(trace)}: {size:.0f} MB, {reps} alternating runs")
print("| import | MB/s median [min..max] | peak RSS (MiB) |")
print("|---|---|---|")
for name, rows in res.items():
    mbs = [r[0] for r in rows]
    print(f"| {name} | {statistics.median(mbs):.0f} [{min(mbs)}..{max(mbs)}] | {statistics.median(r[1] for r in rows):.0f} |")
