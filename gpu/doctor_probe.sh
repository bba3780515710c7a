#!/usr/bin/env bash
# `cutrace doctor --probe` and `cutrace audit` on the GPU machine, plus a snapshot of the files the
# doctor reads (to commit as the real machine's fixture tree). Everything goes into one tarball,
# $OUT/doctor.tar.gz.
#
# usage (repository root on the GPU machine): bash gpu/doctor_probe.sh
#   BIN=.dev/cutrace   the release binary (a folder holding `cutrace` works too)
#   OUT=/tmp/cutrace-out
set -u
BIN=${BIN:-.dev/cutrace}
[ -d "$BIN" ] && BIN="$BIN/cutrace"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
OUT=${OUT:-/tmp/cutrace-out}
W=$(mktemp -d /tmp/cutrace-doctor.XXXXXX)
mkdir -p "$OUT" "$W/fixture"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
log() { echo "== $*" >&2; }
run() { # NAME CMD...: stdout, stderr and exit status of one command
  local name=$1; shift
  log "$name: $*"
  local t0; t0=$(date +%s.%N)
  "$@" > "$W/$name.out" 2> "$W/$name.err"
  echo "rc=$? seconds=$(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null)" > "$W/$name.rc"
  cat "$W/$name.rc" >&2
}

{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version,mig.mode.current,compute_mode --format=csv;
  ls -l /usr/local/cuda/lib64/libcupti.so* /dev/nvidia* /dev/nvidia-caps 2>&1; id; grep -E '^(Uid|Gid|Groups|Cap)' /proc/self/status;
  for f in /proc/driver/nvidia/capabilities/*; do echo "--- $f"; ls -lR "$f" 2>&1 | head -40; done; } > "$W/machine.txt" 2>&1

run doctor_json "$BIN" doctor --probe --format json
run doctor_text "$BIN" doctor --probe --verbose
run doctor_static "$BIN" doctor --format json

SITE=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
AUDIT_PATHS=""
for p in $SITE /opt/nvidia; do [ -e "$p" ] && AUDIT_PATHS="$AUDIT_PATHS $p"; done
echo "$AUDIT_PATHS" > "$W/audit_paths.txt"
# shellcheck disable=SC2086
run audit_json "$BIN" audit --format json $AUDIT_PATHS
# shellcheck disable=SC2086
run audit_text "$BIN" audit $AUDIT_PATHS

# The files the doctor reads, copied into a tree shaped like / (no libraries: their names only).
log "snapshot of the files the doctor reads"
F="$W/fixture"
cp_tree() { for f in "$@"; do [ -e "$f" ] || continue; mkdir -p "$F$(dirname "$f")"; cat "$f" > "$F$f" 2>/dev/null || true; done; }
cp_tree /proc/driver/nvidia/version /proc/driver/nvidia/params /proc/self/status /proc/cmdline \
  /proc/1/cgroup /etc/os-release /usr/local/cuda/version.json /.dockerenv /run/.containerenv
for f in /proc/driver/nvidia/gpus/*/information; do cp_tree "$f"; done
find /proc/driver/nvidia/capabilities -type f 2>/dev/null | while read -r f; do cp_tree "$f"; done
for d in /etc/modprobe.d /run/modprobe.d /usr/lib/modprobe.d /lib/modprobe.d; do
  [ -d "$d" ] && for f in "$d"/*.conf; do [ -f "$f" ] && grep -l nvidia "$f" >/dev/null 2>&1 && cp_tree "$f"; done
done
for pid in /proc/[0-9]*; do
  c=$(cat "$pid/comm" 2>/dev/null) || continue
  case "$c" in nv-hostengine|dcgm-exporter|ncu|nsys|cuda-gdb*|compute-sanitiz*|nvidia-cuda-mps*|cutrace)
    mkdir -p "$F$pid"; echo "$c" > "$F$pid/comm"; cat "$pid/cmdline" > "$F$pid/cmdline" 2>/dev/null;;
  esac
done
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do
  for f in "$d"/libcupti.so*; do [ -e "$f" ] && { mkdir -p "$F$d"; : > "$F$f"; }; done
done
ls -lR /dev/nvidia-caps > "$W/dev-nvidia-caps.txt" 2>&1

tar -C "$W" -czf "$OUT/doctor.tar.gz" .
log "wrote $OUT/doctor.tar.gz"
echo "--- doctor (text) ---"; cat "$W/doctor_text.out"; cat "$W/doctor_text.rc"
echo "--- audit (summary) ---"; tail -40 "$W/audit_text.out"; cat "$W/audit_text.rc"
rm -rf "$W"
