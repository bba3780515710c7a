//! The profiling symbol families of libcupti, resolved by the one loader in `api` from the same
//! library as the activity and callback API. Every entry is an `Option`: a CUPTI older than an
//! API simply lacks it, and the caller says so instead of panicking.
//!
//! The pointers stay valid for the life of the process: `api` opens libcupti with
//! `RTLD_NODELETE`, so it is never unmapped.

use crate::sys::*;

macro_rules! symbol_table {
    ($(#[$doc:meta])* $name:ident { $($field:ident : $t:ty = $sym:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        pub struct $name {
            $(#[doc = concat!("`", $sym, "`")] pub $field: Option<$t>,)*
        }

        impl $name {
            /// Every symbol's C name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($sym),*];

            pub(crate) fn resolve(lib: &libloading::Library) -> Self {
                $name {
                    // SAFETY: for each field, the type is the signature NVIDIA's header declares for
                    // this name; an absent symbol is `None`.
                    $($field: unsafe { crate::symbols::sym(lib, concat!($sym, "\0").as_bytes()) },)*
                }
            }

            /// The names of the symbols this library lacks.
            pub fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$field.is_none() { out.push($sym); })*
                out
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).field("missing", &self.missing()).finish()
            }
        }
    };
}

symbol_table! {
    /// Profiler target and host (cupti_profiler_target.h, cupti_profiler_host.h,
    /// cupti_target.h) and the Range Profiler (cupti_range_profiler.h).
    ProfilerSymbols {
        initialize: ParamsFn<ProfilerInitializeParams> = "cuptiProfilerInitialize",
        deinitialize: ParamsFn<ProfilerDeInitializeParams> = "cuptiProfilerDeInitialize",
        device_supported: ParamsFn<DeviceSupportedParams> = "cuptiProfilerDeviceSupported",
        get_counter_availability: ParamsFn<GetCounterAvailabilityParams> = "cuptiProfilerGetCounterAvailability",
        device_get_chip_name: ParamsFn<DeviceGetChipNameParams> = "cuptiDeviceGetChipName",
        host_initialize: ParamsFn<HostInitializeParams> = "cuptiProfilerHostInitialize",
        host_deinitialize: ParamsFn<HostDeinitializeParams> = "cuptiProfilerHostDeinitialize",
        host_get_supported_chips: ParamsFn<HostGetSupportedChipsParams> = "cuptiProfilerHostGetSupportedChips",
        host_get_base_metrics: ParamsFn<HostGetBaseMetricsParams> = "cuptiProfilerHostGetBaseMetrics",
        host_get_metric_properties: ParamsFn<HostGetMetricPropertiesParams> = "cuptiProfilerHostGetMetricProperties",
        host_config_add_metrics: ParamsFn<HostConfigAddMetricsParams> = "cuptiProfilerHostConfigAddMetrics",
        host_get_config_image_size: ParamsFn<HostGetConfigImageSizeParams> = "cuptiProfilerHostGetConfigImageSize",
        host_get_config_image: ParamsFn<HostGetConfigImageParams> = "cuptiProfilerHostGetConfigImage",
        host_get_num_of_passes: ParamsFn<HostGetNumOfPassesParams> = "cuptiProfilerHostGetNumOfPasses",
        host_evaluate_to_gpu_values: ParamsFn<HostEvaluateToGpuValuesParams> = "cuptiProfilerHostEvaluateToGpuValues",
        range_enable: ParamsFn<RangeProfilerEnableParams> = "cuptiRangeProfilerEnable",
        range_disable: ParamsFn<RangeProfilerDisableParams> = "cuptiRangeProfilerDisable",
        range_get_counter_data_size: ParamsFn<RangeProfilerGetCounterDataSizeParams> = "cuptiRangeProfilerGetCounterDataSize",
        range_counter_data_image_initialize: ParamsFn<RangeProfilerCounterDataImageInitializeParams> = "cuptiRangeProfilerCounterDataImageInitialize",
        range_set_config: ParamsFn<RangeProfilerSetConfigParams> = "cuptiRangeProfilerSetConfig",
        range_start: ParamsFn<RangeProfilerStartParams> = "cuptiRangeProfilerStart",
        range_stop: ParamsFn<RangeProfilerStopParams> = "cuptiRangeProfilerStop",
        range_push_range: ParamsFn<RangeProfilerPushRangeParams> = "cuptiRangeProfilerPushRange",
        range_pop_range: ParamsFn<RangeProfilerPopRangeParams> = "cuptiRangeProfilerPopRange",
        range_decode_data: ParamsFn<RangeProfilerDecodeDataParams> = "cuptiRangeProfilerDecodeData",
        range_get_counter_data_info: ParamsFn<RangeProfilerGetCounterDataInfoParams> = "cuptiRangeProfilerGetCounterDataInfo",
        range_counter_data_get_range_info: ParamsFn<RangeProfilerCounterDataGetRangeInfoParams> = "cuptiRangeProfilerCounterDataGetRangeInfo",
    }
}

symbol_table! {
    /// PM Sampling (cupti_pmsampling.h).
    PmSamplingSymbols {
        set_config: ParamsFn<PmSamplingSetConfigParams> = "cuptiPmSamplingSetConfig",
        enable: ParamsFn<PmSamplingEnableParams> = "cuptiPmSamplingEnable",
        disable: ParamsFn<PmSamplingDisableParams> = "cuptiPmSamplingDisable",
        start: ParamsFn<PmSamplingStartParams> = "cuptiPmSamplingStart",
        stop: ParamsFn<PmSamplingStopParams> = "cuptiPmSamplingStop",
        decode_data: ParamsFn<PmSamplingDecodeDataParams> = "cuptiPmSamplingDecodeData",
        get_counter_availability: ParamsFn<PmSamplingGetCounterAvailabilityParams> = "cuptiPmSamplingGetCounterAvailability",
        get_counter_data_size: ParamsFn<PmSamplingGetCounterDataSizeParams> = "cuptiPmSamplingGetCounterDataSize",
        counter_data_image_initialize: ParamsFn<PmSamplingCounterDataImageInitializeParams> = "cuptiPmSamplingCounterDataImageInitialize",
        get_counter_data_info: ParamsFn<PmSamplingGetCounterDataInfoParams> = "cuptiPmSamplingGetCounterDataInfo",
        counter_data_get_sample_info: ParamsFn<PmSamplingCounterDataGetSampleInfoParams> = "cuptiPmSamplingCounterDataGetSampleInfo",
    }
}

symbol_table! {
    /// PC Sampling (cupti_pcsampling.h): per-context sessions, and the host-side SASS-to-source
    /// and cubin CRC calls.
    PcSamplingSymbols {
        enable: ParamsFn<PcSamplingEnableParams> = "cuptiPCSamplingEnable",
        disable: ParamsFn<PcSamplingDisableParams> = "cuptiPCSamplingDisable",
        start: ParamsFn<PcSamplingStartParams> = "cuptiPCSamplingStart",
        stop: ParamsFn<PcSamplingStopParams> = "cuptiPCSamplingStop",
        get_data: ParamsFn<PcSamplingGetDataParams> = "cuptiPCSamplingGetData",
        set_configuration_attribute: ParamsFn<PcSamplingConfigurationInfoParams> = "cuptiPCSamplingSetConfigurationAttribute",
        get_configuration_attribute: ParamsFn<PcSamplingConfigurationInfoParams> = "cuptiPCSamplingGetConfigurationAttribute",
        get_num_stall_reasons: ParamsFn<PcSamplingGetNumStallReasonsParams> = "cuptiPCSamplingGetNumStallReasons",
        get_stall_reasons: ParamsFn<PcSamplingGetStallReasonsParams> = "cuptiPCSamplingGetStallReasons",
        get_sass_to_source_correlation: ParamsFn<GetSassToSourceCorrelationParams> = "cuptiGetSassToSourceCorrelation",
        get_cubin_crc: ParamsFn<GetCubinCrcParams> = "cuptiGetCubinCrc",
        register_compute_crc_callback: RegisterComputeCrcCallbackFn = "cuptiRegisterComputeCrcCallback",
    }
}

/// A symbol of `lib` as a `T`, `None` when absent.
///
/// # Safety
/// `T` must be the type of the symbol (for a function, the signature its header declares).
pub(crate) unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Option<T> {
    // SAFETY: the caller vouches for `T`.
    unsafe { lib.get::<T>(name).ok().map(|s| *s) }
}
