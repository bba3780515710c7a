#!/usr/bin/env bash
# The `profile` phase of gpu/run.sh (also runs alone): builds gpu/counters.cu, runs
# `cutrace profile --set basic` and `--set sol` on it, Nsight Compute on the same kernels, checks
# the values (gpu/check_counters.py), runs two profilers at once (the second must be refused with
# HARDWARE_BUSY), profiles a PyTorch training step, and times everything against untraced runs.
# Writes under $OUT: profile.jsonl (results), profile-fixture.tar.gz (a small trace with
# counters, for tests/fixtures/native/), profile-logs.tar.gz.
#
# usage (repository root on the GPU machine): BIN=.dev bash gpu/profile.sh
set -u
BIN=$(cd "${BIN:-.dev}" && pwd)
OUT=${OUT:-/tmp/cutrace-out}
W=/tmp/ctp
rm -rf "$W"; mkdir -p "$W/logs" "$W/fix" "$OUT"
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
CT="$BIN/cutrace"
R="$OUT/profile.jsonl"
G=$(cd "$(dirname "$0")" && pwd)
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1); NCU=${NCU:-ncu}
log() { echo "== $*" >&2; }
ms() { date +%s%N; }
timed() { local t0=$(ms); "$@"; local rc=$?; echo $(( ($(ms) - t0) / 1000000 )) > "$W/last_ms"; return $rc; }

log "build counters.cu"
nvcc -O2 -arch=sm_90 -o "$W/counters" "$G/counters.cu" -lcuda > "$W/logs/nvcc.txt" 2>&1 || { cat "$W/logs/nvcc.txt"; exit 1; }
C="$W/counters"

log "untraced, record, profile basic, profile sol"
timed "$C" > "$W/logs/untraced.out" 2>&1; t_untraced=$(cat "$W/last_ms")
timed "$CT" record -q -o "$W/record.trace" -- "$C" > "$W/logs/record.out" 2>&1; t_record=$(cat "$W/last_ms")
# The decoded counter-data images come back too, for evaluating them again without a GPU.
timed env CUTRACE_COUNTERS_KEEP_IMAGES=8 "$CT" profile --set basic -o "$W/basic.trace" -- "$C" --json "$W/manifest.json" > "$W/logs/basic.out" 2> "$W/logs/basic.err"; rc_basic=$?; t_basic=$(cat "$W/last_ms")
timed "$CT" profile --set sol -o "$W/sol.trace" -- "$C" > "$W/logs/sol.out" 2> "$W/logs/sol.err"; rc_sol=$?; t_sol=$(cat "$W/last_ms")
echo "{\"mode\": \"profile_times_ms\", \"untraced\": $t_untraced, \"record\": $t_record, \"profile_basic\": $t_basic, \"profile_sol\": $t_sol, \"rc_basic\": $rc_basic, \"rc_sol\": $rc_sol}" >> "$R"

log "Nsight Compute on the same program"
BASIC=gpu__time_duration.sum,sm__ctas_launched.sum,smsp__warps_launched.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
SOL=sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,gpc__cycles_elapsed.max,sm__cycles_active.avg,dram__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.avg.per_second
timed "$NCU" --metrics "$BASIC" --clock-control none --cache-control none --csv --page raw "$C" > "$W/ncu_basic.csv" 2> "$W/logs/ncu_basic.err"; t_ncu=$(cat "$W/last_ms")
timed "$NCU" --metrics "$SOL" --clock-control none --cache-control none --csv --page raw "$C" > "$W/ncu_sol.csv" 2> "$W/logs/ncu_sol.err"; t_ncu_sol=$(cat "$W/last_ms")
echo "{\"mode\": \"ncu_time_ms\", \"ncu_basic\": $t_ncu, \"ncu_sol\": $t_ncu_sol}" >> "$R"
python3 "$G/check_counters.py" "$W/manifest.json" "$W/basic.trace" --sol "$W/sol.trace" --ncu "$W/ncu_basic.csv" --ncu-sol "$W/ncu_sol.csv" >> "$R" 2> "$W/logs/check.err"
"$CT" report "$W/basic.trace" > "$W/logs/basic.report.txt" 2>&1
"$CT" report --format json "$W/basic.trace" > "$W/logs/basic.report.json" 2>&1

log "two profilers at once"
"$CT" profile -o "$W/long1.trace" -- "$C" --long 8 > "$W/logs/long1.out" 2> "$W/logs/long1.err" &
p1=$!
sleep 3
"$CT" profile -o "$W/long2.trace" -- "$C" --long 1 > "$W/logs/long2.out" 2> "$W/logs/long2.err"; rc2=$?
wait $p1; rc1=$?
python3 - "$W" $rc1 $rc2 >> "$R" <<'PY'
import json, sys
w, rc1, rc2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
err2 = open(w + "/logs/long2.err").read()
err1 = open(w + "/logs/long1.err").read()
print(json.dumps({"mode": "two_profilers", "rc1": rc1, "rc2": rc2,
                  "second_busy": "HARDWARE_BUSY" in err2, "second_err": err2[-600:],
                  "first_err": err1[-300:]}))
PY
python3 - "$W/long1.trace" >> "$R" <<PY
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cc", "$G/check_counters.py")
cc = importlib.util.module_from_spec(spec); spec.loader.exec_module(cc)
k, c, complete, n = cc.load(sys.argv[1])
fma = [x for x in k if x["metrics"]]
print(json.dumps({"mode": "two_profilers_first", "kernels": len(k), "with_values": len(fma),
                  "counters": c, "inst_values": sorted({x["metrics"].get("smsp__inst_executed.sum") for x in fma})[:5]}))
PY

log "PyTorch training step"
timed python3 "$G/profile_torch.py" 10 > "$W/logs/torch_untraced.out" 2>&1
timed "$CT" profile -q --set basic -o "$W/torch.trace" -- python3 "$G/profile_torch.py" 10 > "$W/logs/torch_profile.out" 2> "$W/logs/torch_profile.err"
python3 - "$W" >> "$R" <<PY
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cc", "$G/check_counters.py")
cc = importlib.util.module_from_spec(spec); spec.loader.exec_module(cc)
w = sys.argv[1]
k, c, complete, n = cc.load(w + "/torch.trace")
untraced = json.loads(open(w + "/logs/torch_untraced.out").read().strip().splitlines()[-1])
prof = json.loads(open(w + "/logs/torch_profile.out").read().strip().splitlines()[-1])
missing = [x["name"][:60] for x in k if not x["metrics"]]
print(json.dumps({"mode": "torch_step", "kernels": len(k), "with_values": n,
                  "without_values": len(missing), "without_sample": missing[:5],
                  "counters": c, "step_ms_untraced": untraced["step_ms"],
                  "step_ms_profile_basic": prof["step_ms"]}))
PY

if [ "${PEERS:-0}" = 1 ]; then
  # The training step under every counter tool: step time (median of the steps; fewer steps
  # under the slow ones), cutrace's --set sol and sample against Nsight Compute's same metrics.
  log "PyTorch training step: sol, sample, Nsight Compute"
  # The program's own line (ncu prints its report on the same stdout, after it).
  step_of() { python3 -c 'import json,sys; print([json.loads(l)["step_ms"] for l in open(sys.argv[1]) if l.startswith("{\"step_ms\"")][-1])' "$1" 2>/dev/null || echo null; }
  timeout 200 "$CT" profile -q --set sol -o "$W/torch_sol.trace" -- python3 "$G/profile_torch.py" 3 > "$W/logs/torch_sol.out" 2> "$W/logs/torch_sol.err"
  timeout 100 "$CT" sample -q -o "$W/torch_sample.trace" -- python3 "$G/profile_torch.py" 10 > "$W/logs/torch_sample.out" 2> "$W/logs/torch_sample.err"
  timeout 200 "$NCU" --metrics "$BASIC" --clock-control none --cache-control none python3 "$G/profile_torch.py" 3 > "$W/logs/torch_ncu_basic.out" 2> "$W/logs/torch_ncu_basic.err"
  timeout 250 "$NCU" --metrics "$SOL" --clock-control none --cache-control none python3 "$G/profile_torch.py" 3 > "$W/logs/torch_ncu_sol.out" 2> "$W/logs/torch_ncu_sol.err"
  echo "{\"mode\": \"peers_torch_step_ms\", \"profile_sol\": $(step_of "$W/logs/torch_sol.out"), \"sample\": $(step_of "$W/logs/torch_sample.out"), \"ncu_basic\": $(step_of "$W/logs/torch_ncu_basic.out"), \"ncu_sol\": $(step_of "$W/logs/torch_ncu_sol.out")}" >> "$R"
fi

mkdir -p "$W/fix/counters_basic"
cp "$W/basic.trace"/*.cutrace "$W/basic.trace"/*.bin "$W/manifest.json" "$W/fix/counters_basic/" 2>/dev/null
tar -czf "$OUT/profile-fixture.tar.gz" -C "$W/fix" . 2>/dev/null
tar -czf "$OUT/profile-logs.tar.gz" -C "$W" logs ncu_basic.csv ncu_sol.csv manifest.json 2>/dev/null
cat "$R"
