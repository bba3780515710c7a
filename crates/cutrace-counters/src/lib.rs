//! cutrace-counters: safe CUPTI Range Profiler sessions over `cutrace-cupti`'s one FFI layer.
//! Metric names go in; one `f64` per metric per range comes out.
//!
//! The sequence is CUPTI's (headers cupti_profiler_target.h, cupti_profiler_host.h,
//! cupti_range_profiler.h; https://docs.nvidia.com/cupti/main/main.html, "Range Profiling"):
//! [`Profiler::initialize`], per device [`Profiler::device_supported`],
//! [`Profiler::counter_availability`] and [`Profiler::chip_name`]; on the host a [`Host`] turns
//! metric names into a config image; on the target [`Profiler::enable`] gives a
//! [`RangeProfiler`], which is configured, started, stopped, decoded and disabled; a [`Host`]
//! evaluates the counter-data image into values.
//!
//! Every CUPTI call a [`Profiler`] makes is appended to its call log ([`Profiler::calls`]), with
//! its result, so a caller can show exactly what CUPTI answered, step by step (the doctor's
//! probe does). The log keeps the last [`CALL_LOG_LEN`] calls and counts the older ones it let
//! go ([`Profiler::dropped_calls`]), so a process that profiles for hours holds it in bounded
//! memory. Teardown in `Drop` is not logged: its failure changes nothing for the caller.
//!
//! The host calls need `libnvperf_host.so`, which libcupti opens by soname; without a GPU
//! [`preload_nvperf_host`] makes the copy beside libcupti findable.
//!
//! Beside Range Profiling: [`pm`], PM Sampling per device, and [`pc`], PC Sampling per context
//! (stall reasons per PC), each through the same [`Profiler`] and its call log.

mod error;
pub mod listing;
pub mod pc;
pub mod pm;
pub mod sets;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, CStr, CString};

use cutrace_cupti::driver::Context;
use cutrace_cupti::sys::{self, CUdevice, ParamsFn};
use cutrace_cupti::Cupti;

pub use error::{refusal, CountersError, Refusal};

pub type Result<T> = std::result::Result<T, CountersError>;

/// One CUPTI call and its result code (0 is success).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call: &'static str,
    pub code: u32,
}

/// `CUpti_Profiler_Support_Level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupportLevel {
    Unknown,
    Unsupported,
    Disabled,
    Supported,
}

impl SupportLevel {
    fn from_raw(v: i32) -> Option<Self> {
        Some(match v {
            0 => SupportLevel::Unknown,
            1 => SupportLevel::Unsupported,
            2 => SupportLevel::Disabled,
            3 => SupportLevel::Supported,
            _ => return None,
        })
    }

    /// The word the doctor prints (`supported`), `?` for a value the header does not name.
    pub fn word(level: Option<SupportLevel>) -> &'static str {
        match level {
            Some(SupportLevel::Unknown) => "unknown",
            Some(SupportLevel::Unsupported) => "unsupported",
            Some(SupportLevel::Disabled) => "disabled",
            Some(SupportLevel::Supported) => "supported",
            None => "?",
        }
    }
}

/// `cuptiProfilerDeviceSupported`'s answer; `None` is a value the header does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSupport {
    pub is_supported: Option<SupportLevel>,
    pub architecture: Option<SupportLevel>,
    pub sli: Option<SupportLevel>,
    pub v_gpu: Option<SupportLevel>,
    pub confidential_compute: Option<SupportLevel>,
    pub cmp: Option<SupportLevel>,
    pub wsl: Option<SupportLevel>,
}

impl DeviceSupport {
    /// `isSupported=… architecture=… …`, the header's field names.
    pub fn describe(&self) -> String {
        let w = SupportLevel::word;
        format!(
            "isSupported={} architecture={} sli={} vGpu={} confidentialCompute={} cmp={} wsl={}",
            w(self.is_supported),
            w(self.architecture),
            w(self.sli),
            w(self.v_gpu),
            w(self.confidential_compute),
            w(self.cmp),
            w(self.wsl)
        )
    }
}

/// `CUpti_ProfilerType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfilerKind {
    RangeProfiler,
    PmSampling,
}

/// `CUpti_MetricType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Ratio,
    Throughput,
}

/// `CUpti_ProfilerRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeMode {
    /// One range per kernel, named "0", "1", … in execution order.
    Auto,
    /// Ranges pushed and popped by the caller.
    User,
}

/// `CUpti_ProfilerReplayMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    Application,
    /// Each kernel replayed once per pass; works with auto ranges only.
    Kernel,
    User,
}

/// `cuptiRangeProfilerSetConfig`'s session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    pub range: RangeMode,
    pub replay: ReplayMode,
    pub max_ranges_per_pass: usize,
    pub num_nesting_levels: u16,
    pub min_nesting_level: u16,
    pub pass_index: usize,
    pub target_nesting_level: u16,
}

impl SessionConfig {
    /// Per-kernel profiling: auto ranges, kernel replay, one nesting level.
    pub fn per_kernel(max_ranges_per_pass: usize) -> Self {
        SessionConfig {
            range: RangeMode::Auto,
            replay: ReplayMode::Kernel,
            max_ranges_per_pass,
            num_nesting_levels: 1,
            min_nesting_level: 1,
            pass_index: 0,
            target_nesting_level: 1,
        }
    }
}

/// `cuptiProfilerHostGetMetricProperties`' answer for one metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricProperties {
    pub name: String,
    pub description: String,
    /// The hardware unit counted (`sm`, `dram`, `gpc`, ...).
    pub hw_unit: String,
    /// The dimension of the value (`ctas`, `bytes`, `cycles`, `percent`, ...).
    pub dim_unit: String,
    /// `None` for a type the header does not name.
    pub kind: Option<MetricType>,
}

/// A metric list turned into a config image on a fresh host object, with its pass count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub config: Vec<u8>,
    pub passes: usize,
}

/// Builds the config image of `metrics` for `chip` and counts its replay passes. When the chip
/// refuses the list, each metric is tried alone on a fresh host object (CUPTI says only
/// "invalid parameter" for the list) so the error can name the one refused.
pub fn plan(
    profiler: &Profiler<'_>,
    chip: &str,
    availability: Option<&[u8]>,
    metrics: &[&str],
) -> Result<Plan> {
    plan_for(
        ProfilerKind::RangeProfiler,
        profiler,
        chip,
        availability,
        metrics,
    )
}

/// [`plan`] for either profiler type (PM Sampling has its own metric names and pass limits).
pub fn plan_for(
    kind: ProfilerKind,
    profiler: &Profiler<'_>,
    chip: &str,
    availability: Option<&[u8]>,
    metrics: &[&str],
) -> Result<Plan> {
    let host = profiler.host(kind, chip, availability)?;
    if let Err(e) = host.add_metrics(metrics) {
        drop(host);
        if e.code().is_none() {
            return Err(e);
        }
        for m in metrics {
            let alone = profiler.host(kind, chip, availability)?;
            match alone.add_metrics(&[m]) {
                Err(CountersError::Call { call, code }) => {
                    return Err(CountersError::MetricRefused {
                        metric: m.to_string(),
                        chip: chip.to_string(),
                        kind,
                        call,
                        code,
                    })
                }
                Err(other) => return Err(other),
                Ok(()) => {}
            }
        }
        return Err(e);
    }
    let config = host.config_image()?;
    let passes = host.passes(&config)?;
    Ok(Plan { config, passes })
}

/// One range's metric values, in the order the metrics were asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeValues {
    pub name: String,
    pub values: Vec<f64>,
}

fn cstrings(what: &'static str, items: &[&str]) -> Result<Vec<CString>> {
    items
        .iter()
        .map(|s| {
            CString::new(*s).map_err(|_| CountersError::Nul {
                what,
                text: s.to_string(),
            })
        })
        .collect()
}

/// A C string CUPTI returned (static or owned by CUPTI while loaded), copied out.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string valid for the call.
unsafe fn owned(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller vouches for `p`; null was handled above.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Makes the `libnvperf_host.so` beside `cupti_path` findable by soname, which the host calls
/// need (libcupti opens it by soname; a pip wheel's lib directory is not on the loader's path).
/// Returns whether such a file was loaded. The library stays loaded for the process.
pub fn preload_nvperf_host(cupti_path: &std::path::Path) -> bool {
    let Some(dir) = cupti_path.parent() else {
        return false;
    };
    let p = dir.join("libnvperf_host.so");
    if !p.exists() {
        return false;
    }
    let flags = libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_NODELETE;
    // SAFETY: loading NVIDIA's host library runs its initializers, as libcupti itself would.
    match unsafe { libloading::os::unix::Library::open(Some(&p), flags) } {
        Ok(lib) => {
            // RTLD_NODELETE keeps it mapped anyway; forgetting the handle says so.
            std::mem::forget(lib);
            true
        }
        Err(_) => false,
    }
}

/// The most calls a [`Profiler`]'s log keeps. Setting up a session takes a few dozen calls; a
/// process that profiles for hours makes some with every pass or decode, and a caller that
/// never takes the log must not grow it without end.
pub const CALL_LOG_LEN: usize = 1024;

/// The last calls made, at most `len` of them, and how many older ones were let go.
#[derive(Debug)]
struct CallLog {
    calls: VecDeque<Call>,
    len: usize,
    dropped: u64,
}

impl CallLog {
    fn new(len: usize) -> Self {
        CallLog {
            calls: VecDeque::new(),
            len,
            dropped: 0,
        }
    }

    /// Appends `c`, letting the oldest call go (and counting it) when the log is full.
    fn push(&mut self, c: Call) {
        if self.calls.len() >= self.len {
            self.calls.pop_front();
            self.dropped = self.dropped.saturating_add(1);
            if self.len == 0 {
                // A log of length 0 keeps nothing: the call itself is the one let go.
                return;
            }
        }
        self.calls.push_back(c);
    }

    fn take(&mut self) -> Vec<Call> {
        std::mem::take(&mut self.calls).into()
    }
}

/// The profiler API of one loaded libcupti, with the log of the calls made through it.
pub struct Profiler<'c> {
    cupti: &'c Cupti,
    log: RefCell<CallLog>,
}

impl<'c> Profiler<'c> {
    pub fn new(cupti: &'c Cupti) -> Self {
        Profiler {
            cupti,
            log: RefCell::new(CallLog::new(CALL_LOG_LEN)),
        }
    }

    pub fn cupti(&self) -> &'c Cupti {
        self.cupti
    }

    /// The CUPTI calls made so far, in order: the last [`CALL_LOG_LEN`] of them.
    pub fn calls(&self) -> Vec<Call> {
        self.log.borrow().calls.iter().cloned().collect()
    }

    /// The calls the log holds ([`Profiler::calls`]), leaving it empty.
    pub fn take_calls(&self) -> Vec<Call> {
        self.log.borrow_mut().take()
    }

    /// How many calls, since this profiler was made, are no longer in the log because
    /// [`CALL_LOG_LEN`] later ones followed them before it was taken.
    pub fn dropped_calls(&self) -> u64 {
        self.log.borrow().dropped
    }

    /// Calls `f(p)`, logs it, and turns the code into a `Result`.
    ///
    /// # Safety
    /// Every pointer in `p` must be null or valid for what the header says CUPTI does with it
    /// (read, or write, its declared size) until the call returns.
    unsafe fn call<T>(&self, name: &'static str, f: Option<ParamsFn<T>>, p: &mut T) -> Result<()> {
        let f = f.ok_or(CountersError::MissingSymbol(name))?;
        // SAFETY: `f` was resolved for the struct type `T` (the table ties each symbol to its
        // struct); `p` is a live `T` with `structSize` set by `T::new`; the caller vouches for
        // the pointers inside it.
        let code = unsafe { f(p) };
        self.log.borrow_mut().push(Call { call: name, code });
        if code == 0 {
            Ok(())
        } else {
            Err(CountersError::Call { call: name, code })
        }
    }

    /// Like `call`, but the call is not logged and its result is ignored (teardown).
    ///
    /// # Safety
    /// As for `call`.
    unsafe fn call_quietly<T>(&self, f: Option<ParamsFn<T>>, p: &mut T) {
        if let Some(f) = f {
            // SAFETY: as in `call`; the caller vouches for the pointers.
            unsafe { f(p) };
        }
    }

    /// `cuptiProfilerInitialize`.
    pub fn initialize(&self) -> Result<()> {
        let mut p = sys::ProfilerInitializeParams::new();
        // SAFETY: no pointers besides the null pPriv.
        unsafe {
            self.call(
                "cuptiProfilerInitialize",
                self.cupti.profiler().initialize,
                &mut p,
            )
        }
    }

    /// `cuptiProfilerDeInitialize`, not logged (teardown).
    pub fn deinitialize(&self) {
        let mut p = sys::ProfilerDeInitializeParams::new();
        // SAFETY: no pointers besides the null pPriv.
        unsafe { self.call_quietly(self.cupti.profiler().deinitialize, &mut p) }
    }

    /// `cuptiProfilerDeviceSupported` for Range Profiling; `Ok(None)` when this CUPTI lacks
    /// the call (nothing is called then).
    pub fn device_supported(&self, dev: CUdevice) -> Result<Option<DeviceSupport>> {
        let f = self.cupti.profiler().device_supported;
        if f.is_none() {
            return Ok(None);
        }
        let mut p = sys::DeviceSupportedParams::new();
        p.cu_device = dev;
        p.api = sys::PROFILER_API_RANGE_PROFILING;
        // SAFETY: no pointers besides the null pPriv; the rest are integers.
        unsafe { self.call("cuptiProfilerDeviceSupported", f, &mut p)? };
        let l = SupportLevel::from_raw;
        Ok(Some(DeviceSupport {
            is_supported: l(p.is_supported),
            architecture: l(p.architecture),
            sli: l(p.sli),
            v_gpu: l(p.v_gpu),
            confidential_compute: l(p.confidential_compute),
            cmp: l(p.cmp),
            wsl: l(p.wsl),
        }))
    }

    /// `cuptiProfilerGetCounterAvailability`, twice: the size (logged as
    /// `cuptiProfilerGetCounterAvailability (size)`), then the image.
    pub fn counter_availability(&self, ctx: Context) -> Result<Vec<u8>> {
        let f = self.cupti.profiler().get_counter_availability;
        let mut p = sys::GetCounterAvailabilityParams::new();
        p.ctx = ctx.as_raw();
        // SAFETY: a null image asks for the size only; ctx came from the driver.
        unsafe { self.call("cuptiProfilerGetCounterAvailability (size)", f, &mut p)? };
        let mut image = vec![0u8; p.counter_availability_image_size];
        p.p_counter_availability_image = image.as_mut_ptr();
        // SAFETY: `image` has the size CUPTI asked for and outlives the call.
        unsafe { self.call("cuptiProfilerGetCounterAvailability", f, &mut p)? };
        Ok(image)
    }

    /// `cuptiDeviceGetChipName` (`GH100` on an H100 or H200).
    pub fn chip_name(&self, device_index: usize) -> Result<Option<String>> {
        let mut p = sys::DeviceGetChipNameParams::new();
        p.device_index = device_index;
        // SAFETY: pChipName is an out-pointer CUPTI fills.
        unsafe {
            self.call(
                "cuptiDeviceGetChipName",
                self.cupti.profiler().device_get_chip_name,
                &mut p,
            )?
        };
        // SAFETY: CUPTI returns a NUL-terminated static string (or null).
        Ok(unsafe { owned(p.p_chip_name) })
    }

    /// `cuptiProfilerHostGetSupportedChips`: chips this CUPTI's host library knows; no GPU needed.
    pub fn supported_chips(&self) -> Result<Vec<String>> {
        let mut p = sys::HostGetSupportedChipsParams::new();
        // SAFETY: out-fields only.
        unsafe {
            self.call(
                "cuptiProfilerHostGetSupportedChips",
                self.cupti.profiler().host_get_supported_chips,
                &mut p,
            )?
        };
        Ok((0..p.num_chips)
            // SAFETY: CUPTI returned an array of `num_chips` static C strings.
            .filter_map(|i| unsafe { owned(*p.pp_chip_names.add(i)) })
            .collect())
    }

    /// `cuptiProfilerHostInitialize`: a host object for `chip`. Without a counter-availability
    /// image (no GPU), CUPTI assumes every counter is available.
    pub fn host(
        &self,
        kind: ProfilerKind,
        chip: &str,
        availability: Option<&[u8]>,
    ) -> Result<Host<'_, 'c>> {
        let chip = CString::new(chip).map_err(|_| CountersError::Nul {
            what: "chip name",
            text: chip.into(),
        })?;
        let mut p = sys::HostInitializeParams::new();
        p.profiler_type = match kind {
            ProfilerKind::RangeProfiler => sys::PROFILER_TYPE_RANGE_PROFILER,
            ProfilerKind::PmSampling => sys::PROFILER_TYPE_PM_SAMPLING,
        };
        p.p_chip_name = chip.as_ptr();
        p.p_counter_availability_image = availability.map_or(std::ptr::null(), <[u8]>::as_ptr);
        // SAFETY: the chip name and the image (read only) outlive the call; pHostObject is out.
        unsafe {
            self.call(
                "cuptiProfilerHostInitialize",
                self.cupti.profiler().host_initialize,
                &mut p,
            )?
        };
        Ok(Host {
            profiler: self,
            object: p.p_host_object,
        })
    }

    /// `cuptiRangeProfilerEnable` on `ctx`.
    pub fn enable(&self, ctx: Context) -> Result<RangeProfiler<'_, 'c>> {
        let mut p = sys::RangeProfilerEnableParams::new();
        p.ctx = ctx.as_raw();
        // SAFETY: ctx came from the driver; pRangeProfilerObject is out.
        unsafe {
            self.call(
                "cuptiRangeProfilerEnable",
                self.cupti.profiler().range_enable,
                &mut p,
            )?
        };
        Ok(RangeProfiler {
            profiler: self,
            object: p.p_range_profiler_object,
            config: Vec::new(),
            counter_data: Vec::new(),
            disabled: false,
        })
    }

    /// `cuptiRangeProfilerGetCounterDataInfo`: how many ranges a counter-data image holds.
    pub fn counter_data_ranges(&self, image: &[u8]) -> Result<usize> {
        let mut p = sys::RangeProfilerGetCounterDataInfoParams::new();
        p.p_counter_data_image = image.as_ptr();
        p.counter_data_image_size = image.len();
        // SAFETY: the image is read, within its length, during the call.
        unsafe {
            self.call(
                "cuptiRangeProfilerGetCounterDataInfo",
                self.cupti.profiler().range_get_counter_data_info,
                &mut p,
            )?
        };
        Ok(p.num_total_ranges)
    }

    /// `cuptiRangeProfilerCounterDataGetRangeInfo`: a range's name (nesting joined by `/`).
    pub fn range_name(&self, image: &[u8], range_index: usize) -> Result<String> {
        let delimiter = c"/";
        let mut p = sys::RangeProfilerCounterDataGetRangeInfoParams::new();
        p.p_counter_data_image = image.as_ptr();
        p.counter_data_image_size = image.len();
        p.range_index = range_index;
        p.range_delimiter = delimiter.as_ptr();
        // SAFETY: the image and the delimiter are read during the call; rangeName is out.
        unsafe {
            self.call(
                "cuptiRangeProfilerCounterDataGetRangeInfo",
                self.cupti.profiler().range_counter_data_get_range_info,
                &mut p,
            )?
        };
        // SAFETY: CUPTI returns a NUL-terminated string it owns (or null).
        Ok(unsafe { owned(p.range_name) }.unwrap_or_default())
    }
}

/// A `cuptiProfilerHostInitialize` host object: metric names to config images, counter data to
/// values. Deinitialized on drop.
pub struct Host<'p, 'c> {
    profiler: &'p Profiler<'c>,
    object: *mut std::ffi::c_void,
}

impl Host<'_, '_> {
    /// `cuptiProfilerHostConfigAddMetrics`. An unknown name fails with
    /// CUPTI_ERROR_INVALID_PARAMETER.
    pub fn add_metrics(&self, metrics: &[&str]) -> Result<()> {
        let names = cstrings("metric name", metrics)?;
        let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut p = sys::HostConfigAddMetricsParams::new();
        p.p_host_object = self.object;
        p.pp_metric_names = ptrs.as_ptr();
        p.num_metrics = ptrs.len();
        // SAFETY: the host object is live; the names array and strings outlive the call.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostConfigAddMetrics",
                self.profiler.cupti.profiler().host_config_add_metrics,
                &mut p,
            )
        }
    }

    /// `cuptiProfilerHostGetConfigImageSize`, then `cuptiProfilerHostGetConfigImage`.
    pub fn config_image(&self) -> Result<Vec<u8>> {
        let syms = self.profiler.cupti.profiler();
        let mut s = sys::HostGetConfigImageSizeParams::new();
        s.p_host_object = self.object;
        // SAFETY: the host object is live; the size is out.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostGetConfigImageSize",
                syms.host_get_config_image_size,
                &mut s,
            )?
        };
        let mut image = vec![0u8; s.config_image_size];
        let mut p = sys::HostGetConfigImageParams::new();
        p.p_host_object = self.object;
        p.config_image_size = image.len();
        p.p_config_image = image.as_mut_ptr();
        // SAFETY: `image` has the size CUPTI gave and outlives the call.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostGetConfigImage",
                syms.host_get_config_image,
                &mut p,
            )?
        };
        Ok(image)
    }

    /// `cuptiProfilerHostGetNumOfPasses`: replay passes a config image needs.
    pub fn passes(&self, config: &[u8]) -> Result<usize> {
        // CUPTI declares the image non-const here but only reads it; a copy keeps `config`
        // untouched whatever it does.
        let mut copy = config.to_vec();
        let mut p = sys::HostGetNumOfPassesParams::new();
        p.config_image_size = copy.len();
        p.p_config_image = copy.as_mut_ptr();
        // SAFETY: `copy` is live and of the stated size for the call.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostGetNumOfPasses",
                self.profiler.cupti.profiler().host_get_num_of_passes,
                &mut p,
            )?
        };
        Ok(p.num_of_passes)
    }

    /// `cuptiProfilerHostGetBaseMetrics`: the chip's base metric names of one type.
    pub fn base_metrics(&self, kind: MetricType) -> Result<Vec<String>> {
        let mut p = sys::HostGetBaseMetricsParams::new();
        p.p_host_object = self.object;
        p.metric_type = match kind {
            MetricType::Counter => sys::METRIC_TYPE_COUNTER,
            MetricType::Ratio => sys::METRIC_TYPE_RATIO,
            MetricType::Throughput => sys::METRIC_TYPE_THROUGHPUT,
        };
        // SAFETY: the host object is live; the names array is out, owned by the host object.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostGetBaseMetrics",
                self.profiler.cupti.profiler().host_get_base_metrics,
                &mut p,
            )?
        };
        Ok((0..p.num_metrics)
            // SAFETY: `num_metrics` C strings owned by the live host object.
            .filter_map(|i| unsafe { owned(*p.pp_metric_names.add(i)) })
            .collect())
    }

    /// `cuptiProfilerHostGetMetricProperties` for a metric name (a base name such as
    /// `sm__ctas_launched`, or one with its rollup, `sm__ctas_launched.sum`).
    pub fn metric_properties(&self, metric: &str) -> Result<MetricProperties> {
        let name = CString::new(metric).map_err(|_| CountersError::Nul {
            what: "metric name",
            text: metric.into(),
        })?;
        let mut p = sys::HostGetMetricPropertiesParams::new();
        p.p_host_object = self.object;
        p.p_metric_name = name.as_ptr();
        // SAFETY: the host object is live, the name is read during the call; the three strings
        // are out-pointers to text the host object owns.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostGetMetricProperties",
                self.profiler.cupti.profiler().host_get_metric_properties,
                &mut p,
            )?
        };
        // SAFETY: NUL-terminated strings owned by the live host object (or null), copied now.
        let text = |q: *const c_char| unsafe { owned(q) }.unwrap_or_default();
        Ok(MetricProperties {
            name: metric.to_string(),
            description: text(p.p_description),
            hw_unit: text(p.p_hw_unit),
            dim_unit: text(p.p_dim_unit),
            kind: match p.metric_type {
                sys::METRIC_TYPE_COUNTER => Some(MetricType::Counter),
                sys::METRIC_TYPE_RATIO => Some(MetricType::Ratio),
                sys::METRIC_TYPE_THROUGHPUT => Some(MetricType::Throughput),
                _ => None,
            },
        })
    }

    /// `cuptiProfilerHostEvaluateToGpuValues`: one value per metric for one range of a decoded
    /// counter-data image. The metrics must be among those the config was built from.
    pub fn evaluate(&self, image: &[u8], range_index: usize, metrics: &[&str]) -> Result<Vec<f64>> {
        let names = cstrings("metric name", metrics)?;
        let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut values = vec![f64::NAN; metrics.len()];
        let mut p = sys::HostEvaluateToGpuValuesParams::new();
        p.p_host_object = self.object;
        p.p_counter_data_image = image.as_ptr();
        p.counter_data_image_size = image.len();
        p.range_index = range_index;
        p.pp_metric_names = ptrs.as_ptr();
        p.num_metrics = ptrs.len();
        p.p_metric_values = values.as_mut_ptr();
        // SAFETY: image and names are read, `values` (one f64 per metric) written, all live.
        unsafe {
            self.profiler.call(
                "cuptiProfilerHostEvaluateToGpuValues",
                self.profiler.cupti.profiler().host_evaluate_to_gpu_values,
                &mut p,
            )?
        };
        Ok(values)
    }

    /// Every range of a decoded counter-data image: its name and its metric values.
    pub fn evaluate_all(&self, image: &[u8], metrics: &[&str]) -> Result<Vec<RangeValues>> {
        let n = self.profiler.counter_data_ranges(image)?;
        (0..n)
            .map(|i| {
                Ok(RangeValues {
                    name: self.profiler.range_name(image, i)?,
                    values: self.evaluate(image, i, metrics)?,
                })
            })
            .collect()
    }
}

impl Drop for Host<'_, '_> {
    fn drop(&mut self) {
        let mut p = sys::HostDeinitializeParams::new();
        p.p_host_object = self.object;
        // SAFETY: the host object this value owns, released once.
        unsafe {
            self.profiler
                .call_quietly(self.profiler.cupti.profiler().host_deinitialize, &mut p)
        };
    }
}

/// An enabled Range Profiler on one context. It owns the config and counter-data images,
/// which CUPTI uses until the session is disabled. Disabled on drop if not before.
pub struct RangeProfiler<'p, 'c> {
    profiler: &'p Profiler<'c>,
    object: *mut std::ffi::c_void,
    config: Vec<u8>,
    counter_data: Vec<u8>,
    disabled: bool,
}

impl RangeProfiler<'_, '_> {
    fn object_call<T>(
        &self,
        name: &'static str,
        f: Option<ParamsFn<T>>,
        mut p: T,
        set: impl FnOnce(&mut T, *mut std::ffi::c_void),
    ) -> Result<T> {
        set(&mut p, self.object);
        // SAFETY: only used for the Start/PopRange/Stop/Decode structs, whose only pointer is
        // this live Range Profiler object.
        unsafe { self.profiler.call(name, f, &mut p)? };
        Ok(p)
    }

    /// `cuptiRangeProfilerGetCounterDataSize` for these metrics and range capacity.
    pub fn counter_data_size(
        &self,
        metrics: &[&str],
        max_ranges: usize,
        max_range_tree_nodes: u32,
    ) -> Result<usize> {
        let names = cstrings("metric name", metrics)?;
        let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut p = sys::RangeProfilerGetCounterDataSizeParams::new();
        p.p_range_profiler_object = self.object;
        p.p_metric_names = ptrs.as_ptr();
        p.num_metrics = ptrs.len();
        p.max_num_of_ranges = max_ranges;
        p.max_num_range_tree_nodes = max_range_tree_nodes;
        // SAFETY: the object is live; the names are read during the call.
        unsafe {
            self.profiler.call(
                "cuptiRangeProfilerGetCounterDataSize",
                self.profiler.cupti.profiler().range_get_counter_data_size,
                &mut p,
            )?
        };
        Ok(p.counter_data_size)
    }

    /// Allocates a counter-data image of `size` bytes and runs
    /// `cuptiRangeProfilerCounterDataImageInitialize` on it.
    pub fn initialize_counter_data(&mut self, size: usize) -> Result<()> {
        self.counter_data = vec![0u8; size];
        self.reset_counter_data()
    }

    /// `cuptiRangeProfilerCounterDataImageInitialize` again: empties the image for new ranges.
    pub fn reset_counter_data(&mut self) -> Result<()> {
        let mut p = sys::RangeProfilerCounterDataImageInitializeParams::new();
        p.p_range_profiler_object = self.object;
        p.counter_data_size = self.counter_data.len();
        p.p_counter_data = self.counter_data.as_mut_ptr();
        // SAFETY: the image is owned by `self`, of the stated size, and never reallocated.
        unsafe {
            self.profiler.call(
                "cuptiRangeProfilerCounterDataImageInitialize",
                self.profiler
                    .cupti
                    .profiler()
                    .range_counter_data_image_initialize,
                &mut p,
            )
        }
    }

    /// `cuptiRangeProfilerSetConfig` with `config` (from [`Host::config_image`]) and this
    /// session's counter-data image.
    pub fn set_config(&mut self, config: &[u8], session: &SessionConfig) -> Result<()> {
        if self.counter_data.is_empty() {
            return Err(CountersError::NoCounterData);
        }
        // CUPTI may keep pointing at both images until the session ends: `self` owns them.
        self.config = config.to_vec();
        let mut p = sys::RangeProfilerSetConfigParams::new();
        p.p_range_profiler_object = self.object;
        p.config_size = self.config.len();
        p.p_config = self.config.as_ptr();
        p.counter_data_image_size = self.counter_data.len();
        p.p_counter_data_image = self.counter_data.as_mut_ptr();
        p.range = match session.range {
            RangeMode::Auto => sys::AUTO_RANGE,
            RangeMode::User => sys::USER_RANGE,
        };
        p.replay_mode = match session.replay {
            ReplayMode::Application => sys::APPLICATION_REPLAY,
            ReplayMode::Kernel => sys::KERNEL_REPLAY,
            ReplayMode::User => sys::USER_REPLAY,
        };
        p.max_ranges_per_pass = session.max_ranges_per_pass;
        p.num_nesting_levels = session.num_nesting_levels;
        p.min_nesting_level = session.min_nesting_level;
        p.pass_index = session.pass_index;
        p.target_nesting_level = session.target_nesting_level;
        // SAFETY: both images are owned by `self` and live until it is disabled.
        unsafe {
            self.profiler.call(
                "cuptiRangeProfilerSetConfig",
                self.profiler.cupti.profiler().range_set_config,
                &mut p,
            )
        }
    }

    /// `cuptiRangeProfilerStart`.
    pub fn start(&self) -> Result<()> {
        self.object_call(
            "cuptiRangeProfilerStart",
            self.profiler.cupti.profiler().range_start,
            sys::RangeProfilerStartParams::new(),
            |p, o| p.p_range_profiler_object = o,
        )
        .map(drop)
    }

    /// `cuptiRangeProfilerPushRange` (user ranges).
    pub fn push_range(&self, name: &str) -> Result<()> {
        let name = CString::new(name).map_err(|_| CountersError::Nul {
            what: "range name",
            text: name.into(),
        })?;
        let mut p = sys::RangeProfilerPushRangeParams::new();
        p.p_range_profiler_object = self.object;
        p.p_range_name = name.as_ptr();
        // SAFETY: the object is live; the name is read during the call (CUPTI copies it).
        unsafe {
            self.profiler.call(
                "cuptiRangeProfilerPushRange",
                self.profiler.cupti.profiler().range_push_range,
                &mut p,
            )
        }
    }

    /// `cuptiRangeProfilerPopRange`.
    pub fn pop_range(&self) -> Result<()> {
        self.object_call(
            "cuptiRangeProfilerPopRange",
            self.profiler.cupti.profiler().range_pop_range,
            sys::RangeProfilerPopRangeParams::new(),
            |p, o| p.p_range_profiler_object = o,
        )
        .map(drop)
    }

    /// `cuptiRangeProfilerStop`; true when every replay pass was submitted (always with kernel
    /// replay).
    pub fn stop(&self) -> Result<bool> {
        let p = self.object_call(
            "cuptiRangeProfilerStop",
            self.profiler.cupti.profiler().range_stop,
            sys::RangeProfilerStopParams::new(),
            |p, o| p.p_range_profiler_object = o,
        )?;
        Ok(p.is_all_pass_submitted != 0)
    }

    /// `cuptiRangeProfilerDecodeData`: moves collected ranges into the counter-data image
    /// (synchronizing the context); returns how many ranges did not fit and were dropped.
    pub fn decode(&self) -> Result<usize> {
        let p = self.object_call(
            "cuptiRangeProfilerDecodeData",
            self.profiler.cupti.profiler().range_decode_data,
            sys::RangeProfilerDecodeDataParams::new(),
            |p, o| p.p_range_profiler_object = o,
        )?;
        Ok(p.num_of_range_dropped)
    }

    /// The counter-data image, for [`Host::evaluate_all`] after [`decode`](Self::decode).
    pub fn counter_data(&self) -> &[u8] {
        &self.counter_data
    }

    /// `cuptiRangeProfilerDisable` (logged); the images are freed after it.
    pub fn disable(mut self) -> Result<()> {
        self.disabled = true;
        let mut p = sys::RangeProfilerDisableParams::new();
        p.p_range_profiler_object = self.object;
        // SAFETY: the live object, disabled once (`disabled` stops the drop from repeating it).
        unsafe {
            self.profiler.call(
                "cuptiRangeProfilerDisable",
                self.profiler.cupti.profiler().range_disable,
                &mut p,
            )
        }
    }
}

impl Drop for RangeProfiler<'_, '_> {
    fn drop(&mut self) {
        if self.disabled {
            return;
        }
        let mut p = sys::RangeProfilerDisableParams::new();
        p.p_range_profiler_object = self.object;
        // SAFETY: the live object, disabled once, before the images it uses are freed.
        unsafe {
            self.profiler
                .call_quietly(self.profiler.cupti.profiler().range_disable, &mut p)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_levels_and_description() {
        let s = DeviceSupport {
            is_supported: SupportLevel::from_raw(3),
            architecture: SupportLevel::from_raw(3),
            sli: SupportLevel::from_raw(1),
            v_gpu: SupportLevel::from_raw(2),
            confidential_compute: SupportLevel::from_raw(0),
            cmp: SupportLevel::from_raw(3),
            wsl: SupportLevel::from_raw(9),
        };
        assert_eq!(
            s.describe(),
            "isSupported=supported architecture=supported sli=unsupported vGpu=disabled \
             confidentialCompute=unknown cmp=supported wsl=?"
        );
    }

    #[test]
    fn errors_map_to_refusals() {
        let e = CountersError::Call {
            call: "cuptiRangeProfilerEnable",
            code: 35,
        };
        assert_eq!(e.refusal(), Refusal::Denied);
        assert!(
            e.to_string()
                .contains("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
            "{e}"
        );
        assert_eq!(refusal(26), Refusal::Busy);
        assert_eq!(refusal(27), Refusal::Unsupported);
        assert_eq!(refusal(15), Refusal::NotInitialized);
        assert_eq!(refusal(1), Refusal::Other);
        assert_eq!(CountersError::MissingSymbol("x").refusal(), Refusal::Other);
    }

    #[test]
    fn the_call_log_keeps_the_last_calls_and_counts_the_rest() {
        let call = |code| Call {
            call: "cuptiRangeProfilerDecodeData",
            code,
        };
        let mut log = CallLog::new(3);
        for code in 0..10 {
            log.push(call(code));
        }
        assert_eq!(log.calls.len(), 3);
        assert_eq!(log.dropped, 7);
        assert_eq!(log.take(), vec![call(7), call(8), call(9)]);
        // Taking empties it; what was dropped stays counted.
        assert!(log.calls.is_empty());
        log.push(call(10));
        assert_eq!((log.calls.len(), log.dropped), (1, 7));
        // A million calls without a take hold the log at its length.
        let mut long = CallLog::new(CALL_LOG_LEN);
        for code in 0..1_000_000 {
            long.push(call(code));
        }
        assert_eq!(long.calls.len(), CALL_LOG_LEN);
        assert_eq!(long.dropped, 1_000_000 - CALL_LOG_LEN as u64);
        assert_eq!(long.calls.back(), Some(&call(999_999)));
        // A log of length 0 keeps none and counts each.
        let mut none = CallLog::new(0);
        none.push(call(1));
        assert_eq!((none.calls.len(), none.dropped), (0, 1));
    }

    #[test]
    fn names_with_nul_are_refused_before_cupti_sees_them() {
        let e = cstrings("metric name", &["sm__ctas_launched.sum", "a\0b"]).unwrap_err();
        assert!(matches!(e, CountersError::Nul { .. }), "{e}");
    }
}
