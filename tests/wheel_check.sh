#!/usr/bin/env bash
# The Python package, installed as the README says: `pip install .` in a fresh copy of the
# checkout (its committed files; nothing built or prepared), into a fresh virtualenv; then
# tests/wheel_check.py runs there on the bundled example; and `cargo install --path
# crates/cutrace` in the same copy. Needs python3 with venv and pip, git, cargo, and PyPI for
# maturin. Ends with "wheel check: PASS" or "wheel check: FAIL".
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-wheel.XXXXXX")
trap 'rm -rf "$work"; [ "${ok:-}" = 1 ] || echo "wheel check: FAIL"' EXIT

# As the README says, in a fresh copy of the checkout with nothing prepared: `pip install .`
# (pip fetches maturin from PyPI and builds the release binary in the copy).
git clone --quiet "$PWD" "$work/src"
python3 -m venv "$work/env"
(cd "$work/src" && "$work/env/bin/pip" install --quiet --disable-pip-version-check .)
# The same copy's wheel, for the layouts below (the build above is reused).
(cd "$work/src" && "$work/env/bin/pip" wheel --quiet --disable-pip-version-check --no-deps -w "$work/wheels" .)
wheel=$(ls "$work"/wheels/cutrace-*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
# The README's other install, typed as it says, in the same fresh copy (CARGO_INSTALL_ROOT keeps
# it out of ~/.cargo): the command alone, carrying the injection library.
(cd "$work/src" && CARGO_INSTALL_ROOT="$work/cargo-root" cargo install --quiet --path crates/cutrace)
echo "cargo install: bin/cutrace ($(du -k "$work/cargo-root/bin/cutrace" | cut -f1) KiB)"

# Nothing of the checkout may help the installed package: no CUTRACE_BIN, no CUTRACE_INJECT_LIB,
# a PATH without target/ or the build environment, and no cache holding an embedded library.
env -u CUTRACE_BIN -u CUTRACE_INJECT_LIB -u VIRTUAL_ENV PATH="$work/env/bin:/usr/bin:/bin" \
    XDG_CACHE_HOME="$work/cache" CLI="$PWD/target/release/cutrace" \
    "$work/env/bin/python" tests/wheel_check.py examples/two_streams.json.gz
# `pip install --target DIR` (DIR/cutrace beside DIR/bin), the layout of a shared site directory;
# into $work itself, only two levels below /, as /tmp/site would be.
"$work/env/bin/pip" install --quiet --disable-pip-version-check --no-index --target "$work" "$wheel"
env -u CUTRACE_BIN PYTHONPATH="$work" PATH=/usr/bin:/bin python3 -c '
import cutrace, sys
exe = cutrace.binary()
assert exe == sys.argv[1] + "/bin/cutrace", exe
assert cutrace.report(sys.argv[2])["devices"], "no devices"
print("ok   pip install --target: cutrace.binary() is", exe)' "$work" examples/two_streams.json.gz
# The binary alone, as `cargo install` left it: it reports, and record writes out the library it
# carries, once, content-addressed under the cache directory, and the program runs as before.
mkdir "$work/alone" && cp "$work/cargo-root/bin/cutrace" "$work/alone/"
"$work/alone/cutrace" report examples/two_streams.json.gz | grep -q 'busy' ||
    { echo "FAIL the cargo-installed binary does not report on the bundled example"; exit 1; }
for run in first again; do
    set +e
    XDG_CACHE_HOME="$work/alone-cache" "$work/alone/cutrace" record -q -o "$work/alone/t" -- \
        sh -c 'echo alone; exit 4' > "$work/alone/out"
    rc=$?
    set -e
    [ "$rc" = 4 ] && [ "$(cat "$work/alone/out")" = alone ] ||
        { echo "FAIL the binary alone ($run run): exit $rc, output $(cat "$work/alone/out")"; exit 1; }
done
written=$(find "$work/alone-cache/cutrace" -type f)
[ "$(echo "$written" | wc -l)" = 1 ] && [ "$(basename "$written")" = libcutrace_inject.so ] &&
    [ "$(head -c 4 "$written" | tail -c 3)" = ELF ] &&
    [ "$(stat -c %a "$(dirname "$written")")" = 700 ] ||
    { echo "FAIL the binary alone: expected one ELF libcutrace_inject.so in a 0700 directory, got: $written"; exit 1; }
echo "ok   the binary alone records, with the library it carries written out once"
ok=1
echo "wheel check: PASS ($((SECONDS - started)) s)"
