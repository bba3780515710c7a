/* PM Sampling for the profiler stand-in (linked with fake_cupti.c and fake_profiler.c).
 * Parameter structs are read at the CUDA 13.0 header offsets (cutrace-cupti's sys.rs asserts the
 * same ones).
 *
 * FAKE_PROFILER_MODE: 1 = cuptiPmSamplingEnable returns CUPTI_ERROR_HARDWARE_BUSY (26);
 * 2 = cuptiPmSamplingGetCounterAvailability returns CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35).
 *
 * The first decode after Start finds five samples of the configured interval, starting at
 * 5e9 ns: numbers 0, 1, 2, 3 and 7 (4 to 6 were lost: the hardware buffer overflowed, which
 * that decode reports); later decodes find nothing. Metric i of sample k evaluates to
 * k * 10 + i, except NaN for metric 1 of sample 2. A counter-data image is tagged 2 in its
 * first byte (fake_profiler.c's images are tagged 1) and holds its sample count in the second.
 * fake_pm_calls(name) counts "stop", "disable" and "decode" calls. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AT(p, off, type) (*(type *)((uint8_t *)(p) + (off)))
static const uint64_t SAMPLE_NO[5] = {0, 1, 2, 3, 7};
static int g_pm_object, g_pm_started, g_pm_decoded, g_stops, g_disables, g_decodes;
static uint64_t g_interval;

static int pm_mode(void) {
  const char *m = getenv("FAKE_PROFILER_MODE");
  return m ? atoi(m) : 0;
}
int fake_pm_calls(const char *name) {
  if (!strcmp(name, "stop")) return g_stops;
  if (!strcmp(name, "disable")) return g_disables;
  if (!strcmp(name, "decode")) return g_decodes;
  return -1;
}
int cuptiPmSamplingGetCounterAvailability(void *p) {
  if (pm_mode() == 2) return 35;
  AT(p, 24, size_t) = 64;
  if (AT(p, 32, uint8_t *)) memset(AT(p, 32, uint8_t *), 0xA5, 64);
  return 0;
}
int cuptiPmSamplingEnable(void *p) {
  if (pm_mode() == 1) return 26;
  if (AT(p, 16, size_t) != 0) return 2; /* one device */
  AT(p, 24, void *) = &g_pm_object;
  return 0;
}
int cuptiPmSamplingSetConfig(void *p) {
  /* The time-interval trigger (1), as `cutrace sample` asks. */
  if (AT(p, 16, void *) != &g_pm_object || AT(p, 56, int) != 1 || !AT(p, 48, uint64_t)) return 1;
  g_interval = AT(p, 48, uint64_t);
  return 0;
}
int cuptiPmSamplingGetCounterDataSize(void *p) { AT(p, 48, size_t) = 256; return 0; }
int cuptiPmSamplingCounterDataImageInitialize(void *p) {
  uint8_t *img = AT(p, 32, uint8_t *);
  memset(img, 0, AT(p, 24, size_t));
  img[0] = 2;
  return 0;
}
int cuptiPmSamplingStart(void *p) { (void)p; g_pm_started = 1; return 0; }
int cuptiPmSamplingStop(void *p) { (void)p; g_pm_started = 0; g_stops++; return 0; }
int cuptiPmSamplingDisable(void *p) { (void)p; g_disables++; return 0; }
int cuptiPmSamplingDecodeData(void *p) {
  uint8_t *img = AT(p, 24, uint8_t *);
  g_decodes++;
  AT(p, 40, int) = 2; /* END_OF_RECORDS */
  AT(p, 44, uint8_t) = 0;
  if (g_pm_started && !g_pm_decoded) {
    g_pm_decoded = 1;
    img[1] = 5;
    AT(p, 44, uint8_t) = 1;
  }
  return 0;
}
int cuptiPmSamplingGetCounterDataInfo(void *p) {
  const uint8_t *img = AT(p, 16, const uint8_t *);
  AT(p, 32, size_t) = 256;
  AT(p, 40, size_t) = img[1];
  AT(p, 48, size_t) = img[1];
  return 0;
}
int cuptiPmSamplingCounterDataGetSampleInfo(void *p) {
  size_t k = AT(p, 40, size_t);
  if (k >= AT(p, 24, const uint8_t *)[1]) return 1;
  AT(p, 48, uint64_t) = 5000000000ull + SAMPLE_NO[k] * g_interval;
  AT(p, 56, uint64_t) = 5000000000ull + (SAMPLE_NO[k] + 1) * g_interval;
  return 0;
}
/* cuptiProfilerHostEvaluateToGpuValues on a PM image (fake_profiler.c hands it over). */
int fake_pm_evaluate(void *p) {
  size_t k = AT(p, 40, size_t), n = AT(p, 56, size_t);
  double *v = AT(p, 64, double *);
  for (size_t i = 0; i < n; i++)
    v[i] = (SAMPLE_NO[k] == 2 && i == 1) ? NAN : (double)SAMPLE_NO[k] * 10.0 + (double)i;
  return 0;
}
