#!/usr/bin/env python3
"""Checks `cutrace profile --pc-sampling` on gpu/pc_kernels.cu against Nsight Compute's warp-state
counters for the same kernels (gpu/run.sh, phase pc_sampling), and a PyTorch step; prints one JSON
line for results.jsonl. usage: check_pc.py OUT_DIR"""
import csv
import json
import os
import statistics
import sys

out = sys.argv[1]
fails = []
KERNELS = ("load_chain", "barrier_wait", "fma_dense")
# What each kernel was built to show (gpu/pc_kernels.cu).
EXPECTED = {"load_chain": {"long_scoreboard"}, "barrier_wait": {"barrier"},
            "fma_dense": {"selected", "not_selected"}}


def load_json(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fails.append(f"{name}: {e}")
        return {}


def times(name, key):
    """Median of `key` per variant (and repeats, when given) from a JSON-lines file of
    {variant, repeats?, rep, rc, key}."""
    by = {}
    try:
        for line in open(os.path.join(out, name)):
            r = json.loads(line)
            v = r["variant"] + (f"_{r['repeats']}" if "repeats" in r else "")
            if r["rc"] != 0:
                fails.append(f"{name}: {v} run {r['rep']} exited {r['rc']}")
            if r.get(key) is not None:
                by.setdefault(v, []).append(float(r[key]))
    except (OSError, ValueError, KeyError) as e:
        fails.append(f"{name}: {e}")
    return {v: statistics.median(ts) for v, ts in by.items()}


rep = load_json("pc_report.json")
pc = rep.get("pc_samples") or {}
ours = {}
for f in pc.get("functions", []):
    for k in KERNELS:
        if k in f.get("name", ""):
            rs = f.get("reasons") or [{}]
            ours[k] = {"dominant": rs[0].get("reason"), "pct": rs[0].get("pct"),
                       "samples": f.get("samples"), "line": (f.get("lines") or [{}])[0].get("line"),
                       "pcs_with_line": f.get("pcs_with_line"), "pcs": f.get("pcs")}
ncu = {}
try:
    rows = list(csv.reader(open(os.path.join(out, "ncu_stalls.csv"))))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[head]
    name_at = cols.index("Kernel Name")
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    reason_cols = [(i, c[len(pre):-len(post)]) for i, c in enumerate(cols)
                   if c.startswith(pre) and c.endswith(post) and "_not_issued" not in c]
    for r in rows[head + 1:]:
        if len(r) != len(cols):
            continue
        for k in KERNELS:
            if k in r[name_at] and k not in ncu:
                vals = []
                for i, reason in reason_cols:
                    try:
                        vals.append((float(r[i].replace(",", "")), reason))
                    except ValueError:
                        pass
                if vals:
                    v, reason = max(vals)
                    ncu[k] = {"dominant": reason, "value": v}
except (OSError, StopIteration, ValueError) as e:
    fails.append(f"ncu_stalls.csv: {e}")

for k in KERNELS:
    o, n = ours.get(k), ncu.get(k)
    if not o:
        fails.append(f"{k}: no PC samples in the report")
        continue
    if o["dominant"] not in EXPECTED[k]:
        fails.append(f"{k}: dominant {o['dominant']}, built to show {sorted(EXPECTED[k])}")
    if not n:
        fails.append(f"{k}: no Nsight Compute row")
    elif n["dominant"] != o["dominant"]:
        fails.append(f"{k}: cutrace says {o['dominant']}, Nsight Compute {n['dominant']}")
    if not o.get("pcs_with_line"):
        fails.append(f"{k}: no source line (built with -lineinfo)")

t = times("pc_times.jsonl", "loop_s")
tt = times("pc_torch_times.jsonl", "step_ms")
for v in ("untraced_5", "cutrace_5", "ncu_5", "untraced_50", "cutrace_50"):
    if v not in t:
        fails.append(f"no loop time for {v}")
# Per repeat (3 kernels), from the 5- and 50-repeat runs; the start is what the 5-repeat run
# spent beyond 5 repeats.
per = lambda v: (t[f"{v}_50"] - t[f"{v}_5"]) / 45 if f"{v}_50" in t and f"{v}_5" in t else None
per_u, per_c = per("untraced"), per("cutrace")
start_c = t["cutrace_5"] - 5 * per_c if per_c is not None else None
per_ncu = t["ncu_5"] / 5 if "ncu_5" in t else None
mps = ""
try:
    mps = open(os.path.join(out, "mps_out.txt")).read().strip().splitlines()[-1]
    mps_pc = (json.load(open(os.path.join(out, "pc_mps_report.json"))).get("pc_samples") or {})
    mps += f"; samples {mps_pc.get('samples')}; error {(mps_pc.get('collection') or {}).get('error')}"
except (OSError, ValueError, IndexError) as e:
    mps += f" ({e})"
torch = load_json("pc_torch_report.json").get("pc_samples") or {}
tk = torch.get("functions", [])
if not tk:
    fails.append("torch step: no PC samples")
no_reason = [f["name"] for f in tk if f.get("samples") and not f.get("reasons")]
if no_reason:
    fails.append(f"torch step: functions with samples but no reason: {no_reason[:3]}")
coll = pc.get("collection") or {}
ratio = lambda a, b: round(a / b, 3) if a and b else None
print(json.dumps({
    "mode": "pc sampling", "ok": not fails, "cutrace": ours, "ncu": ncu,
    "kernels_s": t, "per_repeat_s": {"untraced": per_u, "cutrace": per_c, "ncu": per_ncu},
    "cutrace_start_s": start_c, "slowdown_cutrace": ratio(per_c, per_u),
    "slowdown_ncu": ratio(per_ncu, per_u),
    "torch_s": tt, "torch_slowdown": ratio(tt.get("cutrace"), tt.get("untraced")),
    "torch_functions": torch.get("function_count"), "torch_samples": torch.get("samples"),
    "samples_total": coll.get("samples_total"), "samples_dropped": coll.get("samples_dropped"),
    "pcs_lost": coll.get("pcs_lost"), "error": coll.get("error"), "mps": mps, "fails": fails}))
