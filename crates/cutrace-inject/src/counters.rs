//! Per-kernel hardware counters for `cutrace profile`: a CUPTI Range Profiler session per
//! context, one auto range per kernel with kernel replay. The range starts at the launch
//! callback's API_ENTER and is stopped, decoded and evaluated at its API_EXIT, so each kernel's
//! values carry the correlation id of its launch, the id its activity record carries too.
//! Sessions are set up when a context is created (`CUPTI_CBID_RESOURCE_CONTEXT_CREATED`, the
//! pattern of NVIDIA's profiling_injection sample) and torn down when it is destroyed.
//!
//! Everything here runs on the application's threads, inside CUPTI callbacks: no file I/O (the
//! values go to the writer thread through a bounded queue), no panic out (the caller catches),
//! and a failure turns counters off with one message while tracing carries on, unless the user
//! asked for `--require-counters`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::ThreadId;

use cutrace_counters::{CountersError, Host, Profiler, ProfilerKind, RangeProfiler, SessionConfig};
use cutrace_cupti::api::{self, CallbackData, ResourceData, Subscription};
use cutrace_cupti::driver::Context;
use cutrace_cupti::{explain, result_name, Cupti};
use cutrace_settings::{var, Problem, Settings};
use cutrace_trace::CounterInfo;

/// Driver launch calls whose kernel gets a range (cupti_driver_cbid.h). Runtime launches
/// (`cudaLaunchKernel`, `<<<…>>>`) reach the driver through one of these.
pub const LAUNCH_CBIDS: [(u32, &str); 6] = [
    (307, "cuLaunchKernel"),
    (442, "cuLaunchKernel_ptsz"),
    (477, "cuLaunchCooperativeKernel"),
    (478, "cuLaunchCooperativeKernel_ptsz"),
    (652, "cuLaunchKernelEx"),
    (653, "cuLaunchKernelEx_ptsz"),
];

/// Graph launches: one call for many kernels, so no range can start and stop around each. Their
/// kernels are traced without counters; the launches are counted, and no range is open while
/// one is in flight (its kernels must not land in another kernel's range).
pub const GRAPH_LAUNCH_CBIDS: [(u32, &str); 2] =
    [(514, "cuGraphLaunch"), (515, "cuGraphLaunch_ptsz")];

/// Stream capture (cuStreamBeginCapture*, _v2, ToGraph, and _ptsz forms; cuStreamEndCapture*).
/// A launch into a capturing stream only records a graph node: its kernel runs later, inside a
/// graph launch. While any capture is open no range is started, because decoding a range
/// synchronizes the context, which would invalidate the capture.
pub const CAPTURE_BEGIN_CBIDS: [u32; 6] = [495, 496, 539, 540, 720, 721];
pub const CAPTURE_END_CBIDS: [u32; 2] = [497, 498];

/// Values waiting for the writer, at most; past it ranges are dropped and counted.
const MAX_PENDING_VALUES: usize = 1 << 20;

/// What `cutrace profile` asked for (`Settings::counters`).
#[derive(Debug, Clone)]
pub struct CounterConfig {
    pub metrics: Vec<String>,
    /// Only kernels whose (mangled) name matches.
    pub kernels: Option<regex_lite::Regex>,
    pub max_kernels: Option<u64>,
    pub every: u64,
    pub require: bool,
    /// The doctor's counter-access verdict and fix, found by `cutrace profile` before the
    /// program started, for an INSUFFICIENT_PRIVILEGES message.
    pub access_hint: Option<String>,
    /// The doctor's counter-holders verdict (who probably holds the counters), for
    /// HARDWARE_BUSY.
    pub holders_hint: Option<String>,
    /// Keep the decoded counter-data images of the first N profiled kernels and write them
    /// beside the trace part (`counterdata-PID-CORR.bin`), so CUPTI's host library can evaluate
    /// them again elsewhere (`Knobs::counters_keep_images`; for tests, 0 by default).
    pub keep_images: usize,
    /// Print where the profiled launches' time went, at exit (`Knobs::counters_timing`).
    pub timing: bool,
}

impl CounterConfig {
    /// `Ok(None)` when counters were not asked for; `Err` for settings that cannot be used
    /// (`cutrace profile` checks them first, so only a hand-set environment gets here).
    pub fn from_settings(
        s: &Settings,
        problems: &[Problem],
    ) -> Result<Option<CounterConfig>, String> {
        let Some(c) = &s.counters else {
            return Ok(None);
        };
        if let Some(p) = problems
            .iter()
            .find(|p| [var::COUNTERS_MAX_KERNELS, var::COUNTERS_EVERY].contains(&p.var))
        {
            return Err(p.to_string());
        }
        let kernels = match &c.kernels {
            Some(re) => Some(
                regex_lite::Regex::new(re)
                    .map_err(|e| format!("{} {re:?} is not a regex: {e}", var::COUNTERS_KERNELS))?,
            ),
            None => None,
        };
        let a = &s.counter_access;
        Ok(Some(CounterConfig {
            metrics: c.metrics.clone(),
            kernels,
            max_kernels: c.max_kernels,
            every: c.every.unwrap_or(1).max(1),
            require: a.require,
            access_hint: a.access_hint.clone(),
            holders_hint: a.holders_hint.clone(),
            keep_images: s.knobs.counters_keep_images.unwrap_or(0).min(64) as usize,
            timing: s.knobs.counters_timing,
        }))
    }
}

/// Which matching kernels get a range: every Nth, at most M.
#[derive(Debug, Default)]
pub struct Selector {
    matched: u64,
    taken: u64,
}

impl Selector {
    /// Whether the kernel called `name` gets a range; `None` when it does not match the name
    /// filter at all (not counted as skipped: it was never asked for).
    pub fn take(&mut self, c: &CounterConfig, name: &str) -> Option<bool> {
        if let Some(re) = &c.kernels {
            if !re.is_match(name) {
                return None;
            }
        }
        let n = self.matched;
        self.matched += 1;
        if !n.is_multiple_of(c.every) || c.max_kernels.is_some_and(|m| self.taken >= m) {
            return Some(false);
        }
        self.taken += 1;
        Some(true)
    }
}

/// One kernel's value of one metric (index into the metric list), for the writer.
#[derive(Debug, Clone, Copy)]
pub struct Value {
    pub correlation_id: u64,
    pub device: u32,
    pub metric: usize,
    pub value: f64,
}

/// A Range Profiler session on one context.
struct Session {
    ctx: usize,
    device: u32,
    host: Host<'static, 'static>,
    rp: RangeProfiler<'static, 'static>,
    /// The correlation id of the kernel whose range is open.
    open: Option<u32>,
}

struct State {
    profiler: &'static Profiler<'static>,
    initialized: bool,
    sessions: Vec<Session>,
    selector: Selector,
    /// Counters are off for the rest of the run (a failure that will not go away).
    off: bool,
}

// SAFETY: the CUPTI objects inside (host and Range Profiler handles, the profiler's call log)
// are used only while the `Counters::state` mutex is held, one thread at a time; CUPTI's
// profiler objects are not bound to the thread that made them.
unsafe impl Send for State {}

pub struct Counters {
    pub config: CounterConfig,
    cupti: &'static Cupti,
    state: Mutex<State>,
    /// The thread whose kernel's range is open, if any: launches on other threads wait, so no
    /// other kernel lands in that range.
    gate: Mutex<Option<ThreadId>>,
    gate_cv: Condvar,
    values: Mutex<Vec<Value>>,
    /// When the open range's launch call was let through (API_ENTER's end), for the timing.
    launched_at: Mutex<Option<std::time::Instant>>,
    /// Counter-data images kept (`keep_images`), by correlation id, for the writer.
    images: Mutex<Vec<(u64, Vec<u8>)>>,
    /// The counter facts, for the writer's META chunks.
    pub info: Versioned<CounterInfo>,
    /// One message on stderr per run.
    told: AtomicBool,
    /// Stream captures open now (begun and not yet ended).
    captures: std::sync::atomic::AtomicI64,
    /// Nanoseconds spent per step, summed over kernels ([`TIMED_STEPS`]), for
    /// `CUTRACE_COUNTERS_TIMING=1`.
    timing: [AtomicU64; 6],
}

/// The steps of a profiled launch whose time `CUTRACE_COUNTERS_TIMING=1` reports at exit.
pub const TIMED_STEPS: [&str; 6] = [
    "waiting for the gate",
    "cuptiRangeProfilerStart",
    "the launch call itself",
    "cuptiRangeProfilerStop",
    "cuptiRangeProfilerDecodeData",
    "evaluation and reset",
];

static COUNTERS: OnceLock<Counters> = OnceLock::new();

pub fn get() -> Option<&'static Counters> {
    COUNTERS.get()
}

/// Sets counters up for this process: callbacks for context creation and destruction, kernel
/// launches and graph launches on `sub` (cutrace's own subscriber). A failure here is returned
/// for the caller to report; tracing goes on.
pub fn start(
    cupti: &'static Cupti,
    sub: &Subscription,
    config: CounterConfig,
) -> Result<(), String> {
    let metrics = config.metrics.clone();
    let profiler: &'static Profiler<'static> = Box::leak(Box::new(Profiler::new(cupti)));
    let counters = Counters {
        config,
        cupti,
        state: Mutex::new(State {
            profiler,
            initialized: false,
            sessions: Vec::new(),
            selector: Selector::default(),
            off: false,
        }),
        gate: Mutex::new(None),
        gate_cv: Condvar::new(),
        values: Mutex::new(Vec::new()),
        launched_at: Mutex::new(None),
        images: Mutex::new(Vec::new()),
        info: Versioned::new(CounterInfo {
            metrics,
            ..CounterInfo::default()
        }),
        told: AtomicBool::new(false),
        captures: std::sync::atomic::AtomicI64::new(0),
        timing: Default::default(),
    };
    if COUNTERS.set(counters).is_err() {
        return Ok(());
    }
    let on = |domain, cbid| {
        cupti
            .enable_callback(sub, domain, cbid, true)
            .map_err(|e| format!("counters are off: {e}"))
    };
    on(api::CB_DOMAIN_RESOURCE, api::CBID_RESOURCE_CONTEXT_CREATED)?;
    on(
        api::CB_DOMAIN_RESOURCE,
        api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    )?;
    for (cbid, _) in LAUNCH_CBIDS.iter().chain(&GRAPH_LAUNCH_CBIDS) {
        on(api::CB_DOMAIN_DRIVER_API, *cbid)?;
    }
    for cbid in CAPTURE_BEGIN_CBIDS.iter().chain(&CAPTURE_END_CBIDS) {
        on(api::CB_DOMAIN_DRIVER_API, *cbid)?;
    }
    Ok(())
}

/// The CUPTI callback, for counters' domains (the caller catches panics).
///
/// # Safety
/// `data` must be what CUPTI passes for `domain` (a `CUpti_ResourceData` or a
/// `CUpti_CallbackData`), valid for the call.
pub unsafe fn on_callback(domain: u32, cbid: u32, data: *const std::ffi::c_void) {
    let Some(c) = get() else { return };
    if data.is_null() {
        return;
    }
    match domain {
        api::CB_DOMAIN_RESOURCE => {
            // SAFETY: CUPTI passes a CUpti_ResourceData for the resource domain.
            let ctx = unsafe { &*(data as *const ResourceData) }.context;
            if cbid == api::CBID_RESOURCE_CONTEXT_CREATED {
                c.context_created(ctx);
            } else if cbid == api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING {
                c.context_destroyed(ctx);
            }
        }
        api::CB_DOMAIN_DRIVER_API => {
            // SAFETY: CUPTI passes a CUpti_CallbackData for API domains.
            let d = unsafe { &*(data as *const CallbackData) };
            if GRAPH_LAUNCH_CBIDS.iter().any(|(id, _)| *id == cbid) {
                c.graph_launch(d.callback_site);
            } else if d.callback_site == api::API_EXIT && CAPTURE_BEGIN_CBIDS.contains(&cbid) {
                // Counted only when the capture began (the call returned CUDA_SUCCESS).
                let ret = d.function_return_value as *const i32;
                // SAFETY: at API_EXIT, CUPTI points functionReturnValue at the call's CUresult.
                if ret.is_null() || unsafe { *ret } == 0 {
                    c.captures.fetch_add(1, Ordering::SeqCst);
                }
            } else if d.callback_site == api::API_EXIT && CAPTURE_END_CBIDS.contains(&cbid) {
                let _ = c
                    .captures
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some((n - 1).max(0)));
            } else if LAUNCH_CBIDS.iter().any(|(id, _)| *id == cbid) {
                let name = if d.symbol_name.is_null() {
                    String::new()
                } else {
                    // SAFETY: CUPTI's NUL-terminated kernel name, valid for the callback.
                    unsafe { std::ffi::CStr::from_ptr(d.symbol_name) }
                        .to_string_lossy()
                        .into_owned()
                };
                if d.callback_site == api::API_ENTER {
                    c.launch_enter(d.context, d.correlation_id, &name);
                } else {
                    c.launch_exit(d.context, d.correlation_id);
                }
            }
        }
        _ => {}
    }
}

/// What a profiler failure means, with the fix; `hint` is the doctor's verdict when known.
pub fn failure_message(e: &CountersError, c: &CounterConfig) -> String {
    if let CountersError::MetricRefused { .. } = e {
        // Its own text names the metric and how to list the chip's metrics.
        return e.to_string();
    }
    let code = e.code();
    match code {
        Some(cutrace_cupti::error::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) => format!(
            "{} returned CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: this user may not read the GPU's \
             performance counters. {}",
            e.call().unwrap_or("CUPTI"),
            c.access_hint.clone().unwrap_or_else(|| {
                "Fix: see `cutrace doctor` (counter-access): NVreg_RestrictProfilingToAdminUsers=0, \
                 or run as an admin"
                    .into()
            })
        ),
        Some(cutrace_cupti::error::CUPTI_ERROR_HARDWARE_BUSY) => format!(
            "{} returned CUPTI_ERROR_HARDWARE_BUSY: another client holds the GPU's performance \
             counters. {} Fix: stop it for this run (DCGM: `cutrace dcgm run -- …` pauses its \
             profiling metrics and resumes them after), or wait for the other profiler",
            e.call().unwrap_or("CUPTI"),
            c.holders_hint.as_deref().map_or(
                "Likely holders: DCGM's profiling metrics (nv-hostengine, dcgm-exporter), Nsight \
                 Compute, another `cutrace profile` or `cutrace sample`; `cutrace doctor` \
                 (counter-holders) names the process."
                    .to_string(),
                |h| format!(
                    "Likely holders: DCGM's profiling metrics (nv-hostengine, dcgm-exporter), \
                     Nsight Compute, another `cutrace profile` or `cutrace sample`. {h}"
                )
            )
        ),
        Some(code) => {
            let (what, fix) = explain(code);
            format!(
                "{} returned {}: {what}. Fix: {fix}",
                e.call().unwrap_or("CUPTI"),
                result_name(code)
            )
        }
        None => e.to_string(),
    }
}

/// Facts the writer puts in a META chunk, with a version bumped on every change, so that it
/// writes a chunk only when they changed (the counters' and PM sampling's alike).
pub struct Versioned<T> {
    value: Mutex<T>,
    version: AtomicU64,
}

impl<T: Clone + Default> Versioned<T> {
    pub fn new(value: T) -> Self {
        Versioned {
            value: Mutex::new(value),
            version: AtomicU64::new(1),
        }
    }

    pub fn update(&self, f: impl FnOnce(&mut T)) {
        if let Ok(mut v) = self.value.lock() {
            f(&mut v);
            self.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// The facts so far (the writer's side).
    pub fn get(&self) -> T {
        self.value.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Counters {
    fn lock_state(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        self.state.lock().ok()
    }

    /// Counters stop for this run: says why once (and exits with `--require-counters`).
    fn fail(&self, st: &mut State, msg: String) {
        st.off = true;
        let shown = format!("counters are off: {msg}");
        self.info.update(|i| {
            i.error.get_or_insert(shown.clone());
        });
        say_off(&self.told, self.config.require, &shown);
    }

    fn context_created(&self, ctx: *mut std::ffi::c_void) {
        let Some(mut st) = self.lock_state() else {
            return;
        };
        if st.off {
            return;
        }
        match self.open_session(&mut st, ctx) {
            Ok(s) => st.sessions.push(s),
            Err(e) => {
                let msg = failure_message(&e, &self.config);
                self.fail(&mut st, msg);
            }
        }
        st.profiler.take_calls();
    }

    fn open_session(
        &self,
        st: &mut State,
        ctx: *mut std::ffi::c_void,
    ) -> Result<Session, CountersError> {
        let p = st.profiler;
        if !st.initialized {
            p.initialize()?;
            st.initialized = true;
        }
        // SAFETY: the context CUPTI just reported created.
        let device = unsafe { self.cupti.device_of(ctx) }?;
        let chip = p.chip_name(device as usize)?.unwrap_or_default();
        let context = Context::from_raw(ctx);
        let availability = p.counter_availability(context)?;
        let metrics: Vec<&str> = self.config.metrics.iter().map(String::as_str).collect();
        let host = p.host(ProfilerKind::RangeProfiler, &chip, Some(&availability))?;
        if let Err(e) = host.add_metrics(&metrics) {
            // Name the metric the chip refuses, as --list-metrics does.
            drop(host);
            return Err(
                cutrace_counters::plan(p, &chip, Some(&availability), &metrics)
                    .err()
                    .unwrap_or(e),
            );
        }
        let config = host.config_image()?;
        let passes = host.passes(&config)?;
        let mut rp = p.enable(context)?;
        let size = rp.counter_data_size(&metrics, 1, 1)?;
        rp.initialize_counter_data(size)?;
        rp.set_config(&config, &SessionConfig::per_kernel(1))?;
        self.info
            .update(|i| i.passes = Some(i.passes.unwrap_or(0).max(passes as u32)));
        Ok(Session {
            ctx: ctx as usize,
            device,
            host,
            rp,
            open: None,
        })
    }

    fn context_destroyed(&self, ctx: *mut std::ffi::c_void) {
        let Some(mut st) = self.lock_state() else {
            return;
        };
        // Dropping the session disables its Range Profiler before its images are freed.
        st.sessions.retain(|s| s.ctx != ctx as usize);
        st.profiler.take_calls();
    }

    fn graph_launch(&self, site: u32) {
        if site == api::API_ENTER {
            self.info.update(|i| i.graph_launches += 1);
            self.enter_gate();
        } else {
            self.leave_gate();
        }
    }

    /// Waits until no other thread has a range open, then holds the gate. `false` when this
    /// thread holds it already (a launch inside a launch callback: not profiled).
    fn enter_gate(&self) -> bool {
        let me = std::thread::current().id();
        let Ok(mut g) = self.gate.lock() else {
            return false;
        };
        if *g == Some(me) {
            return false;
        }
        while g.is_some() {
            g = match self.gate_cv.wait(g) {
                Ok(g) => g,
                Err(_) => return false,
            };
        }
        *g = Some(me);
        true
    }

    fn leave_gate(&self) {
        let me = std::thread::current().id();
        if let Ok(mut g) = self.gate.lock() {
            if *g == Some(me) {
                *g = None;
                self.gate_cv.notify_all();
            }
        }
    }

    fn launch_enter(&self, ctx: *mut std::ffi::c_void, corr: u32, name: &str) {
        if self.captures.load(Ordering::SeqCst) > 0 {
            self.info.update(|i| i.launches_captured += 1);
            return;
        }
        {
            let Some(mut st) = self.lock_state() else {
                return;
            };
            if st.off || !st.sessions.iter().any(|s| s.ctx == ctx as usize) {
                return;
            }
            match st.selector.take(&self.config, name) {
                None => return,
                Some(false) => {
                    drop(st);
                    self.info.update(|i| i.kernels_skipped += 1);
                    return;
                }
                Some(true) => {}
            }
        }
        let t0 = std::time::Instant::now();
        if !self.enter_gate() {
            return;
        }
        let Some(mut st) = self.lock_state() else {
            self.leave_gate();
            return;
        };
        let t1 = std::time::Instant::now();
        let r = match st.sessions.iter_mut().find(|s| s.ctx == ctx as usize) {
            Some(s) => s.rp.start().map(|()| s.open = Some(corr)),
            None => Ok(()),
        };
        let t2 = std::time::Instant::now();
        self.time(0, t1 - t0);
        self.time(1, t2 - t1);
        if let Ok(mut at) = self.launched_at.lock() {
            *at = Some(t2);
        }
        st.profiler.take_calls();
        if let Err(e) = r {
            let msg = failure_message(&e, &self.config);
            self.fail(&mut st, msg);
            drop(st);
            self.leave_gate();
        }
    }

    fn launch_exit(&self, ctx: *mut std::ffi::c_void, corr: u32) {
        let Some(mut st) = self.lock_state() else {
            return;
        };
        let Some(idx) = st
            .sessions
            .iter()
            .position(|s| s.ctx == ctx as usize && s.open == Some(corr))
        else {
            return;
        };
        let metrics: Vec<&str> = self.config.metrics.iter().map(String::as_str).collect();
        let p = st.profiler;
        let s = &mut st.sessions[idx];
        s.open = None;
        let device = s.device;
        let t_exit = std::time::Instant::now();
        if let Some(at) = self.launched_at.lock().ok().and_then(|mut a| a.take()) {
            self.time(2, t_exit - at);
        }
        let r = (|| -> Result<(Option<Vec<f64>>, usize), CountersError> {
            s.rp.stop()?;
            let t_stop = std::time::Instant::now();
            self.time(3, t_stop - t_exit);
            let dropped = s.rp.decode()?;
            let t_decode = std::time::Instant::now();
            self.time(4, t_decode - t_stop);
            let ranges = p.counter_data_ranges(s.rp.counter_data())?;
            let values = if ranges >= 1 {
                Some(s.host.evaluate(s.rp.counter_data(), 0, &metrics)?)
            } else {
                None
            };
            if values.is_some() && self.config.keep_images > 0 {
                if let Ok(mut kept) = self.images.lock() {
                    if kept.len() < self.config.keep_images {
                        kept.push((u64::from(corr), s.rp.counter_data().to_vec()));
                    }
                }
            }
            s.rp.reset_counter_data()?;
            self.time(5, t_decode.elapsed());
            Ok((values, dropped))
        })();
        st.profiler.take_calls();
        match r {
            Ok((Some(values), dropped)) => {
                let kept = self.push_values(corr, device, &values);
                self.info.update(|i| {
                    i.kernels_profiled += u64::from(kept);
                    i.ranges_dropped += dropped as u64 + u64::from(!kept);
                });
            }
            Ok((None, dropped)) => {
                self.info
                    .update(|i| i.ranges_dropped += dropped.max(1) as u64);
            }
            Err(e) => {
                let msg = failure_message(&e, &self.config);
                self.info.update(|i| i.ranges_dropped += 1);
                self.fail(&mut st, msg);
            }
        }
        drop(st);
        self.leave_gate();
    }

    fn time(&self, step: usize, d: std::time::Duration) {
        self.timing[step].fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// `CUTRACE_COUNTERS_TIMING=1`: the time each step of the profiled launches took, summed,
    /// as one line (the writer prints it at exit).
    pub fn timing_line(&self) -> String {
        let parts: Vec<String> = TIMED_STEPS
            .iter()
            .zip(&self.timing)
            .map(|(name, ns)| format!("{name} {:.1} ms", ns.load(Ordering::Relaxed) as f64 / 1e6))
            .collect();
        parts.join(", ")
    }

    /// Queues one kernel's values for the writer; `false` (nothing queued) when the queue is
    /// full.
    fn push_values(&self, corr: u32, device: u32, values: &[f64]) -> bool {
        let Ok(mut q) = self.values.lock() else {
            return false;
        };
        if q.len() + values.len() > MAX_PENDING_VALUES {
            return false;
        }
        q.extend(values.iter().enumerate().map(|(metric, &value)| Value {
            correlation_id: u64::from(corr),
            device,
            metric,
            value,
        }));
        true
    }

    /// The values queued so far (the writer's side).
    pub fn take_values(&self) -> Vec<Value> {
        self.values
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }

    /// The counter-data images kept so far (the writer's side).
    pub fn take_images(&self) -> Vec<(u64, Vec<u8>)> {
        self.images
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}

/// Says once (`told`) that a counter source is off and tracing carries on; with
/// `--require-counters` (`require`) stops the program with exit 125 instead. Shared by Range
/// Profiling and PM Sampling.
pub(crate) fn say_off(told: &AtomicBool, require: bool, shown: &str) {
    if !told.swap(true, Ordering::SeqCst) {
        eprintln!(
            "cutrace: pid {}: {shown}; tracing carries on",
            std::process::id()
        );
    }
    if require {
        eprintln!(
            "cutrace: pid {}: --require-counters: stopping the program (exit 125)",
            std::process::id()
        );
        // The at-exit handler finishes the trace, which records why.
        std::process::exit(125);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(env: &[(&str, &str)]) -> Result<Option<CounterConfig>, String> {
        let (s, problems) =
            Settings::from_env(&|k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).into()));
        CounterConfig::from_settings(&s, &problems)
    }

    #[test]
    fn settings_come_from_the_environment() {
        assert!(config(&[]).unwrap().is_none());
        let c = config(&[
            (var::COUNTERS, "sm__ctas_launched.sum, dram__bytes_read.sum"),
            (var::COUNTERS_KERNELS, "gemm|conv"),
            (var::COUNTERS_MAX_KERNELS, "3"),
            (var::COUNTERS_REQUIRE, "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.metrics, ["sm__ctas_launched.sum", "dram__bytes_read.sum"]);
        assert_eq!(c.max_kernels, Some(3));
        assert_eq!(c.every, 1);
        assert!(c.require);
        assert!(config(&[(var::COUNTERS, "a.sum"), (var::COUNTERS_KERNELS, "(")]).is_err());
        assert!(config(&[(var::COUNTERS, "a.sum"), (var::COUNTERS_EVERY, "x")]).is_err());
    }

    #[test]
    fn selection_filters_by_name_then_takes_every_nth_up_to_the_maximum() {
        let c = config(&[
            (var::COUNTERS, "a.sum"),
            (var::COUNTERS_KERNELS, "gemm"),
            (var::COUNTERS_EVERY, "2"),
            (var::COUNTERS_MAX_KERNELS, "2"),
        ])
        .unwrap()
        .unwrap();
        let mut s = Selector::default();
        let got: Vec<Option<bool>> = [
            "_Z4gemmv", "_Z4copyv", "_Z4gemmv", "_Z4gemmv", "_Z4gemmv", "_Z4gemmv", "_Z4gemmv",
        ]
        .iter()
        .map(|n| s.take(&c, n))
        .collect();
        // gemm #0 taken, copy not asked for, #1 skipped (every 2), #2 taken, #3 skipped, #4 past
        // the maximum, #5 skipped.
        assert_eq!(
            got,
            [
                Some(true),
                None,
                Some(false),
                Some(true),
                Some(false),
                Some(false),
                Some(false)
            ]
        );
    }

    #[test]
    fn failures_name_the_error_and_the_fix() {
        let c = config(&[
            (var::COUNTERS, "a.sum"),
            (
                var::COUNTERS_HOLDERS_HINT,
                "nv-hostengine (pid 812) holds the counters.",
            ),
        ])
        .unwrap()
        .unwrap();
        let busy = CountersError::Call {
            call: "cuptiRangeProfilerEnable",
            code: 26,
        };
        let m = failure_message(&busy, &c);
        assert!(m.contains("CUPTI_ERROR_HARDWARE_BUSY"), "{m}");
        assert!(m.contains("nv-hostengine (pid 812)"), "{m}");
        let denied = CountersError::Call {
            call: "cuptiProfilerGetCounterAvailability",
            code: 35,
        };
        let m = failure_message(&denied, &c);
        assert!(m.contains("INSUFFICIENT_PRIVILEGES"), "{m}");
        assert!(m.contains("counter-access"), "{m}");
    }
}
