"""Writes tests/fixtures/kineto/rocm_hip_calls.json.gz: a synthetic torch.profiler trace in the
shape PyTorch on ROCm writes (issue 27): HIP calls filed under the `cuda_runtime` category,
kernels joined to them by correlation id, streams as hex strings, and most gaps between kernels
1 ns long (as on an MI300). Deterministic: the same bytes every run.

    python3 tests/tools/make_rocm_fixture.py
"""
import gzip
import json

BASE_NS = 5_200_000_000_000_000  # the trace clock, as Kineto's `ts` in µs


def us(ns):
    """Nanoseconds as Kineto's microsecond text, exact to the nanosecond."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def main():
    events = []
    host = BASE_NS
    gpu = BASE_NS + 50_000
    launches = ["hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel"]
    for i in range(60):
        corr = 1000 + i
        name = launches[i % 3]
        events.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 77, "tid": 77, '
            f'"ts": {us(host)}, "dur": {us(4_000 + 37 * i)}, '
            f'"args": {{"External id": {i}, "correlation": {corr}}}}}'
        )
        if i % 5 == 0:
            # After the launch returned: one thread's calls follow each other.
            events.append(
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", '
                f'"pid": 77, "tid": 77, "ts": {us(host + 6_400)}, "dur": {us(2_000)}, '
                f'"args": {{"External id": {i}, "correlation": 0}}}}'
            )
        host += 9_000
        dur = 3_000 + 11 * i
        events.append(
            f'{{"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk_HHS_BH_MT64x64x32_{i % 4}", '
            f'"pid": 2, "tid": 0, "ts": {us(gpu)}, "dur": {us(dur)}, '
            f'"args": {{"device": 2, "stream": "0x1a", "correlation": {corr}, '
            f'"kind": "Dispatch Kernel"}}}}'
        )
        # Most gaps are 1 ns (the next kernel queued behind this one); every eighth waits
        # 7.5 µs for its launch, every twentieth 250 ns.
        gpu += dur + (7_500 if i % 8 == 7 else 250 if i % 20 == 19 else 1)
    # What every torch.profiler trace also holds, and cutrace skips: a CPU op around the
    # launches and the metadata naming processes and threads.
    events.append(
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 77, "tid": 77, '
        f'"ts": {us(BASE_NS)}, "dur": {us(host - BASE_NS)}, "args": {{"External id": 0}}}}'
    )
    for pid, tid, name in [(77, 77, "python3"), (2, 0, "stream 0x1a")]:
        events.append(
            f'{{"name": "thread_name", "ph": "M", "ts": {us(BASE_NS)}, "pid": {pid}, '
            f'"tid": {tid}, "args": {{"name": "{name}"}}}}'
        )
    trace = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 2, "name": "AMD Instinct '
        'MI300X", "totalGlobalMem": 205822885888, "computeMajor": 9, "computeMinor": 4, '
        '"numSms": 304}],\n  "traceEvents": [\n  '
        + ",\n  ".join(events)
        + "\n  ]\n}\n"
    )
    json.loads(trace)  # well-formed
    with open("tests/fixtures/kineto/rocm_hip_calls.json.gz", "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(trace.encode())


if __name__ == "__main__":
    main()
