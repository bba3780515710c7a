//! PM Sampling for `cutrace sample`: one CUPTI PM Sampling session per device, time-interval
//! trigger, decoded on its own thread (`cutrace-pm-decode`) into timed values for the writer.
//!
//! A session is opened when the first context on a device is created
//! (`CUPTI_CBID_RESOURCE_CONTEXT_CREATED`), on that application thread, so sampling runs before
//! the device's first kernel; that one-time setup is the only work done on the application's
//! threads. The decode thread drains the hardware buffer every `DECODE_PERIOD`; at exit (or
//! when the context that opened a session is destroyed) the session is drained a last time
//! (see `close` for why it is not stopped). The first sample of each session is dropped (CUPTI documents it as a possible
//! outlier) and counted; hardware-buffer overflows are counted, and the samples they cost are
//! estimated from the gaps they leave. A failure turns sampling off with one message while
//! tracing carries on, unless `--require-counters` was given.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use cutrace_counters::pm::{self, PmSampler, SamplerConfig, Trigger};
use cutrace_counters::{CountersError, Host, Profiler, ProfilerKind};
use cutrace_cupti::api::{self, ResourceData, Subscription};
use cutrace_cupti::Cupti;
use cutrace_settings::{var, Problem, Settings};
use cutrace_trace::PmSamplingInfo;

use crate::counters::{failure_message, CounterConfig};

/// How often the decode thread drains the hardware buffers.
const DECODE_PERIOD: Duration = Duration::from_millis(50);
/// The hardware buffer per device (Kineto's choice); with KEEP_LATEST an overflow overwrites
/// the oldest samples, which the gap count then finds.
const HARDWARE_BUFFER_BYTES: usize = 64 << 20;
/// Samples the counter-data image holds per decode; a fuller buffer takes several decodes.
const SAMPLES_PER_DECODE: u32 = 4096;
/// Values waiting for the writer, at most; past it samples are dropped and counted.
const MAX_PENDING_VALUES: usize = 1 << 22;

/// What `cutrace sample` asked for (`Settings::pm_sampling`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleConfig {
    pub metrics: Vec<String>,
    pub interval_ns: u64,
    /// Devices to sample; all when `None`.
    pub devices: Option<Vec<u32>>,
    /// Metrics that may be left out where the device lacks them (NVLink in the default set).
    pub optional: Vec<String>,
    pub require: bool,
    pub access_hint: Option<String>,
    pub holders_hint: Option<String>,
}

impl SampleConfig {
    /// `Ok(None)` when sampling was not asked for; `Err` for settings that cannot be used.
    pub fn from_settings(
        s: &Settings,
        problems: &[Problem],
    ) -> Result<Option<SampleConfig>, String> {
        let Some(p) = &s.pm_sampling else {
            return Ok(None);
        };
        if let Some(bad) = problems
            .iter()
            .find(|x| [var::PM_INTERVAL_NS, var::PM_DEVICES].contains(&x.var))
        {
            return Err(bad.to_string());
        }
        if p.interval_ns == Some(0) {
            return Err(format!(
                "{}=0 is not a positive number",
                var::PM_INTERVAL_NS
            ));
        }
        let a = &s.counter_access;
        Ok(Some(SampleConfig {
            metrics: p.metrics.clone(),
            interval_ns: p.interval_ns.unwrap_or(1_000_000),
            devices: p.devices.clone(),
            optional: p.optional.clone(),
            require: a.require,
            access_hint: a.access_hint.clone(),
            holders_hint: a.holders_hint.clone(),
        }))
    }

    /// The failure message's settings, shared with `cutrace profile`'s.
    fn hints(&self) -> CounterConfig {
        CounterConfig {
            metrics: self.metrics.clone(),
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

/// One sample's value of one metric (index into `SampleConfig::metrics`), for the writer.
/// Times are CUPTI's sample timestamps.
#[derive(Debug, Clone, Copy)]
pub struct Value {
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    pub metric: usize,
    pub value: f64,
}

/// A PM Sampling session on one device.
struct Session {
    device: u32,
    /// The context whose creation opened it; its destruction closes it.
    ctx: usize,
    host: Host<'static, 'static>,
    sampler: PmSampler<'static, 'static>,
    /// This device's sampler's metrics, as indices into `SampleConfig::metrics`.
    metrics: Vec<usize>,
    /// The first sample was seen (and dropped).
    first_seen: bool,
    /// The end of the last sample kept, for the gap count.
    last_end: Option<u64>,
}

struct State {
    profiler: &'static Profiler<'static>,
    initialized: bool,
    sessions: Vec<Session>,
    /// Devices a session was opened (or tried) on: each device is sampled once.
    tried: Vec<u32>,
    off: bool,
}

// SAFETY: the CUPTI objects inside (host and PM Sampling handles, the profiler's call log) are
// used only while the `Sampling::state` mutex is held, one thread at a time; CUPTI's profiler
// objects are not bound to the thread that made them.
unsafe impl Send for State {}

pub struct Sampling {
    pub config: SampleConfig,
    cupti: &'static Cupti,
    state: Mutex<State>,
    values: Mutex<Vec<Value>>,
    /// The sampling facts, for the writer's META chunks.
    pub info: crate::counters::Versioned<PmSamplingInfo>,
    told: AtomicBool,
    stop: AtomicBool,
}

static SAMPLING: OnceLock<Sampling> = OnceLock::new();

pub fn get() -> Option<&'static Sampling> {
    SAMPLING.get()
}

/// Sets sampling up for this process: context callbacks on `sub` and the decode thread.
pub fn start(
    cupti: &'static Cupti,
    sub: &Subscription,
    config: SampleConfig,
) -> Result<(), String> {
    let profiler: &'static Profiler<'static> = Box::leak(Box::new(Profiler::new(cupti)));
    let info = PmSamplingInfo {
        metrics: config.metrics.clone(),
        interval_ns: config.interval_ns,
        ..PmSamplingInfo::default()
    };
    let s = Sampling {
        config,
        cupti,
        state: Mutex::new(State {
            profiler,
            initialized: false,
            sessions: Vec::new(),
            tried: Vec::new(),
            off: false,
        }),
        values: Mutex::new(Vec::new()),
        info: crate::counters::Versioned::new(info),
        told: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    };
    if SAMPLING.set(s).is_err() {
        return Ok(());
    }
    for cbid in [
        api::CBID_RESOURCE_CONTEXT_CREATED,
        api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
    ] {
        cupti
            .enable_callback(sub, api::CB_DOMAIN_RESOURCE, cbid, true)
            .map_err(|e| format!("PM sampling is off: {e}"))?;
    }
    std::thread::Builder::new()
        .name("cutrace-pm-decode".into())
        .spawn(decode_loop)
        .map_err(|e| format!("PM sampling is off: no decode thread ({e})"))?;
    Ok(())
}

/// The CUPTI callback, for the resource domain (the caller catches panics).
///
/// # Safety
/// `data` must be what CUPTI passes for `domain`, valid for the call.
pub unsafe fn on_callback(domain: u32, cbid: u32, data: *const std::ffi::c_void) {
    let Some(s) = get() else { return };
    if domain != api::CB_DOMAIN_RESOURCE || data.is_null() {
        return;
    }
    // SAFETY: CUPTI passes a CUpti_ResourceData for the resource domain.
    let ctx = unsafe { &*(data as *const ResourceData) }.context;
    if cbid == api::CBID_RESOURCE_CONTEXT_CREATED {
        s.context_created(ctx);
    } else if cbid == api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING {
        s.context_destroyed(ctx);
    }
}

/// Stops every session, drains it and disables it (at exit, before the writer's last chunk).
pub fn finish() {
    let Some(s) = get() else { return };
    s.stop.store(true, Ordering::SeqCst);
    // Not `lock()`: `--require-counters` exits from inside `fail`, with this thread holding the
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
        s.close(sess);
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
        for sess in st.sessions.iter_mut() {
            if let Err(e) = s.drain(sess) {
                failed = Some(e);
                break;
            }
        }
        st.profiler.take_calls();
        if let Some(e) = failed {
            let msg = failure_message(&e, &s.config.hints());
            st.sessions.clear();
            s.fail(&mut st, msg);
        }
    }
}

/// Gaps between consecutive samples longer than 1.5 intervals: how many samples fit in them.
pub fn samples_in_gap(prev_end: u64, start: u64, interval_ns: u64) -> u64 {
    let gap = start.saturating_sub(prev_end);
    if interval_ns == 0 || gap * 2 < interval_ns * 3 {
        return 0;
    }
    (gap + interval_ns / 2) / interval_ns
}

impl Sampling {
    /// Sampling stops for this run: says why once (and exits with `--require-counters`).
    fn fail(&self, st: &mut State, msg: String) {
        st.off = true;
        let shown = format!("PM sampling is off: {msg}");
        self.info.update(|i| {
            i.error.get_or_insert(shown.clone());
        });
        crate::counters::say_off(&self.told, self.config.require, &shown);
    }

    fn context_created(&self, ctx: *mut std::ffi::c_void) {
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
        let wanted = self
            .config
            .devices
            .as_ref()
            .is_none_or(|d| d.contains(&device));
        if !wanted || st.tried.contains(&device) {
            return;
        }
        st.tried.push(device);
        match self.open(&mut st, ctx, device) {
            Ok(sess) => {
                self.info.update(|i| i.devices.push(device));
                st.sessions.push(sess);
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
        st: &mut State,
        ctx: *mut std::ffi::c_void,
        device: u32,
    ) -> Result<Session, CountersError> {
        let p = st.profiler;
        if !st.initialized {
            p.initialize()?;
            st.initialized = true;
        }
        let chip = p.chip_name(device as usize)?.unwrap_or_default();
        let availability = p.pm_counter_availability(device as usize)?;
        let mut names: Vec<&str> = self.config.metrics.iter().map(String::as_str).collect();
        let plan = match pm::pm_plan(p, &chip, Some(&availability), &names) {
            Ok(plan) => plan,
            // A device without NVLink lacks its counters: the default set goes on without them.
            Err(CountersError::MetricRefused { metric, .. })
                if self.config.optional.contains(&metric) =>
            {
                let left: Vec<String> = self
                    .config
                    .optional
                    .iter()
                    .filter(|m| names.contains(&m.as_str()))
                    .cloned()
                    .collect();
                names.retain(|n| !left.iter().any(|l| l == n));
                self.info.update(|i| {
                    for l in &left {
                        if !i.left_out.contains(l) {
                            i.left_out.push(l.clone());
                        }
                    }
                });
                pm::pm_plan(p, &chip, Some(&availability), &names)?
            }
            Err(e) => return Err(e),
        };
        let host = p.host(ProfilerKind::PmSampling, &chip, Some(&availability))?;
        host.add_metrics(&names)?;
        let mut sampler = p.pm_enable(device as usize)?;
        sampler.set_config(
            &plan.config,
            &SamplerConfig {
                interval: self.config.interval_ns,
                trigger: Trigger::TimeInterval,
                hardware_buffer_bytes: HARDWARE_BUFFER_BYTES,
                keep_latest: true,
            },
        )?;
        sampler.initialize_counter_data(&names, SAMPLES_PER_DECODE)?;
        sampler.start()?;
        let metrics = names
            .iter()
            .filter_map(|n| self.config.metrics.iter().position(|m| m == n))
            .collect();
        Ok(Session {
            device,
            ctx: ctx as usize,
            host,
            sampler,
            metrics,
            first_seen: false,
            last_end: None,
        })
    }

    fn context_destroyed(&self, ctx: *mut std::ffi::c_void) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if let Some(i) = st.sessions.iter().position(|s| s.ctx == ctx as usize) {
            let sess = st.sessions.swap_remove(i);
            self.close(sess);
        }
        st.profiler.take_calls();
    }

    /// Stop, last drain, disable (the sampler is disabled when `sess` is dropped).
    /// The last drain. The session is then left to the end of the process, neither stopped
    /// nor disabled: on the H200 with CUDA 13.0, cuptiPmSamplingStop at exit crashes inside
    /// CUPTI (a segmentation fault or a double free, every time, in gpu/sample.sh runs; the
    /// same runs without it finish cleanly), and the driver releases the counters when the
    /// process ends. Only the samples completed after this drain, under one interval, are not
    /// read.
    fn close(&self, sess: Session) {
        let mut sess = sess;
        let _ = self.drain(&mut sess);
        std::mem::forget(sess);
    }

    /// Decodes everything the hardware buffer holds, queueing each completed sample's values.
    fn drain(&self, sess: &mut Session) -> Result<(), CountersError> {
        let names: Vec<&str> = sess
            .metrics
            .iter()
            .map(|&i| self.config.metrics[i].as_str())
            .collect();
        loop {
            let d = sess.sampler.decode()?;
            if d.overflow {
                self.info.update(|i| i.overflows += 1);
            }
            let counts = sess.sampler.counts()?;
            let mut batch = Vec::with_capacity(counts.completed * names.len());
            let (mut kept, mut lost, mut first) = (0u64, 0u64, 0u64);
            for k in 0..counts.completed {
                let (start, end) = sess.sampler.sample_times(k)?;
                if !sess.first_seen {
                    sess.first_seen = true;
                    first += 1;
                    sess.last_end = Some(end);
                    continue;
                }
                if let Some(prev) = sess.last_end {
                    lost += samples_in_gap(prev, start, self.config.interval_ns);
                }
                sess.last_end = Some(end);
                let values = sess
                    .sampler
                    .evaluate(&sess.host, k, &names)
                    .unwrap_or_else(|_| vec![f64::NAN; names.len()]);
                batch.extend(
                    values
                        .iter()
                        .zip(&sess.metrics)
                        .map(|(&value, &metric)| Value {
                            start_ns: start,
                            end_ns: end,
                            device: sess.device,
                            metric,
                            value,
                        }),
                );
                kept += 1;
            }
            sess.sampler.reset_counter_data()?;
            let queued = self.push(batch);
            if kept + lost + first > 0 {
                self.info.update(|i| {
                    i.first_samples_dropped += first;
                    i.samples_lost += lost;
                    if queued {
                        i.samples += kept;
                    } else {
                        i.samples_dropped_queue += kept;
                    }
                });
            }
            if !d.image_full {
                return Ok(());
            }
        }
    }

    /// Queues values for the writer; `false` (nothing queued) when the queue is full.
    fn push(&self, batch: Vec<Value>) -> bool {
        let Ok(mut q) = self.values.lock() else {
            return false;
        };
        if q.len() + batch.len() > MAX_PENDING_VALUES {
            return false;
        }
        q.extend(batch);
        true
    }

    /// The values queued so far (the writer's side).
    pub fn take_values(&self) -> Vec<Value> {
        self.values
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(env: &[(&str, &str)]) -> Result<Option<SampleConfig>, String> {
        let (s, problems) =
            Settings::from_env(&|k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).into()));
        SampleConfig::from_settings(&s, &problems)
    }

    #[test]
    fn settings_come_from_the_environment() {
        assert_eq!(config(&[]).unwrap(), None);
        let c = config(&[
            (var::PM_METRICS, "a.sum, b.avg ,"),
            (var::PM_INTERVAL_NS, "100000"),
            (var::PM_DEVICES, "0,2"),
            (var::PM_OPTIONAL, "b.avg"),
            (var::COUNTERS_REQUIRE, "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.metrics, ["a.sum", "b.avg"]);
        assert_eq!(c.interval_ns, 100_000);
        assert_eq!(c.devices, Some(vec![0, 2]));
        assert_eq!(c.optional, ["b.avg"]);
        assert!(c.require);
        let e = config(&[(var::PM_METRICS, "a"), (var::PM_INTERVAL_NS, "0")]);
        assert!(e.unwrap_err().contains(var::PM_INTERVAL_NS));
        let e = config(&[(var::PM_METRICS, "a"), (var::PM_DEVICES, "x")]);
        assert!(e.unwrap_err().contains(var::PM_DEVICES));
    }

    #[test]
    fn gaps_count_the_samples_that_fit_in_them() {
        // Back to back, or late by less than half an interval: nothing lost.
        assert_eq!(samples_in_gap(1_000, 1_000, 100), 0);
        assert_eq!(samples_in_gap(1_000, 1_140, 100), 0);
        // A gap of three intervals held three samples.
        assert_eq!(samples_in_gap(1_000, 1_300, 100), 3);
        assert_eq!(samples_in_gap(1_000, 1_160, 100), 2);
        // Out of order or no interval: nothing.
        assert_eq!(samples_in_gap(2_000, 1_000, 100), 0);
        assert_eq!(samples_in_gap(1_000, 9_000, 0), 0);
    }
}
