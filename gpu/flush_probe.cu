// What CUPTI hands over while a kernel hangs, and with which flush.
//
// 100 short kernels, then one that spins on a flag in pinned host memory, on one stream. While
// it spins: an unforced cuptiActivityFlushAll(0), then a forced one (CUPTI_ACTIVITY_FLAG_FLUSH_
// FORCED); every record delivered is printed (kernels: start, end, completed, correlation id,
// stream, name; API calls: correlation id, cbid, end). Then the flag is set, the stream
// synchronised, one more kernel launched on the same stream, and both flushes run again. The
// buffers handed over are kept, not reused, and read again at the end: a record CUPTI still
// wrote after handing its buffer over would show there as changed.
//
// usage: flush_probe [SPIN_SECONDS]   (prints lines "phase ...", "kernel ...", "api ...", and a
//        last line "summary {...}" in JSON)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <unistd.h>
#include <cuda_runtime.h>
#include <cupti.h>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { fprintf(stderr, "%s failed: %d\n", #x, (int)e_); exit(2); } } while (0)

static const char *phase = "start";
struct Held { uint8_t *buf; size_t valid; std::vector<uint8_t> copy; const char *phase; };
static std::vector<Held> held;
static int kernels_seen = 0, api_seen = 0, incomplete = 0;

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *size = 1 << 20;
  *buf = (uint8_t *)aligned_alloc(8, *size);
  *max = 0;
}

static void print_record(CUpti_Activity *r, const char *tag) {
  if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    auto *k = (CUpti_ActivityKernel10 *)r;
    printf("%s kernel phase=%s corr=%u stream=%u start=%llu end=%llu completed=%llu name=%s\n", tag,
           phase, k->correlationId, k->streamId, (unsigned long long)k->start,
           (unsigned long long)k->end, (unsigned long long)k->completed,
           k->name ? k->name : "(null)");
  } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    auto *a = (CUpti_ActivityAPI *)r;
    printf("%s api phase=%s corr=%u cbid=%u start=%llu end=%llu\n", tag, phase, a->correlationId,
           a->cbid, (unsigned long long)a->start, (unsigned long long)a->end);
  }
}

static void CUPTIAPI completed(CUcontext, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
  int n = 0;
  CUpti_Activity *r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    n++;
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto *k = (CUpti_ActivityKernel10 *)r;
      kernels_seen++;
      if (k->end == 0 || k->end < k->start) incomplete++;
      // The short kernels are many: print the last ones and anything odd.
      if (k->correlationId % 50 == 0 || k->end == 0 || k->end < k->start || kernels_seen > 99)
        print_record(r, "got");
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      api_seen++;
      auto *a = (CUpti_ActivityAPI *)r;
      if (a->correlationId % 50 == 0 || api_seen > 100) print_record(r, "got");
    }
  }
  printf("buffer phase=%s stream=%u valid=%zu records=%d\n", phase, stream, valid, n);
  Held h{buf, valid, std::vector<uint8_t>(buf, buf + valid), phase};
  held.push_back(std::move(h));
  fflush(stdout);
}

__global__ void tiny(float *x) { x[threadIdx.x] += 1.0f; }

__global__ void spin(volatile int *flag, unsigned long long *spins) {
  unsigned long long n = 0;
  while (*flag == 0) n++;
  *spins = n;
}

int main(int argc, char **argv) {
  double spin_s = argc > 1 ? atof(argv[1]) : 6.0;
  CK(cuptiActivityRegisterCallbacks(requested, completed));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  float *x;
  unsigned long long *spins;
  int *flag;
  CK(cudaMalloc(&x, 1024 * sizeof(float)));
  CK(cudaMalloc(&spins, sizeof(*spins)));
  CK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
  *flag = 0;
  int *dflag;
  CK(cudaHostGetDevicePointer((void **)&dflag, flag, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 100; i++) tiny<<<1, 256, 0, s>>>(x);
  CK(cudaStreamSynchronize(s));
  spin<<<1, 1, 0, s>>>(dflag, spins);
  usleep((useconds_t)(spin_s / 3 * 1e6));

  phase = "spinning_unforced";
  printf("phase %s\n", phase);
  CK(cuptiActivityFlushAll(0));
  int after_unforced = kernels_seen;
  usleep(200000);

  phase = "spinning_forced";
  printf("phase %s\n", phase);
  CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  int after_forced = kernels_seen, incomplete_forced = incomplete;
  // A kernel on another stream while the first still spins.
  cudaStream_t s2;
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  tiny<<<1, 256, 0, s2>>>(x);
  CK(cudaStreamSynchronize(s2));
  usleep((useconds_t)(spin_s / 3 * 1e6));
  phase = "spinning_forced_again";
  printf("phase %s\n", phase);
  CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));

  *flag = 1;
  CK(cudaStreamSynchronize(s));
  tiny<<<1, 256, 0, s>>>(x);
  CK(cudaStreamSynchronize(s));
  phase = "released_unforced";
  printf("phase %s\n", phase);
  CK(cuptiActivityFlushAll(0));
  int after_release = kernels_seen;
  phase = "released_forced";
  printf("phase %s\n", phase);
  CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));

  int changed = 0;
  for (auto &h : held) {
    if (memcmp(h.buf, h.copy.data(), h.valid) != 0) {
      changed++;
      printf("changed buffer from phase=%s\n", h.phase);
      CUpti_Activity *r = nullptr;
      phase = "reread";
      while (cuptiActivityGetNextRecord(h.buf, h.valid, &r) == CUPTI_SUCCESS) print_record(r, "now");
    }
  }
  unsigned long long hs = 0;
  CK(cudaMemcpy(&hs, spins, sizeof(hs), cudaMemcpyDeviceToHost));
  printf("summary {\"kernels_after_unforced\": %d, \"kernels_after_forced\": %d, "
         "\"incomplete_at_forced\": %d, \"kernels_after_release\": %d, \"kernels_total\": %d, "
         "\"incomplete_total\": %d, \"api_total\": %d, \"buffers\": %zu, \"buffers_changed_after\": %d, "
         "\"spins\": %llu}\n",
         after_unforced, after_forced, incomplete_forced, after_release, kernels_seen, incomplete,
         api_seen, held.size(), changed, hs);
  return 0;
}
