#!/usr/bin/env bash
# Captures the distributed fixtures on the GPU machine (gpu/capture_dist.py), then traces a
# torchrun job and a torch.multiprocessing.spawn job under `cutrace record`.
# usage (repository root on the GPU machine): BIN=.dev bash gpu/capture_dist.sh
set -u
BIN=$(cd "${BIN:-.dev}" && pwd)
OUT=${OUT:-/tmp/cutrace-out}
W=/tmp/ctd; rm -rf "$W"; mkdir -p "$W" "$OUT/dist"
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
G=$(cd "$(dirname "$0")" && pwd)
timeout 120 python3 "$G/capture_dist.py" nccl "$OUT/dist" > "$OUT/dist/nccl.log" 2>&1; echo "nccl rc=$?"
timeout 120 torchrun --nproc_per_node 2 "$G/capture_dist.py" gloo "$OUT/dist" > "$OUT/dist/gloo.log" 2>&1; echo "gloo rc=$?"
timeout 120 "$BIN/cutrace" record -o "$OUT/dist/spawn.trace" -- python3 "$G/capture_dist.py" spawn "$W" > "$OUT/dist/spawn.log" 2>&1; echo "spawn record rc=$?"
timeout 120 "$BIN/cutrace" record -o "$OUT/dist/torchrun.trace" -- torchrun --nproc_per_node 2 "$G/capture_dist.py" gloo "$W" > "$OUT/dist/torchrun.log" 2>&1; echo "torchrun record rc=$?"
"$BIN/cutrace" report "$OUT/dist/spawn.trace" > "$OUT/dist/spawn.report.txt" 2>&1
"$BIN/cutrace" report "$OUT/dist/torchrun.trace" > "$OUT/dist/torchrun.report.txt" 2>&1
for f in "$OUT"/dist/*.json.gz; do echo "$f"; "$BIN/cutrace" report "$f" 2>&1 | tail -3; done
ls -la "$OUT/dist" "$OUT/dist"/*.trace
# The device returns a few files only: one archive.
tar -C "$OUT" -czf "$OUT/dist.tgz" dist && rm -rf "$OUT/dist"
