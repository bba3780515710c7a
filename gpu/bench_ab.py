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
Before timing (cpp), a short run switches between the configurations and checks that the trace
still joins every launch to its API record where the configuration records runtime calls: if
CUPTI did not switch per-callback API records cleanly, the timings would compare something else.
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


def torch_child(out, rounds, configs):
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
            for _ in range(20000):
                t = t + 1.0
            torch.cuda.synchronize()
            us[c].append((time.perf_counter() - t0) / 20000 * 1e6)
    json.dump({"ab": {"configs": configs, "rounds": rounds, "us_per_op": us}}, open(out, "w"))


def ci(xs, n=4000):
    r = random.Random(1)
    m = sorted(statistics.median(r.choices(xs, k=len(xs))) for _ in range(n))
    return m[int(0.025 * n)], m[int(0.975 * n) - 1]


def main():
    if sys.argv[1] == "--torch-child":
        return torch_child(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
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


def validate(configs, d, env):
    """Switches through the configurations (and back to the first) in a short cpp run, then
    checks from the trace that each launch kept its cudaLaunchKernel record: (ok, detail)."""
    seq = configs + [configs[0]]
    n = 1000
    tr = os.path.join(d, "check")
    js = os.path.join(d, "check.json")
    p = subprocess.run([os.environ["CUTRACE"], "record", "-q", "-o", tr, "--", os.environ["WORKLOADS"], "tiny_ab", str(n), "1", *seq, "--json", js],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        return False, f"check run failed: rc={p.returncode}: {p.stderr[-800:]}"
    csvd = os.path.join(d, "check.csv")
    c = subprocess.run([os.environ["CUTRACE"], "convert", tr, "--csv", csvd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if c.returncode != 0:
        return False, f"convert failed: {c.stderr[-800:]}"
    launches = sum(1 for r in csv.DictReader(open(os.path.join(csvd, "api_calls.csv"))) if r["name"].startswith("cudaLaunchKernel"))
    # Each configuration that records runtime calls (and kernels) launched 2,000 warm-up kernels
    # and n timed ones while it was on.
    want = sum(2000 + n for cfg in seq if {"runtime", "kernel"} <= set(cfg.partition("|")[0].split(",")))
    kernels = sum(1 for _ in csv.DictReader(open(os.path.join(csvd, "kernels.csv"))))
    ok = launches >= want
    return ok, f"cudaLaunchKernel records {launches}, expected at least {want}; kernels {kernels}"


def run(kind, out, rounds, discard, configs, d):
    js = os.path.join(d, "out.json")
    env = dict(os.environ, CUTRACE_BENCH_HOOK="1")
    check = None
    if kind == "cpp" and not discard:
        ok, detail = validate(configs, d, env)
        check = {"ok": ok, "detail": detail}
        print(f"ab {kind} switch check: {'OK' if ok else 'FAILED'}: {detail}")
        if not ok:
            json.dump({"kind": kind, "check": check}, open(out, "w"), indent=1)
            sys.exit(f"configurations do not switch cleanly: {detail}")
    rec = [os.environ["CUTRACE"], "record", *discard, "-o", os.path.join(d, "trace"), "--"]
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
