#!/usr/bin/env python3
"""An independent replay of a torch.profiler trace's `[memory]` events (profile_memory=True),
written apart from cutrace's `memory.rs`, for `crates/cutrace/tests/cli/memory_oracle.rs`.

Reads the JSON (or .json.gz) with the standard library, times as exact decimals (µs text to
integer ns, half to even), and prints, per (pid, CPU or GPU, device), what `cutrace report
--format json` puts in `memory.pools[]`: allocation and free counts, frees without their
allocation, the replay's peak (bytes and when, first reached), torch's largest `Total Allocated`
with `Total Reserved` then, and what was still live at the end, in bytes per site.

Sites: an event's site is the innermost CPU op (`cpu_op`, not `ProfilerStep#N`) of its pid and
tid whose [ts, ts + dur) holds its time (the latest-starting, then the shortest); outside every
op, the innermost host range (`user_annotation`, `ProfilerStep#N`); else none.

Replay rules (docs/REPORT.md, "memory"): events in time order, ties in file order; `Bytes` > 0
allocates at `Addr` (ending an allocation still live there), `Bytes` < 0 frees the allocation
live at `Addr` or, when none is, is a free without its allocation. An event without `Addr`
(torch 1.8) counts by its size alone: a free takes back as many bytes of such allocations if
that many are live, else it is a free without its allocation.
"""

import decimal
import gzip
import json
import sys


def ns(ts):
    d = decimal.Decimal(str(ts)) * 1000
    return int(d.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_EVEN))


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=decimal.Decimal)


NO_SITE = "(no enclosing host range)"


def site_finder(events):
    """(pid, tid, t) -> the site of a memory event at t on that thread."""
    ops, ranges = {}, {}
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        cat, name = e.get("cat"), e.get("name", "")
        if cat not in ("cpu_op", "Operator", "user_annotation"):
            continue
        start = ns(e["ts"])
        iv = (start, ns(decimal.Decimal(str(e["ts"])) + decimal.Decimal(str(e["dur"]))), name)
        key = (int(e["pid"]), int(e["tid"]))
        if cat in ("cpu_op", "Operator") and not name.startswith("ProfilerStep#"):
            ops.setdefault(key, []).append(iv)
        elif cat == "user_annotation" or (cat in ("cpu_op", "Operator") and name.startswith("ProfilerStep#")):
            ranges.setdefault(key, []).append(iv)

    def inner(ivs, t):
        best = None
        for s, e, name in ivs:
            if s <= t < e and (best is None or (s, -e) > (best[0], -best[1])):
                best = (s, e, name)
        return best[2] if best else None

    def find(pid, tid, t):
        key = (pid, tid)
        return inner(ops.get(key, []), t) or inner(ranges.get(key, []), t) or NO_SITE

    return find


def main(path):
    trace = load(path)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    site_of = site_finder(events)
    pools = {}
    for order, e in enumerate(events):
        if e.get("name") != "[memory]" or e.get("ph") != "i":
            continue
        a = e.get("args", {})
        kind = {0: "cpu", 1: "gpu"}[int(a["Device Type"])]
        device = 0 if kind == "cpu" else int(a["Device Id"])
        site = site_of(int(e["pid"]), int(e["tid"]), ns(e["ts"]))
        pools.setdefault((int(e["pid"]), kind, device), []).append((ns(e["ts"]), order, a, site))
    out = []
    for (pid, kind, device), evs in sorted(pools.items(), key=lambda kv: (kv[0][0], kv[0][1] != "gpu", kv[0][2])):
        evs.sort(key=lambda x: (x[0], x[1]))
        live = {}
        now = 0
        peak = None
        reported = None
        allocs = frees = orphans = 0
        bare = 0  # live bytes of allocations without an address (torch 1.8 wrote no Addr)
        for t, _, a, site in evs:
            size = int(a["Bytes"])
            addr = int(a["Addr"]) if "Addr" in a else None
            if size >= 0:
                allocs += 1
                if addr is None:
                    bare += size
                else:
                    now -= live.pop(addr, (0, None))[0]
                    live[addr] = (size, site)
                now += size
                if peak is None or now > peak[0]:
                    peak = (now, t)
            else:
                frees += 1
                if addr is None:
                    if 0 < -size <= bare:
                        bare += size
                        now += size
                    else:
                        orphans += 1
                elif addr in live:
                    now -= live.pop(addr)[0]
                else:
                    orphans += 1
            total = a.get("Total Allocated")
            if total is not None and (reported is None or int(total) > reported[0]):
                reserved = a.get("Total Reserved")
                reported = (int(total), t, None if reserved is None else int(reserved))
        by_site = {}
        for size, site in live.values():
            n, b = by_site.get(site, (0, 0))
            by_site[site] = (n + 1, b + size)
        out.append(
            {
                "pid": pid,
                "place": kind,
                "device": device,
                "allocs": allocs,
                "frees": frees,
                "frees_without_alloc": orphans,
                "peak_bytes": peak[0] if peak and peak[0] > 0 else None,
                "peak_at_ns": peak[1] if peak and peak[0] > 0 else None,
                "reported_allocated_bytes": reported[0] if reported else None,
                "reported_at_ns": reported[1] if reported else None,
                "reported_reserved_bytes": reported[2] if reported else None,
                "live_at_end_allocations": len(live),
                "live_at_end_bytes": sum(v[0] for v in live.values()) + bare,
                "live_at_end_by_site": [
                    {"site": k, "allocations": n, "bytes": b}
                    for k, (n, b) in sorted(by_site.items(), key=lambda kv: (-kv[1][1], kv[0]))
                ],
            }
        )
    json.dump({"pools": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
