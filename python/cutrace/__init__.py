"""cutrace from Python: the packaged ``cutrace`` command line, driven from scripts and notebooks.

Every function runs the ``cutrace`` binary that came with this package (see :func:`binary`), so
the numbers are the command line's own, exactly::

    import cutrace
    r = cutrace.report("trace.json.gz")          # the JSON report, as a dict
    r["devices"][0]["busy_ns"]
    frames = cutrace.tables("run1/")              # pandas DataFrames, one per table
    cutrace.Report("run1/")                       # in Jupyter: the HTML report, inline
    cutrace.Report("run1/").summary()             # a DataFrame: one row per GPU (a job: per rank)

Tracing itself stays a command: ``cutrace record -o run1 -- python3 train.py`` (or
``python -m cutrace record ...``).
"""

from ._api import CutraceError, Report, binary, report, run, tables

__all__ = ["CutraceError", "Report", "binary", "report", "run", "tables"]
