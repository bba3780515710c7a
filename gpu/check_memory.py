#!/usr/bin/env python3
"""Memory peaks as cutrace reads them against PyTorch's own account, on the GPU machine.

usage: check_memory.py CUTRACE WORKDIR OUTDIR
1. `cutrace record --memory` of a small training loop (two linear layers, Adam, 6 steps): the
   peak of the CUDA driver allocations on the GPU (`memory.pools[level=driver, place=gpu]
   .peak.bytes`) beside `torch.cuda.max_memory_reserved()` at the end of the same process. The
   driver counts every allocation, torch its own segments only: the driver allocations that are
   torch's segments (by address and size, from torch.cuda.memory_snapshot()) must peak at
   max_memory_reserved() exactly, and the rest, other code's, is named beside it.
2. The same loop under torch.profiler with `profile_memory=True` (peak statistics reset before
   the profiled steps): the framework peak cutrace reads from the `[memory]` events
   (`reported_peak.allocated_bytes`, torch's `Total Allocated`) beside
   `torch.cuda.max_memory_allocated()`.
Prints one JSON line; the record part and the Kineto trace go to OUTDIR as fixtures.
"""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys

CHILD = r"""
import json, sys, torch
mode, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters())
x = torch.randn(512, 2048, device="cuda")
def step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
step(); torch.cuda.synchronize()
if mode == "profile":
    torch.cuda.reset_peak_memory_stats()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True) as p:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    p.export_chrome_trace(out)
else:
    for _ in range(5):
        step()
    torch.cuda.synchronize()
segs = [{"address": g["address"], "bytes": g["total_size"]} for g in torch.cuda.memory_snapshot()]
print(json.dumps({"max_reserved": torch.cuda.max_memory_reserved(),
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "reserved_now": torch.cuda.memory_reserved(), "segments": segs}))
"""


def report(ct, path):
    r = subprocess.run([ct, "report", "--format", "json", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"report {path}: {r.stderr[-400:]}")
    return json.loads(r.stdout)


def pools(rep, level):
    return [p for p in (rep.get("memory") or {}).get("pools", [])
            if p.get("level") == level and p.get("place") == "gpu"]


def split_by_torch(ct, trace, w, torch_own):
    """The driver's GPU allocations (cutrace's `memory` table) split into torch's segments, by
    address and size, and the rest: each side's peak of live bytes, in time order."""
    tables = os.path.join(w, "mem_tables")
    shutil.rmtree(tables, ignore_errors=True)
    r = subprocess.run([ct, "convert", trace, "--csv", tables], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"convert {trace}: {r.stderr[-400:]}")
    segs = {(int(g["address"]), int(g["bytes"])) for g in torch_own["segments"]}
    rows = [x for x in csv.DictReader(open(os.path.join(tables, "memory.csv")))
            if x["level"] == "driver" and x["place"] == "gpu"]
    rows.sort(key=lambda x: int(x["ts_ns"]))
    live, peak, found, frees, sizes = {"torch": 0, "others": 0}, {"torch": 0, "others": 0}, set(), 0, {}
    for x in rows:
        addr, size = int(x["address"]), int(x["bytes"] or 0)
        if x["op"] == "alloc":
            side = "torch" if (addr, size) in segs else "others"
            if side == "torch":
                found.add((addr, size))
            sizes[addr] = (side, size)
            live[side] += size
            peak[side] = max(peak[side], live[side])
        elif x["op"] == "free":
            frees += 1
            side, size = sizes.pop(addr, ("others", 0))
            live[side] -= size
    return {"torch_segments": len(segs), "torch_segments_found": len(found),
            "driver_peak_torch_segments_bytes": peak["torch"], "driver_peak_others_bytes": peak["others"],
            "driver_frees": frees}


def main():
    ct, w, out = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(w, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    child = os.path.join(w, "mem_child.py")
    open(child, "w").write(CHILD)
    fails, res = [], {"mode": "memory peaks"}
    # 1. Driver allocations against max_memory_reserved.
    trace = os.path.join(w, "mem_record")
    shutil.rmtree(trace, ignore_errors=True)
    r = subprocess.run([ct, "record", "--memory", "-o", trace, "--", sys.executable, child, "record", "-"],
                       capture_output=True, text=True, timeout=300)
    torch_own = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    if r.returncode != 0:
        fails.append(f"record --memory exited {r.returncode}: {r.stderr[-300:]}")
    else:
        rep = report(ct, trace)
        drv = pools(rep, "driver")
        peak = sum(p["peak"]["bytes"] for p in drv if p.get("peak"))
        res.update({"driver_peak_bytes": peak, "max_memory_reserved": torch_own["max_reserved"],
                    "driver_pools": len(drv)})
        split = split_by_torch(ct, trace, w, torch_own)
        res.update(split)
        # The driver sees every allocation of the process; torch's reserved figure counts its
        # caching allocator's segments only. The segments torch names (memory_snapshot(): none
        # was released, so its segments now are all it ever held) are found among the driver's
        # allocations by address and size, and their peak must be torch's exactly; the rest is
        # what other code (cuBLAS, CUDA itself) took, and the two add up to the driver peak.
        if split["torch_segments_found"] != len(torch_own["segments"]):
            fails.append(f"{len(torch_own['segments']) - split['torch_segments_found']} of torch's "
                         f"{len(torch_own['segments'])} segments are not among the driver's allocations")
        if torch_own["reserved_now"] != torch_own["max_reserved"]:
            fails.append("torch released segments: its snapshot no longer holds its peak")
        if split["driver_peak_torch_segments_bytes"] != torch_own["max_reserved"]:
            fails.append(f"driver peak of torch's segments {split['driver_peak_torch_segments_bytes']} B, "
                         f"torch.cuda.max_memory_reserved() {torch_own['max_reserved']} B")
        if split["driver_peak_torch_segments_bytes"] + split["driver_peak_others_bytes"] != peak \
                and split["driver_frees"] == 0:
            fails.append(f"torch's {split['driver_peak_torch_segments_bytes']} B and the others' "
                         f"{split['driver_peak_others_bytes']} B do not add up to the driver peak {peak} B")
        for f in glob.glob(os.path.join(trace, "*")):
            shutil.copy(f, out)
        # What torch said, segments included: with the part, a fixture CI can split again.
        json.dump(torch_own, open(os.path.join(out, "torch_record.json"), "w"))
    # 2. Framework peak from a profile_memory trace against max_memory_allocated.
    kt = os.path.join(w, "mem_profile.json")
    r = subprocess.run([sys.executable, child, "profile", kt], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fails.append(f"the profiled run exited {r.returncode}: {r.stderr[-300:]}")
    else:
        own = json.loads(r.stdout.strip().splitlines()[-1])
        rep = report(ct, kt)
        fw = pools(rep, "framework")
        rp = [p["reported_peak"]["allocated_bytes"] for p in fw if p.get("reported_peak")]
        replay = [p["peak"]["bytes"] for p in fw if p.get("peak")]
        res.update({"framework_reported_peak_bytes": max(rp) if rp else None,
                    "framework_replay_peak_bytes": max(replay) if replay else None,
                    "max_memory_allocated": own["max_allocated"]})
        if not rp or max(rp) != own["max_allocated"]:
            fails.append(f"framework peak {rp} B, torch.cuda.max_memory_allocated() {own['max_allocated']} B")
        subprocess.run(["gzip", "-kf", kt])
        shutil.copy(kt + ".gz", out)
    res.update({"ok": not fails, "fails": fails})
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
