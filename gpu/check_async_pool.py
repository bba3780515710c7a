#!/usr/bin/env python3
"""PyTorch with its cudaMallocAsync allocator (`PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`)
under `cutrace record --memory`: the report's CUDA memory pools beside torch's own account
(torch.cuda.max_memory_reserved() and max_memory_allocated(), which that backend reads from
the pool's high-water marks).

usage: check_async_pool.py CUTRACE OUT_DIR (appends one JSON line to OUT_DIR/results.jsonl)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, torch
xs = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (3, 5, 7, 11)]
del xs[1]
y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
del y
z = [torch.empty(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(8)]
torch.cuda.synchronize()
print(json.dumps({"backend": torch.cuda.get_allocator_backend(),
                  "max_memory_reserved": torch.cuda.max_memory_reserved(),
                  "max_memory_allocated": torch.cuda.max_memory_allocated(),
                  "memory_reserved": torch.cuda.memory_reserved(),
                  "memory_allocated": torch.cuda.memory_allocated()}))
"""

ct, out = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp()
trace = os.path.join(work, "trace")
env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
run = subprocess.run([ct, "record", "-q", "--memory", "-o", trace, "--", sys.executable, "-c", CHILD],
                     capture_output=True, text=True, timeout=240, env=env)
own = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else None
rep = json.loads(subprocess.run([ct, "report", trace, "--format", "json"], capture_output=True,
                                text=True, check=True).stdout) if run.returncode == 0 else {}
pools = rep.get("memory", {}).get("cuda_pools", [])
fails = []
if not own or own.get("backend") != "cudaMallocAsync":
    fails.append(f"torch did not run its cudaMallocAsync backend: {own} {run.stderr[-800:]}")
best = max(pools, key=lambda p: p.get("reserved_peak_bytes") or 0, default=None)
if own and best is None:
    fails.append("no CUDA memory pool in the report")
elif own:
    if best.get("reserved_peak_bytes") != own["max_memory_reserved"]:
        fails.append(f"reserved peak {best.get('reserved_peak_bytes')} vs torch {own['max_memory_reserved']}")
    if best.get("used_peak_bytes") != own["max_memory_allocated"]:
        fails.append(f"used peak {best.get('used_peak_bytes')} vs torch {own['max_memory_allocated']}")
result = {"mode": "async_pool", "ok": not fails, "fails": fails, "own": own,
          "pools": [{k: p.get(k) for k in ("pool_type", "allocs", "frees", "reserved_peak_bytes",
                                            "used_peak_bytes")} for p in pools],
          "record_rc": run.returncode}
with open(os.path.join(out, "results.jsonl"), "a") as f:
    f.write(json.dumps(result) + "\n")
shutil.rmtree(work)
print(json.dumps(result))
