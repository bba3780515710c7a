"""Checks a `cutrace sample` trace of gpu/sample.cu, reading the native format with the standard
library only (check_counters.py's reader of docs/FORMAT.md): SM active about 0 % in the host
sleeps and at least 90 % in the FMA kernels, and the samples' edges within two intervals of the
kernel records. Measures the offset between PM sample timestamps and activity timestamps from
those edges: a sample partly covered by the kernel reads the covered share, so the edge inside
it is interpolated.

usage: check_sample.py TRACE_DIR [--manifest sample.json]
Prints one JSON line: ok, fails, and the figures.
"""
import glob
import json
import os
import statistics
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_counters import read_part  # noqa: E402

SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
# SM active above this (%) is activity: a sample the kernel overlaps at all reads above it.
ACTIVE = 0.05


def main():
    trace = sys.argv[1]
    kernels, samples, info = [], [], {}
    for p in glob.glob(trace + "/*.cutrace"):
        strings, tables, meta = read_part(p)
        for r in tables.get(1, []):
            kernels.append((r[0], r[0] + r[1], strings[r[6]]))
        for r in tables.get(9, []):
            v = struct.unpack("<d", struct.pack("<Q", r[5]))[0]
            samples.append((r[0], r[0] + r[1], r[2], strings[r[4]], v))
        for m in meta.get("META", []):
            if m.get("pm_sampling"):
                info = m["pm_sampling"]
    fails = []
    k = sorted((a, b) for a, b, n in kernels if "fma_loop" in n)
    sm = sorted((a, b, v) for a, b, d, name, v in samples if name == SM)
    iv = info.get("interval_ns") or 1
    out = {"mode": "sample", "kernels": len(k), "samples": len(sm), "interval_ns": iv,
           "info": {x: info.get(x) for x in ("samples", "first_samples_dropped", "overflows",
                                              "samples_lost", "samples_dropped_queue", "error",
                                              "left_out", "clock_offset_ns")}}
    if len(k) < 2 or len(sm) < 10:
        fails.append("too few kernels or samples")
        out.update(ok=False, fails=fails)
        print(json.dumps(out))
        return
    margin = 2 * iv
    inside = [v for a, b, v in sm for ka, kb in k if a >= ka + margin and b <= kb - margin]
    sleeps = [(k[i][1], k[i + 1][0]) for i in range(len(k) - 1)]
    # The sleep before the first kernel, from the first sample on (calibration ran before it).
    asleep = [v for a, b, v in sm for sa, sb in sleeps if a >= sa + margin and b <= sb - margin]
    out["sm_active_in_kernels_pct"] = round(statistics.mean(inside), 2) if inside else None
    out["sm_active_in_kernels_min_pct"] = round(min(inside), 2) if inside else None
    out["sm_active_in_sleeps_pct"] = round(statistics.mean(asleep), 3) if asleep else None
    out["sm_active_in_sleeps_max_pct"] = round(max(asleep), 3) if asleep else None
    if not inside or statistics.mean(inside) < 90:
        fails.append("SM active in kernels below 90 %")
    if not asleep or statistics.mean(asleep) > 2:
        fails.append("SM active in sleeps not about 0 %")
    # Edges. A kernel starts on every SM at once, so its start is where SM active crosses 50 %
    # (interpolated inside the partial sample). It ends when its last CTA finishes, while SMs go
    # idle one by one before that (the tail: SM active drops below 50 % up to a few hundred µs
    # before the record's end on the H200), so its end is the end of the last sample with any
    # activity; the 50 % crossing at the end is kept as the tail's measure, not an edge.
    rise, fall, tail = [], [], []
    for ka, kb in k:
        near = [s for s in sm if ka - 20 * iv <= s[0] <= kb + 20 * iv]
        for j in range(1, len(near)):
            (a0, b0, v0), (a1, b1, v1) = near[j - 1], near[j]
            if v0 < 50 <= v1 and abs(a1 - ka) < 20 * iv:
                # The edge lies in the partial sample: v1 (or v0) % of it was active.
                part = (a1, b1, v1) if v0 < 5 else (a0, b0, v0)
                rise.append(part[1] - part[2] / 100 * (part[1] - part[0]) - ka)
            if v0 >= 50 > v1 and abs(b0 - kb) < 20 * iv:
                part = (a0, b0, v0) if v1 < 5 else (a1, b1, v1)
                tail.append(part[0] + part[2] / 100 * (part[1] - part[0]) - kb)
            if v0 > ACTIVE > v1 >= 0 and abs(b0 - kb) < 20 * iv:
                fall.append(b0 - kb)
    edges = rise + fall
    out["edges"] = len(edges)
    if edges:
        out["offset_ns_median"] = int(statistics.median(edges))
        out["offset_ns_max_abs"] = int(max(abs(e) for e in edges))
        out["rise_offsets_ns"] = [int(e) for e in rise]
        out["fall_offsets_ns"] = [int(e) for e in fall]
        out["tail_50pct_offsets_ns"] = [int(e) for e in tail]
    if len(edges) < len(k) or max(abs(e) for e in edges) > 2 * iv:
        fails.append("samples do not line up with the kernel records within two intervals")
    if len(sys.argv) > 3 and sys.argv[2] == "--manifest":
        out["program"] = json.load(open(sys.argv[3]))
    out["ok"] = not fails
    out["fails"] = fails
    print(json.dumps(out))


if __name__ == "__main__":
    main()
