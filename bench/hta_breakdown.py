"""Runs Holistic Trace Analysis' temporal breakdown on one Kineto trace and prints JSON.

usage: python3 bench/hta_breakdown.py TRACE.json[.gz]
Set HTA_DISABLE_NS_ROUNDING=1 to stop HTA rounding timestamps to whole microseconds.
Prints {"idle_us", "compute_us", "non_compute_us", "kernel_time_us", "seconds"} for rank 0.
"""
import json
import os
import sys
import tempfile
import time

trace = os.path.abspath(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    os.symlink(trace, os.path.join(d, os.path.basename(trace)))
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # imported inside the timing: it is part of the cost

    analysis = TraceAnalysis(trace_dir=d)
    df = analysis.get_temporal_breakdown(visualize=False)
    seconds = time.perf_counter() - t0
row = df.iloc[0]
print(json.dumps({
    "idle_us": float(row["idle_time(us)"]),
    "compute_us": float(row["compute_time(us)"]),
    "non_compute_us": float(row["non_compute_time(us)"]),
    "kernel_time_us": float(row["kernel_time(us)"]),
    "seconds": seconds,
    "ns_rounding_disabled": os.environ.get("HTA_DISABLE_NS_ROUNDING") == "1",
}))
