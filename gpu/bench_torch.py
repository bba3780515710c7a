#!/usr/bin/env python3
"""PyTorch overhead workloads: eager `t + 1.0` on 256 floats (µs per op), timed in batches of
20k ops (EAGER_BATCHES, default 6), and a realistic training step (ms per step), timed in batches of 25 steps (TRAIN_BATCHES, default 4; 0 skips the
model entirely, for a shorter eager-only run; EAGER_BATCHES=0 skips the eager loop, for a
training-only run). Each figure
is the median batch, so a burst of noise on the shared machine spoils one batch, not the run;
the main thread's CPU time per op is reported beside the wall time. --profiler wraps the timed
loops in torch.profiler (CPU+CUDA). Writes one JSON object to --json PATH (stdout if absent:
NVIDIA's sample prints records on stdout at exit)."""
import json
import os
import statistics
import sys
import time

import torch

prof = "--profiler" in sys.argv
out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
EAGER_BATCHES, EAGER_OPS = int(os.environ.get("EAGER_BATCHES", 6)), 20000
TRAIN_BATCHES, TRAIN_STEPS = int(os.environ.get("TRAIN_BATCHES", 4)), 25

t = torch.zeros(256, device="cuda")
for _ in range(200):
    t = t + 1.0
torch.cuda.synchronize()

model = opt = x = None
if TRAIN_BATCHES:
    torch.manual_seed(0)
    d = 2048
    # Built on the GPU in bf16 (runs 5–17 built it on the CPU in fp32, then moved it: seconds of
    # start-up per process, untimed; the timed step is the same).
    dev = dict(device="cuda", dtype=torch.bfloat16)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(d, 4 * d, **dev), torch.nn.GELU(), torch.nn.Linear(4 * d, d, **dev)) for _ in range(4)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(4096, d, device="cuda", dtype=torch.bfloat16)


def train_step():
    opt.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    opt.step()


if TRAIN_BATCHES:
    for _ in range(5):
        train_step()
    torch.cuda.synchronize()


def timed():
    global t
    eager, eager_cpu, train = [], [], []
    for _ in range(EAGER_BATCHES):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(EAGER_OPS):
            t = t + 1.0
        torch.cuda.synchronize()
        eager.append((time.perf_counter() - t0) / EAGER_OPS * 1e6)
        eager_cpu.append((time.thread_time() - c0) / EAGER_OPS * 1e6)
    for _ in range(TRAIN_BATCHES):
        t0 = time.perf_counter()
        for _ in range(TRAIN_STEPS):
            train_step()
        torch.cuda.synchronize()
        train.append((time.perf_counter() - t0) / TRAIN_STEPS * 1e3)
    r = {}
    if eager:
        r["eager_us_per_op"] = statistics.median(eager)
        r["eager_cpu_us_per_op"] = statistics.median(eager_cpu)
        r["eager_batches"] = eager
    if train:
        r["train_ms_per_step"] = statistics.median(train)
        r["train_batches"] = train
    return r


if prof:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        r = timed()
else:
    r = timed()
r["kernels_launched"] = 200 + EAGER_BATCHES * EAGER_OPS
text = json.dumps(r)
if out:
    with open(out, "w") as f:
        f.write(text + "\n")
else:
    print(text)
