#!/usr/bin/env python3
"""Counts kernels whose launch call lies inside the NVTX range "steps" of a converted trace."""
import csv
import json
import sys

d = sys.argv[1]
rd = lambda n: list(csv.DictReader(open(f"{d}/{n}")))
ranges = [r for r in rd("ranges.csv") if r["name"] == "steps"]
api = rd("api_calls.csv")
k = rd("kernels.csv")
if not ranges:
    print(json.dumps({"error": "no NVTX range 'steps' in the trace"}))
    sys.exit(1)
s, e = int(ranges[0]["start_ns"]), int(ranges[0]["end_ns"])
inside = {int(a["correlation_id"]) for a in api if s <= int(a["start_ns"]) <= e}
corr = {int(a["correlation_id"]) for a in api}
by_corr = {int(a["correlation_id"]): a["kind"] + ":" + a["name"] for a in api}
print(json.dumps({
    "cutrace_kernels_in_steps": sum(1 for r in k if int(r["correlation_id"]) in inside),
    "kernels_total": len(k),
    "orphans": sum(1 for r in k if int(r["correlation_id"]) not in corr),
    "api_records": len(api),
    "launch_api_in_steps": dict(__import__("collections").Counter(
        by_corr[int(r["correlation_id"])] for r in k if int(r["correlation_id"]) in inside)),
}))
