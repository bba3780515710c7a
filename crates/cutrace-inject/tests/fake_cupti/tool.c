/* A CUPTI user inside a traced program, like torch.profiler's Kineto in libtorch: a shared
 * library linked against libcupti.so.13 that calls it directly. */
#include <stddef.h>
#include <stdint.h>

typedef void (*cb_t)(void *, uint32_t, uint32_t, const void *);
typedef void (*req_t)(uint8_t **, size_t *, size_t *);
typedef void (*done_t)(void *, uint32_t, uint8_t *, size_t, size_t);
int cuptiSubscribe(void **subscriber, cb_t callback, void *userdata);
int cuptiActivityRegisterCallbacks(req_t requested, done_t completed);
int fake_cupti_calls(const char *name);

static void on_callback(void *u, uint32_t d, uint32_t c, const void *i) { (void)u; (void)d; (void)c; (void)i; }
/* Refuses every buffer: CUPTI then drops and counts the records. */
static void on_requested(uint8_t **b, size_t *s, size_t *m) { *b = 0; *s = 0; if (m) *m = 0; }
static void on_completed(void *c, uint32_t s, uint8_t *b, size_t n, size_t v) { (void)c; (void)s; (void)b; (void)n; (void)v; }

int tool_subscribe(void) {
  void *h = 0;
  return cuptiSubscribe(&h, on_callback, 0);
}
int tool_register(void) { return cuptiActivityRegisterCallbacks(on_requested, on_completed); }
int tool_calls_reaching_cupti(const char *name) { return fake_cupti_calls(name); }
