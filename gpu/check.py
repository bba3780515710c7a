#!/usr/bin/env python3
"""Compares a cutrace trace (converted to CSV by `cutrace convert --csv`) with what the workload
itself says it launched (its --json output). Prints one JSON line of results; exit 1 on failure.

usage: check.py EXPECTED.json CSV_DIR TRACE_DIR [--tolerance 0.02] [--no-api-names] [--expect-orphans]
  --no-api-names: skip the per-name API call counts (for traces without the runtime kind, whose
                  API records are the driver's), keep everything else, orphans included.
  --expect-orphans: the experiment with driver records alone: every kernel launched through the
                  runtime is expected to be an orphan (such a launch leaves no driver record:
                  H200 runs 4 and 8 saw no cuLaunchKernel); passes only if that is still so.
"""
import csv
import json
import os
import sys


def rows(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def union_ns(iv):
    iv = sorted(iv)
    total, cs, ce = 0, None, None
    for s, e in iv:
        if cs is None:
            cs, ce = s, e
        elif s > ce:
            total += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    if cs is not None:
        total += ce - cs
    return total


def norm_api(name):
    n = name.lstrip("_")
    if "LaunchKernel" in n:
        return "cudaLaunchKernel"
    for suffix in ("_ptsz", "_ptds"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    return n


def main():
    exp_path, csv_dir, trace_dir = sys.argv[1:4]
    tol = 0.02
    if "--tolerance" in sys.argv:
        tol = float(sys.argv[sys.argv.index("--tolerance") + 1])
    exp = json.load(open(exp_path))
    meta = json.load(open(os.path.join(csv_dir, "meta.json")))
    k = rows(csv_dir, "kernels.csv")
    a = rows(csv_dir, "api_calls.csv")
    mc = rows(csv_dir, "memcpys.csv")
    ms = rows(csv_dir, "memsets.csv")
    rg = rows(csv_dir, "ranges.csv")
    mk = rows(csv_dir, "marks.csv")
    fails = []
    res = {"mode": exp["mode"]}

    def eq(name, got, want):
        res[name] = got
        if got != want:
            fails.append(f"{name}: trace {got} != program {want}")

    eq("kernels", len(k), exp["kernels"])
    eq("memcpys", len(mc), exp["memcpys"])
    eq("memsets", len(ms), exp["memsets"])
    if exp.get("nvtx_ranges"):
        eq("nvtx_ranges", len(rg), exp["nvtx_ranges"])
        eq("nvtx_marks", len(mk), exp["nvtx_marks"])
        names = sorted({r["name"] for r in rg})
        res["nvtx_names"] = names
    api_corr = {int(r["correlation_id"]) for r in a}
    orphans = sum(1 for r in k + mc + ms if int(r["correlation_id"]) not in api_corr)
    eq("orphans", orphans, len(k) + len(mc) + len(ms) if "--expect-orphans" in sys.argv else 0)
    dup = len(k) - len({(r["correlation_id"], r["start_ns"], r["stream"]) for r in k})
    eq("duplicate_kernels", dup, 0)
    counts = {}
    for r in a:
        n = norm_api(r["name"])
        counts[n] = counts.get(n, 0) + 1
    res["api_total"] = len(a)
    if "--no-api-names" in sys.argv:
        res["api_names"] = dict(sorted(counts.items(), key=lambda x: -x[1])[:8])
    else:
        for name, want in exp["api"].items():
            eq("api:" + name, counts.get(name, 0), want)
    # Kernels launched by each launch call: graph launches carry several.
    launch_corr = {int(r["correlation_id"]) for r in a if norm_api(r["name"]) in ("cudaLaunchKernel", "cudaGraphLaunch")}
    res["kernels_joined_to_launch_calls"] = sum(1 for r in k if int(r["correlation_id"]) in launch_corr)
    eq("complete", meta["complete"], True)
    eq("dropped_by_cupti", meta["dropped_by_cupti"], 0)
    eq("dropped_by_recorder", meta["dropped_by_recorder"], 0)
    # Per-stream busy time against the program's own cudaEvent timing.
    by_stream = {}
    for r in k:
        by_stream.setdefault(int(r["stream"]), []).append((int(r["start_ns"]), int(r["end_ns"])))
    streams = []
    for s in exp.get("streams", []):
        # Seen on CUDA 13.0 / driver 580: CUPTI's streamId is cudaStreamGetId() - 1.
        sid = None
        for cand in (s["stream_id"] - 1, s["stream_id"]):
            if len(by_stream.get(cand, [])) == s["kernels"]:
                sid = cand
                break
        if sid is None:
            cands = [x for x, iv in by_stream.items() if len(iv) == s["kernels"]]
            sid = cands[0] if len(cands) == 1 else None
        if sid is None:
            fails.append(f"stream {s['index']}: not found in the trace")
            continue
        iv = by_stream[sid]
        busy = union_ns(iv)
        span = max(e for _, e in iv) - min(b for b, _ in iv)
        ev = s["event_ms"] * 1e6
        err = abs(busy - ev) / ev if ev else 0.0
        streams.append({"index": s["index"], "stream": sid, "cupti_stream_id_plus_1_equals_cudaStreamGetId": sid + 1 == s["stream_id"],
                        "kernels": len(iv), "busy_ms": busy / 1e6, "span_ms": span / 1e6,
                        "event_ms": s["event_ms"], "rel_err": round(err, 5)})
        if len(iv) != s["kernels"]:
            fails.append(f"stream {s['index']}: {len(iv)} kernels != {s['kernels']}")
        if err > tol:
            fails.append(f"stream {s['index']}: busy {busy/1e6:.3f} ms vs cudaEvent {s['event_ms']:.3f} ms ({err:.2%})")
    if streams:
        res["streams"] = streams
        res["max_stream_rel_err"] = max(s["rel_err"] for s in streams)
    size = sum(os.path.getsize(os.path.join(trace_dir, f)) for f in os.listdir(trace_dir) if f.endswith(".cutrace"))
    res["trace_bytes"] = size
    if k:
        res["bytes_per_kernel"] = round(size / len(k), 2)
    res["ok"] = not fails
    res["fails"] = fails
    print(json.dumps(res))
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
