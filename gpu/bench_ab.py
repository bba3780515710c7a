#!/usr/bin/env python3
"""Record configurations compared inside one process (cutrace's bench hook), for effects of a
few percent that the process-to-process spread hides.

usage: bench_ab.py cpp|torch OUT.json [--rounds R] [--discard] CONFIG...
  CONFIG is "KINDS|API" (cutrace's kind names, comma-separated; API all, lean or launches); the
  first is the reference. "|all" with no kinds turns every record off (CUPTI still loaded).
  env: CUTRACE (binary), WORKLOADS (gpu/workloads binary, cpp only)
  internal: bench_ab.py --torch-child OUT.json ROUNDS CONFIG... (run under cutrace record)
Each round times every configuration once (100,000 launches, or 20,000 eager ops), the order
reversed every other round; the ratio to the reference is taken within each round.
Before timing, a short run of the same workload switches between the configurations (and back to
the first) and checks the trace phase by phase (check_phases): every launch keeps its API record
where runtime calls are recorded, and a runtime and a driver state query (cudaGetLastError or
cudaGetDevice; cuKernelGetName) are recorded under `all` and gone under `lean`/`launches`. If CUPTI did not switch cleanly, the timings would compare
something else (it did not, with an allow-list: see crates/cutrace-inject/src/bench_hook.rs).
"""
import csv
import ctypes
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile


def torch_child(out, rounds, configs, ops=20000):
    import time

    import torch

    hook = ctypes.CDLL(None).cutrace_bench_set
    hook.argtypes, hook.restype = [ctypes.c_char_p, ctypes.c_char_p], ctypes.c_int
    t = torch.zeros(256, device="cuda")
    for _ in range(500):
        t = t + 1.0
    torch.cuda.synchronize()
    us = [[] for _ in configs]
    for rnd in range(rounds):
        order = range(len(configs)) if rnd % 2 == 0 else reversed(range(len(configs)))
        for c in order:
            kinds, _, api = configs[c].partition("|")
            torch.cuda.synchronize()
            rc = hook(kinds.encode(), (api or "all").encode())
            if rc < 0:
                sys.exit(f"cutrace_bench_set({configs[c]!r}) = {rc}")
            if rc > 0 and rnd == 0:
                print(f"bench_ab: warning: {configs[c]!r} only approximated (see the trace's notes)", file=sys.stderr)
            for _ in range(1000):
                t = t + 1.0
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(ops):
                t = t + 1.0
            torch.cuda.synchronize()
            us[c].append((time.perf_counter() - t0) / ops * 1e6)
    json.dump({"ab": {"configs": configs, "rounds": rounds, "us_per_op": us}}, open(out, "w"))


def ci(xs, n=4000):
    r = random.Random(1)
    m = sorted(statistics.median(r.choices(xs, k=len(xs))) for _ in range(n))
    return m[int(0.025 * n)], m[int(0.975 * n) - 1]


def main():
    if sys.argv[1] == "--torch-child":
        ops = int(os.environ.get("AB_TORCH_OPS", "20000"))
        return torch_child(sys.argv[2], int(sys.argv[3]), sys.argv[4:], ops)
    kind, out = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    rounds = 15
    discard = []
    configs = []
    i = 0
    while i < len(args):
        if args[i] == "--rounds":
            rounds = int(args[i + 1])
            i += 2
            continue
        if args[i] == "--discard":
            discard = ["--discard"]
        elif args[i].startswith("--"):
            sys.exit(f"unknown option {args[i]}")
        else:
            configs.append(args[i])
        i += 1
    if len(configs) < 2:
        sys.exit("give at least two configurations: the reference first")
    d = tempfile.mkdtemp(prefix="ctab")
    try:
        run(kind, out, rounds, discard, configs, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# Per workload: kernels per phase of the check run, and the state queries it makes that `lean`
# leaves out (runtime, driver). tiny_ab calls cudaGetLastError after each batch; an eager op
# calls cudaGetDevice and cuKernelGetName.
CHECK = {
    "cpp": {"n": 1000, "per_phase": 3000, "queries": ("cudaGetLastError", "cuKernelGetName")},
    "torch": {"n": 1000, "per_phase": 2000, "queries": ("cudaGetDevice", "cuKernelGetName")},
}


def validate(kind, configs, d, env):
    """Switches through the configurations (and back to the first) in a short run of the
    workload, then checks its trace phase by phase (check_phases): (ok, detail)."""
    seq = configs + [configs[0]]
    # A configuration that records API calls but no kernels has no burst of kernels to find its
    # phase by: its records would be counted in the next phase.
    blind = [c for c in seq if "kernel" not in c.partition("|")[0].split(",") and {"runtime", "driver"} & set(c.partition("|")[0].split(","))]
    if blind:
        return False, f"cannot check {blind[0]!r}: it records API calls but no kernels"
    spec = CHECK[kind]
    tr = os.path.join(d, "check")
    js = os.path.join(d, "check.json")
    # Every call recorded at the start (as the timed run), so the first switch leaves `all`.
    rec = [os.environ["CUTRACE"], "record", "-q", "--api", "all", "-o", tr, "--"]
    if kind == "cpp":
        cmd = rec + [os.environ["WORKLOADS"], "tiny_ab", str(spec["n"]), "1", *seq, "--json", js]
    else:
        cmd = rec + ["python3", os.path.abspath(__file__), "--torch-child", js, "1", *seq]
        env = dict(env, AB_TORCH_OPS=str(spec["n"]))
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        return False, f"check run failed: rc={p.returncode}: {p.stderr[-800:]}"
    csvd = os.path.join(d, "check.csv")
    c = subprocess.run([os.environ["CUTRACE"], "convert", tr, "--csv", csvd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if c.returncode != 0:
        return False, f"convert failed: {c.stderr[-800:]}"
    api = [(int(r["start_ns"]), r["name"], r["correlation_id"]) for r in csv.DictReader(open(os.path.join(csvd, "api_calls.csv")))]
    ks = [(int(r["start_ns"]), r["correlation_id"]) for r in csv.DictReader(open(os.path.join(csvd, "kernels.csv")))]
    if os.environ.get("AB_KEEP_CHECK"):  # for a closer look at a failed switch
        shutil.copytree(tr, os.environ["AB_KEEP_CHECK"], dirs_exist_ok=True)
    return check_phases(seq, api, ks, spec["per_phase"], spec["queries"])


def check_phases(seq, api, kernels, per_phase, queries):
    """The check proper, on the trace's records: api (start_ns, name, correlation id), kernels
    (start_ns, correlation id). Phases are bursts of kernels split where the GPU idled for more
    than 12 ms (each switch sleeps at least 20 ms; a Python pause inside a phase rarely
    reaches that); the last ones are the configurations, in order
    (the program's start-up kernels come before the first switch). An API record belongs to the
    phase whose gap midpoints enclose it. Per phase: `per_phase` kernels; where runtime calls
    are recorded every kernel joins a launch call, where they are not none does; the runtime and
    driver state queries `queries` are there under `all` (where their kind is recorded) and
    absent under `lean`/`launches`. Returns (ok, detail)."""
    ks = sorted(kernels)
    clusters, cur, last = [], [], None
    for t, cid in ks:
        if last is not None and t - last > 12_000_000:
            clusters.append(cur)
            cur = []
        cur.append((t, cid))
        last = t
    clusters.append(cur)
    with_kernels = [cfg for cfg in seq if "kernel" in cfg.partition("|")[0].split(",")]
    if len(clusters) < len(with_kernels):
        return False, f"{len(clusters)} bursts of kernels in the trace, {len(with_kernels)} configurations record kernels"
    clusters = clusters[len(clusters) - len(with_kernels):]
    first = clusters[0][0][0]
    bounds = [(prev[-1][0] + nxt[0][0]) // 2 for prev, nxt in zip(clusters, clusters[1:])]
    launch_ids = {cid for _, name, cid in api if name.startswith(("cudaLaunch", "cuLaunch"))}
    counts = [[0, 0] for _ in clusters]  # runtime query, driver query
    for t, name, _ in api:
        if t < first - 12_000_000:  # before the first switch
            continue
        for q, which in zip(queries, (0, 1)):
            if name.startswith(q):
                counts[sum(1 for b in bounds if t >= b)][which] += 1
    problems, per = [], []
    for i, (cfg, c) in enumerate(zip(with_kernels, clusters)):
        kinds, _, mode = cfg.partition("|")
        kinds = set(kinds.split(","))
        mode = mode or "all"
        joined = sum(1 for _, cid in c if cid in launch_ids)
        rq, dq = counts[i]
        per.append(f"{cfg}: {len(c)} kernels, {joined} with their launch, {rq} {queries[0]}, {dq} {queries[1]}")
        where = f"phase {i + 1} ({cfg})"
        if len(c) != per_phase:
            problems.append(f"{where} has {len(c)} kernels, not {per_phase}")
        if "runtime" in kinds and joined != len(c):
            problems.append(f"{where}: {len(c) - joined} launches lost their API record")
        if "runtime" not in kinds and "driver" not in kinds and joined:
            problems.append(f"{where} records launch calls it should not")
        for q, n, k in ((queries[0], rq, "runtime"), (queries[1], dq, "driver")):
            if mode == "all" and k in kinds and n == 0:
                problems.append(f"{where}: no {q} record under all")
            if (mode != "all" or k not in kinds) and n:
                problems.append(f"{where} still records {q} ({n})")
    return not problems, "; ".join(problems or ["every phase as configured"]) + " | " + "; ".join(per)


def run(kind, out, rounds, discard, configs, d):
    js = os.path.join(d, "out.json")
    env = dict(os.environ, CUTRACE_BENCH_HOOK="1")
    check = None
    if not discard:
        ok, detail = validate(kind, configs, d, env)
        check = {"ok": ok, "detail": detail}
        print(f"ab {kind} switch check: {'OK' if ok else 'FAILED'}: {detail}")
        if not ok:
            json.dump({"kind": kind, "check": check}, open(out, "w"), indent=1)
            sys.exit(f"configurations do not switch cleanly: {detail}")
    # Every call recorded at the start: the switch's path from `all` is the one checked (and
    # tested against the fake libcupti).
    rec = [os.environ["CUTRACE"], "record", "--api", "all", *discard, "-o", os.path.join(d, "trace"), "--"]
    if kind == "cpp":
        cmd = rec + [os.environ["WORKLOADS"], "tiny_ab", "100000", str(rounds), *configs, "--json", js]
        metric = "us_per_launch"
    else:
        cmd = rec + ["python3", os.path.abspath(__file__), "--torch-child", js, str(rounds), *configs]
        metric = "us_per_op"
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=580)
    if p.returncode != 0:
        sys.exit(f"bench_ab {kind}: rc={p.returncode}: {p.stderr[-1500:]}")
    ab = json.load(open(js))["ab"]
    series = ab[metric]
    rows = []
    for c, xs in zip(ab["configs"], series):
        r = [a / b for a, b in zip(xs, series[0])]
        lo, hi = ci(r)
        rows.append({"config": c, "median": statistics.median(xs), "ratio_to_first": statistics.median(r), "ci": [lo, hi]})
    res = {"kind": kind, "discard": bool(discard), "rounds": ab["rounds"], "metric": metric, "check": check, "rows": rows, "samples": ab}
    json.dump(res, open(out, "w"), indent=1)
    for row in rows:
        print(f"ab {kind}{' floor' if discard else ''} {row['config'][:60]:60s} {metric}={row['median']:.3f} ÷first {row['ratio_to_first']:.3f} [{row['ci'][0]:.3f}–{row['ci'][1]:.3f}]")


if __name__ == "__main__":
    main()
