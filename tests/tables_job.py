#!/usr/bin/env python3
"""cutrace.tables() on a distributed job: a directory of two ranks' torch.profiler traces
(tests/fixtures/kineto/gloo_rank{0,1}.json.gz) gives each table with every rank's rows and a
`rank` column, as many kernels as the two ranks' reports count. Needs pandas and pyarrow
(.ci/run installs them into its engines virtualenv).

usage: PYTHONPATH=python tests/tables_job.py CUTRACE_BINARY
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["CUTRACE_BIN"] = sys.argv[1]
import cutrace  # noqa: E402

fixtures = Path(__file__).resolve().parent / "fixtures" / "kineto"
ranks = [fixtures / f"gloo_rank{r}.json.gz" for r in (0, 1)]
want = [sum(d["kernels"] for d in cutrace.report(str(p), progress=False)["devices"]) for p in ranks]
with tempfile.TemporaryDirectory(prefix="cutrace-job-") as job:
    for p in ranks:
        shutil.copy(p, job)
    frames = cutrace.tables(job, progress=False)
k = frames.get("kernels")
if k is None or "rank" not in k.columns:
    sys.exit(f"FAIL tables(JOB) has no kernels table with a rank column: {sorted(frames)}")
got = sorted(k.groupby("rank").size().tolist())
if got != sorted(want) or len(k) != sum(want):
    sys.exit(f"FAIL tables(JOB)['kernels'] holds {got} kernels by rank, the reports {want}")
print(f"ok   tables(JOB)['kernels']: {len(k)} rows, {want} by rank, with a rank column")
