#!/usr/bin/env bash
# docs/PYTHON.md's examples, run as a notebook: docs/examples/python.ipynb is the page's code
# blocks (tests/tools/doc_notebook.py --check fails when it is not), executed by
# `jupyter nbconvert --to notebook --execute` on a bundled trace and a generated job of 4 ranks.
# Fails on an error in any cell or an example that gives an empty table (the notebook's first
# cell checks every expression). Then two notebooks that must fail, so that the checks are known
# to bite: one with an example giving an empty DataFrame, one with a Report of a missing trace.
#
# usage: tests/python_notebook.sh VENV CUTRACE_BINARY
# VENV has nbconvert, ipykernel, pandas, pyarrow, dask and distributed. The kernel, IPython,
# Jupyter and Dask write only into one temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$(cd "$1" && pwd)
bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
python3 tests/tools/doc_notebook.py --check
work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-notebook.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The kernel's own files (and its TMPDIR: the notebook's scratch directory, the tables' temporary
# directories, Dask's) go to $work, and the kernel spec found is the virtualenv's own.
nbconvert() {
    env TMPDIR="$work" JUPYTER_DATA_DIR="$work/jupyter" JUPYTER_CONFIG_DIR="$work/jupyter-config" \
        IPYTHONDIR="$work/ipython" DASK_CONFIG="$work/dask" PYTHONPATH="$root/python" \
        CUTRACE_BIN="$bin" "$venv/bin/jupyter" nbconvert --log-level=ERROR --to notebook \
        --execute --ExecutePreprocessor.timeout=600 --stdout "$@"
}
nbconvert docs/examples/python.ipynb > "$work/ran.ipynb"
# The last cell ran to its end: its output is the count of expressions checked.
"$venv/bin/python" - "$work/ran.ipynb" <<'PY'
import json, sys
said = "".join("".join(o.get("text", "")) for o in json.load(open(sys.argv[1]))["cells"][-1]["outputs"])
if "none empty" not in said:
    sys.exit(f"FAIL the notebook's last cell said {said!r}")
print("ok  ", said.strip())
PY

# Mutants: a cell added before the last one must make the run fail, with the reason given.
mutant() {
    "$venv/bin/python" - "$1" > "$work/mutant.ipynb" <<'PY'
import json, sys
nb = json.load(open("docs/examples/python.ipynb"))
nb["cells"].insert(-1, {"cell_type": "code", "id": "mutant", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": sys.argv[1]})
json.dump(nb, sys.stdout)
PY
    # From stdin and in docs/examples/, as the notebook itself runs (it finds the checkout there).
    (cd docs/examples && nbconvert --stdin < "$work/mutant.ipynb" > /dev/null 2> "$work/mutant.err") && return 1
    grep -q "$2" "$work/mutant.err"
}
mutant 'import pandas
pandas.DataFrame({"name": []})' 'is an empty table' \
    || { echo "FAIL an example giving an empty DataFrame did not fail the notebook"; exit 1; }
echo "ok   an example giving an empty DataFrame fails the notebook"
mutant 'cutrace.Report("no-such-trace/")' 'its view is an error' \
    || { echo "FAIL a Report whose view is an error did not fail the notebook"; exit 1; }
echo "ok   a Report of a missing trace fails the notebook"
echo "python notebook: PASS"
