#!/usr/bin/env python3
"""Writes a synthetic multi-rank torch.profiler (Kineto) job with a known answer.

    gen_job.py OUT_DIR [--ranks N] [--steps S] [--kernels K] [--seed X] [--gzip]
                       [--dead-empty R] [--dead-truncated R] [--missing R]
                       [--syncs] [--straggler R] [--delay NS] [--clock-offset R:NS]

OUT_DIR/rankR.json(.gz) is rank R's trace, in the shape torch 2.11 writes it: a
`distributedInfo` header (backend, rank, world_size, pg_count, pg_config, nccl_version), the
`ProfilerStep#N` annotations, compute kernels launched by `aten::mm`, and per step two
collectives, each a `record_param_comms` cpu_op (Collective name, Process Group Name and
Description, Process Group Ranks, Group size, In/Out msg nelems, dtype, Rank; no Seq, as torch
2.11 writes none) enclosing the `cudaLaunchKernel` whose correlation id names an
`ncclDevKernel_*` kernel on the communication stream.

What is planted, per step: a straggler rank (its compute starts late by a known delay), and per
rank a known overlap of its all-reduce with its last compute kernel (the rest of the all-reduce
is exposed). Every rank's all-reduce kernel starts when that rank arrives and ends together on
all ranks, a fixed time after the last arrival, as NCCL's kernels do. A dead rank is written as
an empty file (--dead-empty) or as its trace cut in half (--dead-truncated); --missing leaves a
rank's file out while world_size still counts it. --clock-offset R:NS shifts every timestamp of
rank R's trace by NS (negative: earlier), as a host whose clock disagrees would write it; the
answer's cross-rank figures (skew, wait, spread) are then those of one true clock, and its
`clock_offsets` lists the shifts.

OUT_DIR.answer.json (beside the job, not in it) holds what cutrace must report, computed here from the planted intervals
with this file's own interval arithmetic (nothing is read back from cutrace): per live rank
busy_ns, comm_ns, exposed_comm_ns, idle_ns, wait_ns; per step the slowest and fastest rank and
the spread; per collective the skew; the dead and missing ranks. Times are integer nanoseconds
and are written as microseconds with three decimals, so they are exact.

Standard library only.
"""

import argparse
import gzip
import json
import os
import random

T0 = 5_288_793_000_000_000  # ns: a realistic CLOCK_MONOTONIC-like origin
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>, at::native::FusedAdamMathFunctor<float, 4>, float*, float, float, float, float, float, float, bool, bool, float*, float*>(at::native::TensorListMetadata<4>, at::native::FusedAdamMathFunctor<float, 4>, float*, float, float, float, float, float, float, bool, bool, float*, float*)"


def us(ns):
    """Kineto's microseconds with three decimals: exact for integer nanoseconds."""
    return float("%d.%03d" % divmod(ns, 1000))


def union(iv):
    total, end = 0, None
    for s, e in sorted(iv):
        if e <= s:
            continue
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def runs(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def intersection(a, b):
    ra, rb = runs(a), runs(b)
    i = j = total = 0
    while i < len(ra) and j < len(rb):
        lo, hi = max(ra[i][0], rb[j][0]), min(ra[i][1], rb[j][1])
        if hi > lo:
            total += hi - lo
        if ra[i][1] < rb[j][1]:
            i += 1
        else:
            j += 1
    return total


def plan(ranks, steps, kernels, seed, straggler_rank=None, delay_ns=None):
    """The planted timeline: per rank, per step, its kernels and its collective arrivals.
    `straggler_rank` and `delay_ns` fix the straggler and its planted delay in every step (the
    random choices are made all the same, so the rest of the job is that of the seed)."""
    rnd = random.Random(seed)
    gemm_ns = 400_000
    # Per rank: how long its all-reduce overlaps its last compute kernel (hidden), in ns.
    hidden = [rnd.choice([0, 50_000, 120_000, 200_000]) for _ in range(ranks)]
    timeline = {r: [] for r in range(ranks)}
    # Steps do not overlap: each is over before the next one's period starts.
    step_ns = kernels * gemm_ns + 5_000_000
    for k in range(steps):
        base = T0 + k * step_ns
        straggler = rnd.randrange(ranks)
        if straggler_rank is not None:
            straggler = straggler_rank
        delay = [rnd.randrange(0, 30_000) for _ in range(ranks)]
        delay[straggler] += 1_500_000 + 100_000 * (k % 10) if delay_ns is None else delay_ns
        # First collective: a small all-gather at the step's start, arrivals jittered.
        ag_arr = [base + 200_000 + rnd.randrange(0, 20_000) for _ in range(ranks)]
        ag_end = max(ag_arr) + 30_000
        compute_start = [ag_end + 50_000 + delay[r] for r in range(ranks)]
        compute_end = [compute_start[r] + kernels * gemm_ns for r in range(ranks)]
        ar_arr = [compute_end[r] - hidden[r] for r in range(ranks)]
        ar_end = max(ar_arr) + 900_000
        ends = []
        for r in range(ranks):
            ks = [("ag", AG, 20, ag_arr[r], ag_end)]
            for i in range(kernels):
                s = compute_start[r] + i * gemm_ns
                ks.append(("mm", GEMM, 7, s, s + gemm_ns))
            ks.append(("ar", AR, 20, ar_arr[r], ar_end))
            opt_s = ar_end + 20_000
            ks.append(("adam", ADAM, 7, opt_s, opt_s + 300_000))
            step = (base, opt_s + 300_000 + 100_000 + rnd.randrange(0, 1_000))
            ends.append(step[1])
            timeline[r].append({"step": step, "kernels": ks, "hidden": hidden[r],
                                "planted": {"straggler": straggler, "delay_ns": delay[straggler],
                                            "stall_ns": compute_start[straggler] - ag_end}})
        # The rank whose step ends last (ties: the lower) and each rank's all-reduce arrival:
        # the critical path starts from that rank's step end and, unless it is the straggler,
        # waits at the all-reduce for the straggler's arrival.
        last = min(r for r in range(ranks) if ends[r] == max(ends))
        timeline[0][-1]["planted"].update(last_rank=last, allreduce_arrival_ns=ar_arr)
    return timeline, hidden


def events(rank, world, pid, steps, syncs=False):
    """Kineto events of one rank; with `syncs`, also the stream waits and the step's closing
    synchronize that order its streams (see --syncs)."""
    ev = []
    ext = [0]
    corr = [0]

    def call(name, ts, dur, sync=None):
        """A CUDA call of its own correlation id; `sync` = (kind, stream) writes its cuda_sync."""
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": pid,
                   "ts": us(ts), "dur": us(dur), "args": {"correlation": corr[0]}})
        if sync:
            ev.append({"ph": "X", "cat": "cuda_sync", "name": sync[0], "pid": 0, "tid": sync[1],
                       "ts": us(ts), "dur": us(dur),
                       "args": {"cuda_sync_kind": sync[0], "stream": sync[1], "device": 0,
                                "correlation": corr[0]}})

    def next_ext():
        ext[0] += 1
        return ext[0]

    for k, st in enumerate(steps):
        s0, s1 = st["step"]
        ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % (k + 1),
                   "pid": pid, "tid": pid, "ts": us(s0), "dur": us(s1 - s0),
                   "args": {"External id": next_ext(), "Record function id": 0}})
        for i, (kind, name, stream, ks, ke) in enumerate(st["kernels"]):
            corr[0] += 1
            c = corr[0]
            # The host launches well ahead of the GPU: 2 µs launches, 5 µs apart, from the
            # step's start (kernels start later, when the stream gets to them).
            ls = s0 + 10_000 + i * 5_000
            e = next_ext()
            if kind in ("ar", "ag"):
                coll = "allreduce" if kind == "ar" else "_allgather_base"
                pg = ("0", "default_pg") if kind == "ar" else ("1", "dp_shard")
                nel = 25_165_824 if kind == "ar" else 1_048_576
                ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid,
                           "tid": pid, "ts": us(ls - 1_000), "dur": us(3_000),
                           "args": {"External id": e, "Record function id": 0,
                                    "Collective name": coll,
                                    "Process Group Name": pg[0],
                                    "Process Group Description": pg[1],
                                    "Process Group Ranks": str(list(range(world))),
                                    "Group size": world, "In msg nelems": nel,
                                    "Out msg nelems": nel * (1 if kind == "ar" else world),
                                    "dtype": "Float", "Rank": rank,
                                    "Global rank start": 0, "Global rank stride": 1}})
            else:
                ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid,
                           "tid": pid, "ts": us(ls - 1_000), "dur": us(3_000),
                           "args": {"External id": e, "Record function id": 0,
                                    "Sequence number": c, "Fwd thread id": 0}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid,
                       "tid": pid, "ts": us(ls), "dur": us(2_000),
                       "args": {"External id": e, "cbid": 211, "correlation": c}})
            ev.append({"ph": "s", "id": c, "pid": pid, "tid": pid, "ts": us(ls),
                       "cat": "ac2g", "name": "ac2g"})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                       "ts": us(ks), "dur": us(ke - ks),
                       "args": {"External id": e, "queued": 0, "device": 0, "context": 1,
                                "stream": stream, "correlation": c,
                                "registers per thread": 96, "shared memory": 0,
                                "blocks per SM": 1.0, "warps per SM": 4.0,
                                "grid": [132, 1, 1], "block": [128, 1, 1],
                                "est. achieved occupancy %": 12}})
            ev.append({"ph": "f", "id": c, "pid": 0, "tid": stream, "ts": us(ks),
                       "cat": "ac2g", "name": "ac2g", "bp": "e"})
            if syncs:
                sync_calls(call, st, i, ls)
    ev.append({"name": "process_name", "ph": "M", "ts": us(T0), "pid": pid, "tid": 0,
               "args": {"name": "python"}})
    return ev


def sync_calls(call, st, i, ls):
    """After launch `i` of step `st` (at `ls`), the calls PyTorch makes around it: the compute
    stream waits for the all-gather, the all-reduce for the last compute kernel that ends before
    it starts (gradients ready), the optimizer for the all-reduce; the step ends with a device
    synchronize. An event is recorded after the launch it stands for, the wait comes just before
    the launch that waits."""
    ks = st["kernels"]
    kind = ks[i][0]
    ar_at = next(j for j, k in enumerate(ks) if k[0] == "ar")
    ready = max(j for j, k in enumerate(ks) if k[0] == "mm" and k[4] <= ks[ar_at][3])
    if i == 0 or i == ready or kind == "ar":
        call("cudaEventRecord", ls + 2_500, 1_000)
    # The wait before the next launch: compute after the all-gather, the all-reduce, the optimizer.
    waits = {0: 7, ar_at - 1: 20, ar_at: 7}
    if i in waits:
        call("cudaStreamWaitEvent", ls + 3_700, 1_000, ("Stream Wait Event", waits[i]))
    if kind == "adam":
        call("cudaDeviceSynchronize", ls + 3_000, ks[i][4] + 2_000 - (ls + 3_000),
             ("Context Sync", -1))


def document(rank, world, evs):
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world,
                            "pg_count": 2,
                            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                           "backend_config": "cuda:nccl", "pg_size": world,
                                           "ranks": list(range(world))},
                                          {"pg_name": "1", "pg_desc": "dp_shard",
                                           "backend_config": "cuda:nccl", "pg_size": world,
                                           "ranks": list(range(world))}],
                            "nccl_version": "2.28.9"},
        "cuda_driver_version": 13000, "cuda_runtime_version": 13000, "cupti_version": 130001,
        "displayTimeUnit": "ms",
        "traceEvents": evs,
    }


def answer(timeline, live, dead, missing, world):
    out = {"world_size": world, "dead_ranks": sorted(dead), "missing_ranks": sorted(missing),
           "ranks": {}, "steps": [], "collectives": []}
    wait = {r: 0 for r in live}
    nsteps = len(timeline[live[0]]) if live else 0
    for k in range(nsteps):
        for kind in ("ag", "ar"):
            starts = {r: [x for x in timeline[r][k]["kernels"] if x[0] == kind][0][3]
                      for r in live}
            last = max(starts.values())
            for r in live:
                wait[r] += last - starts[r]
            if len(live) >= 2:
                out["collectives"].append(last - min(starts.values()))
        durs = {r: timeline[r][k]["step"][1] - timeline[r][k]["step"][0] for r in live}
        slow = max(durs.values())
        fast = min(durs.values())
        out["steps"].append({
            "index": k + 1,
            "slowest_rank": min(r for r in live if durs[r] == slow),
            "slowest_ns": slow,
            "fastest_rank": min(r for r in live if durs[r] == fast),
            "spread_ns": slow - fast,
        })
    for r in live:
        ks = [x for st in timeline[r] for x in st["kernels"]]
        allk = [(x[3], x[4]) for x in ks]
        comm = [(x[3], x[4]) for x in ks if x[0] in ("ar", "ag")]
        comp = [(x[3], x[4]) for x in ks if x[0] not in ("ar", "ag")]
        busy = union(allk)
        window = max(e for _, e in allk) - min(s for s, _ in allk)
        c = union(comm)
        out["ranks"][str(r)] = {"busy_ns": busy, "comm_ns": c,
                                "exposed_comm_ns": c - intersection(comm, comp),
                                "idle_ns": window - busy, "wait_ns": wait[r]}
    out["collectives"].sort(reverse=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--kernels", type=int, default=8, help="compute kernels per step")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--dead-empty", type=int, action="append", default=[])
    ap.add_argument("--dead-truncated", type=int, action="append", default=[])
    ap.add_argument("--missing", type=int, action="append", default=[])
    ap.add_argument("--straggler", type=int, default=None,
                    help="the straggler rank of every step (default: one drawn per step)")
    ap.add_argument("--delay", type=int, default=None,
                    help="the straggler's planted delay in ns, on top of every rank's jitter "
                         "(default: 1.5 ms + 0.1 ms per step, modulo 10 steps)")
    ap.add_argument("--syncs", action="store_true",
                    help="also write the stream waits and step-end synchronize that order the "
                         "streams, as PyTorch makes them (the critical path follows them); the "
                         "answer then lists each step's planted straggler")
    ap.add_argument("--clock-offset", action="append", default=[], metavar="R:NS",
                    help="shift rank R's timestamps by NS nanoseconds (its host's clock)")
    a = ap.parse_args()
    shift = {int(r): int(ns) for r, ns in (x.split(":") for x in a.clock_offset)}
    os.makedirs(a.out, exist_ok=True)
    timeline, _ = plan(a.ranks, a.steps, a.kernels, a.seed, a.straggler, a.delay)
    dead = set(a.dead_empty) | set(a.dead_truncated)
    live = [r for r in range(a.ranks) if r not in dead and r not in a.missing]
    for r in range(a.ranks):
        if r in a.missing:
            continue
        name = os.path.join(a.out, "rank%d.json" % r + (".gz" if a.gzip else ""))
        if r in a.dead_empty:
            open(name, "wb").close()
            continue
        evs = events(r, a.ranks, 1000 + r, timeline[r], a.syncs)
        for e in evs:
            if "ts" in e and shift.get(r):
                e["ts"] = us(int(round(e["ts"] * 1000)) + shift[r])
        text = json.dumps(document(r, a.ranks, evs))
        data = text.encode()
        if r in a.dead_truncated:
            data = data[: len(data) // 2]
        if a.gzip:
            data = gzip.compress(data, 6)
        with open(name, "wb") as f:
            f.write(data)
    out = answer(timeline, live, dead, a.missing, a.ranks)
    if shift:
        out["clock_offsets"] = {str(r): ns for r, ns in sorted(shift.items())}
    if a.syncs:
        # Per step: the straggler, its planted delay, and how long its compute stream stood
        # between the all-gather's end and its first kernel (50 µs on every rank, plus the
        # delay); the rank whose step ended last, and each rank's all-reduce arrival.
        out["planted"] = [dict(st["planted"], index=k + 1) for k, st in enumerate(timeline[0])]
    with open(a.out.rstrip("/") + ".answer.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
