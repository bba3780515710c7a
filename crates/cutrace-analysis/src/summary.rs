//! Per-name summaries: kernels (like `nsys stats` cuda_gpu_kern_sum) and API calls (like
//! cuda_api_sum). Durations are clipped to the time window; medians and p99 are nearest-rank.
//!
//! Grouping is a counting sort on the interned name id (two passes, one flat array of
//! durations), so it costs no hashing and no allocation per record. The array holds each
//! duration as its offset from its name's shortest, in 32 bits when every name's durations span
//! less than 4.3 s (nearly always): 8 MB, not 16, for a 10 MB trace's 2 M kernels.

use cutrace_trace::{Ns, StrId, Trace};
use serde::Serialize;

use crate::names::name_pair;
use crate::percentile::{percentile, Scratch};
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
    summarize_by_name_in(trace, items, &mut Scratch::default(), usize::MAX).rows
}

/// What [`summarize_by_name_in`] gives: the rows kept, and figures over every name.
pub(crate) struct Summarized {
    pub rows: Vec<NameStats>,
    /// Names with at least one item.
    pub names: u64,
    /// The summed duration of every item.
    pub summed_ns: Ns,
}

/// [`summarize_by_name`] with a caller's scratch buffer for the durations, so one report reuses
/// the same memory for every summary (first-touch page faults were a visible cost).
///
/// Only the `keep` longest rows are made (ties at the cut broken by the recorded name): a trace
/// of a million distinct names once made a million rows, names and all, for a report that shows
/// twenty.
pub(crate) fn summarize_by_name_in<I>(
    trace: &Trace,
    items: I,
    scratch: &mut Scratch,
    keep: usize,
) -> Summarized
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
    // Offsets from each name's shortest fit in 32 bits unless one name's durations span 4.3 s.
    let narrow = (0..groups).all(|g| count[g] == 0 || max[g] - min[g] <= Ns::from(u32::MAX));
    let mut fill = offset.clone();
    let pct = if narrow {
        let durations = scratch.narrow(acc);
        for (id, d) in items {
            let g = group_of(id);
            durations[fill[g]] = (d - min[g]) as u32;
            fill[g] += 1;
        }
        group_percentiles(durations, &offset, &count, |g, v| min[g] + Ns::from(v))
    } else {
        let durations = scratch.wide(acc);
        for (id, d) in items {
            let g = group_of(id);
            durations[fill[g]] = d;
            fill[g] += 1;
        }
        group_percentiles(durations, &offset, &count, |_, v| v)
    };
    let mut live: Vec<usize> = (0..groups).filter(|&g| count[g] > 0).collect();
    let names = live.len() as u64;
    let summed_ns = live
        .iter()
        .fold(0 as Ns, |a, &g| a.saturating_add(total[g]));
    if live.len() > keep {
        let raw = |g: usize| trace.strings.get(g).map_or("?", String::as_str);
        live.select_nth_unstable_by(keep, |&a, &b| {
            total[b].cmp(&total[a]).then_with(|| raw(a).cmp(raw(b)))
        });
        live.truncate(keep);
    }
    let mut rows: Vec<NameStats> = live
        .into_iter()
        .map(|g| {
            let (median, p99) = pct[g];
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
    Summarized {
        rows,
        names,
        summed_ns,
    }
}

/// (median, p99) of each group's slice of `values` (zeros for an empty group), `back` turning a
/// stored value of group `g` into nanoseconds.
fn group_percentiles<T: Ord + Copy>(
    values: &mut [T],
    offset: &[usize],
    count: &[u64],
    back: impl Fn(usize, T) -> Ns,
) -> Vec<(Ns, Ns)> {
    (0..count.len())
        .map(|g| {
            if count[g] == 0 {
                return (0, 0);
            }
            let slice = &mut values[offset[g]..offset[g + 1]];
            let median = percentile(slice, 500).map_or(0, |v| back(g, v));
            let p99 = percentile(slice, 990).map_or(0, |v| back(g, v));
            (median, p99)
        })
        .collect()
}

/// Each kernel's name and its duration clipped to the window (kernels outside it left out).
pub(crate) fn kernel_items<'a>(
    trace: &'a Trace,
    window: Option<&'a Window>,
) -> impl Iterator<Item = (StrId, Ns)> + Clone + 'a {
    trace.kernels.iter().filter_map(move |k| {
        clip(window, k.start_ns, k.end_ns).map(|(s, e)| (k.name, e.saturating_sub(s)))
    })
}

/// Each API call's name and its duration in the window.
pub(crate) fn api_items<'a>(
    trace: &'a Trace,
    window: Option<&'a Window>,
) -> impl Iterator<Item = (StrId, Ns)> + Clone + 'a {
    trace
        .api_calls
        .iter()
        .filter_map(move |c| crate::correlate::api_span(window, c).map(|d| (c.name, d)))
}

/// Kernel summary by name (like `nsys stats` cuda_gpu_kern_sum), all rows.
pub fn kernel_summary(trace: &Trace, window: Option<&Window>) -> Vec<KernelNameSummary> {
    kernel_summary_in(trace, window, &mut Scratch::default(), usize::MAX).0
}

/// The `keep` longest rows of the kernel summary, and how many names it has in all.
pub(crate) fn kernel_summary_in(
    trace: &Trace,
    window: Option<&Window>,
    scratch: &mut Scratch,
    keep: usize,
) -> (Vec<KernelNameSummary>, u64) {
    let s = summarize_by_name_in(trace, kernel_items(trace, window), scratch, keep);
    let rows = s
        .rows
        .into_iter()
        .map(|stats| KernelNameSummary {
            share_of_kernel_time_pct: pct(stats.total_ns, s.summed_ns),
            stats,
        })
        .collect();
    (rows, s.names)
}

/// API summary by name, all rows.
pub fn api_summary(trace: &Trace, window: Option<&Window>) -> Vec<NameStats> {
    api_summary_in(trace, window, &mut Scratch::default(), usize::MAX).0
}

/// The `keep` longest rows of the API summary, and how many names it has in all.
pub(crate) fn api_summary_in(
    trace: &Trace,
    window: Option<&Window>,
    scratch: &mut Scratch,
    keep: usize,
) -> (Vec<NameStats>, u64) {
    let s = summarize_by_name_in(trace, api_items(trace, window), scratch, keep);
    (s.rows, s.names)
}

/// `part / whole` in percent (0 when `whole` is 0). A derived ratio for display only.
pub fn pct(part: Ns, whole: Ns) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use cutrace_testkit::records::{kernel, launch};
    use cutrace_trace::Interner;

    use super::*;
    use crate::percentile::nearest_rank;
    use crate::{analyze, launch_latencies, Options};

    const S: Ns = 1_000_000_000;

    #[test]
    fn the_kept_rows_are_the_first_rows_of_the_whole_summary() {
        // 200 names, durations with many ties, so the cut falls inside a run of equal totals.
        let mut i = Interner::default();
        let kernels: Vec<_> = (0..2_000u64)
            .map(|k| {
                let name = format!("kern{:03}", (k * 37) % 200);
                let d = 10 + (k % 7) * 5;
                kernel(&mut i, &name, 0, 7, k + 1, k * 100, k * 100 + d)
            })
            .collect();
        let t = cutrace_testkit::records::complete_trace(i, kernels, Vec::new());
        let all = kernel_summary(&t, None);
        assert_eq!(all.len(), 200);
        for keep in [0, 1, 3, 20, 199, 200, 500] {
            let (rows, names) = kernel_summary_in(&t, None, &mut Scratch::default(), keep);
            assert_eq!(names, 200);
            assert_eq!(rows[..], all[..keep.min(200)], "keep {keep}");
        }
    }

    fn by_rank<T: Ord + Copy>(mut v: Vec<T>, per_mille: u32) -> T {
        v.sort_unstable();
        v[nearest_rank(v.len(), per_mille) - 1]
    }

    /// Durations and latencies are kept in 32 bits as offsets when they span less than 4.3 s and
    /// whole otherwise: both ways give the nearest-rank values of the sorted records.
    #[test]
    fn percentiles_are_exact_in_either_width() {
        // (name, start, duration, launch end): "wide" spans 7 s of durations, "narrow" 9 ns;
        // the latencies span 6 s, from 1 s before the launch returned to 5 s after.
        let rows: &[(&str, Ns, Ns, Ns)] = &[
            ("wide", 10 * S, 1, 10 * S - 5),
            ("wide", 20 * S, 7 * S, 21 * S),
            ("wide", 30 * S, 5, 25 * S),
            ("wide", 40 * S, 4_000, 40 * S),
            ("narrow", 50 * S, 3, 50 * S - 2),
            ("narrow", 51 * S, 12, 51 * S - 9),
            ("narrow", 52 * S, 4, 52 * S - 100),
        ];
        let mut narrow_only = Interner::new();
        let mut i = Interner::new();
        let (mut kernels, mut api, mut small_k, mut small_api) = (vec![], vec![], vec![], vec![]);
        for (c, &(name, s, d, r)) in rows.iter().enumerate() {
            let c = c as u64 + 1;
            kernels.push(kernel(&mut i, name, 0, 7, c, s, s + d));
            api.push(launch(&mut i, c, r - 10, r));
            if name == "narrow" {
                small_k.push(kernel(&mut narrow_only, name, 0, 7, c, s, s + d));
                small_api.push(launch(&mut narrow_only, c, r - 10, r));
            }
        }
        for t in [
            cutrace_testkit::records::complete_trace(i, kernels, api),
            cutrace_testkit::records::complete_trace(narrow_only, small_k, small_api),
        ] {
            let r = analyze(&t, &Options::default()).unwrap();
            for row in &r.kernel_summary {
                let d: Vec<Ns> = t
                    .kernels
                    .iter()
                    .filter(|k| t.str(k.name) == row.stats.name)
                    .map(|k| k.end_ns - k.start_ns)
                    .collect();
                assert_eq!(
                    row.stats.median_ns,
                    by_rank(d.clone(), 500),
                    "{}",
                    row.stats.name
                );
                assert_eq!(row.stats.p99_ns, by_rank(d, 990), "{}", row.stats.name);
            }
            let lat: Vec<i64> = launch_latencies(&t, None).0.iter().map(|l| l.1).collect();
            let ll = &r.launch_latency;
            assert_eq!(ll.kernels, lat.len() as u64);
            assert_eq!(ll.negative, lat.iter().filter(|&&v| v < 0).count() as u64);
            assert_eq!(ll.min_ns, Some(by_rank(lat.clone(), 0)));
            assert_eq!(ll.p50_ns, Some(by_rank(lat.clone(), 500)));
            assert_eq!(ll.p90_ns, Some(by_rank(lat.clone(), 900)));
            assert_eq!(ll.max_ns, Some(by_rank(lat, 1000)));
        }
    }
}
