//! Hardware counters per kernel name (`cutrace profile` traces): counters are summed over the
//! kernels of a name; ratios, percentages and rates are averaged weighted by each kernel's
//! duration (a 10 ms kernel at 90 % and a 1 µs one at 10 % are 90 % of the time, not 50 %).
//! A value CUPTI could not read (NaN) is left out of both and counted, never taken as 0.
//!
//! Kernels are taken when they start inside the time window (a counter value belongs to the
//! whole kernel and cannot be clipped).
//!
//! CUPTI writes 0 for the start and end of the activity record of every kernel it profiles
//! with kernel replay (seen with CUDA 13.0, driver 580, on an H200): such a kernel's duration is
//! taken from its `gpu__time_duration.sum` value when the profile measured it, and the report
//! counts those kernels (`kernels_without_timestamps`), whose busy time the rest of the report
//! cannot place.

use std::collections::HashMap;

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::names::name_pair;
use crate::window::Window;

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
/// `.pct_of_peak_…`) and rates (`.per_second`, `.per_cycle_…`) are weighted means; every other
/// rollup (`.sum`, `.avg`, `.max`, `.min` of a count) is summed.
pub fn aggregation(metric: &str) -> Aggregation {
    let rate = metric.split('.').skip(1).any(|part| {
        part == "ratio"
            || part == "pct"
            || part.starts_with("pct_of_peak")
            || part.starts_with("per_")
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
}

#[derive(Default)]
struct Acc {
    kernels: u64,
    duration_ns: Ns,
    sum: Vec<f64>,
    weight: Vec<f64>,
    seen: Vec<bool>,
}

/// The counter report (at most `top` kernel names), or `None` for a trace without counters.
pub fn counter_report(trace: &Trace, window: Option<&Window>, top: usize) -> Option<CounterReport> {
    let info = trace.meta.counters.as_ref();
    if info.is_none() && trace.kernel_metrics.is_empty() {
        return None;
    }
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
    let gpu_time = names.iter().position(|n| n == "gpu__time_duration.sum");
    let mut by_name: HashMap<u32, Acc> = HashMap::new();
    let mut without = 0u64;
    let mut no_timestamps = 0u64;
    for (i, k) in trace.kernels.iter().enumerate() {
        if !in_window(k.start_ns) {
            continue;
        }
        let Some(row) = values.get(&i) else {
            without += 1;
            continue;
        };
        let mut dur = k.end_ns.saturating_sub(k.start_ns);
        if k.start_ns == 0 && k.end_ns == 0 {
            no_timestamps += 1;
            if let Some(v) = gpu_time
                .map(|c| row[c])
                .filter(|v| v.is_finite() && *v >= 0.0)
            {
                dur = v as Ns;
            }
        }
        let a = by_name.entry(k.name).or_insert_with(|| Acc {
            sum: vec![0.0; names.len()],
            weight: vec![0.0; names.len()],
            seen: vec![false; names.len()],
            ..Acc::default()
        });
        a.kernels += 1;
        a.duration_ns = a.duration_ns.saturating_add(dur);
        for (c, &v) in row.iter().enumerate() {
            if v.is_nan() {
                continue;
            }
            a.seen[c] = true;
            match aggs[c] {
                Aggregation::Sum => a.sum[c] += v,
                Aggregation::DurationWeightedMean => {
                    // A zero-length kernel still counts, with a minimal weight.
                    let w = dur.max(1) as f64;
                    a.sum[c] += v * w;
                    a.weight[c] += w;
                }
            }
        }
    }
    let mut by_kernel: Vec<KernelCounters> = by_name
        .into_iter()
        .map(|(name, a)| {
            let raw = trace.strings.get(name as usize).map_or("?", String::as_str);
            let (name, mangled_name) = name_pair(raw);
            let values = (0..names.len())
                .map(|c| {
                    a.seen[c].then(|| match aggs[c] {
                        Aggregation::Sum => a.sum[c],
                        Aggregation::DurationWeightedMean => a.sum[c] / a.weight[c],
                    })
                })
                .collect();
            KernelCounters {
                name,
                mangled_name,
                kernels: a.kernels,
                duration_ns: a.duration_ns,
                values,
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
    let d = cutrace_trace::CounterInfo::default();
    let info = info.unwrap_or(&d);
    Some(CounterReport {
        metrics: names
            .into_iter()
            .zip(aggs)
            .map(|(name, aggregation)| MetricColumn { name, aggregation })
            .collect(),
        passes: info.passes,
        kernels_serialized: true,
        kernels_profiled: info.kernels_profiled,
        kernels_skipped: info.kernels_skipped,
        graph_launches: info.graph_launches,
        launches_captured: info.launches_captured,
        ranges_dropped: info.ranges_dropped,
        kernels_without_values: without,
        values_unavailable: unavailable,
        kernels_without_timestamps: no_timestamps,
        error: info.error.clone(),
        kernel_names,
        by_kernel,
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
            // The base name holding "pct" is not a rollup.
            ("smsp__pct_something.sum", Sum),
        ] {
            assert_eq!(aggregation(m), want, "{m}");
        }
    }
}
