//! PM Sampling (cupti_pmsampling.h): counters read by the hardware at a fixed interval, device
//! wide, while the program runs. The host side ([`pm_plan`]) turns metric names into a one-pass
//! config image, or refuses the list naming the metric that breaks it; the target side
//! ([`PmSampler`]) is enabled per device index, configured, started, decoded on a thread of the
//! caller's choosing and evaluated sample by sample with a [`Host`].
//!
//! Call order (CUPTI guide, "PM Sampling"; NVIDIA's pm_sampling sample): Enable, SetConfig,
//! GetCounterDataSize, CounterDataImageInitialize, Start; then DecodeData, GetCounterDataInfo,
//! per sample GetSampleInfo and EvaluateToGpuValues, and CounterDataImageInitialize to reuse the
//! image; Stop, a last decode, Disable.

use std::ffi::{c_char, c_void};

use cutrace_cupti::sys;

use crate::{cstrings, CountersError, Host, Plan, Profiler, ProfilerKind, Result};

/// The default set: the layered answer to "how busy is the GPU?" on GH100, one pass (checked by
/// the host API in tests/host.rs). GPU active is `gr__cycles_active` as a share of elapsed
/// cycles; the tensor pipes use the realtime variant, the only one PM Sampling can read.
pub const DEFAULT_METRICS: &[&str] = &[
    GR_ACTIVE_PCT,
    SM_ACTIVE_PCT,
    TENSOR_ACTIVE_PCT,
    DRAM_THROUGHPUT_PCT,
    "pcie__read_bytes.sum",
    "pcie__write_bytes.sum",
    "nvlrx__bytes.sum",
    "nvltx__bytes.sum",
];

/// The default metrics a GPU without NVLink may lack: left out (and said so) rather than failing.
pub const OPTIONAL_METRICS: &[&str] = &["nvlrx__bytes.sum", "nvltx__bytes.sum"];

/// Graphics/compute engine active, as a percentage of elapsed cycles.
pub const GR_ACTIVE_PCT: &str = "gr__cycles_active.avg.pct_of_peak_sustained_elapsed";
/// SMs active (at least one warp resident), averaged over SMs, % of elapsed cycles.
pub const SM_ACTIVE_PCT: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
/// Tensor pipes active (realtime counter), % of elapsed cycles.
pub const TENSOR_ACTIVE_PCT: &str =
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
/// DRAM throughput, % of peak.
pub const DRAM_THROUGHPUT_PCT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

/// `CUpti_PmSampling_TriggerMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The interval is in nanoseconds (GA10x and later).
    TimeInterval,
    /// The interval is in SYSCLK cycles.
    SysclkInterval,
}

/// `cuptiPmSamplingSetConfig`'s settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplerConfig {
    pub interval: u64,
    pub trigger: Trigger,
    pub hardware_buffer_bytes: usize,
    /// On overflow keep the newest samples (true) or the oldest, with Decode reporting it.
    pub keep_latest: bool,
}

/// What one `cuptiPmSamplingDecodeData` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The counter-data image filled up before the hardware buffer was drained.
    pub image_full: bool,
    /// The hardware buffer overflowed: samples were lost before decoding.
    pub overflow: bool,
}

/// `cuptiPmSamplingGetCounterDataInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleCounts {
    pub total: usize,
    pub populated: usize,
    pub completed: usize,
}

/// A metric list for PM Sampling on `chip`, as a config image: it must fit in one pass (CUPTI
/// refuses more at SetConfig). A refused name, or the first metric past which the list needs
/// more than one pass, is named in the error.
pub fn pm_plan(
    profiler: &Profiler<'_>,
    chip: &str,
    availability: Option<&[u8]>,
    metrics: &[&str],
) -> Result<Plan> {
    let plan = crate::plan_for(
        ProfilerKind::PmSampling,
        profiler,
        chip,
        availability,
        metrics,
    )?;
    if plan.passes <= 1 {
        return Ok(plan);
    }
    // The shortest prefix that needs more than one pass ends with the metric that breaks it.
    for n in 1..=metrics.len() {
        let p = crate::plan_for(
            ProfilerKind::PmSampling,
            profiler,
            chip,
            availability,
            &metrics[..n],
        )?;
        if p.passes > 1 {
            return Err(CountersError::TooManyPasses {
                metric: metrics[n - 1].to_string(),
                passes: p.passes,
                alone: n == 1,
                chip: chip.to_string(),
            });
        }
    }
    Err(CountersError::TooManyPasses {
        metric: metrics.last().copied().unwrap_or_default().to_string(),
        passes: plan.passes,
        alone: false,
        chip: chip.to_string(),
    })
}

impl<'c> Profiler<'c> {
    /// `cuptiPmSamplingGetCounterAvailability` for a device index, twice (size, then image).
    pub fn pm_counter_availability(&self, device_index: usize) -> Result<Vec<u8>> {
        let f = self.cupti.pm_sampling().get_counter_availability;
        let mut p = sys::PmSamplingGetCounterAvailabilityParams::new();
        p.device_index = device_index;
        // SAFETY: a null image asks for the size only.
        unsafe { self.call("cuptiPmSamplingGetCounterAvailability (size)", f, &mut p)? };
        let mut image = vec![0u8; p.counter_availability_image_size];
        p.p_counter_availability_image = image.as_mut_ptr();
        // SAFETY: `image` has the size CUPTI asked for and outlives the call.
        unsafe { self.call("cuptiPmSamplingGetCounterAvailability", f, &mut p)? };
        Ok(image)
    }

    /// `cuptiPmSamplingEnable` on a device (device-wide; INVALID_OPERATION when another
    /// session already samples it).
    pub fn pm_enable(&self, device_index: usize) -> Result<PmSampler<'_, 'c>> {
        let mut p = sys::PmSamplingEnableParams::new();
        p.device_index = device_index;
        // SAFETY: integers in, the object pointer out.
        unsafe {
            self.call(
                "cuptiPmSamplingEnable",
                self.cupti.pm_sampling().enable,
                &mut p,
            )?
        };
        Ok(PmSampler {
            profiler: self,
            object: p.p_pm_sampling_object,
            config: Vec::new(),
            counter_data: Vec::new(),
            started: false,
            disabled: false,
        })
    }
}

/// An enabled PM Sampling session on one device. It owns the config and counter-data images
/// CUPTI uses until it is disabled; stopped and disabled on drop if not before.
pub struct PmSampler<'p, 'c> {
    profiler: &'p Profiler<'c>,
    object: *mut c_void,
    config: Vec<u8>,
    counter_data: Vec<u8>,
    started: bool,
    disabled: bool,
}

impl PmSampler<'_, '_> {
    /// `cuptiPmSamplingSetConfig`.
    pub fn set_config(&mut self, config: &[u8], s: &SamplerConfig) -> Result<()> {
        self.config = config.to_vec();
        let mut p = sys::PmSamplingSetConfigParams::new();
        p.p_pm_sampling_object = self.object;
        p.config_size = self.config.len();
        p.p_config = self.config.as_ptr();
        p.hardware_buffer_size = s.hardware_buffer_bytes;
        p.sampling_interval = s.interval;
        p.trigger_mode = match s.trigger {
            Trigger::TimeInterval => sys::PM_SAMPLING_TRIGGER_GPU_TIME_INTERVAL,
            Trigger::SysclkInterval => sys::PM_SAMPLING_TRIGGER_GPU_SYSCLK_INTERVAL,
        };
        p.hw_buffer_append_mode = if s.keep_latest {
            sys::PM_SAMPLING_APPEND_KEEP_LATEST
        } else {
            sys::PM_SAMPLING_APPEND_KEEP_OLDEST
        };
        // SAFETY: the config image is owned by `self` and lives until it is disabled.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingSetConfig",
                self.profiler.cupti.pm_sampling().set_config,
                &mut p,
            )
        }
    }

    /// `cuptiPmSamplingGetCounterDataSize`, then a counter-data image of that size, initialized.
    pub fn initialize_counter_data(&mut self, metrics: &[&str], max_samples: u32) -> Result<()> {
        let names = cstrings("metric name", metrics)?;
        let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut p = sys::PmSamplingGetCounterDataSizeParams::new();
        p.p_pm_sampling_object = self.object;
        p.p_metric_names = ptrs.as_ptr();
        p.num_metrics = ptrs.len();
        p.max_samples = max_samples;
        // SAFETY: the object is live; the names are read during the call.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingGetCounterDataSize",
                self.profiler.cupti.pm_sampling().get_counter_data_size,
                &mut p,
            )?
        };
        self.counter_data = vec![0u8; p.counter_data_size];
        self.reset_counter_data()
    }

    /// `cuptiPmSamplingCounterDataImageInitialize`: empties the image for the next decode.
    pub fn reset_counter_data(&mut self) -> Result<()> {
        let mut p = sys::PmSamplingCounterDataImageInitializeParams::new();
        p.p_pm_sampling_object = self.object;
        p.counter_data_size = self.counter_data.len();
        p.p_counter_data = self.counter_data.as_mut_ptr();
        // SAFETY: the image is owned by `self`, of the stated size, not reallocated meanwhile.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingCounterDataImageInitialize",
                self.profiler
                    .cupti
                    .pm_sampling()
                    .counter_data_image_initialize,
                &mut p,
            )
        }
    }

    /// `cuptiPmSamplingStart`.
    pub fn start(&mut self) -> Result<()> {
        let mut p = sys::PmSamplingStartParams::new();
        p.p_pm_sampling_object = self.object;
        // SAFETY: the live object is the only pointer.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingStart",
                self.profiler.cupti.pm_sampling().start,
                &mut p,
            )?
        };
        self.started = true;
        Ok(())
    }

    /// `cuptiPmSamplingStop`.
    pub fn stop(&mut self) -> Result<()> {
        self.started = false;
        let mut p = sys::PmSamplingStopParams::new();
        p.p_pm_sampling_object = self.object;
        // SAFETY: the live object is the only pointer.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingStop",
                self.profiler.cupti.pm_sampling().stop,
                &mut p,
            )
        }
    }

    /// `cuptiPmSamplingDecodeData`: moves samples from the hardware buffer into the image.
    /// With KEEP_OLDEST, an overflow is also returned as CUPTI_ERROR_OUT_OF_MEMORY; that is
    /// reported here as `overflow`, not as an error.
    pub fn decode(&mut self) -> Result<Decoded> {
        let mut p = sys::PmSamplingDecodeDataParams::new();
        p.p_pm_sampling_object = self.object;
        p.p_counter_data_image = self.counter_data.as_mut_ptr();
        p.counter_data_image_size = self.counter_data.len();
        // SAFETY: the image is owned by `self` and written within its length.
        let r = unsafe {
            self.profiler.call(
                "cuptiPmSamplingDecodeData",
                self.profiler.cupti.pm_sampling().decode_data,
                &mut p,
            )
        };
        match r {
            Ok(()) => {}
            Err(CountersError::Call { code, .. })
                if code == cutrace_cupti::error::CUPTI_ERROR_OUT_OF_MEMORY =>
            {
                p.overflow = 1;
            }
            Err(e) => return Err(e),
        }
        Ok(Decoded {
            image_full: p.decode_stop_reason == sys::PM_SAMPLING_DECODE_STOP_COUNTER_DATA_FULL,
            overflow: p.overflow != 0,
        })
    }

    /// `cuptiPmSamplingGetCounterDataInfo` on the image.
    pub fn counts(&self) -> Result<SampleCounts> {
        let mut p = sys::PmSamplingGetCounterDataInfoParams::new();
        p.p_counter_data_image = self.counter_data.as_ptr();
        p.counter_data_image_size = self.counter_data.len();
        // SAFETY: the image is read within its length.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingGetCounterDataInfo",
                self.profiler.cupti.pm_sampling().get_counter_data_info,
                &mut p,
            )?
        };
        Ok(SampleCounts {
            total: p.num_total_samples,
            populated: p.num_populated_samples,
            completed: p.num_completed_samples,
        })
    }

    /// `cuptiPmSamplingCounterDataGetSampleInfo`: a sample's start and end timestamps (ns).
    pub fn sample_times(&self, index: usize) -> Result<(u64, u64)> {
        let mut p = sys::PmSamplingCounterDataGetSampleInfoParams::new();
        p.p_pm_sampling_object = self.object;
        p.p_counter_data_image = self.counter_data.as_ptr();
        p.counter_data_image_size = self.counter_data.len();
        p.sample_index = index;
        // SAFETY: the object is live, the image read within its length.
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingCounterDataGetSampleInfo",
                self.profiler
                    .cupti
                    .pm_sampling()
                    .counter_data_get_sample_info,
                &mut p,
            )?
        };
        Ok((p.start_timestamp, p.end_timestamp))
    }

    /// One sample's values, in the order of `metrics` (the list the config was built from).
    pub fn evaluate(
        &self,
        host: &Host<'_, '_>,
        index: usize,
        metrics: &[&str],
    ) -> Result<Vec<f64>> {
        host.evaluate(&self.counter_data, index, metrics)
    }

    /// `cuptiPmSamplingDisable` (logged), after a stop if still started.
    pub fn disable(mut self) -> Result<()> {
        if self.started {
            let _ = self.stop();
        }
        self.disabled = true;
        let mut p = sys::PmSamplingDisableParams::new();
        p.p_pm_sampling_object = self.object;
        // SAFETY: the live object, disabled once (`disabled` stops the drop from repeating it).
        unsafe {
            self.profiler.call(
                "cuptiPmSamplingDisable",
                self.profiler.cupti.pm_sampling().disable,
                &mut p,
            )
        }
    }
}

impl Drop for PmSampler<'_, '_> {
    fn drop(&mut self) {
        if self.disabled {
            return;
        }
        let syms = self.profiler.cupti.pm_sampling();
        if self.started {
            let mut s = sys::PmSamplingStopParams::new();
            s.p_pm_sampling_object = self.object;
            // SAFETY: the live object, stopped before it is disabled.
            unsafe { self.profiler.call_quietly(syms.stop, &mut s) };
        }
        let mut p = sys::PmSamplingDisableParams::new();
        p.p_pm_sampling_object = self.object;
        // SAFETY: the live object, disabled once, before the images it uses are freed.
        unsafe { self.profiler.call_quietly(syms.disable, &mut p) };
    }
}

/// Why an `--interval` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    #[error("{0:?}: expected a number with a unit, like 100us or 1ms")]
    NotANumber(String),
    #[error("{text:?}: unknown unit {unit:?} (use ns, us, ms or s)")]
    UnknownUnit { text: String, unit: String },
    #[error("{0:?} is outside 1us..1s, the intervals PM Sampling is meant for")]
    OutOfRange(String),
}

/// `--interval`: `100us`, `1ms`, `250000ns`, `0.5ms`; between 1 µs and 1 s. In nanoseconds.
pub fn parse_interval(s: &str) -> std::result::Result<u64, IntervalError> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let per: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(IntervalError::NotANumber(s.to_string())),
        _ => {
            return Err(IntervalError::UnknownUnit {
                text: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    // Decimal text to integer ns without floats: "0.5" ms is 500_000 ns.
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let bad = || IntervalError::NotANumber(s.to_string());
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(bad());
    }
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let mut ns = whole.checked_mul(per).ok_or_else(bad)?;
    let mut scale = per;
    for d in frac.chars() {
        scale /= 10;
        ns += u64::from(d.to_digit(10).ok_or_else(bad)?) * scale;
    }
    if !(1_000..=1_000_000_000).contains(&ns) {
        return Err(IntervalError::OutOfRange(s.to_string()));
    }
    Ok(ns)
}

/// The checks `cutrace sample` makes before the program starts, on `chip`: the list must be
/// known to PM Sampling and fit in one pass. Metrics in `optional` the chip refuses are left out
/// and returned; any other refusal is the error.
pub fn check_before_start(
    profiler: &Profiler<'_>,
    chip: &str,
    metrics: &[&str],
    optional: &[&str],
) -> Result<Vec<String>> {
    let mut names = metrics.to_vec();
    let mut left_out = Vec::new();
    loop {
        match pm_plan(profiler, chip, None, &names) {
            Ok(_) => return Ok(left_out),
            Err(CountersError::MetricRefused { metric, .. })
                if optional.contains(&metric.as_str()) =>
            {
                names.retain(|n| *n != metric);
                left_out.push(metric);
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_to_integer_nanoseconds() {
        assert_eq!(parse_interval("100us"), Ok(100_000));
        assert_eq!(parse_interval("1ms"), Ok(1_000_000));
        assert_eq!(parse_interval(" 0.5ms "), Ok(500_000));
        assert_eq!(parse_interval("250000ns"), Ok(250_000));
        assert_eq!(parse_interval("1s"), Ok(1_000_000_000));
        assert!(matches!(
            parse_interval("100"),
            Err(IntervalError::NotANumber(_))
        ));
        assert!(matches!(
            parse_interval("1.2.3ms"),
            Err(IntervalError::NotANumber(_))
        ));
        assert!(matches!(
            parse_interval("5min"),
            Err(IntervalError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_interval("100ns"),
            Err(IntervalError::OutOfRange(_))
        ));
        assert!(matches!(
            parse_interval("2s"),
            Err(IntervalError::OutOfRange(_))
        ));
    }
}

/// `cutrace sample --metrics`: the list given (trimmed, no duplicates), or the default set with
/// its optional metrics. Returns (metrics, optional).
pub fn chosen_metrics(given: &[String]) -> std::result::Result<(Vec<String>, Vec<String>), String> {
    let given: Vec<String> = given
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if given.is_empty() {
        let all = DEFAULT_METRICS.iter().map(|m| m.to_string()).collect();
        return Ok((
            all,
            OPTIONAL_METRICS.iter().map(|m| m.to_string()).collect(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = given.iter().find(|m| !seen.insert(m.as_str())) {
        return Err(format!("--metrics names {dup} twice"));
    }
    Ok((given, Vec::new()))
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    #[test]
    fn the_default_set_or_the_list_given() {
        let (m, o) = chosen_metrics(&[]).unwrap();
        assert_eq!(m.len(), DEFAULT_METRICS.len());
        assert_eq!(o, OPTIONAL_METRICS);
        let (m, o) = chosen_metrics(&[" a.sum".into(), "".into(), "b.avg".into()]).unwrap();
        assert_eq!((m, o.len()), (vec!["a.sum".to_string(), "b.avg".into()], 0));
        let e = chosen_metrics(&["a.sum".into(), "a.sum".into()]).unwrap_err();
        assert!(e.contains("a.sum twice"), "{e}");
    }
}
