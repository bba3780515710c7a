//! PC Sampling for `cutrace profile --pc-sampling` (cupti_pcsampling.h): on every CUDA context,
//! continuous-mode sampling of where warps sit and why they stall, decoded on cutrace's own
//! thread (`cutrace-pc-decode`) into rows for the writer (table 10).
//!
//! A session is enabled and configured when a context is created
//! (`CUPTI_CBID_RESOURCE_CONTEXT_CREATED`, on that application thread, before the context runs
//! a kernel); that, the CRC and (once per CRC) a copy of each loaded module's cubin
//! (`CUPTI_CBID_RESOURCE_MODULE_LOADED`), and the reads CUPTI asks for before a module unloads
//! or a context goes are the only work done on the application's threads: what those reads
//! return is queued raw, and turned into rows (names, source lines) on the decode thread.
//!
//! Locks: `sessions` (the CUPTI sessions) is held only for CUPTI's enable, configure, read and
//! disable calls; `sources` (the cubins and the lines looked up) only for one CRC or one line
//! lookup at a time; `pending`, `names` and `rows` only to move values. None is held while
//! another is taken except `names` with `sources` inside it, and none while the program is
//! stopped for `--require-counters` (the message is said after the locks are released). A
//! thread already inside one of these sections (CUPTI calling back into us from a call we
//! made) is not let in again. Continuous mode does not serialize
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
/// Cubin bytes kept for source lines, over every module (one copy per CRC); past it a module's
/// PCs have no line.
const MAX_CUBIN_BYTES: usize = 256 << 20;
/// Rows waiting for the writer, at most; past it rows are dropped and counted.
const MAX_PENDING_ROWS: usize = 1 << 21;
/// PC records read and waiting for the decode thread, at most; past it they are counted lost.
const MAX_PENDING_PCS: usize = 1 << 20;
/// Distinct names (functions, source files) at most, and instructions whose line is looked up.
const MAX_NAMES: usize = 1 << 20;
const MAX_LINES: usize = 1 << 20;

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

/// A loaded module's cubin, copied at load, once per CRC.
struct Cubin {
    crc: u64,
    bytes: Vec<u8>,
}

/// An instruction: (cubin CRC, function name id, PC offset).
type Pc = (u64, u32, u64);

/// The CUPTI sessions, with the profiler whose calls they make.
struct Sessions {
    profiler: &'static Profiler<'static>,
    list: Vec<Session>,
    off: bool,
}

/// What source lines are found from: the cubins, the lines looked up, and a profiler of their
/// own for CUPTI's host-only calls (a `Profiler` is used by one thread at a time).
struct Sources {
    profiler: &'static Profiler<'static>,
    cubins: Vec<Cubin>,
    cubin_bytes: usize,
    /// Source lines looked up: (file name id, line), `None` when the cubin gave none.
    lines: HashMap<Pc, Option<(u32, u32)>>,
}

/// One read's records, waiting for the decode thread.
struct Read {
    device: u32,
    reasons: std::sync::Arc<StallReasons>,
    batch: PcBatch,
    /// PC records CUPTI said it discarded (a Disable buffer's remainder).
    lost: u64,
}

// SAFETY: the CUPTI objects inside (the PC sampling sessions, each profiler's call log) are
// used only while the mutex holding them is held, one thread at a time; CUPTI's PC sampling
// calls take the context as an argument and are not bound to the thread that enabled it.
unsafe impl Send for Sessions {}
// SAFETY: as above, for the sources' profiler.
unsafe impl Send for Sources {}

thread_local! {
    /// This thread is inside a locked section of this module: a CUPTI callback it causes
    /// returns at once instead of taking a lock this thread may hold.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` marked as inside; `None` when this thread already is.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    if INSIDE.with(|c| c.replace(true)) {
        return None;
    }
    let r = f();
    INSIDE.with(|c| c.set(false));
    Some(r)
}

pub struct PcSampling {
    pub config: PcConfig,
    cupti: &'static Cupti,
    sessions: Mutex<Sessions>,
    sources: Mutex<Sources>,
    pending: Mutex<(Vec<Read>, usize)>,
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
    let profiler = |c| -> &'static Profiler<'static> { Box::leak(Box::new(Profiler::new(c))) };
    let info = PcSamplingInfo {
        sampling_period: config.period.map(PcPeriod::exponent),
        collection_mode: "continuous".into(),
        ..PcSamplingInfo::default()
    };
    let s = PcSampling {
        config,
        cupti,
        sessions: Mutex::new(Sessions {
            profiler: profiler(cupti),
            list: Vec::new(),
            off: false,
        }),
        sources: Mutex::new(Sources {
            profiler: profiler(cupti),
            cubins: Vec::new(),
            cubin_bytes: 0,
            lines: HashMap::new(),
        }),
        pending: Mutex::new((Vec::new(), 0)),
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
    let failed = guarded(|| match cbid {
        api::CBID_RESOURCE_CONTEXT_CREATED => s.context_created(rd.context),
        api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING => {
            s.context_destroyed(rd.context);
            None
        }
        api::CBID_RESOURCE_MODULE_LOADED if !rd.resource_descriptor.is_null() => {
            // SAFETY: for module callbacks the descriptor is a CUpti_ModuleResourceData.
            let m = unsafe { &*(rd.resource_descriptor as *const ModuleResourceData) };
            if !m.cubin.is_null() && m.cubin_size > 0 {
                // SAFETY: CUPTI's cubin of `cubin_size` bytes, valid for the callback.
                let bytes =
                    unsafe { std::slice::from_raw_parts(m.cubin.cast::<u8>(), m.cubin_size) };
                s.module_loaded(bytes);
            }
            None
        }
        api::CBID_RESOURCE_MODULE_UNLOAD_STARTING => s.module_unloading(rd.context),
        _ => None,
    });
    // Said with no lock held: with --require-counters it ends the program.
    if let Some(Some(msg)) = failed {
        s.say(&msg);
    }
}

/// Disables every session and turns what is left into rows (at exit, before the writer's last
/// chunk).
pub fn finish() {
    let Some(s) = get() else { return };
    s.stop.store(true, Ordering::SeqCst);
    // Not `lock()`: the decode thread holds it for one read at most, and a thread that exits
    // from inside this module (it should not: messages are said unlocked) must not wait forever.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let closed = guarded(|| loop {
        match s.sessions.try_lock() {
            Ok(mut st) => {
                let list = std::mem::take(&mut st.list);
                for sess in list {
                    s.close(sess);
                }
                st.profiler.take_calls();
                return true;
            }
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return false,
        }
    });
    if closed != Some(true) {
        s.info.update(|i| {
            i.error.get_or_insert(
                "PC sampling: the sessions could not be closed at exit (busy for 2 s); the \
                 records CUPTI held then are not in the trace"
                    .into(),
            );
        });
    }
    s.absorb_pending();
}

fn decode_loop() {
    let Some(s) = get() else { return };
    while !s.stop.load(Ordering::SeqCst) {
        std::thread::sleep(DECODE_PERIOD);
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let failed = guarded(|| s.read_sessions()).flatten();
        s.absorb_pending();
        if let Some(msg) = failed {
            s.say(&msg);
        }
    }
}

impl PcSampling {
    /// Says once that PC sampling is off (and exits with `--require-counters`). Called with
    /// no lock of this module held.
    fn say(&self, msg: &str) {
        crate::counters::say_off(&self.told, self.config.require, msg);
    }

    /// PC sampling stops for this run: the facts say why; returns the message for [`say`]
    /// (after the caller's locks are released).
    fn fail(&self, st: &mut Sessions, msg: String) -> String {
        st.off = true;
        let shown = format!("PC sampling is off: {msg}");
        self.info.update(|i| {
            i.error.get_or_insert(shown.clone());
        });
        shown
    }

    /// The decode thread's read of every session; a failure closes them all.
    fn read_sessions(&self) -> Option<String> {
        let mut st = self.sessions.lock().ok()?;
        let mut failed = None;
        for sess in st.list.iter_mut() {
            if let Err(e) = self.read_all(sess) {
                failed = Some(e);
                break;
            }
        }
        st.profiler.take_calls();
        let e = failed?;
        let msg = failure_message(&e, &self.config.hints());
        let list = std::mem::take(&mut st.list);
        for sess in list {
            self.close(sess);
        }
        Some(self.fail(&mut st, msg))
    }

    fn context_created(&self, ctx: *mut c_void) -> Option<String> {
        let mut st = self.sessions.lock().ok()?;
        if st.off {
            return None;
        }
        // SAFETY: the context CUPTI just reported created.
        let device = match unsafe { self.cupti.device_of(ctx) } {
            Ok(d) => d,
            Err(e) => {
                let msg = format!("the new context's device is unknown: {e}");
                return Some(self.fail(&mut st, msg));
            }
        };
        let opened = self.open(&st, ctx);
        st.profiler.take_calls();
        match opened {
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
                st.list.push(Session {
                    device,
                    ctx: ctx as usize,
                    sampler,
                });
                None
            }
            Err(e) => {
                let msg = format!(
                    "GPU {device}: {}",
                    failure_message(&e, &self.config.hints())
                );
                Some(self.fail(&mut st, msg))
            }
        }
    }

    fn open(
        &self,
        st: &Sessions,
        ctx: *mut c_void,
    ) -> Result<PcSampler<'static, 'static>, CountersError> {
        let mut sampler = st.profiler.pc_enable(Context::from_raw(ctx.cast()))?;
        let mut c = PcSamplingConfig::continuous(RECORDS_PER_BUFFER);
        c.period = self.config.period;
        sampler.configure(&c)?;
        Ok(sampler)
    }

    /// A module's cubin is kept once per CRC, within [`MAX_CUBIN_BYTES`].
    fn module_loaded(&self, cubin: &[u8]) {
        let Ok(mut src) = self.sources.lock() else {
            return;
        };
        let crc = src.profiler.cubin_crc(cubin);
        src.profiler.take_calls();
        let Ok(crc) = crc else {
            self.info.update(|i| i.cubins_not_kept += 1);
            return;
        };
        if src.cubins.iter().any(|c| c.crc == crc) {
            return;
        }
        if src.cubin_bytes + cubin.len() > MAX_CUBIN_BYTES {
            self.info.update(|i| i.cubins_not_kept += 1);
            return;
        }
        src.cubin_bytes += cubin.len();
        src.cubins.push(Cubin {
            crc,
            bytes: cubin.to_vec(),
        });
    }

    /// Before a module goes, its context's PCs are read (continuous mode's flush).
    fn module_unloading(&self, ctx: *mut c_void) -> Option<String> {
        let mut st = self.sessions.lock().ok()?;
        let i = st.list.iter().position(|s| s.ctx == ctx as usize)?;
        let r = self.read_all(&mut st.list[i]);
        st.profiler.take_calls();
        let e = r.err()?;
        let msg = failure_message(&e, &self.config.hints());
        let sess = st.list.swap_remove(i);
        self.close(sess);
        Some(self.fail(&mut st, msg))
    }

    fn context_destroyed(&self, ctx: *mut c_void) {
        let Ok(mut st) = self.sessions.lock() else {
            return;
        };
        if let Some(i) = st.list.iter().position(|s| s.ctx == ctx as usize) {
            let sess = st.list.swap_remove(i);
            self.close(sess);
        }
        st.profiler.take_calls();
    }

    /// Last read, then Disable, whose buffer holds what was left; both queued.
    fn close(&self, sess: Session) {
        let mut sess = sess;
        let _ = self.read_all(&mut sess);
        let reasons = std::sync::Arc::new(sess.sampler.stall_reasons().clone());
        let device = sess.device;
        match sess.sampler.disable() {
            Ok(batch) => {
                // What Disable could not fit is lost (the header: "discarded").
                let lost = batch.totals.pcs_remaining;
                self.queue(Read {
                    device,
                    reasons,
                    batch,
                    lost,
                });
            }
            Err(e) => {
                let msg = failure_message(&e, &self.config.hints());
                self.info.update(|i| {
                    i.error.get_or_insert(format!("PC sampling: {msg}"));
                });
            }
        }
    }

    /// Reads a session until CUPTI has nothing left (or `MAX_READS_PER_DRAIN` reads), queueing
    /// each read.
    fn read_all(&self, sess: &mut Session) -> Result<(), CountersError> {
        let reasons = std::sync::Arc::new(sess.sampler.stall_reasons().clone());
        for _ in 0..MAX_READS_PER_DRAIN {
            let batch = sess.sampler.get_data()?;
            let more = batch.totals.pcs_remaining > 0 && !batch.records.is_empty();
            self.queue(Read {
                device: sess.device,
                reasons: reasons.clone(),
                batch,
                lost: 0,
            });
            if !more {
                break;
            }
        }
        Ok(())
    }

    /// Queues a read for the decode thread; past [`MAX_PENDING_PCS`] its records are counted
    /// lost and only its totals kept.
    fn queue(&self, mut r: Read) {
        let Ok(mut q) = self.pending.lock() else {
            return;
        };
        let n = r.batch.records.len();
        if q.1 + n > MAX_PENDING_PCS {
            r.lost = r.lost.saturating_add(n as u64);
            r.batch.records.clear();
        }
        q.1 += r.batch.records.len();
        q.0.push(r);
    }

    /// Turns every queued read into rows (the decode thread, and the exit).
    fn absorb_pending(&self) {
        let reads = match self.pending.lock() {
            Ok(mut q) => {
                q.1 = 0;
                std::mem::take(&mut q.0)
            }
            Err(_) => return,
        };
        for r in reads {
            self.absorb(&r);
        }
    }

    /// One read's totals into the facts and its records into rows for the writer.
    fn absorb(&self, read: &Read) {
        let (b, reasons, device) = (&read.batch, &*read.reasons, read.device);
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
                let live = r.stalls.iter().filter(|s| s.samples > 0).count() as u64;
                let Some(function) = names.id(fname) else {
                    left_out += live;
                    continue;
                };
                let src = self.source_line(&mut names, (r.cubin_crc, function, r.pc_offset), fname);
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
            i.samples_total = i.samples_total.saturating_add(t.total_samples);
            i.samples_dropped = i.samples_dropped.saturating_add(t.dropped_samples);
            i.samples_non_user = i.samples_non_user.saturating_add(t.non_user_kernel_samples);
            i.hardware_buffer_full += u64::from(t.hardware_buffer_full);
            i.pcs_lost = i
                .pcs_lost
                .saturating_add(p.pcs_beyond_capacity)
                .saturating_add(read.lost);
            i.records_odd = i.records_odd.saturating_add(odd);
            i.rows_dropped_queue += left_out + if pushed { 0 } else { queued };
        });
    }

    /// The source line of an instruction, looked up once (the first time it is seen, while
    /// the cache has room) in the kept cubin with its CRC. `None` when no kept cubin has that
    /// CRC or it has no line information.
    fn source_line(&self, names: &mut Names, pc: Pc, function: &str) -> Option<(u32, u32)> {
        let mut src = self.sources.lock().ok()?;
        if let Some(&l) = src.lines.get(&pc) {
            return l;
        }
        if src.lines.len() >= MAX_LINES {
            return None;
        }
        let found = src.cubins.iter().find(|c| c.crc == pc.0).and_then(|c| {
            src.profiler
                .sass_to_source(&c.bytes, function, pc.2)
                .ok()
                .flatten()
        });
        src.profiler.take_calls();
        let l = found.and_then(|line| {
            let file = if line.dir.is_empty() {
                line.file
            } else {
                format!("{}/{}", line.dir.trim_end_matches('/'), line.file)
            };
            Some((names.id(&file)?, line.line))
        });
        src.lines.insert(pc, l);
        l
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
