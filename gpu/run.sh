#!/usr/bin/env bash
# Builds the CUDA workloads on the GPU machine, traces each with `cutrace record`, checks every
# trace against the program's own account, tests crash safety and the torch.profiler conflict,
# runs the overhead benchmark, and leaves results under $OUT (at most 8 files). Short table last.
#
# usage (repository root on the GPU machine): bash gpu/run.sh
#   BIN=.dev          folder holding the `cutrace` binary and libcutrace_inject.so
#   CPP_REPS, TORCH_REPS, CPP_SECONDS, TORCH_SECONDS: repetitions, and the seconds by which the
#                     benchmark ends (no repetition starts that would end later, judged by the
#                     last one; a device call has a hard limit)
#   BENCH_ONLY="a;b*" variants to run (exact names; '*' ends a prefix; a name matching no variant of
#                     a workload stops that benchmark before it starts); BENCH_BATCHES (C++ loop),
#                     EAGER_BATCHES, TRAIN_BATCHES (PyTorch): batches per process
#   PHASES="..."      any of: correct multiproc crash conflict torch_steps devmem pin bench_cpp bench_torch
#                     profile (gpu/profile.sh: `cutrace profile` checked against known counts and ncu)
#                     sample (gpu/sample.sh: `cutrace sample` checked on sleeps and FMA kernels)
#                     bench_ab (configurations alternated inside one process: AB_CONFIGS, AB_ROUNDS,
#                     AB_DISCARD) peers others
#                     pc_probe (gpu/pc_sampling_probe.cu: the PC Sampling API's layouts and samples)
#                     pc_sampling (profile --pc-sampling on gpu/pc_kernels.cu beside ncu, and a
#                     PyTorch step)
#                     monitor (gpu/check_monitor.py: /metrics of `cutrace monitor --record` against
#                     `cutrace report` of the same records, on the launch loop, two processes
#                     sharing the GPU and a PyTorch step; a kernel that hangs beside one that
#                     goes on; then its cost beside record's)
#                     flush_probe (gpu/flush_probe.cu: what CUPTI hands over, unforced and forced,
#                     while a kernel spins, and after it ends)
#                     memory (gpu/check_memory.py: record --memory's driver peak against
#                     torch.cuda.max_memory_reserved(), a profile_memory trace's framework peak
#                     against max_memory_allocated())
#                     pools (gpu/pools.cu: record --memory's CUDA memory pools against the
#                     program's cudaMemPoolGetAttribute high-water marks; keeps the trace)
#                     sync_events (gpu/torch_sync_events.py: a torch.profiler trace with CUDA
#                     sync events; its stream waits tied to the recorded work, a decoy kept off
#                     the path; keeps the trace)
#                     async_pool (gpu/check_async_pool.py: PyTorch's cudaMallocAsync backend under
#                     record --memory, the pools' peaks against torch's)
#                     embedded (the binary alone: its carried injection library unpacked into the
#                     user's cache and tracing; a bad CUTRACE_INJECT_LIB and a cache others can
#                     write refused)
set -u
BIN=$(cd "${BIN:-.dev}" && pwd)
OUT=${OUT:-/tmp/cutrace-out}
PHASES=${PHASES:-"correct crash conflict torch_steps bench_cpp bench_torch peers others"}
REPS=${REPS:-7}
W=/tmp/ct
rm -rf "$W"; mkdir -p "$W/logs" "$W/fix" "$OUT"
: >> "$OUT/results.jsonl"
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
CT="$BIN/cutrace"
R="$OUT/results.jsonl"
G=$(cd "$(dirname "$0")" && pwd)
has() { [[ " $PHASES " == *" $1 "* ]]; }
log() { echo "== $*" >&2; }

{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2;
  ls -l /usr/local/cuda/lib64/libcupti.so*; uname -r; cat /proc/driver/nvidia/version; nproc; } > "$W/logs/machine.txt" 2>&1
log "building workloads"
nvcc -O2 -arch=sm_90 -o "$W/workloads" "$G/workloads.cu" > "$W/logs/nvcc.txt" 2>&1 || { cat "$W/logs/nvcc.txt"; exit 1; }
WL="$W/workloads"

if has correct; then
  for mode in two_streams copy_overlap graph threads8 nvtx "tiny 100000" "tiny 5000" "tiny 1000 nodriver" "tiny 1000 noruntime"; do
    name=${mode// /_}
    kinds=kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead
    chk=()
    [[ $mode == *nodriver ]] && { kinds=kernel,runtime,memcpy,memset,sync,nvtx,overhead; mode=${mode% nodriver}; }
    # Driver records only: do kernels launched through the runtime still join an API record?
    [[ $mode == *noruntime ]] && { kinds=kernel,driver,memcpy,memset,sync,nvtx,overhead; mode=${mode% noruntime}; chk=(--no-api-names --expect-orphans); }
    log "trace $name"
    "$CT" record --kinds $kinds -o "$W/$name.trace" -- $WL $mode --json "$W/$name.json" > "$W/logs/$name.out" 2> "$W/logs/$name.err"
    echo "rc=$?" >> "$W/logs/$name.err"
    "$CT" convert "$W/$name.trace" --csv "$W/$name.csv" 2>> "$W/logs/$name.err"
    "$CT" report "$W/$name.trace" > "$W/logs/$name.report.txt" 2>&1
    python3 "$G/check.py" "$W/$name.json" "$W/$name.csv" "$W/$name.trace" "${chk[@]}" >> "$R" 2>> "$W/logs/$name.err" || true
  done
  for name in two_streams copy_overlap graph threads8 nvtx tiny_5000; do
    mkdir -p "$W/fix/$name"; cp "$W/$name.trace"/*.cutrace "$W/$name.json" "$W/fix/$name/" 2>/dev/null
  done
  # The launch/copy callback ids seen, for the lowered floor.
  export LAUNCH_CBIDS=$(python3 - "$W" <<'EOF'
import csv, glob, sys
ids = set()
for p in glob.glob(sys.argv[1] + "/*.csv/api_calls.csv"):
    for r in csv.DictReader(open(p)):
        n = r["name"]
        if any(s in n for s in ("LaunchKernel", "Memcpy", "Memset", "GraphLaunch")) and r["kind"] == "Runtime":
            ids.add(int(r["cbid"]))
print(",".join(map(str, sorted(ids))))
EOF
)
  echo "{\"launch_cbids\":\"$LAUNCH_CBIDS\"}" >> "$R"
fi

if has multiproc; then
  log "fork+exec and fork-only children, each its own part"
  "$CT" record -o "$W/mp.trace" -- $WL multiproc 4 --json "$W/mp" > "$W/logs/mp.out" 2> "$W/logs/mp.err"; rc=$?
  python3 "$G/check_multiproc.py" "$CT" "$W" $rc >> "$R"
  mkdir -p "$W/fix/multiproc"; cp "$W/mp.trace"/*.cutrace "$W"/mp.*.json "$W/fix/multiproc/" 2>/dev/null
fi

if has crash; then
  log "SIGKILL mid-run"
  "$CT" record -o "$W/kill.trace" -- $WL longrun 30 > "$W/logs/kill.out" 2> "$W/logs/kill.err" &
  pid=$!; sleep 5; kill -KILL $pid; wait $pid; rc=$?
  "$CT" convert "$W/kill.trace" --csv "$W/kill.csv" 2>> "$W/logs/kill.err"
  python3 - "$W/kill.csv" $rc >> "$R" <<'EOF'
import json, sys, csv
m = json.load(open(sys.argv[1] + "/meta.json"))
k = sum(1 for _ in csv.DictReader(open(sys.argv[1] + "/kernels.csv")))
print(json.dumps({"mode": "sigkill", "rc": int(sys.argv[2]), "complete": m["complete"], "reason": m["incomplete_reason"], "kernels_recovered": k, "ok": (not m["complete"]) and k > 0}))
EOF
  mkdir -p "$W/fix/sigkill"; cp "$W/kill.trace"/*.cutrace "$W/fix/sigkill/" 2>/dev/null
  log "SIGTERM handled by the program"
  "$CT" record -o "$W/term.trace" -- $WL longrun 30 > "$W/logs/term.out" 2> "$W/logs/term.err" &
  pid=$!; sleep 4; kill -TERM $pid; wait $pid; rc=$?
  "$CT" convert "$W/term.trace" --csv "$W/term.csv" 2>> "$W/logs/term.err"
  python3 - "$W/term.csv" $rc "$W/logs/term.out" >> "$R" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1] + "/meta.json"))
out = open(sys.argv[3]).read()
rc = int(sys.argv[2])
print(json.dumps({"mode": "sigterm", "rc": rc, "handler_ran": "handled signal 15" in out, "complete": m["complete"], "ok": rc == 42 and "handled signal 15" in out and m["complete"]}))
EOF
fi

if has conflict; then
  log "torch.profiler inside a traced program"
  python3 "$G/torch_conflict.py" > "$W/logs/conflict_plain.out" 2> "$W/logs/conflict_plain.err"; rc1=$?
  "$CT" record -o "$W/conflict.trace" -- python3 "$G/torch_conflict.py" > "$W/logs/conflict_traced.out" 2> "$W/logs/conflict_traced.err"; rc2=$?
  "$CT" record --no-preload -o "$W/conflict_np.trace" -- python3 "$G/torch_conflict.py" > "$W/logs/conflict_np.out" 2> "$W/logs/conflict_np.err"; rc3=$?
  "$CT" convert "$W/conflict.trace" --csv "$W/conflict.csv" 2> "$W/logs/conflict_convert.err"
  "$CT" report "$W/conflict.trace" > "$W/logs/conflict.report.txt" 2>&1
  mkdir -p "$W/fix/conflict"; cp "$W/conflict.trace"/*.cutrace "$W/fix/conflict/" 2>/dev/null
  tar -czf "$OUT/conflict.tar.gz" -C "$W" fix/conflict logs/conflict_plain.out logs/conflict_plain.err logs/conflict_traced.out logs/conflict_traced.err logs/conflict_np.err logs/conflict.report.txt 2>/dev/null
  python3 - "$W/logs" $rc1 $rc2 "$W/conflict.csv" $rc3 >> "$R" <<'EOF'
import json, sys, csv
d, rc1, rc2, rc3 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
nk = sum(1 for _ in csv.DictReader(open(sys.argv[4] + "/kernels.csv")))
meta = open(sys.argv[4] + "/meta.json").read()
o1, o2, o3 = (open(d + f"/conflict_{x}.out").read() for x in ("plain", "traced", "np"))
e2 = open(d + "/conflict_traced.err").read().splitlines()
e3 = open(d + "/conflict_np.err").read().splitlines()
lines = [l for l in e2 if l.startswith("cutrace:") and "recording into" not in l]
conflict = [l for l in lines if "MULTIPLE_SUBSCRIBERS" in l]
print(json.dumps({"mode": "torch_profiler_conflict", "rc_plain": rc1, "rc_traced": rc2, "rc_no_preload": rc3,
                  "stdout_equal": o1 == o2 == o3, "cutrace_lines": lines,
                  "no_preload_cutrace_lines": [l for l in e3 if l.startswith("cutrace:") and "recording into" not in l],
                  "stderr_traced_tail": e2[-8:], "cutrace_kernels": nk, "meta_has_note": "tried to" in meta, "meta": meta[:2000],
                  "ok": rc1 == rc2 == rc3 == 3 and o1 == o2 == o3 and len(conflict) == 1 and len(lines) == 1}))
EOF
fi

if has torch_steps; then
  log "PyTorch kernel count vs torch.profiler"
  python3 "$G/torch_steps.py" --profiler "$W/steps_profiler.json" > "$W/logs/steps_prof.out" 2> "$W/logs/steps_prof.err"
  # Every API call (`--api all`) here, lean (the default) below: both must join every kernel.
  "$CT" record --api all --kinds kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead -o "$W/steps.trace" -- python3 "$G/torch_steps.py" > "$W/logs/steps.out" 2> "$W/logs/steps.err"
  "$CT" convert "$W/steps.trace" --csv "$W/steps.csv" 2>> "$W/logs/steps.err"
  a=$(tail -1 "$W/logs/steps_prof.out"); b=$(python3 "$G/torch_steps_check.py" "$W/steps.csv" 2>&1 | tail -1)
  echo "{\"mode\":\"torch_steps\",\"profiler\":$a,\"cutrace\":$b}" >> "$R"
  # The same steps with --api lean: every kernel must still join its launch (runtime and driver).
  "$CT" record --api lean -o "$W/steps_lean.trace" -- python3 "$G/torch_steps.py" > "$W/logs/steps_lean.out" 2> "$W/logs/steps_lean.err"
  "$CT" convert "$W/steps_lean.trace" --csv "$W/steps_lean.csv" 2>> "$W/logs/steps_lean.err"
  "$CT" report "$W/steps_lean.trace" > "$W/logs/steps_lean.report.txt" 2>&1
  c=$(python3 "$G/torch_steps_check.py" "$W/steps_lean.csv" 2>&1 | tail -1)
  echo "{\"mode\":\"torch_steps_api_lean\",\"profiler\":$a,\"cutrace\":$c}" >> "$R"
  mkdir -p "$W/fix/steps_lean"; cp "$W/steps_lean.trace"/*.cutrace "$W/fix/steps_lean/" 2>/dev/null
fi

if has devmem; then
  log "memory held by CUPTI's device buffers"
  python3 "$G/devmem.py" "$W/devmem_untraced.json" > "$W/logs/devmem.out" 2>&1
  for b in 0 8388608 67108864; do
    CUTRACE_DEVICE_BUFFER_BYTES=$b "$CT" record -o "$W/devmem_$b.trace" -- python3 "$G/devmem.py" "$W/devmem_$b.json" >> "$W/logs/devmem.out" 2>&1
  done
  python3 - "$W" >> "$R" <<'EOF'
import json, sys
w = sys.argv[1]
u = json.load(open(w + "/devmem_untraced.json"))
res = {}
for b in ("0", "8388608", "67108864"):
    t = json.load(open(f"{w}/devmem_{b}.json"))
    res["CUPTI default" if b == "0" else f"{int(b) >> 20} MiB"] = {
        "gpu_mib_first_kernel": round((u["free_after_first_kernel"] - t["free_after_first_kernel"]) / 2**20, 1),
        "gpu_mib_after_100k": round((u["free_after_100k"] - t["free_after_100k"]) / 2**20, 1),
        "rss_mib_after_100k": round((t["host_after_100k"]["VmRSS"] - u["host_after_100k"]["VmRSS"]) / 2**20, 1),
        "locked_mib_after_100k": round((t["host_after_100k"].get("VmLck", 0) - u["host_after_100k"].get("VmLck", 0)) / 2**20, 1)}
print(json.dumps({"mode": "devmem", "memory_vs_untraced": res, "untraced": u}))
EOF
fi

if has peers || has bench_cpp || has bench_torch; then
  # NVIDIA's sample builds only in place (its Makefile uses paths relative to the toolkit).
  S=/usr/local/cuda/extras/CUPTI/samples
  (cd $S/cupti_trace_injection 2>/dev/null && make > "$W/logs/sample_build.txt" 2>&1)
  export SAMPLE_LIB=$(ls $S/cupti_trace_injection/*.so 2>/dev/null | head -1)
  export NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
fi
export CUTRACE="$CT" WORKLOADS="$WL"
if has pin; then
  log "does pinning steady the launch loop? (untraced / cutrace, pinned / not, alternating)"
  python3 - "$WL" "$CT" "$W" >> "$R" <<'EOF'
import json, subprocess, sys, statistics
wl, ct, w = sys.argv[1:4]
v = {"untraced": [], "untraced pinned cpu4": ["taskset", "-c", "4"],
     "cutrace": [ct, "record", "-o", w + "/pin.trace", "--"],
     "cutrace pinned cpus4-7": ["taskset", "-c", "4-7", ct, "record", "-o", w + "/pin.trace", "--"]}
res = {k: [] for k in v}
for i in range(12):
    for k, pre in (list(v.items()) if i % 2 == 0 else list(v.items())[::-1]):
        subprocess.run(pre + [wl, "tiny", "100000", "--json", w + "/pin.json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", w + "/pin.trace"])
        res[k].append(json.load(open(w + "/pin.json"))["us_per_launch"])
out = {k: {"median": round(statistics.median(x), 3), "min": round(min(x), 3), "max": round(max(x), 3), "stdev": round(statistics.stdev(x), 3)} for k, x in res.items()}
print(json.dumps({"mode": "pinning", "samples": res, "stats": out}))
EOF
fi
if has bench_cpp; then
  log "overhead: C++ 100k tiny kernels"
  BENCH_LAUNCH_ONLY=1 python3 "$G/bench_overhead.py" cpp "$OUT/bench_cpp.json" --reps ${CPP_REPS:-$REPS} --max-seconds ${CPP_SECONDS:-100000} > "$W/bench_cpp.txt" 2> "$W/logs/bench_cpp.err" || { echo "bench_cpp failed:"; tail -3 "$W/logs/bench_cpp.err"; } >&2
fi
if has bench_ab; then
  # Configurations compared inside one process (gpu/bench_ab.py): the reference (cutrace's
  # defaults) first. AB_CONFIGS (';'-separated) overrides; AB_DISCARD=1 adds the floor's run.
  D=kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead
  IFS=';' read -r -a AB <<< "${AB_CONFIGS:-$D|all;$D|lean;kernel,runtime,memcpy,memset,sync|all;kernel,runtime,driver,memcpy,memset,sync|all;kernel,runtime,driver,memcpy,memset,sync,nvtx|all;kernel,runtime,memcpy,memset,sync,nvtx,overhead|all;kernel,runtime|all;kernel|all;|all}"
  for k in cpp torch; do
    fls=(""); [ "${AB_DISCARD:-0}" = 1 ] && fls+=(--discard)
    for fl in "${fls[@]}"; do
      log "in-process A/B: $k $fl"
      # Each workload first checks the switch on a short run of its own (bench_ab.py); a failed
      # check stops the phase.
      python3 "$G/bench_ab.py" $k "$OUT/ab_$k${fl:+_floor}.json" --rounds ${AB_ROUNDS:-15} $fl "${AB[@]}" >> "$W/bench_ab.txt" 2>> "$W/logs/bench_ab.err" || { echo "bench_ab $k failed:"; tail -3 "$W/logs/bench_ab.err"; break 2; } >&2
    done
  done
fi
if has bench_torch; then
  log "overhead: PyTorch eager + training step"
  python3 "$G/bench_overhead.py" torch "$OUT/bench_torch.json" --reps ${TORCH_REPS:-$REPS} --max-seconds ${TORCH_SECONDS:-100000} > "$W/bench_torch.txt" 2> "$W/logs/bench_torch.err" || { echo "bench_torch failed:"; tail -3 "$W/logs/bench_torch.err"; } >&2
fi

if has profile; then
  log "profile: hardware counters (gpu/profile.sh)"
  BIN="$BIN" OUT="$OUT" bash "$G/profile.sh" > "$W/logs/profile.txt" 2>&1 || { echo "profile failed:"; tail -5 "$W/logs/profile.txt"; } >&2
fi

if has sample; then
  log "sample: PM Sampling (gpu/sample.sh)"
  BIN="$BIN" OUT="$OUT" bash "$G/sample.sh" > "$W/logs/sample.txt" 2>&1 || { echo "sample failed:"; tail -5 "$W/logs/sample.txt"; } >&2
  # Its checks go into the final table too.
  [ -f "$OUT/sample.jsonl" ] && grep '"ok"' "$OUT/sample.jsonl" >> "$R"
fi

# Other engineers' device scripts, if present (they write $OUT/doctor.tar.gz, $OUT/torch.tar.gz).
if has embedded; then
  # The binary alone, as `cargo install` leaves it: the injection library it carries is unpacked
  # into a cache of the user's own and traces a real program; a CUTRACE_INJECT_LIB that is no
  # library is an error (125) and nothing is unpacked; a cache others can write is refused.
  log "embedded injection library"
  mkdir -p "$W/alone"; cp "$CT" "$W/alone/cutrace"
  XDG_CACHE_HOME="$W/cache" "$W/alone/cutrace" record -q -o "$W/emb.trace" -- $WL two_streams --json "$W/emb.json" > "$W/logs/emb.out" 2> "$W/logs/emb.err"; rc_ok=$?
  "$CT" convert "$W/emb.trace" --csv "$W/emb.csv" 2>> "$W/logs/emb.err"
  python3 "$G/check.py" "$W/emb.json" "$W/emb.csv" "$W/emb.trace" >> "$R" 2>> "$W/logs/emb.err" || true
  lib=$(ls "$W"/cache/cutrace/*/libcutrace_inject.so 2>/dev/null | head -1)
  XDG_CACHE_HOME="$W/cache2" CUTRACE_INJECT_LIB=/nonexistent "$W/alone/cutrace" record -q -o "$W/emb2.trace" -- $WL two_streams > /dev/null 2> "$W/logs/emb2.err"; rc_bad=$?
  mkdir -p "$W/cache3/cutrace"; chmod 777 "$W/cache3/cutrace"
  XDG_CACHE_HOME="$W/cache3" "$W/alone/cutrace" record -q -o "$W/emb3.trace" -- $WL two_streams > /dev/null 2> "$W/logs/emb3.err"; rc_open=$?
  python3 - "$rc_ok" "$rc_bad" "$rc_open" "$lib" "$W" >> "$R" <<'EOF'
import json, os, stat, sys
rc_ok, rc_bad, rc_open, lib, w = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
fails = []
if rc_ok != 0: fails.append(f"record with the embedded library exited {rc_ok}")
if not lib or stat.S_IMODE(os.stat(lib).st_mode) != 0o600: fails.append(f"unpacked library {lib!r} missing or not 0600")
if rc_bad != 125 or "CUTRACE_INJECT_LIB=/nonexistent" not in open(w + "/logs/emb2.err").read(): fails.append(f"bad CUTRACE_INJECT_LIB: exit {rc_bad}")
if os.path.exists(w + "/cache2"): fails.append("a bad CUTRACE_INJECT_LIB still unpacked the embedded library")
if rc_open != 125 or "can be written by others" not in open(w + "/logs/emb3.err").read(): fails.append(f"a cache others can write: exit {rc_open}")
print(json.dumps({"mode": "embedded library", "ok": not fails, "rc": [rc_ok, rc_bad, rc_open], "fails": fails}))
EOF
fi

if has pc_probe; then
  # The PC Sampling API of cupti_pcsampling.h on this GPU (gpu/pc_sampling_probe.cu): the
  # structs as nvcc lays them out, the stall reasons, and per-PC samples of a dependent load
  # chain and an FMA chain, which tests/fixtures/pc_sampling/ keeps for CI.
  log "pc sampling probe"
  nvcc -O2 -lineinfo -arch=sm_90 -o "$W/pc_probe" "$G/pc_sampling_probe.cu" -lcupti -lcuda > "$W/logs/pc_probe.build" 2>&1
  timeout 120 "$W/pc_probe" > "$OUT/pc_probe.jsonl" 2> "$W/logs/pc_probe.err"; rc=$?
  python3 - "$rc" "$OUT/pc_probe.jsonl" >> "$R" <<'EOF'
import json, sys
rc, path = int(sys.argv[1]), sys.argv[2]
lines = [json.loads(l) for l in open(path) if l.strip()]
pcs = [l for l in lines if l.get("kind") == "pc"]
last = [l for l in lines if l.get("kind") == "get_data"][-1:] or [{}]
fails = [] if rc == 0 else [f"the probe exited {rc}"]
if not pcs: fails.append("no PC records")
print(json.dumps({"mode": "pc sampling probe", "ok": not fails, "pcs": len(pcs),
                  "total_samples": last[0].get("total_samples"), "fails": fails}))
EOF
fi

if has pc_sampling; then
  # cutrace profile --pc-sampling on three kernels whose stalls are known by construction
  # (gpu/pc_kernels.cu), beside Nsight Compute's warp-state counters for the same kernels, and a
  # PyTorch training step (gpu/bench_torch.py); pinned to a core, the variants alternated.
  # gpu/check_pc.py compares them. Last, the kernels under MPS. Everything lands in pc.tar.gz.
  log "pc sampling"
  P="$W/pc"; mkdir -p "$P"
  nvcc -O2 -lineinfo -arch=sm_90 -o "$W/pc_kernels" "$G/pc_kernels.cu" > "$W/logs/pc_kernels.build" 2>&1 || cat "$W/logs/pc_kernels.build"
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  # Each variant at 5 and (but ncu, 0.2 s a kernel) 50 repeats: the difference is the cost per
  # repeat, what is left of the 5-repeat time the cost of starting.
  : > "$P/pc_times.jsonl"
  for rep in 1 2 3; do
    for vn in untraced:5 cutrace:5 ncu:5 untraced:50 cutrace:50; do
      v=${vn%:*}; n=${vn#*:}
      case $v in
        untraced) taskset -c 2 "$W/pc_kernels" $n > "$W/pc_out.txt" 2>> "$W/logs/pc_untraced.err" ;;
        cutrace) rm -rf "$W/pc_run"
                 taskset -c 2 "$CT" profile --pc-sampling -q -o "$W/pc_run" -- "$W/pc_kernels" $n > "$W/pc_out.txt" 2>> "$W/logs/pc_cutrace.err" ;;
        ncu) taskset -c 2 "$NCU" --csv --page raw --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
               -k 'regex:load_chain|barrier_wait|fma_dense' "$W/pc_kernels" $n > "$P/ncu_stalls.csv" 2>> "$W/logs/pc_ncu.err" ;;
      esac
      rc=$?
      src="$W/pc_out.txt"; [ $v = ncu ] && src="$P/ncu_stalls.csv"
      loop=$(grep -o '"loop_s":[0-9.]*' "$src" 2>/dev/null | tail -1 | cut -d: -f2); rm -f "$W/pc_out.txt"
      echo "{\"variant\":\"$v\",\"repeats\":$n,\"rep\":$rep,\"rc\":$rc,\"loop_s\":${loop:-null}}" >> "$P/pc_times.jsonl"
      # The trace the report and the fixture come from: the 5-repeat one.
      [ $vn = cutrace:5 ] && { rm -rf "$W/pc_keep"; cp -r "$W/pc_run" "$W/pc_keep"; }
    done
  done
  rm -rf "$W/pc_run"; mv "$W/pc_keep" "$W/pc_run"
  mkdir -p "$W/fix/pc_kernels"; cp "$W"/pc_run/*.cutrace "$W/fix/pc_kernels/" 2>/dev/null
  "$CT" report "$W/pc_run" --format json > "$P/pc_report.json" 2> "$W/logs/pc_report.err"
  "$CT" report "$W/pc_run" > "$P/pc_report.txt" 2>&1
  : > "$P/pc_torch_times.jsonl"
  for rep in 1 2 3; do
    for v in untraced cutrace; do
      rm -f "$W/bt.json"
      if [ $v = untraced ]; then EAGER_BATCHES=0 timeout 300 taskset -c 2 python3 "$G/bench_torch.py" --json "$W/bt.json" > /dev/null 2>> "$W/logs/pc_torch.err"
      else rm -rf "$W/pc_torch"
           EAGER_BATCHES=0 timeout 300 taskset -c 2 "$CT" profile --pc-sampling -q -o "$W/pc_torch" -- python3 "$G/bench_torch.py" --json "$W/bt.json" > /dev/null 2>> "$W/logs/pc_torch.err"; fi
      rc=$?
      ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_ms_per_step"])' "$W/bt.json" 2>/dev/null)
      echo "{\"variant\":\"$v\",\"rep\":$rep,\"rc\":$rc,\"step_ms\":${ms:-null}}" >> "$P/pc_torch_times.jsonl"
    done
  done
  "$CT" report "$W/pc_torch" --format json > "$P/pc_torch_report.json" 2>> "$W/logs/pc_report.err"
  mkdir -p "$W/fix/pc_torch"; cp "$W"/pc_torch/*.cutrace "$W/fix/pc_torch/" 2>/dev/null
  # Under MPS: what CUPTI's PC sampling does for an MPS client.
  export CUDA_MPS_PIPE_DIRECTORY=$W/mps_pipe CUDA_MPS_LOG_DIRECTORY=$W/mps_log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    timeout 120 "$CT" profile --pc-sampling -o "$W/pc_mps" -- "$W/pc_kernels" 2 > "$P/mps_out.txt" 2> "$P/mps_err.txt"; echo "rc=$?" >> "$P/mps_out.txt"
    "$CT" report "$W/pc_mps" --format json > "$P/pc_mps_report.json" 2>> "$P/mps_err.txt"
    echo quit | nvidia-cuda-mps-control
  else echo "no MPS daemon" > "$P/mps_out.txt"; fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  cp "$W"/logs/pc_*.err "$P/" 2>/dev/null
  python3 "$G/check_pc.py" "$P" | tee "$P/check.json" >> "$R"
  tar -czf "$OUT/pc.tar.gz" -C "$W" pc
fi

if has monitor; then
  log "monitor: /metrics against the report of the same records, and the cost"
  mkdir -p "$W/mon_out"
  python3 "$G/check_monitor.py" "$CT" "$WL" "$G" "$W" "$W/mon_out" > "$W/monitor.jsonl" 2> "$W/logs/monitor.err"
  cat "$W/monitor.jsonl" >> "$R"
  tar -czf "$OUT/monitor.tar.gz" -C "$W" mon_out monitor.jsonl logs $(cd "$W" && ls -d mon_two_processes mon_torch_step 2>/dev/null) 2>/dev/null
fi

if has flush_probe; then
  log "flush probe"
  nvcc -O2 -arch=sm_90 -o "$W/flush_probe" "$G/flush_probe.cu" -lcupti > "$W/logs/flush_probe.build" 2>&1 || cat "$W/logs/flush_probe.build"
  timeout 60 "$W/flush_probe" "${FLUSH_SPIN_S:-6}" > "$OUT/flush_probe.txt" 2> "$W/logs/flush_probe.err"; rc=$?
  python3 - "$rc" "$OUT/flush_probe.txt" >> "$R" <<'EOF'
import json, sys
rc, path = int(sys.argv[1]), sys.argv[2]
s = [l for l in open(path) if l.startswith("summary ")]
out = json.loads(s[-1][8:]) if s else {}
print(json.dumps({"mode": "flush probe", "ok": rc == 0 and bool(s), "stats": out}))
EOF
fi

if has memory; then
  log "memory peaks against torch's"
  timeout 400 python3 "$G/check_memory.py" "$CT" "$W/mem" "$W/mem_out" >> "$R" 2> "$W/logs/memory.err"
  tar -czf "$OUT/memory.tar.gz" -C "$W" mem_out 2>/dev/null
fi

if has pools; then
  log "memory pools against the program's own account"
  nvcc -O2 -arch=sm_90 -o "$W/pools" "$G/pools.cu" > "$W/logs/nvcc_pools.txt" 2>&1 || cat "$W/logs/nvcc_pools.txt"
  timeout 200 python3 "$G/check_pools.py" "$CT" "$W/pools" "$OUT" 2> "$W/logs/pools.err"
fi

if has sync_events; then
  log "torch.profiler's CUDA sync events and the critical path's recorded edges"
  timeout 300 python3 "$G/torch_sync_events.py" "$CT" "$OUT" > "$W/logs/sync_events.txt" 2>&1 || tail -5 "$W/logs/sync_events.txt"
fi

if has async_pool; then
  log "PyTorch's cudaMallocAsync backend: the report's pools against torch's peaks"
  timeout 300 python3 "$G/check_async_pool.py" "$CT" "$OUT" > "$W/logs/async_pool.txt" 2>&1 || tail -5 "$W/logs/async_pool.txt"
fi

if has others; then
  [ -f "$G/doctor_probe.sh" ] && { log "doctor probe"; BIN="$BIN" OUT="$OUT" timeout 120 bash "$G/doctor_probe.sh" > "$W/logs/doctor_probe.txt" 2>&1; }
  [ -f "$G/capture_torch.py" ] && { log "capture torch"; timeout 240 python3 "$G/capture_torch.py" "$W/torch" > "$W/logs/capture_torch.txt" 2>&1; tar -czf "$OUT/torch.tar.gz" -C "$W/torch" . 2>/dev/null; }
fi

# Several run.sh calls in one device call share $OUT: each phase set's fixtures and logs get
# their own archive (named by the phases), so a later call does not overwrite an earlier one's.
tag=$(echo "$PHASES" | tr -c 'a-z0-9_\n' '-' | tr -s '-' | sed 's/^-//; s/-$//')
[ -n "$(ls -A "$W/fix" 2>/dev/null)" ] && tar -czf "$OUT/fixtures-$tag.tar.gz" -C "$W/fix" . 2>/dev/null
tar -czf "$OUT/logs-$tag.tar.gz" -C "$W" logs $(cd "$W" && ls -d *.csv/meta.json 2>/dev/null) 2>/dev/null

{
  echo "---- results"
  python3 - "$R" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keep = {k: r[k] for k in r if k in ("kernels", "memcpys", "memsets", "orphans", "nvtx_ranges", "max_stream_rel_err", "bytes_per_kernel", "complete", "rc", "kernels_recovered", "handler_ran", "stdout_equal", "cutrace_lines", "cutrace_kernels", "profiler", "cutrace", "launch_cbids", "api_names", "kernels_joined_to_launch_calls", "stats", "no_preload_cutrace_lines", "rc_no_preload", "meta_has_note", "children", "parts", "memory_vs_untraced", "sm_active_in_kernels_pct", "sm_active_in_sleeps_pct", "offset_ns_median", "offset_ns_max_abs", "interval_ns", "slowdown_cutrace", "slowdown_ncu", "torch_slowdown", "samples_dropped", "gpu_busy_ns", "report_busy_ns", "process_busy_ns", "processes_sum_ns", "scrapes", "ratios", "stuck_lines", "dump_kernels", "driver_peak_bytes", "max_memory_reserved", "capture_last_kernels", "capture_last_at_s", "torch_segments_found", "driver_peak_torch_segments_bytes", "driver_peak_others_bytes", "framework_reported_peak_bytes", "framework_replay_peak_bytes", "max_memory_allocated")}
    print(f"{'OK ' if r.get('ok') else 'BAD' if 'ok' in r else '   '} {r.get('mode', ''):24} {json.dumps(keep)[:400]}")
    for f in r.get("fails", []):
        print("      fail:", f)
EOF
  cat "$W"/bench_*.txt 2>/dev/null
} | tee "$OUT/summary.txt"
