#!/usr/bin/env python3
"""Tracing overhead side by side: alternating repetitions of each variant, medians and spread.

usage: bench_overhead.py cpp|torch OUT.json [--reps 7]
  env: CUTRACE (binary), WORKLOADS (gpu/workloads binary), SAMPLE_LIB (NVIDIA's
       cupti_trace_injection library, optional), NSYS (Nsight Systems collector, optional),
       LAUNCH_CBIDS (runtime callback ids for the lowered floor, optional)
The C++ workload reports µs per launch of 100,000 empty kernels; the PyTorch one µs per eager
op and ms per training step. Ratios are to the untraced median of the same run.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

kind, out_path = sys.argv[1], sys.argv[2]
reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
CUTRACE = os.environ["CUTRACE"]
tmp = tempfile.mkdtemp(prefix="ctbench")


def variants():
    if kind == "cpp":
        w = os.environ["WORKLOADS"]
        base = [w, "tiny", "100000", "--json"]
    else:
        base = ["python3", os.path.join(os.path.dirname(__file__), "bench_torch.py")]
    rec = lambda extra=(): [CUTRACE, "record", *extra, "-o", "{dir}", "--"]
    v = {
        "untraced": ([], {}),
        "cutrace": (rec(), {}),
        "floor (same kinds, records discarded)": (rec(["--discard"]), {}),
    }
    if kind == "cpp":
        v["cutrace without the driver kind"] = (rec(["--kinds", "kernel,runtime,memcpy,memset,sync,nvtx,overhead"]), {})
    cb = os.environ.get("LAUNCH_CBIDS")
    if cb and os.environ.get("BENCH_LAUNCH_ONLY"):
        v["cutrace, runtime records for launch/copy calls only"] = (rec(), {"CUTRACE_RUNTIME_CBIDS": cb})
        v["floor, runtime records for launch/copy calls only"] = (rec(["--discard"]), {"CUTRACE_RUNTIME_CBIDS": cb})
    if kind == "cpp" and os.environ.get("BENCH_KIND_SUBSETS"):
        d = ["kernel", "runtime", "driver", "memcpy", "memset", "sync", "nvtx", "overhead"]
        for label, ks in [
            ("kernel", ["kernel"]),
            ("kernel,runtime", ["kernel", "runtime"]),
            ("default - overhead", [k for k in d if k != "overhead"]),
            ("default - sync", [k for k in d if k != "sync"]),
            ("default - nvtx", [k for k in d if k != "nvtx"]),
        ]:
            v[f"floor, kinds: {label}"] = (rec(["--discard", "--kinds", ",".join(ks)]), {})
        v["floor, no cuptiSubscribe"] = (rec(["--discard"]), {"CUTRACE_SUBSCRIBE": "0"})
    if kind == "cpp":
        if os.environ.get("SAMPLE_LIB"):
            v["NVIDIA cupti_trace_injection sample"] = ([], {"CUDA_INJECTION64_PATH": os.environ["SAMPLE_LIB"]})
        if os.environ.get("NSYS"):
            v["Nsight Systems collector (-t cuda)"] = ([os.environ["NSYS"], "profile", "-t", "cuda", "--force-overwrite=true", "-o", "{dir}/nsys"], {})
    else:
        v["torch.profiler (CPU+CUDA)"] = ([], {"_profiler": "1"})
    return base, v


def run_one(base, prefix, env_extra, i, name):
    d = os.path.join(tmp, f"{i}-{abs(hash(name))}")
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ)
    env.pop("CUDA_INJECTION64_PATH", None)
    prof = env_extra.pop("_profiler", None) if "_profiler" in env_extra else None
    env.update({k: v for k, v in env_extra.items()})
    if prof:
        env_extra["_profiler"] = prof
    cmd = [c.replace("{dir}", d) for c in prefix] + list(base)
    if os.environ.get("BENCH_CPUS"):
        # Same CPUs for every variant: the machine's run-to-run spread is mostly scheduling.
        cmd = ["taskset", "-c", os.environ["BENCH_CPUS"]] + cmd
    js = os.path.join(d, "out.json")
    if kind == "cpp":
        cmd.append(js)
    elif prof:
        cmd.append("--profiler")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: rc={p.returncode}: {p.stderr[-2000:]}")
    if kind == "cpp":
        r = json.load(open(js))
        res = {"us_per_launch": r["us_per_launch"]}
    else:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    sz = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".cutrace"))
    if sz:
        res["trace_bytes"] = sz
    shutil.rmtree(d, ignore_errors=True)
    return res


base, v = variants()
samples = {name: [] for name in v}
errors = {}
for i in range(reps):
    order = list(v.items())
    if i % 2:
        order.reverse()
    for name, (prefix, env_extra) in order:
        if name in errors:
            continue
        try:
            samples[name].append(run_one(base, prefix, dict(env_extra), i, name))
        except Exception as e:  # a peer that fails is reported, not fatal
            errors[name] = str(e)[-600:]

metrics = ["us_per_launch"] if kind == "cpp" else ["eager_us_per_op", "train_ms_per_step"]
summary = {}
for name, s in samples.items():
    if not s:
        continue
    row = {"n": len(s)}
    for m in metrics:
        xs = [x[m] for x in s]
        row[m] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    tb = [x["trace_bytes"] for x in s if "trace_bytes" in x]
    if tb:
        row["trace_bytes_median"] = statistics.median(tb)
    summary[name] = row
for name, row in summary.items():
    for m in metrics:
        u = summary.get("untraced", {}).get(m, {}).get("median")
        f = summary.get("floor (same kinds, records discarded)", {}).get(m, {}).get("median")
        if u:
            row[m]["ratio_to_untraced"] = row[m]["median"] / u
        if f:
            row[m]["ratio_to_floor"] = row[m]["median"] / f
# Ratios within each repetition (variant / untraced of the same repetition): the machine drifts
# between repetitions, so these are steadier than ratios of medians.
for name, row in summary.items():
    for m in metrics:
        pairs = [(x[m], u[m]) for x, u in zip(samples[name], samples.get("untraced", [])) if m in x and m in u]
        if pairs:
            r = [a / b for a, b in pairs]
            row[m]["per_rep_ratio_median"] = statistics.median(r)
            row[m]["per_rep_ratio_min"] = min(r)
            row[m]["per_rep_ratio_max"] = max(r)
json.dump({"kind": kind, "reps": reps, "summary": summary, "samples": samples, "errors": errors}, open(out_path, "w"), indent=1)
for name, row in summary.items():
    cells = []
    for m in metrics:
        x = row[m]
        cells.append(f"{m}={x['median']:.3f} [{x['min']:.3f}..{x['max']:.3f}] x{x.get('ratio_to_untraced', 0):.3f} rep-x{x.get('per_rep_ratio_median', 0):.3f}")
    print(f"{kind:5} {name:55} " + "  ".join(cells))
for name, e in errors.items():
    print(f"{kind:5} {name:55} FAILED: {e[-300:]}")
