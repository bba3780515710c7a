//! Copies and memsets by direction: count, bytes, time, achieved bandwidth; and the per-device
//! copy intervals that the report intersects with kernel busy time (compute/copy overlap).
//!
//! Bandwidth is bytes over the summed durations of the transfers (bytes per ns = GB/s), a
//! property of the transfers themselves: with a time window, a transfer that overlaps it counts
//! whole (its bytes and full duration), while busy and overlap times use the clipped interval.

use std::collections::BTreeMap;

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::intervals::merged_runs;
use crate::window::{clip, Window};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferSummary {
    /// `HtoD`, `DtoH`, `DtoD`, `HtoH`, `PtoP`, `unknown`, or `memset`.
    pub kind: String,
    pub count: u64,
    pub bytes: u64,
    /// Sum of durations (transfers on different streams may overlap).
    pub total_ns: Ns,
    /// `bytes / total_ns` (GB/s); `None` when no time was recorded.
    pub bandwidth_gb_s: Option<f64>,
}

#[derive(Default)]
struct Acc {
    count: u64,
    bytes: u64,
    total_ns: Ns,
}

impl Acc {
    fn add(&mut self, bytes: u64, start: Ns, end: Ns) {
        self.count += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        self.total_ns = self.total_ns.saturating_add(end.saturating_sub(start));
    }

    fn row(self, kind: &str) -> TransferSummary {
        TransferSummary {
            kind: kind.to_owned(),
            count: self.count,
            bytes: self.bytes,
            total_ns: self.total_ns,
            bandwidth_gb_s: (self.total_ns > 0).then(|| self.bytes as f64 / self.total_ns as f64),
        }
    }
}

/// Copies by direction (in `CopyKind` order), then memsets; kinds with no record are left out.
pub fn transfer_summary(trace: &Trace, window: Option<&Window>) -> Vec<TransferSummary> {
    let mut by_kind: BTreeMap<cutrace_trace::CopyKind, Acc> = BTreeMap::new();
    for c in &trace.memcpys {
        if clip(window, c.start_ns, c.end_ns).is_some() {
            by_kind
                .entry(c.kind)
                .or_default()
                .add(c.bytes, c.start_ns, c.end_ns);
        }
    }
    let mut rows: Vec<TransferSummary> = by_kind
        .into_iter()
        .map(|(kind, acc)| acc.row(kind.label()))
        .collect();
    let mut memset = Acc::default();
    for m in &trace.memsets {
        if clip(window, m.start_ns, m.end_ns).is_some() {
            memset.add(m.bytes, m.start_ns, m.end_ns);
        }
    }
    if memset.count > 0 {
        rows.push(memset.row("memset"));
    }
    rows
}

/// Merged memcpy runs per device, clipped to the window.
pub fn copy_runs_by_device(trace: &Trace, window: Option<&Window>) -> BTreeMap<u32, Vec<(Ns, Ns)>> {
    let mut by_dev: BTreeMap<u32, Vec<(Ns, Ns)>> = BTreeMap::new();
    for c in &trace.memcpys {
        if let Some(iv) = clip(window, c.start_ns, c.end_ns) {
            by_dev.entry(c.device).or_default().push(iv);
        }
    }
    by_dev
        .into_iter()
        .map(|(d, mut ivs)| (d, merged_runs(&mut ivs)))
        .collect()
}
