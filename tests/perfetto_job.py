#!/usr/bin/env python3
"""`cutrace convert JOB --perfetto` read by Perfetto's own tools: an 8-rank job
(tests/tools/gen_job.py) converts to one trace with 8 processes named `rank N …` and, under each,
exactly the kernels `cutrace report JOB --format json` counts for that rank.

Perfetto's Python package (`pip install perfetto`) reads it two ways: TraceProcessor (which
downloads its trace_processor_shell binary at first use) and, where that cannot start (no route
to the download), the package's `perfetto_trace.proto` bindings, which parse every packet
(no field the schema does not know) and are walked here as trace_processor would (interned
names per packet sequence, a track's process by its parent chain). It says which one ran.
Exit 1 on any mismatch.

usage: perfetto_job.py path/to/cutrace
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

RANKS = 8


def job_and_trace(cutrace, tmp):
    job = tmp / "job"
    gen = Path(__file__).parent / "tools" / "gen_job.py"
    subprocess.run([sys.executable, str(gen), str(job), "--ranks", str(RANKS), "--steps", "3",
                    "--kernels", "4", "--gzip"], check=True)
    out = tmp / "job.pftrace"
    subprocess.run([cutrace, "convert", str(job), "--perfetto", str(out)], check=True)
    report = json.loads(subprocess.run([cutrace, "report", str(job), "--format", "json"],
                                       check=True, capture_output=True).stdout)
    want = {f"rank {r['rank']}": r["kernels"] for r in report["ranks"]}
    assert len(want) == RANKS, want
    return out, want


def rank_of(name):
    # `rank 3` or `rank 3 (host a, pid 42)`.
    return " ".join(name.split(" ")[:2])


def with_trace_processor(trace):
    from perfetto.trace_processor import TraceProcessor
    tp = TraceProcessor(trace=str(trace))
    procs = [r.name for r in tp.query("select name from process where name like 'rank %'")]
    # A kernel's track is a GPU stream row under its GPU's track, under the rank's process.
    rows = tp.query("""
        with recursive up(id, top) as (
            select id, id from track
            union all
            select up.id, t.parent_id from up join track t on t.id = up.top
            where t.parent_id is not null)
        select p.name as name, count(*) as n
        from slice s
        join up on up.id = s.track_id
        join process_track pt on pt.id = up.top
        join process p using (upid)
        where s.category = 'kernel'
        group by p.name""")
    return procs, {rank_of(r.name): r.n for r in rows}


def with_schema(trace):
    from google.protobuf import unknown_fields
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as P

    t = P.Trace()
    t.ParseFromString(trace.read_bytes())

    def no_unknown(m, path=""):
        assert len(unknown_fields.UnknownFieldSet(m)) == 0, path
        for f, v in m.ListFields():
            if f.type == f.TYPE_MESSAGE:
                for x in (v if f.is_repeated else [v]):
                    no_unknown(x, path + "." + f.name)

    tracks, cats, counts = {}, {}, {}
    for p in t.packet:
        no_unknown(p)
        seq = p.trusted_packet_sequence_id
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in tracks, f"track {d.uuid} described twice"
            tracks[d.uuid] = d
            continue
        if p.sequence_flags & 1:
            cats = {k: v for k, v in cats.items() if k[0] != seq}
        for c in p.interned_data.event_categories:
            cats[(seq, c.iid)] = c.name
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        names = [cats[(seq, i)] for i in e.category_iids] + list(e.categories)
        if e.type != 1 or names != ["kernel"]:
            continue
        d = tracks[e.track_uuid]
        while not d.HasField("process"):
            d = tracks[d.parent_uuid]
        key = rank_of(d.process.process_name)
        counts[key] = counts.get(key, 0) + 1
    procs = [d.process.process_name for d in tracks.values()
             if d.HasField("process") and d.process.process_name.startswith("rank ")]
    pids = {d.process.pid for d in tracks.values() if d.HasField("process")}
    assert len(pids) == len(procs), "two ranks share a pid"
    return procs, counts


def main():
    cutrace = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="cutrace-pf-job-") as tmp:
        trace, want = job_and_trace(cutrace, Path(tmp))
        try:
            procs, got = with_trace_processor(trace)
            how = "TraceProcessor"
        except Exception as e:  # its binary is downloaded at first use
            print(f"perfetto_job: TraceProcessor could not run ({type(e).__name__}); "
                  "checked with perfetto_trace.proto's bindings instead", file=sys.stderr)
            procs, got = with_schema(trace)
            how = "perfetto_trace.proto bindings"
    assert len(procs) == RANKS, procs
    assert got == want, (got, want)
    print(f"perfetto_job: {RANKS} rank processes, {sum(got.values())} kernels, each rank's "
          f"count the report's ({how})")


if __name__ == "__main__":
    main()
