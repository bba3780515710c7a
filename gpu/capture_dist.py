"""Captures small real torch.profiler traces of distributed work on one GPU, as fixtures.

Run on the GPU machine from the repo root:
  python3 gpu/capture_dist.py nccl OUTDIR          one process, NCCL backend, world size 1
  torchrun --nproc_per_node 2 gpu/capture_dist.py gloo OUTDIR   two ranks on one GPU (gloo)
  python3 gpu/capture_dist.py spawn OUTDIR         torch.multiprocessing.spawn of two GPU workers

Each traced process writes OUTDIR/<mode>_rank<R>.json.gz. The NCCL capture also turns on
Kineto's CUDA synchronization events, so device-wide synchronizes appear (`cuda_sync`,
`"stream": -1`). With one GPU NCCL cannot run two ranks (it refuses a duplicate GPU), hence gloo
for the two-rank capture.
"""
import datetime
import gzip
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

MODE = sys.argv[1]
OUT = sys.argv[2]
os.makedirs(OUT, exist_ok=True)


def save(prof, name):
    raw = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def step(dev, rank, world, a, w, big):
    with record_function("forward"):
        y = a @ w
    with record_function("allreduce_grads"):
        dist.all_reduce(y)
    g = torch.empty(world * 1024, device=dev)
    dist.all_gather_into_tensor(g, y.flatten()[:1024].contiguous())
    dist.broadcast(big, src=0)
    if rank == 1:
        time.sleep(0.01)  # a planted straggler: rank 1 arrives late at the next collective
    torch.cuda.synchronize()


def traced(mode, rank, world):
    dev = torch.device("cuda:0")
    torch.manual_seed(rank)
    a = torch.randn(512, 512, device=dev)
    w = torch.randn(512, 512, device=dev)
    big = torch.randn(1 << 16, device=dev)
    for _ in range(2):
        step(dev, rank, world, a, w, big)
    exp = None
    if mode == "nccl":
        exp = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    kw = {"experimental_config": exp} if exp is not None else {}
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        **kw,
    ) as prof:
        for _ in range(4):
            step(dev, rank, world, a, w, big)
            prof.step()
    save(prof, f"{mode}_rank{rank}")


def spawn_worker(i, out):
    # Each worker runs GPU work at a different time, so the parts do not overlap.
    time.sleep(0.5 * i)
    x = torch.randn(1024, 1024, device="cuda:0")
    for _ in range(20):
        x = x @ x
        x = x / x.norm()
    torch.cuda.synchronize()


def main():
    if MODE == "nccl":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
        traced("nccl", 0, 1)
        dist.destroy_process_group()
    elif MODE == "gloo":
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        traced("gloo", rank, world)
        dist.destroy_process_group()
    elif MODE == "spawn":
        import torch.multiprocessing as mp

        mp.spawn(spawn_worker, args=(OUT,), nprocs=2)
    else:
        sys.exit(f"unknown mode {MODE}")


if __name__ == "__main__":
    main()
