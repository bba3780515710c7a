"""Writes a synthetic torch.profiler (Kineto) trace for benchmarks, in Kineto's own layout.

usage: python3 bench/gen_kineto.py OUT.json KERNELS [STREAMS] [SEED]

Per kernel: one `cuda_runtime` cudaLaunchKernel event with its correlation id, the `kernel`
event, and the two `ac2g` flow events Kineto writes; every 8th launch also has a `cpu_op`.
Kernels are spread over STREAMS streams of device 0 with random durations and launch gaps, so
streams overlap and there are idle gaps; timestamps carry three decimals at the magnitude real
traces have (~5e12 µs), which is where a float pipeline loses nanoseconds.
"""
import random
import sys

out, n = sys.argv[1], int(sys.argv[2])
streams = int(sys.argv[3]) if len(sys.argv) > 3 else 4
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
NAMES = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
]


def us(t_ns):
    return f"{t_ns // 1000}.{t_ns % 1000:03d}"


host = 5_153_875_000_000_000  # ns
stream_free = [host] * streams
with open(out, "w") as f:
    f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H200", '
            '"totalGlobalMem": 150109880320,\n      "computeMajor": 9, "computeMinor": 0, "numSms": 132\n    }\n  ],\n'
            '  "cupti_version": 130001,\n  "cuda_driver_version": 13000,\n  "traceEvents": [\n')
    first = True
    for i in range(n):
        corr = 1000 + i
        host += rng.randint(2_000, 6_000)
        dur_api = rng.randint(1_500, 4_000)
        s = i % streams
        start = max(host + dur_api + rng.randint(1_000, 8_000), stream_free[s] + rng.choice([0, 0, 500, 20_000]))
        kdur = rng.choice([rng.randint(1_000, 3_000), rng.randint(5_000, 40_000), 0 if rng.random() < 0.001 else 2_000])
        stream_free[s] = start + kdur
        evs = []
        if i % 8 == 0:
            evs.append(f'  {{\n    "ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 415, "tid": 415,\n'
                       f'    "ts": {us(host - 500)}, "dur": {us(dur_api + 900)},\n    "args": {{\n      "External id": {i},"Record function id": 0, "Ev Idx": {i}\n    }}\n  }}')
        evs.append(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 415, "tid": 415,\n'
                   f'    "ts": {us(host)}, "dur": {us(dur_api)},\n    "args": {{\n      "External id": {i}, "cbid": 211, "correlation": {corr}\n    }}\n  }}')
        evs.append(f'  {{\n    "ph": "s", "id": {corr}, "pid": 415, "tid": 415, "ts": {us(host)},\n    "cat": "ac2g", "name": "ac2g"\n  }}')
        evs.append(f'  {{\n    "ph": "X", "cat": "kernel", "name": "{NAMES[i % len(NAMES)]}", "pid": 0, "tid": {7 + s},\n'
                   f'    "ts": {us(start)}, "dur": {us(kdur)},\n    "args": {{\n      "External id": {i},\n      "queued": 0, "device": 0, "context": 1,\n'
                   f'      "stream": {7 + s}, "correlation": {corr},\n      "registers per thread": 32,\n      "shared memory": 0,\n'
                   f'      "blocks per SM": 0.5,\n      "warps per SM": 2,\n      "grid": [66, 1, 1],\n      "block": [128, 1, 1],\n'
                   f'      "est. achieved occupancy %": 3\n    }}\n  }}')
        evs.append(f'  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": {7 + s}, "ts": {us(start)},\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}')
        f.write(("" if first else ",\n") + ",\n".join(evs))
        first = False
    f.write('\n],\n  "traceName": "synthetic"\n}\n')
