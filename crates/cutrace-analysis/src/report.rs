//! The whole report: runs every analysis over a trace and gathers the results into one
//! serializable value. `cutrace report --format json` prints it as is; its field names are a
//! contract (`devices[].{device, kernels, window_ns, busy_ns, summed_kernel_ns, idle_ns, gaps,
//! streams[].{stream, kernels, busy_ns}}`, `correlation.{kernels, attributed, orphans}`).

use std::collections::BTreeMap;

use cutrace_trace::{Ns, PartMeta, RangeDomain, SourceFormat, StrId, Trace, TraceNote};
use serde::Serialize;

use crate::correlate::{correlate_in, ApiIndex, Correlation, LaunchLatency};
use crate::error::AnalysisError;
use crate::intervals::{BusyIndex, RunIntersector};
use crate::parts::{separate_runs, SeparateRuns};
use crate::percentile::Scratch;
use crate::ranges::{devices_with_gpu_ranges, range_breakdown, RangeSummary};
use crate::summary::{api_summary_in, kernel_summary_in, KernelNameSummary, NameStats};
use crate::timeline::{
    kernel_timelines, DeviceTimeline, GapHost, NamedSpan, NextLaunch, StreamTimeline, Timeline,
};
use crate::transfers::{copy_runs_by_device, transfer_summary, TransferSummary};
use crate::window::{trace_bounds, Window};

/// What to analyse and how much to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Only this part of the trace; intervals are clipped to it.
    pub window: Option<Window>,
    /// Length of every "largest"/"top" list (gaps, kernel names, API names, ranges).
    pub top: usize,
    /// Length of each orphan correlation id list (the counts are always exact).
    pub orphan_list: usize,
    /// The host ranges that mark the program's steps: when set, the report has per-step
    /// figures ([`crate::steps`]), and its counters and PM samples have theirs. `None`: no
    /// step section.
    pub steps: Option<crate::steps::StepMatch>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: None,
            top: 10,
            orphan_list: 20,
            steps: None,
        }
    }
}

/// Facts about lost or unmodelled data, in every report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataLoss {
    pub dropped_by_recorder: u64,
    pub dropped_by_cupti: u64,
    /// False when the source does not record drop counts (torch.profiler traces): the two
    /// counts above are then unknown, not zero.
    pub drops_recorded: bool,
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    /// Native traces: bytes skipped as damaged (not merely cut off), and the stretches of them.
    pub damaged_bytes: u64,
    pub damaged_regions: u64,
    /// Source events the importer did not model, by category.
    pub skipped_events: Vec<SkippedEvents>,
    /// Kernel, copy, memset and API records whose end is before their start (treated as
    /// zero-length).
    pub inverted_intervals: u64,
    /// The source's own account of records it dropped or could not place (Kineto's `Record
    /// counts` line), in its order; empty when the source wrote none.
    pub source_drops: Vec<SourceDrop>,
    /// Kernel launch calls, and those with no GPU record ([`crate::launches`]).
    #[serde(flatten)]
    pub launches: crate::launches::LaunchLoss,
}

/// One count of the source's own drop account (`Out-of-range`, 4181).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceDrop {
    pub name: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedEvents {
    pub category: String,
    pub count: u64,
}

/// The time window as reported: `to_ns` is null when the window is open-ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowInfo {
    pub from_ns: Ns,
    pub to_ns: Option<Ns>,
}

/// What the trace is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceInfo {
    /// `native` or `kineto`.
    pub source: &'static str,
    pub paths: Vec<String>,
    /// The part files read (native traces: one per CUDA process), each with its host, pid and
    /// time span (`{path, host, pid, first_ns, last_ns, complete}`); empty for imported traces.
    pub parts: Vec<PartMeta>,
    /// Set when the parts may come from separate runs merged into one directory: several hosts,
    /// or time spans with a gap between them. `null` otherwise.
    pub separate_runs: Option<SeparateRuns>,
    /// A trace merged from several processes' parts: the pid behind each part number N. Stream
    /// and correlation ids are per process, so the merge adds N·2³² to part N's; the streams and
    /// gap kernels below are given as their process knows them (with `pid`), while the
    /// correlation ids in `correlation.orphan_correlation_ids` keep the N·2³² (part `id >> 32`).
    /// Absent when the trace is one part or was imported.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub id_parts: Vec<Option<u32>>,
    pub first_ns: Option<Ns>,
    pub last_ns: Option<Ns>,
    /// The clock's resolution as the records show it: 1000 when every kernel, copy, memset and
    /// API call starts and ends on a whole microsecond (torch.profiler traces of 2020-2021 write
    /// integer µs), else 100, 10 or 1 ns. The text prints no digits below it.
    pub resolution_ns: Ns,
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
    pub api_calls: u64,
    pub ranges: u64,
    /// The runtime the API calls belong to ([`crate::runtime`]): `cuda` or `hip` (Kineto files
    /// HIP calls under `cuda_runtime`); null without API calls of either.
    pub api_runtime: Option<&'static str>,
    /// The trace's place in a distributed job, when it states one (torch's `distributedInfo`, a
    /// native part's `RANK`/`WORLD_SIZE`). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<cutrace_trace::Distributed>,
}

/// One device: its kernel timeline, streams, and how copies relate to compute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceReport {
    pub device: u32,
    #[serde(flatten)]
    pub timeline: Timeline,
    /// `busy_ns / window_ns` in percent (the union, so never over 100).
    pub busy_pct: f64,
    /// Union of memcpy intervals on this device.
    pub copy_busy_ns: Ns,
    /// Time in which a kernel and a copy both run: union(kernels) ∩ union(copies).
    pub compute_copy_overlap_ns: Ns,
    /// The device's idle time split by what each gap's next kernel was waiting for: every gap
    /// is counted, not only the largest. Absent for a device without kernels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_split: Option<IdleSplit>,
    pub streams: Vec<StreamTimeline>,
}

/// A device's idle time, gap by gap, split at the moment the launch call of the kernel that ends
/// the gap returned (joined by correlation id). The three parts add up to the device's
/// `idle_ns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IdleSplit {
    /// Before the launch returned: the GPU was idle because the host had not yet launched the
    /// next kernel (host code, other CUDA calls, the launch call itself).
    pub before_launch_ns: Ns,
    /// After the launch returned: the next kernel was launched but had not started (it was
    /// queued behind an event, another stream or copies, or the launch latency itself).
    pub after_launch_ns: Ns,
    /// Gaps whose next kernel has no launch call in the trace (orphans, API kinds not recorded).
    pub unknown_ns: Ns,
    /// Gaps counted in each part: a gap split by its launch counts in both of the first two.
    pub gaps_before_launch: u64,
    pub gaps_after_launch: u64,
    pub gaps_unknown: u64,
}

/// The JSON report's version: raised when a field is renamed, removed or changes meaning (new
/// fields do not raise it).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The first answer, per GPU ([`crate::verdict`]): busy, compute and communication apart,
    /// what the idle time waited on, the largest gaps, the step time.
    pub summary: crate::verdict::Summary,
    pub trace: TraceInfo,
    /// The time window, when one was given.
    pub window: Option<WindowInfo>,
    pub data_loss: DataLoss,
    /// What the recorder noted while recording (`{pid, part, text}`; the whole trace, not
    /// clipped to the window): another CUPTI tool in the program, settings that failed,
    /// fallbacks taken. Empty for imported traces.
    pub notes: Vec<TraceNote>,
    pub devices: Vec<DeviceReport>,
    pub correlation: Correlation,
    pub launch_latency: LaunchLatency,
    /// Distinct kernel names (the list below is capped).
    pub kernel_names: u64,
    pub kernel_summary: Vec<KernelNameSummary>,
    pub api_names: u64,
    pub api_summary: Vec<NameStats>,
    pub transfers: Vec<TransferSummary>,
    pub range_names: u64,
    pub ranges: Vec<RangeSummary>,
    /// Per-step figures ([`crate::steps`]): absent unless the caller asked for them and the
    /// trace has such ranges (`analyze` leaves it `None`; `cutrace report` fills it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<crate::steps::Steps>,
    /// Hardware counters per kernel name ([`crate::counters`]): present only for traces
    /// recorded with `cutrace profile`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::counters::CounterReport>,
    /// PM samples (`cutrace sample` traces): the layered answer per device; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pm_samples: Option<crate::pm::PmReport>,
    /// Where kernels stall (`cutrace profile --pc-sampling` traces): samples per function,
    /// source line and stall reason, over the whole trace (PC records carry no time); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pc_samples: Option<crate::pc::PcReport>,
    /// Memory over time ([`crate::memory`]): peaks, what was live, leaks, churn; absent when the
    /// trace has no memory events and no allocation calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::MemoryReport>,
    /// The critical path of each step and of the window ([`crate::critical_path`]): absent
    /// unless asked for (`cutrace report --critical-path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<crate::critical_path::CriticalPath>,
}

/// The whole report of one trace: every analysis, and the steps with the counters and PM
/// samples of each step when `opts.steps` names them. The one entry point for a trace's report
/// (`cutrace report`, each side of a diff, the page). Pure: the same records in any order give
/// the same report.
pub fn analyze(trace: &Trace, opts: &Options) -> Result<Report, AnalysisError> {
    let mut report = analyze_records(trace, opts)?;
    if let Some(which) = &opts.steps {
        let window = opts.window.as_ref();
        report.steps = crate::steps::steps(trace, window, which);
        if let Some(st) = &report.steps {
            if let Some(c) = report.counters.as_mut() {
                crate::counters::add_steps(c, trace, window, st);
            }
            if let Some(pm) = report.pm_samples.as_mut() {
                crate::pm::add_steps(pm, trace, window, st);
            }
        }
    }
    add_host_ops(trace, &mut report);
    report.memory =
        crate::memory::memory_report(trace, opts.window.as_ref(), report.steps.as_ref(), opts.top);
    report.summary = verdict_of(trace, &report);
    Ok(report)
}

/// The verdict of `report`, made over `trace`: the kernels inside each device's window (which
/// the report's time window already bounds).
fn verdict_of(trace: &Trace, report: &Report) -> crate::verdict::Summary {
    use crate::summary::pct;
    use crate::verdict::{lanes, DeviceVerdict, Summary, MAX_GAPS_NAMED};
    use std::collections::HashMap;
    let spans: HashMap<u32, (Ns, Ns)> = report
        .devices
        .iter()
        .filter_map(|d| {
            let t = &d.timeline;
            Some((d.device, (t.window_start_ns?, t.window_end_ns?)))
        })
        .collect();
    let lanes = lanes(trace, &spans);
    let devices = report
        .devices
        .iter()
        .filter(|d| d.timeline.kernels > 0)
        .map(|d| {
            let t = &d.timeline;
            // A device without communication kernels: its compute is its busy time.
            let (compute, comm, exposed) =
                lanes.get(&d.device).copied().unwrap_or((t.busy_ns, 0, 0));
            let mut held = 0;
            let mut named = 0;
            for g in t.largest_gaps.iter().take(MAX_GAPS_NAMED) {
                if held * 2 >= t.idle_ns {
                    break;
                }
                held += g.length_ns;
                named += 1;
            }
            let gaps = &t.largest_gaps[..named];
            let waiting = d
                .idle_split
                .filter(|s| s.gaps_before_launch + s.gaps_after_launch > 0)
                .map(|s| s.before_launch_ns);
            let unknown = d.idle_split.map(|s| s.unknown_ns).filter(|&u| u > 0);
            DeviceVerdict {
                device: d.device,
                window_ns: t.window_ns,
                busy_ns: t.busy_ns,
                busy_pct: d.busy_pct,
                compute_ns: compute,
                compute_pct: pct(compute, t.window_ns),
                communication_ns: comm,
                communication_pct: pct(comm, t.window_ns),
                exposed_communication_ns: exposed,
                copy_ns: d.copy_busy_ns,
                idle_ns: t.idle_ns,
                idle_pct: pct(t.idle_ns, t.window_ns),
                gaps: t.gaps,
                gaps_under_1us: crate::verdict::gaps_under_1us(&t.gap_histogram),
                idle_waiting_for_host_ns: waiting,
                idle_waiting_for_host_pct: waiting.map(|w| pct(w, t.idle_ns)),
                idle_launch_unknown_ns: unknown,
                idle_launch_unknown_pct: unknown.map(|u| pct(u, t.idle_ns)),
                largest_gaps: named as u64,
                largest_gaps_min_ns: gaps.iter().map(|g| g.length_ns).min().unwrap_or(0),
                largest_gaps_max_ns: gaps.iter().map(|g| g.length_ns).max().unwrap_or(0),
                largest_gaps_idle_pct: pct(held, t.idle_ns),
            }
        })
        .collect();
    let loader = report.steps.as_ref().and_then(|st| {
        let with: Vec<_> = st
            .steps
            .iter()
            .filter(|s| s.dataloader_ns.is_some())
            .collect();
        (!with.is_empty()).then(|| {
            let l: Ns = with.iter().filter_map(|s| s.dataloader_ns).sum();
            let d: Ns = with.iter().map(|s| s.duration_ns).sum();
            (l, pct(l, d))
        })
    });
    Summary {
        devices,
        step_median_ns: report.steps.as_ref().and_then(|s| s.duration_median_ns),
        steps: report.steps.as_ref().map_or(0, |s| s.count),
        steps_dataloader_ns: loader.map(|l| l.0),
        steps_dataloader_pct: loader.map(|l| l.1),
        communication_rules: crate::verdict::rule_counts(trace, &spans),
    }
}

/// Every analysis but the steps.
fn analyze_records(trace: &Trace, opts: &Options) -> Result<Report, AnalysisError> {
    if u32::try_from(trace.api_calls.len()).is_err() {
        return Err(AnalysisError::TooManyRecords {
            what: "API calls",
            count: trace.api_calls.len(),
        });
    }
    let window = opts.window.as_ref();
    let copy_runs = copy_runs_by_device(trace, window);
    let range_devices = devices_with_gpu_ranges(trace, window);

    // Kernel busy runs arrive device by device in increasing order: intersect them with the copy
    // runs on the fly, and keep them only for devices that GPU ranges need.
    let mut overlap: BTreeMap<u32, Ns> = BTreeMap::new();
    let mut kept_runs: BTreeMap<u32, Vec<(Ns, Ns)>> = BTreeMap::new();
    let mut current: Option<(u32, RunIntersector<'_>)> = None;
    let no_runs: &[(Ns, Ns)] = &[];
    let index = ApiIndex::build(&trace.api_calls);
    // Each gap, split where its next kernel's launch returned: the device being swept, its
    // split so far and its previous run's end; finished devices' splits.
    let mut splits: BTreeMap<u32, IdleSplit> = BTreeMap::new();
    let mut cur: Option<(u32, IdleSplit, Ns)> = None;
    let timelines = kernel_timelines(trace, window, opts.top, |dev, s, e, first| {
        match cur.as_mut() {
            Some((d, split, prev)) if *d == dev => {
                let launch = index.get(trace.kernels[first as usize].correlation_id);
                split_gap(split, *prev, s, launch.map(|i| trace.api_calls[i].end_ns));
                *prev = e;
            }
            _ => {
                if let Some((d, split, _)) = cur.take() {
                    splits.insert(d, split);
                }
                cur = Some((dev, IdleSplit::default(), e));
            }
        }
        if current.as_ref().map(|c| c.0) != Some(dev) {
            if let Some((d, x)) = current.take() {
                overlap.insert(d, x.total());
            }
            let runs = copy_runs.get(&dev).map_or(no_runs, Vec::as_slice);
            current = Some((dev, RunIntersector::new(runs)));
        }
        if let Some((_, x)) = current.as_mut() {
            x.add(s, e);
        }
        if range_devices.binary_search(&dev).is_ok() {
            kept_runs.entry(dev).or_default().push((s, e));
        }
    })?;
    if let Some((d, x)) = current.take() {
        overlap.insert(d, x.total());
    }

    if let Some((d, split, _)) = cur.take() {
        splits.insert(d, split);
    }
    let mut devices = device_reports(timelines, &copy_runs, &overlap);
    for d in &mut devices {
        d.idle_split =
            (d.timeline.kernels > 0).then(|| splits.get(&d.device).copied().unwrap_or_default());
    }
    attach_gap_hosts(trace, &index, &mut devices);
    let launches = crate::launches::launch_loss(trace, &index);
    // One scratch buffer serves the latency values and both summaries' durations.
    let mut scratch = Scratch::default();
    let (correlation, launch_latency) =
        correlate_in(trace, &index, window, opts.orphan_list, &mut scratch);
    drop(index);

    let (kernel_rows, kernel_names) = kernel_summary_in(trace, window, &mut scratch, opts.top);
    let (api_rows, api_names) = api_summary_in(trace, window, &mut scratch, opts.top);
    drop(scratch);
    let busy_index: BTreeMap<u32, BusyIndex> = kept_runs
        .into_iter()
        .map(|(d, runs)| (d, BusyIndex::new(runs)))
        .collect();
    let mut ranges = range_breakdown(trace, window, &busy_index);
    let range_names = ranges.len() as u64;
    ranges.truncate(opts.top);

    let (bounds, inverted) = record_facts(trace);
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        summary: crate::verdict::Summary::default(),
        trace: TraceInfo {
            source: match trace.meta.source {
                SourceFormat::Native => "native",
                SourceFormat::Kineto => "kineto",
            },
            paths: trace.meta.paths.clone(),
            parts: trace.meta.parts.clone(),
            separate_runs: separate_runs(&trace.meta.parts),
            id_parts: trace.meta.id_parts.clone(),
            first_ns: bounds.map(|b| b.0),
            last_ns: bounds.map(|b| b.1),
            resolution_ns: resolution(trace),
            kernels: trace.kernels.len() as u64,
            memcpys: trace.memcpys.len() as u64,
            memsets: trace.memsets.len() as u64,
            api_calls: trace.api_calls.len() as u64,
            ranges: trace.ranges.len() as u64,
            api_runtime: crate::runtime::api_runtime(trace),
            distributed: trace.meta.distributed.clone(),
        },
        window: opts.window.map(|w| WindowInfo {
            from_ns: w.from_ns,
            to_ns: (w.to_ns != Ns::MAX).then_some(w.to_ns),
        }),
        data_loss: data_loss(trace, inverted, launches),
        notes: trace.meta.notes.clone(),
        devices,
        correlation,
        launch_latency,
        kernel_names,
        kernel_summary: kernel_rows,
        api_names,
        api_summary: api_rows,
        transfers: transfer_summary(trace, window),
        range_names,
        ranges,
        steps: None,
        counters: crate::counters::counter_report(trace, window, opts.top),
        pm_samples: crate::pm::pm_report(trace, window),
        pc_samples: crate::pc::pc_report(trace, opts.top),
        memory: None,
        critical_path: None,
    })
}

/// Device rows for every device with kernels or copies, in id order.
fn device_reports(
    timelines: Vec<DeviceTimeline>,
    copy_runs: &BTreeMap<u32, Vec<(Ns, Ns)>>,
    overlap: &BTreeMap<u32, Ns>,
) -> Vec<DeviceReport> {
    let mut by_dev: BTreeMap<u32, DeviceReport> = BTreeMap::new();
    for mut t in timelines {
        let runs = copy_runs.get(&t.device).map_or(&[][..], Vec::as_slice);
        for g in &mut t.timeline.largest_gaps {
            g.copy_ns = Some(overlap_with_runs(runs, g.start_ns, g.end_ns));
        }
        by_dev.insert(
            t.device,
            DeviceReport {
                device: t.device,
                busy_pct: crate::summary::pct(t.timeline.busy_ns, t.timeline.window_ns),
                timeline: t.timeline,
                copy_busy_ns: 0,
                compute_copy_overlap_ns: overlap.get(&t.device).copied().unwrap_or(0),
                idle_split: None,
                streams: t.streams,
            },
        );
    }
    for (&dev, runs) in copy_runs {
        let row = by_dev.entry(dev).or_insert_with(|| DeviceReport {
            device: dev,
            timeline: crate::timeline::empty_timeline(),
            busy_pct: 0.0,
            copy_busy_ns: 0,
            compute_copy_overlap_ns: 0,
            idle_split: None,
            streams: Vec::new(),
        });
        row.copy_busy_ns = runs.iter().map(|r| r.1 - r.0).sum();
    }
    by_dev.into_values().collect()
}

/// Clipped intervals with the process of their call or range: filtered at the end, once the
/// launch (and so the process) is known.
type ProcessSpans = Vec<(Ns, Ns, u32)>;

/// What the host did during one device gap, gathered before the gap's process is settled.
struct GapAcc {
    start: Ns,
    end: Ns,
    pid: Option<u32>,
    launch: Option<u32>,
    all: ProcessSpans,
    calls: BTreeMap<StrId, ProcessSpans>,
    ranges: BTreeMap<StrId, ProcessSpans>,
    // Per range name and process: the shortest whole range of that name open in the gap.
    range_len: BTreeMap<(StrId, u32), Ns>,
}

/// Fills each device gap's [`GapHost`]: the call that launched the kernel after it, and the API
/// calls and host NVTX ranges (of that kernel's process, in a merged trace) that ran during it.
/// One pass over the calls and one over the ranges, each checked against every gap (a report
/// has at most `top` gaps per device).
fn attach_gap_hosts(trace: &Trace, index: &ApiIndex, devices: &mut [DeviceReport]) {
    let mut accs = gap_accs(index, devices);
    if accs.is_empty() {
        return;
    }
    let per_device = gaps_by_device(devices, &accs);
    gather_gap_calls(trace, &per_device, &mut accs);
    gather_gap_ranges(trace, &per_device, &mut accs);
    fill_gap_hosts(trace, accs, devices);
}

/// One empty accumulator per gap, devices in order and each device's gaps in order, with the
/// launch of the gap's next kernel found by the report's own join (the index).
fn gap_accs(index: &ApiIndex, devices: &[DeviceReport]) -> Vec<GapAcc> {
    let mut accs: Vec<GapAcc> = Vec::new();
    for d in devices {
        for g in &d.timeline.largest_gaps {
            accs.push(GapAcc {
                start: g.start_ns,
                end: g.end_ns,
                pid: g.after.as_ref().and_then(|k| k.pid),
                launch: index.get(g.after_correlation).map(|i| i as u32),
                all: Vec::new(),
                calls: BTreeMap::new(),
                ranges: BTreeMap::new(),
                range_len: BTreeMap::new(),
            });
        }
    }
    accs
}

/// Per device its gaps' indices into `accs`, in time order (one device's gaps are disjoint, so
/// their ends are in order too).
fn gaps_by_device(devices: &[DeviceReport], accs: &[GapAcc]) -> Vec<Vec<usize>> {
    let mut per_device: Vec<Vec<usize>> = Vec::new();
    let mut k = 0;
    for d in devices {
        let mut v: Vec<usize> = (k..k + d.timeline.largest_gaps.len()).collect();
        k += v.len();
        v.sort_unstable_by_key(|&j| accs[j].start);
        per_device.push(v);
    }
    per_device
}

/// Puts into `out` the gaps an interval `[s, e)` may reach: per device, the gaps from the first
/// that ends after it starts, while they start before it ends.
fn gaps_reached(per_device: &[Vec<usize>], accs: &[GapAcc], s: Ns, e: Ns, out: &mut Vec<usize>) {
    out.clear();
    for v in per_device {
        let from = v.partition_point(|&j| accs[j].end <= s);
        out.extend(v[from..].iter().take_while(|&&j| accs[j].start < e));
    }
}

/// Adds to each gap the API calls that overlap it (of its kernel's process, when known),
/// clipped to the gap.
fn gather_gap_calls(trace: &Trace, per_device: &[Vec<usize>], accs: &mut [GapAcc]) {
    let mut hit: Vec<usize> = Vec::new();
    for c in &trace.api_calls {
        gaps_reached(per_device, accs, c.start_ns, c.end_ns, &mut hit);
        for &k in &hit {
            let a = &mut accs[k];
            if c.start_ns < a.end && c.end_ns > a.start && a.pid.is_none_or(|p| p == c.process) {
                let clipped = (c.start_ns.max(a.start), c.end_ns.min(a.end), c.process);
                a.all.push(clipped);
                a.calls.entry(c.name).or_default().push(clipped);
            }
        }
    }
}

/// Adds to each gap the host NVTX ranges that overlap it (of its kernel's process, when known),
/// clipped to the gap, and the shortest whole length of each range name per process.
fn gather_gap_ranges(trace: &Trace, per_device: &[Vec<usize>], accs: &mut [GapAcc]) {
    let mut hit: Vec<usize> = Vec::new();
    for r in &trace.ranges {
        if r.domain != RangeDomain::Host {
            continue;
        }
        gaps_reached(per_device, accs, r.start_ns, r.end_ns, &mut hit);
        for &k in &hit {
            let a = &mut accs[k];
            if r.start_ns < a.end && r.end_ns > a.start && a.pid.is_none_or(|p| p == r.process) {
                a.ranges.entry(r.name).or_default().push((
                    r.start_ns.max(a.start),
                    r.end_ns.min(a.end),
                    r.process,
                ));
                let len = a.range_len.entry((r.name, r.process)).or_insert(Ns::MAX);
                *len = (*len).min(r.end_ns - r.start_ns);
            }
        }
    }
}

/// Intervals of `pid`'s process (all, when it is not known), as plain spans.
fn of_process(v: ProcessSpans, pid: Option<u32>) -> Vec<(Ns, Ns)> {
    v.into_iter()
        .filter(|x| pid.is_none_or(|p| p == x.2))
        .map(|x| (x.0, x.1))
        .collect()
}

/// The 3 call names that cover the most of the gap (of `pid`'s process), most first.
fn busiest_calls(
    trace: &Trace,
    m: BTreeMap<StrId, ProcessSpans>,
    pid: Option<u32>,
) -> Vec<NamedSpan> {
    let mut v: Vec<NamedSpan> = m
        .into_iter()
        .filter_map(|(name, iv)| {
            let mut iv = of_process(iv, pid);
            (!iv.is_empty()).then(|| NamedSpan {
                name: crate::names::held(trace.str(name)),
                ns: crate::intervals::union_ns(&mut iv),
            })
        })
        .collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    v.truncate(3);
    v
}

/// Ranges: those covering at least half the gap, innermost (shortest) first, at most 3 — the
/// most specific thing the host was inside; without such ranges, the 3 covering the most.
fn innermost_ranges(
    trace: &Trace,
    m: BTreeMap<StrId, ProcessSpans>,
    lens: &BTreeMap<(StrId, u32), Ns>,
    pid: Option<u32>,
    gap: Ns,
) -> Vec<NamedSpan> {
    let mut v: Vec<(Ns, NamedSpan)> = m
        .into_iter()
        .filter_map(|(name, iv)| {
            let mut iv = of_process(iv, pid);
            let len = lens
                .range((name, 0)..=(name, u32::MAX))
                .filter(|((_, p), _)| pid.is_none_or(|q| q == *p))
                .map(|(_, &l)| l)
                .min()?;
            (!iv.is_empty()).then(|| {
                let span = NamedSpan {
                    name: crate::names::held(trace.str(name)),
                    ns: crate::intervals::union_ns(&mut iv),
                };
                (len, span)
            })
        })
        .collect();
    if v.iter().any(|(_, x)| x.ns.saturating_mul(2) >= gap) {
        v.retain(|(_, x)| x.ns.saturating_mul(2) >= gap);
        v.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    } else {
        v.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then_with(|| a.1.name.cmp(&b.1.name)));
    }
    v.truncate(3);
    v.into_iter().map(|(_, x)| x).collect::<Vec<_>>()
}

/// Turns each gap's accumulator, in the order [`gap_accs`] made them, into the gap's
/// [`GapHost`] and its reading.
fn fill_gap_hosts(trace: &Trace, accs: Vec<GapAcc>, devices: &mut [DeviceReport]) {
    let mut accs = accs.into_iter();
    for d in devices.iter_mut() {
        for g in &mut d.timeline.largest_gaps {
            let Some(a) = accs.next() else { return };
            let launch = a.launch.map(|j| &trace.api_calls[j as usize]);
            // The process whose host this is: the kernel's (a merged trace), else its launch's
            // (a torch.profiler trace may hold several processes' calls).
            let pid = a.pid.or(launch.map(|c| c.process));
            let next_launch = launch.map(|c| NextLaunch {
                name: crate::names::held(trace.str(c.name)),
                start_ns: c.start_ns,
                end_ns: c.end_ns,
                returned_into_gap_ns: signed_ns(c.end_ns, g.start_ns),
            });
            let mut host = GapHost {
                next_launch,
                in_calls_ns: crate::intervals::union_ns(&mut of_process(a.all, pid)),
                calls: busiest_calls(trace, a.calls, pid),
                ranges: innermost_ranges(trace, a.ranges, &a.range_len, pid, g.length_ns),
                reading: None,
                module_loading: false,
                cpu_ops: Vec::new(),
            };
            host.reading = g.reading(&host);
            host.module_loading = g.module_loading(&host);
            g.host = Some(host);
        }
    }
}

/// `a − b` as a signed count, saturating.
fn signed_ns(a: Ns, b: Ns) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

/// Adds the gap `[start, end)` to `split`, cut where the next kernel's launch returned
/// (`launch_end`; `None`: no launch in the trace).
fn split_gap(split: &mut IdleSplit, start: Ns, end: Ns, launch_end: Option<Ns>) {
    let len = end - start;
    let Some(r) = launch_end else {
        split.unknown_ns += len;
        split.gaps_unknown += 1;
        return;
    };
    let before = r.clamp(start, end) - start;
    split.before_launch_ns += before;
    split.after_launch_ns += len - before;
    split.gaps_before_launch += u64::from(before > 0);
    split.gaps_after_launch += u64::from(before < len);
}

/// How much of `[start, end)` the sorted, disjoint `runs` cover.
fn overlap_with_runs(runs: &[(Ns, Ns)], start: Ns, end: Ns) -> Ns {
    let first = runs.partition_point(|r| r.1 <= start);
    runs[first..]
        .iter()
        .take_while(|r| r.0 < end)
        .map(|r| r.1.min(end).saturating_sub(r.0.max(start)))
        .sum()
}

/// Trace bounds and the count of inverted kernel/copy/memset/API records, in one pass per kind.
/// Fills the host ops of every device gap and the loader time of every step of `report`.
fn add_host_ops(trace: &Trace, report: &mut Report) {
    if trace.host_ops.is_empty() {
        return;
    }
    let index = crate::host_ops::OpIndex::new(trace);
    for d in &mut report.devices {
        for g in &mut d.timeline.largest_gaps {
            let pid = g.after.as_ref().and_then(|k| k.pid);
            let ops = index.gap_ops(g.start_ns, g.end_ns, pid);
            if let Some(h) = g.host.as_mut() {
                h.cpu_ops = ops;
            }
        }
    }
    let loaders = crate::host_ops::Loaders::new(trace);
    if loaders.is_empty() {
        return;
    }
    if let Some(st) = report.steps.as_mut() {
        for s in &mut st.steps {
            s.dataloader_ns = Some(loaders.time_in(s.pid, s.start_ns, s.end_ns));
        }
    }
}

/// The largest of 1000, 100, 10 and 1 ns that divides every start and end of the trace's
/// kernels, copies, memsets and API calls (1 without any): the resolution its clock was written
/// at. One pass, left as soon as nanoseconds are seen.
fn resolution(trace: &Trace) -> Ns {
    let mut res: Ns = 1000;
    let times = trace
        .kernels
        .iter()
        .filter(|r| !r.untimed())
        .map(|r| (r.start_ns, r.end_ns))
        .chain(trace.memcpys.iter().map(|r| (r.start_ns, r.end_ns)))
        .chain(trace.memsets.iter().map(|r| (r.start_ns, r.end_ns)))
        .chain(trace.api_calls.iter().map(|r| (r.start_ns, r.end_ns)));
    let mut any = false;
    for (s, e) in times {
        any = true;
        while res > 1 && (s % res != 0 || e % res != 0) {
            res /= 10;
        }
        if res == 1 {
            break;
        }
    }
    if any {
        res
    } else {
        1
    }
}

fn record_facts(trace: &Trace) -> (Option<(Ns, Ns)>, u64) {
    fn scan(spans: impl Iterator<Item = (Ns, Ns)>, acc: &mut (Ns, Ns, u64)) {
        for (s, e) in spans {
            acc.0 = acc.0.min(s);
            acc.1 = acc.1.max(e.max(s));
            acc.2 += u64::from(e < s);
        }
    }
    let mut acc = (Ns::MAX, 0, 0);
    scan(
        trace
            .kernels
            .iter()
            .filter(|r| !r.untimed())
            .map(|r| (r.start_ns, r.end_ns)),
        &mut acc,
    );
    scan(
        trace.memcpys.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut acc,
    );
    scan(
        trace.memsets.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut acc,
    );
    scan(
        trace.api_calls.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut acc,
    );
    let inverted = acc.2;
    // The other kinds widen the bounds but are not counted as inverted.
    let mut rest = (acc.0, acc.1, 0);
    scan(
        trace.syncs.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut rest,
    );
    scan(
        trace.ranges.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut rest,
    );
    scan(
        trace.overheads.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut rest,
    );
    scan(
        trace.host_ops.iter().map(|r| (r.start_ns, r.end_ns)),
        &mut rest,
    );
    scan(trace.marks.iter().map(|r| (r.ts_ns, r.ts_ns)), &mut rest);
    scan(trace.memory.iter().map(|r| (r.ts_ns, r.ts_ns)), &mut rest);
    scan(
        trace.memory_pools.iter().map(|r| (r.ts_ns, r.ts_ns)),
        &mut rest,
    );
    let bounds = (rest.0 != Ns::MAX).then_some((rest.0, rest.1));
    debug_assert_eq!(bounds, trace_bounds(trace));
    (bounds, inverted)
}

fn data_loss(trace: &Trace, inverted: u64, launches: crate::launches::LaunchLoss) -> DataLoss {
    let m = &trace.meta;
    DataLoss {
        dropped_by_recorder: m.dropped_by_recorder,
        dropped_by_cupti: m.dropped_by_cupti,
        drops_recorded: m.drops_recorded,
        complete: m.complete,
        incomplete_reason: m.incomplete_reason.clone(),
        damaged_bytes: m.damaged_bytes,
        damaged_regions: m.damaged_regions,
        skipped_events: m
            .skipped_events
            .iter()
            .map(|(category, count)| SkippedEvents {
                category: category.clone(),
                count: *count,
            })
            .collect(),
        inverted_intervals: inverted,
        source_drops: m
            .source_drops
            .iter()
            .map(|(name, count)| SourceDrop {
                name: name.clone(),
                count: *count,
            })
            .collect(),
        launches,
    }
}
