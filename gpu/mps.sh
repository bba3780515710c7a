#!/usr/bin/env bash
# `cutrace profile` and `cutrace sample` under MPS: starts an MPS control daemon, profiles
# gpu/counters.cu through it (the values checked as gpu/profile.sh checks them), samples it,
# stops the daemon. usage (repository root on the GPU machine): BIN=.dev bash gpu/mps.sh
set -u
BIN=$(cd "${BIN:-.dev}" && pwd)
OUT=${OUT:-/tmp/cutrace-out}
W=/tmp/ctm; rm -rf "$W"; mkdir -p "$W/pipe" "$W/log" "$OUT"
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
G=$(cd "$(dirname "$0")" && pwd)
nvcc -O2 -arch=sm_90 -o "$W/counters" "$G/counters.cu" -lcuda > "$W/nvcc.txt" 2>&1 || { cat "$W/nvcc.txt"; exit 1; }
export CUDA_MPS_PIPE_DIRECTORY=$W/pipe CUDA_MPS_LOG_DIRECTORY=$W/log
nvidia-cuda-mps-control -d; echo "mps daemon rc=$?"
timeout 120 "$BIN/cutrace" profile --set basic -o "$W/p.trace" -- "$W/counters" --json "$W/manifest.json" > "$W/p.out" 2> "$W/p.err"; echo "profile rc=$?"
timeout 60 "$BIN/cutrace" sample -o "$W/s.trace" -- "$W/counters" > "$W/s.out" 2> "$W/s.err"; echo "sample rc=$?"
grep -c "" "$W/log/control.log" 2>/dev/null; grep -i "new client\|server" "$W/log/control.log" | head -3
echo quit | nvidia-cuda-mps-control
echo "--- profile stderr"; tail -c 1500 "$W/p.err"
echo "--- sample stderr"; tail -c 800 "$W/s.err"
python3 "$G/check_counters.py" "$W/manifest.json" "$W/p.trace" > "$W/check.json" 2> "$W/check.err"; echo "check rc=$?"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ("ok","fails","failures")})' "$W/check.json" 2>/dev/null || tail -5 "$W/check.err"
"$BIN/cutrace" report "$W/s.trace" 2>&1 | grep -i -A3 "pm sampl\|layer\|GPU 0:" | head -12
"$BIN/cutrace" report "$W/p.trace" 2>&1 | grep -i "counters\|passes\|MPS" | head -8
cp "$W/check.json" "$OUT/mps_check.json" 2>/dev/null; cp "$W/p.err" "$OUT/mps_profile.err"; cp "$W/s.err" "$OUT/mps_sample.err"
