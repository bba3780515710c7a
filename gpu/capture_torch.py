"""Captures small torch.profiler (Kineto) traces on a GPU machine, as fixtures for cutrace report.

Run on the GPU machine from the repo root:  python3 gpu/capture_torch.py OUTDIR
Writes OUTDIR/<workload>.json.gz for each workload below, plus OUTDIR/env.txt.
Each workload is small on purpose: the traces are committed as test fixtures.
"""
import gzip
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

OUT = sys.argv[1] if len(sys.argv) > 1 else "torch-traces"
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda:0")


def save(prof, name):
    raw = os.path.join(OUT, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def traced(name, fn):
    fn()  # warm up: allocator, cuBLAS handles, lazy module loading
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function(name):
            fn()
        torch.cuda.synchronize()
    save(prof, name)


def two_streams():
    a = torch.randn(2048, 2048, device=dev)
    b = torch.randn(2048, 2048, device=dev)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for _ in range(4):
        with torch.cuda.stream(s1), record_function("stream1_mm"):
            a @ a
        with torch.cuda.stream(s2), record_function("stream2_mm"):
            b @ b
    torch.cuda.synchronize()


def launch_bound():
    t = torch.zeros(256, device=dev)
    for _ in range(1000):
        t = t + 1.0


_graph = {}


def cuda_graph():
    if "g" not in _graph:
        x = torch.randn(512, 512, device=dev)
        w = torch.randn(512, 512, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                y = torch.relu(x @ w) + 1.0
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = torch.relu(x @ w) + 1.0
            y = y * 2.0
        _graph.update(g=g, y=y)
    for _ in range(20):
        _graph["g"].replay()
    torch.cuda.synchronize()


_model = {}


def train_step():
    if "m" not in _model:
        torch.manual_seed(0)
        m = torch.nn.Sequential(
            torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024),
            torch.nn.Linear(1024, 512),
        ).to(dev)
        _model.update(m=m, opt=torch.optim.AdamW(m.parameters(), lr=1e-3),
                      x=torch.randn(64, 512, device=dev), y=torch.randn(64, 512, device=dev))
    m, opt, x, y = _model["m"], _model["opt"], _model["x"], _model["y"]
    for _ in range(2):
        with record_function("forward"):
            loss = torch.nn.functional.mse_loss(m(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def copy_overlap():
    host = [torch.randn(4 << 20).pin_memory() for _ in range(4)]
    a = torch.randn(2048, 2048, device=dev)
    copy_stream = torch.cuda.Stream()
    outs = []
    for h in host:
        with torch.cuda.stream(copy_stream), record_function("h2d"):
            outs.append(h.to(dev, non_blocking=True))
        with record_function("compute"):
            a = a @ a
            a = a / a.norm()
    with torch.cuda.stream(copy_stream), record_function("d2h"):
        back = outs[0].to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    return back


def profiler_steps():
    """torch.profiler with a schedule and prof.step(): ProfilerStep#N annotations, as training
    scripts record them. 6 steps (wait 1, warmup 1, active 4); in the third active step the host
    sleeps 5 ms before its work, so the GPU idles through most of that step: `cutrace report`
    must show it as the longest step with the lowest busy share. The plan goes beside the trace
    (profiler_steps.json) for the test."""
    train_step()  # builds the model; warm-up
    sched = torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1)
    stall = 4  # prof.step() count at the stalled step: the third active one
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched) as prof:
        for i in range(6):
            if i == stall:
                import time
                time.sleep(0.005)
            train_step()
            prof.step()
    save(prof, "profiler_steps")
    import json
    with open(os.path.join(OUT, "profiler_steps.json"), "w") as f:
        json.dump({"active_steps": 4, "stall_step_name": f"ProfilerStep#{stall}", "sleep_ms": 5}, f)


for name, fn in [("two_streams", two_streams), ("launch_bound", launch_bound),
                 ("cuda_graph", cuda_graph), ("train_step", train_step),
                 ("copy_overlap", copy_overlap)]:
    traced(name, fn)
    print(f"captured {name}", flush=True)
profiler_steps()
print("captured profiler_steps", flush=True)

with open(os.path.join(OUT, "env.txt"), "w") as f:
    f.write(f"torch {torch.__version__} cuda {torch.version.cuda}\n")
    f.write(f"device {torch.cuda.get_device_name(0)}\n")
