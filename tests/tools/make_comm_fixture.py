#!/usr/bin/env python3
"""Writes tests/fixtures/kineto/deepep_custom_allreduce.json.gz: one rank's torch.profiler trace
(rank 3 of an 8-rank job) whose communication is not NCCL: DeepEP's low-latency dispatch and
combine kernels around each MoE layer's expert GEMMs, and vLLM's one-stage custom all-reduce
after attention, 3 steps. Names are spelled as CUPTI demangles them (DeepEP's in
csrc/kernels/internode_ll.cu, vLLM's in csrc/custom_all_reduce.cuh). The answer, per step of
1,000 µs: compute 600 µs (two GEMMs of 200 µs and an attention kernel of 200 µs), DeepEP
dispatch 80 µs and combine 70 µs, custom all-reduce 50 µs; communication 200 µs a step, none
of it overlapping compute (one stream)."""
import gzip
import json
import sys

DISPATCH = "void deep_ep::internode_ll::dispatch<false, 7168, 8>(void*, float*, int*, long*, void*, int*, void*, int*, void*, float const*, long const*, int*, int*, int, int, int, int, int, int, int)"
COMBINE = "void deep_ep::internode_ll::combine<7168, 8>(void*, void*, int*, void*, void const*, long const*, int const*, float const*, long const*, int*, int*, int, int, int, int, int, int, int, bool)"
ALLREDUCE = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ATTN = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)"

BASE = 1_700_000_000_000  # µs on the trace clock
events = [
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python"}},
    {"ph": "M", "name": "process_name", "pid": 0, "tid": 7, "args": {"name": "GPU 0"}},
]
corr = 1000
for step in range(3):
    t0 = BASE + step * 1000
    events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}",
                   "pid": 100, "tid": 100, "ts": t0, "dur": 1000})
    t = t0 + 10
    for name, dur in [(ATTN, 200), (ALLREDUCE, 50), (DISPATCH, 80), (GEMM, 200), (GEMM, 200), (COMBINE, 70)]:
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100,
                       "tid": 100, "ts": t - 8, "dur": 5, "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t,
                       "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr}})
        t += dur + 20
# As torch writes it: the members, then one event per line.
head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}}
text = "{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in head.items())
text += '  "traceEvents": [\n' + ",\n".join("  " + json.dumps(e) for e in events) + "\n]}\n"
out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/kineto/deepep_custom_allreduce.json.gz"
with gzip.GzipFile(out, "wb", mtime=0) as f:
    f.write(text.encode())
