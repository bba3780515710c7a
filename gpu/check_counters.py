"""Checks `cutrace profile` traces of gpu/counters.cu against what the program launched and
against Nsight Compute, reading the native format with the standard library only (the reader
of docs/FORMAT.md), so the check does not go through cutrace's own reader.

usage: check_counters.py MANIFEST.json BASIC_TRACE_DIR [--sol SOL_TRACE_DIR] [--ncu NCU.csv]
                         [--ncu-sol NCU_SOL.csv]
Prints one JSON line: ok, fails, and the figures.
"""
import csv
import glob
import json
import struct
import sys
import zlib


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def read_part(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89CUTRACE", path
    off, strings, tables, meta = 12, [], {}, {}
    while off + 20 <= len(data):
        tag, codec, stored, raw_len, crc = struct.unpack_from("<4sB3xIII", data, off)
        body = data[off + 20: off + 20 + stored]
        if len(body) < stored or zlib.crc32(body) != crc:
            break
        raw = zlib.decompress(body, -15) if codec == 1 else body
        off += 20 + stored
        if tag in (b"HEAD", b"META", b"TAIL"):
            meta.setdefault(tag.decode(), []).append(json.loads(raw))
        elif tag == b"STRS":
            first, i = varint(raw, 0)
            n, i = varint(raw, i)
            for _ in range(n):
                ln, i = varint(raw, i)
                strings.append(raw[i:i + ln].decode("utf-8", "replace"))
                i += ln
        elif tag == b"RECS":
            table, (rows, i) = raw[0], varint(raw, 1)
            ncols, i = varint(raw, i)
            cols = []
            for _ in range(ncols):
                ln, i = varint(raw, i)
                end, col, prev = i + ln, [], 0
                while i < end:
                    z, i = varint(raw, i)
                    prev = (prev + ((z >> 1) ^ -(z & 1))) & (2**64 - 1)
                    col.append(prev)
                cols.append(col)
            tables.setdefault(table, []).extend(zip(*cols))
    return strings, tables, meta


def load(trace_dir):
    """Kernels in start order, each with its metrics {name: value}, and the META counters."""
    parts = glob.glob(trace_dir + "/*.cutrace")
    assert len(parts) == 1, parts
    strings, tables, meta = read_part(parts[0])
    metrics = {}
    for corr, dev, proc, metric, bits in tables.get(8, []):
        value = struct.unpack("<d", struct.pack("<Q", bits))[0]
        metrics.setdefault(corr, {})[strings[metric]] = value
    kernels = []
    # Launch order is correlation-id order: with the Range Profiler on, CUPTI writes 0 for the
    # start and end of every profiled kernel's activity record, so start times cannot order them.
    for row in sorted(tables.get(1, []), key=lambda r: r[2]):
        start, dur, corr, name = row[0], row[1], row[2], strings[row[6]]
        kernels.append({"name": name, "corr": corr, "duration_ns": dur, "graph_id": row[16],
                        "start_ns": start,
                        "grid": row[7], "block": row[10], "metrics": metrics.get(corr)})
    counters = {}
    for m in meta.get("META", []):
        if m.get("counters"):
            counters = m["counters"]
    complete = "TAIL" in meta
    return kernels, counters, complete, len(metrics)


def short(name):
    for k in ("ctas", "stream", "fma"):
        if k in name:
            return k
    return name


def ncu_rows(path):
    """Nsight Compute's --csv --page raw: one dict per kernel (units row dropped)."""
    rows = list(csv.reader(open(path)))
    start = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    head = rows[start]
    out = []
    for r in rows[start + 2:]:
        if len(r) != len(head):
            continue
        d = dict(zip(head, r))
        out.append(d)
    return out


def num(s):
    return float(s.replace(",", ""))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def main():
    args = sys.argv[1:]
    manifest = json.load(open(args[0]))
    basic_dir = args[1]
    opt = {args[i]: args[i + 1] for i in range(2, len(args) - 1, 2)}
    fails, out = [], {"mode": "profile_basic"}
    kernels, counters, complete, with_values = load(basic_dir)
    out["complete"] = complete
    out["counters"] = counters
    out["kernels"] = len(kernels)
    out["kernels_with_values"] = with_values
    if counters.get("passes") != 1:
        fails.append(f"basic set: passes {counters.get('passes')} (want 1 on GH100)")
    if counters.get("error"):
        fails.append(f"counters error: {counters['error']}")
    if len(kernels) != len(manifest):
        fails.append(f"{len(kernels)} kernels traced, {len(manifest)} launched")
    checks = []
    for want, k in zip(manifest, kernels):
        c = {"api": want["api"], "kernel": want["kernel"]}
        if short(k["name"]) != want["kernel"]:
            fails.append(f"order: traced {k['name']} where {want['kernel']} was launched")
            continue
        m = k["metrics"]
        if want["api"] == "cudaGraphLaunch":
            c["has_values"] = m is not None
            if m is not None:
                fails.append("a graph kernel has counter values (documented: none)")
            checks.append(c)
            continue
        if m is None:
            fails.append(f"{want['kernel']} via {want['api']}: no counter values")
            checks.append(c)
            continue
        c["ctas"] = m.get("sm__ctas_launched.sum")
        c["warps"] = m.get("smsp__warps_launched.sum")
        c["gpu_time_ns"] = m.get("gpu__time_duration.sum")
        c["activity_ns"] = k["duration_ns"]
        c["activity_start_ns"] = k["start_ns"]
        if c["ctas"] != want["ctas"]:
            fails.append(f"{want['kernel']} via {want['api']}: ctas {c['ctas']} != {want['ctas']}")
        if c["warps"] != want["warps"]:
            fails.append(f"{want['kernel']} via {want['api']}: warps {c['warps']} != {want['warps']}")
        if want["bytes_read"]:
            r, w = m.get("dram__bytes_read.sum"), m.get("dram__bytes_write.sum")
            c["dram_read_rel_err"] = rel(r, want["bytes_read"])
            c["dram_write_rel_err"] = rel(w, want["bytes_written"])
            if c["dram_read_rel_err"] > 0.03 or c["dram_write_rel_err"] > 0.03:
                fails.append(f"stream: dram read {r:.0f} write {w:.0f} vs {want['bytes_read']:.0f}")
        if want["kernel"] == "fma":
            c["inst"] = m.get("smsp__inst_executed.sum")
        nan = [n for n, v in m.items() if v != v]
        if nan:
            c["nan"] = nan
        checks.append(c)
    out["launches"] = checks
    if "--ncu" in opt:
        rows = ncu_rows(opt["--ncu"])
        fma = [r for r in rows if "fma" in r.get("Kernel Name", "")]
        ours = [c for c in checks if c["kernel"] == "fma"]
        if fma and ours:
            theirs = num(fma[0]["smsp__inst_executed.sum"])
            out["fma_inst_ncu"] = theirs
            out["fma_inst_cutrace"] = ours[0].get("inst")
            if ours[0].get("inst") != theirs:
                fails.append(f"fma inst: cutrace {ours[0].get('inst')} vs ncu {theirs}")
        else:
            fails.append("no fma row in Nsight Compute's output")
        for r in rows:
            name = short(r.get("Kernel Name", ""))
            if name == "ctas":
                out.setdefault("ncu_ctas", []).append(num(r["sm__ctas_launched.sum"]))
    if "--sol" in opt:
        sk, sc, scomplete, swith = load(opt["--sol"])
        out["sol_passes"] = sc.get("passes")
        out["sol_error"] = sc.get("error")
        out["sol_kernels_with_values"] = swith
        if "--ncu-sol" in opt:
            rows = ncu_rows(opt["--ncu-sol"])
            cmp = {}
            for kname in ("stream", "fma"):
                ours = [k for k in sk if short(k["name"]) == kname and k["metrics"]]
                theirs = [r for r in rows if short(r.get("Kernel Name", "")) == kname]
                if not ours or not theirs:
                    fails.append(f"sol: {kname} missing (ours {len(ours)}, ncu {len(theirs)})")
                    continue
                for metric, v in ours[-1]["metrics"].items():
                    if "pct_of_peak" in metric and metric in theirs[-1]:
                        t = num(theirs[-1][metric])
                        cmp[f"{kname}:{metric}"] = [round(v, 2), round(t, 2), round(abs(v - t), 2)]
            out["sol_vs_ncu_pct_points"] = cmp
    out["fails"] = fails
    out["ok"] = not fails
    print(json.dumps(out))


if __name__ == "__main__":
    main()
