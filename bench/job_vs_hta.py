"""`cutrace report JOB/` against HTA's multi-rank load of the same job, side by side.

usage: python3 bench/job_vs_hta.py JOB_DIR [REPS] [HTA_PYTHON]

JOB_DIR holds one Kineto trace per rank (tests/tools/gen_job.py writes one). Alternates the runs
(cutrace; HTA's `TraceAnalysis(trace_dir=JOB_DIR)` load followed by its
`get_comm_comp_overlap()`), REPS times each (default 3). Each run is a separate process; its wall
time and CPU time (user + system, with the workers it waited for) are measured, and its peak memory as the largest sum of the resident sets of the process and
all its descendants, sampled every 10 ms from /proc (HTA parses ranks in a pool of worker processes),
and at least the process's own peak resident set as GNU time (`/usr/bin/time -f %M`) reports it.

Not `ru_maxrss` from `os.wait4` on a process Python started: Linux carries the peak of the address
space a process had before its `exec` into its `ru_maxrss`, and a child of Python starts in a
copy of (or, spawned by vfork, in) Python's own, so `/bin/true` started this way reports about
14 MB, and 218 MB once the Python process has grown by 200 MB. GNU time's child starts from a
1 MB process. (Before this was found, a 40 ms cutrace run on a job of small ranks was charged
15 MiB, its real peak being 9 MiB.) Prints a Markdown table of medians and ratios.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

job = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
hta_py = sys.argv[3] if len(sys.argv) > 3 else sys.executable
here = os.path.dirname(os.path.abspath(__file__))
cutrace = os.environ.get("CUTRACE", os.path.join(here, "..", "target", "release", "cutrace"))

HTA = r"""
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_comm_comp_overlap(visualize=False)
"""


def children(pid):
    """The children of `pid`, from /proc/PID/task/*/children: a few reads per sample, where
    walking every process's /proc/PID/stat took a few milliseconds of a core every 10 ms, on the
    cores the measured process wants."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def tree_rss_kib(root, skip_root=False):
    """Resident set of `root` and every descendant, KiB; without `root`'s own when `skip_root`
    (GNU time, which runs the measured command as its child)."""
    total, todo = 0, (children(root) if skip_root else [root])
    while todo:
        p = todo.pop()
        todo.extend(children(p))
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


GNU_TIME = "/usr/bin/time"


def run(cmd):
    own = tempfile.NamedTemporaryFile(prefix="cutrace-bench-rss-", delete=False)
    own.close()
    timed = os.access(GNU_TIME, os.X_OK)
    if timed:
        cmd = [GNU_TIME, "-f", "%M", "-o", own.name] + cmd
    else:
        print(f"warning: no {GNU_TIME}: a process's own peak is read from ru_maxrss, which "
              "carries this script's size (see the module's doc)", file=sys.stderr)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss_kib(p.pid, skip_root=timed))
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    t.join()
    try:
        with open(own.name) as f:
            own_kib = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        if timed:
            raise SystemExit(f"{GNU_TIME} -f %M -o FILE wrote no peak: is it GNU time?")
        own_kib = ru.ru_maxrss
    os.unlink(own.name)
    if status != 0:
        raise SystemExit(f"{cmd} failed with status {status}")
    # A run shorter than the sampling interval can end unsampled: the process's own peak bounds
    # it from below. CPU time (user + system, with the workers it waited for) is less moved by
    # other load on a shared machine than wall time.
    cpu = ru.ru_utime + ru.ru_stime
    return wall, max(peak[0], own_kib) / 1024, own_kib / 1024, cpu  # MiB, s


variants = {
    "cutrace report JOB/ --format json": [cutrace, "report", job, "--format", "json"],
    "HTA TraceAnalysis(trace_dir) + get_comm_comp_overlap": [hta_py, "-c", HTA, job],
}
results = {k: [] for k in variants}
for r in range(reps):
    for name, cmd in variants.items():
        wall, tree, maxrss, cpu = run(cmd)
        results[name].append((wall, tree, maxrss, cpu))
        print(f"rep {r + 1}/{reps} {name}: {wall:.2f} s, {cpu:.2f} CPU-s, tree peak {tree:.0f} "
              f"MiB, own peak {maxrss:.0f} MiB", file=sys.stderr, flush=True)

files = [f for f in os.listdir(job) if f.endswith((".json", ".json.gz"))]
size = sum(os.path.getsize(os.path.join(job, f)) for f in files) / 1e6
first = list(variants)[0]
base_wall = statistics.median(x[0] for x in results[first])
base_mem = statistics.median(x[1] for x in results[first])
base_cpu = statistics.median(x[3] for x in results[first])
print(f"\njob: {len(files)} ranks, {size:.0f} MB; medians of {reps} alternating runs\n")
print("| tool | wall (s) | CPU (s) | peak memory, process tree (MiB) | main process's peak (MiB) | wall ÷ cutrace | "
      "CPU ÷ cutrace | memory ÷ cutrace |")
print("|---|---|---|---|---|---|---|---|")
for name in variants:
    wall = statistics.median(x[0] for x in results[name])
    mem = statistics.median(x[1] for x in results[name])
    maxrss = statistics.median(x[2] for x in results[name])
    cpu = statistics.median(x[3] for x in results[name])
    print(f"| {name} | {wall:.2f} | {cpu:.2f} | {mem:.0f} | {maxrss:.0f} | {wall / base_wall:.1f}× | "
          f"{cpu / base_cpu:.1f}× | {mem / base_mem:.1f}× |")
