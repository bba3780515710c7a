//! Cross-checks every parameter struct of `sys` against NVIDIA's headers by running
//! layouts/check.sh (a C++ compiler over the headers). The const asserts in sys.rs already fail
//! the build on a wrong size or offset; this test shows those numbers are the headers' own.
//! Ignored by default: it needs the CUDA 13.0 CUPTI headers (the `nvidia-cuda-cupti==13.0.*`
//! wheel's include/) in CUTRACE_CUPTI_INCLUDE and a C++ compiler.

use cutrace_cupti::sys::*;

/// C struct name → (STRUCT_SIZE, fields) of the Rust declaration.
fn rust_layout(c_name: &str) -> Option<(usize, &'static [(&'static str, usize)])> {
    macro_rules! table {
        ($($c:literal => $r:ident),* $(,)?) => {
            match c_name {
                $($c => Some(($r::STRUCT_SIZE, $r::FIELDS)),)*
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
    }
}

/// `pCounterDataImage` → `p_counter_data_image`, `vGpu` → `v_gpu`.
fn snake(c: &str) -> String {
    let mut out = String::new();
    for ch in c.chars() {
        if ch.is_ascii_uppercase() {
            out.push('_');
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

#[test]
fn snake_case_of_header_fields() {
    assert_eq!(snake("pCounterDataImage"), "p_counter_data_image");
    assert_eq!(snake("cuDevice"), "cu_device");
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
        let (size, fields) = rust_layout(name).unwrap_or_else(|| panic!("{name} not declared"));
        for kv in parts {
            let (k, v) = kv.split_once('=').unwrap();
            let v: usize = v.parse().unwrap();
            if k == "size" {
                assert_eq!(size, v, "{name} STRUCT_SIZE");
            } else {
                let field = snake(k);
                let off = fields
                    .iter()
                    .find(|(f, _)| *f == field)
                    .unwrap_or_else(|| panic!("{name}.{k}: no field {field}"))
                    .1;
                assert_eq!(off, v, "{name}.{k}");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 38, "{text}");
}
