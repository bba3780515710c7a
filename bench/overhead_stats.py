#!/usr/bin/env python3
"""Tables for BENCHMARKS.md from gpu/bench_overhead.py's JSON: for each variant, the median of
per-repetition ratios (variant / untraced of the same repetition) with a 95 % bootstrap interval,
and cutrace's paired ratio to each peer (cutrace / peer, same repetition).

usage: overhead_stats.py BENCH.json [BENCH.json ...]   (several files of one kind are pooled,
       repetition by repetition; say so when you quote a pooled figure)
       overhead_stats.py --pooled BENCH.json ...   cutrace as shipped ÷ each peer, paired within
       each run and pooled over the runs that have that peer (runs may differ in their variants)
       overhead_stats.py --pooled --ours "NAME,NAME" BENCH.json ...   the same for the first of
       these variant names each run has, instead of the shipped one (for a configuration that
       became the default: runs before had it as a variant; pass only runs where one of the names
       is that configuration)
"""
import json
import random
import statistics
import sys

PEERS = [
    "floor (same kinds, records discarded)",
    "floor --api lean",
    "Nsight Systems collector (-t cuda, no sampling)",
    "Nsight Systems collector, all APIs",
    "NVIDIA cupti_trace_injection sample",
    "torch.profiler (CPU+CUDA)",
]


def ci(xs, n=4000, seed=1):
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def ci_runs(per_run, n=4000, seed=1):
    """A two-level bootstrap: runs are drawn with replacement, then repetitions within each drawn
    run, so a pooled interval is as wide as the runs disagree (they differ by more than their
    repetitions suggest: the machine's state drifts between device calls)."""
    rnd = random.Random(seed)
    meds = []
    for _ in range(n):
        xs = []
        for r in rnd.choices(per_run, k=len(per_run)):
            xs += rnd.choices(r, k=len(r))
        meds.append(statistics.median(xs))
    meds.sort()
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def shipped(samples, ours=None):
    if ours:
        return next((n for n in ours if n in samples), None)
    # Run 9's binary asked for a 64 MiB device buffer by default; its shipped-configuration
    # variant is the one that kept CUPTI's default (see the file's "note").
    for n in ("cutrace, CUPTI's default device buffer", "cutrace"):
        if n in samples:
            return n
    return None


def pooled(paths, ours=None):
    docs = [(p, json.load(open(p))) for p in paths]
    kind = docs[0][1]["kind"]
    metrics = ["us_per_launch"] if kind == "cpp" else ["eager_us_per_op", "train_ms_per_step"]
    peers = sorted({n for _, d in docs for n in d["samples"] if n in PEERS})
    for m in metrics:
        rows = []
        for p in peers:
            per_run, runs = [], []
            for path, d in docs:
                s = d["samples"]
                mine = shipped(s, ours)
                if mine is None or p not in s:
                    continue
                r = [x[m] / y[m] for x, y in zip(s[mine], s[p]) if m in x and m in y]
                if r:
                    per_run.append(r)
                    runs.append(path.rsplit("/", 1)[-1].split("_")[0])
            if per_run:
                pr = [x for r in per_run for x in r]
                lo, hi = ci_runs(per_run)
                above = sum(x > 1 for x in pr) / len(pr)
                meds = ", ".join(f"{statistics.median(r):.3f}" for r in per_run)
                rows.append(f"| {p} | {', '.join(runs)} | {len(pr)} | {statistics.median(pr):.3f} | {lo:.3f}–{hi:.3f} | {meds} | {above:.0%} |")
        if not rows:
            continue
        who = f"the first of {ours} each run has" if ours else "cutrace as shipped"
        print(f"{kind}: {who} ÷ peer ({m}), paired within each run, pooled over runs")
        print("| peer | runs | repetitions | median | 95 % interval (runs, then repetitions, resampled) | per-run medians | share of repetitions > 1 |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))


def main():
    if sys.argv[1] == "--pooled":
        if len(sys.argv) > 3 and sys.argv[2] == "--ours":
            return pooled(sys.argv[4:], [n.strip() for n in sys.argv[3].split(",")])
        return pooled(sys.argv[2:])
    docs = [json.load(open(p)) for p in sys.argv[1:]]
    kind = docs[0]["kind"]
    metrics = ["us_per_launch"] if kind == "cpp" else ["eager_us_per_op", "train_ms_per_step"]
    metrics = [m for m in metrics if any(m in x for d in docs for s in d["samples"].values() for x in s)]
    names = [n for n in docs[0]["samples"] if all(n in d["samples"] for d in docs)]
    reps = sum(min(len(d["samples"][n]) for n in names) for d in docs)
    print(f"{kind}: {len(docs)} run(s), {reps} repetitions, variants alternated in each")
    for m in metrics:
        print(f"\n{m}")
        print(f"| variant | median {m} | × untraced (per-rep median) | 95 % interval | range |")
        print("|---|---|---|---|---|")
        ratios = {}
        for n in names:
            xs, r = [], []
            for d in docs:
                s, u = d["samples"][n], d["samples"]["untraced"]
                k = min(len(s), len(u))
                xs += [x[m] for x in s[:k] if m in x]
                r += [a[m] / b[m] for a, b in zip(s[:k], u[:k]) if m in a and m in b]
            if not r:
                continue
            ratios[n] = r
            lo, hi = ci(r)
            print(f"| {n} | {statistics.median(xs):.3f} | {statistics.median(r):.3f} | {lo:.3f}–{hi:.3f} | {min(r):.2f}–{max(r):.2f} |")
        for ours in [n for n in names if n.startswith("cutrace")]:
            print(f"\n{ours} / peer, same repetition ({m})")
            print("| peer | median | 95 % interval |")
            print("|---|---|---|")
            for p in PEERS + [n for n in names if n.startswith("floor") and n not in PEERS]:
                if p not in names:
                    continue
                pr = []
                for d in docs:
                    a, b = d["samples"][ours], d["samples"][p]
                    pr += [x[m] / y[m] for x, y in zip(a, b) if m in x and m in y]
                if pr:
                    lo, hi = ci(pr)
                    print(f"| {p} | {statistics.median(pr):.3f} | {lo:.3f}–{hi:.3f} |")

if __name__ == "__main__":
    main()
