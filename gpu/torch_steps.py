#!/usr/bin/env python3
"""Kernel count of N training steps: from torch.profiler (--profiler, untraced) or, under
`cutrace record`, bracketed by an NVTX range "steps" for gpu/torch_steps_check.py."""
import json
import sys

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
N = 5
if "--profiler" in sys.argv:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for _ in range(N):
            step()
        torch.cuda.synchronize()
    path = sys.argv[sys.argv.index("--profiler") + 1]
    p.export_chrome_trace(path)
    ev = json.load(open(path))["traceEvents"]
    print(json.dumps({"profiler_kernels": sum(1 for e in ev if e.get("cat") == "kernel")}))
else:
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("steps")
    for _ in range(N):
        step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print(json.dumps({"steps": N}))
