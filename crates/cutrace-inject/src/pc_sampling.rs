//! PC Sampling for `cutrace profile --pc-sampling` (cupti_pcsampling.h): on every CUDA context,
//! continuous-mode sampling of where warps sit and why they stall, decoded on cutrace's own
//! thread (`cutrace-pc-decode`) into rows for the writer (table 10).
//!
//! A session is enabled and configured when a context is created
//! (`CUPTI_CBID_RESOURCE_CONTEXT_CREATED`, on that application thread, before the context runs
//! a kernel); that and copying each loaded module's cubin (`CUPTI_CBID_RESOURCE_MODULE_LOADED`)
//! are the only work done on the application's threads. Continuous mode does not serialize
//! kernels (the header: "Kernels are not serialized in this mode"), so the program runs as it
//! would, at the cost of correlation ids (0) and of a flush "after every module
//! load-unload-load" to keep PCs unique, done in `CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING`.
//! The decode thread reads every session's data every `DECODE_PERIOD`
//! (`cuptiPCSamplingGetData` "never does device synchronization"); a session is disabled,
//! which hands over its last records, when its context is destroyed or at exit.
//!
//! Source lines come from the cubins' line information (`cuptiGetSassToSourceCorrelation`, host
//! only), looked up once per instruction on the decode thread; cubins are kept up to
//! `MAX_CUBIN_BYTES`, and a PC of a cubin not kept, or built without `-lineinfo`, has no line.
//! Everything left out is counted in the `pc_sampling` facts (META), never silently dropped.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use cutrace_counters::pc::{PcBatch, PcPeriod, PcSampler, PcSamplingConfig, StallReasons};
use cutrace_counters::{CountersError, Profiler};
use cutrace_cupti::api::{self, ModuleResourceData, ResourceData, Subscription};
use cutrace_cupti::driver::Context;
use cutrace_cupti::Cupti;
use cutrace_settings::{var, Problem, Settings};
use cutrace_trace::PcSamplingInfo;

use crate::counters::{failure_message, CounterConfig, Versioned};

/// How often the decode thread reads the sessions' data.
const DECODE_PERIOD: Duration = Duration::from_millis(100);
/// PC records per buffer (CUPTI's 1 MB default scratch buffer holds about 5,500 PCs).
const RECORDS_PER_BUFFER: usize = 8192;
/// GetData calls per session and drain at most (each empties up to a buffer's worth).
const MAX_READS_PER_DRAIN: usize = 64;
/// Cubin bytes kept for source lines, over every module; past it a module's PCs have no line.
const MAX_CUBIN_BYTES: usize = 512 << 20;
/// Rows waiting for the writer, at most; past it rows are dropped and counted.
const MAX_PENDING_ROWS: usize = 1 << 22;
/// Distinct names (functions, source files) at most, and instructions whose line is looked up.
const MAX_NAMES: usize = 1 << 20;
const MAX_LINES: usize = 1 << 22;

/// What `cutrace profile --pc-sampling` asked for (`Settings::pc_sampling`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcConfig {
    pub period: Option<PcPeriod>,
    pub require: bool,
    pub access_hint: Option<String>,
    pub holders_hint: Option<String>,
}

impl PcConfig {
    /// `Ok(None)` when PC sampling was not asked for; `Err` for settings that cannot be used.
    pub fn from_settings(s: &Settings, problems: &[Problem]) -> Result<Option<PcConfig>, String> {
        let Some(p) = &s.pc_sampling else {
            return Ok(None);
        };
        if let Some(bad) = problems.iter().find(|x| x.var == var::PC_PERIOD) {
            return Err(bad.to_string());
        }
        let period = match p.period {
            None => None,
            Some(n) => Some(PcPeriod::new(n).map_err(|e| format!("{}={n}: {e}", var::PC_PERIOD))?),
        };
        let a = &s.counter_access;
        Ok(Some(PcConfig {
            period,
            require: a.require,
            access_hint: a.access_hint.clone(),
            holders_hint: a.holders_hint.clone(),
        }))
    }

    /// The failure message's settings, shared with `cutrace profile`'s counters.
    fn hints(&self) -> CounterConfig {
        CounterConfig {
            metrics: Vec::new(),
            kernels: None,
            max_kernels: None,
            every: 1,
            require: self.require,
            access_hint: self.access_hint.clone(),
            holders_hint: self.holders_hint.clone(),
            keep_images: 0,
            timing: false,
        }
    }
}

/// One instruction's samples for one stall reason, for the writer. Names are indices into
/// [`PcSampling::names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub device: u32,
    pub function: u32,
    pub function_index: u32,
    pub pc_offset: u64,
    pub cubin_crc: u64,
    pub reason: u32,
    pub samples: u64,
    pub file: Option<u32>,
    pub line: u32,
}

/// Names interned once: function names, stall reasons, source files.
#[derive(Default)]
pub struct Names {
    list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    /// The name's index; `None` past [`MAX_NAMES`].
    fn id(&mut self, s: &str) -> Option<u32> {
        if let Some(&i) = self.index.get(s) {
            return Some(i);
        }
        if self.list.len() >= MAX_NAMES {
            return None;
        }
        let i = self.list.len() as u32;
        self.list.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        Some(i)
    }

    /// The names from index `from` on (the writer interns each once).
    pub fn since(&self, from: usize) -> &[String] {
        self.list.get(from..).unwrap_or(&[])
    }
}

struct Session {
    device: u32,
    ctx: usize,
    sampler: PcSampler<'static, 'static>,
}

/// A loaded module's cubin, copied at load; its CRC is computed when a PC record needs it.
struct Cubin {
    bytes: Vec<u8>,
    crc: Option<u64>,
}

/// An instruction: (cubin CRC, function name id, PC offset).
type Pc = (u64, u32, u64);

struct State {
    profiler: &'static Profiler<'static>,
    sessions: Vec<Session>,
    cubins: Vec<Cubin>,
    cubin_bytes: usize,
    /// Source lines looked up: (file name id, line), `None` when the cubin gave none.
    lines: HashMap<Pc, Option<(u32, u32)>>,
    off: bool,
}

// SAFETY: the CUPTI objects inside (the PC sampling sessions, the profiler's call log) are used
// only while the `PcSampling::state` mutex is held, one thread at a time; CUPTI's PC sampling
// calls take the context as an argument and are not bound to the thread that enabled it.
unsafe impl Send for State {}

pub struct PcSampling {
    pub config: PcConfig,
    cupti: &'static Cupti,
    state: Mutex<State>,
    pub names: Mutex<Names>,
    rows: Mutex<Vec<Row>>,
    /// The sampling facts, for the writer's META chunks.
    pub info: Versioned<PcSamplingInfo>,
    told: AtomicBool,
    stop: AtomicBool,
}

static PC_SAMPLING: OnceLock<PcSampling> = OnceLock::new();

pub fn get() -> Option<&'static PcSampling> {
    PC_SAMPLING.get()
}

/// Sets PC sampling up for this process: context and module callbacks on `sub`, and the decode
/// thread.
pub fn start(cupti: &'static Cupti, sub: &Subscription, config: PcConfig) -> Result<(), String> {
    let profiler: &'static Profiler<'static> = Box::leak(Box::new(Profiler::new(cupti)));
    let info = PcSamplingInfo {
        sampling_period: config.period.map(PcPeriod::exponent),
        collection_mode: "continuous".into(),
        ..PcSamplingInfo::default()
    };
    let s = PcSampling {
        config,
        cupti,
        state: Mutex::new(State {
            profiler,
            sessions: Vec::new(),
            cubins: Vec::new(),
            cubin_bytes: 0,
            lines: HashMap::new(),
            off: false,
        }),
        names: Mutex::new(Names::default()),
        rows: Mutex::new(Vec::new()),
        info: Versioned::new(info),
        told: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    };
    if PC_SAMPLING.set(s).is_err() {
        return Ok(());
    }
    for cbid in [
        api::CBID_RESOURCE_CONTEXT_CREATED,
        api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
        api::CBID_RESOURCE_MODULE_LOADED,
        api::CBID_RESOURCE_MODULE_UNLOAD_STARTING,
    ] {
        cupti
            .enable_callback(sub, api::CB_DOMAIN_RESOURCE, cbid, true)
            .map_err(|e| format!("PC sampling is off: {e}"))?;
    }
    std::thread::Builder::new()
        .name("cutrace-pc-decode".into())
        .spawn(decode_loop)
        .map_err(|e| format!("PC sampling is off: no decode thread ({e})"))?;
    Ok(())
}

/// The CUPTI callback, for the resource domain (the caller catches panics).
///
/// # Safety
/// `data` must be what CUPTI passes for `domain`, valid for the call.
pub unsafe fn on_callback(domain: u32, cbid: u32, data: *const c_void) {
    let Some(s) = get() else { return };
    if domain != api::CB_DOMAIN_RESOURCE || data.is_null() {
        return;
    }
    // SAFETY: CUPTI passes a CUpti_ResourceData for the resource domain.
    let rd = unsafe { &*(data as *const ResourceData) };
    match cbid {
        api::CBID_RESOURCE_CONTEXT_CREATED => s.context_created(rd.context),
        api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING => s.context_destroyed(rd.context),
        api::CBID_RESOURCE_MODULE_LOADED if !rd.resource_descriptor.is_null() => {
            // SAFETY: for module callbacks the descriptor is a CUpti_ModuleResourceData.
            let m = unsafe { &*(rd.resource_descriptor as *const ModuleResourceData) };
            if !m.cubin.is_null() && m.cubin_size > 0 {
                // SAFETY: CUPTI's cubin of `cubin_size` bytes, valid for the callback.
                let bytes =
                    unsafe { std::slice::from_raw_parts(m.cubin.cast::<u8>(), m.cubin_size) };
                s.module_loaded(bytes);
            }
        }
        api::CBID_RESOURCE_MODULE_UNLOAD_STARTING => s.module_unloading(rd.context),
        _ => {}
    }
}

/// Disables every session, taking its last records (at exit, before the writer's last chunk).
pub fn finish() {
    let Some(s) = get() else { return };
    s.stop.store(true, Ordering::SeqCst);
    // Not `lock()`: `--require-counters` exits from inside `fail`, with a thread holding the
    // lock, and the exit handler comes here. The decode thread holds it for one drain at most.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut st = loop {
        match s.state.try_lock() {
            Ok(st) => break st,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return,
        }
    };
    let sessions = std::mem::take(&mut st.sessions);
    for sess in sessions {
        s.close(&mut st, sess);
    }
    st.profiler.take_calls();
}

fn decode_loop() {
    let Some(s) = get() else { return };
    while !s.stop.load(Ordering::SeqCst) {
        std::thread::sleep(DECODE_PERIOD);
        let Ok(mut st) = s.state.lock() else { return };
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut failed = None;
        for i in 0..st.sessions.len() {
            if let Err(e) = s.drain(&mut st, i) {
                failed = Some(e);
                break;
            }
        }
        st.profiler.take_calls();
        if let Some(e) = failed {
            let msg = failure_message(&e, &s.config.hints());
            let sessions = std::mem::take(&mut st.sessions);
            for sess in sessions {
                s.close(&mut st, sess);
            }
            s.fail(&mut st, msg);
        }
    }
}

/// The source line of an instruction, looked up in the first kept cubin with its CRC (computed
/// on first need). `None` when no kept cubin has that CRC or it has no line information.
fn source_line(
    st: &mut State,
    names: &mut Names,
    crc: u64,
    function: &str,
    pc_offset: u64,
) -> Option<(u32, u32)> {
    let p = st.profiler;
    for c in st.cubins.iter_mut().filter(|c| c.crc.is_none()) {
        c.crc = Some(p.cubin_crc(&c.bytes).unwrap_or(0));
    }
    let cubin = st.cubins.iter().find(|c| c.crc == Some(crc))?;
    let line = p.sass_to_source(&cubin.bytes, function, pc_offset).ok()??;
    let file = if line.dir.is_empty() {
        line.file
    } else {
        format!("{}/{}", line.dir.trim_end_matches('/'), line.file)
    };
    Some((names.id(&file)?, line.line))
}

impl PcSampling {
    /// PC sampling stops for this run: says why once (and exits with `--require-counters`).
    fn fail(&self, st: &mut State, msg: String) {
        st.off = true;
        let shown = format!("PC sampling is off: {msg}");
        self.info.update(|i| {
            i.error.get_or_insert(shown.clone());
        });
        crate::counters::say_off(&self.told, self.config.require, &shown);
    }

    fn context_created(&self, ctx: *mut c_void) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.off {
            return;
        }
        // SAFETY: the context CUPTI just reported created.
        let device = match unsafe { self.cupti.device_of(ctx) } {
            Ok(d) => d,
            Err(e) => {
                self.fail(&mut st, format!("the new context's device is unknown: {e}"));
                return;
            }
        };
        match self.open(&st, ctx) {
            Ok(sampler) => {
                let reasons: Vec<String> = sampler
                    .stall_reasons()
                    .iter()
                    .map(|r| r.name.clone())
                    .collect();
                self.info.update(|i| {
                    if !i.devices.contains(&device) {
                        i.devices.push(device);
                    }
                    for r in reasons {
                        if !i.stall_reasons.contains(&r) {
                            i.stall_reasons.push(r);
                        }
                    }
                });
                st.sessions.push(Session {
                    device,
                    ctx: ctx as usize,
                    sampler,
                });
            }
            Err(e) => {
                let msg = format!(
                    "GPU {device}: {}",
                    failure_message(&e, &self.config.hints())
                );
                self.fail(&mut st, msg);
            }
        }
        st.profiler.take_calls();
    }

    fn open(
        &self,
        st: &State,
        ctx: *mut c_void,
    ) -> Result<PcSampler<'static, 'static>, CountersError> {
        let mut sampler = st.profiler.pc_enable(Context::from_raw(ctx.cast()))?;
        let mut c = PcSamplingConfig::continuous(RECORDS_PER_BUFFER);
        c.period = self.config.period;
        sampler.configure(&c)?;
        Ok(sampler)
    }

    fn module_loaded(&self, cubin: &[u8]) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.off {
            return;
        }
        if st.cubin_bytes + cubin.len() > MAX_CUBIN_BYTES {
            self.info.update(|i| i.cubins_not_kept += 1);
            return;
        }
        st.cubin_bytes += cubin.len();
        st.cubins.push(Cubin {
            bytes: cubin.to_vec(),
            crc: None,
        });
    }

    /// Before a module goes, its PCs are read (continuous mode's flush).
    fn module_unloading(&self, ctx: *mut c_void) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if let Some(i) = st.sessions.iter().position(|s| s.ctx == ctx as usize) {
            if let Err(e) = self.drain(&mut st, i) {
                let msg = failure_message(&e, &self.config.hints());
                let sess = st.sessions.swap_remove(i);
                self.close(&mut st, sess);
                self.fail(&mut st, msg);
            }
        }
        st.profiler.take_calls();
    }

    fn context_destroyed(&self, ctx: *mut c_void) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if let Some(i) = st.sessions.iter().position(|s| s.ctx == ctx as usize) {
            let sess = st.sessions.swap_remove(i);
            self.close(&mut st, sess);
        }
        st.profiler.take_calls();
    }

    /// Last read, then Disable, whose buffer holds what was left.
    fn close(&self, st: &mut State, sess: Session) {
        let device = sess.device;
        let mut sess = sess;
        let _ = self.read_all(st, &mut sess.sampler, device);
        let reasons = sess.sampler.stall_reasons().clone();
        match sess.sampler.disable() {
            Ok(b) => {
                // What Disable could not fit is lost (the header: "discarded").
                let lost = b.totals.pcs_remaining;
                self.absorb(st, device, &reasons, &b);
                self.info.update(|i| i.pcs_lost += lost);
            }
            Err(e) => {
                let msg = failure_message(&e, &self.config.hints());
                self.info.update(|i| {
                    i.error.get_or_insert(format!("PC sampling: {msg}"));
                });
            }
        }
    }

    /// Reads session `i` until CUPTI has nothing left (or `MAX_READS_PER_DRAIN` reads).
    fn drain(&self, st: &mut State, i: usize) -> Result<(), CountersError> {
        // The sampler is moved out for the reads, so that `absorb` may borrow the state.
        let Some(mut sess) = (i < st.sessions.len()).then(|| st.sessions.swap_remove(i)) else {
            return Ok(());
        };
        let r = self.read_all(st, &mut sess.sampler, sess.device);
        st.sessions.push(sess);
        let last = st.sessions.len() - 1;
        st.sessions.swap(i, last);
        r
    }

    fn read_all(
        &self,
        st: &mut State,
        sampler: &mut PcSampler<'static, 'static>,
        device: u32,
    ) -> Result<(), CountersError> {
        for _ in 0..MAX_READS_PER_DRAIN {
            let b = sampler.get_data()?;
            self.absorb(st, device, sampler.stall_reasons(), &b);
            if b.totals.pcs_remaining == 0 || b.records.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// One buffer's totals into the facts and its records into rows for the writer.
    fn absorb(&self, st: &mut State, device: u32, reasons: &StallReasons, b: &PcBatch) {
        let t = b.totals;
        let p = b.problems;
        let odd = p.stall_counts_clamped
            + p.null_stall_arrays
            + p.missing_function_names
            + p.names_truncated
            + p.unknown_stall_reasons;
        let mut rows = Vec::new();
        let mut left_out = 0u64;
        if !b.records.is_empty() {
            let Ok(mut names) = self.names.lock() else {
                return;
            };
            for r in &b.records {
                let fname = b.function_name(r).unwrap_or("");
                let Some(function) = names.id(fname) else {
                    left_out += r.stalls.len() as u64;
                    continue;
                };
                let key = (r.cubin_crc, function, r.pc_offset);
                let src = match st.lines.get(&key) {
                    Some(&l) => l,
                    None => {
                        let l = source_line(st, &mut names, r.cubin_crc, fname, r.pc_offset);
                        if st.lines.len() < MAX_LINES {
                            st.lines.insert(key, l);
                        }
                        l
                    }
                };
                for s in r.stalls.iter().filter(|s| s.samples > 0) {
                    // An index CUPTI did not name keeps its number (and is counted as odd).
                    let reason = match reasons.name(s.index) {
                        Some(n) => names.id(n),
                        None => names.id(&format!("stall reason {}", s.index)),
                    };
                    let Some(reason) = reason else {
                        left_out += 1;
                        continue;
                    };
                    rows.push(Row {
                        device,
                        function,
                        function_index: r.function_index,
                        pc_offset: r.pc_offset,
                        cubin_crc: r.cubin_crc,
                        reason,
                        samples: u64::from(s.samples),
                        file: src.map(|x| x.0),
                        line: src.map_or(0, |x| x.1),
                    });
                }
            }
        }
        let queued = rows.len() as u64;
        let pushed = self.push(rows);
        self.info.update(|i| {
            i.samples_total += t.total_samples;
            i.samples_dropped += t.dropped_samples;
            i.samples_non_user += t.non_user_kernel_samples;
            i.hardware_buffer_full += u64::from(t.hardware_buffer_full);
            i.pcs_lost += p.pcs_beyond_capacity;
            i.records_odd += odd;
            i.rows_dropped_queue += left_out + if pushed { 0 } else { queued };
        });
    }

    /// Queues rows for the writer; `false` (nothing queued) when the queue is full.
    fn push(&self, rows: Vec<Row>) -> bool {
        if rows.is_empty() {
            return true;
        }
        let Ok(mut q) = self.rows.lock() else {
            return false;
        };
        if q.len() + rows.len() > MAX_PENDING_ROWS {
            return false;
        }
        q.extend(rows);
        true
    }

    /// The rows queued so far (the writer's side).
    pub fn take_rows(&self) -> Vec<Row> {
        self.rows
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}
