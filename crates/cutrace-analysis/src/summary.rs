//! Per-name summaries: kernels (like `nsys stats` cuda_gpu_kern_sum) and API calls (like
//! cuda_api_sum). Durations are clipped to the time window; medians and p99 are nearest-rank.
//!
//! Grouping is a counting sort on the interned name id (two passes, one flat array of
//! durations), so it costs no hashing and no allocation per record.

use cutrace_trace::{Ns, StrId, Trace};
use serde::Serialize;

use crate::names::name_pair;
use crate::percentile::percentile;
use crate::window::{clip, Window};

/// Duration statistics of the records of one name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NameStats {
    /// Demangled for display when the trace has a mangled name.
    pub name: String,
    /// The name as the trace records it, when that differs from `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mangled_name: Option<String>,
    pub count: u64,
    pub total_ns: Ns,
    /// `total_ns / count`, rounded down to a whole nanosecond.
    pub mean_ns: Ns,
    pub min_ns: Ns,
    pub median_ns: Ns,
    pub p99_ns: Ns,
    pub max_ns: Ns,
}

/// One row of the kernel summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelNameSummary {
    #[serde(flatten)]
    pub stats: NameStats,
    /// `total_ns` over the summed duration of every kernel (nsys's "Time (%)"): the rows add up
    /// to 100 %. It is a share of kernel time, not of busy time: overlapping kernels make summed
    /// kernel time exceed busy time (the union), so a share of *busy* time would pass 100 %.
    pub share_of_kernel_time_pct: f64,
}

/// Groups (name, duration) pairs by name. `names` bounds the ids (out-of-range ids share one
/// extra group named "?"). Returns rows sorted by total time, longest first, then by name.
pub fn summarize_by_name<I>(trace: &Trace, items: I) -> Vec<NameStats>
where
    I: Iterator<Item = (StrId, Ns)> + Clone,
{
    summarize_by_name_in(trace, items, &mut Vec::new())
}

/// [`summarize_by_name`] with a caller's scratch buffer for the durations, so one report reuses
/// the same memory for every summary (first-touch page faults were a visible cost).
pub(crate) fn summarize_by_name_in<I>(
    trace: &Trace,
    items: I,
    durations: &mut Vec<Ns>,
) -> Vec<NameStats>
where
    I: Iterator<Item = (StrId, Ns)> + Clone,
{
    let groups = trace.strings.len() + 1;
    let group_of = |id: StrId| (id as usize).min(groups - 1);
    let mut count = vec![0u64; groups];
    let mut total = vec![0 as Ns; groups];
    let mut min = vec![Ns::MAX; groups];
    let mut max = vec![0 as Ns; groups];
    for (id, d) in items.clone() {
        let g = group_of(id);
        count[g] += 1;
        // Saturating: a corrupt record must not panic or wrap a total.
        total[g] = total[g].saturating_add(d);
        min[g] = min[g].min(d);
        max[g] = max[g].max(d);
    }
    // Counting sort: each group's durations land in one contiguous slice.
    let mut offset = Vec::with_capacity(groups + 1);
    let mut acc = 0usize;
    offset.push(0);
    for &c in &count {
        acc += c as usize;
        offset.push(acc);
    }
    let mut fill = offset.clone();
    durations.clear();
    durations.resize(acc, 0);
    for (id, d) in items {
        let g = group_of(id);
        durations[fill[g]] = d;
        fill[g] += 1;
    }
    let mut rows: Vec<NameStats> = (0..groups)
        .filter(|&g| count[g] > 0)
        .map(|g| {
            let slice = &mut durations[offset[g]..offset[g + 1]];
            let median = percentile(slice, 500).unwrap_or(0);
            let p99 = percentile(slice, 990).unwrap_or(0);
            let (name, mangled_name) = name_pair(trace.str(g as StrId));
            NameStats {
                name,
                mangled_name,
                count: count[g],
                total_ns: total[g],
                mean_ns: total[g] / count[g],
                min_ns: min[g],
                median_ns: median,
                p99_ns: p99,
                max_ns: max[g],
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// Kernel summary by name (like `nsys stats` cuda_gpu_kern_sum), all rows.
pub fn kernel_summary(trace: &Trace, window: Option<&Window>) -> Vec<KernelNameSummary> {
    kernel_summary_in(trace, window, &mut Vec::new())
}

pub(crate) fn kernel_summary_in(
    trace: &Trace,
    window: Option<&Window>,
    scratch: &mut Vec<Ns>,
) -> Vec<KernelNameSummary> {
    let items = trace.kernels.iter().filter_map(move |k| {
        clip(window, k.start_ns, k.end_ns).map(|(s, e)| (k.name, e.saturating_sub(s)))
    });
    let rows = summarize_by_name_in(trace, items, scratch);
    let summed: Ns = rows.iter().fold(0, |a, r| a.saturating_add(r.total_ns));
    rows.into_iter()
        .map(|stats| KernelNameSummary {
            share_of_kernel_time_pct: pct(stats.total_ns, summed),
            stats,
        })
        .collect()
}

/// API summary by name, all rows.
pub fn api_summary(trace: &Trace, window: Option<&Window>) -> Vec<NameStats> {
    api_summary_in(trace, window, &mut Vec::new())
}

pub(crate) fn api_summary_in(
    trace: &Trace,
    window: Option<&Window>,
    scratch: &mut Vec<Ns>,
) -> Vec<NameStats> {
    let items = trace
        .api_calls
        .iter()
        .filter_map(move |c| crate::correlate::api_span(window, c).map(|d| (c.name, d)));
    summarize_by_name_in(trace, items, scratch)
}

/// `part / whole` in percent (0 when `whole` is 0). A derived ratio for display only.
pub fn pct(part: Ns, whole: Ns) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
