/* A stand-in for libcupti.so, for testing the injection without a GPU. FAKE_CUPTI_MODE:
 * 0 = works and delivers one buffer of hand-built CUPTI 13 records (3 runtime + 3 kernel)
 *     at the first cuptiActivityFlushAll; like CUPTI before 13.3, one subscriber at a time:
 *     cuptiSubscribe while another holds the slot gets
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, cuptiUnsubscribe frees it;
 * 1 = cuptiSubscribe reports another subscriber;
 * 2 = reports an old CUPTI (API version 24, CUDA 12.x);
 * 3 = as 0, but the first cuptiActivityRegisterCallbacks (cutrace's) fails with
 *     CUPTI_ERROR_UNKNOWN;
 * 4 = as 0, but every cuptiActivityEnable fails with CUPTI_ERROR_NOT_INITIALIZED;
 * 5 = as 3, and cuptiUnsubscribe fails with CUPTI_ERROR_INVALID_OPERATION;
 * 6 = as 0, but cuptiActivityEnableRuntimeApi/DriverApi fail with CUPTI_ERROR_NOT_SUPPORTED;
 * 7 = as 0, but they fail (CUPTI_ERROR_INVALID_PARAMETER) for cudaStreamSynchronize (131) and
 *     cuMemAlloc_v2 (245) only.
 * cuptiGetCallbackName knows a few real ids per domain (table below) and fails on the rest.
 * With FAKE_CUPTI_LOG=FILE, these calls append a line each to FILE, in call order:
 * cuptiActivityEnable ("enable KIND"), cuptiActivityDisable ("disable KIND"), the per-callback-id
 * enables ("runtime_api CBID ON", "driver_api CBID ON"), cuptiActivityFlushAll ("flush FLAG")
 * and cuptiActivityRegisterCallbacks ("register N", N counting the calls from 1). Built with
 * -DFAKE_NO_API_FILTER, the per-callback-id enables are absent, as in a CUPTI without them.
 * Record layouts: CUpti_ActivityAPI
 * (40 bytes) and CUpti_ActivityKernel10 (216 bytes), offsets as in the CUPTI 13 headers.
 * With FAKE_CUPTI_SCRIPT=FILE (any mode that works), the records come from FILE instead, over
 * time: each cuptiActivityFlushAll delivers the next group of records, one buffer, groups
 * separated by a line `flush`; a forced flush (flag 1, at exit) delivers every group left. A
 * group with a line `hold` is held back, as CUPTI holds back a buffer holding a kernel that
 * still runs: an unforced flush delivers nothing while it is next, a forced one delivers the
 * groups up to it and it (not those after), as a forced flush while a kernel hangs does. A
 * group with a line `wait PATH` is delivered by no flush until PATH exists (a test's cue), and
 * one with a line `after MS` by none until MS milliseconds after the script was loaded, and
 * then by the next flush with every other such group due (groups paced at real time, so a rate
 * over wall-clock time has a known value).
 * Record lines: `device ID UUIDHEX32`, `kernel DEVICE STREAM START END CORR NAME` (NAME 0 =
 * _Z4fakePf, 1 = ncclDevKernel_AllReduce_Sum_f32_RING_LL, 2 = _Z6beforev until a line
 * `rename` makes that same memory read _Z5afterv), `api CORR START END` (a
 * cudaLaunchKernel runtime record), `memcpy DEVICE STREAM START END BYTES CORR` (HtoD),
 * `memory OP ADDRESS BYTES TIME CORR` (a CUpti_ActivityMemory4, MEMORY2: OP 1 allocation, 2
 * release, of device memory on device 0, stream 7, this process; 128 bytes),
 * `poolmemory OP ADDRESS BYTES TIME CORR POOL POOLSIZE UTILIZED` (the same, from the local pool
 * at POOL, whose size and utilized size then are POOLSIZE and UTILIZED, release threshold
 * 1 MiB: a cudaMallocAsync), `pool OP ADDRESS SIZE UTILIZED TIME CORR` (a
 * CUpti_ActivityMemoryPool3, MEMORY_POOL: OP 1 created, 2 destroyed, 3 trimmed, of a local
 * pinned pool on device 0, this process; 80 bytes); and
 * `now T` sets what cuptiGetTimestamp returns from then on (1000 before).
 * fake_cupti_calls(name) counts the calls that reached this library. Build it with
 * -Wl,-soname,libcupti.so.13 so that libraries linked against it name it as CUPTI's. */
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*req_t)(uint8_t **, size_t *, size_t *);
typedef void (*done_t)(void *, uint32_t, uint8_t *, size_t, size_t);
static req_t g_req;
static done_t g_done;
static int g_flushed;
static int g_subscribe_calls, g_register_calls, g_unsubscribe_calls;
static int g_subscribed; /* the one subscriber slot; its address is the subscriber handle */
static const char *g_kname = "_Z4fakePf";

static int mode(void) {
  const char *m = getenv("FAKE_CUPTI_MODE");
  return m ? atoi(m) : 0;
}
static void put32(uint8_t *p, size_t o, uint32_t v) { memcpy(p + o, &v, 4); }
static void put64(uint8_t *p, size_t o, uint64_t v) { memcpy(p + o, &v, 8); }

static void log_line(const char *what, uint32_t a, int b) {
  const char *path = getenv("FAKE_CUPTI_LOG");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  if (b < 0) fprintf(f, "%s %u\n", what, a);
  else fprintf(f, "%s %u %d\n", what, a, b);
  fclose(f);
}
int cuptiGetVersion(uint32_t *v) { *v = mode() == 2 ? 24 : 130001; return 0; }
/* The subscriber's callback, for fake_profiler.c's test hooks. */
typedef void (*callback_t)(void *, uint32_t, uint32_t, const void *);
static callback_t g_cb;
static void *g_cb_userdata;
callback_t fake_cupti_subscriber_callback(void **userdata) {
  *userdata = g_cb_userdata;
  return g_cb;
}
int cuptiSubscribe(void **h, void *cb, void *ud) {
  g_subscribe_calls++;
  if (mode() == 1 || g_subscribed) return 39;
  g_cb = (callback_t)cb;
  g_cb_userdata = ud;
  g_subscribed = 1;
  *h = &g_subscribed;
  return 0;
}
int cuptiUnsubscribe(void *h) {
  g_unsubscribe_calls++;
  if (mode() == 5) return 7;
  if (h != &g_subscribed || !g_subscribed) return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
  g_subscribed = 0;
  return 0;
}
int cuptiActivityRegisterCallbacks(req_t r, done_t d) {
  log_line("register", (uint32_t)g_register_calls + 1, -1);
  if (g_register_calls++ == 0 && (mode() == 3 || mode() == 5)) return 999;
  g_req = r; g_done = d;
  return 0;
}
int fake_cupti_calls(const char *name) {
  if (!strcmp(name, "cuptiSubscribe")) return g_subscribe_calls;
  if (!strcmp(name, "cuptiActivityRegisterCallbacks")) return g_register_calls;
  if (!strcmp(name, "cuptiUnsubscribe")) return g_unsubscribe_calls;
  return -1;
}
int cuptiActivityEnable(uint32_t k) {
  log_line("enable", k, -1);
  return mode() == 4 ? 15 : 0;
}
#ifndef FAKE_NO_API_FILTER
int cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t on) {
  log_line("runtime_api", cbid, on);
  if (mode() == 7 && cbid == 131) return 1;
  return mode() == 6 ? 27 : 0;
}
int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t on) {
  log_line("driver_api", cbid, on);
  if (mode() == 7 && cbid == 245) return 1;
  return mode() == 6 ? 27 : 0;
}
#endif
int cuptiActivityDisable(uint32_t k) { log_line("disable", k, -1); return 0; }
int cuptiActivitySetAttribute(uint32_t a, size_t *s, void *v) { (void)a; (void)s; (void)v; return 0; }
/* CUPTI's clock: 1000, or what the script's last `now T` line said. */
static uint64_t g_now = 1000;
int cuptiGetTimestamp(uint64_t *t) { *t = g_now; return 0; }
/* Callback ids as CUDA 13.0's CUPTI numbers them (cuMemAlloc_v2's is made up). */
static const struct { uint32_t dom, cbid; const char *name; } g_names[] = {
  {2, 10, "cudaGetLastError_v3020"},
  {2, 17, "cudaGetDevice_v3020"},
  {2, 41, "cudaMemcpyAsync_v3020"},
  {2, 131, "cudaStreamSynchronize_v3020"},
  {2, 211, "cudaLaunchKernel_v7000"},
  {1, 245, "cuMemAlloc_v2"},
  {1, 307, "cuLaunchKernel"},
  {1, 392, "cuDevicePrimaryCtxGetState"},
  {1, 719, "cuKernelGetName"},
};
int cuptiGetCallbackName(uint32_t dom, uint32_t cbid, const char **n) {
  for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++) {
    if (g_names[i].dom == dom && g_names[i].cbid == cbid) {
      *n = g_names[i].name;
      return 0;
    }
  }
  return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
}
/* Records of the script dropped because the tool gave no buffer for their group, as CUPTI
 * counts what it drops. */
static size_t g_dropped;
int cuptiActivityGetNumDroppedRecords(void *c, uint32_t s, size_t *d) { (void)c; (void)s; *d = g_dropped; return 0; }

/* The scripted records (FAKE_CUPTI_SCRIPT): the file's text and where the next group starts. */
static char *g_script;
static size_t g_script_at;
/* NAME 2's text lives in a buffer that a `rename` line overwrites, as a module's names go
 * when it is unloaded and its memory reused. */
static char g_mutable_name[16] = "_Z6beforev";
static const char *g_knames[] = {"_Z4fakePf", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", g_mutable_name};

static size_t record_size(uint32_t kind) {
  switch (kind) {
  case 4: case 5: return 40;   /* CUpti_ActivityAPI */
  case 1: return 64;           /* CUpti_ActivityMemcpy6's fields cutrace reads */
  case 8: return 144;          /* CUpti_ActivityDevice5's fields cutrace reads */
  case 49: return 128;         /* CUpti_ActivityMemory4 */
  case 50: return 80;          /* CUpti_ActivityMemoryPool3 */
  default: return 216;         /* CUpti_ActivityKernel10 */
  }
}

/* Writes one script line's record at buf + off; the bytes it took (0: not a record). */
static size_t script_record(const char *line, uint8_t *r) {
  unsigned long long a[7] = {0};
  char uuid[33] = {0};
  if (sscanf(line, "kernel %llu %llu %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]) == 6) {
    put32(r, 0, 10); put64(r, 16, a[2]); put64(r, 24, a[3]); put32(r, 40, (uint32_t)a[0]);
    put32(r, 44, 1); put32(r, 48, (uint32_t)a[1]); put32(r, 52, 1); put32(r, 56, 1); put32(r, 60, 1);
    put32(r, 64, 32); put32(r, 68, 1); put32(r, 72, 1); put32(r, 92, (uint32_t)a[4]);
    put64(r, 104, (uint64_t)(uintptr_t)g_knames[a[5] == 2 ? 2 : a[5] ? 1 : 0]);
    return 216;
  }
  if (sscanf(line, "api %llu %llu %llu", &a[0], &a[1], &a[2]) == 3) {
    put32(r, 0, 5); put32(r, 4, 211); put64(r, 8, a[1]); put64(r, 16, a[2]);
    put32(r, 24, (uint32_t)getpid()); put32(r, 28, 2); put32(r, 32, (uint32_t)a[0]);
    return 40;
  }
  if (sscanf(line, "memcpy %llu %llu %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]) == 6) {
    put32(r, 0, 1); r[4] = 1; put64(r, 8, a[4]); put64(r, 16, a[2]); put64(r, 24, a[3]);
    put32(r, 32, (uint32_t)a[0]); put32(r, 36, 1); put32(r, 40, (uint32_t)a[1]);
    put32(r, 44, (uint32_t)a[5]);
    return 64;
  }
  if (sscanf(line, "poolmemory %llu %llu %llu %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6]) == 7) {
    unsigned long long utilized = 0;
    if (sscanf(line, "poolmemory %*u %*u %*u %*u %*u %*u %*u %llu", &utilized) != 1) return 0;
    put32(r, 0, 49); put32(r, 4, (uint32_t)a[0]); put32(r, 8, 3); put32(r, 12, (uint32_t)a[4]);
    put64(r, 16, a[1]); put64(r, 24, a[2]); put64(r, 32, a[3]);
    put32(r, 48, (uint32_t)getpid()); put32(r, 52, 0); put32(r, 56, 1); put32(r, 60, 7);
    put32(r, 72, 1); put32(r, 80, 1); put64(r, 88, a[5]); put64(r, 96, 1u << 20);
    put64(r, 104, a[6]); put64(r, 112, utilized);
    return 128;
  }
  if (sscanf(line, "pool %llu %llu %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]) == 6) {
    put32(r, 0, 50); put32(r, 4, (uint32_t)a[0]); put32(r, 8, 1); put32(r, 12, (uint32_t)a[5]);
    put32(r, 16, (uint32_t)getpid()); put32(r, 20, 0); put64(r, 32, a[1]); put64(r, 40, a[2]);
    put64(r, 48, 1u << 20); put64(r, 56, a[4]); put64(r, 64, a[3]);
    return 80;
  }
  if (sscanf(line, "memory %llu %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3], &a[4]) == 5) {
    put32(r, 0, 49); put32(r, 4, (uint32_t)a[0]); put32(r, 8, 3); put32(r, 12, (uint32_t)a[4]);
    put64(r, 16, a[1]); put64(r, 24, a[2]); put64(r, 32, a[3]);
    put32(r, 48, (uint32_t)getpid()); put32(r, 52, 0); put32(r, 56, 1); put32(r, 60, 7);
    return 128;
  }
  if (sscanf(line, "device %llu %32s", &a[0], uuid) == 2 && strlen(uuid) == 32) {
    put32(r, 0, 8); put64(r, 16, 80ull << 30); put32(r, 44, 132); put32(r, 104, 9);
    put32(r, 108, 0); put32(r, 112, (uint32_t)a[0]);
    for (int i = 0; i < 16; i++) {
      unsigned v = 0;
      sscanf(uuid + 2 * i, "%2x", &v);
      r[120 + i] = (uint8_t)v;
    }
    put64(r, 136, (uint64_t)(uintptr_t)"Fake H200");
    return 144;
  }
  return 0;
}

/* Delivers the script's next group as one buffer; 0 when none is left. */
static int deliver_script_group(void) {
  if (!g_script[g_script_at]) return 0;
  uint8_t *buf = 0;
  size_t size = 0, maxr = 0, off = 0;
  g_req(&buf, &size, &maxr);
  /* No buffer: the group's records are dropped and counted, as CUPTI does. */
  uint8_t scratch[512];
  int dropping = !buf;
  while (g_script[g_script_at]) {
    char *line = g_script + g_script_at;
    char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    g_script_at += len + (nl ? 1 : 0);
    char one[256];
    if (len >= sizeof one) continue;
    memcpy(one, line, len);
    one[len] = 0;
    if (!strcmp(one, "flush")) break;
    unsigned long long now;
    if (sscanf(one, "now %llu", &now) == 1) { g_now = now; continue; }
    if (!strcmp(one, "rename")) { strcpy(g_mutable_name, "_Z5afterv"); continue; }
    if (dropping) {
      if (script_record(one, scratch)) g_dropped++;
      continue;
    }
    if (off + 216 > size) break;
    off += script_record(one, buf + off);
  }
  if (!dropping) g_done(0, 0, buf, size, off);
  return 1;
}

/* When the script was loaded, in ms of CLOCK_MONOTONIC (for `after MS`). */
static unsigned long long g_script_loaded_ms;

static unsigned long long monotonic_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000ull + (unsigned long long)t.tv_nsec / 1000000ull;
}

/* Whether the script's next group has a `hold` line (1), or a `wait PATH` line whose PATH does
 * not exist yet or an `after MS` line whose time has not come (2), or an `after MS` line whose
 * time has come (3: every such group due is delivered by one flush); 0 otherwise. */
static int next_group_held(void) {
  const char *at = g_script + g_script_at;
  int held = 0;
  while (*at) {
    const char *nl = strchr(at, '\n');
    size_t len = nl ? (size_t)(nl - at) : strlen(at);
    if (len == 5 && !strncmp(at, "flush", 5)) break;
    if (len == 4 && !strncmp(at, "hold", 4)) held = held ? held : 1;
    if (len > 5 && len < 512 && !strncmp(at, "wait ", 5)) {
      char path[512];
      memcpy(path, at + 5, len - 5);
      path[len - 5] = 0;
      if (access(path, F_OK) != 0) held = 2;
    }
    unsigned long long after_ms;
    if (len > 6 && len < 32 && !strncmp(at, "after ", 6) && sscanf(at + 6, "%llu", &after_ms) == 1)
      held = monotonic_ms() - g_script_loaded_ms < after_ms ? 2 : (held ? held : 3);
    if (!nl) break;
    at = nl + 1;
  }
  return held;
}

/* Loads FAKE_CUPTI_SCRIPT once; 1 when records come from it. */
static int scripted(void) {
  static int loaded;
  if (!loaded) {
    loaded = 1;
    g_script_loaded_ms = monotonic_ms();
    const char *path = getenv("FAKE_CUPTI_SCRIPT");
    FILE *f = path ? fopen(path, "r") : 0;
    if (f) {
      size_t cap = 1 << 16, n = 0, k;
      g_script = malloc(cap + 1);
      while (g_script && (k = fread(g_script + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) { cap *= 2; g_script = realloc(g_script, cap + 1); }
      }
      if (g_script) g_script[n] = 0;
      fclose(f);
    }
  }
  return g_script != 0;
}

/* Flushes may come from two threads at once (the tool's periodic one and its exit's), as they
 * may with CUPTI: the script's groups are handed out under a lock, each once. */
static pthread_mutex_t g_script_lock = PTHREAD_MUTEX_INITIALIZER;

int cuptiActivityFlushAll(uint32_t flag) {
  log_line("flush", flag, -1);
  if (g_req && scripted()) {
    pthread_mutex_lock(&g_script_lock);
    for (;;) {
      int held = next_group_held();
      if (held == 3) {
        if (!deliver_script_group()) break;
        continue;
      }
      if (held == 2 || (held && flag != 1)) break;
      if (!deliver_script_group() || flag != 1 || held) break;
    }
    pthread_mutex_unlock(&g_script_lock);
    return 0;
  }
  if (g_flushed || !g_req) return 0;
  g_flushed = 1;
  uint8_t *buf = 0;
  size_t size = 0, maxr = 0, off = 0;
  g_req(&buf, &size, &maxr);
  if (!buf || size < 1024) return 0;
  for (uint32_t i = 0; i < 3; i++) {
    uint8_t *r = buf + off;
    put32(r, 0, 5); put32(r, 4, 211); put64(r, 8, 100 + i * 1000); put64(r, 16, 200 + i * 1000);
    put32(r, 24, 1); put32(r, 28, 2); put32(r, 32, i + 1);
    off += 40;
    uint8_t *k = buf + off;
    put32(k, 0, 10); put64(k, 16, 300 + i * 1000); put64(k, 24, 900 + i * 1000);
    put32(k, 48, 7); put32(k, 52, 1); put32(k, 56, 1); put32(k, 60, 1);
    put32(k, 64, 32); put32(k, 68, 1); put32(k, 72, 1); put32(k, 92, i + 1);
    put64(k, 104, (uint64_t)(uintptr_t)g_kname);
    off += 216;
  }
  g_done(0, 0, buf, size, off);
  return 0;
}

int cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, uint8_t **rec) {
  size_t next = 0;
  if (*rec) {
    uint32_t kind;
    memcpy(&kind, *rec, 4);
    next = (size_t)(*rec - buf) + record_size(kind);
  }
  if (next >= valid) return 12; /* CUPTI_ERROR_MAX_LIMIT_REACHED */
  *rec = buf + next;
  return 0;
}
