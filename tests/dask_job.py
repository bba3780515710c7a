#!/usr/bin/env python3
"""cutrace.dask.analyze_job on a local Dask cluster (distributed.LocalCluster: two worker
processes, one thread each) gives the same job report, exactly, as `cutrace report JOB --format
json` run in one process: the map (`cutrace report --rank-summary`) on the workers, the reduce by
cutrace over the summaries on the client.

Job: the synthetic job tests/tools/gen_job.py writes (planted stragglers, NCCL kernels with known
exposed communication and skew, a dead rank), and the same job as a list of trace files. A link
planted in the summaries directory is not written through (tests/python_hostile.py checks that
and more without Dask).

Usage: PYTHONPATH=python tests/dask_job.py CUTRACE_BINARY. Prints `ok` lines and
`dask job analysis: PASS`; exits 77 with a SKIPPED line when dask or distributed cannot be
imported (CI installs them from PyPI, see .ci/run), 1 on a difference.
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print(f"FAIL {msg}")
    print("dask job analysis: FAIL")
    sys.exit(1)


def diff(a, b, where="report"):
    """The first place two JSON values differ, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}.{k}: only in {'the Dask run' if k in a else 'the in-process run'}"
            d = diff(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} (Dask) against {b!r} (in process)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    exe = os.path.abspath(sys.argv[1])
    try:
        from dask.distributed import Client, LocalCluster, get_task_stream
    except ImportError as e:
        print(f"SKIPPED the Dask job analysis: cannot import dask.distributed ({e})")
        sys.exit(77)
    import dask
    import distributed

    import cutrace.dask

    print(f"dask {dask.__version__}, distributed {distributed.__version__}")
    # The workers run the same binary (they inherit the environment).
    os.environ["CUTRACE_BIN"] = exe
    with tempfile.TemporaryDirectory(prefix="cutrace-dask-") as tmp:
        job = os.path.join(tmp, "job")
        # Six ranks, one an empty file and one cut in half (dead ranks), one missing.
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/tools/gen_job.py"), job,
                        "--ranks", "7", "--dead-empty", "1", "--dead-truncated", "4",
                        "--missing", "6"], check=True, stdout=subprocess.DEVNULL)
        p = subprocess.run([exe, "report", job, "--format", "json"], capture_output=True,
                           text=True)
        if p.returncode != 0:
            fail(f"cutrace report {job}: {p.stderr}")
        want = json.loads(p.stdout)
        traces = cutrace.dask.job_traces([job])
        # The scheduler's and workers' scratch space inside tmp too, so that nothing is left in
        # the system's temporary directory.
        with dask.config.set({"temporary-directory": os.path.join(tmp, "dask")}), \
                LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                             dashboard_address=None) as cluster, Client(cluster) as client:
            workers = len(client.scheduler_info()["workers"])
            if workers != 2:
                fail(f"the local cluster has {workers} workers, not 2")
            with get_task_stream(client) as stream:
                got = cutrace.dask.analyze_job([job], client, progress=False)
            d = diff(got, want)
            if d:
                fail(d)
            ran_on = {t["worker"] for t in stream.data}
            if len(stream.data) != len(traces) or len(ran_on) != 2:
                fail(f"{len(stream.data)} map tasks on {len(ran_on)} workers; expected "
                     f"{len(traces)} tasks on both workers")
            print(f"ok   {len(traces)} traces mapped on both Dask workers: the job report equals "
                  f"`cutrace report JOB` ({len(want['ranks'])} ranks, "
                  f"{len(want.get('dead_ranks', []))} dead)")
            kept = os.path.join(tmp, "summaries")
            got = cutrace.dask.analyze_job(traces, client, summaries=kept, progress=False)
            d = diff(got, want)
            if d:
                fail(f"given as files: {d}")
            if len(os.listdir(kept)) != len(traces):
                fail(f"{len(os.listdir(kept))} summaries kept in {kept}, not {len(traces)}")
            print(f"ok   the job given as {len(traces)} files, summaries kept: the same report")
            # A link planted at a summary's name (another user who can write the directory) is
            # not written through: the run fails on the taken name, the victim is untouched.
            planted = os.path.join(tmp, "planted")
            os.mkdir(planted)
            victim = os.path.join(tmp, "victim.txt")
            with open(victim, "w") as f:
                f.write("precious\n")
            os.symlink(victim, os.path.join(planted, "rank-summary-00000.json"))
            try:
                cutrace.dask.analyze_job(traces, client, summaries=planted, progress=False)
                fail(f"a link planted in {planted} did not stop the run")
            except FileExistsError as e:
                if "rank-summary-00000.json" not in str(e):
                    fail(f"the error does not name the taken summary: {e}")
            with open(victim) as f:
                if f.read() != "precious\n":
                    fail("a link planted in summaries=DIR was written through")
            print("ok   a link planted in summaries=DIR: FileExistsError, its victim untouched")

    print("dask job analysis: PASS")


if __name__ == "__main__":
    main()
