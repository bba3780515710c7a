// Kernels whose hardware counters are known in advance, for checking `cutrace profile`.
//
//   ctas        blocks × threads fixed: sm__ctas_launched.sum = blocks and
//               smsp__warps_launched.sum = blocks × ceil(threads / 32), exactly. Launched through
//               <<<>>>, cudaLaunchKernelEx, cudaLaunchCooperativeKernel, the driver's
//               cuLaunchKernel, and inside a CUDA graph (which gets no counters).
//   stream      copies a 1 GiB buffer into another (far larger than the 60 MB L2):
//               dram__bytes_read.sum ≈ dram__bytes_write.sum ≈ 1 GiB.
//   fma         a fixed FMA loop with data-independent control flow: smsp__inst_executed.sum is
//               the same on every run, and Nsight Compute must read the same number.
//
// usage: counters [--json FILE] [--long SECONDS]
//   --json FILE   writes what was launched (name, API, grid, block, expected counts, bytes)
//   --long S      instead, runs fma kernels for about S seconds (for two profilers at once)
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

__global__ void ctas(int *sink) {
  // One write per block, so the kernel cannot be optimized away; no data-dependent branches.
  if (threadIdx.x == 0) sink[blockIdx.x % 1024] = blockIdx.x;
}

__global__ void stream(const float4 *__restrict__ a, float4 *__restrict__ b, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) b[i] = a[i];
}

__global__ void fma(float *out, int iters) {
  float x = threadIdx.x * 1e-3f, y = 1.0001f, z = 0.5f;
#pragma unroll 1
  for (int i = 0; i < iters; i++) {
    x = fmaf(x, y, z);
    z = fmaf(z, y, x);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x + z;
}

struct Launch {
  std::string kernel, api;
  unsigned grid, block;
  double bytes_read, bytes_written;
};

static unsigned warps(unsigned threads) { return (threads + 31) / 32; }

int main(int argc, char **argv) {
  const char *json = nullptr;
  double long_seconds = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--long") && i + 1 < argc) long_seconds = atof(argv[++i]);
  }
  int *sink;
  float *out;
  CHECK(cudaMalloc(&sink, 1024 * sizeof(int)));
  CHECK(cudaMalloc(&out, 1024 * 256 * sizeof(float)));
  if (long_seconds > 0) {
    auto t0 = std::chrono::steady_clock::now();
    int n = 0;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < long_seconds) {
      fma<<<1024, 256>>>(out, 20000);
      CHECK(cudaDeviceSynchronize());
      n++;
    }
    printf("{\"long_kernels\": %d}\n", n);
    return 0;
  }
  std::vector<Launch> launches;

  // <<<>>> (cudaLaunchKernel) with odd shapes: 1000 × 96 (3 warps), 257 × 33 (2 warps).
  ctas<<<1000, 96>>>(sink);
  launches.push_back({"ctas", "<<<>>>", 1000, 96, 0, 0});
  ctas<<<257, 33>>>(sink);
  launches.push_back({"ctas", "<<<>>>", 257, 33, 0, 0});

  // cudaLaunchKernelEx (cuLaunchKernelEx in the driver).
  {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(77);
    cfg.blockDim = dim3(640);
    CHECK(cudaLaunchKernelEx(&cfg, ctas, sink));
    launches.push_back({"ctas", "cudaLaunchKernelEx", 77, 640, 0, 0});
  }
  // Cooperative launch: every block resident at once (132 SMs × 1 here).
  {
    void *args[] = {&sink};
    CHECK(cudaLaunchCooperativeKernel((void *)ctas, dim3(132), dim3(128), args, 0, 0));
    launches.push_back({"ctas", "cudaLaunchCooperativeKernel", 132, 128, 0, 0});
  }
  // The driver API directly.
  {
    cudaFunction_t f;
    CHECK(cudaGetFuncBySymbol(&f, (const void *)ctas));
    void *args[] = {&sink};
    CUresult r = cuLaunchKernel((CUfunction)f, 45, 1, 1, 160, 1, 1, 0, 0, args, nullptr);
    if (r != CUDA_SUCCESS) { fprintf(stderr, "cuLaunchKernel: %d\n", (int)r); return 1; }
    launches.push_back({"ctas", "cuLaunchKernel", 45, 160, 0, 0});
  }
  // A graph with one kernel: traced, no counters (documented).
  {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    ctas<<<11, 64, 0, s>>>(sink);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    launches.push_back({"ctas", "cudaGraphLaunch", 11, 64, 0, 0});
  }
  // Streaming copy of 1 GiB.
  {
    size_t bytes = (size_t)1 << 30;
    float4 *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(a, 1, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    CHECK(cudaDeviceSynchronize());
    stream<<<132 * 8, 512>>>(a, b, bytes / sizeof(float4));
    launches.push_back({"stream", "<<<>>>", 132 * 8, 512, (double)bytes, (double)bytes});
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  // The FMA loop.
  fma<<<1024, 256>>>(out, 4096);
  launches.push_back({"fma", "<<<>>>", 1024, 256, 0, 0});
  CHECK(cudaDeviceSynchronize());

  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) { perror(json); return 1; }
    fprintf(f, "[\n");
    for (size_t i = 0; i < launches.size(); i++) {
      const Launch &l = launches[i];
      fprintf(f,
              "  {\"kernel\": \"%s\", \"api\": \"%s\", \"grid\": %u, \"block\": %u, \"ctas\": %u, "
              "\"warps\": %u, \"bytes_read\": %.0f, \"bytes_written\": %.0f}%s\n",
              l.kernel.c_str(), l.api.c_str(), l.grid, l.block, l.grid, l.grid * warps(l.block),
              l.bytes_read, l.bytes_written, i + 1 < launches.size() ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
  }
  printf("ok\n");
  return 0;
}
