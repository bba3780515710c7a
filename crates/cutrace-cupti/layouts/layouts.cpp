// Prints the layout of every CUPTI parameter struct cutrace-cupti declares, from NVIDIA's own
// headers: `Struct size=<CUPTI_PROFILER_STRUCT_SIZE> field=<offset> ...`, one line per struct, in
// the order and spelling of the `params!` invocations in src/sys.rs. `check.sh` compiles it.
#include <cstddef>
#include <cstdio>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#define S(T, last) std::printf("\n%s size=%zu", #T, (size_t)CUPTI_PROFILER_STRUCT_SIZE(T, last))
#define F(T, f) std::printf(" %s=%zu", #f, (size_t)offsetof(T, f))

int main() {
    S(CUpti_Profiler_Initialize_Params, pPriv);
    S(CUpti_Profiler_DeInitialize_Params, pPriv);
    S(CUpti_Profiler_DeviceSupported_Params, api);
    F(CUpti_Profiler_DeviceSupported_Params, cuDevice);
    F(CUpti_Profiler_DeviceSupported_Params, isSupported);
    F(CUpti_Profiler_DeviceSupported_Params, wsl);
    F(CUpti_Profiler_DeviceSupported_Params, api);
    S(CUpti_Profiler_GetCounterAvailability_Params, pCounterAvailabilityImage);
    F(CUpti_Profiler_GetCounterAvailability_Params, ctx);
    F(CUpti_Profiler_GetCounterAvailability_Params, counterAvailabilityImageSize);
    F(CUpti_Profiler_GetCounterAvailability_Params, pCounterAvailabilityImage);
    S(CUpti_Device_GetChipName_Params, pChipName);
    F(CUpti_Device_GetChipName_Params, deviceIndex);
    F(CUpti_Device_GetChipName_Params, pChipName);

    S(CUpti_Profiler_Host_Initialize_Params, pHostObject);
    F(CUpti_Profiler_Host_Initialize_Params, profilerType);
    F(CUpti_Profiler_Host_Initialize_Params, pChipName);
    F(CUpti_Profiler_Host_Initialize_Params, pCounterAvailabilityImage);
    F(CUpti_Profiler_Host_Initialize_Params, pHostObject);
    S(CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
    S(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames);
    F(CUpti_Profiler_Host_GetSupportedChips_Params, numChips);
    F(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames);
    S(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics);
    F(CUpti_Profiler_Host_GetBaseMetrics_Params, pHostObject);
    F(CUpti_Profiler_Host_GetBaseMetrics_Params, metricType);
    F(CUpti_Profiler_Host_GetBaseMetrics_Params, ppMetricNames);
    F(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics);
    S(CUpti_Profiler_Host_GetMetricProperties_Params, metricType);
    F(CUpti_Profiler_Host_GetMetricProperties_Params, pMetricName);
    F(CUpti_Profiler_Host_GetMetricProperties_Params, pDescription);
    F(CUpti_Profiler_Host_GetMetricProperties_Params, pHwUnit);
    F(CUpti_Profiler_Host_GetMetricProperties_Params, pDimUnit);
    F(CUpti_Profiler_Host_GetMetricProperties_Params, metricType);
    S(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pCounterDataImage);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, counterDataImageSize);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, rangeIndex);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ppMetricNames);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, numMetrics);
    F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues);
    S(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
    F(CUpti_Profiler_Host_ConfigAddMetrics_Params, ppMetricNames);
    F(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
    S(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize);
    S(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
    F(CUpti_Profiler_Host_GetConfigImage_Params, configImageSize);
    S(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
    F(CUpti_Profiler_Host_GetNumOfPasses_Params, pConfigImage);

    S(CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject);
    F(CUpti_RangeProfiler_Enable_Params, ctx);
    S(CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject);
    S(CUpti_RangeProfiler_Start_Params, pRangeProfilerObject);
    S(CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted);
    F(CUpti_RangeProfiler_Stop_Params, passIndex);
    F(CUpti_RangeProfiler_Stop_Params, targetNestingLevel);
    F(CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted);
    S(CUpti_RangeProfiler_PushRange_Params, pRangeName);
    S(CUpti_RangeProfiler_PopRange_Params, pRangeProfilerObject);
    S(CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel);
    F(CUpti_RangeProfiler_SetConfig_Params, configSize);
    F(CUpti_RangeProfiler_SetConfig_Params, pConfig);
    F(CUpti_RangeProfiler_SetConfig_Params, counterDataImageSize);
    F(CUpti_RangeProfiler_SetConfig_Params, pCounterDataImage);
    F(CUpti_RangeProfiler_SetConfig_Params, range);
    F(CUpti_RangeProfiler_SetConfig_Params, replayMode);
    F(CUpti_RangeProfiler_SetConfig_Params, maxRangesPerPass);
    F(CUpti_RangeProfiler_SetConfig_Params, numNestingLevels);
    F(CUpti_RangeProfiler_SetConfig_Params, minNestingLevel);
    F(CUpti_RangeProfiler_SetConfig_Params, passIndex);
    F(CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel);
    S(CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize);
    F(CUpti_RangeProfiler_GetCounterDataSize_Params, pMetricNames);
    F(CUpti_RangeProfiler_GetCounterDataSize_Params, numMetrics);
    F(CUpti_RangeProfiler_GetCounterDataSize_Params, maxNumOfRanges);
    F(CUpti_RangeProfiler_GetCounterDataSize_Params, maxNumRangeTreeNodes);
    F(CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize);
    S(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, pCounterData);
    F(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, counterDataSize);
    S(CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped);
    F(CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped);
    S(CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges);
    F(CUpti_RangeProfiler_GetCounterDataInfo_Params, counterDataImageSize);
    F(CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges);
    S(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeName);
    F(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeIndex);
    F(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeDelimiter);
    F(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeName);
    std::printf("\n");
    return 0;
}
