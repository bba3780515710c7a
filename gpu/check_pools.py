#!/usr/bin/env python3
"""`cutrace record --memory` of gpu/pools.cu: the report's memory.cuda_pools beside the
program's own account (each pool's reserved and used high-water marks from
cudaMemPoolGetAttribute). Usage: check_pools.py CUTRACE POOLS_BINARY OUT_DIR. Appends one JSON
line to OUT_DIR/results.jsonl, keeps the trace as OUT_DIR/pools_trace/, prints a short table."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ct, prog, out = sys.argv[1], sys.argv[2], sys.argv[3]
work = tempfile.mkdtemp()
trace = os.path.join(work, "trace")
run = subprocess.run([ct, "record", "-q", "--memory", "-o", trace, "--", prog],
                     capture_output=True, text=True, timeout=120)
own = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else None
rep = json.loads(subprocess.run([ct, "report", trace, "--format", "json"], capture_output=True,
                                text=True, check=True).stdout)
pools = rep.get("memory", {}).get("cuda_pools", [])
explicit = [p for p in pools if p.get("release_threshold_bytes") == (own or {}).get("pool", {}).get("release_threshold")]
result = {
    "check": "cuda_pools",
    "record_rc": run.returncode,
    "stderr": run.stderr[-2000:],
    "own": own,
    "pools": pools,
    "explicit_found": len(explicit),
}
if own and explicit:
    p = explicit[0]
    result["explicit_reserved_peak_equal"] = p.get("reserved_peak_bytes") == own["pool"]["reserved_high"]
    result["explicit_used_peak_equal"] = p.get("used_peak_bytes") == own["pool"]["used_high"]
with open(os.path.join(out, "results.jsonl"), "a") as f:
    f.write(json.dumps(result) + "\n")
shutil.copytree(trace, os.path.join(out, "pools_trace"))
shutil.rmtree(work)
print(f"pools: record rc {run.returncode}, {len(pools)} pools in the report, explicit found {len(explicit)}")
for p in pools:
    print(f"  pool {p['address']:#x} {p['pool_type']} thr {p.get('release_threshold_bytes')} allocs {p['allocs']} "
          f"frees {p['frees']} trims {p['trims']} reserved_peak {p.get('reserved_peak_bytes')} used_peak {p.get('used_peak_bytes')}")
print(f"  program: {own}")
