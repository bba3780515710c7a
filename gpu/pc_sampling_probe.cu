// PC Sampling probe: confirms, on a real GPU, what cutrace-cupti's bindings and
// cutrace-counters' pc.rs assume about cupti_pcsampling.h, and captures a small fixture.
//
// It prints JSON lines on stdout:
//   {"kind":"layout",...}        each struct's size, sizeof, alignment and field offsets as this
//                                compiler lays out the real header (to compare with sys.rs and
//                                `layouts/check.sh`, which uses the host compiler only);
//   {"kind":"stall_reasons",...} the index and name of every stall reason of this GPU;
//   {"kind":"config",...}        each configuration attribute's own status;
//   {"kind":"get_data",...}      per cuptiPCSamplingGetData (and the Disable buffer): its result
//                                and CUPTI's totals (samples, dropped, non-user, PCs, remaining);
//   {"kind":"pc",...}            per PC record: function, name pointer, cubin CRC, PC offset,
//                                correlation id, the (stall index, samples) pairs, and the source
//                                line cuptiGetSassToSourceCorrelation gives (built with -lineinfo);
//   {"kind":"name_pointers",...} how many distinct functionName pointers each function had over
//                                all buffers (1 means CUPTI shares one string: freeing it is the
//                                caller's once, at the end; more means a new string per buffer);
//   {"kind":"expect",...}        the source lines of the two stall patterns below.
// Expected: `chain` (a dependent global-memory load chain over an array larger than L2) stalls
// mostly on a long-scoreboard reason at its load line; `fma_chain` (dependent FMAs) on
// wait/math reasons at its FMA line. In continuous mode correlationId should be 0, and a
// record's functionName should be the kernel's mangled name (as kernel activity records give it).
//
// Build on the GPU machine (one line; CUPTI is the directory holding CUPTI's include/ and lib64,
// sm_90 is the H200's architecture):
//   nvcc -O2 -lineinfo -arch=sm_90 -o pc_sampling_probe gpu/pc_sampling_probe.cu -I"$CUPTI/include" -L"$CUPTI/lib64" -lcupti -lcuda
// usage: pc_sampling_probe [period-exponent 5..31, default 8]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define CU(x) do { CUptiResult r = (x); if (r != CUPTI_SUCCESS) { const char *s = "?"; \
    cuptiGetResultString(r, &s); std::printf("{\"kind\":\"error\",\"call\":\"%s\",\"code\":%d,\"name\":\"%s\"}\n", #x, (int)r, s); \
    std::exit(2); } } while (0)

// Each constant is the line of the statement four lines below it: keep them in step.
static const int kChainLoadLine = __LINE__ + 4;
__global__ void chain(const unsigned *next, unsigned *out, int steps) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 0; s < steps; ++s) {
        i = next[i];  // each load needs the one before it: long-scoreboard stalls
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}

static const int kFmaLine = __LINE__ + 4;
__global__ void fma_chain(float *out, int iters) {
    float a = threadIdx.x * 1e-3f, b = a + 1.f;
    for (int k = 0; k < iters; ++k) {
        a = fmaf(a, 0.999999f, 1e-7f); b = fmaf(b, a, 1e-7f);  // b waits on a: wait stalls
    }
    if (a + b == 12345.f) out[blockIdx.x] = a;  // keeps the loop, never true
}

// Cubins seen at module load, copied (the callback's data lives only during the callback).
static std::vector<std::string> g_cubins;

static void CUPTIAPI on_resource(void *, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
    if (d != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_MODULE_LOADED) return;
    auto *m = (CUpti_ModuleResourceData *)((const CUpti_ResourceData *)data)->resourceDescriptor;
    if (m && m->pCubin) g_cubins.emplace_back(m->pCubin, m->cubinSize);
}

// sizeof, alignment and offsets, one line per struct (names as the header spells them).
#define L(T) std::printf("{\"kind\":\"layout\",\"struct\":\"%s\",\"sizeof\":%zu,\"align\":%zu,\"offsets\":{", #T, sizeof(T), alignof(T))
#define O(T, f, sep) std::printf("\"%s\":%zu%s", #f, offsetof(T, f), sep)
static void layouts() {
    L(CUpti_PCSamplingStallReason); O(CUpti_PCSamplingStallReason, pcSamplingStallReasonIndex, ","); O(CUpti_PCSamplingStallReason, samples, "}}\n");
    L(CUpti_PCSamplingPCData); O(CUpti_PCSamplingPCData, cubinCrc, ","); O(CUpti_PCSamplingPCData, pcOffset, ",");
    O(CUpti_PCSamplingPCData, functionIndex, ","); O(CUpti_PCSamplingPCData, functionName, ",");
    O(CUpti_PCSamplingPCData, stallReasonCount, ","); O(CUpti_PCSamplingPCData, stallReason, ",");
    O(CUpti_PCSamplingPCData, correlationId, "}}\n");
    L(CUpti_PCSamplingData); O(CUpti_PCSamplingData, collectNumPcs, ","); O(CUpti_PCSamplingData, totalSamples, ",");
    O(CUpti_PCSamplingData, droppedSamples, ","); O(CUpti_PCSamplingData, totalNumPcs, ",");
    O(CUpti_PCSamplingData, remainingNumPcs, ","); O(CUpti_PCSamplingData, rangeId, ",");
    O(CUpti_PCSamplingData, pPcData, ","); O(CUpti_PCSamplingData, nonUsrKernelsTotalSamples, ",");
    O(CUpti_PCSamplingData, hardwareBufferFull, "}}\n");
    L(CUpti_PCSamplingConfigurationInfo); O(CUpti_PCSamplingConfigurationInfo, attributeStatus, ",");
    O(CUpti_PCSamplingConfigurationInfo, attributeData, "}}\n");
    L(CUpti_PCSamplingConfigurationInfoParams); O(CUpti_PCSamplingConfigurationInfoParams, ctx, ",");
    O(CUpti_PCSamplingConfigurationInfoParams, pPCSamplingConfigurationInfo, "}}\n");
    L(CUpti_PCSamplingGetStallReasonsParams); O(CUpti_PCSamplingGetStallReasonsParams, stallReasons, "}}\n");
    L(CUpti_GetSassToSourceCorrelationParams); O(CUpti_GetSassToSourceCorrelationParams, lineNumber, ",");
    O(CUpti_GetSassToSourceCorrelationParams, pcOffset, ","); O(CUpti_GetSassToSourceCorrelationParams, dirName, "}}\n");
}

// A buffer of `pcs` records, each with room for every stall reason (as pc.rs allocates).
static void alloc_data(CUpti_PCSamplingData &d, size_t pcs, size_t reasons) {
    std::memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.collectNumPcs = pcs;
    d.pPcData = (CUpti_PCSamplingPCData *)std::calloc(pcs, sizeof(CUpti_PCSamplingPCData));
    for (size_t i = 0; i < pcs; ++i) {
        d.pPcData[i].size = sizeof(CUpti_PCSamplingPCData);
        d.pPcData[i].stallReason = (CUpti_PCSamplingStallReason *)std::calloc(reasons, sizeof(CUpti_PCSamplingStallReason));
    }
}

static std::map<std::string, std::set<const void *>> g_name_ptrs;

// The source line of a PC, from the first loaded cubin whose CRC matches the record's.
static void source_of(const CUpti_PCSamplingPCData &p, std::string &file, unsigned &line) {
    for (auto &c : g_cubins) {
        CUpti_GetCubinCrcParams crc = {CUpti_GetCubinCrcParamsSize, c.size(), c.data(), 0};
        if (cuptiGetCubinCrc(&crc) != CUPTI_SUCCESS || crc.cubinCrc != p.cubinCrc) continue;
        CUpti_GetSassToSourceCorrelationParams s = {};
        s.size = CUpti_GetSassToSourceCorrelationParamsSize;
        s.cubin = c.data(); s.cubinSize = c.size(); s.functionName = p.functionName; s.pcOffset = p.pcOffset;
        if (cuptiGetSassToSourceCorrelation(&s) == CUPTI_SUCCESS) {
            file = s.fileName ? s.fileName : ""; line = s.lineNumber;
            std::free(s.fileName); std::free(s.dirName);
        }
        return;
    }
}

// One buffer's totals, then each record; pairs are read up to `reasons` (what was allocated), and
// CUPTI's own stallReasonCount is printed beside them.
static void print(const char *source, int call, CUptiResult r, const CUpti_PCSamplingData &d, size_t cap,
                  size_t reasons) {
    std::printf("{\"kind\":\"get_data\",\"source\":\"%s\",\"call\":%d,\"result\":%d,\"total_samples\":%llu,"
                "\"dropped_samples\":%llu,\"non_user_samples\":%llu,\"total_num_pcs\":%zu,\"remaining_num_pcs\":%zu,"
                "\"range_id\":%llu,\"hardware_buffer_full\":%u}\n", source, call, (int)r,
                (unsigned long long)d.totalSamples, (unsigned long long)d.droppedSamples,
                (unsigned long long)d.nonUsrKernelsTotalSamples, d.totalNumPcs, d.remainingNumPcs,
                (unsigned long long)d.rangeId, (unsigned)d.hardwareBufferFull);
    for (size_t i = 0; i < d.totalNumPcs && i < cap; ++i) {
        const CUpti_PCSamplingPCData &p = d.pPcData[i];
        const char *fn = p.functionName ? p.functionName : "";
        g_name_ptrs[fn].insert(p.functionName);
        std::string file; unsigned line = 0;
        source_of(p, file, line);
        std::printf("{\"kind\":\"pc\",\"source\":\"%s\",\"call\":%d,\"function\":\"%s\",\"function_ptr\":\"%p\","
                    "\"function_index\":%u,\"cubin_crc\":%llu,\"pc_offset\":%llu,\"correlation_id\":%u,"
                    "\"file\":\"%s\",\"line\":%u,\"stall_reason_count\":%zu,\"stalls\":[", source, call, fn,
                    (void *)p.functionName, p.functionIndex, (unsigned long long)p.cubinCrc,
                    (unsigned long long)p.pcOffset, p.correlationId, file.c_str(), line, p.stallReasonCount);
        for (size_t j = 0; j < p.stallReasonCount && j < reasons; ++j)
            std::printf("%s[%u,%u]", j ? "," : "", p.stallReason[j].pcSamplingStallReasonIndex, p.stallReason[j].samples);
        std::printf("]}\n");
    }
}

int main(int argc, char **argv) {
    unsigned period = argc > 1 ? (unsigned)std::atoi(argv[1]) : 8;
    layouts();
    CUpti_SubscriberHandle sub;
    CU(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_resource, nullptr));
    CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED));
    CK(cudaFree(0));
    CUcontext ctx;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) { std::fprintf(stderr, "no context\n"); return 1; }

    CUpti_PCSamplingEnableParams en = {CUpti_PCSamplingEnableParamsSize, nullptr, ctx};
    CU(cuptiPCSamplingEnable(&en));
    size_t n = 0;
    CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize, nullptr, ctx, &n};
    CU(cuptiPCSamplingGetNumStallReasons(&np));
    std::vector<uint32_t> index(n);
    std::vector<char *> names(n);
    for (auto &s : names) s = (char *)std::calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
    CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize, nullptr, ctx, n, index.data(), names.data()};
    CU(cuptiPCSamplingGetStallReasons(&sp));
    std::printf("{\"kind\":\"stall_reasons\",\"count\":%zu,\"reasons\":[", n);
    for (size_t i = 0; i < n; ++i) std::printf("%s{\"index\":%u,\"name\":\"%s\"}", i ? "," : "", index[i], names[i]);
    std::printf("]}\n");

    // Continuous mode, every stall reason, a buffer CUPTI fills at Disable, no start/stop control.
    const size_t pcs = 2048;
    CUpti_PCSamplingData at_disable, got;
    alloc_data(at_disable, pcs, n);
    alloc_data(got, pcs, n);
    CUpti_PCSamplingConfigurationInfo cfg[6] = {};
    const char *cfg_names[6] = {"COLLECTION_MODE", "STALL_REASON", "SAMPLING_PERIOD", "SAMPLING_DATA_BUFFER",
                                "ENABLE_START_STOP_CONTROL", "OUTPUT_DATA_FORMAT"};
    cfg[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    cfg[0].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    cfg[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    cfg[1].attributeData.stallReasonData.stallReasonCount = n;
    cfg[1].attributeData.stallReasonData.pStallReasonIndex = index.data();
    cfg[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    cfg[2].attributeData.samplingPeriodData.samplingPeriod = period;
    cfg[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    cfg[3].attributeData.samplingDataBufferData.samplingDataBuffer = &at_disable;
    cfg[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    cfg[4].attributeData.enableStartStopControlData.enableStartStopControl = 0;
    cfg[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
    cfg[5].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
    CUpti_PCSamplingConfigurationInfoParams cp = {CUpti_PCSamplingConfigurationInfoParamsSize, nullptr, ctx, 6, cfg};
    CUptiResult cr = cuptiPCSamplingSetConfigurationAttribute(&cp);
    std::printf("{\"kind\":\"config\",\"result\":%d,\"period\":%u,\"status\":{", (int)cr, period);
    for (int i = 0; i < 6; ++i) std::printf("%s\"%s\":%d", i ? "," : "", cfg_names[i], (int)cfg[i].attributeStatus);
    std::printf("}}\n");
    if (cr != CUPTI_SUCCESS) return 2;

    // The two stall patterns: one random cycle over 64 Mi entries (256 MB, past any L2;
    // Sattolo's shuffle), then FMAs.
    const unsigned entries = 64u << 20, threads = 256, blocks = 264;
    std::vector<unsigned> perm(entries);
    for (unsigned i = 0; i < entries; ++i) perm[i] = i;
    unsigned long long x = 88172645463325252ull;  // xorshift64
    for (unsigned i = entries - 1; i > 0; --i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        std::swap(perm[i], perm[x % i]);
    }
    unsigned *next, *out; float *fout;
    CK(cudaMalloc(&next, entries * sizeof(unsigned)));
    CK(cudaMalloc(&out, blocks * threads * sizeof(unsigned)));
    CK(cudaMalloc(&fout, blocks * sizeof(float)));
    CK(cudaMemcpy(next, perm.data(), entries * sizeof(unsigned), cudaMemcpyHostToDevice));
    int call = 0;
    for (int round = 0; round < 2; ++round) {
        if (round == 0) chain<<<blocks, threads>>>(next, out, 4096);
        else fma_chain<<<blocks * 4, threads>>>(fout, 1 << 16);
        CK(cudaDeviceSynchronize());
        for (int k = 0; k < 16; ++k) {  // until CUPTI has nothing left, at most 16 calls
            CUpti_PCSamplingGetDataParams gp = {CUpti_PCSamplingGetDataParamsSize, nullptr, ctx, &got};
            CUptiResult r = cuptiPCSamplingGetData(&gp);
            print("get_data", call++, r, got, pcs, n);
            if (r != CUPTI_SUCCESS || got.remainingNumPcs == 0) break;
        }
    }
    CUpti_PCSamplingDisableParams dp = {CUpti_PCSamplingDisableParamsSize, nullptr, ctx};
    CUptiResult r = cuptiPCSamplingDisable(&dp);
    print("disable", call, r, at_disable, pcs, n);
    for (auto &kv : g_name_ptrs)
        std::printf("{\"kind\":\"name_pointers\",\"function\":\"%s\",\"distinct_pointers\":%zu}\n", kv.first.c_str(), kv.second.size());
    std::printf("{\"kind\":\"expect\",\"file\":\"%s\",\"chain_load_line\":%d,\"fma_line\":%d,\"cubins\":%zu}\n",
                __FILE__, kChainLoadLine, kFmaLine, g_cubins.size());
    return 0;
}
