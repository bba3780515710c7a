"""The Python API: runs the packaged ``cutrace`` binary and reads what it writes.

The binary is the one implementation; Python adds no analysis of its own, so ``report()`` and
``cutrace report --format json`` can never disagree.
"""

from __future__ import annotations

import html as _html
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    import pandas

PathLike = Union[str, "os.PathLike[str]"]
"""A trace's path: a cutrace trace (file or directory of parts) or a torch.profiler JSON trace."""

OptionValue = Union[None, bool, int, float, str, Sequence[str], Mapping[str, Union[int, str]]]
"""A command-line option's value: see :func:`report` for how each kind becomes flags."""


class CutraceError(RuntimeError):
    """The ``cutrace`` command failed: its exit status and what it said on stderr."""

    def __init__(self, command: Sequence[str], returncode: int, stderr: str) -> None:
        self.command: List[str] = list(command)
        self.returncode: int = returncode
        self.stderr: str = stderr
        message = stderr.strip() or "(it printed nothing on stderr)"
        super().__init__(f"cutrace exited with status {returncode}: {message}")


def binary() -> str:
    """The path of the ``cutrace`` binary this package runs.

    ``CUTRACE_BIN`` wins when set. Otherwise the binary the wheel installed into the scripts
    directory (``bin/``) of the environment that holds this package: a virtualenv or prefix
    (``PREFIX/lib/pythonX.Y/site-packages/cutrace`` beside ``PREFIX/bin``), a
    ``pip install --target DIR`` (``DIR/cutrace`` beside ``DIR/bin``), the interpreter's or the
    user's scripts directory; last, ``cutrace`` on ``PATH``.

    Raises:
        FileNotFoundError: no ``cutrace`` binary was found.
    """
    env = os.environ.get("CUTRACE_BIN")
    if env:
        return env
    here = Path(__file__).resolve().parent
    # PREFIX/lib/pythonX.Y/site-packages/cutrace -> PREFIX/bin; DIR/cutrace -> DIR/bin (a shallow
    # --target DIR such as /tmp/site has no PREFIX above it).
    candidates = [p / "bin" for p in here.parents[3:4]] + [here.parent / "bin"]
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = (
                sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
            )
        except KeyError:
            continue
        if scripts:
            candidates.append(Path(scripts))
    for directory in candidates:
        exe = directory / "cutrace"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    found = shutil.which("cutrace")
    if found:
        return found
    raise FileNotFoundError(
        "cannot find the cutrace binary (looked in "
        + ", ".join(str(d) for d in candidates)
        + " and on PATH); install it with `pip install .` in cutrace's checkout (cutrace is not"
        " on PyPI), or set CUTRACE_BIN to a `cutrace` binary"
    )


def run(args: Sequence[PathLike], *, progress: bool = True) -> str:
    """Runs ``cutrace ARGS`` and returns what it printed on stdout.

    ``args`` are the command line, passed as they are: put ``--`` before trace paths that may
    begin with ``-`` (``run(["report", "--", path])``), as :func:`report` does.

    Each line the command prints on stderr (the progress of a long read, notes, warnings) is
    passed on to ``sys.stderr`` as it comes when ``progress`` is true, so a notebook shows it under
    the running cell; it is kept for the error either way.

    Raises:
        CutraceError: the command exited with a status other than 0.
    """
    command = [binary(), *(os.fspath(a) for a in args)]
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    said: List[str] = []

    def pass_on_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", errors="replace")
            said.append(line)
            if progress:
                sys.stderr.write(line)
                sys.stderr.flush()

    # stderr is read on its own thread: a command that fills one pipe while we wait on the other
    # would otherwise never finish.
    pump = threading.Thread(target=pass_on_stderr, daemon=True)
    pump.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait()
    pump.join()
    if proc.returncode != 0:
        raise CutraceError(command, proc.returncode, "".join(said))
    return out.decode("utf-8")


def _flags(options: Mapping[str, OptionValue]) -> List[str]:
    """Keyword options as command-line flags (see :func:`report`).

    A value is joined to its flag (``--steps=NAME``), so a value that begins with ``-`` is the
    flag's value, never read as another flag.
    """
    flags: List[str] = []
    for key, value in options.items():
        name = key.rstrip("_").replace("_", "-")
        if not name or name.startswith("-") or "=" in name:
            raise TypeError(f"{key!r} is not an option name")
        flag = "--" + name
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, Mapping):
            joined = ",".join(f"{k.replace('_', '-')}={v}" for k, v in value.items())
            flags.append(f"{flag}={joined}")
        elif isinstance(value, (list, tuple)):
            flags += [f"{flag}={item}" for item in value]
        else:
            flags.append(f"{flag}={value}")
    return flags


def _paths(paths: Sequence[PathLike]) -> List[str]:
    """Trace paths as the last arguments of a command line: ``--``, then each path. After ``--``
    the command reads every argument as a path, so a file named ``--help`` or ``-o`` is a trace,
    never an option. ``-`` alone would still be the command's stdin, which these functions do not
    give it: it is the file of that name, ``./-``.
    """
    return ["--", *("./-" if os.fspath(p) == "-" else os.fspath(p) for p in paths)]


def _write_new(dest: PathLike, text: str) -> None:
    """Writes ``text`` to a new file ``dest`` (mode 0600) as cutrace writes its exports: under an
    unpredictable name beside it, created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (a link planted there
    makes the create fail and retry under another name; nothing is written through it), flushed,
    then linked into place with ``link(2)``, which fails if anything is at ``dest``, a link
    included, so a name planted after any check is never replaced or written through. The
    temporary name is removed either way.

    Raises:
        FileExistsError: something is at ``dest`` already; it is left as it is.
    """
    dest = os.fspath(dest)
    folder, name = os.path.split(dest)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.urandom(8).hex()}.cutrace-tmp")
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"cannot create a temporary file beside {dest}")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        exists = FileExistsError(
            f"{dest} exists already: cutrace does not replace it (choose a new or empty directory)"
        )
        try:
            os.link(tmp, dest, follow_symlinks=False)
        except FileExistsError:
            raise exists from None
        except OSError:
            # A filesystem without hard links: the check, then a rename, which replaces a link
            # planted in between instead of writing through it.
            if os.path.lexists(dest):
                raise exists from None
            os.rename(tmp, dest)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def report(path: PathLike, *, progress: bool = True, **options: OptionValue) -> Dict[str, Any]:
    """The report of a trace: the JSON object ``cutrace report --format json`` prints, as a dict.

    Options become ``cutrace report`` flags: an underscore becomes a dash and a trailing one is
    dropped (``from_="2s"`` is ``--from 2s``, ``to="2.5s"``, ``top=20``, ``orphans=5``,
    ``steps="train_step"``); ``True`` gives the bare flag, ``None`` and ``False`` leave it out, a
    list repeats it, and a dict gives ``NAME=VALUE,...`` (``limit={"string_bytes": "1M"}``).
    Integers are exact nanoseconds (Python's ints do not round, unlike JavaScript's numbers).

    Args:
        path: the trace (a cutrace trace file or directory, or a torch.profiler JSON trace).
        progress: pass the command's stderr (progress of long reads) on to ``sys.stderr``.

    Raises:
        CutraceError: the command failed (an unreadable trace, a bad option); its message says why.
    """
    if "format" in options:
        raise TypeError("report() always asks for JSON; use the command line for text")
    out = run(["report", "--format", "json", *_flags(options), *_paths([path])], progress=progress)
    data: Dict[str, Any] = json.loads(out)
    return data


def tables(
    path: PathLike, *, progress: bool = True, **options: OptionValue
) -> Dict[str, "pandas.DataFrame"]:
    """The trace's tables as pandas DataFrames, keyed by table name (``kernels``, ``api_calls``,
    ``memcpys``, ``memsets``, ``syncs``, ``ranges``, ``marks``, ``overheads``).

    They come through ``cutrace convert --parquet`` into a temporary directory, removed before
    returning; the columns are those of docs/EXPORTS.md's Parquet export. For a distributed job
    (a directory of ranks' traces) each table holds every rank's rows, with a ``rank`` column. Options become
    ``cutrace convert`` flags as in :func:`report` (``limit=...``, ``allow_damaged=True``).

    Raises:
        ImportError: pandas or pyarrow is missing (``pip install pandas pyarrow``).
        CutraceError: the command failed.
    """
    missing = (
        "cutrace.tables() needs pandas and pyarrow, which are optional: "
        "pip install pandas pyarrow (or, in cutrace's checkout, pip install '.[pandas]')"
    )
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError(missing) from e
    # pandas reads Parquet through pyarrow; without it, read_parquet would fail only after the export.
    if importlib.util.find_spec("pyarrow") is None:
        raise ImportError(missing)
    with tempfile.TemporaryDirectory(prefix="cutrace-tables-") as tmp:
        out_dir = Path(tmp) / "tables"
        run(
            ["convert", "--parquet", out_dir, *_flags(options), *_paths([path])],
            progress=progress,
        )
        frames = {p.stem: pd.read_parquet(p) for p in sorted(out_dir.glob("*.parquet"))}
        # A distributed job: each table is a directory of rank=N partitions, read whole with
        # its `rank` column (docs/EXPORTS.md); `meta` holds JSON, not a table.
        for d in sorted(p for p in out_dir.iterdir() if p.is_dir() and p.name != "meta"):
            if any(d.glob("rank=*/*.parquet")):
                frames[d.name] = pd.read_parquet(d)
        return frames


def _pandas(what: str) -> Any:
    """pandas, imported when a DataFrame is asked for; it is optional."""
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError(
            f"{what} returns a pandas DataFrame, and pandas is optional: pip install pandas "
            "(in cutrace's checkout, pip install '.[pandas]' also adds pyarrow, for "
            "cutrace.tables()); the same rows are in Report.data, as dicts"
        ) from e
    return pd


def _flatten(row: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A JSON object as one row: nested objects become dotted columns (``before.name``); lists
    stay as they are, one cell."""
    out: Dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _frame(rows: Sequence[Mapping[str, Any]], what: str) -> "pandas.DataFrame":
    """The report's rows as a DataFrame, a column per field in the report's order.

    Integers stay exact: a column of integers with gaps (``null`` in the JSON, as a rank with no
    step has no ``step_median_ns``) is pandas' nullable ``Int64``, not float, which would round
    nanosecond clocks above 2**53.
    """
    pd = _pandas(what)
    flat = [_flatten(r) for r in rows]
    columns: Dict[str, None] = {}
    for r in flat:
        columns.update(dict.fromkeys(r))
    data: Dict[str, Any] = {}
    for c in columns:
        values = [r.get(c) for r in flat]
        present = [v for v in values if v is not None]
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in present)
        if present and ints and len(present) < len(values):
            data[c] = pd.array(values, dtype="Int64")
        else:
            data[c] = pd.Series(values, dtype=object if not present else None)
    frame: "pandas.DataFrame" = pd.DataFrame(data, columns=list(columns))
    return frame


class Report:
    """A trace's or a job's report for notebooks: the JSON report as :attr:`data`, its tables as
    pandas DataFrames (:meth:`summary`, :meth:`kernels`, :meth:`gaps`, :meth:`steps`, a job's
    :meth:`ranks`, ...), and in Jupyter the HTML report (``cutrace report --html``) drawn
    inline, in an iframe of its own.

    The report is made on first use and kept. Options are :func:`report`'s.

    Example::

        r = cutrace.Report("run1/", steps="train_step")
        r                                   # the HTML report, inline
        r["devices"][0]["busy_ns"]          # the JSON report's fields
        r.summary()                         # a DataFrame: one row per GPU (a job: per rank)
    """

    def __init__(self, path: PathLike, *, progress: bool = True, **options: OptionValue) -> None:
        self.path: str = os.fspath(path)
        self.options: Dict[str, OptionValue] = dict(options)
        self.progress: bool = progress
        self._data: Optional[Dict[str, Any]] = None
        self._html: Optional[str] = None
        self._text: Optional[str] = None

    @property
    def data(self) -> Dict[str, Any]:
        """The JSON report (:func:`report`)."""
        if self._data is None:
            self._data = report(self.path, progress=self.progress, **self.options)
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def is_job(self) -> bool:
        """Whether this is a distributed job's report (``"kind": "job"``): several ranks."""
        return self.data.get("kind") == "job"

    def _trace_only(self, what: str, instead: str) -> None:
        if self.is_job:
            raise ValueError(
                f"Report.{what}() is a single trace's table, and {self.path} is a job of "
                f"{len(self.data.get('ranks', []))} ranks: {instead}"
            )

    def summary(self) -> "pandas.DataFrame":
        """The verdict's figures as a DataFrame: one row per GPU (``summary.devices``: busy,
        compute, communication, copy and idle time and shares, gaps, idle waiting for the host);
        for a job, one row per rank (:meth:`ranks`)."""
        if self.is_job:
            return _frame(self.data["ranks"], "Report.summary()")
        return _frame(self.data["summary"]["devices"], "Report.summary()")

    def ranks(self) -> "pandas.DataFrame":
        """A job's per-rank table (``ranks``): busy, communication, exposed communication, wait,
        idle, steps, one row per live rank."""
        if not self.is_job:
            raise ValueError(
                f"Report.ranks() is a job's table, and {self.path} is one trace: "
                "Report.summary() gives its GPUs"
            )
        return _frame(self.data["ranks"], "Report.ranks()")

    def kernels(self) -> "pandas.DataFrame":
        """The kernel summary (``kernel_summary``): one row per kernel name, the longest in total
        first: count, total, mean, min, median, p99, max, share of kernel time. The report keeps
        the ``top`` names (an option, 10 by default); every kernel is in ``cutrace.tables()``."""
        self._trace_only("kernels", "cutrace.tables(JOB)['kernels'] holds every rank's kernels")
        return _frame(self.data["kernel_summary"], "Report.kernels()")

    def api_calls(self) -> "pandas.DataFrame":
        """The API call summary (``api_summary``): one row per CUDA (or HIP) call name."""
        self._trace_only("api_calls", "cutrace.tables(JOB)['api_calls'] holds every rank's calls")
        return _frame(self.data["api_summary"], "Report.api_calls()")

    def gaps(self) -> "pandas.DataFrame":
        """Each GPU's largest idle gaps (``devices[].largest_gaps``), with a ``device`` column:
        start, end, length, the kernels before and after (``before.name``, ...) and what the host
        did meanwhile (``host.reading``, ``host.next_launch.name``, ...)."""
        self._trace_only("gaps", "report one rank's trace, cutrace.Report(TRACE).gaps()")
        rows = [
            {"device": d["device"], **gap}
            for d in self.data["devices"]
            for gap in d.get("largest_gaps", [])
        ]
        return _frame(rows, "Report.gaps()")

    def steps(self) -> "pandas.DataFrame":
        """One row per step (``steps.steps``); for a job, per step its slowest and fastest rank.
        Empty when no step matched (the ``steps`` option names them)."""
        return _frame(self.data.get("steps", {}).get("steps", []), "Report.steps()")

    def collectives(self) -> "pandas.DataFrame":
        """A job's collectives with the largest skew (``collectives.largest``): the first and the
        last rank to arrive, and the time between them."""
        if not self.is_job:
            raise ValueError(f"Report.collectives() is a job's table, and {self.path} is one trace")
        return _frame(self.data["collectives"].get("largest", []), "Report.collectives()")

    def text(self) -> str:
        """The text report, as ``cutrace report`` prints it."""
        return self._text_of(self.progress)

    def _text_of(self, progress: bool) -> str:
        if self._text is None:
            self._text = run(
                ["report", *_flags(self.options), *_paths([self.path])], progress=progress
            )
        return self._text

    def html(self) -> str:
        """The HTML report: one self-contained page, as text (``cutrace report --html``)."""
        return self._page(self.progress)

    def _page(self, progress: bool) -> str:
        if self._html is None:
            with tempfile.TemporaryDirectory(prefix="cutrace-html-") as tmp:
                out = Path(tmp) / "report.html"
                run(
                    ["report", "--html", out, *_flags(self.options), *_paths([self.path])],
                    progress=progress,
                )
                self._html = out.read_text(encoding="utf-8")
        return self._html

    def _repr_html_(self) -> str:
        # Jupyter shows a failing _repr_html_ as a traceback far from the cause; the command's own
        # message, shown where the report would be, says why.
        try:
            # A job's page is asked for quietly: a cutrace whose --html takes one trace refuses
            # it, and the text report shown instead says why in one grey line, not as an error
            # under the cell. The job's read itself (the JSON report) shows its progress.
            page = self._page(self.progress and not self.is_job)
        except CutraceError as no_page:
            return self._text_html(no_page)
        # The page is a whole document with its own styles and scripts: in an iframe they can
        # neither restyle the notebook nor be restyled by it. sandbox="allow-scripts" without
        # allow-same-origin gives it an opaque origin of its own: its script draws and sorts, and
        # cannot reach the notebook's page, cookies, storage or kernel (a name from a trace is
        # escaped, and the page's own policy runs only its own script; this holds if both fail).
        return (
            '<iframe sandbox="allow-scripts" title="cutrace report" '
            'style="width:100%;height:900px;border:0" srcdoc="'
            + _html.escape(page, quote=True)
            + '"></iframe>'
        )

    def _text_html(self, no_page: CutraceError) -> str:
        """The text report, where no HTML page could be made (a cutrace whose ``--html`` takes
        one trace, given a job): the same figures, readable, with why there is no page below."""
        try:
            text = self._text_of(False)
        except CutraceError as e:
            return f"<pre>cutrace could not make the report:\n{_html.escape(str(e))}</pre>"
        said = no_page.stderr.strip().splitlines()
        why = said[-1] if said else str(no_page)
        return (
            '<pre class="cutrace-report">'
            + _html.escape(text)
            + '</pre><p style="color:#777;font-size:smaller">The text report: no HTML page ('
            + _html.escape(why)
            + ")</p>"
        )

    def __repr__(self) -> str:
        return f"cutrace.Report({self.path!r})"
