// CUDA memory pools under `cutrace record --memory`: an explicit pool (release threshold
// 64 MiB) and the device's default pool (cudaMallocAsync), with blocks allocated, freed, the
// pool trimmed and destroyed. Prints the program's own account as one JSON line: each pool's
// reserved and used high-water marks (cudaMemPoolAttrReservedMemHigh, UsedMemHigh), read before
// the pool is trimmed, for gpu/check_pools.py to set beside `cutrace report`'s memory.cuda_pools.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t ck_ = (x); if (ck_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(ck_)); return 1; } } while (0)

static int attr(cudaMemPool_t p, cudaMemPoolAttr a, unsigned long long *v) {
  CK(cudaMemPoolGetAttribute(p, a, v));
  return 0;
}

int main() {
  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CK(cudaMemPoolCreate(&pool, &props));
  unsigned long long threshold = 64ull << 20;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  const size_t MiB = 1 << 20;
  void *a, *b, *c, *d, *e;
  CK(cudaMallocFromPoolAsync(&a, 16 * MiB, pool, s));
  CK(cudaMallocFromPoolAsync(&b, 16 * MiB, pool, s));
  CK(cudaMallocFromPoolAsync(&c, 16 * MiB, pool, s));
  CK(cudaMemsetAsync(a, 1, 16 * MiB, s));
  CK(cudaFreeAsync(b, s));
  CK(cudaMallocFromPoolAsync(&d, 32 * MiB, pool, s));
  CK(cudaMemsetAsync(d, 2, 32 * MiB, s));
  // The default pool, through cudaMallocAsync.
  CK(cudaMallocAsync(&e, 8 * MiB, s));
  CK(cudaMemsetAsync(e, 3, 8 * MiB, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaFreeAsync(a, s));
  CK(cudaFreeAsync(c, s));
  CK(cudaFreeAsync(d, s));
  CK(cudaFreeAsync(e, s));
  CK(cudaStreamSynchronize(s));
  unsigned long long rh = 0, uh = 0, rc = 0, drh = 0, duh = 0;
  cudaMemPool_t dflt;
  CK(cudaDeviceGetDefaultMemPool(&dflt, 0));
  if (attr(pool, cudaMemPoolAttrReservedMemHigh, &rh) || attr(pool, cudaMemPoolAttrUsedMemHigh, &uh) ||
      attr(pool, cudaMemPoolAttrReservedMemCurrent, &rc) ||
      attr(dflt, cudaMemPoolAttrReservedMemHigh, &drh) || attr(dflt, cudaMemPoolAttrUsedMemHigh, &duh))
    return 1;
  CK(cudaMemPoolTrimTo(pool, 0));
  CK(cudaMemPoolDestroy(pool));
  CK(cudaStreamDestroy(s));
  printf("{\"pool\": {\"release_threshold\": %llu, \"reserved_high\": %llu, \"used_high\": %llu, "
         "\"reserved_before_trim\": %llu}, \"default\": {\"reserved_high\": %llu, \"used_high\": %llu}}\n",
         threshold, rh, uh, rc, drh, duh);
  return 0;
}
