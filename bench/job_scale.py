#!/usr/bin/env python3
"""The job analysis at scale: `cutrace report JOB --format json` on a synthetic job of many ranks
(tests/tools/gen_job.py), timed with /usr/bin/time: wall time, user and system CPU, cores used
((user + sys) / wall) and peak RSS, each run separately, then the medians; and the map step alone
(`cutrace report --rank-summary`) on one large rank, the basis of the extrapolation to bigger
ranks (docs: BENCHMARKS.md, "Job analysis at scale").

usage: bench/job_scale.py CUTRACE JOB_DIR [--runs N] [--threads T] [--big-rank TRACE]

JOB_DIR must exist (write it with `tests/tools/gen_job.py JOB_DIR --ranks 1000 --steps 10
--kernels 300`); --big-rank is one large rank's trace (`gen_job.py DIR --ranks 1 --steps 60
--kernels 3000`). Prints one JSON object.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def timed(cmd):
    """(wall s, user s, sys s, peak RSS KiB, load average before) of one run of `cmd`."""
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %U %S %M", *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr}")
        wall, user, sys_, rss = t.read().split()[-4:]
    return float(wall), float(user), float(sys_), int(rss), load


def runs(cmd, n):
    out = []
    for _ in range(n):
        w, u, s, rss, load = timed(cmd)
        out.append({"wall_s": w, "user_s": u, "sys_s": s, "cores_used": round((u + s) / w, 2),
                    "peak_rss_mib": round(rss / 1024, 1), "load_before": load})
    med = {k: statistics.median(r[k] for r in out) for k in out[0]}
    return {"runs": out, "median": med}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cutrace")
    ap.add_argument("job")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--big-rank")
    a = ap.parse_args()
    files = [os.path.join(a.job, f) for f in sorted(os.listdir(a.job))]
    size = sum(os.path.getsize(f) for f in files)
    cmd = [a.cutrace, "report", a.job, "--format", "json"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    result = {"ranks": len(files), "job_bytes": size, "cores": os.cpu_count(),
              "report": runs(cmd, a.runs)}
    if a.big_rank:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "s.json")
            one = [a.cutrace, "report", "--rank-summary", a.big_rank, "-o", out]
            r = []
            for _ in range(a.runs):
                r.append(runs(one, 1)["runs"][0])
                os.remove(out)
            med = {k: statistics.median(x[k] for x in r) for k in r[0]}
            result["big_rank"] = {"bytes": os.path.getsize(a.big_rank), "runs": r, "median": med}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
