#!/usr/bin/env python3
"""PyTorch overhead workloads: eager `t + 1.0` on 256 floats 20k times (µs per op), and a
realistic training step (ms per step). --profiler wraps the timed loops in torch.profiler
(CPU+CUDA). Prints one JSON line."""
import json
import sys
import time

import torch

prof = "--profiler" in sys.argv
t = torch.zeros(256, device="cuda")
for _ in range(200):
    t = t + 1.0
torch.cuda.synchronize()

torch.manual_seed(0)
d = 2048
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)) for _ in range(4)]).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(4096, d, device="cuda", dtype=torch.bfloat16)


def train_step():
    opt.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    opt.step()


for _ in range(5):
    train_step()
torch.cuda.synchronize()


def timed():
    global t
    t0 = time.perf_counter()
    for _ in range(20000):
        t = t + 1.0
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(30):
        train_step()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / 20000 * 1e6, (t2 - t1) / 30 * 1e3


if prof:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        eager_us, step_ms = timed()
else:
    eager_us, step_ms = timed()
print(json.dumps({"eager_us_per_op": eager_us, "train_ms_per_step": step_ms}))
