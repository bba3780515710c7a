//! cutrace-inject: the `CUDA_INJECTION64_PATH` library. `InitializeInjection` loads CUPTI,
//! enables activity kinds and registers buffer callbacks; the callbacks only hand buffers to a
//! writer thread, which decodes them into the native trace format.
//!
//! Rules this file keeps (docs/ARCHITECTURE.md): no panic crosses `extern "C"` (every entry point
//! runs under `catch_unwind`); no file I/O on the application's threads; memory is bounded by
//! the buffer pool, and records that do not fit are dropped and counted; when CUPTI is missing,
//! incompatible or already taken, the program runs untraced with one line on stderr, and a start
//! that fails after taking CUPTI's subscriber slot gives it back (`Claim`).
//!
//! Preloaded by `cutrace record`, the library also stands in front of libcupti for the program's
//! own CUPTI users (`interpose.rs`), to tell them in one line why they get nothing.

pub mod api_filter;
pub mod bench_hook;
pub mod config;
pub mod counters;
pub mod decode;
mod interpose;
mod lifecycle;
mod monitor;
pub mod pc_sampling;
pub mod pool;
mod root_exit;
pub mod sampling;
mod writer;

pub use interpose::{cuptiActivityRegisterCallbacks, cuptiSubscribe};

use cutrace_settings::{var, Problem, Settings};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use cutrace_cupti::activity::kind;
use cutrace_cupti::api::Subscription;
use cutrace_cupti::version::{check_pairing, Pairing};
use cutrace_cupti::{api, explain, result_name, Cupti, CuptiError};

use api_filter::{ApiMode, Outcome};
use config::Config;
use lifecycle::{Lifecycle, Phase, Release};
use pool::Pool;

/// A completed buffer on its way to the writer.
pub(crate) struct Done {
    pub ptr: usize,
    pub valid: usize,
}

pub(crate) struct Global {
    pub cupti: Cupti,
    pub config: Config,
    pub pool: Pool,
    pub queue: Mutex<VecDeque<Done>>,
    pub queue_cv: Condvar,
    pub stop: AtomicBool,
    pub writer_done: Mutex<bool>,
    pub writer_done_cv: Condvar,
    pub dropped_by_cupti: AtomicU64,
    pub buffers_completed: AtomicU64,
    pub notes: Mutex<Vec<String>>,
    pub driver_cuda_version: Option<u32>,
    /// Activity kinds cutrace enabled as a whole (`cuptiActivityEnable`), DEVICE included.
    pub enabled_kinds: Vec<u32>,
    /// RUNTIME/DRIVER records cutrace enabled one callback id at a time (`--api lean`,
    /// `launches`, `Knobs::runtime_cbids`): (driver?, callback id).
    pub enabled_api_records: Vec<(bool, u32)>,
    /// Which API calls get records, as applied, for each part's header.
    pub api_records: Option<cutrace_trace::ApiRecords>,
}

static GLOBAL: OnceLock<Global> = OnceLock::new();
/// The library's state in this process (`lifecycle.rs`): started, tracing or untraced, forked,
/// its buffer callbacks taken, CUPTI's subscriber slot held or given back.
pub(crate) static LIFECYCLE: Lifecycle = Lifecycle::new();
/// Most notes kept for the trace (a misbehaving program must not grow them without bound).
const MAX_NOTES: usize = 64;

/// Called by the CUDA driver during `cuInit` when this library is named in
/// `CUDA_INJECTION64_PATH`. Always returns 1: a tracing failure must not fail the program.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> i32 {
    if !LIFECYCLE.begin() {
        return 1;
    }
    match catch_unwind(init) {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => untraced(&msg),
        Err(_) => untraced("internal error while starting (a bug in cutrace); please report it"),
    }
    if LIFECYCLE.phase() == Phase::Starting {
        // `init` returned without tracing (another start won the race for GLOBAL).
        LIFECYCLE.untraced();
    }
    1
}

pub(crate) fn untraced(msg: &str) {
    LIFECYCLE.untraced();
    monitor::tell_untraced(msg);
    let slot = match LIFECYCLE.release() {
        Release::Done => {
            ". cutrace gave its CUPTI subscription back: the program's own CUPTI tools \
             (torch.profiler) work as they would without it"
        }
        Release::Failed => {
            ". cutrace could not give its CUPTI subscription back (cuptiUnsubscribe failed): \
             the program's own CUPTI tools (torch.profiler) get \
             CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
        }
        Release::None => "",
    };
    eprintln!(
        "cutrace: pid {} runs untraced: {msg}{slot}",
        std::process::id()
    );
}

/// cutrace's hold on the CUPTI subscriber slot while it starts. Unless kept, it is given back
/// (`cuptiUnsubscribe`) when dropped, on every error return and on a panic alike: a start that
/// fails after subscribing must not block the program's own CUPTI tools while tracing nothing.
struct Claim(Option<Subscription>);

impl Claim {
    /// Tracing started: the slot stays cutrace's for the life of the process.
    fn keep(mut self) {
        // Dropping a Subscription keeps the subscription.
        drop(self.0.take());
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some(s) = self.0.take() else { return };
        // Given back, the interposer no longer blames cutrace for another tool's refusal.
        LIFECYCLE.set_release(if s.release().is_ok() {
            Release::Done
        } else {
            Release::Failed
        });
    }
}

fn init() -> Result<(), String> {
    let (settings, problems) = cutrace_settings::Settings::from_process_env();
    let config = Config::from_settings(&settings, &problems, &|k| std::env::var(k).ok());
    let (counter_config, sample_config) = session_configs(&settings, &problems);
    let pc_config = match pc_sampling::PcConfig::from_settings(&settings, &problems) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "cutrace: pid {}: PC sampling is off: {e}",
                std::process::id()
            );
            None
        }
    };
    let cupti = load_cupti()?;
    let version = cupti
        .version()
        .map_err(|e| format!("{} could not report its version: {e}", cupti.path))?;
    let driver = api::driver_version();
    let mut notes = config.notes.clone();
    if cupti.source == cutrace_cupti::locate::ALREADY_LOADED {
        notes.push(format!(
            "using the libcupti the program had already loaded ({}), so the process holds one \
             CUPTI",
            cupti.path
        ));
    }
    match check_pairing(version, driver, &cupti.path) {
        Pairing::Ok => {}
        Pairing::Warn(w) => notes.push(w),
        Pairing::Refuse(r) => return Err(r),
    }
    // Claiming the subscriber slot makes a later tracer (torch.profiler) see
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and stay off our buffers, and tells us when
    // one was here first. `Knobs::subscribe` off skips it (benchmarks only). Every failure from
    // here on gives the slot back (`claim` is dropped).
    let mut claim = Claim(None);
    if config.subscribe {
        match cupti.subscribe(callback) {
            Ok(Some(s)) => {
                claim.0 = Some(s);
                LIFECYCLE.set_subscribed(true);
            }
            // This CUPTI lacks cuptiSubscribe (no CUPTI 13 does): nothing is held.
            Ok(None) => {}
            Err(e) => return Err(refusal("cuptiSubscribe", &e)),
        }
    }
    set_buffer_attributes(&cupti, &config, &mut notes);
    cupti
        .register_callbacks(buffer_requested, buffer_completed)
        .map_err(|e| refusal("cuptiActivityRegisterCallbacks", &e))?;
    let on = enable_kinds(
        &cupti,
        &config.kinds,
        config.api_mode,
        config.runtime_cbids.as_deref(),
        &mut notes,
    )?;
    let enabled = on.kinds;
    let api_records = on.by_id;
    let applied_api = on.api_records;
    let mut enabled_kinds = on.whole;
    if cupti.enable(kind::DEVICE).is_ok() {
        enabled_kinds.push(kind::DEVICE);
    } else {
        notes.push("CUPTI_ACTIVITY_KIND_DEVICE not enabled: no device properties".into());
    }
    let pool = Pool::new(config.buffer_bytes, config.max_buffers);
    let g = Global {
        cupti,
        config,
        pool,
        queue: Mutex::new(VecDeque::new()),
        queue_cv: Condvar::new(),
        stop: AtomicBool::new(false),
        writer_done: Mutex::new(false),
        writer_done_cv: Condvar::new(),
        dropped_by_cupti: AtomicU64::new(0),
        buffers_completed: AtomicU64::new(0),
        notes: Mutex::new(notes),
        driver_cuda_version: driver,
        enabled_kinds,
        enabled_api_records: api_records,
        api_records: applied_api,
    };
    if GLOBAL.set(g).is_err() {
        return Ok(());
    }
    let Some(g) = GLOBAL.get() else {
        return Ok(());
    };
    let kinds = enabled;
    if let Err(e) = std::thread::Builder::new()
        .name("cutrace-writer".into())
        .spawn(move || writer::run(g, kinds))
    {
        // Without a writer, stop asking CUPTI for records.
        for &k in &g.config.kinds {
            let _ = g.cupti.disable(k);
        }
        return Err(format!("could not start the writer thread: {e}"));
    }
    // SAFETY: registers a plain extern "C" function with no arguments.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
    }
    LIFECYCLE.traced();
    if let Some(cc) = counter_config {
        let require = cc.require;
        let r = match claim.0.as_ref() {
            Some(sub) => counters::start(&g.cupti, sub, cc),
            None => Err(no_subscription("counters need")),
        };
        session_started(r, require);
    }
    if let Some(sc) = sample_config {
        let require = sc.require;
        let r = match claim.0.as_ref() {
            Some(sub) => sampling::start(&g.cupti, sub, sc),
            None => Err(no_subscription("PM sampling needs")),
        };
        session_started(r, require);
    }
    if let Some(pc) = pc_config {
        let require = pc.require;
        let r = match claim.0.as_ref() {
            Some(sub) => pc_sampling::start(&g.cupti, sub, pc),
            None => Err(no_subscription("PC sampling needs")),
        };
        session_started(r, require);
    }
    claim.keep();
    Ok(())
}

/// The counter and PM sampling sessions the settings ask for; settings that cannot be used turn
/// that session off, said on stderr, and tracing goes on.
fn session_configs(
    settings: &Settings,
    problems: &[Problem],
) -> (
    Option<counters::CounterConfig>,
    Option<sampling::SampleConfig>,
) {
    let counter_config = match counters::CounterConfig::from_settings(settings, problems) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cutrace: pid {}: counters are off: {e}", std::process::id());
            None
        }
    };
    let sample_config = match sampling::SampleConfig::from_settings(settings, problems) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "cutrace: pid {}: PM sampling is off: {e}",
                std::process::id()
            );
            None
        }
    };
    (counter_config, sample_config)
}

/// Loads libcupti from where this process looks for it; a library not found or not loadable is
/// refused with the fix.
fn load_cupti() -> Result<Cupti, String> {
    let cands = cutrace_cupti::locate::candidates_here(&|k| std::env::var(k).ok());
    Cupti::load(&cands).map_err(|e| match e {
        CuptiError::NotFound { .. } | CuptiError::Load { .. } => format!(
            "libcupti could not be loaded ({e}). Fix: install the CUDA 13 toolkit's CUPTI, or set \
             {}=/path/to/libcupti.so.13",
            var::CUPTI_LIB
        ),
        other => format!("{other}"),
    })
}

/// Tells CUPTI that its buffers come zeroed and, when set, the device buffer's size; an attribute
/// CUPTI refuses becomes a note in the trace.
fn set_buffer_attributes(cupti: &Cupti, config: &Config, notes: &mut Vec<String>) {
    // CUPTI zeroes buffers it is handed unless told they are zeroed already; the pool zeroes
    // them on the writer thread, away from the application's threads.
    if let Err(e) = cupti.set_attribute(api::ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 1u8) {
        notes.push(format!(
            "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER not set: {e}"
        ));
    }
    if let Some(bytes) = config.device_buffer_bytes {
        if let Err(e) = cupti.set_attribute(api::ATTR_DEVICE_BUFFER_SIZE, bytes) {
            notes.push(format!(
                "CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE = {bytes} not set: {e}"
            ));
        }
    }
}

/// Why a counter or sampling session cannot start without cutrace's subscription (`what`:
/// "counters need", "PM sampling needs").
fn no_subscription(what: &str) -> String {
    format!(
        "{what} cutrace's CUPTI subscription ({}=0 is set, or this CUPTI has no cuptiSubscribe)",
        var::SUBSCRIBE
    )
}

/// After a counter or sampling session tried to start: a failure is said once on stderr and in
/// the trace, and tracing carries on, unless `--require-counters` (`require`) makes it fatal.
fn session_started(r: Result<(), String>, require: bool) {
    let Err(e) = r else { return };
    eprintln!(
        "cutrace: pid {}: {e}; tracing carries on",
        std::process::id()
    );
    add_note(e);
    if require {
        eprintln!(
            "cutrace: pid {}: --require-counters: stopping the program (exit 125)",
            std::process::id()
        );
        std::process::exit(125);
    }
}

/// What [`enable_kinds`] turned on.
struct Enabled {
    /// The kinds asked for that are on, whole or for some callback ids.
    kinds: Vec<u32>,
    /// The kinds turned on whole: not RUNTIME/DRIVER where only some callback ids are.
    whole: Vec<u32>,
    /// RUNTIME (`false`) or DRIVER (`true`) callback ids whose calls get records.
    by_id: Vec<(bool, u32)>,
    /// Which API calls get records, for the part's header; `None` when no API kind is on.
    api_records: Option<cutrace_trace::ApiRecords>,
}

/// Turns on `kinds`, RUNTIME/DRIVER records filtered by `api_mode` (or, for RUNTIME, only
/// `runtime_cbids`). A kind CUPTI refuses is left off with a note; an error that means CUPTI
/// cannot trace at all turns off everything this call turned on and refuses.
fn enable_kinds(
    cupti: &Cupti,
    kinds: &[u32],
    api_mode: ApiMode,
    runtime_cbids: Option<&[u32]>,
    notes: &mut Vec<String>,
) -> Result<Enabled, String> {
    let mut enabled = Vec::new();
    let mut api_records: Vec<(bool, u32)> = Vec::new();
    let mut filtered: [Option<Outcome>; 2] = [None, None];
    let filter_api = api_mode != ApiMode::All;
    for &k in kinds {
        let r = if let (true, Some(cbids)) = (k == kind::RUNTIME, runtime_cbids) {
            let mut r = Ok(());
            for &cbid in cbids {
                match cupti.enable_api_record(false, cbid, true) {
                    Ok(()) => api_records.push((false, cbid)),
                    Err(e) => r = Err(e),
                }
            }
            if filter_api {
                notes.push(format!(
                    "{} decides which runtime calls are recorded; --api {} applies to driver \
                     calls only",
                    var::RUNTIME_CBIDS,
                    api_mode.as_str()
                ));
            }
            r
        } else if filter_api && (k == kind::RUNTIME || k == kind::DRIVER) {
            let driver = k == kind::DRIVER;
            enable_api_calls(cupti, driver, api_mode, notes, &mut api_records)
                .map(|o| filtered[usize::from(driver)] = o)
        } else {
            cupti.enable(k)
        };
        match r {
            Ok(()) => enabled.push(k),
            Err(e) if is_fatal(&e) => {
                for &k in &enabled {
                    let _ = cupti.disable(k);
                }
                for &(driver, cbid) in &api_records {
                    let _ = cupti.enable_api_record(driver, cbid, false);
                }
                return Err(refusal("cuptiActivityEnable", &e));
            }
            Err(e) => notes.push(format!("{} not enabled: {e}", kind::name(k))),
        }
    }
    if filtered.iter().any(Option::is_some) {
        let [runtime, driver] = &filtered;
        notes.push(api_filter::note(
            api_mode,
            runtime.as_ref(),
            driver.as_ref(),
        ));
    }
    let by_id = |k: u32| {
        (k == kind::RUNTIME && (runtime_cbids.is_some() || filtered[0].is_some()))
            || (k == kind::DRIVER && filtered[1].is_some())
    };
    let whole = enabled.iter().copied().filter(|&k| !by_id(k)).collect();
    let api_on = enabled.contains(&kind::RUNTIME) || enabled.contains(&kind::DRIVER);
    let left_out = |o: &Option<Outcome>| o.as_ref().map_or(0, |o| o.dropped as u64);
    let applied = api_on.then(|| cutrace_trace::ApiRecords {
        // Runtime records only for the callback ids a benchmark named: `custom`. A mode that
        // could not be applied anywhere recorded every call.
        mode: if runtime_cbids.is_some() && enabled.contains(&kind::RUNTIME) {
            "custom"
        } else if filtered.iter().any(Option::is_some) {
            api_mode.as_str()
        } else {
            ApiMode::All.as_str()
        }
        .into(),
        runtime_left_out: Some(left_out(&filtered[0])),
        driver_left_out: Some(left_out(&filtered[1])),
    });
    Ok(Enabled {
        kinds: enabled,
        whole,
        by_id: api_records,
        api_records: applied,
    })
}

/// Enables RUNTIME (or DRIVER) records for the calls `mode` keeps, one callback id at a time,
/// instead of the whole kind. `Some` with what was left out; `None` when the whole kind was
/// enabled instead (this CUPTI cannot filter, or refused an id), after a note saying so: the
/// fallback records too much, never too little.
fn enable_api_calls(
    cupti: &Cupti,
    driver: bool,
    mode: ApiMode,
    notes: &mut Vec<String>,
    enabled_ids: &mut Vec<(bool, u32)>,
) -> Result<Option<Outcome>, CuptiError> {
    let (what, k, domain, call) = if driver {
        (
            "driver",
            kind::DRIVER,
            api::CB_DOMAIN_DRIVER_API,
            "cuptiActivityEnableDriverApi",
        )
    } else {
        (
            "runtime",
            kind::RUNTIME,
            api::CB_DOMAIN_RUNTIME_API,
            "cuptiActivityEnableRuntimeApi",
        )
    };
    let mut whole = |why: String| {
        notes.push(format!(
            "api records: --api {} not applied to {what} calls, all of them are recorded: {why}",
            mode.as_str()
        ));
        cupti.enable(k).map(|()| None)
    };
    if !cupti.has_api_record_filter(driver) {
        return whole(format!(
            "this libcupti ({}) lacks {call} or cuptiGetCallbackName",
            cupti.path
        ));
    }
    let names = cupti.callback_names(domain);
    if names.is_empty() {
        return whole("cuptiGetCallbackName named no callback id".into());
    }
    let (ids, mut outcome) = api_filter::split(mode, &names);
    for (cbid, name) in &ids {
        let r = cupti.enable_api_record(driver, *cbid, true);
        if r.is_ok() {
            enabled_ids.push((driver, *cbid));
        }
        if let Err(e) = r {
            if is_fatal(&e) {
                let _ = cupti.disable(k);
                return Err(e);
            }
            // A call that launches or copies nothing may go unrecorded (the note names it);
            // one that device records point back to may not: then the whole kind.
            if !api_filter::is_launch_or_copy(name) {
                if !outcome.refused_names.contains(name) {
                    outcome.refused_names.push(name.clone());
                }
                continue;
            }
            let why = match e.code() {
                Some(code) => format!("{call}({cbid}, {name}) returned {}", result_name(code)),
                None => format!("{call}({cbid}, {name}) failed: {e}"),
            };
            return whole(why);
        }
    }
    Ok(Some(outcome))
}

/// cutrace is recording in this process: it started (writer thread included), its writer did
/// not give up, and this is not a forked child.
pub(crate) fn is_tracing() -> bool {
    LIFECYCLE.is_tracing()
}

/// Another tool took CUPTI's activity buffers from cutrace.
pub(crate) fn callbacks_taken() -> bool {
    LIFECYCLE.callbacks_taken()
}

/// Just before another tool's activity buffer callbacks replace cutrace's: turns off every
/// activity record cutrace enabled (so that tool receives only what it asks for), then has CUPTI
/// deliver what it holds for cutrace (`FLUSH_FORCED`, through cutrace's own handle, to cutrace's
/// callbacks, while they are still the registered ones). Disabling first leaves no moment where
/// a record of cutrace's could enter CUPTI's buffers after the flush.
pub(crate) fn hand_over_buffers() {
    let Some(g) = GLOBAL.get() else { return };
    set_records(g, false);
    let _ = g.cupti.flush_all(api::FLUSH_FORCED);
}

/// The other tool's registration failed, so cutrace's callbacks are still CUPTI's: turns
/// cutrace's records back on.
pub(crate) fn take_buffers_back() {
    let Some(g) = GLOBAL.get() else { return };
    set_records(g, true);
}

/// Turns every activity record cutrace enabled on or off (a hand-over to another tool, monitor
/// mode's duty cycle).
pub(crate) fn set_records(g: &Global, on: bool) {
    for &(driver, cbid) in &g.enabled_api_records {
        let _ = g.cupti.enable_api_record(driver, cbid, on);
    }
    for &k in &g.enabled_kinds {
        let _ = if on {
            g.cupti.enable(k)
        } else {
            g.cupti.disable(k)
        };
    }
}

/// Adds a note for the trace; the writer puts notes that come after the header in a META chunk.
pub(crate) fn add_note(note: String) {
    let Some(g) = GLOBAL.get() else { return };
    if let Ok(mut n) = g.notes.lock() {
        if n.len() < MAX_NOTES {
            n.push(note);
        }
    }
}

/// Whether a buffer-request callback handed to CUPTI is cutrace's own.
pub(crate) fn is_our_buffer_callback(requested: usize) -> bool {
    requested == buffer_requested as *const () as usize
}

pub(crate) fn cupti_timestamp() -> Option<u64> {
    GLOBAL.get().and_then(|g| g.cupti.timestamp())
}

/// The libcupti cutrace loaded (a path, or the soname the loader resolved).
pub(crate) fn cupti_path() -> Option<String> {
    GLOBAL.get().map(|g| g.cupti.path.clone())
}

fn is_fatal(e: &CuptiError) -> bool {
    matches!(
        e.code(),
        Some(cutrace_cupti::error::CUPTI_ERROR_NOT_INITIALIZED)
            | Some(cutrace_cupti::error::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    )
}

fn refusal(call: &str, e: &CuptiError) -> String {
    match e.code() {
        Some(code) => {
            let (what, fix) = explain(code);
            format!("{call} returned {}: {what}. Fix: {fix}", result_name(code))
        }
        None => format!("{call} failed: {e}"),
    }
}

/// cutrace's CUPTI subscriber callback. Without `cutrace profile` no domain is enabled and it
/// is never called: the subscription only claims CUPTI's slot. With counters it serves their
/// context and launch callbacks.
unsafe extern "C" fn callback(_: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if LIFECYCLE.is_forked() {
            return;
        }
        // SAFETY: CUPTI passes the callback data of `domain`, valid for this call.
        unsafe { counters::on_callback(domain, cbid, data) };
        // SAFETY: as above.
        unsafe { sampling::on_callback(domain, cbid, data) };
        // SAFETY: as above.
        unsafe { pc_sampling::on_callback(domain, cbid, data) }
    }));
}

unsafe extern "C" fn buffer_requested(
    buf: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    if buf.is_null() || size.is_null() {
        return;
    }
    // Defaults first: a refused request (null, 0) makes CUPTI drop and count records. That is
    // safe from CUPTI 12.9 on (older ones crashed on it); the version check admits only 13.x.
    // SAFETY: CUPTI passes valid out-pointers; buf and size were checked non-null above.
    unsafe {
        *buf = std::ptr::null_mut();
        *size = 0;
        if !max_records.is_null() {
            *max_records = 0;
        }
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if LIFECYCLE.is_forked() {
            return;
        }
        let Some(g) = GLOBAL.get() else { return };
        if let Some(p) = g.pool.take() {
            // SAFETY: CUPTI's out-pointers, checked non-null above.
            unsafe {
                *buf = p;
                *size = g.pool.buffer_size();
            }
        }
    }));
}

unsafe extern "C" fn buffer_completed(
    ctx: *mut c_void,
    stream: u32,
    buf: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(g) = GLOBAL.get() else { return };
        // SAFETY: `ctx` is the context CUPTI passed to this buffer-complete callback.
        if let Some(n) = unsafe { g.cupti.dropped_records(ctx, stream) } {
            g.dropped_by_cupti.fetch_add(n, Ordering::Relaxed);
        }
        if buf.is_null() {
            return;
        }
        g.buffers_completed.fetch_add(1, Ordering::Relaxed);
        if LIFECYCLE.is_forked() {
            return;
        }
        if let Ok(mut q) = g.queue.lock() {
            q.push_back(Done {
                ptr: buf as usize,
                valid,
            });
        }
        g.queue_cv.notify_one();
    }));
}

extern "C" fn after_fork_in_child() {
    // The writer thread does not exist in a forked child, and the trace file belongs to the
    // parent: the child records nothing (an exec'd child starts its own injection).
    LIFECYCLE.set_forked();
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if LIFECYCLE.is_forked() {
            return;
        }
        let Some(g) = GLOBAL.get() else { return };
        // The last samples are decoded while the contexts still exist.
        sampling::finish();
        pc_sampling::finish();
        // Deliver every buffer, including records not yet complete, unless they belong to
        // another tool now.
        if !LIFECYCLE.callbacks_taken() {
            let _ = g.cupti.flush_all(api::FLUSH_FORCED);
        }
        g.stop.store(true, Ordering::SeqCst);
        g.queue_cv.notify_all();
        let deadline = Duration::from_millis(g.config.exit_deadline_ms);
        let Ok(done) = g.writer_done.lock() else {
            return;
        };
        let (done, timeout) = match g.writer_done_cv.wait_timeout_while(done, deadline, |d| !*d) {
            Ok(r) => r,
            Err(_) => return,
        };
        if !*done && timeout.timed_out() {
            eprintln!(
                "cutrace: pid {}: the trace writer did not finish within {} ms at exit; the \
                 trace is marked incomplete",
                std::process::id(),
                g.config.exit_deadline_ms
            );
        }
    });
}
