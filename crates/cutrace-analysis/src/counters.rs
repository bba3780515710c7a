//! Hardware counters per kernel name (`cutrace profile` traces): counters are summed over the
//! kernels of a name; ratios, percentages and rates are averaged weighted by each kernel's
//! duration (a 10 ms kernel at 90 % and a 1 µs one at 10 % are 90 % of the time, not 50 %).
//! A value CUPTI could not read (NaN) is left out of both and counted, never taken as 0.
//! The same rules give the figures per GPU and, once the steps are known ([`add_steps`]), per
//! step and GPU.
//!
//! Kernels are taken when they start inside the time window (a counter value belongs to the
//! whole kernel and cannot be clipped).
//!
//! CUPTI writes 0 for the start and end of the activity record of every kernel it profiles
//! with kernel replay (seen with CUDA 13.0, driver 580, on an H200): such a kernel's duration is
//! taken from its `gpu__time_duration.sum` value when the profile measured it, and the report
//! counts those kernels (`kernels_without_timestamps`), whose busy time the rest of the report
//! cannot place. Such a kernel ran inside its launch call (the replay and the read-out happen
//! there), so that call's start is where it is placed in time: in a step, and on an exported
//! timeline ([`counter_samples`]).

use std::collections::{BTreeMap, HashMap};

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::correlate::ApiIndex;
use crate::names::name_pair;
use crate::steps::Steps;
use crate::window::Window;

/// The metric whose value is a kernel's duration when its record has no timestamps.
pub const GPU_TIME: &str = "gpu__time_duration.sum";

/// How a metric's values are combined over kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Added up (counts, bytes, cycles, durations).
    Sum,
    /// Averaged with each kernel's duration as its weight (ratios, percentages, rates).
    DurationWeightedMean,
}

/// How `metric` is combined, from its name: ratios (`.ratio`), percentages (`.pct`,
/// `.pct_of_peak_…`), rates (`.per_second`, `.per_cycle_…`) and peak rates
/// (`.peak_sustained…`, a per-cycle capacity of the unit) are weighted means; every other
/// rollup (`.sum`, `.avg`, `.max`, `.min` of a count) is summed.
pub fn aggregation(metric: &str) -> Aggregation {
    let rate = metric.split('.').skip(1).any(|part| {
        part == "ratio"
            || part == "pct"
            || part.starts_with("pct_of_peak")
            || part.starts_with("per_")
            || part.starts_with("peak_sustained")
    });
    if rate {
        Aggregation::DurationWeightedMean
    } else {
        Aggregation::Sum
    }
}

/// One metric of the report, in the order the profile asked for them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricColumn {
    pub name: String,
    pub aggregation: Aggregation,
}

/// One kernel name's counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelCounters {
    /// Demangled for display when the trace has a mangled name.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mangled_name: Option<String>,
    /// Kernels of this name that have counter values.
    pub kernels: u64,
    /// Their summed duration, the weight of the means: each kernel's activity record duration,
    /// or its `gpu__time_duration.sum` where the record has no timestamps.
    pub duration_ns: Ns,
    /// One value per metric, in [`CounterReport::metrics`] order: the sum or the
    /// duration-weighted mean; `null` when no kernel of this name has a value for it.
    pub values: Vec<Option<f64>>,
}

/// The counters of a trace recorded with `cutrace profile`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterReport {
    pub metrics: Vec<MetricColumn>,
    /// Replay passes the metrics needed: each profiled kernel ran this many times.
    pub passes: Option<u32>,
    /// Profiled kernels ran one at a time (the context is synchronized around each range), so
    /// the trace's timing and overlap are not those of an unprofiled run.
    pub kernels_serialized: bool,
    /// The replay's cost as the trace shows it; `None` when no kernel with values has its
    /// launch call in the trace.
    pub replay: Option<ReplayCost>,
    pub kernels_profiled: u64,
    /// Left out on purpose (--kernels, --max-kernels, --every).
    pub kernels_skipped: u64,
    /// Graph launches: their kernels have no counters.
    pub graph_launches: u64,
    /// Launches captured into a graph (stream capture): no counters.
    pub launches_captured: u64,
    /// Ranges CUPTI dropped or whose values could not be read.
    pub ranges_dropped: u64,
    /// Kernel records in the window without counter values (skipped, in graphs, dropped, or
    /// after counters failed).
    pub kernels_without_values: u64,
    /// Values CUPTI reported as unavailable (NaN), left out of sums and means.
    pub values_unavailable: u64,
    /// Kernels with values whose activity record has no timestamps (CUPTI writes 0 for kernels
    /// it replays): their duration comes from `gpu__time_duration.sum` when measured, and the
    /// trace's busy time and gaps cannot include them.
    pub kernels_without_timestamps: u64,
    /// Why counters failed or stopped, with the fix.
    pub error: Option<String>,
    /// Distinct kernel names with counter values (the list below is capped).
    pub kernel_names: u64,
    /// Per kernel name, most total duration first, then by name (the report's `top`).
    pub by_kernel: Vec<KernelCounters>,
    /// Per GPU, by device id: every kernel with values on it.
    pub by_device: Vec<DeviceCounters>,
    /// Per step and GPU, in step order ([`add_steps`]); absent when the report has no steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_step: Option<Vec<StepCounters>>,
    /// With steps: kernels with values launched in no step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels_outside_steps: Option<u64>,
}

/// One GPU's counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceCounters {
    pub device: u32,
    pub kernels: u64,
    pub duration_ns: Ns,
    /// As in [`KernelCounters::values`].
    pub values: Vec<Option<f64>>,
}

/// One step's counters on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCounters {
    /// The step's `index` in the report's `steps.steps`.
    pub step: u64,
    pub name: String,
    pub pid: u32,
    pub device: u32,
    pub kernels: u64,
    pub duration_ns: Ns,
    /// As in [`KernelCounters::values`].
    pub values: Vec<Option<f64>>,
}

/// What the trace shows of the cost of replay: the launch calls of the kernels with values,
/// inside which CUPTI replays each kernel once per pass and reads its counters, against the
/// kernels' own durations. Not the program's slowdown against an unprofiled run, which needs
/// that run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayCost {
    /// Kernels with values whose launch call is in the trace.
    pub kernels: u64,
    /// Their launch calls' summed duration.
    pub launch_ns: Ns,
    /// Their summed duration (the weights of the means).
    pub kernel_ns: Ns,
    /// `launch_ns / kernel_ns`; null when `kernel_ns` is 0.
    pub launch_over_kernel: Option<f64>,
}

#[derive(Default)]
struct Acc {
    kernels: u64,
    duration_ns: Ns,
    sum: Vec<f64>,
    weight: Vec<f64>,
    seen: Vec<bool>,
}

impl Acc {
    fn new(columns: usize) -> Acc {
        Acc {
            sum: vec![0.0; columns],
            weight: vec![0.0; columns],
            seen: vec![false; columns],
            ..Acc::default()
        }
    }

    /// One kernel of duration `dur` with one value per column (NaN: unavailable, left out).
    fn add(&mut self, dur: Ns, row: &[f64], aggs: &[Aggregation]) {
        self.kernels += 1;
        self.duration_ns = self.duration_ns.saturating_add(dur);
        for (c, &v) in row.iter().enumerate() {
            if v.is_nan() {
                continue;
            }
            self.seen[c] = true;
            match aggs[c] {
                Aggregation::Sum => self.sum[c] += v,
                Aggregation::DurationWeightedMean => {
                    // A zero-length kernel still counts, with a minimal weight.
                    let w = dur.max(1) as f64;
                    self.sum[c] += v * w;
                    self.weight[c] += w;
                }
            }
        }
    }

    fn values(&self, aggs: &[Aggregation]) -> Vec<Option<f64>> {
        aggs.iter()
            .enumerate()
            .map(|(c, a)| {
                self.seen[c].then(|| match a {
                    Aggregation::Sum => self.sum[c],
                    Aggregation::DurationWeightedMean => self.sum[c] / self.weight[c],
                })
            })
            .collect()
    }
}

/// One kernel with counter values: its index in `trace.kernels`, its duration (the weight of
/// the means) and one value per metric column (NaN where unavailable or not read).
struct Row {
    kernel: usize,
    duration_ns: Ns,
    values: Vec<f64>,
}

/// The kernels of a trace with their values, in kernel order, and the counts of what is missing.
struct Prepared {
    names: Vec<String>,
    aggs: Vec<Aggregation>,
    rows: Vec<Row>,
    values_unavailable: u64,
    kernels_without_values: u64,
    kernels_without_timestamps: u64,
}

/// Joins the trace's counter values to its kernels (by correlation id) inside `window`.
fn prepare(trace: &Trace, window: Option<&Window>) -> Prepared {
    let info = trace.meta.counters.as_ref();
    // Metric columns: those asked for, then any others the records hold, by first appearance.
    let mut names: Vec<String> = info.map(|i| i.metrics.clone()).unwrap_or_default();
    let mut column: HashMap<u32, usize> = HashMap::new();
    for m in &trace.kernel_metrics {
        if column.contains_key(&m.metric) {
            continue;
        }
        let text = trace
            .strings
            .get(m.metric as usize)
            .map_or("?", String::as_str);
        let idx = match names.iter().position(|n| n == text) {
            Some(i) => i,
            None => {
                names.push(text.to_string());
                names.len() - 1
            }
        };
        column.insert(m.metric, idx);
    }
    let aggs: Vec<Aggregation> = names.iter().map(|n| aggregation(n)).collect();
    // Kernels by correlation id (unique per process after the merge of parts).
    let mut by_corr: HashMap<u64, usize> = HashMap::with_capacity(trace.kernels.len());
    for (i, k) in trace.kernels.iter().enumerate() {
        if k.correlation_id != 0 {
            by_corr.insert(k.correlation_id, i);
        }
    }
    let in_window = |start: Ns| match window {
        None => true,
        Some(w) => w.from_ns <= start && start < w.to_ns,
    };
    let mut values: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut unavailable = 0u64;
    for m in &trace.kernel_metrics {
        let Some(&k) = by_corr.get(&m.correlation_id) else {
            continue;
        };
        if !in_window(trace.kernels[k].start_ns) {
            continue;
        }
        let row = values
            .entry(k)
            .or_insert_with(|| vec![f64::NAN; names.len()]);
        if m.value.is_nan() {
            unavailable += 1;
        }
        row[column[&m.metric]] = m.value;
    }
    let gpu_time = names.iter().position(|n| n == GPU_TIME);
    let mut rows = Vec::with_capacity(values.len());
    let mut without = 0u64;
    let mut no_timestamps = 0u64;
    for (i, k) in trace.kernels.iter().enumerate() {
        if !in_window(k.start_ns) {
            continue;
        }
        let Some(row) = values.remove(&i) else {
            without += 1;
            continue;
        };
        let mut dur = k.end_ns.saturating_sub(k.start_ns);
        if k.untimed() {
            no_timestamps += 1;
            if let Some(v) = gpu_time
                .map(|c| row[c])
                .filter(|v| v.is_finite() && *v >= 0.0)
            {
                dur = v as Ns;
            }
        }
        rows.push(Row {
            kernel: i,
            duration_ns: dur,
            values: row,
        });
    }
    Prepared {
        names,
        aggs,
        rows,
        values_unavailable: unavailable,
        kernels_without_values: without,
        kernels_without_timestamps: no_timestamps,
    }
}

/// The counter report (at most `top` kernel names), or `None` for a trace without counters.
/// `by_step` is left `None`: [`add_steps`] fills it once the steps are known.
pub fn counter_report(trace: &Trace, window: Option<&Window>, top: usize) -> Option<CounterReport> {
    let info = trace.meta.counters.as_ref();
    if info.is_none() && trace.kernel_metrics.is_empty() {
        return None;
    }
    let p = prepare(trace, window);
    let columns = p.names.len();
    let mut by_name: HashMap<u32, Acc> = HashMap::new();
    let mut by_dev: BTreeMap<u32, Acc> = BTreeMap::new();
    for r in &p.rows {
        let k = &trace.kernels[r.kernel];
        by_name
            .entry(k.name)
            .or_insert_with(|| Acc::new(columns))
            .add(r.duration_ns, &r.values, &p.aggs);
        by_dev
            .entry(k.device)
            .or_insert_with(|| Acc::new(columns))
            .add(r.duration_ns, &r.values, &p.aggs);
    }
    let mut by_kernel: Vec<KernelCounters> = by_name
        .into_iter()
        .map(|(name, a)| {
            let raw = trace.strings.get(name as usize).map_or("?", String::as_str);
            let (name, mangled_name) = name_pair(raw);
            KernelCounters {
                name,
                mangled_name,
                kernels: a.kernels,
                duration_ns: a.duration_ns,
                values: a.values(&p.aggs),
            }
        })
        .collect();
    by_kernel.sort_by(|a, b| {
        b.duration_ns
            .cmp(&a.duration_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    let kernel_names = by_kernel.len() as u64;
    by_kernel.truncate(top);
    let by_device = by_dev
        .into_iter()
        .map(|(device, a)| DeviceCounters {
            device,
            kernels: a.kernels,
            duration_ns: a.duration_ns,
            values: a.values(&p.aggs),
        })
        .collect();
    let replay = replay_cost(trace, &p.rows);
    let d = cutrace_trace::CounterInfo::default();
    let info = info.unwrap_or(&d);
    Some(CounterReport {
        metrics: p
            .names
            .into_iter()
            .zip(p.aggs)
            .map(|(name, aggregation)| MetricColumn { name, aggregation })
            .collect(),
        passes: info.passes,
        kernels_serialized: true,
        replay,
        kernels_profiled: info.kernels_profiled,
        kernels_skipped: info.kernels_skipped,
        graph_launches: info.graph_launches,
        launches_captured: info.launches_captured,
        ranges_dropped: info.ranges_dropped,
        kernels_without_values: p.kernels_without_values,
        values_unavailable: p.values_unavailable,
        kernels_without_timestamps: p.kernels_without_timestamps,
        error: info.error.clone(),
        kernel_names,
        by_kernel,
        by_device,
        by_step: None,
        kernels_outside_steps: None,
    })
}

/// What the trace shows of the replay's cost: the launch calls of the kernels with values (the
/// replay passes and the read-out run inside them) against those kernels' own durations.
fn replay_cost(trace: &Trace, rows: &[Row]) -> Option<ReplayCost> {
    let index = ApiIndex::build(&trace.api_calls);
    let mut cost = ReplayCost {
        kernels: 0,
        launch_ns: 0,
        kernel_ns: 0,
        launch_over_kernel: None,
    };
    for r in rows {
        let k = &trace.kernels[r.kernel];
        let Some(i) = index.get(k.correlation_id) else {
            continue;
        };
        let call = &trace.api_calls[i];
        cost.kernels += 1;
        cost.launch_ns = cost
            .launch_ns
            .saturating_add(call.end_ns.saturating_sub(call.start_ns));
        cost.kernel_ns = cost.kernel_ns.saturating_add(r.duration_ns);
    }
    if cost.kernels == 0 {
        return None;
    }
    cost.launch_over_kernel =
        (cost.kernel_ns > 0).then(|| cost.launch_ns as f64 / cost.kernel_ns as f64);
    Some(cost)
}

/// Fills `report.by_step`: the counters of each step, per GPU. A kernel belongs to the step
/// during which its launch call started (the step that launched it: a profiled kernel runs
/// inside its launch call, and its own record has no timestamps), or, without a launch record,
/// during which it started; in a merged trace only steps of its own process count. Kernels with
/// values in no step are counted in `kernels_outside_steps`.
pub fn add_steps(
    report: &mut CounterReport,
    trace: &Trace,
    window: Option<&Window>,
    steps: &Steps,
) {
    let p = prepare(trace, window);
    let merged = trace.meta.id_parts.len() > 1;
    // Per process (merged trace) or all together: (start, end, list position), by start.
    let mut lanes: BTreeMap<Option<u32>, Vec<(Ns, Ns, usize)>> = BTreeMap::new();
    for (i, s) in steps.steps.iter().enumerate() {
        let key = merged.then_some(s.pid);
        lanes
            .entry(key)
            .or_default()
            .push((s.start_ns, s.end_ns, i));
    }
    for l in lanes.values_mut() {
        l.sort_unstable();
    }
    let index = ApiIndex::build(&trace.api_calls);
    let columns = p.names.len();
    let mut acc: BTreeMap<(usize, u32), Acc> = BTreeMap::new();
    let mut outside = 0u64;
    for r in &p.rows {
        let k = &trace.kernels[r.kernel];
        let at = match index.get(k.correlation_id) {
            Some(i) => Some(trace.api_calls[i].start_ns),
            None => (!k.untimed()).then_some(k.start_ns),
        };
        let key = if merged {
            trace.meta.id_origin(k.stream).0
        } else {
            None
        };
        let step = at.and_then(|t| {
            let lane = lanes.get(&key)?;
            let n = lane.partition_point(|s| s.0 <= t);
            let s = lane.get(n.checked_sub(1)?)?;
            (t < s.1).then_some(s.2)
        });
        match step {
            Some(s) => acc
                .entry((s, k.device))
                .or_insert_with(|| Acc::new(columns))
                .add(r.duration_ns, &r.values, &p.aggs),
            None => outside += 1,
        }
    }
    report.by_step = Some(
        acc.into_iter()
            .map(|((i, device), a)| {
                let s = &steps.steps[i];
                StepCounters {
                    step: s.index,
                    name: s.name.clone(),
                    pid: s.pid,
                    device,
                    kernels: a.kernels,
                    duration_ns: a.duration_ns,
                    values: a.values(&p.aggs),
                }
            })
            .collect(),
    );
    report.kernels_outside_steps = Some(outside);
}

/// One row of the `kernel_metrics` export: a kernel's value of one metric, with the kernel's
/// device, name (as recorded) and the time its counters are placed at.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    pub correlation_id: u64,
    pub device: u32,
    /// The kernel's name id in the trace's strings.
    pub kernel_name: u32,
    /// The metric's name id in the trace's strings.
    pub metric: u32,
    /// NaN: unavailable.
    pub value: f64,
    /// Where a timeline puts the value: the kernel's start when its record has timestamps,
    /// else the start of its launch call (a profiled kernel runs inside it); `None` when
    /// neither is known.
    pub at_ns: Option<Ns>,
    /// Whether `at_ns` is the launch call's start (the kernel's own record has no time).
    pub at_launch_call: bool,
}

/// Every counter value of the trace joined to its kernel and placed in time, in kernel order
/// then metric order as recorded; values whose kernel is not in the trace are left out and
/// counted (second value).
pub fn counter_samples(trace: &Trace) -> (Vec<CounterSample>, u64) {
    let mut by_corr: HashMap<u64, usize> = HashMap::with_capacity(trace.kernels.len());
    for (i, k) in trace.kernels.iter().enumerate() {
        if k.correlation_id != 0 {
            by_corr.insert(k.correlation_id, i);
        }
    }
    let index = ApiIndex::build(&trace.api_calls);
    let mut out = Vec::with_capacity(trace.kernel_metrics.len());
    let mut orphans = 0u64;
    for m in &trace.kernel_metrics {
        let Some(&ki) = by_corr.get(&m.correlation_id) else {
            orphans += 1;
            continue;
        };
        let k = &trace.kernels[ki];
        let (at_ns, at_launch_call) = if k.untimed() {
            match index.get(k.correlation_id) {
                Some(i) => (Some(trace.api_calls[i].start_ns), true),
                None => (None, false),
            }
        } else {
            (Some(k.start_ns), false)
        };
        out.push(CounterSample {
            correlation_id: m.correlation_id,
            device: m.device,
            kernel_name: k.name,
            metric: m.metric,
            value: m.value,
            at_ns,
            at_launch_call,
        });
    }
    (out, orphans)
}

/// The counters of two traces (`cutrace diff`), per kernel name and metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountersDiff {
    /// Every metric of either trace: the base's, then those only the new trace has.
    pub metrics: Vec<MetricColumn>,
    /// How each side's counters were taken; null for a side without counters.
    pub base: Option<CounterSide>,
    pub new: Option<CounterSide>,
    /// Kernel names with values in both traces, only in the base, only in the new one (exact).
    pub kernel_names_in_both: u64,
    pub kernel_names_only_in_base: u64,
    pub kernel_names_only_in_new: u64,
    /// Per kernel name (matched as the kernel list matches them), largest summed duration of
    /// either side first, `top` names.
    pub kernels: Vec<KernelCountersDiff>,
}

/// One side's counter facts, as in [`CounterReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterSide {
    pub passes: Option<u32>,
    pub kernels_profiled: u64,
    pub kernels_skipped: u64,
    pub ranges_dropped: u64,
    pub values_unavailable: u64,
    pub kernels_without_values: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelCountersDiff {
    pub name: String,
    /// Kernels of this name with values on each side (0 when the side lacks the name): sums
    /// compare like for like only when these are equal.
    pub base_kernels: u64,
    pub new_kernels: u64,
    pub base_duration_ns: Ns,
    pub new_duration_ns: Ns,
    /// One per metric, in [`CountersDiff::metrics`] order.
    pub metrics: Vec<MetricChange>,
}

/// One metric of one kernel name in both traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricChange {
    /// The value on each side (sum or duration-weighted mean); null when unavailable or absent.
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// `new − base`, null unless both are known.
    pub change: Option<f64>,
    /// The change as a percentage of the base; null unless both are known and the base is not 0.
    pub change_pct: Option<f64>,
}

fn counter_side(c: &CounterReport) -> CounterSide {
    CounterSide {
        passes: c.passes,
        kernels_profiled: c.kernels_profiled,
        kernels_skipped: c.kernels_skipped,
        ranges_dropped: c.ranges_dropped,
        values_unavailable: c.values_unavailable,
        kernels_without_values: c.kernels_without_values,
        error: c.error.clone(),
    }
}

/// Compares the counters of `new` against `base`; `None` when neither has counters. Kernel
/// names are matched with `key` (the diff's name key).
pub fn counters_diff(
    base: &Trace,
    new: &Trace,
    windows: (Option<&Window>, Option<&Window>),
    top: usize,
    key: impl Fn(&str) -> String,
) -> Option<CountersDiff> {
    let cb = counter_report(base, windows.0, usize::MAX);
    let cn = counter_report(new, windows.1, usize::MAX);
    counters_diff_of(cb.as_ref(), cn.as_ref(), top, key)
}

/// [`counters_diff`] of two sides' counter reports, each with every kernel name
/// (`counter_report(t, window, usize::MAX)`).
pub fn counters_diff_of(
    cb: Option<&CounterReport>,
    cn: Option<&CounterReport>,
    top: usize,
    key: impl Fn(&str) -> String,
) -> Option<CountersDiff> {
    if cb.is_none() && cn.is_none() {
        return None;
    }
    let mut metrics: Vec<MetricColumn> = Vec::new();
    for c in cb.iter().chain(cn.iter()) {
        for m in &c.metrics {
            if !metrics.iter().any(|x| x.name == m.name) {
                metrics.push(m.clone());
            }
        }
    }
    // Each side's values re-ordered to `metrics`.
    let remap = |c: &CounterReport, k: &KernelCounters| -> Vec<Option<f64>> {
        metrics
            .iter()
            .map(|m| {
                c.metrics
                    .iter()
                    .position(|x| x.name == m.name)
                    .and_then(|i| k.values[i])
            })
            .collect()
    };
    type SideRow = (u64, Ns, Vec<Option<f64>>);
    type Both = (String, Option<SideRow>, Option<SideRow>);
    let mut by_key: BTreeMap<String, Both> = BTreeMap::new();
    for (side, c) in [(0, cb), (1, cn)] {
        let Some(c) = c else { continue };
        for k in &c.by_kernel {
            let e = by_key
                .entry(key(&k.name))
                .or_insert_with(|| (k.name.clone(), None, None));
            let row = Some((k.kernels, k.duration_ns, remap(c, k)));
            if side == 0 {
                e.1 = row;
            } else {
                e.2 = row;
            }
        }
    }
    let count = |f: &dyn Fn(&Both) -> bool| by_key.values().filter(|v| f(v)).count() as u64;
    let both = count(&|v| v.1.is_some() && v.2.is_some());
    let only_base = count(&|v| v.1.is_some() && v.2.is_none());
    let only_new = count(&|v| v.1.is_none() && v.2.is_some());
    let empty = vec![None; metrics.len()];
    let mut kernels: Vec<KernelCountersDiff> = by_key
        .into_values()
        .map(|(name, b, n)| {
            let (bk, bd, bv) = b.unwrap_or((0, 0, empty.clone()));
            let (nk, nd, nv) = n.unwrap_or((0, 0, empty.clone()));
            let metrics = bv
                .iter()
                .zip(&nv)
                .map(|(&base, &new)| {
                    let change = base.zip(new).map(|(b, n)| n - b);
                    MetricChange {
                        base,
                        new,
                        change,
                        change_pct: change
                            .zip(base)
                            .filter(|(_, b)| *b != 0.0)
                            .map(|(c, b)| c / b.abs() * 100.0),
                    }
                })
                .collect();
            KernelCountersDiff {
                name,
                base_kernels: bk,
                new_kernels: nk,
                base_duration_ns: bd,
                new_duration_ns: nd,
                metrics,
            }
        })
        .collect();
    kernels.sort_by(|a, b| {
        let size = |k: &KernelCountersDiff| k.base_duration_ns.max(k.new_duration_ns);
        size(b).cmp(&size(a)).then_with(|| a.name.cmp(&b.name))
    });
    kernels.truncate(top);
    Some(CountersDiff {
        metrics,
        base: cb.map(counter_side),
        new: cn.map(counter_side),
        kernel_names_in_both: both,
        kernel_names_only_in_base: only_base,
        kernel_names_only_in_new: only_new,
        kernels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_percentages_and_rates_are_weighted_means_the_rest_sums() {
        use Aggregation::*;
        for (m, want) in [
            ("sm__ctas_launched.sum", Sum),
            ("sm__cycles_active.avg", Sum),
            ("gpc__cycles_elapsed.max", Sum),
            ("gpu__time_duration.sum", Sum),
            (
                "sm__warps_active.avg.pct_of_peak_sustained_active",
                DurationWeightedMean,
            ),
            (
                "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                DurationWeightedMean,
            ),
            ("lts__t_sector_hit_rate.pct", DurationWeightedMean),
            ("smsp__average_warp_latency.ratio", DurationWeightedMean),
            ("dram__cycles_elapsed.avg.per_second", DurationWeightedMean),
            (
                "sm__inst_executed.avg.per_cycle_active",
                DurationWeightedMean,
            ),
            ("sm__inst_executed.sum.peak_sustained", DurationWeightedMean),
            (
                "dram__bytes.sum.peak_sustained_elapsed",
                DurationWeightedMean,
            ),
            // The base name holding "pct" or "peak_sustained" is not a rollup.
            ("smsp__pct_something.sum", Sum),
            ("lts__peak_sustained_thing.sum", Sum),
        ] {
            assert_eq!(aggregation(m), want, "{m}");
        }
    }

    use cutrace_testkit::counters::counter_trace;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn per_kernel_name_and_device_sum_counters_and_weight_percentages_by_duration() {
        let t = counter_trace();
        let c = counter_report(&t, None, 10).expect("counters");
        let names: Vec<&str> = c.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names[1], cutrace_testkit::counters::WARPS_PCT);
        assert_eq!(c.metrics[1].aggregation, Aggregation::DurationWeightedMean);
        // gemm: corr 1, 2, 4 (durations from gpu__time_duration.sum: 1000, 3000, 1000).
        let gemm = &c.by_kernel[0];
        assert_eq!(
            (gemm.name.as_str(), gemm.kernels, gemm.duration_ns),
            ("gemm", 3, 5_000)
        );
        assert!(close(gemm.values[0], 600.0));
        assert!(close(
            gemm.values[1],
            (50.0 * 1e3 + 80.0 * 3e3 + 20.0 * 1e3) / 5e3
        ));
        // copy: corr 3 (timed, 2000 ns, % unavailable) and 6 (500 ns): the NaN is left out.
        let copy = &c.by_kernel[1];
        assert_eq!((copy.kernels, copy.duration_ns), (2, 2_500));
        assert!(close(copy.values[0], 15.0));
        assert!(close(copy.values[1], 10.0));
        assert_eq!(c.by_device.len(), 2);
        assert_eq!(
            (c.by_device[0].device, c.by_device[0].values.clone()),
            (0, gemm.values.clone())
        );
        assert_eq!(c.by_device[1].values, copy.values);
        assert_eq!(
            (
                c.values_unavailable,
                c.kernels_without_values,
                c.kernels_without_timestamps
            ),
            (1, 1, 4)
        );
        assert_eq!((c.ranges_dropped, c.passes), (2, Some(1)));
        assert!(c.by_step.is_none());
    }

    #[test]
    fn replay_cost_is_the_launch_calls_against_the_kernels() {
        let c = counter_report(&counter_trace(), None, 10).expect("counters");
        let r = c.replay.expect("launch calls are in the trace");
        assert_eq!((r.kernels, r.launch_ns, r.kernel_ns), (5, 5_500, 7_500));
        assert!(close(r.launch_over_kernel, 5_500.0 / 7_500.0));
        // Without launch records the trace cannot tell.
        let mut t = counter_trace();
        t.api_calls.clear();
        assert!(counter_report(&t, None, 10).unwrap().replay.is_none());
    }

    #[test]
    fn a_kernel_belongs_to_the_step_that_launched_it() {
        let t = counter_trace();
        let steps = crate::steps(&t, None, &crate::StepMatch::profiler_steps()).expect("steps");
        let mut c = counter_report(&t, None, 10).expect("counters");
        add_steps(&mut c, &t, None, &steps);
        let rows = c.by_step.as_ref().expect("by_step");
        let keys: Vec<(u64, u32, u64)> =
            rows.iter().map(|r| (r.step, r.device, r.kernels)).collect();
        // Step 1: corr 1, 2 on GPU 0. Step 2: corr 4 on GPU 0, corr 3 on GPU 1 (launched in
        // step 2; corr 3 is timed, but its launch call decides). Corr 6: in no step.
        assert_eq!(keys, vec![(1, 0, 2), (2, 0, 1), (2, 1, 1)]);
        assert!(close(rows[0].values[1], (50.0 * 1e3 + 80.0 * 3e3) / 4e3));
        assert_eq!(rows[0].duration_ns, 4_000);
        // Corr 3's percentage is unavailable: null, never 0.
        assert_eq!(rows[2].values[1], None);
        assert!(close(rows[2].values[0], 10.0));
        assert_eq!(rows[1].name, "ProfilerStep#2");
        assert_eq!(c.kernels_outside_steps, Some(1));
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["by_step"][2]["values"][1].is_null());
    }

    #[test]
    fn counter_samples_sit_at_the_kernel_or_its_launch_call() {
        let t = counter_trace();
        let (s, orphans) = counter_samples(&t);
        assert_eq!(orphans, 0);
        assert_eq!(s.len(), t.kernel_metrics.len());
        let corr3 = s.iter().find(|x| x.correlation_id == 3).unwrap();
        assert_eq!((corr3.at_ns, corr3.at_launch_call), (Some(12_000), false));
        let corr1 = s.iter().find(|x| x.correlation_id == 1).unwrap();
        assert_eq!((corr1.at_ns, corr1.at_launch_call), (Some(1_000), true));
        assert!(s.iter().any(|x| x.value.is_nan()));
    }

    #[test]
    fn the_diff_compares_each_kernel_name_and_metric_and_keeps_unknowns_null() {
        let base = counter_trace();
        let mut new = counter_trace();
        // The new run: gemm's first kernel launches twice the CTAs; copy's % becomes readable.
        for m in &mut new.kernel_metrics {
            if m.correlation_id == 1 && new.strings[m.metric as usize] == "sm__ctas_launched.sum" {
                m.value = 200.0;
            }
        }
        let d = counters_diff(&base, &new, (None, None), 10, |s| s.to_string()).expect("diff");
        assert_eq!(
            (d.kernel_names_in_both, d.kernel_names_only_in_base),
            (2, 0)
        );
        let gemm = &d.kernels[0];
        assert_eq!(
            (gemm.name.as_str(), gemm.base_kernels, gemm.new_kernels),
            ("gemm", 3, 3)
        );
        let ctas = &gemm.metrics[0];
        assert_eq!(
            (ctas.base, ctas.new, ctas.change),
            (Some(600.0), Some(700.0), Some(100.0))
        );
        assert!(close(ctas.change_pct, 100.0 / 6.0));
        // A trace without counters on one side: the other side's values, changes null.
        let plain = cutrace_testkit::records::seed_trace(&[]);
        let d = counters_diff(&base, &plain, (None, None), 10, |s| s.to_string()).expect("diff");
        assert!(d.new.is_none());
        assert_eq!(d.kernel_names_only_in_base, 2);
        assert!(d
            .kernels
            .iter()
            .all(|k| k.metrics.iter().all(|m| m.change.is_none())));
        assert!(counters_diff(&plain, &plain, (None, None), 10, |s| s.to_string()).is_none());
    }
}
