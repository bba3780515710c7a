"""A distributed job's analysis on a Dask cluster: the per-rank map runs on the cluster's workers,
the cross-rank reduce is cutrace's own.

Each rank's trace is reduced to a small summary by ``cutrace report --rank-summary -o - TRACE``
on a worker (a whole trace is read where it lies, and only the summary, a few kB, travels back);
the job report is then ``cutrace report --format json S0.json S1.json ...`` over those summaries,
on the client, written for it into a directory of its own that only this user can enter. Python
adds no analysis: the numbers are exactly those of ``cutrace report JOB --format json`` run on
one machine.

Example::

    from dask.distributed import Client, LocalCluster
    import cutrace.dask

    with LocalCluster(n_workers=2) as cluster, Client(cluster) as client:
        job = cutrace.dask.analyze_job(["traces/"], client)
    job["ranks"][0]["exposed_comm_ns"]

Needs ``dask`` and ``distributed`` (``pip install dask distributed``, or ``pip install '.[dask]'`` in cutrace's checkout) where the client runs, and on
every worker the ``cutrace`` package (or a ``cutrace`` binary: ``binary=``) and the traces at the
same paths (a shared filesystem).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from ._api import CutraceError, OptionValue, PathLike, _flags, _paths, _write_new, run

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["analyze_job", "job_traces", "rank_summary"]

_PART = ".cutrace"


def _is_trace_file(p: Path) -> bool:
    return p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))


def _dir_traces(d: Path, depth: int) -> List[str]:
    entries = sorted(d.iterdir())
    if any(p.is_file() and p.suffix == _PART for p in entries):
        return [str(d)]
    files = [str(p) for p in entries if _is_trace_file(p)]
    if files or depth > 0:
        return files
    return [t for p in entries if p.is_dir() for t in _dir_traces(p, depth + 1)]


def job_traces(paths: Sequence[PathLike]) -> List[str]:
    """The traces of a job, one per rank, found as ``cutrace report`` finds them: a file is one
    trace; a directory of native parts is one trace; another directory gives its torch.profiler
    files (``*.json``, ``*.json.gz``), or, when it holds none, each of its subdirectories' traces
    (a directory per host or rank), in name order.

    A directory of native parts that holds several ranks' parts (``cutrace record`` of a whole
    job on one host) is one trace here: give its ``.cutrace`` files instead, one per rank, or run
    ``cutrace report`` on it.
    """
    out: List[str] = []
    for p in map(Path, (os.fspath(x) for x in paths)):
        out.extend(_dir_traces(p, 0) if p.is_dir() else [str(p)])
    return out


def rank_summary(
    trace: str, *, binary: Optional[str] = None, options: Sequence[str] = ()
) -> str:
    """The map step, on a worker: ``cutrace report --rank-summary TRACE`` and its summary's JSON
    text, read from the command's stdout (no file is written). ``binary`` is the ``cutrace``
    binary on the worker (default: :func:`cutrace.binary` there); ``options`` are extra
    ``cutrace report`` flags (``--steps=NAME``), put before ``--`` and the trace, which is
    read as a path even when it begins with ``-``.
    """
    args = ["report", "--rank-summary", "-o", "-", *options, *_paths([trace])]
    if binary is None:
        return run(args, progress=False)
    p = subprocess.run([binary, *args], stdin=subprocess.DEVNULL, capture_output=True)
    if p.returncode != 0:
        raise CutraceError([binary, *args], p.returncode, p.stderr.decode(errors="replace"))
    return p.stdout.decode("utf-8")


def analyze_job(
    paths: Sequence[PathLike],
    client: "Client",
    *,
    binary: Optional[str] = None,
    summaries: Optional[PathLike] = None,
    progress: bool = True,
    **options: OptionValue,
) -> Dict[str, Any]:
    """The job report of the traces ``paths`` (see :func:`job_traces`), the map on ``client``'s
    cluster, the reduce here: the object ``cutrace report JOB --format json`` prints.

    Args:
        paths: the job: trace files, directories of native parts, or directories of traces.
        client: a ``distributed.Client``; its workers read the traces.
        binary: the ``cutrace`` binary on the workers, when it is not the one the package there
            finds (:func:`cutrace.binary`).
        summaries: a directory to keep the per-rank summaries in (``rank-summary-NNNNN.json``,
            in job order), created (mode 0700) if missing. Each file is new, mode 0600, and never
            written through a link; an existing name is a ``FileExistsError``. The job report
            is reduced from this call's own copies, not from these files.
        progress: pass the reduce's stderr (notes on dead or missing ranks) on to ``sys.stderr``.
        options: flags for the map (``steps="train_step"``), as :func:`cutrace.report` takes them.

    Raises:
        CutraceError: a map or the reduce failed; its message is cutrace's.
        ValueError: ``paths`` hold no trace.
        FileExistsError: a summary's name in ``summaries`` is taken (nothing is replaced).
    """
    traces = job_traces(paths)
    if not traces:
        raise ValueError(
            f"no traces in {[os.fspath(p) for p in paths]} (torch.profiler .json/.json.gz files "
            "or directories of .cutrace parts)"
        )
    flags = _flags(options)
    names = [f"rank-summary-{i:05d}.json" for i in range(len(traces))]
    if summaries is not None:
        # Said before the map, not after it: a taken name is refused without reading a trace.
        # (Each file is still created exclusively below: one planted meanwhile is refused too.)
        taken = [n for n in names if os.path.lexists(os.path.join(os.fspath(summaries), n))]
        if taken:
            raise FileExistsError(
                f"{os.path.join(os.fspath(summaries), taken[0])} exists ({len(taken)} of the "
                "job's summary names are taken); choose another summaries= directory or remove them"
            )
    # pure=False: a trace rewritten in place is read again, not served from an earlier result.
    futures = client.map(rank_summary, traces, binary=binary, options=flags, pure=False)
    texts: List[str] = client.gather(futures)
    if summaries is not None:
        # The user's copies: new files, never written through a link. They are not read back:
        # whoever else can write that directory could swap one after it is written.
        where = Path(os.fspath(summaries))
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, text in zip(names, texts):
            _write_new(where / name, text)
    # The reduce reads copies in a directory of its own (mkdtemp: mode 0700, a random name), which
    # only this user can change.
    with tempfile.TemporaryDirectory(prefix="cutrace-job-") as tmp:
        files = [os.path.join(tmp, name) for name in names]
        for f, text in zip(files, texts):
            _write_new(f, text)
        out = run(["report", "--format", "json", *_paths(files)], progress=progress)
    data: Dict[str, Any] = json.loads(out)
    return data
