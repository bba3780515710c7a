#!/usr/bin/env python3
"""What CUPTI's device buffers cost in memory: free GPU memory (cudaMemGetInfo) and this
process's resident/locked host memory, after one kernel and again after 100,000 more (enough to
fill several device buffers). Run untraced and under `cutrace record` with different
CUTRACE_DEVICE_BUFFER_BYTES; gpu/run.sh (phase devmem) compares them.

usage: devmem.py OUT.json
"""
import json
import sys

import torch


def host():
    d = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmLck", "VmPin"):
            d[k] = int(v.split()[0]) * 1024
    return d


x = torch.zeros(256, device="cuda")
x += 1
torch.cuda.synchronize()
free0, total = torch.cuda.mem_get_info()
h0 = host()
for _ in range(100_000):
    x += 1
torch.cuda.synchronize()
free1, _ = torch.cuda.mem_get_info()
h1 = host()
json.dump({"free_after_first_kernel": free0, "free_after_100k": free1, "total": total,
           "host_after_first_kernel": h0, "host_after_100k": h1}, open(sys.argv[1], "w"))
