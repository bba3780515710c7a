"""Runs Holistic Trace Analysis' critical-path analysis on one trace and prints what it found.

usage: python3 bench/hta_critical_path.py TRACE_DIR ANNOTATION INSTANCE [RANK]

ANNOTATION and INSTANCE are HTA's `critical_path_analysis(annotation=…, instance_id=…)`: the
INSTANCE-th host annotation whose name holds ANNOTATION (`""` and `none`: the whole trace).
Prints one JSON object: the span HTA clipped to (`span_start_us`, `span_end_us`), the path's
length (`length_us`: the sum of the weights of its edges, HTA's own figure), its length
by HTA's `bound_by` classes (`by_bound_us`) and by edge type (`by_edge_type_us`), the edges
on the path, and the seconds HTA took. Times are HTA's (microseconds, rounded down to whole
microseconds unless HTA_DISABLE_NS_ROUNDING=1).
"""
import json
import logging
import warnings
import sys
import time

logging.disable(logging.WARNING)
warnings.filterwarnings("ignore")

from hta.trace_analysis import TraceAnalysis  # noqa: E402

trace_dir, annotation, instance = sys.argv[1], sys.argv[2], sys.argv[3]
rank = int(sys.argv[4]) if len(sys.argv) > 4 else 0
instance_id = None if instance == "none" else int(instance)

t0 = time.perf_counter()
ta = TraceAnalysis(trace_dir=trace_dir)
t1 = time.perf_counter()
cp, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance_id)
t2 = time.perf_counter()
if not ok:
    raise SystemExit("HTA's critical path analysis failed")
edf = cp.get_critical_path_breakdown()
df = cp.trace_df
out = {
    "span_start_us": float(df.ts.min()),
    "span_end_us": float((df.ts + df.dur).max()),
    "length_us": float(edf.duration.sum()),
    "by_bound_us": {k: float(v) for k, v in edf.groupby("bound_by").duration.sum().items()},
    "by_edge_type_us": {str(k): float(v) for k, v in edf.groupby("type").duration.sum().items()},
    "edges": int(len(edf)),
    "load_s": t1 - t0,
    "analysis_s": t2 - t1,
}
print(json.dumps(out, indent=1, sort_keys=True))
