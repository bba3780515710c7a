"""An independent oracle for `cutrace report --format json` on Kineto traces.

Written apart from the Rust code on purpose: it reads the JSON with Python's json module,
keeps `ts`/`dur` exact with decimal.Decimal (never float), and computes busy time with an
event sweep (+1 at a start, -1 at an end) instead of the sort-and-merge the Rust code uses.
Prints a JSON object with the same contract fields as `cutrace report --format json`.

usage: python3 kineto_oracle.py TRACE.json[.gz]
"""
import decimal
import gzip
import json
import sys
from collections import defaultdict

decimal.getcontext().prec = 50


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=decimal.Decimal, parse_int=decimal.Decimal)


def ns(us):
    v = decimal.Decimal(us) * 1000
    assert v == v.to_integral_value(), f"sub-nanosecond time {us}"
    return int(v)


def sweep(intervals):
    """Busy time and number of idle gaps of a set of [start, end) intervals, by event sweep.

    Zero-length intervals are dropped first: they add no busy time and split no gap.
    At equal times, starts are processed before ends, so touching intervals merge.
    """
    events = []
    for s, e in intervals:
        if e > s:
            events.append((s, 0, +1))
            events.append((e, 1, -1))
    events.sort()
    depth, busy, run_start, runs = 0, 0, None, 0
    for t, _, d in events:
        if depth == 0 and d > 0:
            run_start = t
            runs += 1
        depth += d
        if depth == 0 and d < 0:
            busy += t - run_start
    return busy, max(runs - 1, 0)


def gap_list(intervals):
    """The idle gaps [end of a busy run, start of the next) of the intervals, by the same sweep."""
    events = []
    for s, e in intervals:
        if e > s:
            events.append((s, 0, +1))
            events.append((e, 1, -1))
    events.sort()
    depth, last_end, gaps = 0, None, []
    for t, _, d in events:
        if depth == 0 and d > 0 and last_end is not None and t > last_end:
            gaps.append((last_end, t))
        depth += d
        if depth == 0 and d < 0:
            last_end = t
    return gaps


def idle_split(ks, launch_end):
    """A device's idle time split, gap by gap, at the moment the launch call of the kernel that
    starts the next busy run returned (cutrace's `idle_split`). Several kernels starting that run
    at the same instant must agree, or the oracle refuses (it has no tie rule of its own)."""
    out = {"before_launch_ns": 0, "after_launch_ns": 0, "unknown_ns": 0}
    starts = defaultdict(list)
    for k in ks:
        if k[4] > k[3]:
            starts[k[3]].append(k)
    for a, b in gap_list([(k[3], k[4]) for k in ks]):
        ends = {launch_end.get(k[2]) if k[2] else None for k in starts[b]}
        assert len(ends) == 1, f"kernels tied at {b} ns disagree on their launch: {ends}"
        r = ends.pop()
        if r is None:
            out["unknown_ns"] += b - a
        else:
            before = min(max(r, a), b) - a
            out["before_launch_ns"] += before
            out["after_launch_ns"] += b - a - before
    return out


def an_id(v):
    """An integer id as torch writes it: a number, or (PyTorch on ROCm) a hex string "0x7"."""
    if isinstance(v, str) and v.lower().startswith("0x"):
        return int(v, 16)
    return int(v)


def main(path):
    trace = load(path)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = []
    api = set()
    # correlation id -> (rank, end) of the call the join prefers: a runtime call, then the
    # earliest start, then the earliest end (cutrace's rule for ids two calls share).
    calls = {}
    # Categories in any case, and the torch 1.8 names (`Kernel`, `Runtime`), as FORMAT.md says.
    legacy = {"runtime": "cuda_runtime", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
    for e in events:
        cat = e.get("cat")
        if isinstance(cat, str):
            cat = legacy.get(cat.lower(), cat.lower())
        if e.get("ph") != "X":
            continue
        args = e.get("args", {})
        if cat == "kernel":
            s = ns(e["ts"])
            kernels.append((an_id(args.get("device", e.get("pid", 0))),
                            an_id(args.get("stream", e.get("tid", 0))),
                            an_id(args.get("correlation", 0)), s, s + ns(e["dur"])))
        elif cat in ("cuda_runtime", "cuda_driver"):
            c = an_id(args.get("correlation", 0))
            if c != 0:
                api.add(c)
                s = ns(e["ts"])
                key = (cat != "cuda_runtime", s, s + ns(e["dur"]))
                if c not in calls or key < calls[c]:
                    calls[c] = key
    launch_end = {c: key[2] for c, key in calls.items()}
    by_dev = defaultdict(list)
    for k in kernels:
        by_dev[k[0]].append(k)
    devices = []
    for dev in sorted(by_dev):
        ks = by_dev[dev]
        ivs = [(k[3], k[4]) for k in ks]
        window = max(e for _, e in ivs) - min(s for s, _ in ivs)
        busy, gaps = sweep(ivs)
        streams = defaultdict(list)
        for k in ks:
            streams[k[1]].append((k[3], k[4]))
        devices.append({
            "device": dev,
            "kernels": len(ks),
            "window_ns": window,
            "busy_ns": busy,
            "summed_kernel_ns": sum(e - s for s, e in ivs),
            "idle_ns": window - busy,
            "gaps": gaps,
            "idle_split": idle_split(ks, launch_end),
            "streams": [{"stream": st, "kernels": len(v), "busy_ns": sweep(v)[0]}
                        for st, v in sorted(streams.items())],
        })
    attributed = sum(1 for k in kernels if k[2] in api)
    print(json.dumps({
        "devices": devices,
        "correlation": {"kernels": len(kernels), "attributed": attributed,
                        "orphans": len(kernels) - attributed},
    }, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
