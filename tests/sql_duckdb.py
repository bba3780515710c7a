#!/usr/bin/env python3
"""docs/SQL.md's recipes, run in DuckDB over `cutrace convert --parquet` partitions of a job, give
exactly the numbers of cutrace's JSON report: per rank and GPU busy time, window, idle time, gaps,
their histogram and the largest of them (against `cutrace report RANK_TRACE --format json`), and
per rank busy, communication and exposed communication (against the job report's `ranks[]`).

Jobs: the repository's fixtures as the ranks of one job (torch.profiler traces of CUDA and ROCm,
native traces of one process and several), the real two-rank gloo job captured on the H200, edge
cases written here (touching, nested and zero-length kernels; NCCL kernels hidden, half hidden
and exposed, on two GPUs), and the synthetic job tests/tools/gen_job.py writes (NCCL kernels,
planted stragglers, dead ranks), also against the answer it planted.

Usage: tests/sql_duckdb.py CUTRACE_BINARY. Prints one `ok` line per check and `sql recipes: PASS`;
exits 77 with a SKIPPED line when the duckdb module cannot be imported (CI installs it from PyPI,
see .ci/run), 1 on the first difference.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = [
    "tests/fixtures/kineto/two_streams.json.gz",
    "tests/fixtures/kineto/cuda_graph.json.gz",
    "tests/fixtures/kineto/launch_bound.json.gz",
    "tests/fixtures/kineto/train_step.json.gz",
    "tests/fixtures/kineto/copy_overlap.json.gz",
    "tests/fixtures/native/multiproc",
    "tests/fixtures/native/two_streams",
    "tests/fixtures/native/threads8",
    "tests/fixtures/kineto/rocm_hex_streams.json.gz",
]
# A real two-rank job captured on the H200 (gloo: its collectives run on the CPU).
GLOO = ["tests/fixtures/kineto/gloo_rank1.json.gz", "tests/fixtures/kineto/gloo_rank0.json.gz"]
TOP = 10


def fail(msg):
    print(f"FAIL {msg}")
    print("sql recipes: FAIL")
    sys.exit(1)


def run(cutrace, *args):
    p = subprocess.run([cutrace, *args], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"cutrace {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def recipes():
    """(name, sql) for every ```sql block of docs/SQL.md, in order."""
    with open(os.path.join(ROOT, "docs/SQL.md"), encoding="utf-8") as f:
        text = f.read()
    out = []
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- recipe: (\w+)\n", block)
        if not m:
            fail(f"a SQL block of docs/SQL.md has no `-- recipe: NAME` first line: {block[:60]}")
        out.append((m.group(1), block))
    return out


def run_recipes(duckdb, pq):
    """Every recipe over the partitions in `pq`; the rows of each query, as dicts, by name."""
    con = duckdb.connect()
    results = {}
    for name, sql in recipes():
        sql = sql.replace("'pq/", "'" + pq.replace("'", "''") + "/")
        rel = con.sql(sql)
        if rel is not None:
            cols = rel.columns
            results[name] = [dict(zip(cols, row)) for row in rel.fetchall()]
    return results


def by_key(rows, *keys):
    out = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def same(what, got, want):
    if got != want:
        fail(f"{what}: SQL gives {got}, cutrace {want}")


def check_devices(res, rank, report, label):
    """The per-GPU recipes for `rank` against the one-trace report `report`."""
    busy = by_key(res["busy"], "rank", "device")
    gaps = by_key(res["gap_summary"], "rank", "device")
    hist = by_key(res["gap_histogram"], "rank", "device")
    largest = by_key(res["largest_gaps"], "rank", "device")
    devices = [d for d in report["devices"] if d["window_end_ns"] is not None]
    sql_devices = sorted(d for (r, d) in busy if r == rank)
    same(f"{label}: GPUs", sql_devices, sorted(d["device"] for d in devices))
    for d in devices:
        key = (rank, d["device"])
        what = f"{label} GPU {d['device']}"
        [b] = busy[key]
        for f in ["busy_ns", "window_start_ns", "window_end_ns", "window_ns", "idle_ns"]:
            same(f"{what} {f}", b[f], d[f])
        [g] = gaps.get(key, [{"gaps": 0, "idle_ns": 0}])
        same(f"{what} gaps", g["gaps"], d["gaps"])
        same(f"{what} idle_ns (gaps)", g["idle_ns"] or 0, d["idle_ns"])
        want = [(i, h["count"], h["total_ns"]) for i, h in enumerate(d["gap_histogram"]) if h["count"]]
        got = [(h["bucket"], h["count"], h["total_ns"]) for h in hist.get(key, [])]
        same(f"{what} gap_histogram", got, want)
        want = [(x["start_ns"], x["end_ns"], x["length_ns"]) for x in d["largest_gaps"]]
        got = [(x["start_ns"], x["end_ns"], x["length_ns"]) for x in largest.get(key, [])]
        same(f"{what} largest_gaps", got, want)
    print(f"ok   {label}: busy, window, idle, gaps, histogram and largest gaps of "
          f"{len(devices)} GPU(s) as rank {rank}")


def check_ranks(res, job, label):
    """The per-rank recipe against the job report's `ranks[]` (live ranks)."""
    want = {r["rank"]: r for r in job["ranks"]}
    got = {r["rank"]: r for r in res["ranks"]}
    same(f"{label}: ranks", sorted(got), sorted(want))
    for rank, w in want.items():
        for f in ["busy_ns", "comm_ns", "exposed_comm_ns"]:
            same(f"{label} rank {rank} {f}", got[rank][f], w[f])
    exposed = sum(r["exposed_comm_ns"] for r in want.values())
    print(f"ok   {label}: busy_ns, comm_ns and exposed_comm_ns of {len(want)} ranks "
          f"(exposed communication in all: {exposed} ns)")


# Edge cases the fixtures lack, two GPUs per rank (device, start µs, duration µs, name): kernels
# that touch (they merge), nest, overlap, have zero length; NCCL kernels hidden, half hidden and
# exposed, mangled and not.
EDGE = {
    "rank0": [
        (0, "1000.000", "5.000", "gemm"),
        (0, "1005.000", "2.000", "gemm"),           # touches the one before: one run
        (0, "1005.500", "0.500", "relu"),           # inside it
        (0, "1010.000", "0.000", "empty"),          # zero length: splits no gap
        (0, "1012.000", "4.000", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"),
        (0, "1014.000", "1.000", "gemm"),           # hides 1 µs of the all-reduce
        (0, "1020.000", "3.000", "ncclKernel_AllGather_RING_LL_Sum_float(w)"),  # exposed
        (1, "1001.000", "2.000", "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24x"),
        (1, "1000.500", "3.000", "gemm"),           # covers the mangled NCCL kernel
        (1, "1100.000", "0.001", "tiny"),
    ],
    "rank1": [
        (0, "2000.000", "1.000", "gemm"),
        (0, "2001.000", "1.000", "gemm"),
        (0, "2002.000", "1.000", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"),
        (1, "2000.000", "10.000", "void ncclDevKernel_SendRecv(x)"),
        (1, "2003.000", "1.000", "gemm"),
        (1, "2009.000", "2.000", "gemm"),
    ],
}


def write_edge_job(job):
    os.makedirs(job)
    for rank, kernels in EDGE.items():
        events = []
        for i, (dev, ts, dur, name) in enumerate(kernels):
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": 7,
                           "ts": float(ts), "dur": float(dur),
                           "args": {"device": dev, "stream": 7, "correlation": i + 1}})
        # Kineto's µs with three decimals, as text: exact nanoseconds.
        text = json.dumps({"schemaVersion": 1, "traceEvents": events})
        for dev, ts, dur, _ in kernels:
            text = text.replace(f'"ts": {float(ts)}', f'"ts": {ts}', 1)
        with open(os.path.join(job, f"{rank}.json"), "w") as f:
            f.write(text)


def ns(us):
    a, b = us.split(".")
    return int(a) * 1000 + int(b)


def union(ivs):
    """Disjoint runs of `ivs` (start, end), touching ones merged, empty ones dropped."""
    out = []
    for s, e in sorted(iv for iv in ivs if iv[1] > iv[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def edge_expected():
    """Per rank: busy, comm and exposed comm summed over GPUs, computed here independently."""
    is_comm = re.compile(r"^(void )?(_Z[0-9]+)?(ncclDevKernel_|ncclKernel_|ncclSymkDevKernel_|"
                         r"mscclKernel_)")
    out = {}
    for r, (rank, kernels) in enumerate(EDGE.items()):
        tot = {"busy_ns": 0, "comm_ns": 0, "exposed_comm_ns": 0}
        for dev in sorted({k[0] for k in kernels}):
            ivs = [(ns(ts), ns(ts) + ns(dur), bool(is_comm.match(n)))
                   for d, ts, dur, n in kernels if d == dev]
            busy = union([(s, e) for s, e, _ in ivs])
            comm = union([(s, e) for s, e, c in ivs if c])
            comp = union([(s, e) for s, e, c in ivs if not c])
            hidden = sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in comm for s2, e2 in comp)
            tot["busy_ns"] += sum(e - s for s, e in busy)
            tot["comm_ns"] += sum(e - s for s, e in comm)
            tot["exposed_comm_ns"] += sum(e - s for s, e in comm) - hidden
        out[r] = tot
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cutrace = os.path.abspath(sys.argv[1])
    try:
        import duckdb
    except ImportError as e:
        print(f"SKIPPED the SQL recipes in DuckDB: cannot import duckdb ({e})")
        sys.exit(77)
    print(f"duckdb {duckdb.__version__}")
    with tempfile.TemporaryDirectory(prefix="cutrace-sql-") as tmp:
        # The fixtures as the ranks of one job (numbered as the job report numbers them: the
        # rank a trace states, else the lowest free number in the order given), and the real
        # gloo job, given in reverse so that only the traces' own ranks put them in order.
        for name, traces in [("fixtures", FIXTURES), ("gloo job", GLOO)]:
            pq = os.path.join(tmp, name.replace(" ", "-"))
            run(cutrace, "convert", *traces, "--parquet", pq)
            res = run_recipes(duckdb, pq)
            job = json.loads(run(cutrace, "report", *traces, "--format", "json").stdout)
            rank_of = {x["paths"][0]: x["rank"] for x in job["ranks"]}
            for trace in traces:
                p = run(cutrace, "report", trace, "--format", "json", "--top", str(TOP))
                first = json.loads(p.stdout)["trace"]["paths"][0]
                label = f"{name}: {os.path.basename(trace.rstrip('/'))}"
                check_devices(res, rank_of[first], json.loads(p.stdout), label)
            check_ranks(res, job, name)
        same("gloo job: ranks", sorted(rank_of.values()), [0, 1])
        same("gloo job: rank of gloo_rank1", rank_of[GLOO[0]], 1)
        # The edge cases: per GPU against each rank's report, per rank against the numbers
        # computed above (and the job report's, once `cutrace report` reads a job).
        job = os.path.join(tmp, "edge")
        write_edge_job(job)
        pq = os.path.join(tmp, "edge-pq")
        run(cutrace, "convert", job, "--parquet", pq)
        res = run_recipes(duckdb, pq)
        for rank, name in enumerate(EDGE):
            p = run(cutrace, "report", os.path.join(job, f"{name}.json"), "--format", "json")
            check_devices(res, rank, json.loads(p.stdout), f"edge {name}")
        want = edge_expected()
        check_ranks(res, {"ranks": [dict(rank=r, **v) for r, v in want.items()]},
                    "edge job (independent Python union)")
        p = run(cutrace, "report", job, "--format", "json")
        check_ranks(res, json.loads(p.stdout), "edge job (cutrace's job report)")
        gen = os.path.join(ROOT, "tests/tools/gen_job.py")
        if not os.path.exists(gen):
            print("SKIPPED the synthetic job: tests/tools/gen_job.py is not in this checkout")
        else:
            job = os.path.join(tmp, "job")
            # Six ranks, one an empty file and one cut in half: dead, left out of both.
            subprocess.run([sys.executable, gen, job, "--ranks", "6", "--dead-empty", "1",
                            "--dead-truncated", "4"], check=True, cwd=ROOT,
                           stdout=subprocess.DEVNULL)
            pq = os.path.join(tmp, "job-pq")
            run(cutrace, "convert", job, "--parquet", pq)
            res = run_recipes(duckdb, pq)
            p = run(cutrace, "report", job, "--format", "json")
            report = json.loads(p.stdout)
            dead = sorted(d["rank"] for d in report["dead_ranks"])
            same("synthetic job: dead ranks", dead, [1, 4])
            check_ranks(res, report, "synthetic job")
            # And against the answer the generator planted, computed without cutrace.
            with open(job + ".answer.json") as f:
                answer = json.load(f)
            same("synthetic job: the generator's dead ranks", dead, sorted(answer["dead_ranks"]))
            planted = [dict(rank=int(r), **v) for r, v in answer["ranks"].items()]
            check_ranks(res, {"ranks": planted}, "synthetic job (the generator's answer)")
    print("sql recipes: PASS")


if __name__ == "__main__":
    main()
