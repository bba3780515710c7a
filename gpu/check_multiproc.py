#!/usr/bin/env python3
"""Checks `workloads multiproc 4` under `cutrace record`: each child process (two fork+exec, two
fork-only) wrote its own part, named by its pid, holding exactly the kernels it launched, with
0 orphans, complete. Prints one JSON line.

usage: check_multiproc.py CUTRACE WORKDIR RC   (WORKDIR holds mp.trace/ and mp.N.json)
"""
import csv
import glob
import json
import os
import subprocess
import sys

ct, w, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
parts = sorted(glob.glob(w + "/mp.trace/*.cutrace"))
kids, fails = [], []
for j in sorted(glob.glob(w + "/mp.*.json")):
    e = json.load(open(j))
    # Part names are HOST-PID.cutrace (HOST-PID-N.cutrace on a name clash).
    mine = [p for p in parts if ("-" + str(e["pid"]) + ".") in os.path.basename(p) or ("-" + str(e["pid"]) + "-") in os.path.basename(p)]
    if len(mine) != 1:
        fails.append(f"pid {e['pid']}: {len(mine)} parts")
        continue
    out = w + f"/mp.{e['pid']}.csv"
    subprocess.run([ct, "convert", mine[0], "--csv", out], capture_output=True)
    k = list(csv.DictReader(open(out + "/kernels.csv")))
    corr = {r["correlation_id"] for r in csv.DictReader(open(out + "/api_calls.csv"))}
    orphans = sum(1 for r in k if r["correlation_id"] not in corr)
    meta = json.load(open(out + "/meta.json"))
    kids.append({"pid": e["pid"], "how": e.get("how", "exec"), "kernels": len(k), "want": e["kernels"],
                 "orphans": orphans, "complete": meta["complete"]})
    if len(k) != e["kernels"] or orphans or not meta["complete"]:
        fails.append(f"pid {e['pid']}: {len(k)} kernels (want {e['kernels']}), {orphans} orphans, complete={meta['complete']}")
if len(kids) != 4:
    fails.append(f"{len(kids)} children reported, 4 expected")
print(json.dumps({"mode": "multiproc", "rc": rc, "parts": len(parts), "children": kids, "fails": fails,
                  "ok": rc == 0 and not fails and len(parts) == 4}))
