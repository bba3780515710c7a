//! Two traces side by side ("before" and "after" a change): per GPU, busy and idle time, the
//! idle split and gap counts; launch-to-start latency; and the kernel and API names whose summed
//! time changed most. Pure over two [`Trace`]s, like the rest of this crate.
//!
//! Nothing here assumes the two traces cover the same amount of work. Totals (summed durations,
//! busy and idle nanoseconds) are only comparable when they do, so the diff says when they do not
//! (kernel counts more than 10 % apart; a faster or slower run of the same work is what a diff is
//! for) and keeps the length-independent figures beside them: busy as a share of the kernel
//! span, mean duration per call.
//!
//! Names are matched on a normalised key: the demangler cutrace uses writes a template argument
//! `(unsigned long)1` where torch.profiler's names (the C++ runtime's demangler) say `1ul`, so a
//! native trace and a Kineto trace of one program would otherwise list every such kernel twice. A trace with lost data
//! (incomplete, dropped records, orphans) is named in a caveat as well: its totals are lower
//! bounds. Traces with hardware counters compare them per kernel name ([`crate::counters`]), and
//! traces with PM samples compare their layers per GPU ([`crate::pm::pm_diff`]).

use std::collections::BTreeMap;

use cutrace_trace::{Ns, StrId, Trace};
use serde::Serialize;

use crate::correlate::LaunchLatency;
use crate::error::AnalysisError;
use crate::names::name_pair;
use crate::report::{analyze, DeviceReport, Options, Report, WindowInfo};
use crate::steps::{StepMatch, Steps};
use crate::summary::{api_items, kernel_items};
use crate::window::Window;

/// Version of the diff's JSON shape; rises when a field is renamed, removed or changes meaning.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// Kernel counts further apart than this (relative to the larger) make totals incomparable.
const SAME_WORK_TOLERANCE: f64 = 0.10;

/// The whole comparison. `cutrace diff --format json` prints `cutrace_export::text::diff::json`
/// of it, which adds each caveat's words (`text`) to what this serializes: the documented
/// schema (docs/DIFF.md) is that one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub schema_version: u32,
    pub base: Side,
    pub new: Side,
    /// What makes the comparison less than exact, in words; empty when nothing does.
    pub caveats: Vec<Caveat>,
    /// Every GPU of either trace, by device id.
    pub devices: Vec<DeviceDiff>,
    pub launch_latency: LatencyPair,
    pub kernel_names: NameCounts,
    /// Kernel names by the size of their change in summed duration, largest first (`top` rows).
    pub kernels: Vec<NameDiff>,
    pub api_names: NameCounts,
    /// API names likewise.
    pub api: Vec<NameDiff>,
    /// Step durations and busy shares, when either trace has steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepsDiff>,
    /// Hardware counters per kernel name and metric, when either trace has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::counters::CountersDiff>,
    /// PM-sample layers per GPU (window and idle gaps), when either trace has PM samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pm_samples: Option<crate::pm::PmDiff>,
    /// Stall-reason mixes per function, when either trace has PC samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pc_samples: Option<crate::pc::PcDiff>,
    /// Memory peaks and churn, when either trace has a memory section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::MemoryDiff>,
}

/// The steps of both traces (see [`crate::steps`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepsDiff {
    /// The names matched: `ProfilerStep#*`, or what `--steps` gave.
    pub matched: String,
    pub base: Option<StepSide>,
    pub new: Option<StepSide>,
    /// `new.duration_median_ns − base.duration_median_ns`, when both have steps.
    pub median_change_ns: Option<i64>,
}

/// One trace's steps, summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSide {
    pub count: u64,
    pub duration_min_ns: Option<Ns>,
    pub duration_median_ns: Option<Ns>,
    pub duration_max_ns: Option<Ns>,
    /// Per GPU: its median busy share of a step (over the steps it ran kernels in).
    pub devices: Vec<StepDeviceSide>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDeviceSide {
    pub device: u32,
    pub busy_pct_median: f64,
}

fn step_side(s: Steps) -> StepSide {
    StepSide {
        count: s.count,
        duration_min_ns: s.duration_min_ns,
        duration_median_ns: s.duration_median_ns,
        duration_max_ns: s.duration_max_ns,
        devices: s
            .devices
            .iter()
            .map(|d| StepDeviceSide {
                device: d.device,
                busy_pct_median: d.busy_pct_median,
            })
            .collect(),
    }
}

/// One trace's totals and the data it lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Side {
    /// "native" or "kineto".
    pub source: &'static str,
    /// The part of the trace compared (its own clock); null: the whole trace.
    pub window: Option<WindowInfo>,
    /// Kernels compared (inside the window, when there is one).
    pub kernels: u64,
    /// API calls compared (likewise).
    pub api_calls: u64,
    /// Kernels whose launch call is not in the trace.
    pub orphans: u64,
    pub complete: bool,
    /// Records dropped by the recorder and by CUPTI together.
    pub dropped: u64,
    /// The runtime its API calls belong to: `hip` or `cuda`; null without API calls
    /// (`crate::runtime::api_runtime`).
    pub api_runtime: Option<&'static str>,
}

/// What makes the comparison less than exact, as facts (the words are the renderers':
/// `cutrace_export::text::diff::caveat_text`, which the JSON adds as `text`). `kind` is stable,
/// for scripts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Caveat {
    /// The side's trace is incomplete, or dropped records: its totals are lower bounds.
    DataLoss {
        side: &'static str,
        complete: bool,
        incomplete_reason: Option<String>,
        dropped: u64,
    },
    /// No kernels in the side's window; offsets from its first record.
    EmptyWindow {
        side: &'static str,
        from_offset_ns: Ns,
        /// `None`: the window runs to the trace's end.
        to_offset_ns: Option<Ns>,
        /// The span of the side's records; `None` when it holds no timed record.
        span_ns: Option<Ns>,
    },
    /// No kernels at all.
    NoKernels {
        side: &'static str,
        span_ns: Option<Ns>,
    },
    /// Kernels without their launch call.
    Orphans { side: &'static str, kernels: u64 },
    /// Kernel launch calls without any GPU record of theirs ([`crate::launches`]).
    LaunchesWithoutGpuRecords {
        side: &'static str,
        launches: u64,
        of_launch_calls: u64,
    },
    /// The side's directory may hold several runs.
    SeparateRuns {
        side: &'static str,
        run_ids: u64,
        hosts: u64,
        time_spans: u64,
    },
    /// Kernel counts more than 10 % apart.
    DifferentWork { base_kernels: u64, new_kernels: u64 },
    /// The traces recorded different sets of API calls (`all`, `lean`, `launches`, `mixed`,
    /// `torch.profiler`).
    ApiRecords { base: String, new: String },
    /// GPUs in one trace only, by device id, each with the side that has it.
    DifferentDevices { devices: Vec<OneSided> },
}

/// A GPU only one side has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OneSided {
    pub device: u32,
    pub side: &'static str,
}

impl Caveat {
    /// The stable name scripts match on (the JSON's `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Caveat::DataLoss { .. } => "data_loss",
            Caveat::EmptyWindow { .. } => "empty_window",
            Caveat::NoKernels { .. } => "no_kernels",
            Caveat::Orphans { .. } => "orphans",
            Caveat::LaunchesWithoutGpuRecords { .. } => "launches_without_gpu_records",
            Caveat::SeparateRuns { .. } => "separate_runs",
            Caveat::DifferentWork { .. } => "different_work",
            Caveat::ApiRecords { .. } => "api_records",
            Caveat::DifferentDevices { .. } => "different_devices",
        }
    }
}

/// One GPU in both traces (`None` on the side that does not have it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceDiff {
    pub device: u32,
    pub base: Option<DeviceSide>,
    pub new: Option<DeviceSide>,
    /// `new.busy_pct − base.busy_pct`, in percentage points, when both have kernels.
    pub busy_pct_points: Option<f64>,
}

/// A GPU's figures in one trace (see `cutrace report`'s `devices[]` for each).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSide {
    pub kernels: u64,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub busy_pct: f64,
    pub idle_ns: Ns,
    pub gaps: u64,
    /// Idle time before the next kernel's launch call returned (the GPU waited for the host).
    pub idle_before_launch_ns: Option<Ns>,
    /// Idle time after it (launched work not yet started).
    pub idle_after_launch_ns: Option<Ns>,
    /// Idle time whose next kernel has no launch call in the trace.
    pub idle_unknown_ns: Option<Ns>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatencyPair {
    pub base: LaunchLatency,
    pub new: LaunchLatency,
}

/// How many distinct names each trace has, and how many are in one only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NameCounts {
    pub base: u64,
    pub new: u64,
    pub only_base: u64,
    pub only_new: u64,
}

/// One name in both traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NameDiff {
    /// Demangled for display, as in `cutrace report`.
    pub name: String,
    pub base: Option<NameSide>,
    pub new: Option<NameSide>,
    /// `new.total_ns − base.total_ns` (an absent side counts 0).
    pub total_change_ns: i64,
    /// Change of the mean duration per call, in percent of the base's, when both have calls.
    pub mean_change_pct: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NameSide {
    pub count: u64,
    /// Summed duration of the calls (a sum: overlapping calls count twice).
    pub total_ns: Ns,
    /// `total_ns / count`, rounded down.
    pub mean_ns: Ns,
}

/// What to compare and how much to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOptions {
    /// Rows of the kernel and API lists (the name counts are always exact).
    pub top: usize,
    /// The host ranges that mark steps (default: torch.profiler's `ProfilerStep#*`).
    pub steps: StepMatch,
    /// Only this part of the base trace (its own clock), as `cutrace report --from/--to`: read
    /// by [`diff`]; [`diff_side`] takes each side's window as its own argument (a side is
    /// taken before the other trace is read).
    pub base_window: Option<Window>,
    /// Only this part of the new trace (likewise).
    pub new_window: Option<Window>,
    /// Each side's report keeps its `top` rows (gaps, kernel and API names, ranges), for a page
    /// that shows them; else it keeps none (the diff's own rows are made from every name
    /// whatever this says), so a large `top` costs only the rows the diff shows.
    pub page: bool,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            top: 10,
            steps: StepMatch::profiler_steps(),
            base_window: None,
            new_window: None,
            page: false,
        }
    }
}

/// What a diff needs of one trace, taken from that trace alone, so the trace can be dropped
/// before the other one is read: a diff then holds one trace at a time (two traces of a million
/// distinct names each once held both, with every name of each, three times over).
#[derive(Debug, Clone)]
pub struct DiffSide {
    /// The trace's report over its window, with its steps; with `top` rows when
    /// [`DiffOptions::page`] is set (the diff page shows it beside the other side's), else with
    /// none.
    pub report: Report,
    kernel_names: KeyedNames,
    api_names: KeyedNames,
    /// Counters of every kernel name (not only the top ones: the diff matches them by name).
    counters: Option<crate::counters::CounterReport>,
    /// PC samples of every function, with every reason (the diff matches them by name).
    pc: Option<crate::pc::PcReport>,
}

/// One trace's [`DiffSide`]: `window` on its own clock; `opts` gives the rows and the steps.
pub fn diff_side(
    t: &Trace,
    window: Option<Window>,
    opts: &DiffOptions,
) -> Result<DiffSide, AnalysisError> {
    let report = analyze(
        t,
        &Options {
            window,
            top: if opts.page { opts.top } else { 0 },
            orphan_list: if opts.page {
                Options::default().orphan_list
            } else {
                0
            },
            steps: Some(opts.steps.clone()),
        },
    )?;
    Ok(DiffSide {
        report,
        kernel_names: KeyedNames::of(t, kernel_items(t, window.as_ref())),
        api_names: KeyedNames::of(t, api_items(t, window.as_ref())),
        counters: crate::counters::counter_report(t, window.as_ref(), usize::MAX),
        pc: crate::pc::pc_report_all(t),
    })
}

/// Compares `new` against `base`.
pub fn diff(base: &Trace, new: &Trace, opts: &DiffOptions) -> Result<Diff, AnalysisError> {
    let b = diff_side(base, opts.base_window, opts)?;
    let n = diff_side(new, opts.new_window, opts)?;
    Ok(diff_sides(&b, &n, opts))
}

/// Compares two sides taken with [`diff_side`] (and the same `opts`).
pub fn diff_sides(b: &DiffSide, n: &DiffSide, opts: &DiffOptions) -> Diff {
    let (rb, rn) = (&b.report, &n.report);
    let (kernel_names, kernels) = name_diffs(&b.kernel_names, &n.kernel_names, opts.top);
    let (api_names, api) = name_diffs(&b.api_names, &n.api_names, opts.top);
    let (sb, sn) = (
        rb.steps.clone().map(step_side),
        rn.steps.clone().map(step_side),
    );
    let steps = (sb.is_some() || sn.is_some()).then(|| StepsDiff {
        matched: opts.steps.text(),
        median_change_ns: match (&sb, &sn) {
            (Some(b), Some(n)) => match (b.duration_median_ns, n.duration_median_ns) {
                (Some(x), Some(y)) => Some(y as i64 - x as i64),
                _ => None,
            },
            _ => None,
        },
        base: sb,
        new: sn,
    });

    let mut by_dev: BTreeMap<u32, (Option<DeviceSide>, Option<DeviceSide>)> = BTreeMap::new();
    for d in &rb.devices {
        by_dev.entry(d.device).or_default().0 = Some(device_side(d));
    }
    for d in &rn.devices {
        by_dev.entry(d.device).or_default().1 = Some(device_side(d));
    }
    let devices: Vec<DeviceDiff> = by_dev
        .into_iter()
        .map(|(device, (b, n))| DeviceDiff {
            device,
            busy_pct_points: match (&b, &n) {
                (Some(b), Some(n)) if b.kernels > 0 && n.kernels > 0 => {
                    Some(n.busy_pct - b.busy_pct)
                }
                _ => None,
            },
            base: b,
            new: n,
        })
        .collect();

    let counters = crate::counters::counters_diff_of(
        b.counters.as_ref(),
        n.counters.as_ref(),
        opts.top,
        match_key,
    );
    let pm_samples = crate::pm::pm_diff_of(rb.pm_samples.as_ref(), rn.pm_samples.as_ref());
    let pc_samples = crate::pc::pc_diff_of(b.pc.as_ref(), n.pc.as_ref(), opts.top);
    let (base, new) = (side(rb, &b.api_names), side(rn, &n.api_names));
    let caveats = caveats(&base, &new, rb, rn, &devices);
    Diff {
        schema_version: DIFF_SCHEMA_VERSION,
        base,
        new,
        caveats,
        devices,
        launch_latency: LatencyPair {
            base: rb.launch_latency.clone(),
            new: rn.launch_latency.clone(),
        },
        kernel_names,
        kernels,
        api_names,
        api,
        steps,
        counters,
        pm_samples,
        pc_samples,
        memory: crate::memory::memory_diff(rb.memory.as_ref(), rn.memory.as_ref()),
    }
}

fn side(r: &Report, api: &KeyedNames) -> Side {
    Side {
        source: r.trace.source,
        window: r.window,
        kernels: r.devices.iter().map(|d| d.timeline.kernels).sum(),
        api_calls: api.calls(),
        orphans: r.correlation.orphans,
        complete: r.data_loss.complete,
        dropped: r
            .data_loss
            .dropped_by_recorder
            .saturating_add(r.data_loss.dropped_by_cupti),
        api_runtime: r.trace.api_runtime,
    }
}

fn device_side(d: &DeviceReport) -> DeviceSide {
    let t = &d.timeline;
    let split = d.idle_split.as_ref();
    DeviceSide {
        kernels: t.kernels,
        window_ns: t.window_ns,
        busy_ns: t.busy_ns,
        busy_pct: d.busy_pct,
        idle_ns: t.idle_ns,
        gaps: t.gaps,
        idle_before_launch_ns: split.map(|s| s.before_launch_ns),
        idle_after_launch_ns: split.map(|s| s.after_launch_ns),
        idle_unknown_ns: split.map(|s| s.unknown_ns),
    }
}

/// True when `a` and `b` are more than the tolerance apart, relative to the larger.
fn far_apart(a: u64, b: u64) -> bool {
    let hi = a.max(b);
    hi > 0 && (hi - a.min(b)) as f64 > SAME_WORK_TOLERANCE * hi as f64
}

/// The `--api` mode that left calls out of a part (`lean`, `launches`), as its header says;
/// `None` for a part that recorded every call, or no API kind.
pub fn left_out_by(part: &cutrace_trace::PartMeta) -> Option<&str> {
    part.header
        .api_records
        .as_ref()
        .filter(|a| a.leaves_calls_out())
        .map(|a| a.mode.as_str())
}

/// Which API calls a trace holds: `torch.profiler` for Kineto traces (its own selection), else
/// the recorder's `--api` mode of each part as its header says (`all` when it left nothing
/// out), `mixed` when the parts differ.
fn api_mode(r: &Report) -> String {
    if r.trace.source == "kineto" {
        return "torch.profiler".into();
    }
    let mut modes: Vec<&str> = r
        .trace
        .parts
        .iter()
        .map(|p| left_out_by(p).unwrap_or("all"))
        .collect();
    if modes.is_empty() {
        modes.push("all");
    }
    modes.sort_unstable();
    modes.dedup();
    match modes.as_slice() {
        [one] => (*one).to_owned(),
        _ => "mixed".into(),
    }
}

fn caveats(
    base: &Side,
    new: &Side,
    rb: &Report,
    rn: &Report,
    devices: &[DeviceDiff],
) -> Vec<Caveat> {
    let mut out = Vec::new();
    for (side, s, r) in [("base", base, rb), ("new", new, rn)] {
        if !s.complete || s.dropped > 0 {
            out.push(Caveat::DataLoss {
                side,
                complete: s.complete,
                incomplete_reason: r.data_loss.incomplete_reason.clone(),
                dropped: s.dropped,
            });
        }
        if s.kernels == 0 {
            let span_ns = match (r.trace.first_ns, r.trace.last_ns) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            };
            out.push(match s.window {
                Some(w) => {
                    let first = r.trace.first_ns.unwrap_or(0);
                    Caveat::EmptyWindow {
                        side,
                        from_offset_ns: w.from_ns.max(first) - first,
                        to_offset_ns: w.to_ns.map(|t| t.saturating_sub(first)),
                        span_ns,
                    }
                }
                None => Caveat::NoKernels { side, span_ns },
            });
        }
        if s.orphans > 0 {
            out.push(Caveat::Orphans {
                side,
                kernels: s.orphans,
            });
        }
        let launches = &r.data_loss.launches;
        if launches.launches_without_gpu_records > 0 {
            out.push(Caveat::LaunchesWithoutGpuRecords {
                side,
                launches: launches.launches_without_gpu_records,
                of_launch_calls: launches.kernel_launches,
            });
        }
        if let Some(sr) = &r.trace.separate_runs {
            out.push(Caveat::SeparateRuns {
                side,
                run_ids: sr.run_ids.len() as u64,
                hosts: sr.hosts.len() as u64,
                time_spans: sr.time_spans,
            });
        }
    }
    // Only the amount of work decides: a faster or slower run of the same work is what a diff is
    // for, so the GPU windows may differ freely.
    if base.kernels > 0 && new.kernels > 0 && far_apart(base.kernels, new.kernels) {
        out.push(Caveat::DifferentWork {
            base_kernels: base.kernels,
            new_kernels: new.kernels,
        });
    }
    // `cutrace record --api lean` (the default) leaves state queries out by choice, and
    // torch.profiler records its own selection: calls one trace left out would read as calls the
    // change removed.
    let (mb, mn) = (api_mode(rb), api_mode(rn));
    if mb != mn || mb == "mixed" {
        out.push(Caveat::ApiRecords { base: mb, new: mn });
    }
    let one_sided: Vec<OneSided> = devices
        .iter()
        .filter(|d| d.base.is_none() || d.new.is_none())
        .map(|d| OneSided {
            device: d.device,
            side: if d.base.is_some() { "base" } else { "new" },
        })
        .collect();
    if !one_sided.is_empty() {
        out.push(Caveat::DifferentDevices { devices: one_sided });
    }
    out
}

/// The key two spellings of one demangled name share: integer template arguments written as casts
/// (`(unsigned long)1`, cpp_demangle) become their literal suffixes (`1ul`, the C++ runtime's
/// demangler, which torch.profiler's names come from); `(bool)1`/`(bool)0` become
/// `true`/`false`; spaces are dropped (`> >` and `>>`).
pub fn match_key(name: &str) -> String {
    const CASTS: [(&str, &str); 7] = [
        ("(unsigned long long)", "ull"),
        ("(long long)", "ll"),
        ("(unsigned long)", "ul"),
        ("(long)", "l"),
        ("(unsigned int)", "u"),
        ("(int)", ""),
        ("(bool)", "bool"),
    ];
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    'scan: while !rest.is_empty() {
        for (cast, suffix) in CASTS {
            if let Some(after) = rest.strip_prefix(cast) {
                let digits = after
                    .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                    .unwrap_or(after.len());
                if digits > 0 {
                    let num = &after[..digits];
                    if suffix == "bool" {
                        out.push_str(if num == "0" { "false" } else { "true" });
                    } else {
                        out.push_str(num);
                        out.push_str(suffix);
                    }
                    rest = &after[digits..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_whitespace() {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A 64-bit hash of a match key, the same for both sides of a diff (fixed keys). Two different
/// keys meet with odds of about n²/2^65: 1 in 30 million for a million names.
fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// Every name of one side's records, with its count and summed time, matched by the 64-bit hash
/// of its [`match_key`]: rows sorted by key (names of one key merged, shown in the spelling of
/// the longest, ties by name), their names in one buffer. 40 bytes a name and its text: a
/// million names once took a `String`, a hash-map slot and a key string each.
#[derive(Debug, Clone, Default)]
struct KeyedNames {
    rows: Vec<KeyedRow>,
    text: String,
}

#[derive(Debug, Clone, Copy)]
struct KeyedRow {
    key: u64,
    count: u64,
    total_ns: Ns,
    /// The shown name, `text[at..at + len]`.
    at: usize,
    len: u32,
}

impl KeyedNames {
    fn of(t: &Trace, items: impl Iterator<Item = (StrId, Ns)>) -> KeyedNames {
        let groups = t.strings.len() + 1;
        let mut count = vec![0u64; groups];
        let mut total = vec![0 as Ns; groups];
        for (id, d) in items {
            let g = (id as usize).min(groups - 1);
            count[g] += 1;
            total[g] = total[g].saturating_add(d);
        }
        let mut out = KeyedNames::default();
        for g in (0..groups).filter(|&g| count[g] > 0) {
            let (shown, _) = name_pair(t.strings.get(g).map_or("?", String::as_str));
            let at = out.text.len();
            out.text.push_str(&shown);
            out.rows.push(KeyedRow {
                key: key_hash(&match_key(&shown)),
                count: count[g],
                total_ns: total[g],
                at,
                // Shown names are bounded (`names::held`), far below 4 GiB.
                len: u32::try_from(shown.len()).unwrap_or(u32::MAX),
            });
        }
        drop((count, total));
        let text = &out.text;
        let name = |r: &KeyedRow| &text[r.at..r.at + r.len as usize];
        out.rows.sort_unstable_by(|a, b| {
            a.key
                .cmp(&b.key)
                .then(b.total_ns.cmp(&a.total_ns))
                .then_with(|| name(a).cmp(name(b)))
        });
        // Merge each run of one key into its first row (the longest's spelling).
        out.rows.dedup_by(|later, first| {
            if later.key != first.key {
                return false;
            }
            first.count += later.count;
            first.total_ns = first.total_ns.saturating_add(later.total_ns);
            true
        });
        out.rows.shrink_to_fit();
        out
    }

    fn name(&self, r: &KeyedRow) -> &str {
        &self.text[r.at..r.at + r.len as usize]
    }

    /// Records counted, over every name.
    fn calls(&self) -> u64 {
        self.rows.iter().map(|r| r.count).sum()
    }
}

/// Rows of both sides matched by [`match_key`] (shown as the base's spelling), sorted by the
/// size of the change in summed time, largest first, then by name. One pass over both sides in
/// key order; only the `top` rows shown are kept (at most twice that many at any time).
fn name_diffs(base: &KeyedNames, new: &KeyedNames, top: usize) -> (NameCounts, Vec<NameDiff>) {
    /// A key's change and its row on each side.
    type Cand<'a> = (i64, Option<&'a KeyedRow>, Option<&'a KeyedRow>);
    let shown = |c: &Cand<'_>| match (c.1, c.2) {
        (Some(b), _) => base.name(b),
        (None, Some(n)) => new.name(n),
        (None, None) => "",
    };
    let order = |a: &Cand<'_>, b: &Cand<'_>| {
        b.0.unsigned_abs()
            .cmp(&a.0.unsigned_abs())
            .then_with(|| shown(a).cmp(shown(b)))
    };
    let keep = |c: &mut Vec<Cand<'_>>| {
        if c.len() > top {
            c.select_nth_unstable_by(top, order);
            c.truncate(top);
        }
    };
    let mut counts = NameCounts {
        base: base.rows.len() as u64,
        new: new.rows.len() as u64,
        only_base: 0,
        only_new: 0,
    };
    let bound = top.saturating_mul(2).max(1024);
    let mut cands: Vec<Cand<'_>> = Vec::new();
    let (mut bi, mut ni) = (base.rows.iter().peekable(), new.rows.iter().peekable());
    loop {
        let (b, n) = match (bi.peek(), ni.peek()) {
            (None, None) => break,
            (Some(b), Some(n)) if b.key == n.key => (bi.next(), ni.next()),
            (Some(b), Some(n)) if b.key < n.key => (bi.next(), None),
            (Some(_), None) => (bi.next(), None),
            _ => (None, ni.next()),
        };
        match (b, n) {
            (Some(_), None) => counts.only_base += 1,
            (None, Some(_)) => counts.only_new += 1,
            _ => {}
        }
        let total = |r: Option<&KeyedRow>| i128::from(r.map_or(0, |r| r.total_ns));
        let change = (total(n) - total(b)).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        cands.push((change as i64, b, n));
        if cands.len() >= bound {
            keep(&mut cands);
        }
    }
    keep(&mut cands);
    cands.sort_by(order);
    let side = |r: &KeyedRow| NameSide {
        count: r.count,
        total_ns: r.total_ns,
        mean_ns: r.total_ns.checked_div(r.count).unwrap_or(0),
    };
    let rows = cands
        .iter()
        .map(|c| {
            let (b, n) = (c.1.map(side), c.2.map(side));
            NameDiff {
                name: shown(c).to_owned(),
                total_change_ns: c.0,
                mean_change_pct: match (b, n) {
                    (Some(b), Some(n)) if b.mean_ns > 0 => {
                        Some((n.mean_ns as f64 - b.mean_ns as f64) * 100.0 / b.mean_ns as f64)
                    }
                    _ => None,
                },
                base: b,
                new: n,
            }
        })
        .collect();
    (counts, rows)
}
