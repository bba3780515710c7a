#!/usr/bin/env python3
"""What recording CUDA's allocations costs (`cutrace record --memory` against `cutrace record`).

usage: bench_memory.py CUTRACE OUT.json [--reps 5]
Each repetition runs three processes in turn, untraced, `record` and `record --memory`, of one
PyTorch loop (elementwise ops on a 1024×1024 tensor, two temporaries per op), twice: with
PyTorch's caching allocator (an eager program's usual case: after warm-up few cudaMalloc calls)
and with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every temporary a cudaMalloc and a cudaFree: the
worst case for the memory kind). Prints and writes µs per op, medians over repetitions, and the
ratio of each traced variant to the untraced run of the same repetition.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import time, torch
x = torch.randn(1024, 1024, device="cuda")
def batch(n):
    for _ in range(n):
        y = x * 2
        z = y + 1
        del y, z
    torch.cuda.synchronize()
batch(200)
best = []
for _ in range(5):
    t = time.perf_counter(); batch(2000); best.append((time.perf_counter() - t) / 2000 * 1e6)
best.sort()
print(best[2])
"""


def once(cutrace, variant, caching, tmp):
    env = dict(os.environ)
    if not caching:
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    cmd = [sys.executable, "-c", CHILD]
    if variant != "untraced":
        out = tempfile.mkdtemp(dir=tmp)
        extra = ["--memory"] if variant == "memory" else []
        cmd = [cutrace, "record", "-q", *extra, "-o", out, "--"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"{variant}: {p.stderr[-2000:]}")
    return float(p.stdout.strip().splitlines()[-1])


def main():
    cutrace, out_path = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for caching in (True, False):
            key = "caching" if caching else "no_caching"
            runs = {v: [] for v in ("untraced", "record", "memory")}
            for _ in range(reps):
                for v in runs:
                    runs[v].append(once(cutrace, v, caching, tmp))
            row = {v: statistics.median(x) for v, x in runs.items()}
            for v in ("record", "memory"):
                row[f"{v}_ratio"] = statistics.median(
                    t / u for t, u in zip(runs[v], runs["untraced"]))
            row["memory_over_record"] = statistics.median(
                m / r for m, r in zip(runs["memory"], runs["record"]))
            row["runs"] = runs
            res[key] = row
            print(key, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if k != "runs"})
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
