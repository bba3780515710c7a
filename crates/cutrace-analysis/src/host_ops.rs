//! What the host's framework was doing: the host ops (torch.profiler's CPU ops and Python calls)
//! that covered each of a GPU's largest idle gaps, and each step's time in the data loader
//! (`enumerate(DataLoader)` ops). Both are read from [`Trace::host_ops`]; a trace without host
//! ops (a native trace) gets empty lists and no loader time.

use cutrace_trace::{HostOp, Ns, Trace};
use serde::Serialize;

/// torch.profiler's name for one fetch of a batch: `enumerate(DataLoader)#_SingleProcess…`.
pub const DATALOADER_PREFIX: &str = "enumerate(DataLoader)";

/// The most host ops named for one gap.
pub const GAP_OPS: usize = 3;

/// A host op open during an idle gap, and how much of the gap it covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapOp {
    pub name: String,
    /// The source's category: `cpu_op` or `python_function`.
    pub category: &'static str,
    pub pid: u32,
    pub thread: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The part of the gap inside the op.
    pub in_gap_ns: Ns,
}

/// Host ops in start order, for the lookups of many gaps.
pub struct OpIndex<'t> {
    trace: &'t Trace,
    /// Indices into `trace.host_ops`, by start.
    by_start: Vec<u32>,
    /// The longest op: an op overlapping `[s, e)` starts at or after `s − longest`.
    longest: Ns,
}

impl<'t> OpIndex<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        let ops = &trace.host_ops;
        let mut by_start: Vec<u32> = (0..ops.len() as u32).collect();
        by_start.sort_by_key(|&i| ops[i as usize].start_ns);
        let longest = ops
            .iter()
            .map(|o| o.end_ns.saturating_sub(o.start_ns))
            .max()
            .unwrap_or(0);
        OpIndex {
            trace,
            by_start,
            longest,
        }
    }

    /// Ops that overlap `[s, e)` (of process `pid` where given), with the overlap.
    fn overlapping(
        &self,
        s: Ns,
        e: Ns,
        pid: Option<u32>,
    ) -> impl Iterator<Item = (&'t HostOp, Ns)> + '_ {
        let ops = &self.trace.host_ops;
        let from = s.saturating_sub(self.longest);
        let lo = self
            .by_start
            .partition_point(|&i| ops[i as usize].start_ns < from);
        let hi = self
            .by_start
            .partition_point(|&i| ops[i as usize].start_ns < e);
        self.by_start[lo..hi].iter().filter_map(move |&i| {
            let o = &ops[i as usize];
            if pid.is_some_and(|p| p != o.process) {
                return None;
            }
            let inside = o.end_ns.min(e).saturating_sub(o.start_ns.max(s));
            (inside > 0).then_some((o, inside))
        })
    }

    /// The host ops that covered a gap: those covering at least half of it, innermost
    /// (shortest) first, or else the ones covering the most; at most [`GAP_OPS`]. Ties go to the
    /// earlier op, then the lower thread, so the list does not depend on record order.
    pub fn gap_ops(&self, start_ns: Ns, end_ns: Ns, pid: Option<u32>) -> Vec<GapOp> {
        let length_ns = end_ns.saturating_sub(start_ns);
        if length_ns == 0 || self.trace.host_ops.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<(&HostOp, Ns)> = self.overlapping(start_ns, end_ns, pid).collect();
        let half = length_ns.div_ceil(2);
        let key = |o: &HostOp| (o.start_ns, o.thread, o.end_ns, o.name);
        if v.iter().any(|(_, n)| *n >= half) {
            v.retain(|(_, n)| *n >= half);
            v.sort_by_key(|(o, _)| (o.end_ns - o.start_ns, key(o)));
        } else {
            v.sort_by_key(|(o, n)| (std::cmp::Reverse(*n), key(o)));
        }
        v.into_iter()
            .take(GAP_OPS)
            .map(|(o, n)| GapOp {
                name: crate::names::held(self.trace.str(o.name)),
                category: o.kind.label(),
                pid: o.process,
                thread: o.thread,
                start_ns: o.start_ns,
                end_ns: o.end_ns,
                in_gap_ns: n,
            })
            .collect()
    }
}

/// The time of `[s, e)` that `pid`'s data-loader ops (`loaders`: process, start, end) covered:
/// their union, so nested or overlapping fetches count once.
pub fn dataloader_ns(loaders: &[(u32, Ns, Ns)], pid: u32, s: Ns, e: Ns) -> Ns {
    let mut spans: Vec<(Ns, Ns)> = loaders
        .iter()
        .filter(|(p, a, b)| *p == pid && *a < e && *b > s)
        .map(|(_, a, b)| ((*a).max(s), (*b).min(e)))
        .collect();
    spans.sort_unstable();
    let mut total = 0;
    let mut open: Option<(Ns, Ns)> = None;
    for (a, b) in spans {
        match open {
            Some((oa, ob)) if a <= ob => open = Some((oa, ob.max(b))),
            _ => {
                if let Some((oa, ob)) = open {
                    total += ob - oa;
                }
                open = Some((a, b));
            }
        }
    }
    if let Some((oa, ob)) = open {
        total += ob - oa;
    }
    total
}

/// The trace's data-loader ops as (process, start, end), in no order.
pub fn loaders(trace: &Trace) -> Vec<(u32, Ns, Ns)> {
    trace
        .host_ops
        .iter()
        .filter(|o| trace.str(o.name).starts_with(DATALOADER_PREFIX))
        .map(|o| (o.process, o.start_ns, o.end_ns.max(o.start_ns)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_time_is_a_union_clipped_to_the_step_and_its_process() {
        let l = [(1, 0, 50), (1, 40, 70), (1, 90, 200), (2, 0, 1000)];
        // [10, 70) + [90, 100)
        assert_eq!(dataloader_ns(&l, 1, 10, 100), 60 + 10);
        assert_eq!(dataloader_ns(&l, 3, 0, 100), 0);
        assert_eq!(dataloader_ns(&l, 2, 5, 6), 1);
    }
}
