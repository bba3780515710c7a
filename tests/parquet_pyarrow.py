#!/usr/bin/env python3
"""Reads every table of a `cutrace convert --parquet` export with pyarrow and checks it against
the `--csv` export of the same trace: same columns in the same order, same row count, every value
equal (a null is an empty CSV field), unsigned columns read as unsigned, and the trace metadata
under `cutrace.meta` equal to meta.json. Prints one line per table; exit 1 on any difference.

usage: parquet_pyarrow.py PARQUET_DIR CSV_DIR
"""
import csv
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

TABLES = ["kernels", "api_calls", "memcpys", "memsets", "syncs", "ranges", "marks", "overheads"]
U64 = {"start_ns", "end_ns", "ts_ns", "correlation_id", "stream", "bytes", "thread"}


def expected_type(table, col):
    """The Arrow type each column must read as (the model's Rust type)."""
    if col in ("kind", "name", "domain", "nvtx_domain", "kernel", "metric"):
        return pa.string()
    if table in ("kernel_metrics", "pm_samples") and col == "value":
        return pa.float64()
    if col == "return_value":
        return pa.int32()
    return pa.uint64() if col in U64 else pa.uint32()


def main():
    pqdir, csvdir = sys.argv[1], sys.argv[2]
    meta = json.load(open(f"{pqdir}/meta.json"))
    # kernel_metrics exists only for traces with hardware counters (`cutrace profile`), and
    # pm_samples only for traces with PM samples (`cutrace sample`).
    extra = [
        n for n in ("kernel_metrics", "pm_samples") if os.path.exists(f"{pqdir}/{n}.parquet")
    ]
    for name in TABLES + extra:
        path = f"{pqdir}/{name}.parquet"
        t = pq.read_table(path)
        with open(f"{csvdir}/{name}.csv", newline="") as f:
            r = csv.reader(f)
            header = next(r)
            rows = list(r)
        assert t.column_names == header, (name, t.column_names, header)
        assert t.num_rows == len(rows), (name, t.num_rows, len(rows))
        for j, col in enumerate(t.column_names):
            ty = t.schema.field(col).type
            assert ty == expected_type(name, col), (name, col, ty)
            for i, v in enumerate(t.column(col).to_pylist()):
                want = rows[i][j]
                if isinstance(v, float):
                    # The CSV writes the shortest text that reads back the same double (Rust
                    # spells an exponent `e-5` where Python writes `e-05`): compare the doubles.
                    assert want != "" and float(want) == v, (name, col, i, v, want)
                    continue
                got = "" if v is None else str(v)
                assert got == want, (name, col, i, got, want)
        assert json.loads(pq.read_metadata(path).metadata[b"cutrace.meta"]) == meta, name
        types = ", ".join(f"{f.name}:{f.type}" for f in t.schema)
        print(f"{name}: {t.num_rows} rows equal to the CSV; {types}")


if __name__ == "__main__":
    main()
