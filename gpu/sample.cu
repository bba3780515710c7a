// `cutrace sample`'s known-behaviour program: alternates a host sleep with an FMA-bound kernel
// that fills every SM, so PM Sampling must see SM active near 0 % in the sleeps and near 100 %
// in the kernels, with edges where the kernel records start and end.
//
// Each sleep + kernel is an NVTX range "cycle N" (the steps of `cutrace report --steps 'cycle*'`).
// usage: sample [--cycles N] [--sleep-ms MS] [--kernel-ms MS] [--json PATH]
// The kernel's loop count is calibrated on the first launch (CUDA events) to last about
// --kernel-ms. With --json it writes what it did: cycles, loop count, measured kernel times.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); std::exit(1); } } while (0)

// Four independent FMA chains per thread: the FMA pipe, not latency, is the limit.
__global__ void fma_loop(float *out, long iters) {
    float a = threadIdx.x * 1e-3f, b = a + 1.f, c = a + 2.f, d = a + 3.f;
    const float m = 0.999999f, k = 1e-7f;
    for (long i = 0; i < iters; ++i) {
        a = fmaf(a, m, k); b = fmaf(b, m, k); c = fmaf(c, m, k); d = fmaf(d, m, k);
    }
    if (a + b + c + d == 12345.f) out[blockIdx.x] = a;  // keeps the loop, never true
}

int main(int argc, char **argv) {
    int cycles = 5, sleep_ms = 200, kernel_ms = 200;
    const char *json = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--cycles")) cycles = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--sleep-ms")) sleep_ms = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--kernel-ms")) kernel_ms = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int blocks = prop.multiProcessorCount * 8, threads = 256;
    float *out;
    CK(cudaMalloc(&out, blocks * sizeof(float)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto run = [&](long iters) {
        CK(cudaEventRecord(e0));
        fma_loop<<<blocks, threads>>>(out, iters);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return ms;
    };
    long iters = 1 << 16;
    float ms = run(iters);  // calibration, also the warm-up
    iters = (long)(iters * (kernel_ms / (ms > 0 ? ms : 1)));
    std::vector<float> times;
    // Each sleep and kernel is one NVTX range, "cycle N": a step for `cutrace report --steps`.
    for (int c = 0; c < cycles; ++c) {
        char name[32];
        std::snprintf(name, sizeof name, "cycle %d", c + 1);
        nvtxRangePushA(name);
        std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
        times.push_back(run(iters));
        nvtxRangePop();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (json) {
        FILE *f = std::fopen(json, "w");
        std::fprintf(f, "{\"cycles\": %d, \"sleep_ms\": %d, \"iters\": %ld, \"blocks\": %d, "
                        "\"threads\": %d, \"sms\": %d, \"kernel_ms\": [", cycles, sleep_ms, iters,
                     blocks, threads, prop.multiProcessorCount);
        for (size_t i = 0; i < times.size(); ++i) std::fprintf(f, "%s%.3f", i ? ", " : "", times[i]);
        std::fprintf(f, "]}\n");
        std::fclose(f);
    }
    std::printf("%d cycles of %d ms sleep + %.1f ms kernel\n", cycles, sleep_ms,
                times.empty() ? 0.f : times[0]);
    return 0;
}
