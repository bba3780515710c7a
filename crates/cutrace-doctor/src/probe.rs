//! `--probe`: ask CUPTI itself. On each GPU, start and end a Range Profiler session and record
//! CUPTI's result for every call, beside the static verdict.
//!
//! libcuda and libcupti are opened here with dlopen (libloading); a missing library or symbol is
//! a finding in the report, never a panic. The session runs in a forked child process, so a
//! crash or hang inside the driver or CUPTI is reported as such instead of taking the doctor
//! down. Struct layouts follow the CUPTI headers (cupti_range_profiler.h, cupti_profiler_host.h,
//! cupti_profiler_target.h, cupti_target.h); every params struct carries its own size, which
//! CUPTI uses for compatibility across versions.

use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::Duration;

/// The one metric the probe configures; any Range Profiling-capable GPU has it.
pub const PROBE_METRIC: &str = "sm__ctas_launched.sum";
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A session started and stopped: counters are available to this process.
    Available,
    /// CUPTI_ERROR_INSUFFICIENT_PRIVILEGES.
    Denied,
    /// CUPTI_ERROR_HARDWARE_BUSY: another client holds the counters.
    Busy,
    /// The device or configuration does not support profiling.
    Unsupported,
    /// Something else failed; see the steps.
    Inconclusive,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    pub call: String,
    pub code: i32,
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceProbe {
    pub ordinal: i32,
    pub name: String,
    pub chip: Option<String>,
    pub verdict: Verdict,
    pub explanation: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeReport {
    pub libcuda: Option<String>,
    pub libcupti: Option<String>,
    /// Why the probe could not run at all (no libcuda, no libcupti, cuInit failed, crashed...).
    pub error: Option<String>,
    /// cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
    pub driver_cuda_version: Option<i32>,
    /// cuptiGetVersion, e.g. 130001.
    pub cupti_api_version: Option<u32>,
    pub steps: Vec<Step>,
    pub devices: Vec<DeviceProbe>,
    /// cuInit failed for a reason other than a missing or stub library.
    #[serde(default)]
    pub cuda_unusable: bool,
}

impl ProbeReport {
    fn failed(error: impl Into<String>) -> Self {
        ProbeReport {
            error: Some(error.into()),
            ..Default::default()
        }
    }

    /// Some(verdict) when the probe measured something on every device.
    pub fn counters_available(&self) -> Option<bool> {
        if self.devices.is_empty() {
            return None;
        }
        if self.devices.iter().any(|d| {
            matches!(
                d.verdict,
                Verdict::Denied | Verdict::Busy | Verdict::Unsupported
            )
        }) {
            return Some(false);
        }
        if self.devices.iter().all(|d| d.verdict == Verdict::Available) {
            return Some(true);
        }
        None
    }

    pub fn tracing_available(&self) -> Option<bool> {
        self.cuda_unusable.then_some(false)
    }

    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from("probe (live, CUPTI Range Profiler):\n");
        let _ = writeln!(
            out,
            "  libcuda: {}; libcupti: {}",
            self.libcuda.as_deref().unwrap_or("(not loaded)"),
            self.libcupti.as_deref().unwrap_or("(not loaded)")
        );
        if let Some(v) = self.driver_cuda_version {
            let _ = write!(
                out,
                "  driver CUDA version {}.{}",
                v / 1000,
                (v % 1000) / 10
            );
            match self.cupti_api_version {
                Some(c) => {
                    let _ = writeln!(out, "; cuptiGetVersion {c}");
                }
                None => out.push('\n'),
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "  could not probe: {e}");
        }
        for s in &self.steps {
            if s.code != 0 {
                let _ = writeln!(out, "  {} -> {}", s.call, s.result);
            }
        }
        for d in &self.devices {
            let _ = writeln!(
                out,
                "  GPU {} ({}{}): {:?} -- {}",
                d.ordinal,
                d.name,
                d.chip
                    .as_deref()
                    .map(|c| format!(", {c}"))
                    .unwrap_or_default(),
                d.verdict,
                d.explanation
            );
            for s in &d.steps {
                let _ = writeln!(
                    out,
                    "      {:<44} {}{}",
                    s.call,
                    s.result,
                    s.detail
                        .as_deref()
                        .map(|x| format!(" ({x})"))
                        .unwrap_or_default()
                );
            }
        }
        out
    }
}

/// Run the probe in a forked child and collect its report (bounded by a timeout).
///
/// The probe always runs on this machine; with a `--root` other than `/` only the libcupti it
/// tries first comes from that root.
pub fn run(root: &crate::Root) -> ProbeReport {
    let cupti_hint = {
        let ctx = crate::checks::Ctx::read(root);
        crate::checks::find_cupti(&ctx)
            .0
            .map(|c| root.path(&c.path).display().to_string())
    };
    run_forked(cupti_hint)
}

fn run_forked(cupti_hint: Option<String>) -> ProbeReport {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return ProbeReport::failed(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    let [r, w] = fds;
    // SAFETY: the doctor is single-threaded when it probes; the child runs ordinary code and
    // leaves with _exit, never returning into the parent's state.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return ProbeReport::failed(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        unsafe { libc::close(r) };
        let report = probe_in_process(cupti_hint.as_deref());
        let json = serde_json::to_vec(&report).unwrap_or_default();
        let mut off = 0;
        while off < json.len() {
            // SAFETY: writing our own buffer to our pipe.
            let n = unsafe { libc::write(w, json[off..].as_ptr().cast(), json.len() - off) };
            if n <= 0 {
                break;
            }
            off += n as usize;
        }
        unsafe { libc::_exit(0) };
    }
    unsafe { libc::close(w) };
    // SAFETY: r is our read end, owned from here on.
    let mut file = unsafe { std::fs::File::from_raw_fd(r) };
    let deadline = std::time::Instant::now() + PROBE_TIMEOUT;
    let mut buf = Vec::new();
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            timed_out = true;
            break;
        }
        let mut pfd = libc::pollfd {
            fd: r,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(60_000) as c_int) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n == 0 {
            continue;
        }
        let mut chunk = [0u8; 65536];
        match file.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    if timed_out {
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if timed_out {
        return ProbeReport::failed(format!(
            "the probe did not finish within {} s (a hang in the driver or CUPTI); killed",
            PROBE_TIMEOUT.as_secs()
        ));
    }
    if libc::WIFSIGNALED(status) {
        let mut rep = serde_json::from_slice::<ProbeReport>(&buf).unwrap_or_default();
        rep.error = Some(format!(
            "the probe process crashed (signal {}) inside the driver or CUPTI",
            libc::WTERMSIG(status)
        ));
        return rep;
    }
    serde_json::from_slice(&buf).unwrap_or_else(|e| {
        ProbeReport::failed(format!("the probe process returned no report ({e})"))
    })
}

// ---- FFI types (cuda.h, cupti_*.h) ----

type CUresult = c_int;
type CUdevice = c_int;
type CUcontext = *mut c_void;
type CUptiResult = c_int;

const CUPTI_SUCCESS: CUptiResult = 0;
const CUPTI_ERROR_NOT_INITIALIZED: CUptiResult = 15;
const CUPTI_ERROR_NOT_SUPPORTED: CUptiResult = 27;
const CUPTI_ERROR_HARDWARE_BUSY: CUptiResult = 26;
const CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: CUptiResult = 35;
const CUDA_ERROR_STUB_LIBRARY: CUresult = 34;

#[repr(C)]
struct PlainParams {
    struct_size: usize,
    p_priv: *mut c_void,
}

#[repr(C)]
struct DeviceSupportedParams {
    struct_size: usize,
    p_priv: *mut c_void,
    cu_device: CUdevice,
    is_supported: c_int,
    architecture: c_int,
    sli: c_int,
    v_gpu: c_int,
    confidential_compute: c_int,
    cmp: c_int,
    wsl: c_int,
    api: c_int,
}

#[repr(C)]
struct CounterAvailabilityParams {
    struct_size: usize,
    p_priv: *mut c_void,
    ctx: CUcontext,
    image_size: usize,
    image: *mut u8,
}

#[repr(C)]
struct ChipNameParams {
    struct_size: usize,
    p_priv: *mut c_void,
    device_index: usize,
    chip_name: *const c_char,
}

#[repr(C)]
struct HostInitializeParams {
    struct_size: usize,
    p_priv: *mut c_void,
    profiler_type: c_int,
    chip_name: *const c_char,
    counter_availability: *const u8,
    host_object: *mut c_void,
}

#[repr(C)]
struct HostObjectParams {
    struct_size: usize,
    p_priv: *mut c_void,
    host_object: *mut c_void,
}

#[repr(C)]
struct HostAddMetricsParams {
    struct_size: usize,
    p_priv: *mut c_void,
    host_object: *mut c_void,
    metric_names: *const *const c_char,
    num_metrics: usize,
}

#[repr(C)]
struct HostConfigImageParams {
    struct_size: usize,
    p_priv: *mut c_void,
    host_object: *mut c_void,
    size: usize,
    image: *mut u8,
}

#[repr(C)]
struct EnableParams {
    struct_size: usize,
    p_priv: *mut c_void,
    ctx: CUcontext,
    object: *mut c_void,
}

#[repr(C)]
struct ObjectParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
}

#[repr(C)]
struct PushRangeParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
    name: *const c_char,
}

#[repr(C)]
struct StopParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
    pass_index: usize,
    target_nesting_level: usize,
    is_all_pass_submitted: u8,
}

#[repr(C)]
struct CounterDataSizeParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
    metric_names: *const *const c_char,
    num_metrics: usize,
    max_ranges: usize,
    max_range_tree_nodes: u32,
    counter_data_size: usize,
}

#[repr(C)]
struct CounterDataInitParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
    size: usize,
    data: *mut u8,
}

#[repr(C)]
struct SetConfigParams {
    struct_size: usize,
    p_priv: *mut c_void,
    object: *mut c_void,
    config_size: usize,
    config: *const u8,
    counter_data_size: usize,
    counter_data: *mut u8,
    range: c_int,
    replay_mode: c_int,
    max_ranges_per_pass: usize,
    num_nesting_levels: u16,
    min_nesting_level: u16,
    pass_index: usize,
    target_nesting_level: u16,
}

/// CUPTI_PROFILER_STRUCT_SIZE: offset of the last field plus its size.
macro_rules! struct_size {
    ($t:ty, $last:ident) => {
        std::mem::offset_of!($t, $last) + {
            fn size_of_field<T>(_: *const T) -> usize {
                std::mem::size_of::<T>()
            }
            let u = std::mem::MaybeUninit::<$t>::uninit();
            // SAFETY: only the address of the field is taken, never read.
            size_of_field(unsafe { std::ptr::addr_of!((*u.as_ptr()).$last) })
        }
    };
}

// CUpti_ProfilerType, CUpti_ProfilerRange, CUpti_ProfilerReplayMode, CUpti_Profiler_API values.
const PROFILER_TYPE_RANGE: c_int = 0;
const USER_RANGE: c_int = 2;
const USER_REPLAY: c_int = 3;
const API_RANGE_PROFILING: c_int = 0;
const SUPPORT_LEVELS: [&str; 4] = ["unknown", "unsupported", "disabled", "supported"];

struct Cuda {
    _lib: libloading::Library,
    init: unsafe extern "C" fn(u32) -> CUresult,
    driver_version: unsafe extern "C" fn(*mut c_int) -> CUresult,
    device_count: unsafe extern "C" fn(*mut c_int) -> CUresult,
    device_get: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult,
    device_name: unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult,
    primary_retain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    primary_release: unsafe extern "C" fn(CUdevice) -> CUresult,
    ctx_push: unsafe extern "C" fn(CUcontext) -> CUresult,
    ctx_pop: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    error_name: Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
}

type ParamFn<T> = unsafe extern "C" fn(*mut T) -> CUptiResult;

struct Cupti {
    _lib: libloading::Library,
    get_version: unsafe extern "C" fn(*mut u32) -> CUptiResult,
    result_string: Option<unsafe extern "C" fn(CUptiResult, *mut *const c_char) -> CUptiResult>,
    profiler_initialize: ParamFn<PlainParams>,
    profiler_deinitialize: ParamFn<PlainParams>,
    device_supported: Option<ParamFn<DeviceSupportedParams>>,
    counter_availability: ParamFn<CounterAvailabilityParams>,
    chip_name: ParamFn<ChipNameParams>,
    host_initialize: ParamFn<HostInitializeParams>,
    host_deinitialize: ParamFn<HostObjectParams>,
    host_add_metrics: ParamFn<HostAddMetricsParams>,
    host_config_size: ParamFn<HostConfigImageParams>,
    host_config_image: ParamFn<HostConfigImageParams>,
    enable: ParamFn<EnableParams>,
    disable: ParamFn<ObjectParams>,
    counter_data_size: ParamFn<CounterDataSizeParams>,
    counter_data_init: ParamFn<CounterDataInitParams>,
    set_config: ParamFn<SetConfigParams>,
    start: ParamFn<ObjectParams>,
    stop: ParamFn<StopParams>,
    push_range: ParamFn<PushRangeParams>,
    pop_range: ParamFn<ObjectParams>,
}

fn open_first(names: &[String]) -> Result<(libloading::Library, String), String> {
    let mut errors = Vec::new();
    for n in names {
        // SAFETY: loading NVIDIA's libraries runs their initializers, which is what any CUDA
        // program does; no Rust invariants depend on them.
        match unsafe { libloading::Library::new(n) } {
            Ok(l) => return Ok((l, n.clone())),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(errors.join("; "))
}

macro_rules! sym {
    ($lib:expr, $name:literal) => {
        // SAFETY: the signature is the one declared in NVIDIA's header for this name.
        match unsafe { $lib.get($name.as_bytes()) } {
            Ok(s) => *s,
            Err(e) => return Err(format!("symbol {} missing: {e}", $name)),
        }
    };
}

macro_rules! opt_sym {
    ($lib:expr, $name:literal) => {
        // SAFETY: as above; absent on older releases.
        unsafe { $lib.get($name.as_bytes()) }.ok().map(|s| *s)
    };
}

impl Cuda {
    fn load() -> Result<(Cuda, String), String> {
        let (lib, name) = open_first(&["libcuda.so.1".into(), "libcuda.so".into()])
            .map_err(|e| format!("libcuda not found: {e}"))?;
        let c = Cuda {
            init: sym!(lib, "cuInit"),
            driver_version: sym!(lib, "cuDriverGetVersion"),
            device_count: sym!(lib, "cuDeviceGetCount"),
            device_get: sym!(lib, "cuDeviceGet"),
            device_name: sym!(lib, "cuDeviceGetName"),
            primary_retain: sym!(lib, "cuDevicePrimaryCtxRetain"),
            primary_release: sym!(lib, "cuDevicePrimaryCtxRelease_v2"),
            ctx_push: sym!(lib, "cuCtxPushCurrent_v2"),
            ctx_pop: sym!(lib, "cuCtxPopCurrent_v2"),
            error_name: opt_sym!(lib, "cuGetErrorName"),
            _lib: lib,
        };
        Ok((c, name))
    }

    fn name_of(&self, r: CUresult) -> String {
        let mut p: *const c_char = std::ptr::null();
        if let Some(f) = self.error_name {
            // SAFETY: cuGetErrorName writes a pointer to a static string.
            if unsafe { f(r, &mut p) } == 0 && !p.is_null() {
                return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
            }
        }
        format!("CUresult {r}")
    }
}

impl Cupti {
    fn load(hint: Option<&str>) -> Result<(Cupti, String), String> {
        let mut names: Vec<String> = hint.map(|h| vec![h.to_string()]).unwrap_or_default();
        names.extend(
            ["libcupti.so.13", "libcupti.so.12", "libcupti.so"]
                .iter()
                .map(|s| s.to_string()),
        );
        let (lib, name) = open_first(&names).map_err(|e| format!("libcupti not found: {e}"))?;
        let c = Cupti {
            get_version: sym!(lib, "cuptiGetVersion"),
            result_string: opt_sym!(lib, "cuptiGetResultString"),
            profiler_initialize: sym!(lib, "cuptiProfilerInitialize"),
            profiler_deinitialize: sym!(lib, "cuptiProfilerDeInitialize"),
            device_supported: opt_sym!(lib, "cuptiProfilerDeviceSupported"),
            counter_availability: sym!(lib, "cuptiProfilerGetCounterAvailability"),
            chip_name: sym!(lib, "cuptiDeviceGetChipName"),
            host_initialize: sym!(lib, "cuptiProfilerHostInitialize"),
            host_deinitialize: sym!(lib, "cuptiProfilerHostDeinitialize"),
            host_add_metrics: sym!(lib, "cuptiProfilerHostConfigAddMetrics"),
            host_config_size: sym!(lib, "cuptiProfilerHostGetConfigImageSize"),
            host_config_image: sym!(lib, "cuptiProfilerHostGetConfigImage"),
            enable: sym!(lib, "cuptiRangeProfilerEnable"),
            disable: sym!(lib, "cuptiRangeProfilerDisable"),
            counter_data_size: sym!(lib, "cuptiRangeProfilerGetCounterDataSize"),
            counter_data_init: sym!(lib, "cuptiRangeProfilerCounterDataImageInitialize"),
            set_config: sym!(lib, "cuptiRangeProfilerSetConfig"),
            start: sym!(lib, "cuptiRangeProfilerStart"),
            stop: sym!(lib, "cuptiRangeProfilerStop"),
            push_range: sym!(lib, "cuptiRangeProfilerPushRange"),
            pop_range: sym!(lib, "cuptiRangeProfilerPopRange"),
            _lib: lib,
        };
        Ok((c, name))
    }

    fn name_of(&self, r: CUptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        if let Some(f) = self.result_string {
            // SAFETY: cuptiGetResultString writes a pointer to a static string.
            if unsafe { f(r, &mut p) } == 0 && !p.is_null() {
                return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
            }
        }
        format!("CUptiResult {r}")
    }
}

/// Steps of one device's session; stops at the first failure.
struct Session<'a> {
    cupti: &'a Cupti,
    steps: Vec<Step>,
}

impl Session<'_> {
    fn call(&mut self, call: &str, r: CUptiResult) -> Result<(), CUptiResult> {
        self.steps.push(Step {
            call: call.into(),
            code: r,
            result: self.cupti.name_of(r),
            detail: None,
        });
        if r == CUPTI_SUCCESS {
            Ok(())
        } else {
            Err(r)
        }
    }

    fn note(&mut self, detail: String) {
        if let Some(s) = self.steps.last_mut() {
            s.detail = Some(detail);
        }
    }
}

fn params<T>(size: usize) -> T {
    // SAFETY: every params struct here is plain data (integers and raw pointers), for which
    // all-zero is the documented initial state ("assign to NULL"); struct_size is set below.
    let mut p: T = unsafe { std::mem::zeroed() };
    // SAFETY: each struct starts with `size_t structSize`.
    unsafe { *(&mut p as *mut T as *mut usize) = size };
    p
}

/// One device: retain its primary context, then start and stop a one-range session.
fn probe_device(cuda: &Cuda, cupti: &Cupti, ordinal: c_int) -> DeviceProbe {
    let mut dev: CUdevice = 0;
    let mut name_buf = [0 as c_char; 256];
    // SAFETY: FFI with out-pointers we own.
    let name = unsafe {
        if (cuda.device_get)(&mut dev, ordinal) == 0
            && (cuda.device_name)(name_buf.as_mut_ptr(), 255, dev) == 0
        {
            CStr::from_ptr(name_buf.as_ptr())
                .to_string_lossy()
                .into_owned()
        } else {
            "(unknown)".into()
        }
    };
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: as above.
    let r = unsafe { (cuda.primary_retain)(&mut ctx, dev) };
    if r != 0 {
        return DeviceProbe {
            ordinal,
            name,
            chip: None,
            verdict: Verdict::Inconclusive,
            explanation: format!("could not create a CUDA context: {}", cuda.name_of(r)),
            steps: vec![Step {
                call: "cuDevicePrimaryCtxRetain".into(),
                code: r,
                result: cuda.name_of(r),
                detail: None,
            }],
        };
    }
    // SAFETY: making the retained context current on this thread.
    unsafe { (cuda.ctx_push)(ctx) };
    let mut s = Session {
        cupti,
        steps: Vec::new(),
    };
    let mut chip = None;
    let outcome = session(&mut s, ctx, dev, ordinal, &mut chip);
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: undoing the push and the retain above.
    unsafe {
        (cuda.ctx_pop)(&mut popped);
        (cuda.primary_release)(dev);
    }
    let (verdict, explanation) = judge(outcome, &s.steps);
    DeviceProbe {
        ordinal,
        name,
        chip,
        verdict,
        explanation,
        steps: s.steps,
    }
}

fn judge(outcome: Result<(), CUptiResult>, steps: &[Step]) -> (Verdict, String) {
    let failed_call = steps.last().map(|s| s.call.as_str()).unwrap_or("");
    match outcome {
        Ok(()) => (Verdict::Available, "a Range Profiler session started and stopped: counters are available".into()),
        Err(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) => (
            Verdict::Denied,
            format!("{failed_call}: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES -- counters are restricted to admins here (see counter-access)"),
        ),
        Err(CUPTI_ERROR_HARDWARE_BUSY) => (
            Verdict::Busy,
            format!("{failed_call}: CUPTI_ERROR_HARDWARE_BUSY -- another client holds the counters (see counter-holders; `cutrace dcgm pause --for 30m` if it is DCGM)"),
        ),
        Err(CUPTI_ERROR_NOT_SUPPORTED) if failed_call == "cuptiProfilerDeviceSupported" => {
            (Verdict::Unsupported, "this device or configuration does not support profiling".into())
        }
        Err(CUPTI_ERROR_NOT_INITIALIZED) => (
            Verdict::Inconclusive,
            format!("{failed_call}: CUPTI_ERROR_NOT_INITIALIZED -- usually a CUPTI newer than the driver (see cupti-library)"),
        ),
        Err(_) => {
            let result = steps.last().map(|s| s.result.as_str()).unwrap_or("?");
            (Verdict::Inconclusive, format!("{failed_call} failed ({result}); the static verdict stands"))
        }
    }
}

fn session(
    s: &mut Session,
    ctx: CUcontext,
    dev: CUdevice,
    ordinal: c_int,
    chip: &mut Option<String>,
) -> Result<(), CUptiResult> {
    let c = s.cupti;
    if let Some(f) = c.device_supported {
        let mut p: DeviceSupportedParams = params(struct_size!(DeviceSupportedParams, api));
        p.cu_device = dev;
        p.api = API_RANGE_PROFILING;
        // SAFETY: params sized and filled as the header declares.
        let r = unsafe { f(&mut p) };
        s.call("cuptiProfilerDeviceSupported", r)?;
        let lvl = |v: c_int| SUPPORT_LEVELS.get(v as usize).copied().unwrap_or("?");
        s.note(format!(
            "isSupported={} architecture={} sli={} vGpu={} confidentialCompute={} cmp={} wsl={}",
            lvl(p.is_supported),
            lvl(p.architecture),
            lvl(p.sli),
            lvl(p.v_gpu),
            lvl(p.confidential_compute),
            lvl(p.cmp),
            lvl(p.wsl)
        ));
        if p.is_supported != 3 {
            return Err(CUPTI_ERROR_NOT_SUPPORTED);
        }
    }
    // Counter availability: size, then the image.
    let mut p: CounterAvailabilityParams = params(struct_size!(CounterAvailabilityParams, image));
    p.ctx = ctx;
    // SAFETY: as above.
    s.call("cuptiProfilerGetCounterAvailability (size)", unsafe {
        (c.counter_availability)(&mut p)
    })?;
    let mut avail = vec![0u8; p.image_size];
    p.image = avail.as_mut_ptr();
    s.call("cuptiProfilerGetCounterAvailability", unsafe {
        (c.counter_availability)(&mut p)
    })?;

    let mut cp: ChipNameParams = params(struct_size!(ChipNameParams, chip_name));
    cp.device_index = ordinal as usize;
    s.call("cuptiDeviceGetChipName", unsafe { (c.chip_name)(&mut cp) })?;
    if !cp.chip_name.is_null() {
        // SAFETY: CUPTI returns a NUL-terminated static string.
        *chip = Some(
            unsafe { CStr::from_ptr(cp.chip_name) }
                .to_string_lossy()
                .into_owned(),
        );
    }

    // Host side: a config image for one metric.
    let metric = CString::new(PROBE_METRIC).expect("no NUL");
    let names = [metric.as_ptr()];
    let mut hi: HostInitializeParams = params(struct_size!(HostInitializeParams, host_object));
    hi.profiler_type = PROFILER_TYPE_RANGE;
    hi.chip_name = cp.chip_name;
    hi.counter_availability = avail.as_ptr();
    s.call("cuptiProfilerHostInitialize", unsafe {
        (c.host_initialize)(&mut hi)
    })?;
    let host = hi.host_object;
    let config: Result<Vec<u8>, CUptiResult> = (|| {
        let mut am: HostAddMetricsParams = params(struct_size!(HostAddMetricsParams, num_metrics));
        am.host_object = host;
        am.metric_names = names.as_ptr();
        am.num_metrics = 1;
        s.call("cuptiProfilerHostConfigAddMetrics", unsafe {
            (c.host_add_metrics)(&mut am)
        })?;
        let mut cs: HostConfigImageParams = params(struct_size!(HostConfigImageParams, size));
        cs.host_object = host;
        s.call("cuptiProfilerHostGetConfigImageSize", unsafe {
            (c.host_config_size)(&mut cs)
        })?;
        let mut image = vec![0u8; cs.size];
        let mut ci: HostConfigImageParams = params(struct_size!(HostConfigImageParams, image));
        ci.host_object = host;
        ci.size = image.len();
        ci.image = image.as_mut_ptr();
        s.call("cuptiProfilerHostGetConfigImage", unsafe {
            (c.host_config_image)(&mut ci)
        })?;
        Ok(image)
    })();
    let mut hd: HostObjectParams = params(struct_size!(HostObjectParams, host_object));
    hd.host_object = host;
    // SAFETY: releasing the host object created above.
    unsafe { (c.host_deinitialize)(&mut hd) };
    let config = config?;

    // Target side: enable, configure, one user range, disable.
    let mut en: EnableParams = params(struct_size!(EnableParams, object));
    en.ctx = ctx;
    s.call("cuptiRangeProfilerEnable", unsafe { (c.enable)(&mut en) })?;
    let obj = en.object;
    let body: Result<(), CUptiResult> = (|| {
        let mut ds: CounterDataSizeParams =
            params(struct_size!(CounterDataSizeParams, counter_data_size));
        ds.object = obj;
        ds.metric_names = names.as_ptr();
        ds.num_metrics = 1;
        ds.max_ranges = 1;
        ds.max_range_tree_nodes = 1;
        s.call("cuptiRangeProfilerGetCounterDataSize", unsafe {
            (c.counter_data_size)(&mut ds)
        })?;
        let mut data = vec![0u8; ds.counter_data_size];
        let mut di: CounterDataInitParams = params(struct_size!(CounterDataInitParams, data));
        di.object = obj;
        di.size = data.len();
        di.data = data.as_mut_ptr();
        s.call("cuptiRangeProfilerCounterDataImageInitialize", unsafe {
            (c.counter_data_init)(&mut di)
        })?;
        let mut sc: SetConfigParams = params(struct_size!(SetConfigParams, target_nesting_level));
        sc.object = obj;
        sc.config_size = config.len();
        sc.config = config.as_ptr();
        sc.counter_data_size = data.len();
        sc.counter_data = data.as_mut_ptr();
        sc.range = USER_RANGE;
        sc.replay_mode = USER_REPLAY;
        sc.max_ranges_per_pass = 1;
        sc.num_nesting_levels = 1;
        sc.min_nesting_level = 1;
        sc.pass_index = 0;
        sc.target_nesting_level = 1;
        s.call("cuptiRangeProfilerSetConfig", unsafe {
            (c.set_config)(&mut sc)
        })?;
        let mut st: ObjectParams = params(struct_size!(ObjectParams, object));
        st.object = obj;
        s.call("cuptiRangeProfilerStart", unsafe { (c.start)(&mut st) })?;
        let range = CString::new("cutrace-doctor-probe").expect("no NUL");
        let mut pr: PushRangeParams = params(struct_size!(PushRangeParams, name));
        pr.object = obj;
        pr.name = range.as_ptr();
        let pushed = s.call("cuptiRangeProfilerPushRange", unsafe {
            (c.push_range)(&mut pr)
        });
        if pushed.is_ok() {
            let mut pp: ObjectParams = params(struct_size!(ObjectParams, object));
            pp.object = obj;
            let _ = s.call("cuptiRangeProfilerPopRange", unsafe {
                (c.pop_range)(&mut pp)
            });
        }
        let mut sp: StopParams = params(struct_size!(StopParams, is_all_pass_submitted));
        sp.object = obj;
        let stopped = s.call("cuptiRangeProfilerStop", unsafe { (c.stop)(&mut sp) });
        // `data` must outlive the session: CUPTI writes into it until Stop.
        drop(data);
        pushed.and(stopped)
    })();
    let mut dp: ObjectParams = params(struct_size!(ObjectParams, object));
    dp.object = obj;
    let disabled = s.call("cuptiRangeProfilerDisable", unsafe { (c.disable)(&mut dp) });
    body.and(disabled)
}

/// The probe itself, in this process. Prefer `run`, which isolates it in a child.
pub fn probe_in_process(cupti_hint: Option<&str>) -> ProbeReport {
    let mut rep = ProbeReport::default();
    let (cuda, cuda_name) = match Cuda::load() {
        Ok(x) => x,
        Err(e) => {
            return ProbeReport {
                error: Some(e),
                ..rep
            }
        }
    };
    rep.libcuda = Some(cuda_name);
    // SAFETY: plain driver calls with out-pointers we own.
    let r = unsafe { (cuda.init)(0) };
    rep.steps.push(Step {
        call: "cuInit".into(),
        code: r,
        result: cuda.name_of(r),
        detail: None,
    });
    if r != 0 {
        rep.cuda_unusable = r != CUDA_ERROR_STUB_LIBRARY;
        rep.error = Some(format!("cuInit failed: {}", cuda.name_of(r)));
        return rep;
    }
    let mut v = 0;
    if unsafe { (cuda.driver_version)(&mut v) } == 0 {
        rep.driver_cuda_version = Some(v);
    }
    let (cupti, cupti_name) = match Cupti::load(cupti_hint) {
        Ok(x) => x,
        Err(e) => {
            return ProbeReport {
                error: Some(e),
                ..rep
            }
        }
    };
    rep.libcupti = Some(cupti_name);
    let mut cv = 0u32;
    if unsafe { (cupti.get_version)(&mut cv) } == CUPTI_SUCCESS {
        rep.cupti_api_version = Some(cv);
    }
    let mut count = 0;
    let r = unsafe { (cuda.device_count)(&mut count) };
    if r != 0 || count == 0 {
        rep.error = Some(format!("no CUDA device ({})", cuda.name_of(r)));
        return rep;
    }
    let mut init: PlainParams = params(struct_size!(PlainParams, p_priv));
    let r = unsafe { (cupti.profiler_initialize)(&mut init) };
    rep.steps.push(Step {
        call: "cuptiProfilerInitialize".into(),
        code: r,
        result: cupti.name_of(r),
        detail: None,
    });
    if r != CUPTI_SUCCESS {
        rep.error = Some(format!(
            "cuptiProfilerInitialize failed: {}",
            cupti.name_of(r)
        ));
        // A refusal this early (privileges, a busy device) still answers the question per GPU.
        if matches!(
            r,
            CUPTI_ERROR_INSUFFICIENT_PRIVILEGES | CUPTI_ERROR_HARDWARE_BUSY
        ) {
            let steps = rep.steps[rep.steps.len() - 1..].to_vec();
            let (verdict, explanation) = judge(Err(r), &steps);
            for ordinal in 0..count {
                rep.devices.push(DeviceProbe {
                    ordinal,
                    name: "(not queried)".into(),
                    chip: None,
                    verdict,
                    explanation: explanation.clone(),
                    steps: steps.clone(),
                });
            }
        }
        return rep;
    }
    for ordinal in 0..count {
        rep.devices.push(probe_device(&cuda, &cupti, ordinal));
    }
    let mut de: PlainParams = params(struct_size!(PlainParams, p_priv));
    unsafe { (cupti.profiler_deinitialize)(&mut de) };
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes as CUPTI_PROFILER_STRUCT_SIZE computes them from the 12.8.90 wheel's headers on
    /// x86-64 (checked by compiling the headers with a C++ compiler and printing the macros).
    #[test]
    fn struct_sizes_match_the_headers() {
        assert_eq!(struct_size!(PlainParams, p_priv), 16);
        assert_eq!(struct_size!(EnableParams, object), 32);
        assert_eq!(struct_size!(ObjectParams, object), 24);
        assert_eq!(struct_size!(DeviceSupportedParams, api), 52);
        assert_eq!(struct_size!(StopParams, is_all_pass_submitted), 41);
        assert_eq!(struct_size!(SetConfigParams, target_nesting_level), 90);
        assert_eq!(struct_size!(CounterDataSizeParams, counter_data_size), 64);
        assert_eq!(struct_size!(HostInitializeParams, host_object), 48);
        assert_eq!(struct_size!(CounterAvailabilityParams, image), 40);
        assert_eq!(struct_size!(ChipNameParams, chip_name), 32);
        assert_eq!(struct_size!(HostAddMetricsParams, num_metrics), 40);
        assert_eq!(struct_size!(HostConfigImageParams, size), 32);
        assert_eq!(struct_size!(HostConfigImageParams, image), 40);
        assert_eq!(struct_size!(HostObjectParams, host_object), 24);
        assert_eq!(struct_size!(CounterDataInitParams, data), 40);
        assert_eq!(struct_size!(PushRangeParams, name), 32);
        assert_eq!(std::mem::offset_of!(SetConfigParams, pass_index), 80);
    }

    #[test]
    fn verdicts_follow_cupti_results() {
        let step = |call: &str, code| {
            vec![Step {
                call: call.into(),
                code,
                result: String::new(),
                detail: None,
            }]
        };
        assert_eq!(judge(Ok(()), &[]).0, Verdict::Available);
        assert_eq!(
            judge(Err(35), &step("cuptiRangeProfilerEnable", 35)).0,
            Verdict::Denied
        );
        assert_eq!(
            judge(Err(26), &step("cuptiRangeProfilerStart", 26)).0,
            Verdict::Busy
        );
        assert_eq!(
            judge(Err(1), &step("cuptiRangeProfilerSetConfig", 1)).0,
            Verdict::Inconclusive
        );
        let r = ProbeReport {
            devices: vec![DeviceProbe {
                ordinal: 0,
                name: "x".into(),
                chip: None,
                verdict: Verdict::Busy,
                explanation: String::new(),
                steps: vec![],
            }],
            ..Default::default()
        };
        assert_eq!(r.counters_available(), Some(false));
    }
}
