//! CUPTI's C declarations for the profiling families (profiler target and host, Range Profiler,
//! PM Sampling, PC Sampling): parameter and data structs and enum values, laid out as CUDA 13.0's
//! headers (CUPTI_API_VERSION 130001) lay them out. Nothing here calls anything.
//!
//! The structs are written by hand, each with compile-time asserts of its
//! `CUPTI_PROFILER_STRUCT_SIZE` and its field offsets, as `layouts/check.sh` prints them from the
//! `nvidia-cuda-cupti==13.0.*` wheel's headers. A wrong field fails the build, not a GPU run.
//! Every parameter struct starts with a size (`structSize` in the profiler headers, `size` in
//! cupti_pcsampling.h) and `pPriv`; CUPTI reads the size to know which fields the caller knows,
//! which is how one binary works across CUPTI versions. PC Sampling's data structs and its two
//! source-correlation structs have no `pPriv`, and two of them no size at all: those are declared
//! with [`c_struct!`], field for field as the header lists them. So are the two activity records
//! of memory (`CUpti_ActivityMemory4`, `CUpti_ActivityMemoryPool3`), whose offsets
//! `crate::activity` decodes through these declarations.

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
/// `CUpti_ComputeCrcCallbackFunc` (cubin, cubin size, CRC out).
pub type ComputeCrcCallbackFn = unsafe extern "C" fn(*const c_void, usize, *mut u64);
/// `cuptiRegisterComputeCrcCallback`: the one PC Sampling entry that takes no struct.
pub type RegisterComputeCrcCallbackFn = unsafe extern "C" fn(ComputeCrcCallbackFn) -> CuptiResult;

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

/// `CUpti_PCSamplingCollectionMode` (cupti_pcsampling.h). The header: continuous mode, "Kernels
/// are not serialized in this mode"; kernel-serialized mode, "Kernels are serialized in this
/// mode".
pub const PC_SAMPLING_COLLECTION_MODE_CONTINUOUS: c_int = 1;
pub const PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED: c_int = 2;
/// `CUpti_PCSamplingOutputDataFormat`: PARSED, the one format (`CUpti_PCSamplingData`).
pub const PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED: c_int = 1;
/// `CUpti_PCSamplingConfigurationAttributeType`.
pub const PC_SAMPLING_ATTR_SAMPLING_PERIOD: c_int = 1;
pub const PC_SAMPLING_ATTR_STALL_REASON: c_int = 2;
pub const PC_SAMPLING_ATTR_SCRATCH_BUFFER_SIZE: c_int = 3;
pub const PC_SAMPLING_ATTR_HARDWARE_BUFFER_SIZE: c_int = 4;
pub const PC_SAMPLING_ATTR_COLLECTION_MODE: c_int = 5;
pub const PC_SAMPLING_ATTR_ENABLE_START_STOP_CONTROL: c_int = 6;
pub const PC_SAMPLING_ATTR_OUTPUT_DATA_FORMAT: c_int = 7;
pub const PC_SAMPLING_ATTR_SAMPLING_DATA_BUFFER: c_int = 8;
pub const PC_SAMPLING_ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN: c_int = 9;
/// The sampling period attribute is an exponent: 2^N cycles between samples, N in 5..=31.
pub const PC_SAMPLING_PERIOD_MIN: u32 = 5;
pub const PC_SAMPLING_PERIOD_MAX: u32 = 31;
/// `CUPTI_STALL_REASON_STRING_SIZE`: the bytes the caller gives each stall-reason name
/// `cuptiPCSamplingGetStallReasons` writes.
pub const STALL_REASON_STRING_SIZE: usize = 128;

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
impl<const N: usize> Zero for [u8; N] {
    const ZERO: Self = [0; N];
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

/// Declares a struct field for field as its header lists it, nothing implied (PC Sampling's data
/// structs and its source-correlation params have no `pPriv`, and some no size field): `new()`
/// zeroes every field and, with `tells end` or `tells sizeof`, sets `size` to where the last
/// field ends (the header's `...ParamsSize` macro) or to the C `sizeof` (what NVIDIA's samples
/// put in a struct the header gives no size macro). Asserts the header's
/// `CUPTI_PCSAMPLING_STRUCT_SIZE`, `sizeof`, alignment and offsets at compile time.
macro_rules! c_struct {
    (@told end) => { Self::STRUCT_SIZE };
    (@told sizeof) => { size_of::<Self>() };
    ($(
        $(#[$doc:meta])*
        $name:ident $(align $align:literal)? size $size:literal sizeof $sizeof:literal
            $(tells $told:ident)? { $($f:ident : $t:ty $(= $off:literal)?),* $(,)? }
    )*) => {$(
        $(#[$doc])*
        #[repr(C)]
        $(#[repr(align($align))])?
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            $(pub $f: $t,)*
        }

        impl $name {
            /// `CUPTI_PCSAMPLING_STRUCT_SIZE(type, lastField)`: where the last field ends.
            pub const STRUCT_SIZE: usize = {
                let mut end = 0;
                $(
                    let e = offset_of!($name, $f) + size_of::<$t>();
                    if e > end {
                        end = e;
                    }
                )*
                end
            };

            /// Every field with its offset, for the header cross-check test.
            pub const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($f), offset_of!($name, $f))),*];

            pub const fn new() -> Self {
                #[allow(unused_mut)]
                let mut s = $name {
                    $($f: <$t as Zero>::ZERO,)*
                };
                $(s.size = c_struct!(@told $told);)?
                s
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        const _: () = {
            assert!($name::STRUCT_SIZE == $size, concat!(stringify!($name), ": size differs from the CUDA 13.0 header"));
            assert!(size_of::<$name>() == $sizeof, concat!(stringify!($name), ": sizeof differs from the CUDA 13.0 header"));
            $(assert!(std::mem::align_of::<$name>() == $align, concat!(stringify!($name), ": alignment differs from the CUDA 13.0 header"));)?
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

// PC Sampling (cupti_pcsampling.h). The parameter structs have the profiler headers' shape
// (`size`, the header's name for `structSize`, then `pPriv`); their `...ParamsSize` macros are
// `CUPTI_PCSAMPLING_STRUCT_SIZE(type, lastField)`, which `params!` computes.
params! {
    /// `CUpti_PCSamplingConfigurationInfoParams`: an array of attributes, each with its own
    /// status CUPTI writes back.
    PcSamplingConfigurationInfoParams size 40 {
        ctx: CUcontext = 16,
        num_attributes: usize = 24,
        p_pc_sampling_configuration_info: *mut PcSamplingConfigurationInfo = 32,
    }
    /// `CUpti_PCSamplingGetDataParams`; `pcSamplingData` points to a [`PcSamplingData`].
    PcSamplingGetDataParams size 32 {
        ctx: CUcontext = 16,
        pc_sampling_data: *mut c_void = 24,
    }
    /// `CUpti_PCSamplingEnableParams`: per context.
    PcSamplingEnableParams size 24 {
        ctx: CUcontext = 16,
    }
    /// `CUpti_PCSamplingDisableParams`.
    PcSamplingDisableParams size 24 {
        ctx: CUcontext = 16,
    }
    /// `CUpti_PCSamplingStartParams`.
    PcSamplingStartParams size 24 {
        ctx: CUcontext = 16,
    }
    /// `CUpti_PCSamplingStopParams`.
    PcSamplingStopParams size 24 {
        ctx: CUcontext = 16,
    }
    /// `CUpti_PCSamplingGetNumStallReasonsParams`: `numStallReasons` is an out-pointer.
    PcSamplingGetNumStallReasonsParams size 32 {
        ctx: CUcontext = 16,
        num_stall_reasons: *mut usize = 24,
    }
    /// `CUpti_PCSamplingGetStallReasonsParams`: the caller gives `numStallReasons` indices and
    /// as many name buffers of [`STALL_REASON_STRING_SIZE`] bytes; CUPTI fills both.
    PcSamplingGetStallReasonsParams size 48 {
        ctx: CUcontext = 16,
        num_stall_reasons: usize = 24,
        stall_reason_index: *mut u32 = 32,
        stall_reasons: *mut *mut c_char = 40,
    }
}

/// `CUpti_PCSamplingConfigurationInfo.attributeData`: one member per attribute type, 24 bytes
/// (`invalidData`'s three words). Made with `invalid_data` zeroed, then one member written.
#[repr(C)]
#[derive(Clone, Copy)]
pub union PcSamplingAttributeData {
    pub invalid_data: [u64; 3],
    pub sampling_period: u32,
    pub stall_reason: PcSamplingStallReasonData,
    pub scratch_buffer_size: usize,
    pub hardware_buffer_size: usize,
    pub collection_mode: c_int,
    pub enable_start_stop_control: u32,
    pub output_data_format: c_int,
    pub sampling_data_buffer: *mut c_void,
    pub worker_thread_periodic_sleep_span: u32,
}

impl Zero for PcSamplingAttributeData {
    const ZERO: Self = PcSamplingAttributeData {
        invalid_data: [0; 3],
    };
}

impl std::fmt::Debug for PcSamplingAttributeData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Which member is live depends on the attribute type beside it.
        f.write_str("PcSamplingAttributeData { .. }")
    }
}

/// `attributeData.stallReasonData`: the stall reasons to collect, by CUPTI's index.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcSamplingStallReasonData {
    pub stall_reason_count: usize,
    pub p_stall_reason_index: *mut u32,
}

const _: () = {
    assert!(size_of::<PcSamplingAttributeData>() == 24);
    assert!(std::mem::align_of::<PcSamplingAttributeData>() == 8);
    assert!(offset_of!(PcSamplingStallReasonData, p_stall_reason_index) == 8);
};

// The data structs are `PACKED_ALIGNMENT` in the header: with GCC, which builds libcupti,
// `__attribute__((packed, aligned(8)))`. Their fields fall on natural boundaries, so packing
// changes nothing inside them; the alignment of 8 rounds `sizeof` up (PC data 60 → 64, sampling
// data 73 → 80) and makes a stall-reason pair 8-aligned. `sizeof` is the array stride CUPTI
// walks, so it is asserted too.
c_struct! {
    /// `CUpti_PCSamplingStallReason`: one stall reason's samples at one PC.
    PcSamplingStallReason align 8 size 8 sizeof 8 {
        pc_sampling_stall_reason_index: u32 = 0,
        samples: u32 = 4,
    }
    /// `CUpti_PCSamplingPCData`: one PC. The caller allocates `stallReason` (as many pairs as
    /// stall reasons are collected); CUPTI writes the rest. `correlationId` is "Only valid for
    /// serialized mode of pc sampling collection. For continous mode of collection the
    /// correlationId will be set to 0" (the header). `functionName` is CUPTI's allocation, "might
    /// be shared across all the records including records from activity APIs representing the
    /// same function".
    PcSamplingPcData align 8 size 60 sizeof 64 tells sizeof {
        size: usize = 0,
        cubin_crc: u64 = 8,
        pc_offset: u64 = 16,
        function_index: u32 = 24,
        pad: u32 = 28,
        function_name: *mut c_char = 32,
        stall_reason_count: usize = 40,
        stall_reason: *mut PcSamplingStallReason = 48,
        correlation_id: u32 = 56,
    }
    /// `CUpti_PCSamplingData`: a buffer of `collectNumPcs` PC records. The header has no size
    /// macro for it; NVIDIA's samples set `size` to `sizeof`, as `new()` does.
    PcSamplingData align 8 size 73 sizeof 80 tells sizeof {
        size: usize = 0,
        collect_num_pcs: usize = 8,
        total_samples: u64 = 16,
        dropped_samples: u64 = 24,
        total_num_pcs: usize = 32,
        remaining_num_pcs: usize = 40,
        range_id: u64 = 48,
        p_pc_data: *mut PcSamplingPcData = 56,
        non_usr_kernels_total_samples: u64 = 64,
        hardware_buffer_full: u8 = 72,
    }
    /// `CUpti_PCSamplingConfigurationInfo`: one attribute to set or get (no size field; an
    /// array of them hangs off [`PcSamplingConfigurationInfoParams`]).
    PcSamplingConfigurationInfo align 8 size 32 sizeof 32 {
        attribute_type: c_int = 0,
        attribute_status: CuptiResult = 4,
        attribute_data: PcSamplingAttributeData = 8,
    }
    /// `CUpti_GetSassToSourceCorrelationParams`: a PC offset of a function in a cubin to its
    /// source line. `fileName` and `dirName` are CUPTI's allocations, for the caller to free.
    GetSassToSourceCorrelationParams size 64 sizeof 64 tells end {
        size: usize = 0,
        cubin: *const c_void = 8,
        function_name: *const c_char = 16,
        cubin_size: usize = 24,
        line_number: u32 = 32,
        pc_offset: u64 = 40,
        file_name: *mut c_char = 48,
        dir_name: *mut c_char = 56,
    }
    /// `CUpti_GetCubinCrcParams`: the CRC CUPTI puts in `cubinCrc` of PC records.
    GetCubinCrcParams size 32 sizeof 32 tells end {
        size: usize = 0,
        cubin_size: usize = 8,
        cubin: *const c_void = 16,
        cubin_crc: u64 = 24,
    }
}

impl PcSamplingConfigurationInfo {
    /// An attribute of `attribute_type` whose data is `data` (status zero: CUPTI writes it).
    pub const fn with(attribute_type: c_int, data: PcSamplingAttributeData) -> Self {
        PcSamplingConfigurationInfo {
            attribute_type,
            attribute_status: 0,
            attribute_data: data,
        }
    }
}

/// `CUpti_ActivityMemoryPoolType`: the pool an allocation came from, or a pool record's pool.
pub const MEMORY_POOL_TYPE_INVALID: u32 = 0;
pub const MEMORY_POOL_TYPE_LOCAL: u32 = 1;
pub const MEMORY_POOL_TYPE_IMPORTED: u32 = 2;
/// `CUpti_ActivityMemoryPoolOperationType`.
pub const MEMORY_POOL_OPERATION_CREATED: u32 = 1;
pub const MEMORY_POOL_OPERATION_DESTROYED: u32 = 2;
pub const MEMORY_POOL_OPERATION_TRIMMED: u32 = 3;

c_struct! {
    /// `CUpti_ActivityMemory4` (cupti_activity.h, CUPTI_ACTIVITY_KIND_MEMORY2, LP64): one
    /// allocation or free. The header's nested `memoryPoolConfig` is flattened here: its
    /// `memoryPoolType`, `address` (`pool_address`), `releaseThreshold`
    /// (`pool_release_threshold`), the union `pool` (`pool_size`: the pool's size for a local
    /// pool, the owning process id for an imported one) and `utilizedSize`
    /// (`pool_utilized_size`). `memory_pool_type` is `MEMORY_POOL_TYPE_INVALID` for an
    /// allocation that is not from a pool.
    ActivityMemory4 align 8 size 128 sizeof 128 {
        kind: u32 = 0,
        memory_operation_type: u32 = 4,
        memory_kind: u32 = 8,
        correlation_id: u32 = 12,
        address: u64 = 16,
        bytes: u64 = 24,
        timestamp: u64 = 32,
        pc: u64 = 40,
        process_id: u32 = 48,
        device_id: u32 = 52,
        context_id: u32 = 56,
        stream_id: u32 = 60,
        name: *const c_char = 64,
        is_async: u32 = 72,
        pad1: u32 = 76,
        memory_pool_type: u32 = 80,
        pad2: u32 = 84,
        pool_address: u64 = 88,
        pool_release_threshold: u64 = 96,
        pool_size: u64 = 104,
        pool_utilized_size: u64 = 112,
        source: *const c_char = 120,
    }
    /// `CUpti_ActivityMemoryPool3` (CUPTI_ACTIVITY_KIND_MEMORY_POOL, LP64): a pool created,
    /// destroyed or trimmed. The header's `size` is `pool_size` here (the cross-check's `size`
    /// key is the struct's).
    ActivityMemoryPool3 align 8 size 80 sizeof 80 {
        kind: u32 = 0,
        memory_pool_operation_type: u32 = 4,
        memory_pool_type: u32 = 8,
        correlation_id: u32 = 12,
        process_id: u32 = 16,
        device_id: u32 = 20,
        min_bytes_to_keep: usize = 24,
        address: u64 = 32,
        pool_size: u64 = 40,
        release_threshold: u64 = 48,
        timestamp: u64 = 56,
        utilized_size: u64 = 64,
        is_managed_pool: u8 = 72,
        pad2: [u8; 7] = 73,
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

    #[test]
    fn pc_sampling_structs_tell_the_size_the_header_asks_for() {
        // Parameter structs: the header's `...ParamsSize`, where the last field ends.
        assert_eq!(PcSamplingGetDataParams::new().struct_size, 32);
        assert_eq!(GetSassToSourceCorrelationParams::new().size, 64);
        assert_eq!(GetCubinCrcParams::new().size, 32);
        // Data structs: the C sizeof, the stride of the arrays CUPTI walks.
        assert_eq!(PcSamplingData::new().size, 80);
        assert_eq!(PcSamplingPcData::new().size, 64);
        let d = PcSamplingData::new();
        assert!(d.p_pc_data.is_null());
        assert_eq!((d.total_num_pcs, d.hardware_buffer_full), (0, 0));
        let c = PcSamplingConfigurationInfo::new();
        // SAFETY: new() writes the union through `invalid_data`.
        assert_eq!(unsafe { c.attribute_data.invalid_data }, [0; 3]);
    }
}
