//! Breakdown by NVTX / annotation range name: count and total range time for host ranges; for
//! GPU-domain ranges (Kineto `gpu_user_annotation`) also the kernel busy time of the range's device
//! inside each range. Ranges are clipped to the time window.
//!
//! Totals are sums over the ranges of a name: nested or repeated ranges of one name add up (they
//! are not unioned), which is what "time spent in ranges named X" means in nsys' NVTX summary.

use std::collections::BTreeMap;

use cutrace_trace::{Ns, RangeDomain, StrId, Trace};
use serde::Serialize;

use crate::intervals::BusyIndex;
use crate::window::{clip, Window};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangeSummary {
    pub name: String,
    /// `host` or `gpu`.
    pub domain: &'static str,
    pub count: u64,
    /// Sum of the ranges' durations.
    pub total_ns: Ns,
    /// GPU ranges: sum over the ranges of their device's kernel busy time inside each range.
    /// `None` for host ranges, or GPU ranges without a device.
    pub gpu_busy_ns: Option<Ns>,
}

/// Devices that have GPU-domain ranges in the window (the report builds a [`BusyIndex`] for them).
pub fn devices_with_gpu_ranges(trace: &Trace, window: Option<&Window>) -> Vec<u32> {
    let mut devs: Vec<u32> = trace
        .ranges
        .iter()
        .filter(|r| r.domain == RangeDomain::Gpu && clip(window, r.start_ns, r.end_ns).is_some())
        .filter_map(|r| r.device)
        .collect();
    devs.sort_unstable();
    devs.dedup();
    devs
}

/// Rows sorted by total time, longest first, then domain and name.
pub fn range_breakdown(
    trace: &Trace,
    window: Option<&Window>,
    busy: &BTreeMap<u32, BusyIndex>,
) -> Vec<RangeSummary> {
    // (is_gpu, name) → (count, total, gpu busy)
    let mut acc: BTreeMap<(bool, StrId), (u64, Ns, Option<Ns>)> = BTreeMap::new();
    for r in &trace.ranges {
        let Some((s, e)) = clip(window, r.start_ns, r.end_ns) else {
            continue;
        };
        let gpu = r.domain == RangeDomain::Gpu;
        let entry = acc.entry((gpu, r.name)).or_insert((0, 0, None));
        entry.0 += 1;
        entry.1 = entry.1.saturating_add(e.saturating_sub(s));
        if let (true, Some(d)) = (gpu, r.device) {
            let b = busy.get(&d).map_or(0, |idx| idx.busy_within(s, e));
            entry.2 = Some(entry.2.unwrap_or(0).saturating_add(b));
        }
    }
    let mut rows: Vec<RangeSummary> = acc
        .into_iter()
        .map(
            |((gpu, name), (count, total_ns, gpu_busy_ns))| RangeSummary {
                name: crate::names::held(trace.str(name)),
                domain: if gpu { "gpu" } else { "host" },
                count,
                total_ns,
                gpu_busy_ns,
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.domain.cmp(b.domain))
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}
