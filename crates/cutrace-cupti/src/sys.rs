//! CUPTI's C declarations for the profiling families (profiler target and host, Range Profiler):
//! parameter structs and enum values, laid out as CUDA 13.0's headers (CUPTI_API_VERSION 130001)
//! lay them out. Nothing here calls anything.
//!
//! The structs are written by hand, each with compile-time asserts of its
//! `CUPTI_PROFILER_STRUCT_SIZE` and its field offsets, as `layouts/check.sh` prints them from the
//! `nvidia-cuda-cupti==13.0.*` wheel's headers. A wrong field fails the build, not a GPU run.
//! Every struct starts with `structSize` and `pPriv`; CUPTI reads `structSize` to know which
//! fields the caller knows, which is how one binary works across CUPTI versions.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

use crate::error::CuptiResult;

/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUcontext`.
pub type CUcontext = *mut c_void;
/// `CUresult`.
pub type CUresult = c_int;

/// A CUPTI entry point taking one parameter struct (every profiling call has this shape).
pub type ParamsFn<T> = unsafe extern "C" fn(*mut T) -> CuptiResult;
/// An entry point whose parameter struct is not declared here yet (PC Sampling):
/// loaded so that a caller can tell whether this CUPTI has it, not called by cutrace.
pub type UndeclaredParamsFn = unsafe extern "C" fn(*mut c_void) -> CuptiResult;

/// `CUpti_ProfilerType`.
pub const PROFILER_TYPE_RANGE_PROFILER: c_int = 0;
pub const PROFILER_TYPE_PM_SAMPLING: c_int = 1;
/// `CUpti_ProfilerRange`.
pub const AUTO_RANGE: c_int = 1;
pub const USER_RANGE: c_int = 2;
/// `CUpti_ProfilerReplayMode`.
pub const APPLICATION_REPLAY: c_int = 1;
pub const KERNEL_REPLAY: c_int = 2;
pub const USER_REPLAY: c_int = 3;
/// `CUpti_Profiler_API`.
pub const PROFILER_API_RANGE_PROFILING: c_int = 0;
/// `CUpti_Profiler_Support_Level`, in order: UNKNOWN, UNSUPPORTED, DISABLED, SUPPORTED.
pub const SUPPORT_LEVEL_SUPPORTED: c_int = 3;
/// `CUpti_MetricType`.
pub const METRIC_TYPE_COUNTER: c_int = 0;
pub const METRIC_TYPE_RATIO: c_int = 1;
pub const METRIC_TYPE_THROUGHPUT: c_int = 2;
/// `CUpti_PmSampling_TriggerMode`.
pub const PM_SAMPLING_TRIGGER_GPU_SYSCLK_INTERVAL: c_int = 0;
pub const PM_SAMPLING_TRIGGER_GPU_TIME_INTERVAL: c_int = 1;
/// `CUpti_PmSampling_DecodeStopReason`.
pub const PM_SAMPLING_DECODE_STOP_OTHER: c_int = 0;
pub const PM_SAMPLING_DECODE_STOP_COUNTER_DATA_FULL: c_int = 1;
pub const PM_SAMPLING_DECODE_STOP_END_OF_RECORDS: c_int = 2;
/// `CUpti_PmSampling_HardwareBuffer_AppendMode`.
pub const PM_SAMPLING_APPEND_KEEP_OLDEST: c_int = 0;
pub const PM_SAMPLING_APPEND_KEEP_LATEST: c_int = 1;

/// The all-zero value of a field type: what the headers ask for every field not set ("assign to
/// NULL"). A trait, not `mem::zeroed`, so only types for which zero is valid can be fields.
pub trait Zero: Copy {
    const ZERO: Self;
}
macro_rules! zero_ints {
    ($($t:ty),*) => { $(impl Zero for $t { const ZERO: Self = 0; })* };
}
zero_ints!(u8, u16, u32, u64, usize, i32);
impl Zero for f64 {
    const ZERO: Self = 0.0;
}
impl<T> Zero for *mut T {
    const ZERO: Self = std::ptr::null_mut();
}
impl<T> Zero for *const T {
    const ZERO: Self = std::ptr::null();
}

/// Declares a parameter struct: `structSize`, `pPriv`, then the fields, with `new()` setting
/// `structSize` and zeroing the rest, and compile-time asserts of the header's size and offsets.
macro_rules! params {
    ($(
        $(#[$doc:meta])*
        $name:ident size $size:literal { $($f:ident : $t:ty $(= $off:literal)?),* $(,)? }
    )*) => {$(
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            pub struct_size: usize,
            pub p_priv: *mut c_void,
            $(pub $f: $t,)*
        }

        impl $name {
            /// `CUPTI_PROFILER_STRUCT_SIZE(type, lastField)`: where the last field ends.
            pub const STRUCT_SIZE: usize = {
                // Mutated only when the struct has fields past pPriv.
                #[allow(unused_mut)]
                let mut end = offset_of!($name, p_priv) + size_of::<*mut c_void>();
                $(
                    let e = offset_of!($name, $f) + size_of::<$t>();
                    if e > end {
                        end = e;
                    }
                )*
                end
            };

            /// Every field after `pPriv` with its offset, for the header cross-check test.
            pub const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($f), offset_of!($name, $f))),*];

            pub const fn new() -> Self {
                $name {
                    struct_size: Self::STRUCT_SIZE,
                    p_priv: std::ptr::null_mut(),
                    $($f: <$t as Zero>::ZERO,)*
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        const _: () = {
            assert!($name::STRUCT_SIZE == $size, concat!(stringify!($name), ": size differs from the CUDA 13.0 header"));
            $($(assert!(offset_of!($name, $f) == $off, concat!(stringify!($name), ".", stringify!($f), ": offset differs from the CUDA 13.0 header"));)?)*
        };
    )*};
}

params! {
    /// `CUpti_Profiler_Initialize_Params` (cupti_profiler_target.h).
    ProfilerInitializeParams size 16 {}
    /// `CUpti_Profiler_DeInitialize_Params`.
    ProfilerDeInitializeParams size 16 {}
    /// `CUpti_Profiler_DeviceSupported_Params`; the levels are `CUpti_Profiler_Support_Level`.
    DeviceSupportedParams size 52 {
        cu_device: CUdevice = 16,
        is_supported: c_int = 20,
        architecture: c_int,
        sli: c_int,
        v_gpu: c_int,
        confidential_compute: c_int,
        cmp: c_int,
        wsl: c_int = 44,
        api: c_int = 48,
    }
    /// `CUpti_Profiler_GetCounterAvailability_Params`.
    GetCounterAvailabilityParams size 40 {
        ctx: CUcontext = 16,
        counter_availability_image_size: usize = 24,
        p_counter_availability_image: *mut u8 = 32,
    }
    /// `CUpti_Device_GetChipName_Params` (cupti_target.h).
    DeviceGetChipNameParams size 32 {
        device_index: usize = 16,
        p_chip_name: *const c_char = 24,
    }

    /// `CUpti_Profiler_Host_Initialize_Params` (cupti_profiler_host.h).
    HostInitializeParams size 48 {
        profiler_type: c_int = 16,
        p_chip_name: *const c_char = 24,
        p_counter_availability_image: *const u8 = 32,
        p_host_object: *mut c_void = 40,
    }
    /// `CUpti_Profiler_Host_Deinitialize_Params`.
    HostDeinitializeParams size 24 {
        p_host_object: *mut c_void,
    }
    /// `CUpti_Profiler_Host_GetSupportedChips_Params`.
    HostGetSupportedChipsParams size 32 {
        num_chips: usize = 16,
        pp_chip_names: *const *const c_char = 24,
    }
    /// `CUpti_Profiler_Host_GetBaseMetrics_Params`.
    HostGetBaseMetricsParams size 48 {
        p_host_object: *mut c_void = 16,
        metric_type: c_int = 24,
        pp_metric_names: *mut *const c_char = 32,
        num_metrics: usize = 40,
    }
    /// `CUpti_Profiler_Host_GetMetricProperties_Params`.
    HostGetMetricPropertiesParams size 60 {
        p_host_object: *mut c_void,
        p_metric_name: *const c_char = 24,
        p_description: *const c_char = 32,
        p_hw_unit: *const c_char = 40,
        p_dim_unit: *const c_char = 48,
        metric_type: c_int = 56,
    }
    /// `CUpti_Profiler_Host_EvaluateToGpuValues_Params`.
    HostEvaluateToGpuValuesParams size 72 {
        p_host_object: *mut c_void,
        p_counter_data_image: *const u8 = 24,
        counter_data_image_size: usize = 32,
        range_index: usize = 40,
        pp_metric_names: *const *const c_char = 48,
        num_metrics: usize = 56,
        p_metric_values: *mut f64 = 64,
    }
    /// `CUpti_Profiler_Host_ConfigAddMetrics_Params`.
    HostConfigAddMetricsParams size 40 {
        p_host_object: *mut c_void,
        pp_metric_names: *const *const c_char = 24,
        num_metrics: usize = 32,
    }
    /// `CUpti_Profiler_Host_GetConfigImageSize_Params`.
    HostGetConfigImageSizeParams size 32 {
        p_host_object: *mut c_void,
        config_image_size: usize,
    }
    /// `CUpti_Profiler_Host_GetConfigImage_Params`.
    HostGetConfigImageParams size 40 {
        p_host_object: *mut c_void,
        config_image_size: usize = 24,
        p_config_image: *mut u8,
    }
    /// `CUpti_Profiler_Host_GetNumOfPasses_Params`.
    HostGetNumOfPassesParams size 40 {
        config_image_size: usize,
        p_config_image: *mut u8 = 24,
        num_of_passes: usize,
    }

    /// `CUpti_RangeProfiler_Enable_Params` (cupti_range_profiler.h).
    RangeProfilerEnableParams size 32 {
        ctx: CUcontext = 16,
        p_range_profiler_object: *mut c_void,
    }
    /// `CUpti_RangeProfiler_Disable_Params`.
    RangeProfilerDisableParams size 24 {
        p_range_profiler_object: *mut c_void,
    }
    /// `CUpti_RangeProfiler_Start_Params`.
    RangeProfilerStartParams size 24 {
        p_range_profiler_object: *mut c_void,
    }
    /// `CUpti_RangeProfiler_Stop_Params`.
    RangeProfilerStopParams size 41 {
        p_range_profiler_object: *mut c_void,
        pass_index: usize = 24,
        target_nesting_level: usize = 32,
        is_all_pass_submitted: u8 = 40,
    }
    /// `CUpti_RangeProfiler_PushRange_Params`.
    RangeProfilerPushRangeParams size 32 {
        p_range_profiler_object: *mut c_void,
        p_range_name: *const c_char,
    }
    /// `CUpti_RangeProfiler_PopRange_Params`.
    RangeProfilerPopRangeParams size 24 {
        p_range_profiler_object: *mut c_void,
    }
    /// `CUpti_RangeProfiler_SetConfig_Params`.
    RangeProfilerSetConfigParams size 90 {
        p_range_profiler_object: *mut c_void,
        config_size: usize = 24,
        p_config: *const u8 = 32,
        counter_data_image_size: usize = 40,
        p_counter_data_image: *mut u8 = 48,
        range: c_int = 56,
        replay_mode: c_int = 60,
        max_ranges_per_pass: usize = 64,
        num_nesting_levels: u16 = 72,
        min_nesting_level: u16 = 74,
        pass_index: usize = 80,
        target_nesting_level: u16 = 88,
    }
    /// `CUpti_RangeProfiler_GetCounterDataSize_Params`.
    RangeProfilerGetCounterDataSizeParams size 64 {
        p_range_profiler_object: *mut c_void,
        p_metric_names: *const *const c_char = 24,
        num_metrics: usize = 32,
        max_num_of_ranges: usize = 40,
        max_num_range_tree_nodes: u32 = 48,
        counter_data_size: usize = 56,
    }
    /// `CUpti_RangeProfiler_CounterDataImage_Initialize_Params`.
    RangeProfilerCounterDataImageInitializeParams size 40 {
        p_range_profiler_object: *mut c_void,
        counter_data_size: usize = 24,
        p_counter_data: *mut u8,
    }
    /// `CUpti_RangeProfiler_DecodeData_Params`.
    RangeProfilerDecodeDataParams size 32 {
        p_range_profiler_object: *mut c_void,
        num_of_range_dropped: usize = 24,
    }
    /// `CUpti_RangeProfiler_GetCounterDataInfo_Params`.
    RangeProfilerGetCounterDataInfoParams size 40 {
        p_counter_data_image: *const u8,
        counter_data_image_size: usize = 24,
        num_total_ranges: usize = 32,
    }
    /// `CUpti_RangeProfiler_CounterData_GetRangeInfo_Params`.
    RangeProfilerCounterDataGetRangeInfoParams size 56 {
        p_counter_data_image: *const u8,
        counter_data_image_size: usize,
        range_index: usize = 32,
        range_delimiter: *const c_char = 40,
        range_name: *const c_char = 48,
    }

    /// `CUpti_PmSampling_SetConfig_Params` (cupti_pmsampling.h). The interval is in ns with the
    /// time trigger, in SYSCLK cycles with the cycle trigger.
    PmSamplingSetConfigParams size 64 {
        p_pm_sampling_object: *mut c_void = 16,
        config_size: usize = 24,
        p_config: *const u8 = 32,
        hardware_buffer_size: usize = 40,
        sampling_interval: u64 = 48,
        trigger_mode: c_int = 56,
        hw_buffer_append_mode: c_int = 60,
    }
    /// `CUpti_PmSampling_Enable_Params`: device-wide, by device index.
    PmSamplingEnableParams size 32 {
        device_index: usize = 16,
        p_pm_sampling_object: *mut c_void = 24,
    }
    /// `CUpti_PmSampling_Disable_Params`.
    PmSamplingDisableParams size 24 {
        p_pm_sampling_object: *mut c_void = 16,
    }
    /// `CUpti_PmSampling_Start_Params`.
    PmSamplingStartParams size 24 {
        p_pm_sampling_object: *mut c_void = 16,
    }
    /// `CUpti_PmSampling_Stop_Params`.
    PmSamplingStopParams size 24 {
        p_pm_sampling_object: *mut c_void = 16,
    }
    /// `CUpti_PmSampling_DecodeData_Params`; `decode_stop_reason` is a `PM_SAMPLING_DECODE_STOP_*`.
    PmSamplingDecodeDataParams size 45 {
        p_pm_sampling_object: *mut c_void = 16,
        p_counter_data_image: *mut u8 = 24,
        counter_data_image_size: usize = 32,
        decode_stop_reason: c_int = 40,
        overflow: u8 = 44,
    }
    /// `CUpti_PmSampling_GetCounterAvailability_Params`.
    PmSamplingGetCounterAvailabilityParams size 40 {
        device_index: usize = 16,
        counter_availability_image_size: usize = 24,
        p_counter_availability_image: *mut u8 = 32,
    }
    /// `CUpti_PmSampling_GetCounterDataSize_Params`.
    PmSamplingGetCounterDataSizeParams size 56 {
        p_pm_sampling_object: *mut c_void = 16,
        p_metric_names: *const *const c_char = 24,
        num_metrics: usize = 32,
        max_samples: u32 = 40,
        counter_data_size: usize = 48,
    }
    /// `CUpti_PmSampling_CounterDataImage_Initialize_Params`.
    PmSamplingCounterDataImageInitializeParams size 40 {
        p_pm_sampling_object: *mut c_void = 16,
        counter_data_size: usize = 24,
        p_counter_data: *mut u8 = 32,
    }
    /// `CUpti_PmSampling_GetCounterDataInfo_Params`.
    PmSamplingGetCounterDataInfoParams size 56 {
        p_counter_data_image: *const u8 = 16,
        counter_data_image_size: usize = 24,
        num_total_samples: usize = 32,
        num_populated_samples: usize = 40,
        num_completed_samples: usize = 48,
    }
    /// `CUpti_PmSampling_CounterData_GetSampleInfo_Params`: a sample's start and end timestamps.
    PmSamplingCounterDataGetSampleInfoParams size 64 {
        p_pm_sampling_object: *mut c_void = 16,
        p_counter_data_image: *const u8 = 24,
        counter_data_image_size: usize = 32,
        sample_index: usize = 40,
        start_timestamp: u64 = 48,
        end_timestamp: u64 = 56,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_sets_the_size_and_zeroes_the_rest() {
        let p = RangeProfilerSetConfigParams::new();
        assert_eq!(p.struct_size, 90);
        assert!(p.p_priv.is_null() && p.p_config.is_null());
        assert_eq!((p.range, p.target_nesting_level), (0, 0));
        // The size CUPTI is told is where the last field ends, not the padded Rust size.
        assert_eq!(RangeProfilerStopParams::STRUCT_SIZE, 41);
        assert_eq!(size_of::<RangeProfilerStopParams>(), 48);
    }
}
