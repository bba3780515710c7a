// CUDA workloads that check `cutrace record` against what the program itself knows.
//
// Each mode launches a known amount of work and prints one JSON line (to stdout, or to the file
// named by --json) with what it launched (kernels, copies, memsets, API calls by name, NVTX
// ranges) and its own cudaEvent timing per stream, so gpu/check.py can compare a trace with
// the program's own account. Build: nvcc -O2 -arch=sm_90 -o workloads workloads.cu
//
// Modes: two_streams, tiny, copy_overlap, graph, threads8, nvtx, longrun SECONDS,
//        multiproc K (K child processes, each a traced CUDA process of its own),
//        hang SECONDS (100 short kernels, then one that spins on a flag in pinned host memory
//        until the host sets it SECONDS later: a kernel that hangs, then completes; then one
//        more short kernel on that stream)

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__,      \
              __LINE__, cudaGetErrorString(e_));                                           \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins for `ns` nanoseconds of GPU time (one block is enough to be visible and to overlap).
__global__ void spin(unsigned long long ns, int *out) {
  unsigned long long t0 = globaltimer();
  while (globaltimer() - t0 < ns) {
  }
  if (threadIdx.x == 0 && out) atomicAdd(out, 1);
}

__global__ void empty_kernel() {}

// Spins until the host writes a non-zero value to *flag (pinned, mapped host memory).
__global__ void wait_for_host(volatile int *flag) {
  while (*flag == 0) {
  }
}

__global__ void scale(float *x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}

static double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What the program launched, printed as JSON.
struct Report {
  std::string mode;
  long kernels = 0, memcpys = 0, memsets = 0, nvtx_ranges = 0, nvtx_marks = 0;
  std::vector<std::pair<std::string, long>> api;  // runtime API name -> calls
  std::vector<std::string> streams;               // JSON objects
  std::string extra;                              // extra JSON members
  void add_api(const char *name, long n) {
    for (auto &p : api)
      if (p.first == name) {
        p.second += n;
        return;
      }
    api.emplace_back(name, n);
  }
  void print(const char *path) {
    std::string s = "{\"mode\":\"" + mode + "\",\"kernels\":" + std::to_string(kernels) +
                    ",\"memcpys\":" + std::to_string(memcpys) +
                    ",\"memsets\":" + std::to_string(memsets) +
                    ",\"nvtx_ranges\":" + std::to_string(nvtx_ranges) +
                    ",\"nvtx_marks\":" + std::to_string(nvtx_marks) + ",\"api\":{";
    for (size_t i = 0; i < api.size(); i++)
      s += (i ? "," : "") + std::string("\"") + api[i].first + "\":" +
           std::to_string(api[i].second);
    s += "},\"streams\":[";
    for (size_t i = 0; i < streams.size(); i++) s += (i ? "," : "") + streams[i];
    s += "]" + extra + "}\n";
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
      perror(path);
      exit(1);
    }
    fputs(s.c_str(), f);
    if (path) fclose(f);
    else fflush(stdout);
  }
};

static std::string stream_json(cudaStream_t s, int index, long kernels, float event_ms) {
  unsigned long long id = 0;
  CK(cudaStreamGetId(s, &id));
  char buf[256];
  snprintf(buf, sizeof buf,
           "{\"index\":%d,\"stream_id\":%llu,\"kernels\":%ld,\"event_ms\":%.6f}", index, id,
           kernels, event_ms);
  return buf;
}

// A gate: a long kernel on its own stream and an event after it. Streams that wait on the gate
// get all their work queued before any of it starts, so their cudaEvent span measures GPU
// time, not how fast the host enqueued.
struct Gate {
  cudaStream_t s;
  cudaEvent_t e;
};
static Gate make_gate(Report &r, unsigned long long ns) {
  Gate g;
  CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&g.e, cudaEventDisableTiming));
  spin<<<1, 32, 0, g.s>>>(ns, nullptr);
  CK(cudaEventRecord(g.e, g.s));
  r.kernels += 1;
  r.add_api("cudaLaunchKernel", 1);
  r.add_api("cudaEventRecord", 1);
  return g;
}
static void wait_gate(Report &r, cudaStream_t s, const Gate &g) {
  CK(cudaStreamWaitEvent(s, g.e, 0));
  r.add_api("cudaStreamWaitEvent", 1);
}

// Two streams, each a back-to-back run of 1 ms kernels, overlapping in time.
static void two_streams(Report &r) {
  const int counts[2] = {20, 24};
  cudaStream_t s[2];
  cudaEvent_t a[2], b[2];
  for (int i = 0; i < 2; i++) {
    CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    CK(cudaEventCreate(&a[i]));
    CK(cudaEventCreate(&b[i]));
  }
  r.add_api("cudaEventCreate", 4);
  Gate g = make_gate(r, 20000000ULL);
  r.add_api("cudaStreamCreateWithFlags", 3);
  for (int i = 0; i < 2; i++) {
    wait_gate(r, s[i], g);
    CK(cudaEventRecord(a[i], s[i]));
    for (int k = 0; k < counts[i]; k++) spin<<<1, 32, 0, s[i]>>>(1000000ULL, nullptr);
    CK(cudaEventRecord(b[i], s[i]));
    r.kernels += counts[i];
    r.add_api("cudaLaunchKernel", counts[i]);
  }
  r.add_api("cudaEventRecord", 4);
  CK(cudaDeviceSynchronize());
  r.add_api("cudaDeviceSynchronize", 1);
  for (int i = 0; i < 2; i++) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a[i], b[i]));
    r.streams.push_back(stream_json(s[i], i, counts[i], ms));
  }
}

static double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// `batches` batches of `n` one-thread empty kernels on one stream: the launch-overhead
// benchmark. Each batch is timed on its own (wall and this thread's CPU time); us_per_launch is
// the median batch, so a burst of noise on the shared machine spoils one batch, not the run.
static void tiny(Report &r, long n, int batches) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  empty_kernel<<<1, 1, 0, s>>>();  // warm-up (module load)
  CK(cudaStreamSynchronize(s));
  std::vector<double> wall, cpu;
  for (int b = 0; b < batches; b++) {
    double t0 = now_us(), c0 = thread_cpu_us();
    for (long i = 0; i < n; i++) empty_kernel<<<1, 1, 0, s>>>();
    CK(cudaStreamSynchronize(s));
    wall.push_back((now_us() - t0) / n);
    cpu.push_back((thread_cpu_us() - c0) / n);
  }
  r.kernels = n * batches + 1;
  r.add_api("cudaLaunchKernel", n * batches + 1);
  r.add_api("cudaStreamSynchronize", batches + 1);
  std::string b = ",\"launches\":" + std::to_string(n * batches) +
                  ",\"batches\":" + std::to_string(batches) + ",\"batch_us_per_launch\":[";
  for (int i = 0; i < batches; i++) b += (i ? "," : "") + std::to_string(wall[i]);
  b += "],\"us_per_launch\":" + std::to_string(median(wall)) +
       ",\"cpu_us_per_launch\":" + std::to_string(median(cpu));
  r.extra += b;
}

// Host<->device copies on one stream overlapped with compute on another.
// tiny_ab N ROUNDS "KINDS|API" ...: one process alternates record configurations batch by batch
// through cutrace's bench hook (`cutrace_bench_set`, CUTRACE_BENCH_HOOK=1 under `cutrace record`),
// timing N launches per configuration per round, the order reversed every other round. Ratios
// between configurations of the same round are free of the process-to-process spread.
static int tiny_ab(Report &r, long n, int rounds, const std::vector<std::string> &configs) {
  typedef int (*set_fn)(const char *, const char *);
  set_fn set = (set_fn)dlsym(RTLD_DEFAULT, "cutrace_bench_set");
  if (!set) {
    fprintf(stderr, "tiny_ab: cutrace_bench_set not found: run under `cutrace record` with CUTRACE_BENCH_HOOK=1\n");
    return 3;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  size_t k = configs.size();
  std::vector<std::vector<double>> us(k);
  for (int round = 0; round < rounds; round++) {
    for (size_t j = 0; j < k; j++) {
      size_t c = round % 2 ? k - 1 - j : j;
      std::string kinds = configs[c], api = "all";
      size_t bar = kinds.find('|');
      if (bar != std::string::npos) {
        api = kinds.substr(bar + 1);
        kinds = kinds.substr(0, bar);
      }
      CK(cudaStreamSynchronize(s));
      int rc = set(kinds.c_str(), api.c_str());
      if (rc < 0) {
        fprintf(stderr, "tiny_ab: cutrace_bench_set(\"%s\", \"%s\") = %d\n", kinds.c_str(), api.c_str(), rc);
        return 3;
      }
      if (rc > 0 && round == 0)  // switched, but not exactly as asked: the trace's notes say how
        fprintf(stderr, "tiny_ab: warning: configuration %s only approximated (see the trace's notes)\n", configs[c].c_str());
      for (int i = 0; i < 2000; i++) empty_kernel<<<1, 1, 0, s>>>();
      CK(cudaStreamSynchronize(s));
      double t0 = now_us();
      for (long i = 0; i < n; i++) empty_kernel<<<1, 1, 0, s>>>();
      CK(cudaStreamSynchronize(s));
      us[c].push_back((now_us() - t0) / n);
      // One runtime state query per configuration, untimed: bench_ab.py's check looks for its
      // record under `all` and its absence under `lean`.
      CK(cudaGetLastError());
    }
  }
  std::string b = ",\"ab\":{\"launches\":" + std::to_string(n) + ",\"rounds\":" + std::to_string(rounds) + ",\"configs\":[";
  for (size_t c = 0; c < k; c++) b += std::string(c ? "," : "") + "\"" + configs[c] + "\"";
  b += "],\"us_per_launch\":[";
  for (size_t c = 0; c < k; c++) {
    b += c ? ",[" : "[";
    for (size_t i = 0; i < us[c].size(); i++) b += (i ? "," : "") + std::to_string(us[c][i]);
    b += "]";
  }
  b += "]}";
  r.extra += b;
  return 0;
}

static void copy_overlap(Report &r) {
  const int chunks = 8;
  const size_t n = 8 << 20;  // floats per chunk (32 MiB)
  float *h = nullptr, *d = nullptr, *w = nullptr;
  CK(cudaMallocHost(&h, chunks * n * sizeof(float)));
  CK(cudaMalloc(&d, chunks * n * sizeof(float)));
  CK(cudaMalloc(&w, n * sizeof(float)));
  memset(h, 0, chunks * n * sizeof(float));
  cudaStream_t copy, compute;
  CK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CK(cudaMemsetAsync(w, 0, n * sizeof(float), compute));
  r.memsets += 1;
  r.add_api("cudaMemsetAsync", 1);
  cudaEvent_t a, b, c, e;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventCreate(&c));
  CK(cudaEventCreate(&e));
  CK(cudaStreamSynchronize(compute));
  Gate g = make_gate(r, 20000000ULL);
  wait_gate(r, copy, g);
  wait_gate(r, compute, g);
  CK(cudaEventRecord(a, copy));
  CK(cudaEventRecord(c, compute));
  for (int i = 0; i < chunks; i++) {
    spin<<<1, 32, 0, compute>>>(2000000ULL, nullptr);
    scale<<<(n + 255) / 256, 256, 0, compute>>>(w, (int)n, 1.5f);
  }
  for (int i = 0; i < chunks; i++)
    CK(cudaMemcpyAsync(d + i * n, h + i * n, n * sizeof(float), cudaMemcpyHostToDevice, copy));
  for (int i = 0; i < chunks; i++)
    CK(cudaMemcpyAsync(h + i * n, d + i * n, n * sizeof(float), cudaMemcpyDeviceToHost, copy));
  CK(cudaEventRecord(b, copy));
  CK(cudaEventRecord(e, compute));
  r.add_api("cudaEventRecord", 4);
  r.memcpys += 2 * chunks;
  r.add_api("cudaMemcpyAsync", 2 * chunks);
  r.kernels += 2 * chunks;
  r.add_api("cudaLaunchKernel", 2 * chunks);
  CK(cudaStreamSynchronize(copy));
  CK(cudaStreamSynchronize(compute));
  r.add_api("cudaStreamSynchronize", 3);
  float ms_copy = 0, ms_compute = 0;
  CK(cudaEventElapsedTime(&ms_copy, a, b));
  CK(cudaEventElapsedTime(&ms_compute, c, e));
  r.streams.push_back(stream_json(compute, 0, 2 * chunks, ms_compute));
  char buf[256];
  unsigned long long cid = 0;
  CK(cudaStreamGetId(copy, &cid));
  snprintf(buf, sizeof buf, ",\"copy_stream\":{\"stream_id\":%llu,\"memcpys\":%d,\"event_ms\":%.6f}",
           cid, 2 * chunks, ms_copy);
  r.extra += buf;
}

// A captured CUDA graph of 6 kernels and a memset, launched 50 times.
static void graph(Report &r) {
  const int nodes = 6, launches = 50;
  const int n = 1 << 16;
  float *x = nullptr;
  CK(cudaMalloc(&x, n * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemsetAsync(x, 0, n * sizeof(float), s));
  for (int i = 0; i < nodes; i++) scale<<<n / 256, 256, 0, s>>>(x, n, 1.01f);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < launches; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  r.kernels = (long)nodes * launches;
  r.memsets = launches;
  r.add_api("cudaLaunchKernel", nodes);  // the launches made while capturing
  r.add_api("cudaGraphLaunch", launches);
  char buf[96];
  snprintf(buf, sizeof buf, ",\"graph_nodes\":%d,\"graph_launches\":%d", nodes, launches);
  r.extra += buf;
}

// Eight host threads, each with its own stream and its own run of 0.5 ms kernels.
static void threads8(Report &r) {
  const int nthreads = 8;
  std::vector<std::string> js(nthreads);
  std::vector<std::thread> th;
  Gate g = make_gate(r, 50000000ULL);
  for (int t = 0; t < nthreads; t++) {
    th.emplace_back([t, &js, &g]() {
      cudaStream_t s;
      cudaEvent_t a, b;
      CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      CK(cudaEventCreate(&a));
      CK(cudaEventCreate(&b));
      int count = 10 + t;
      CK(cudaStreamWaitEvent(s, g.e, 0));
      CK(cudaEventRecord(a, s));
      for (int k = 0; k < count; k++) spin<<<1, 32, 0, s>>>(500000ULL, nullptr);
      CK(cudaEventRecord(b, s));
      CK(cudaStreamSynchronize(s));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      js[t] = stream_json(s, t, count, ms);
    });
  }
  for (auto &x : th) x.join();
  for (int t = 0; t < nthreads; t++) {
    r.kernels += 10 + t;
    r.streams.push_back(js[t]);
  }
  r.add_api("cudaLaunchKernel", r.kernels - 1);
  r.add_api("cudaStreamWaitEvent", nthreads);
  r.add_api("cudaEventRecord", 2 * nthreads);
  r.add_api("cudaStreamSynchronize", nthreads);
}

// NVTX: 10 "step" ranges, each holding "forward" and "backward", plus 5 marks.
static void nvtx(Report &r) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (int i = 0; i < 10; i++) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    spin<<<1, 32, 0, s>>>(100000ULL, nullptr);
    nvtxRangePop();
    nvtxRangePushA("backward");
    spin<<<1, 32, 0, s>>>(200000ULL, nullptr);
    CK(cudaStreamSynchronize(s));
    nvtxRangePop();
    nvtxRangePop();
    if (i % 2 == 0) nvtxMarkA("checkpoint");
  }
  r.kernels = 20;
  r.nvtx_ranges = 30;
  r.nvtx_marks = 5;
  r.add_api("cudaLaunchKernel", 20);
  r.add_api("cudaStreamSynchronize", 10);
}

// 100 short kernels, then one that hangs until the host lets it go after `seconds`.
static void hang(Report &r, double seconds) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (int k = 0; k < 100; k++) spin<<<1, 32, 0, s>>>(10000ULL, nullptr);
  CK(cudaStreamSynchronize(s));
  int *flag = nullptr, *dflag = nullptr;
  CK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
  *flag = 0;
  CK(cudaHostGetDevicePointer(&dflag, flag, 0));
  wait_for_host<<<1, 1, 0, s>>>(dflag);
  printf("hang started\n");
  fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds((long)(seconds * 1000)));
  *(volatile int *)flag = 1;
  CK(cudaStreamSynchronize(s));
  printf("hang released\n");
  fflush(stdout);
  // One more on the same stream: the stream going on says the hung kernel ended.
  spin<<<1, 32, 0, s>>>(10000ULL, nullptr);
  CK(cudaStreamSynchronize(s));
  r.kernels = 102;
  r.add_api("cudaLaunchKernel", 102);
  CK(cudaFreeHost(flag));
}

static std::atomic<int> g_signal{0};
static void on_signal(int sig) { g_signal.store(sig); }

// Runs 100 µs kernels for up to SECONDS; SIGTERM/SIGINT end it early through its own handler
// (exit status 42), which must still run under cutrace.
static int longrun(Report &r, double seconds) {
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  double t0 = now_us();
  long n = 0;
  printf("longrun started\n");
  fflush(stdout);
  while (now_us() - t0 < seconds * 1e6 && g_signal.load() == 0) {
    for (int k = 0; k < 100; k++) spin<<<1, 32, 0, s>>>(100000ULL, nullptr);
    CK(cudaStreamSynchronize(s));
    n += 100;
  }
  r.kernels = n;
  r.add_api("cudaLaunchKernel", n);
  if (g_signal.load() != 0) {
    printf("handled signal %d after %ld kernels\n", g_signal.load(), n);
    fflush(stdout);
    return 42;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s MODE [ARG] [--json PATH] [--batches B]\n  modes: two_streams tiny [N] copy_overlap "
            "graph threads8 nvtx longrun SECONDS\n"
            "         tiny_ab N ROUNDS 'KINDS|API'... (under cutrace record, CUTRACE_BENCH_HOOK=1)\n",
            argv[0]);
    return 2;
  }
  const char *json = nullptr;
  int batches = 1;
  std::vector<std::string> args;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = atoi(argv[++i]);
    else args.push_back(argv[i]);
  }
  if (args[0] == "multiproc") {
    // K children, none of them sharing CUDA with the parent (which never touches it): even ones
    // fork and exec `tiny 1000` (a new program image: a fresh injection), odd ones only fork and
    // run the same work in the copied image (the injection library is already mapped there,
    // untouched, and starts at the child's own cuInit). Each child writes JSON_i with its pid.
    int k = args.size() > 1 ? atoi(args[1].c_str()) : 4;
    std::string base = json ? json : "multiproc";
    std::vector<pid_t> kids;
    for (int i = 0; i < k; i++) {
      std::string path = base + "." + std::to_string(i) + ".json";
      pid_t pid = fork();
      if (pid < 0) {
        perror("fork");
        return 1;
      }
      if (pid == 0) {
        if (i % 2 == 0) {
          execl("/proc/self/exe", argv[0], "tiny", "1000", "--json", path.c_str(), (char *)nullptr);
          perror("execl");
          _exit(127);
        }
        Report c;
        c.mode = "tiny";
        CK(cudaFree(nullptr));
        spin<<<1, 32>>>(0ULL, nullptr);
        scale<<<1, 32>>>(nullptr, 0, 1.0f);
        CK(cudaDeviceSynchronize());
        tiny(c, 1000, 1);
        CK(cudaDeviceSynchronize());
        c.kernels += 2;
        c.add_api("cudaLaunchKernel", 2);
        c.add_api("cudaDeviceSynchronize", 2);
        c.extra += ",\"pid\":" + std::to_string(getpid()) + ",\"how\":\"fork\"";
        c.print(path.c_str());
        exit(0);  // not _exit: atexit handlers (the injection's final flush) must run
      }
      kids.push_back(pid);
    }
    int bad = 0;
    for (pid_t pid : kids) {
      int st = 0;
      waitpid(pid, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    printf("multiproc: %d children, %d failed\n", k, bad);
    return bad ? 1 : 0;
  }
  Report r;
  r.mode = args[0];
  int rc = 0;
  CK(cudaFree(nullptr));  // create the context before anything is timed
  // Load the modules (lazy loading) before anything is timed.
  spin<<<1, 32>>>(0ULL, nullptr);
  scale<<<1, 32>>>(nullptr, 0, 1.0f);
  CK(cudaDeviceSynchronize());
  if (r.mode == "two_streams") two_streams(r);
  else if (r.mode == "tiny") tiny(r, args.size() > 1 ? atol(args[1].c_str()) : 100000, batches < 1 ? 1 : batches);
  else if (r.mode == "copy_overlap") copy_overlap(r);
  else if (r.mode == "graph") graph(r);
  else if (r.mode == "threads8") threads8(r);
  else if (r.mode == "nvtx") nvtx(r);
  else if (r.mode == "longrun") rc = longrun(r, args.size() > 1 ? atof(args[1].c_str()) : 10.0);
  else if (r.mode == "hang") hang(r, args.size() > 1 ? atof(args[1].c_str()) : 90.0);
  else if (r.mode == "tiny_ab") {
    if (args.size() < 4) {
      fprintf(stderr, "usage: tiny_ab N ROUNDS 'KINDS|API' ... (at least one configuration)\n");
      return 2;
    }
    rc = tiny_ab(r, atol(args[1].c_str()), atoi(args[2].c_str()), std::vector<std::string>(args.begin() + 3, args.end()));
  }
  else {
    fprintf(stderr, "unknown mode %s\n", r.mode.c_str());
    return 2;
  }
  CK(cudaDeviceSynchronize());
  r.kernels += 2;
  r.add_api("cudaLaunchKernel", 2);
  r.add_api("cudaDeviceSynchronize", 2);
  r.extra += ",\"pid\":" + std::to_string(getpid());
  r.print(json);
  return rc;
}
