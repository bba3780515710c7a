#!/usr/bin/env python3
"""A torch.profiler trace with CUDA sync events (`enable_cuda_sync_events`) of a two-stream
step, and `cutrace report --critical-path` on it: each step's stream waits must be tied to the
work torch's records name (`critical_path.recorded`), none inferred, and a decoy kernel the
thread launched on a third stream just before each cudaEventRecord must stay off every step's
path (the inference the records replace would have put it there).

usage: torch_sync_events.py CUTRACE OUT_DIR
Writes OUT_DIR/sync_events.json.gz (the trace) and appends one JSON line to
OUT_DIR/results.jsonl."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, schedule

ct, out = sys.argv[1], sys.argv[2]
dev = torch.device("cuda")
side, third = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(2048, 2048, device=dev)
b = torch.randn(2048, 2048, device=dev)
c = torch.randn(8 << 20, device=dev)


def step():
    x = a @ b  # the producer, on the current stream
    with torch.cuda.stream(third):
        d = torch.sin(c)  # the decoy: launched last, on another stream, before the record
    ev = torch.cuda.Event()
    ev.record()  # recorded on the current stream: it stands for x, not the decoy
    with torch.cuda.stream(side):
        side.wait_event(ev)
        y = torch.relu(x @ b)
    ev2 = torch.cuda.Event()
    ev2.record(side)
    torch.cuda.current_stream().wait_event(ev2)
    z = y + x
    third.synchronize()
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return z, d


for _ in range(3):
    step()
torch.cuda.synchronize()
cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
work = tempfile.mkdtemp()
raw = os.path.join(work, "trace.json")
# The trace is handed over when the active steps end (export after the block sees an empty cycle).
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=0, warmup=1, active=3, repeat=1), experimental_config=cfg,
             on_trace_ready=lambda prof: prof.export_chrome_trace(raw)) as p:
    for _ in range(5):
        step()
        p.step()
dest = os.path.join(out, "sync_events.json.gz")
with open(raw, "rb") as f, gzip.open(dest, "wb", 9) as g:
    g.write(f.read())
shutil.rmtree(work)

rep = json.loads(subprocess.run([ct, "report", dest, "--critical-path", "--format", "json",
                                 "--top", "100000"], capture_output=True, text=True,
                                check=True).stdout)
cp = rep["critical_path"]
steps = rep.get("steps", {}).get("steps", [])
fails = []
decoy_on_path = []
for s, sp in zip(steps, cp["steps"]):
    if sp["length_ns"] != s["duration_ns"]:
        fails.append(f"step {s['index']}: path {sp['length_ns']} ns, step {s['duration_ns']} ns")
    decoy_on_path += [seg for seg in sp["longest_segments"]
                      if "sin" in seg["name"] and seg["kind"] in ("kernel", "stream_wait")]
if len(cp["steps"]) != len(steps) or not steps:
    fails.append(f"{len(cp['steps'])} step paths, {len(steps)} steps")
# Where torch writes the event's stream and record call, the waits are exact and the decoy is off
# every path; where it does not (torch 2.11.0+cu130 writes -1 for both), they are inferred, and
# the inference must call the first wait of each step (the decoy launched since the last
# record) ambiguous.
if cp["recorded"]["stream_waits"]:
    if cp["inferred"]["stream_waits"]:
        fails.append(f"inferred stream waits beside recorded ones: {cp['inferred']}")
    if cp["recorded"]["stream_waits"] < 2 * len(steps):
        fails.append(f"recorded: {cp['recorded']} for {len(steps)} steps")
    if decoy_on_path:
        fails.append(f"the decoy is on a path: {decoy_on_path[:2]}")
elif cp["inferred"]["stream_waits_ambiguous"] < len(steps):
    fails.append(f"inferred without the decoy's ambiguity: {cp['inferred']}")
result = {"mode": "sync_events", "ok": not fails, "fails": fails, "steps": len(steps),
          "decoy_on_path": len(decoy_on_path),
          "recorded": cp["recorded"], "inferred": cp["inferred"], "torch": torch.__version__,
          "trace_bytes": os.path.getsize(dest)}
with open(os.path.join(out, "results.jsonl"), "a") as f:
    f.write(json.dumps(result) + "\n")
print(json.dumps(result))
