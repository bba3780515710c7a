#!/usr/bin/env python3
"""A program that starts torch.profiler itself: under `cutrace record` it must finish with the
same stdout and exit status (3) as without. The profiler's CUDA event count goes to stderr."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

x = torch.ones(256, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(100):
        x = x + 1.0
    torch.cuda.synchronize()
n = sum(1 for e in p.events() if str(e.device_type).endswith("CUDA"))
print(f"result={x.sum().item():.1f}")
print(f"profiler_cuda_events={n}", file=sys.stderr)
sys.exit(3)
