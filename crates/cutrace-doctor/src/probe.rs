//! `--probe`: ask CUPTI itself. On each GPU, start and end a Range Profiler session and record
//! CUPTI's result for every call, beside the static verdict.
//!
//! The session is cutrace-counters' Range Profiler API over cutrace-cupti's loader: the same
//! libcupti search as `record` (after the one the static checks found under `--root`), a missing
//! library or symbol a finding in the report, never a panic. The session runs in a forked child
//! process, so a crash or hang inside the driver or CUPTI is reported as such instead of taking
//! the doctor down.

// The forked child and its pipe are the only FFI left here; every CUPTI and driver call goes
// through cutrace-counters and cutrace-cupti.
#![deny(clippy::undocumented_unsafe_blocks)]

use serde::{Deserialize, Serialize};
use std::ffi::c_int;
use std::time::Duration;

use cutrace_counters::{
    Call, CountersError, Profiler, ProfilerKind, RangeMode, Refusal, ReplayMode, SessionConfig,
    SupportLevel,
};
use cutrace_cupti::driver::{Context, CudaDriver, CUDA_ERROR_STUB_LIBRARY};
use cutrace_cupti::error::CUPTI_ERROR_NOT_SUPPORTED;
use cutrace_cupti::locate::{self, Candidate};
use cutrace_cupti::Cupti;

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
            let (major, minor) = cutrace_cupti::version::driver_cuda_version(v.max(0) as u32);
            let _ = write!(out, "  driver CUDA version {major}.{minor}");
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
/// tries first comes from that root. After it, libcupti is looked for as `record` looks for it
/// (`cutrace_cupti::locate`) in this process, with `env` as its environment.
pub fn run(root: &crate::Root, env: &dyn Fn(&str) -> Option<String>) -> ProbeReport {
    let mut cands: Vec<Candidate> = crate::cupti_search::record_would_load(root)
        .map(|c| Candidate {
            path: root.path(&c.path),
            source: "the libcupti the static checks found",
        })
        .into_iter()
        .collect();
    cands.extend(locate::candidates_here(env));
    run_forked(&cands)
}

fn run_forked(cands: &[Candidate]) -> ProbeReport {
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
        // SAFETY: the child closes its copy of the read end, which it owns.
        unsafe { libc::close(r) };
        let report = probe_in_process(cands);
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
        // SAFETY: leaving the forked child without running the parent's atexit handlers or
        // destructors, which belong to the parent.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent closes its copy of the write end, which it owns.
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

// ---- The session, through cutrace-counters ----

fn step(cupti: &Cupti, call: &str, code: u32) -> Step {
    Step {
        call: call.into(),
        code: code as i32,
        result: result_name(cupti, code),
        detail: None,
    }
}

/// CUPTI's own name for a result (`cuptiGetResultString`), as the probe has always shown it.
fn result_name(cupti: &Cupti, code: u32) -> String {
    cupti
        .result_string(code)
        .unwrap_or_else(|| format!("CUptiResult {code}"))
}

fn steps_of(cupti: &Cupti, calls: Vec<Call>) -> Vec<Step> {
    calls
        .into_iter()
        .map(|c| step(cupti, c.call, c.code))
        .collect()
}

/// One device: retain its primary context, then start and stop a one-range session.
fn probe_device(cuda: &CudaDriver, profiler: &Profiler<'_>, ordinal: i32) -> DeviceProbe {
    let cupti = profiler.cupti();
    let (dev, name) = cuda.device(ordinal);
    let name = name.unwrap_or_else(|| "(unknown)".into());
    let ctx = match cuda.primary_ctx_retain(dev) {
        Ok(ctx) => ctx,
        Err(r) => {
            return DeviceProbe {
                ordinal,
                name,
                chip: None,
                verdict: Verdict::Inconclusive,
                explanation: format!("could not create a CUDA context: {}", cuda.error_name(r)),
                steps: vec![Step {
                    call: "cuDevicePrimaryCtxRetain".into(),
                    code: r,
                    result: cuda.error_name(r),
                    detail: None,
                }],
            };
        }
    };
    cuda.ctx_push_current(ctx);
    let mut chip = None;
    let mut support = None;
    let outcome = session(profiler, ctx, dev, ordinal, &mut chip, &mut support);
    cuda.ctx_pop_current();
    cuda.primary_ctx_release(dev);
    let mut steps = steps_of(cupti, profiler.take_calls());
    if let (Some(s), Some(detail)) = (
        steps
            .iter_mut()
            .find(|s| s.call == "cuptiProfilerDeviceSupported"),
        support,
    ) {
        s.detail = Some(detail);
    }
    let (verdict, explanation) = judge(outcome.as_ref().err(), &steps);
    DeviceProbe {
        ordinal,
        name,
        chip,
        verdict,
        explanation,
        steps,
    }
}

fn judge(failure: Option<&CountersError>, steps: &[Step]) -> (Verdict, String) {
    let Some(e) = failure else {
        return (
            Verdict::Available,
            "a Range Profiler session started and stopped: counters are available".into(),
        );
    };
    let Some(failed_call) = e.call() else {
        return (
            Verdict::Inconclusive,
            format!("{e}; the static verdict stands"),
        );
    };
    match e.refusal() {
        Refusal::Denied => (
            Verdict::Denied,
            format!("{failed_call}: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES -- counters are restricted to admins here (see counter-access)"),
        ),
        Refusal::Busy => (
            Verdict::Busy,
            format!("{failed_call}: CUPTI_ERROR_HARDWARE_BUSY -- another client holds the counters (see counter-holders; `cutrace dcgm pause --for 30m` if it is DCGM)"),
        ),
        Refusal::Unsupported if failed_call == "cuptiProfilerDeviceSupported" => {
            (Verdict::Unsupported, "this device or configuration does not support profiling".into())
        }
        Refusal::NotInitialized => (
            Verdict::Inconclusive,
            format!("{failed_call}: CUPTI_ERROR_NOT_INITIALIZED -- usually a CUPTI newer than the driver (see cupti-library)"),
        ),
        _ => {
            let result = steps
                .iter()
                .rev()
                .find(|s| s.call == failed_call)
                .map(|s| s.result.as_str())
                .unwrap_or("?");
            (Verdict::Inconclusive, format!("{failed_call} failed ({result}); the static verdict stands"))
        }
    }
}

/// The CUPTI calls of one device's session, in the order the probe has always made them:
/// device support, counter availability (size, image), chip name, a host config image for
/// [`PROBE_METRIC`], then Enable, counter data, SetConfig (user range, user replay), Start,
/// one pushed and popped range, Stop and Disable. Stops at the first failure, but a session that
/// was enabled is always disabled.
fn session(
    profiler: &Profiler<'_>,
    ctx: Context,
    dev: i32,
    ordinal: i32,
    chip: &mut Option<String>,
    support: &mut Option<String>,
) -> Result<(), CountersError> {
    if let Some(s) = profiler.device_supported(dev)? {
        *support = Some(s.describe());
        if s.is_supported != Some(SupportLevel::Supported) {
            return Err(CountersError::Call {
                call: "cuptiProfilerDeviceSupported",
                code: CUPTI_ERROR_NOT_SUPPORTED,
            });
        }
    }
    let availability = profiler.counter_availability(ctx)?;
    *chip = profiler.chip_name(ordinal as usize)?;

    // Host side: a config image for one metric; the host object is released before Enable.
    let config = {
        let host = profiler.host(
            ProfilerKind::RangeProfiler,
            chip.as_deref().unwrap_or(""),
            Some(&availability),
        )?;
        host.add_metrics(&[PROBE_METRIC])?;
        host.config_image()?
    };

    // Target side: enable, configure, one user range, disable.
    let mut rp = profiler.enable(ctx)?;
    let body = (|| {
        let size = rp.counter_data_size(&[PROBE_METRIC], 1, 1)?;
        rp.initialize_counter_data(size)?;
        rp.set_config(
            &config,
            &SessionConfig {
                range: RangeMode::User,
                replay: ReplayMode::User,
                max_ranges_per_pass: 1,
                num_nesting_levels: 1,
                min_nesting_level: 1,
                pass_index: 0,
                target_nesting_level: 1,
            },
        )?;
        rp.start()?;
        let pushed = rp.push_range("cutrace-doctor-probe");
        if pushed.is_ok() {
            let _ = rp.pop_range();
        }
        let stopped = rp.stop().map(drop);
        pushed.and(stopped)
    })();
    let disabled = rp.disable();
    body.and(disabled)
}

/// The probe itself, in this process. Prefer `run`, which isolates it in a child.
///
/// libcupti is the first of `cands` that loads (see [`run`] for the list it makes).
pub fn probe_in_process(cands: &[Candidate]) -> ProbeReport {
    let mut rep = ProbeReport::default();
    let cuda = match CudaDriver::load() {
        Ok(x) => x,
        Err(e) => return ProbeReport::failed(e.to_string()),
    };
    rep.libcuda = Some(cuda.name.clone());
    let r = cuda.init(0);
    rep.steps.push(Step {
        call: "cuInit".into(),
        code: r,
        result: cuda.error_name(r),
        detail: None,
    });
    if r != 0 {
        rep.cuda_unusable = r != CUDA_ERROR_STUB_LIBRARY;
        rep.error = Some(format!("cuInit failed: {}", cuda.error_name(r)));
        return rep;
    }
    rep.driver_cuda_version = cuda.driver_version().ok();
    let cupti = match Cupti::load(cands) {
        Ok(x) => x,
        Err(e) => {
            rep.error = Some(e.to_string());
            return rep;
        }
    };
    rep.libcupti = Some(cupti.path.clone());
    rep.cupti_api_version = cupti.version().ok();
    let count = match cuda.device_count() {
        Ok(n) if n > 0 => n,
        other => {
            let r = other.err().unwrap_or(0);
            rep.error = Some(format!("no CUDA device ({})", cuda.error_name(r)));
            return rep;
        }
    };
    let profiler = Profiler::new(&cupti);
    let init = profiler.initialize();
    rep.steps.extend(steps_of(&cupti, profiler.take_calls()));
    if let Err(e) = init {
        rep.error = Some(match e.code() {
            Some(code) => format!(
                "cuptiProfilerInitialize failed: {}",
                result_name(&cupti, code)
            ),
            None => e.to_string(),
        });
        // A refusal this early (privileges, a busy device) still answers the question per GPU.
        if matches!(e.refusal(), Refusal::Denied | Refusal::Busy) {
            let steps = rep.steps[rep.steps.len() - 1..].to_vec();
            let (verdict, explanation) = judge(Some(&e), &steps);
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
        rep.devices.push(probe_device(&cuda, &profiler, ordinal));
    }
    profiler.deinitialize();
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_cupti_results() {
        let fail = |call: &'static str, code| CountersError::Call { call, code };
        assert_eq!(judge(None, &[]).0, Verdict::Available);
        let (v, why) = judge(Some(&fail("cuptiRangeProfilerEnable", 35)), &[]);
        assert_eq!(v, Verdict::Denied);
        assert!(why.starts_with("cuptiRangeProfilerEnable:"), "{why}");
        assert_eq!(
            judge(Some(&fail("cuptiRangeProfilerStart", 26)), &[]).0,
            Verdict::Busy
        );
        assert_eq!(
            judge(Some(&fail("cuptiProfilerDeviceSupported", 27)), &[]).0,
            Verdict::Unsupported
        );
        let steps = [Step {
            call: "cuptiRangeProfilerSetConfig".into(),
            code: 1,
            result: "CUPTI_ERROR_INVALID_PARAMETER".into(),
            detail: None,
        }];
        let (v, why) = judge(Some(&fail("cuptiRangeProfilerSetConfig", 1)), &steps);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("CUPTI_ERROR_INVALID_PARAMETER"), "{why}");
        let (v, why) = judge(
            Some(&CountersError::MissingSymbol("cuptiRangeProfilerEnable")),
            &[],
        );
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("cuptiRangeProfilerEnable"), "{why}");
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
