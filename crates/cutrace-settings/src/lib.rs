//! The contract between `cutrace record` (and `profile`, `sample`) and the library it injects
//! into the program: every setting, typed, and its encoding in the program's environment. The
//! recorder fills a [`Settings`] and writes it with [`Settings::to_env`]; the injected library
//! reads it back with [`Settings::from_env`]. The variables' names are in [`var`] and nowhere
//! else; a later feature adds its settings here and nowhere else.
//!
//! The encoding is plain text, one variable a setting: numbers in decimal, lists comma-separated,
//! flags `1` (or, for [`Settings::subscribe`], `0` when off). A setting left at its default is
//! not written, so an untouched environment means the defaults. Decoding never fails: a value
//! that does not parse is left unset and named in a [`Problem`], for the library to report
//! (it cannot print to the program's terminal, so its reports go into the trace).
//!
//! What the settings mean (ranges, defaults, what a bad value falls back to) belongs to the code
//! that applies them: this crate only says what was asked for.

use std::ffi::OsString;
use std::path::PathBuf;

pub mod var;

/// Activity kinds by cutrace's names (`--kinds`), in enabling order, with what each records.
pub const KINDS: &[(&str, &str)] = &[
    (
        "kernel",
        "kernel executions (CONCURRENT_KERNEL; KERNEL with --serialize-kernels)",
    ),
    (
        "runtime",
        "CUDA runtime API calls (needed to join kernels to their launch)",
    ),
    ("driver", "CUDA driver API calls"),
    ("memcpy", "memory copies"),
    ("memset", "memsets"),
    ("sync", "synchronizations (stream/event/context)"),
    ("nvtx", "NVTX ranges and marks"),
    ("overhead", "time CUPTI itself spent"),
    (
        "memory",
        "CUDA allocations and frees, and memory pools (MEMORY2, MEMORY_POOL; off unless named or --memory)",
    ),
];

/// Kinds of [`KINDS`] recorded only when asked for: their cost has not been measured to be in
/// the noise (`cutrace record --memory`).
pub const OPT_IN_KINDS: &[&str] = &["memory"];

/// The kinds recorded when none are named: every one of [`KINDS`] but [`OPT_IN_KINDS`]. DRIVER
/// is among them because libraries (cuBLAS, Triton) launch kernels with the driver API: without
/// it those kernels are orphans (docs/ARCHITECTURE.md).
/// This process's pid namespace as /proc names it (`pid:[4026531836]`); empty where /proc
/// cannot say. `cutrace record` writes it into [`var::ROOT_PID`] beside its pid, and the
/// injected library compares its own against it, so a process of another namespace with the same
/// pid number is not taken for the one record became.
pub fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn default_kinds() -> Vec<String> {
    KINDS
        .iter()
        .filter(|(k, _)| !OPT_IN_KINDS.contains(k))
        .map(|(k, _)| (*k).to_owned())
        .collect()
}

/// Which CUDA runtime and driver API calls get a record (`cutrace record --api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ApiMode {
    /// Every call.
    All,
    /// Every call except the state queries that launch, move, allocate and synchronize nothing.
    #[default]
    Lean,
    /// Only calls that launch work or copy, set or prefetch memory.
    Launches,
}

impl ApiMode {
    pub const ALL: [ApiMode; 3] = [ApiMode::All, ApiMode::Lean, ApiMode::Launches];

    /// Its name in the environment, on the command line and in a part's header.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiMode::All => "all",
            ApiMode::Lean => "lean",
            ApiMode::Launches => "launches",
        }
    }

    pub fn parse(s: &str) -> Option<ApiMode> {
        ApiMode::ALL.into_iter().find(|m| m.as_str() == s.trim())
    }
}

/// Everything the injected library is told.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// Directory the parts go into; the working directory when unset.
    pub output_dir: Option<PathBuf>,
    /// Activity kinds by [`KINDS`] names; [`default_kinds`] when unset. Names that are not
    /// kinds are kept, for the library to report. An empty list cannot be said (it reads back
    /// as unset: every kind), nor can a name holding a comma: `record` refuses both.
    pub kinds: Option<Vec<String>>,
    /// The id of one `cutrace record` run, which every process it starts inherits.
    pub run_id: Option<String>,
    /// Bytes of one activity buffer.
    pub buffer_bytes: Option<u64>,
    /// Which API calls get records; [`ApiMode::Lean`] when unset.
    pub api: Option<ApiMode>,
    pub serialize_kernels: bool,
    pub record_cmdline: bool,
    /// Enable the same kinds and discard every record.
    pub discard: bool,
    /// `cutrace monitor`'s socket: send summaries there instead of writing a part.
    pub monitor_socket: Option<PathBuf>,
    /// Monitor mode's duty cycle: records on for part of each period only.
    pub monitor_duty: Option<Duty>,
    /// The uid the monitor's socket must be served by (the agent's), when pinned.
    pub monitor_uid: Option<u32>,
    /// The monitor's `--stuck-after`, in seconds: a process silent for half of it has CUPTI
    /// hand over what it holds (a forced flush), hung kernels included.
    pub monitor_stuck_after_s: Option<u64>,
    /// Benchmark knobs, passed through from the user's environment.
    pub knobs: Knobs,
    /// Hardware counters per kernel (`cutrace profile`).
    pub counters: Option<Counters>,
    /// PM sampling (`cutrace sample`).
    pub pm_sampling: Option<PmSampling>,
    /// PC sampling (`cutrace profile --pc-sampling`).
    pub pc_sampling: Option<PcSampling>,
    /// How `profile` and `sample` fail, and what their failures say.
    pub counter_access: CounterAccess,
}

/// Settings for measuring cutrace itself, not for users: `cutrace record` passes them on from
/// its own environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// RUNTIME records only for these callback ids.
    pub runtime_cbids: Option<Vec<u32>>,
    /// CUPTI's per-context device buffer for kernel records, in bytes.
    pub device_buffer_bytes: Option<u64>,
    pub max_buffers: Option<u64>,
    pub prealloc_buffers: Option<u64>,
    pub exit_deadline_ms: Option<u64>,
    pub flush_period_ms: Option<u64>,
    /// `false`: no CUPTI subscription.
    pub subscribe: bool,
    /// The overhead benchmarks' switch (`bench_hook.rs` in the library).
    pub bench_hook: bool,
    /// Print where profiled launches' time went, at exit.
    pub counters_timing: bool,
    /// Keep the counter-data images of the first N profiled kernels beside the part.
    pub counters_keep_images: Option<u64>,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            runtime_cbids: None,
            device_buffer_bytes: None,
            max_buffers: None,
            prealloc_buffers: None,
            exit_deadline_ms: None,
            flush_period_ms: None,
            subscribe: true,
            bench_hook: false,
            counters_timing: false,
            counters_keep_images: None,
        }
    }
}

/// `cutrace profile`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counters {
    /// Metric names, in order; counters are on when the list is not empty.
    pub metrics: Vec<String>,
    /// Only kernels whose mangled name matches this regex.
    pub kernels: Option<String>,
    pub max_kernels: Option<u64>,
    /// Every Nth matching kernel.
    pub every: Option<u64>,
}

/// `cutrace sample`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PmSampling {
    /// Metric names, in order; sampling is on when the list is not empty.
    pub metrics: Vec<String>,
    pub interval_ns: Option<u64>,
    /// Devices to sample; all when unset.
    pub devices: Option<Vec<u32>>,
    /// Metrics that may be left out where the device lacks them.
    pub optional: Vec<String>,
}

/// A duty cycle: on for the first `on_ms` of every `period_ms` (`ON_MS/PERIOD_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duty {
    pub on_ms: u64,
    pub period_ms: u64,
}

impl Duty {
    /// `ON/PERIOD`, each a number with `ms` or `s` (bare: ms), the on time shorter than the
    /// period and neither 0: `2s/20s`, `500ms/10s`, `2000/20000`.
    pub fn parse(text: &str) -> Option<Duty> {
        let ms = |t: &str| -> Option<u64> {
            let t = t.trim();
            let (n, scale) = if let Some(n) = t.strip_suffix("ms") {
                (n, 1)
            } else if let Some(n) = t.strip_suffix('s') {
                (n, 1000)
            } else {
                (t, 1)
            };
            n.trim().parse::<u64>().ok()?.checked_mul(scale)
        };
        let (on, period) = text.split_once('/')?;
        let d = Duty {
            on_ms: ms(on)?,
            period_ms: ms(period)?,
        };
        (d.on_ms > 0 && d.on_ms < d.period_ms).then_some(d)
    }

    /// The form [`Duty::parse`] reads, in ms.
    pub fn text(&self) -> String {
        format!("{}/{}", self.on_ms, self.period_ms)
    }
}

/// `cutrace profile --pc-sampling`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PcSampling {
    /// CUPTI's period exponent (a sample every 2^N cycles per SM); CUPTI's default when unset.
    pub period: Option<u32>,
}

/// Shared by `profile`, `sample` and PC sampling.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CounterAccess {
    /// The program fails when counters cannot be read.
    pub require: bool,
    /// The doctor's counter-access verdict and fix, for an INSUFFICIENT_PRIVILEGES message.
    pub access_hint: Option<String>,
    /// The doctor's verdict on who holds the counters, for HARDWARE_BUSY.
    pub holders_hint: Option<String>,
}

/// A variable whose value could not be read; the setting is left unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub var: &'static str,
    pub value: String,
    /// What the value should have been: `a number`, `a list of numbers`, ….
    pub expected: &'static str,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?} is not {}", self.var, self.value, self.expected)
    }
}

/// Reads one variable at a time, gathering what does not parse.
struct Reader<'a> {
    get: &'a dyn Fn(&str) -> Option<OsString>,
    problems: Vec<Problem>,
}

impl Reader<'_> {
    /// The value as text; not UTF-8 is a problem, empty is unset.
    fn text(&mut self, var: &'static str) -> Option<String> {
        let v = (self.get)(var)?;
        match v.into_string() {
            Ok(s) if s.is_empty() => None,
            Ok(s) => Some(s),
            Err(raw) => {
                self.problems.push(Problem {
                    var,
                    value: raw.to_string_lossy().into_owned(),
                    expected: "UTF-8 text",
                });
                None
            }
        }
    }

    fn path(&mut self, var: &'static str) -> Option<PathBuf> {
        (self.get)(var).filter(|v| !v.is_empty()).map(PathBuf::from)
    }

    fn flag(&mut self, var: &'static str) -> bool {
        self.text(var).as_deref() == Some("1")
    }

    fn parsed<T>(
        &mut self,
        var: &'static str,
        expected: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let s = self.text(var)?;
        let got = parse(s.trim());
        if got.is_none() {
            self.problems.push(Problem {
                var,
                value: s,
                expected,
            });
        }
        got
    }

    fn number(&mut self, var: &'static str) -> Option<u64> {
        self.parsed(var, "a number", |s| s.parse().ok())
    }

    fn numbers(&mut self, var: &'static str) -> Option<Vec<u32>> {
        self.parsed(var, "a list of numbers", |s| {
            split(s).iter().map(|x| x.parse().ok()).collect()
        })
    }

    fn list(&mut self, var: &'static str) -> Vec<String> {
        self.text(var).map(|s| split(&s)).unwrap_or_default()
    }
}

/// A comma-separated list, each item trimmed, empty items dropped.
fn split(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

fn join<T: ToString>(items: &[T]) -> OsString {
    items
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(",")
        .into()
}

impl Settings {
    /// Reads the settings from an environment (`std::env::var_os` in the library), with what
    /// could not be read.
    pub fn from_env(get: &dyn Fn(&str) -> Option<OsString>) -> (Settings, Vec<Problem>) {
        let mut r = Reader {
            get,
            problems: Vec::new(),
        };
        let counters = Counters {
            metrics: r.list(var::COUNTERS),
            kernels: r.text(var::COUNTERS_KERNELS),
            max_kernels: r.number(var::COUNTERS_MAX_KERNELS),
            every: r.number(var::COUNTERS_EVERY),
        };
        let pm_sampling = PmSampling {
            metrics: r.list(var::PM_METRICS),
            interval_ns: r.number(var::PM_INTERVAL_NS),
            devices: r.numbers(var::PM_DEVICES),
            optional: r.list(var::PM_OPTIONAL),
        };
        let s = Settings {
            output_dir: r.path(var::OUTPUT_DIR),
            kinds: r.text(var::KINDS).map(|s| split(&s)),
            run_id: r.text(var::RUN_ID),
            buffer_bytes: r.number(var::BUFFER_BYTES),
            api: r.parsed(var::API, "one of all, lean, launches", ApiMode::parse),
            serialize_kernels: r.flag(var::SERIALIZE_KERNELS),
            record_cmdline: r.flag(var::RECORD_CMDLINE),
            discard: r.flag(var::DISCARD),
            monitor_socket: r.path(var::MONITOR_SOCKET),
            monitor_uid: r
                .number(var::MONITOR_UID)
                .and_then(|n| u32::try_from(n).ok()),
            monitor_stuck_after_s: r.number(var::MONITOR_STUCK_AFTER),
            monitor_duty: r.parsed(
                var::MONITOR_DUTY,
                "ON_MS/PERIOD_MS, on shorter than the period",
                Duty::parse,
            ),
            knobs: Knobs {
                runtime_cbids: r.numbers(var::RUNTIME_CBIDS),
                device_buffer_bytes: r.number(var::DEVICE_BUFFER_BYTES),
                max_buffers: r.number(var::MAX_BUFFERS),
                prealloc_buffers: r.number(var::PREALLOC_BUFFERS),
                exit_deadline_ms: r.number(var::EXIT_DEADLINE_MS),
                flush_period_ms: r.number(var::FLUSH_PERIOD_MS),
                subscribe: r.text(var::SUBSCRIBE).as_deref() != Some("0"),
                bench_hook: r.flag(var::BENCH_HOOK),
                counters_timing: r.flag(var::COUNTERS_TIMING),
                counters_keep_images: r.number(var::COUNTERS_KEEP_IMAGES),
            },
            counters: (!counters.metrics.is_empty()).then_some(counters),
            pm_sampling: (!pm_sampling.metrics.is_empty()).then_some(pm_sampling),
            pc_sampling: r.flag(var::PC_SAMPLING).then(|| PcSampling {
                period: r.parsed(var::PC_PERIOD, "a number", |s| s.parse().ok()),
            }),
            counter_access: CounterAccess {
                require: r.flag(var::COUNTERS_REQUIRE),
                access_hint: r.text(var::COUNTERS_ACCESS_HINT),
                holders_hint: r.text(var::COUNTERS_HOLDERS_HINT),
            },
        };
        (s, r.problems)
    }

    /// The variables that say these settings, each once; a setting at its default is left out.
    /// The program's environment should hold these and none of the other [`var::INJECTION`]
    /// variables.
    pub fn to_env(&self) -> Vec<(&'static str, OsString)> {
        let mut env: Vec<(&'static str, OsString)> = Vec::new();
        let mut put = |var: &'static str, v: Option<OsString>| {
            if let Some(v) = v {
                env.push((var, v));
            }
        };
        let num = |n: Option<u64>| n.map(|n| OsString::from(n.to_string()));
        let text = |s: &Option<String>| s.as_ref().map(OsString::from);
        let flag = |on: bool| on.then(|| OsString::from("1"));
        put(
            var::OUTPUT_DIR,
            self.output_dir.as_ref().map(|p| p.as_os_str().to_owned()),
        );
        put(var::KINDS, self.kinds.as_deref().map(join));
        put(var::RUN_ID, text(&self.run_id));
        put(var::BUFFER_BYTES, num(self.buffer_bytes));
        put(var::API, self.api.map(|m| m.as_str().into()));
        put(var::SERIALIZE_KERNELS, flag(self.serialize_kernels));
        put(var::RECORD_CMDLINE, flag(self.record_cmdline));
        put(var::DISCARD, flag(self.discard));
        put(
            var::MONITOR_SOCKET,
            self.monitor_socket
                .as_ref()
                .map(|p| p.as_os_str().to_owned()),
        );
        put(
            var::MONITOR_DUTY,
            self.monitor_duty.map(|d| d.text().into()),
        );
        put(
            var::MONITOR_UID,
            self.monitor_uid.map(|u| u.to_string().into()),
        );
        put(
            var::MONITOR_STUCK_AFTER,
            self.monitor_stuck_after_s.map(|u| u.to_string().into()),
        );
        let k = &self.knobs;
        put(var::RUNTIME_CBIDS, k.runtime_cbids.as_deref().map(join));
        put(var::DEVICE_BUFFER_BYTES, num(k.device_buffer_bytes));
        put(var::MAX_BUFFERS, num(k.max_buffers));
        put(var::PREALLOC_BUFFERS, num(k.prealloc_buffers));
        put(var::EXIT_DEADLINE_MS, num(k.exit_deadline_ms));
        put(var::FLUSH_PERIOD_MS, num(k.flush_period_ms));
        put(var::SUBSCRIBE, (!k.subscribe).then(|| OsString::from("0")));
        put(var::BENCH_HOOK, flag(k.bench_hook));
        put(var::COUNTERS_TIMING, flag(k.counters_timing));
        put(var::COUNTERS_KEEP_IMAGES, num(k.counters_keep_images));
        if let Some(c) = &self.counters {
            put(var::COUNTERS, Some(join(&c.metrics)));
            put(var::COUNTERS_KERNELS, text(&c.kernels));
            put(var::COUNTERS_MAX_KERNELS, num(c.max_kernels));
            put(var::COUNTERS_EVERY, num(c.every));
        }
        if let Some(p) = &self.pm_sampling {
            put(var::PM_METRICS, Some(join(&p.metrics)));
            put(var::PM_INTERVAL_NS, num(p.interval_ns));
            put(var::PM_DEVICES, p.devices.as_deref().map(join));
            put(
                var::PM_OPTIONAL,
                (!p.optional.is_empty()).then(|| join(&p.optional)),
            );
        }
        if let Some(p) = &self.pc_sampling {
            put(var::PC_SAMPLING, flag(true));
            put(var::PC_PERIOD, p.period.map(|n| n.to_string().into()));
        }
        let a = &self.counter_access;
        put(var::COUNTERS_REQUIRE, flag(a.require));
        put(var::COUNTERS_ACCESS_HINT, text(&a.access_hint));
        put(var::COUNTERS_HOLDERS_HINT, text(&a.holders_hint));
        env
    }

    /// Reads the settings from this process's environment.
    pub fn from_process_env() -> (Settings, Vec<Problem>) {
        Settings::from_env(&|k| std::env::var_os(k))
    }
}

/// Which counter-reading run a program was started by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterRun {
    /// `cutrace profile`.
    Profile,
    /// `cutrace sample`.
    Sample,
}

/// The run a `NAME=VALUE` entry of a process's environment (`/proc/PID/environ`) shows, when it
/// is `cutrace profile`'s or `cutrace sample`'s metric list: such a program holds the GPU's
/// counters. (`cutrace record` removes both from a plain trace's program.)
pub fn counter_run(entry: &[u8]) -> Option<CounterRun> {
    [
        (var::COUNTERS, CounterRun::Profile),
        (var::PM_METRICS, CounterRun::Sample),
    ]
    .into_iter()
    .find(|(v, _)| {
        entry
            .strip_prefix(v.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
            .is_some_and(|value| !value.is_empty())
    })
    .map(|(_, run)| run)
}

#[cfg(test)]
mod tests;
