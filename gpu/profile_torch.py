#!/usr/bin/env python3
"""A small training step, timed: under `cutrace profile` every kernel of the steps should have
its counters. Prints {"step_ms": median of N steps, "steps": N}; the steps sit inside an NVTX
range "steps" so the check can pick their kernels."""
import json
import statistics
import sys
import time

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512), torch.nn.LayerNorm(512)
).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()


for _ in range(3):
    step()
torch.cuda.synchronize()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10
times = []
torch.cuda.nvtx.range_push("steps")
for _ in range(N):
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t) * 1e3)
torch.cuda.nvtx.range_pop()
print(json.dumps({"step_ms": statistics.median(times), "steps": N}))
