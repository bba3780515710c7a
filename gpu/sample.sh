#!/usr/bin/env bash
# The `sample` phase of gpu/run.sh (also runs alone): builds gpu/sample.cu, runs it under
# `cutrace sample` (PM Sampling), checks SM active in the sleeps and the kernels and the edges
# against the kernel records (gpu/check_sample.py), and times it against untraced runs.
# Writes under $OUT: sample.jsonl (results), sample-fixture.tar.gz (a small trace with PM
# samples, for tests/fixtures/native/), sample-logs.tar.gz.
#
# usage (repository root on the GPU machine): BIN=.dev bash gpu/sample.sh
#   SAMPLE_REPS: timed repetitions of untraced and sampled runs (3)
set -u
BIN=$(cd "${BIN:-.dev}" && pwd)
OUT=${OUT:-/tmp/cutrace-out}
W=/tmp/cts
rm -rf "$W"; mkdir -p "$W/logs" "$W/fix" "$OUT"
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
CT="$BIN/cutrace"
R="$OUT/sample.jsonl"
G=$(cd "$(dirname "$0")" && pwd)
REPS=${SAMPLE_REPS:-3}
log() { echo "== $*" >&2; }
ms() { date +%s%N; }

log "build sample.cu"
nvcc -O2 -arch=sm_90 -o "$W/sample" "$G/sample.cu" > "$W/logs/nvcc.txt" 2>&1 || { cat "$W/logs/nvcc.txt"; exit 1; }
S="$W/sample"

log "sample --interval 1ms, checked"
"$CT" sample --interval 1ms -o "$W/s.trace" -- "$S" --json "$W/s.json" > "$W/logs/s.out" 2> "$W/logs/s.err"
echo "rc=$?" >> "$W/logs/s.err"
python3 "$G/check_sample.py" "$W/s.trace" --manifest "$W/s.json" >> "$R" 2> "$W/logs/check.err"
"$CT" report --steps 'cycle*' "$W/s.trace" > "$W/logs/s.report.txt" 2>&1
"$CT" report --steps 'cycle*' --format json "$W/s.trace" > "$W/logs/s.report.json" 2>&1

log "sample --interval 100us, checked"
"$CT" sample --interval 100us -o "$W/s100.trace" -- "$S" --cycles 3 > "$W/logs/s100.out" 2> "$W/logs/s100.err"
python3 "$G/check_sample.py" "$W/s100.trace" >> "$R" 2>> "$W/logs/check.err"

log "a small trace for the fixture"
"$CT" sample --interval 2ms -o "$W/fix.trace" -- "$S" --cycles 3 --sleep-ms 40 --kernel-ms 40 > "$W/logs/fix.out" 2> "$W/logs/fix.err"
python3 "$G/check_sample.py" "$W/fix.trace" >> "$R" 2>> "$W/logs/check.err"
cp "$W/fix.trace"/*.cutrace "$W/fix/" 2>/dev/null
"$CT" report --steps 'cycle*' "$W/fix.trace" > "$W/fix/report.txt" 2>&1

log "slowdown: untraced, record, sample ($REPS each, alternated)"
t_u=(); t_s=(); t_r=(); t_l=()
for i in $(seq "$REPS"); do
  t0=$(ms); "$S" > /dev/null 2>&1; t_u+=($(( ($(ms) - t0) / 1000000 )))
  t0=$(ms); "$CT" sample -q -o "$W/t$i.trace" -- "$S" > /dev/null 2>&1; t_s+=($(( ($(ms) - t0) / 1000000 )))
  t0=$(ms); "$CT" record -q -o "$W/r$i.trace" -- "$S" > /dev/null 2>&1; t_r+=($(( ($(ms) - t0) / 1000000 )))
  # A list of one's own is checked before the start, which initializes the driver in cutrace.
  t0=$(ms); "$CT" sample -q --metrics sm__cycles_active.avg.pct_of_peak_sustained_elapsed -o "$W/l$i.trace" -- "$S" > /dev/null 2>&1; t_l+=($(( ($(ms) - t0) / 1000000 )))
done
# The check of a list of one's own before the program starts (CUPTI's host library, the driver
# for the chip name), alone: a program that never touches CUDA.
t_pre=(); t_rtrue=()
for i in $(seq "$REPS"); do
  t0=$(ms); "$CT" sample -q --metrics sm__cycles_active.avg.pct_of_peak_sustained_elapsed -o "$W/p$i.trace" -- true > /dev/null 2>&1; t_pre+=($(( ($(ms) - t0) / 1000000 )))
  t0=$(ms); "$CT" record -q -o "$W/q$i.trace" -- true > /dev/null 2>&1; t_rtrue+=($(( ($(ms) - t0) / 1000000 )))
done
j() { local IFS=,; echo "[$*]"; }
echo "{\"mode\": \"sample_times_ms\", \"untraced\": $(j "${t_u[@]}"), \"sample\": $(j "${t_s[@]}"), \"record\": $(j "${t_r[@]}"), \"sample_own_list\": $(j "${t_l[@]}"), \"sample_true\": $(j "${t_pre[@]}"), \"record_true\": $(j "${t_rtrue[@]}")}" >> "$R"

tar -czf "$OUT/sample-fixture.tar.gz" -C "$W/fix" .
tar -czf "$OUT/sample-logs.tar.gz" -C "$W" logs
cat "$R" >&2
