// Prints the layout of every CUPTI struct cutrace-cupti declares, from NVIDIA's own headers:
// `Struct size=<CUPTI_PROFILER_STRUCT_SIZE> field=<offset> ...`, one line per struct, in the order
// and spelling of the `params!` and `c_struct!` invocations in src/sys.rs; PC Sampling's data
// structs (arrays of them are what CUPTI walks) add `sizeof=` and `align=`. A field named `size`
// is not printed (the key means the struct size; sys.rs asserts that field at offset 0).
// `check.sh` compiles it.
#include <cstddef>
#include <cstdio>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cupti_pmsampling.h>
#include <cupti_pcsampling.h>
#include <cupti_activity.h>

#define S(T, last) std::printf("\n%s size=%zu", #T, (size_t)CUPTI_PROFILER_STRUCT_SIZE(T, last))
#define F(T, f) std::printf(" %s=%zu", #f, (size_t)offsetof(T, f))
#define P(T, last) std::printf("\n%s size=%zu", #T, (size_t)CUPTI_PCSAMPLING_STRUCT_SIZE(T, last))
#define Z(T) std::printf(" sizeof=%zu align=%zu", sizeof(T), alignof(T))
// Activity records have no size macro: their size is the C sizeof. G prints a field under the
// name sys.rs gives it where that is not the header's (a nested field, a field named `size`).
#define A(T) std::printf("\n%s size=%zu sizeof=%zu align=%zu", #T, sizeof(T), sizeof(T), alignof(T))
#define G(T, key, f) std::printf(" %s=%zu", #key, (size_t)offsetof(T, f))

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
    S(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
    F(CUpti_PmSampling_SetConfig_Params, pPmSamplingObject);
    F(CUpti_PmSampling_SetConfig_Params, configSize);
    F(CUpti_PmSampling_SetConfig_Params, pConfig);
    F(CUpti_PmSampling_SetConfig_Params, hardwareBufferSize);
    F(CUpti_PmSampling_SetConfig_Params, samplingInterval);
    F(CUpti_PmSampling_SetConfig_Params, triggerMode);
    F(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
    S(CUpti_PmSampling_Enable_Params, pPmSamplingObject);
    F(CUpti_PmSampling_Enable_Params, deviceIndex);
    F(CUpti_PmSampling_Enable_Params, pPmSamplingObject);
    S(CUpti_PmSampling_Disable_Params, pPmSamplingObject);
    F(CUpti_PmSampling_Disable_Params, pPmSamplingObject);
    S(CUpti_PmSampling_Start_Params, pPmSamplingObject);
    F(CUpti_PmSampling_Start_Params, pPmSamplingObject);
    S(CUpti_PmSampling_Stop_Params, pPmSamplingObject);
    F(CUpti_PmSampling_Stop_Params, pPmSamplingObject);
    S(CUpti_PmSampling_DecodeData_Params, overflow);
    F(CUpti_PmSampling_DecodeData_Params, pPmSamplingObject);
    F(CUpti_PmSampling_DecodeData_Params, pCounterDataImage);
    F(CUpti_PmSampling_DecodeData_Params, counterDataImageSize);
    F(CUpti_PmSampling_DecodeData_Params, decodeStopReason);
    F(CUpti_PmSampling_DecodeData_Params, overflow);
    S(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage);
    F(CUpti_PmSampling_GetCounterAvailability_Params, deviceIndex);
    F(CUpti_PmSampling_GetCounterAvailability_Params, counterAvailabilityImageSize);
    F(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage);
    S(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
    F(CUpti_PmSampling_GetCounterDataSize_Params, pPmSamplingObject);
    F(CUpti_PmSampling_GetCounterDataSize_Params, pMetricNames);
    F(CUpti_PmSampling_GetCounterDataSize_Params, numMetrics);
    F(CUpti_PmSampling_GetCounterDataSize_Params, maxSamples);
    F(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
    S(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData);
    F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pPmSamplingObject);
    F(CUpti_PmSampling_CounterDataImage_Initialize_Params, counterDataSize);
    F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData);
    S(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
    F(CUpti_PmSampling_GetCounterDataInfo_Params, pCounterDataImage);
    F(CUpti_PmSampling_GetCounterDataInfo_Params, counterDataImageSize);
    F(CUpti_PmSampling_GetCounterDataInfo_Params, numTotalSamples);
    F(CUpti_PmSampling_GetCounterDataInfo_Params, numPopulatedSamples);
    F(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples);
    S(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPmSamplingObject);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pCounterDataImage);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, counterDataImageSize);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, sampleIndex);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, startTimestamp);
    F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp);
    P(CUpti_PCSamplingConfigurationInfoParams, pPCSamplingConfigurationInfo);
    F(CUpti_PCSamplingConfigurationInfoParams, ctx);
    F(CUpti_PCSamplingConfigurationInfoParams, numAttributes);
    F(CUpti_PCSamplingConfigurationInfoParams, pPCSamplingConfigurationInfo);
    P(CUpti_PCSamplingGetDataParams, pcSamplingData);
    F(CUpti_PCSamplingGetDataParams, ctx);
    F(CUpti_PCSamplingGetDataParams, pcSamplingData);
    P(CUpti_PCSamplingEnableParams, ctx);
    F(CUpti_PCSamplingEnableParams, ctx);
    P(CUpti_PCSamplingDisableParams, ctx);
    F(CUpti_PCSamplingDisableParams, ctx);
    P(CUpti_PCSamplingStartParams, ctx);
    F(CUpti_PCSamplingStartParams, ctx);
    P(CUpti_PCSamplingStopParams, ctx);
    F(CUpti_PCSamplingStopParams, ctx);
    P(CUpti_PCSamplingGetNumStallReasonsParams, numStallReasons);
    F(CUpti_PCSamplingGetNumStallReasonsParams, ctx);
    F(CUpti_PCSamplingGetNumStallReasonsParams, numStallReasons);
    P(CUpti_PCSamplingGetStallReasonsParams, stallReasons);
    F(CUpti_PCSamplingGetStallReasonsParams, ctx);
    F(CUpti_PCSamplingGetStallReasonsParams, numStallReasons);
    F(CUpti_PCSamplingGetStallReasonsParams, stallReasonIndex);
    F(CUpti_PCSamplingGetStallReasonsParams, stallReasons);
    P(CUpti_PCSamplingStallReason, samples);
    Z(CUpti_PCSamplingStallReason);
    F(CUpti_PCSamplingStallReason, pcSamplingStallReasonIndex);
    F(CUpti_PCSamplingStallReason, samples);
    P(CUpti_PCSamplingPCData, correlationId);
    Z(CUpti_PCSamplingPCData);
    F(CUpti_PCSamplingPCData, cubinCrc);
    F(CUpti_PCSamplingPCData, pcOffset);
    F(CUpti_PCSamplingPCData, functionIndex);
    F(CUpti_PCSamplingPCData, pad);
    F(CUpti_PCSamplingPCData, functionName);
    F(CUpti_PCSamplingPCData, stallReasonCount);
    F(CUpti_PCSamplingPCData, stallReason);
    F(CUpti_PCSamplingPCData, correlationId);
    P(CUpti_PCSamplingData, hardwareBufferFull);
    Z(CUpti_PCSamplingData);
    F(CUpti_PCSamplingData, collectNumPcs);
    F(CUpti_PCSamplingData, totalSamples);
    F(CUpti_PCSamplingData, droppedSamples);
    F(CUpti_PCSamplingData, totalNumPcs);
    F(CUpti_PCSamplingData, remainingNumPcs);
    F(CUpti_PCSamplingData, rangeId);
    F(CUpti_PCSamplingData, pPcData);
    F(CUpti_PCSamplingData, nonUsrKernelsTotalSamples);
    F(CUpti_PCSamplingData, hardwareBufferFull);
    P(CUpti_PCSamplingConfigurationInfo, attributeData);
    Z(CUpti_PCSamplingConfigurationInfo);
    F(CUpti_PCSamplingConfigurationInfo, attributeType);
    F(CUpti_PCSamplingConfigurationInfo, attributeStatus);
    F(CUpti_PCSamplingConfigurationInfo, attributeData);
    P(CUpti_GetSassToSourceCorrelationParams, dirName);
    Z(CUpti_GetSassToSourceCorrelationParams);
    F(CUpti_GetSassToSourceCorrelationParams, cubin);
    F(CUpti_GetSassToSourceCorrelationParams, functionName);
    F(CUpti_GetSassToSourceCorrelationParams, cubinSize);
    F(CUpti_GetSassToSourceCorrelationParams, lineNumber);
    F(CUpti_GetSassToSourceCorrelationParams, pcOffset);
    F(CUpti_GetSassToSourceCorrelationParams, fileName);
    F(CUpti_GetSassToSourceCorrelationParams, dirName);
    P(CUpti_GetCubinCrcParams, cubinCrc);
    Z(CUpti_GetCubinCrcParams);
    F(CUpti_GetCubinCrcParams, cubinSize);
    F(CUpti_GetCubinCrcParams, cubin);
    F(CUpti_GetCubinCrcParams, cubinCrc);
    A(CUpti_ActivityMemory4);
    F(CUpti_ActivityMemory4, kind);
    F(CUpti_ActivityMemory4, memoryOperationType);
    F(CUpti_ActivityMemory4, memoryKind);
    F(CUpti_ActivityMemory4, correlationId);
    F(CUpti_ActivityMemory4, address);
    F(CUpti_ActivityMemory4, bytes);
    F(CUpti_ActivityMemory4, timestamp);
    G(CUpti_ActivityMemory4, pc, PC);
    F(CUpti_ActivityMemory4, processId);
    F(CUpti_ActivityMemory4, deviceId);
    F(CUpti_ActivityMemory4, contextId);
    F(CUpti_ActivityMemory4, streamId);
    F(CUpti_ActivityMemory4, name);
    F(CUpti_ActivityMemory4, isAsync);
    G(CUpti_ActivityMemory4, memoryPoolType, memoryPoolConfig.memoryPoolType);
    G(CUpti_ActivityMemory4, poolAddress, memoryPoolConfig.address);
    G(CUpti_ActivityMemory4, poolReleaseThreshold, memoryPoolConfig.releaseThreshold);
    G(CUpti_ActivityMemory4, poolSize, memoryPoolConfig.pool.size);
    G(CUpti_ActivityMemory4, poolUtilizedSize, memoryPoolConfig.utilizedSize);
    F(CUpti_ActivityMemory4, source);
    A(CUpti_ActivityMemoryPool3);
    F(CUpti_ActivityMemoryPool3, kind);
    F(CUpti_ActivityMemoryPool3, memoryPoolOperationType);
    F(CUpti_ActivityMemoryPool3, memoryPoolType);
    F(CUpti_ActivityMemoryPool3, correlationId);
    F(CUpti_ActivityMemoryPool3, processId);
    F(CUpti_ActivityMemoryPool3, deviceId);
    F(CUpti_ActivityMemoryPool3, minBytesToKeep);
    F(CUpti_ActivityMemoryPool3, address);
    G(CUpti_ActivityMemoryPool3, poolSize, size);
    F(CUpti_ActivityMemoryPool3, releaseThreshold);
    F(CUpti_ActivityMemoryPool3, timestamp);
    F(CUpti_ActivityMemoryPool3, utilizedSize);
    F(CUpti_ActivityMemoryPool3, isManagedPool);
    std::printf("\n");
    return 0;
}
