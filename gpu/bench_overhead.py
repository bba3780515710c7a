#!/usr/bin/env python3
"""Tracing overhead side by side: alternating repetitions of each variant, medians and spread.

usage: bench_overhead.py cpp|torch OUT.json [--reps 7]
  env: CUTRACE (binary), WORKLOADS (gpu/workloads binary), SAMPLE_LIB (NVIDIA's
       cupti_trace_injection library, optional), NSYS (Nsight Systems collector, optional),
       LAUNCH_CBIDS (runtime callback ids for the lowered floor, optional), BENCH_DEVBUF
       (device buffer sizes in MiB to compare, optional)
The C++ workload reports µs per launch of empty kernels (median of 5 batches of 100,000 in one
process); the PyTorch one µs per eager op and ms per training step (medians of batches, see
bench_torch.py). Beside the wall time, the launching thread's CPU time per launch/op: tracing
costs CPU on that thread, and CPU time is less disturbed by other tenants than wall time.
Ratios are to the untraced median of the same run, and per repetition (variant / untraced of the
same repetition). Every peer runs on every workload it can trace.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

kind, out_path = sys.argv[1], sys.argv[2]
reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
# The run's end: no repetition starts that would end after it (a device call has a hard limit).
max_seconds = float(sys.argv[sys.argv.index("--max-seconds") + 1]) if "--max-seconds" in sys.argv else 1e9
t_start = time.monotonic()
CUTRACE = os.environ["CUTRACE"]
tmp = tempfile.mkdtemp(prefix="ctbench")


def variants():
    if kind == "cpp":
        w = os.environ["WORKLOADS"]
        base = [w, "tiny", "100000", "--batches", os.environ.get("BENCH_BATCHES", "5"), "--json"]
    else:
        base = ["python3", os.path.join(os.path.dirname(__file__), "bench_torch.py"), "--json"]
    rec = lambda extra=(): [CUTRACE, "record", *extra, "-o", "{dir}", "--"]
    v = {
        "untraced": ([], {}),
        "cutrace": (rec(), {}),
        "floor (same kinds, records discarded)": (rec(["--discard"]), {}),
    }
    v["cutrace without the driver kind"] = (rec(["--kinds", "kernel,runtime,memcpy,memset,sync,nvtx,overhead"]), {})
    v["floor without the driver kind"] = (rec(["--discard", "--kinds", "kernel,runtime,memcpy,memset,sync,nvtx,overhead"]), {})
    # CUPTI's own device buffer size, asked for explicitly (CUTRACE_DEVICE_BUFFER_BYTES=0): the
    # same as "cutrace" and "floor" since cutrace keeps CUPTI's default (runs 8–10 measured larger
    # buffers: no gain); kept for comparing with runs whose binary asked for 64 MiB (run 9).
    v["cutrace, CUPTI's default device buffer"] = (rec(), {"CUTRACE_DEVICE_BUFFER_BYTES": "0"})
    v["floor, CUPTI's default device buffer"] = (rec(["--discard"]), {"CUTRACE_DEVICE_BUFFER_BYTES": "0"})
    # BENCH_DEVBUF="16,64": cutrace with these device buffer sizes (MiB), to weigh speed
    # against the memory they hold (phase devmem).
    for mib in filter(None, os.environ.get("BENCH_DEVBUF", "").split(",")):
        v[f"cutrace, {int(mib)} MiB device buffer"] = (rec(), {"CUTRACE_DEVICE_BUFFER_BYTES": str(int(mib) << 20)})
    # Kinds cut down to what an nsys `-t cuda` timeline shows (no driver records, NVTX or
    # CUPTI overhead records): is the gap to the collector in the kinds?
    v["cutrace, kinds kernel,runtime,memcpy,memset,sync"] = (rec(["--kinds", "kernel,runtime,memcpy,memset,sync"]), {})
    v["cutrace --api lean, kinds kernel,runtime,memcpy,memset,sync"] = (rec(["--api", "lean", "--kinds", "kernel,runtime,memcpy,memset,sync"]), {})
    # API records without the state queries (cudaGetDevice & co.; see `cutrace record --help`):
    # the default from run 16 on; through run 15 every call was recorded (`--api all`).
    v["cutrace --api lean"] = (rec(["--api", "lean"]), {})
    v["floor --api lean"] = (rec(["--discard", "--api", "lean"]), {})
    v["cutrace --api all"] = (rec(["--api", "all"]), {})
    v["floor --api all"] = (rec(["--discard", "--api", "all"]), {})
    if kind == "cpp":
        v["cutrace without the runtime kind"] = (rec(["--kinds", "kernel,driver,memcpy,memset,sync,nvtx,overhead"]), {})
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
    if os.environ.get("SAMPLE_LIB"):
        v["NVIDIA cupti_trace_injection sample"] = ([], {"CUDA_INJECTION64_PATH": os.environ["SAMPLE_LIB"]})
    if os.environ.get("NSYS"):
        # CUDA tracing only, no CPU sampling or context switches: the collector's cheapest way to
        # get what cutrace records.
        v["Nsight Systems collector (-t cuda, no sampling)"] = ([os.environ["NSYS"], "profile", "-t", "cuda", "-s", "none", "--cpuctxsw=none", "--force-overwrite=true", "-o", "{dir}/nsys"], {})
        # nsys skips "non-critical" CUDA APIs unless told otherwise (--cuda-trace-all-apis,
        # default false): this is the variant that records every call, as `cutrace --api all`.
        v["Nsight Systems collector, all APIs"] = ([os.environ["NSYS"], "profile", "-t", "cuda", "-s", "none", "--cpuctxsw=none", "--cuda-trace-all-apis=true", "--force-overwrite=true", "-o", "{dir}/nsys"], {})
        # Is the gap to the collector in CUPTI's build? nsys ships its own libcupti beside it.
        import glob
        libs = sorted(glob.glob(os.path.join(os.path.dirname(os.environ["NSYS"]), "libcupti.so.13*")))
        if libs:
            v["cutrace with the collector's libcupti"] = (rec(), {"CUTRACE_CUPTI_LIB": libs[0]})
    # Does the writer's periodic cuptiActivityFlushAll (default every 1 s) contend with launches?
    v["cutrace, flush every 100 ms"] = (rec(), {"CUTRACE_FLUSH_PERIOD_MS": "100"})
    v["cutrace, flush every 10 s"] = (rec(), {"CUTRACE_FLUSH_PERIOD_MS": "10000"})
    if kind == "torch":
        v["torch.profiler (CPU+CUDA)"] = ([], {"_profiler": "1"})
    only = os.environ.get("BENCH_ONLY")
    if only:
        keep = [x.strip() for x in only.split(";") if x.strip()]
        # Exact names; a name ending in '*' matches by prefix.
        match = lambda k, p: k == p or (p.endswith("*") and k.startswith(p[:-1]))
        # A name that matches nothing (a typo, or a peer missing on this machine) would quietly
        # waste a device call: refuse before starting.
        missing = [p for p in keep if not any(match(k, p) for k in v)]
        if missing:
            sys.exit(f"BENCH_ONLY names no variant for: {missing}; variants here: {list(v)}")
        v = {k: x for k, x in v.items() if any(match(k, p) for p in keep)}
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
    cmd.append(js)
    if prof:
        cmd.append("--profiler")
    # The sample prints every record on stdout: send it to a file, not a pipe.
    t0 = time.monotonic()
    with open(os.path.join(d, "stdout"), "w") as so:
        p = subprocess.run(cmd, env=env, stdout=so, stderr=subprocess.PIPE, text=True, timeout=150)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{name}: rc={p.returncode}: {p.stderr[-2000:]}")
    r = json.load(open(js))
    keep = ["us_per_launch", "cpu_us_per_launch"] if kind == "cpp" else ["eager_us_per_op", "eager_cpu_us_per_op", "train_ms_per_step"]
    res = {k: r[k] for k in keep if k in r}
    # The whole process, start-up and the tool's shutdown included: what a repetition costs.
    res["process_s"] = round(wall, 2)
    sz = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".cutrace"))
    if sz:
        res["trace_bytes"] = sz
    shutil.rmtree(d, ignore_errors=True)
    return res


def steal_ticks():
    # Time the hypervisor gave this VM's CPUs to someone else (the 'steal' column of /proc/stat).
    try:
        return int(open("/proc/stat").readline().split()[8])
    except Exception:
        return None


base, v = variants()
steal0 = steal_ticks()
samples = {name: [] for name in v}
errors = {}
metrics = ["us_per_launch", "cpu_us_per_launch"] if kind == "cpp" else ["eager_us_per_op", "eager_cpu_us_per_op", "train_ms_per_step"]


def summarize():
    steal1 = steal_ticks()
    summary = {}
    for name, s in samples.items():
        if not s:
            continue
        row = {"n": len(s)}
        for m in metrics:
            xs = [x[m] for x in s if m in x]
            if not xs:
                continue
            row[m] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        ps = [x["process_s"] for x in s if "process_s" in x]
        if ps:
            row["process_s_median"] = statistics.median(ps)
        tb = [x["trace_bytes"] for x in s if "trace_bytes" in x]
        if tb:
            row["trace_bytes_median"] = statistics.median(tb)
        summary[name] = row
    for name, row in summary.items():
        for m in [m for m in metrics if m in row]:
            u = summary.get("untraced", {}).get(m, {}).get("median")
            f = summary.get("floor (same kinds, records discarded)", {}).get(m, {}).get("median")
            if u:
                row[m]["ratio_to_untraced"] = row[m]["median"] / u
            if f:
                row[m]["ratio_to_floor"] = row[m]["median"] / f
    # Ratios within each repetition (variant / untraced of the same repetition): the machine drifts
    # between repetitions, so these are steadier than ratios of medians.
    for name, row in summary.items():
        for m in [m for m in metrics if m in row]:
            pairs = [(x[m], u[m]) for x, u in zip(samples[name], samples.get("untraced", [])) if m in x and m in u]
            if pairs:
                r = [a / b for a, b in pairs]
                row[m]["per_rep_ratio_median"] = statistics.median(r)
                row[m]["per_rep_ratio_min"] = min(r)
                row[m]["per_rep_ratio_max"] = max(r)
    json.dump({"kind": kind, "reps": reps, "reps_done": min((len(x) for x in samples.values()), default=0), "seconds": round(time.monotonic() - t_start, 1), "steal_ticks": None if steal0 is None or steal1 is None else steal1 - steal0, "summary": summary, "samples": samples, "errors": errors}, open(out_path, "w"), indent=1)
    return summary


last_rep = 0.0
for i in range(reps):
    # No repetition is started that would end after --max-seconds (judged by the last one): a
    # repetition cut short is wasted, since only complete ones pair up.
    if time.monotonic() - t_start + last_rep > max_seconds:
        break
    rep_t0 = time.monotonic()
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
    summarize()  # partial results survive a run cut short
    last_rep = time.monotonic() - rep_t0

summary = summarize()
for name, row in summary.items():
    cells = []
    for m in [m for m in metrics if m in row]:
        x = row[m]
        cells.append(f"{m.split('_per')[0]}={x['median']:.3f} x{x.get('ratio_to_untraced', 0):.3f} rep-x{x.get('per_rep_ratio_median', 0):.3f} [{x.get('per_rep_ratio_min', 0):.2f}..{x.get('per_rep_ratio_max', 0):.2f}]")
    if "process_s_median" in row:
        cells.append(f"process={row['process_s_median']:.1f}s")
    print(f"{kind:5} {name[:44]:44} " + " ".join(cells))
for name, e in errors.items():
    print(f"{kind:5} {name[:44]:44} FAILED: {e[-300:]}")
