// Three kernels whose stalls are known by construction, for `cutrace profile --pc-sampling`
// beside Nsight Compute's warp-state view (gpu/run.sh, phase pc_sampling):
//   load_chain   each load's address is the value of the load before it, over an array larger
//                than L2: warps wait on global memory (long scoreboard);
//   barrier_wait one warp of each block does a long dependent FMA loop while the block's other
//                warps wait at __syncthreads (barrier);
//   fma_dense    eight independent FMA chains per thread, many warps per SM: warps are mostly
//                eligible, picked (selected) or ready but not picked (not_selected).
// Built with -lineinfo so cutrace maps PCs to these lines. usage: pc_kernels [repeats, default 20]
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); std::exit(1); } } while (0)

__global__ void load_chain(const unsigned *next, unsigned *out, int steps) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 0; s < steps; ++s) {
        i = next[i];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}

__global__ void barrier_wait(float *out, int rounds, int work) {
    float a = threadIdx.x * 1e-3f;
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x < 32) {
            for (int k = 0; k < work; ++k) a = a * 1.000001f + 1e-7f;
        }
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

__global__ void fma_dense(float *out, int iters) {
    float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
    float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
    for (int k = 0; k < iters; ++k) {
        a0 = a0 * 0.999f + 1e-3f; a1 = a1 * 0.999f + 1e-3f; a2 = a2 * 0.999f + 1e-3f;
        a3 = a3 * 0.999f + 1e-3f; a4 = a4 * 0.999f + 1e-3f; a5 = a5 * 0.999f + 1e-3f;
        a6 = a6 * 0.999f + 1e-3f; a7 = a7 * 0.999f + 1e-3f;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
    const unsigned n = 1u << 26;  // 256 MB of indices: past the H200's 60 MB L2
    std::vector<unsigned> h(n);
    unsigned long long x = 88172645463325252ull;
    for (unsigned i = 0; i < n; ++i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        h[i] = (unsigned)(x % n);
    }
    unsigned *next, *out;
    float *f;
    CK(cudaMalloc(&next, n * sizeof(unsigned)));
    CK(cudaMalloc(&out, 1 << 24));
    CK(cudaMalloc(&f, 1 << 24));
    CK(cudaMemcpy(next, h.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
        load_chain<<<528, 256>>>(next, out, 2000);
        barrier_wait<<<528, 256>>>(f, 200, 200);
        fma_dense<<<528 * 4, 256>>>(f, 20000);
    }
    CK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"repeats\":%d,\"loop_s\":%.6f}\n", repeats, s);
    return 0;
}
