//! Cross-checks every struct of `sys` against NVIDIA's headers by running layouts/check.sh (a C++
//! compiler over the headers). The const asserts in sys.rs already fail the build on a wrong
//! size, offset or alignment; this test shows those numbers are the headers' own.
//! Ignored by default: it needs the CUDA 13.0 CUPTI headers (the `nvidia-cuda-cupti==13.0.*`
//! wheel's include/) in CUTRACE_CUPTI_INCLUDE and a C++ compiler.

use cutrace_cupti::sys::*;

/// The layout of a Rust declaration: `STRUCT_SIZE`, its fields' offsets, `sizeof`, alignment.
struct Layout {
    size: usize,
    fields: &'static [(&'static str, usize)],
    size_of: usize,
    align: usize,
}

/// C struct name → the layout of its Rust declaration.
fn rust_layout(c_name: &str) -> Option<Layout> {
    macro_rules! table {
        ($($c:literal => $r:ident),* $(,)?) => {
            match c_name {
                $($c => Some(Layout {
                    size: $r::STRUCT_SIZE,
                    fields: $r::FIELDS,
                    size_of: std::mem::size_of::<$r>(),
                    align: std::mem::align_of::<$r>(),
                }),)*
                _ => None,
            }
        };
    }
    table! {
        "CUpti_Profiler_Initialize_Params" => ProfilerInitializeParams,
        "CUpti_Profiler_DeInitialize_Params" => ProfilerDeInitializeParams,
        "CUpti_Profiler_DeviceSupported_Params" => DeviceSupportedParams,
        "CUpti_Profiler_GetCounterAvailability_Params" => GetCounterAvailabilityParams,
        "CUpti_Device_GetChipName_Params" => DeviceGetChipNameParams,
        "CUpti_Profiler_Host_Initialize_Params" => HostInitializeParams,
        "CUpti_Profiler_Host_Deinitialize_Params" => HostDeinitializeParams,
        "CUpti_Profiler_Host_GetSupportedChips_Params" => HostGetSupportedChipsParams,
        "CUpti_Profiler_Host_GetBaseMetrics_Params" => HostGetBaseMetricsParams,
        "CUpti_Profiler_Host_GetMetricProperties_Params" => HostGetMetricPropertiesParams,
        "CUpti_Profiler_Host_EvaluateToGpuValues_Params" => HostEvaluateToGpuValuesParams,
        "CUpti_Profiler_Host_ConfigAddMetrics_Params" => HostConfigAddMetricsParams,
        "CUpti_Profiler_Host_GetConfigImageSize_Params" => HostGetConfigImageSizeParams,
        "CUpti_Profiler_Host_GetConfigImage_Params" => HostGetConfigImageParams,
        "CUpti_Profiler_Host_GetNumOfPasses_Params" => HostGetNumOfPassesParams,
        "CUpti_RangeProfiler_Enable_Params" => RangeProfilerEnableParams,
        "CUpti_RangeProfiler_Disable_Params" => RangeProfilerDisableParams,
        "CUpti_RangeProfiler_Start_Params" => RangeProfilerStartParams,
        "CUpti_RangeProfiler_Stop_Params" => RangeProfilerStopParams,
        "CUpti_RangeProfiler_PushRange_Params" => RangeProfilerPushRangeParams,
        "CUpti_RangeProfiler_PopRange_Params" => RangeProfilerPopRangeParams,
        "CUpti_RangeProfiler_SetConfig_Params" => RangeProfilerSetConfigParams,
        "CUpti_RangeProfiler_GetCounterDataSize_Params" => RangeProfilerGetCounterDataSizeParams,
        "CUpti_RangeProfiler_CounterDataImage_Initialize_Params" => RangeProfilerCounterDataImageInitializeParams,
        "CUpti_RangeProfiler_DecodeData_Params" => RangeProfilerDecodeDataParams,
        "CUpti_RangeProfiler_GetCounterDataInfo_Params" => RangeProfilerGetCounterDataInfoParams,
        "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params" => RangeProfilerCounterDataGetRangeInfoParams,
        "CUpti_PmSampling_SetConfig_Params" => PmSamplingSetConfigParams,
        "CUpti_PmSampling_Enable_Params" => PmSamplingEnableParams,
        "CUpti_PmSampling_Disable_Params" => PmSamplingDisableParams,
        "CUpti_PmSampling_Start_Params" => PmSamplingStartParams,
        "CUpti_PmSampling_Stop_Params" => PmSamplingStopParams,
        "CUpti_PmSampling_DecodeData_Params" => PmSamplingDecodeDataParams,
        "CUpti_PmSampling_GetCounterAvailability_Params" => PmSamplingGetCounterAvailabilityParams,
        "CUpti_PmSampling_GetCounterDataSize_Params" => PmSamplingGetCounterDataSizeParams,
        "CUpti_PmSampling_CounterDataImage_Initialize_Params" => PmSamplingCounterDataImageInitializeParams,
        "CUpti_PmSampling_GetCounterDataInfo_Params" => PmSamplingGetCounterDataInfoParams,
        "CUpti_PmSampling_CounterData_GetSampleInfo_Params" => PmSamplingCounterDataGetSampleInfoParams,
        "CUpti_PCSamplingConfigurationInfoParams" => PcSamplingConfigurationInfoParams,
        "CUpti_PCSamplingGetDataParams" => PcSamplingGetDataParams,
        "CUpti_PCSamplingEnableParams" => PcSamplingEnableParams,
        "CUpti_PCSamplingDisableParams" => PcSamplingDisableParams,
        "CUpti_PCSamplingStartParams" => PcSamplingStartParams,
        "CUpti_PCSamplingStopParams" => PcSamplingStopParams,
        "CUpti_PCSamplingGetNumStallReasonsParams" => PcSamplingGetNumStallReasonsParams,
        "CUpti_PCSamplingGetStallReasonsParams" => PcSamplingGetStallReasonsParams,
        "CUpti_PCSamplingStallReason" => PcSamplingStallReason,
        "CUpti_PCSamplingPCData" => PcSamplingPcData,
        "CUpti_PCSamplingData" => PcSamplingData,
        "CUpti_PCSamplingConfigurationInfo" => PcSamplingConfigurationInfo,
        "CUpti_GetSassToSourceCorrelationParams" => GetSassToSourceCorrelationParams,
        "CUpti_GetCubinCrcParams" => GetCubinCrcParams,
        "CUpti_ActivityMemory4" => ActivityMemory4,
        "CUpti_ActivityMemoryPool3" => ActivityMemoryPool3,
    }
}

/// `pCounterDataImage` → `p_counter_data_image`, `vGpu` → `v_gpu`; a run of capitals is one
/// word (`pPCSamplingConfigurationInfo` → `p_pc_sampling_configuration_info`).
fn snake(c: &str) -> String {
    let ch: Vec<char> = c.chars().collect();
    let mut out = String::new();
    for (i, &x) in ch.iter().enumerate() {
        if x.is_ascii_uppercase() && i > 0 {
            let prev_lower = !ch[i - 1].is_ascii_uppercase();
            let next_lower = ch.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev_lower || next_lower {
                out.push('_');
            }
        }
        out.push(x.to_ascii_lowercase());
    }
    out
}

#[test]
fn snake_case_of_header_fields() {
    assert_eq!(snake("pCounterDataImage"), "p_counter_data_image");
    assert_eq!(snake("cuDevice"), "cu_device");
    assert_eq!(snake("vGpu"), "v_gpu");
    assert_eq!(
        snake("pPCSamplingConfigurationInfo"),
        "p_pc_sampling_configuration_info"
    );
    assert_eq!(snake("pPcData"), "p_pc_data");
    assert_eq!(
        snake("nonUsrKernelsTotalSamples"),
        "non_usr_kernels_total_samples"
    );
}

#[test]
#[ignore = "needs the CUDA 13.0 CUPTI headers in CUTRACE_CUPTI_INCLUDE and a C++ compiler"]
fn every_struct_matches_the_headers() {
    let inc = std::env::var("CUTRACE_CUPTI_INCLUDE")
        .expect("CUTRACE_CUPTI_INCLUDE must name the headers' directory");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/layouts/check.sh");
    let out = std::process::Command::new("sh")
        .arg(script)
        .arg(&inc)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("CUPTI_API_VERSION 130001"), "{text}");
    let mut checked = 0;
    for line in text.lines().filter(|l| l.starts_with("CUpti_")) {
        let mut parts = line.split_whitespace();
        let name = parts.next().unwrap();
        let layout = rust_layout(name).unwrap_or_else(|| panic!("{name} not declared"));
        for kv in parts {
            let (k, v) = kv.split_once('=').unwrap();
            let v: usize = v.parse().unwrap();
            if k == "size" {
                assert_eq!(layout.size, v, "{name} STRUCT_SIZE");
            } else if k == "sizeof" {
                assert_eq!(layout.size_of, v, "{name} sizeof");
            } else if k == "align" {
                assert_eq!(layout.align, v, "{name} alignment");
            } else {
                let field = snake(k);
                let off = layout
                    .fields
                    .iter()
                    .find(|(f, _)| *f == field)
                    .unwrap_or_else(|| panic!("{name}.{k}: no field {field}"))
                    .1;
                assert_eq!(off, v, "{name}.{k}");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 54, "{text}");
}
