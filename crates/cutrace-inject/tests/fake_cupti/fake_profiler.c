/* The profiler half of the fake libcupti (linked with fake_cupti.c into a third stand-in):
 * callbacks (cuptiEnableCallback, cuptiGetDeviceId), the profiler target and host calls and the
 * Range Profiler, enough for the injection's counters to run without a GPU. Parameter structs
 * are read at the CUDA 13.0 header offsets (cutrace-cupti's sys.rs asserts the same ones).
 *
 * FAKE_PROFILER_MODE: 0 = works; 1 = cuptiRangeProfilerEnable returns
 * CUPTI_ERROR_HARDWARE_BUSY (26); 2 = cuptiProfilerGetCounterAvailability returns
 * CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35).
 *
 * Test hooks: fake_context_created() reports context FAKE_CTX created; fake_launch(cbid, corr,
 * name) calls the subscriber for a driver launch call, at API_ENTER then API_EXIT. A range is
 * recorded when a kernel is launched between cuptiRangeProfilerStart and Stop; evaluation gives
 * metric i of a kernel with correlation id c the value c * 10 + i, except NaN for metric 1 of
 * c == 2 (a unit that could not be read). fake_profiler_calls(name) counts Start calls and
 * ranges. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*callback_t)(void *, uint32_t, uint32_t, const void *);
extern callback_t fake_cupti_subscriber_callback(void **userdata);

#define FAKE_CTX ((void *)0x1234)
static int g_enabled[4][1024];
static int g_started, g_starts, g_ranges_recorded, g_pending_range;
static uint32_t g_range_corr, g_current_corr;

static int pmode(void) {
  const char *m = getenv("FAKE_PROFILER_MODE");
  return m ? atoi(m) : 0;
}
#define AT(p, off, type) (*(type *)((uint8_t *)(p) + (off)))

int cuptiEnableCallback(uint32_t on, void *sub, uint32_t dom, uint32_t cbid) {
  (void)sub;
  if (dom >= 4 || cbid >= 1024) return 1;
  g_enabled[dom][cbid] = (int)on;
  return 0;
}
int cuptiGetDeviceId(void *ctx, uint32_t *id) {
  if (ctx != FAKE_CTX) return 1;
  *id = 0;
  return 0;
}

struct resource_data { void *context; void *handle; void *descriptor; };
struct callback_data {
  uint32_t site; const char *function_name; const void *params; void *ret;
  const char *symbol_name; void *context; uint32_t context_uid; uint64_t *corr_data;
  uint32_t correlation_id;
};

void fake_context_created(void) {
  void *ud = 0;
  callback_t cb = fake_cupti_subscriber_callback(&ud);
  struct resource_data r = {FAKE_CTX, 0, 0};
  if (cb && g_enabled[3][1]) cb(ud, 3, 1, &r);
}
void fake_launch(uint32_t cbid, uint32_t corr, const char *name) {
  void *ud = 0;
  callback_t cb = fake_cupti_subscriber_callback(&ud);
  struct callback_data d = {0, "cuLaunchKernel", 0, 0, name, FAKE_CTX, 1, 0, corr};
  if (cb && cbid < 1024 && g_enabled[1][cbid]) cb(ud, 1, cbid, &d);
  /* The kernel is launched between the two callbacks: it lands in an open range. */
  g_current_corr = corr;
  if (g_started) { g_pending_range = 1; g_range_corr = corr; }
  d.site = 1;
  if (cb && cbid < 1024 && g_enabled[1][cbid]) cb(ud, 1, cbid, &d);
}
int fake_profiler_calls(const char *name) {
  if (!strcmp(name, "start")) return g_starts;
  if (!strcmp(name, "ranges")) return g_ranges_recorded;
  return -1;
}

int cuptiProfilerInitialize(void *p) { (void)p; return 0; }
int cuptiProfilerDeInitialize(void *p) { (void)p; return 0; }
int cuptiDeviceGetChipName(void *p) { AT(p, 24, const char *) = "GH100"; return 0; }
int cuptiProfilerGetCounterAvailability(void *p) {
  if (pmode() == 2) return 35;
  if (AT(p, 16, void *) != FAKE_CTX) return 1;
  AT(p, 24, size_t) = 64;
  if (AT(p, 32, uint8_t *)) memset(AT(p, 32, uint8_t *), 0xA5, 64);
  return 0;
}
static int g_host_object, g_metrics;
int cuptiProfilerHostInitialize(void *p) {
  if (strcmp(AT(p, 24, const char *), "GH100")) return 1;
  AT(p, 40, void *) = &g_host_object;
  return 0;
}
int cuptiProfilerHostDeinitialize(void *p) { (void)p; return 0; }
int cuptiProfilerHostConfigAddMetrics(void *p) {
  const char **names = AT(p, 24, const char **);
  size_t n = AT(p, 32, size_t);
  for (size_t i = 0; i < n; i++)
    if (!strncmp(names[i], "launch__", 8)) return 1; /* Nsight Compute only */
  g_metrics = (int)n;
  return 0;
}
int cuptiProfilerHostGetConfigImageSize(void *p) { AT(p, 24, size_t) = 32; return 0; }
int cuptiProfilerHostGetConfigImage(void *p) {
  memset(AT(p, 32, uint8_t *), 0x5A, AT(p, 24, size_t));
  return 0;
}
int cuptiProfilerHostGetNumOfPasses(void *p) { AT(p, 32, size_t) = 1; return 0; }
extern int fake_pm_evaluate(void *p);
int cuptiProfilerHostEvaluateToGpuValues(void *p) {
  size_t range = AT(p, 40, size_t), n = AT(p, 56, size_t);
  double *v = AT(p, 64, double *);
  const uint8_t *img = AT(p, 24, const uint8_t *);
  if (img[0] == 2) return fake_pm_evaluate(p); /* a PM Sampling image (fake_pm.c) */
  if (range != 0 || img[0] != 1) return 1;
  uint32_t corr;
  memcpy(&corr, img + 4, 4);
  for (size_t i = 0; i < n; i++) v[i] = (corr == 2 && i == 1) ? NAN : corr * 10.0 + (double)i;
  return 0;
}
static int g_rp_object;
int cuptiRangeProfilerEnable(void *p) {
  if (pmode() == 1) return 26;
  AT(p, 24, void *) = &g_rp_object;
  return 0;
}
int cuptiRangeProfilerDisable(void *p) { (void)p; return 0; }
int cuptiRangeProfilerGetCounterDataSize(void *p) { AT(p, 56, size_t) = 128; return 0; }
static uint8_t *g_image;
int cuptiRangeProfilerCounterDataImageInitialize(void *p) {
  g_image = AT(p, 32, uint8_t *);
  memset(g_image, 0, AT(p, 24, size_t));
  return 0;
}
int cuptiRangeProfilerSetConfig(void *p) {
  /* Auto ranges (1) with kernel replay (2), as `cutrace profile` asks. */
  if (AT(p, 56, int) != 1 || AT(p, 60, int) != 2) return 1;
  return 0;
}
int cuptiRangeProfilerStart(void *p) { (void)p; g_started = 1; g_starts++; return 0; }
int cuptiRangeProfilerStop(void *p) { g_started = 0; AT(p, 40, uint8_t) = 1; return 0; }
int cuptiRangeProfilerDecodeData(void *p) {
  AT(p, 24, size_t) = 0;
  if (g_pending_range && g_image) {
    g_image[0] = 1;
    memcpy(g_image + 4, &g_range_corr, 4);
    g_ranges_recorded++;
  }
  g_pending_range = 0;
  return 0;
}
int cuptiRangeProfilerGetCounterDataInfo(void *p) {
  const uint8_t *img = AT(p, 16, const uint8_t *);
  AT(p, 32, size_t) = img[0];
  return 0;
}
