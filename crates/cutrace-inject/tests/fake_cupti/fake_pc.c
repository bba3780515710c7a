/* PC Sampling for the profiler stand-in (linked with fake_cupti.c and fake_profiler.c). Parameter
 * and data structs are read and written at the CUDA 13.0 header offsets (cutrace-cupti's sys.rs
 * asserts the same ones).
 *
 * FAKE_PC_MODE: 1 = cuptiPCSamplingEnable returns CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35);
 * 2 = CUPTI_ERROR_HARDWARE_BUSY (26).
 *
 * Four stall reasons: 14 long_scoreboard, 15 long_scoreboard_not_issued, 28 selected, 0
 * sample_count. The first GetData after configuration writes two PCs of _Z5chainPKjPji in the
 * cubin whose CRC is 0xABC: offset 16 (long_scoreboard 90, its not-issued subset 89, selected
 * 10) and offset 32 (selected 5), with totals of 120 samples, 15 of them in non-user kernels;
 * later GetData calls find nothing. Disable writes one PC into the configured buffer, offset 48
 * (long_scoreboard 7), and says 3 more PCs did not fit. cuptiGetCubinCrc gives 0xABC for a
 * cubin starting "FAKECUBIN"; cuptiGetSassToSourceCorrelation maps its PC offset o to line
 * 100 + o / 16 of /src/k.cu. Hooks: fake_module_loaded() and fake_context_destroyed() call the
 * subscriber for MODULE_LOADED (with that cubin) and CONTEXT_DESTROY_STARTING;
 * fake_pc_calls(name) counts "enable", "get_data" and "disable" calls. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*callback_t)(void *, uint32_t, uint32_t, const void *);
extern callback_t fake_cupti_subscriber_callback(void **userdata);

#define FAKE_CTX ((void *)0x1234)
#define AT(p, off, type) (*(type *)((uint8_t *)(p) + (off)))
static const char CUBIN[16] = "FAKECUBIN-0123\n";
static const char *FUNCTION = "_Z5chainPKjPji";
static void *g_disable_buffer;
static int g_configured, g_read, g_enables, g_gets, g_disables;

static int pc_mode(void) {
  const char *m = getenv("FAKE_PC_MODE");
  return m ? atoi(m) : 0;
}
int fake_pc_calls(const char *name) {
  if (!strcmp(name, "enable")) return g_enables;
  if (!strcmp(name, "get_data")) return g_gets;
  if (!strcmp(name, "disable")) return g_disables;
  return -1;
}

struct resource_data { void *context; void *handle; void *descriptor; };
struct module_data { uint32_t module_id; size_t cubin_size; const char *cubin; };
static void resource_callback(uint32_t cbid, void *descriptor) {
  void *ud = 0;
  callback_t cb = fake_cupti_subscriber_callback(&ud);
  struct resource_data r = {FAKE_CTX, 0, descriptor};
  if (cb) cb(ud, 3, cbid, &r);
}
void fake_module_loaded(void) {
  struct module_data m = {1, sizeof CUBIN, CUBIN};
  resource_callback(6, &m);
}
void fake_context_destroyed(void) { resource_callback(2, 0); }

int cuptiPCSamplingEnable(void *p) {
  g_enables++;
  if (AT(p, 16, void *) != FAKE_CTX) return 1;
  if (pc_mode() == 1) return 35;
  if (pc_mode() == 2) return 26;
  return 0;
}
int cuptiPCSamplingGetNumStallReasons(void *p) {
  *AT(p, 24, size_t *) = 4;
  return 0;
}
int cuptiPCSamplingGetStallReasons(void *p) {
  static const uint32_t index[4] = {14, 15, 28, 0};
  static const char *names[4] = {
      "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
      "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
      "smsp__pcsamp_warps_issue_stalled_selected", "smsp__pcsamp_sample_count"};
  if (AT(p, 24, size_t) != 4) return 1;
  for (int i = 0; i < 4; i++) {
    AT(p, 32, uint32_t *)[i] = index[i];
    strcpy(AT(p, 40, char **)[i], names[i]);
  }
  return 0;
}
int cuptiPCSamplingSetConfigurationAttribute(void *p) {
  size_t n = AT(p, 24, size_t);
  uint8_t *infos = AT(p, 32, uint8_t *);
  int continuous = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t *a = infos + i * 32;
    int type = AT(a, 0, int);
    if (type == 5) continuous = AT(a, 8, int) == 1;
    if (type == 8) g_disable_buffer = AT(a, 8, void *);
    AT(a, 4, int) = 0;
  }
  if (!continuous || !g_disable_buffer) return 1;
  g_configured = 1;
  return 0;
}
int cuptiPCSamplingStart(void *p) { (void)p; return 0; }
int cuptiPCSamplingStop(void *p) { (void)p; return 0; }

/* PC record k of `data` (stride 64): the function, offset and (index, samples) pairs. */
static void put_pc(void *data, size_t k, uint64_t offset, const uint32_t *pairs, size_t n) {
  uint8_t *pc = AT(data, 56, uint8_t *) + k * 64;
  AT(pc, 8, uint64_t) = 0xABC;
  AT(pc, 16, uint64_t) = offset;
  AT(pc, 24, uint32_t) = 3;
  AT(pc, 32, const char *) = FUNCTION;
  AT(pc, 40, size_t) = n;
  uint32_t *sr = AT(pc, 48, uint32_t *);
  for (size_t i = 0; i < n; i++) { sr[2 * i] = pairs[2 * i]; sr[2 * i + 1] = pairs[2 * i + 1]; }
  AT(pc, 56, uint32_t) = 0;
}
static void totals(void *data, uint64_t samples, uint64_t non_user, size_t pcs, size_t left) {
  AT(data, 16, uint64_t) = samples;
  AT(data, 24, uint64_t) = 0;
  AT(data, 32, size_t) = pcs;
  AT(data, 40, size_t) = left;
  AT(data, 64, uint64_t) = non_user;
  AT(data, 72, uint8_t) = 0;
}
int cuptiPCSamplingGetData(void *p) {
  void *data = AT(p, 24, void *);
  g_gets++;
  if (!g_configured) return 1;
  if (g_read || AT(data, 8, size_t) < 2) { totals(data, 0, 0, 0, 0); return 0; }
  g_read = 1;
  static const uint32_t a[6] = {14, 90, 15, 89, 28, 10}, b[2] = {28, 5};
  put_pc(data, 0, 16, a, 3);
  put_pc(data, 1, 32, b, 1);
  totals(data, 120, 15, 2, 0);
  return 0;
}
int cuptiPCSamplingDisable(void *p) {
  (void)p;
  g_disables++;
  if (!g_disable_buffer) return 0;
  static const uint32_t c[2] = {14, 7};
  put_pc(g_disable_buffer, 0, 48, c, 1);
  totals(g_disable_buffer, 7, 0, 1, 3);
  return 0;
}
int cuptiGetCubinCrc(void *p) {
  const char *cubin = AT(p, 16, const char *);
  AT(p, 24, uint64_t) = (AT(p, 8, size_t) >= 9 && !memcmp(cubin, "FAKECUBIN", 9)) ? 0xABC : 1;
  return 0;
}
int cuptiGetSassToSourceCorrelation(void *p) {
  const char *cubin = AT(p, 8, const char *);
  if (AT(p, 24, size_t) < 9 || memcmp(cubin, "FAKECUBIN", 9) || strcmp(AT(p, 16, const char *), FUNCTION))
    return 1;
  AT(p, 32, uint32_t) = 100 + (uint32_t)(AT(p, 40, uint64_t) / 16);
  AT(p, 48, char *) = strdup("k.cu");
  AT(p, 56, char *) = strdup("/src");
  return 0;
}
