//! What the host's framework was doing: the host ops (torch.profiler's CPU ops and Python calls)
//! that covered each of a GPU's largest idle gaps, and each step's time in the data loader
//! (`enumerate(DataLoader)` ops). Both are read from [`Trace::host_ops`]; a trace without host
//! ops (a native trace) gets empty lists and no loader time.

use std::collections::HashMap;

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

/// The data-loader ops of a trace (`enumerate(DataLoader)`), per process as the union of their
/// intervals: sorted, disjoint spans with the running sum of their lengths, so that the time in
/// them inside any window takes two binary searches, however many steps ask.
pub struct Loaders {
    by_pid: HashMap<u32, Spans>,
}

/// Sorted, disjoint spans, and the running sum of their lengths (one more than the spans).
type Spans = (Vec<(Ns, Ns)>, Vec<Ns>);

impl Loaders {
    pub fn new(trace: &Trace) -> Loaders {
        let mut raw: HashMap<u32, Vec<(Ns, Ns)>> = HashMap::new();
        for o in &trace.host_ops {
            if trace.str(o.name).starts_with(DATALOADER_PREFIX) {
                raw.entry(o.process)
                    .or_default()
                    .push((o.start_ns, o.end_ns.max(o.start_ns)));
            }
        }
        let by_pid = raw
            .into_iter()
            .map(|(pid, mut v)| {
                v.sort_unstable();
                let mut spans: Vec<(Ns, Ns)> = Vec::with_capacity(v.len());
                for (a, b) in v {
                    match spans.last_mut() {
                        Some(last) if a <= last.1 => last.1 = last.1.max(b),
                        _ => spans.push((a, b)),
                    }
                }
                let mut sums = Vec::with_capacity(spans.len() + 1);
                sums.push(0);
                for &(a, b) in &spans {
                    sums.push(sums.last().copied().unwrap_or(0) + (b - a));
                }
                (pid, (spans, sums))
            })
            .collect();
        Loaders { by_pid }
    }

    /// Whether the trace has no data-loader op.
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// The time of `pid`'s data-loader ops inside `[s, e)` (their union, clipped).
    pub fn time_in(&self, pid: u32, s: Ns, e: Ns) -> Ns {
        let Some((spans, sums)) = self.by_pid.get(&pid) else {
            return 0;
        };
        if s >= e {
            return 0;
        }
        // Spans [i, j) meet the window: they end after s and start before e.
        let i = spans.partition_point(|sp| sp.1 <= s);
        let j = spans.partition_point(|sp| sp.0 < e);
        if i >= j {
            return 0;
        }
        let whole = sums[j] - sums[i];
        // Clip the first and the last at the window's edges.
        let head = s.saturating_sub(spans[i].0);
        let tail = spans[j - 1].1.saturating_sub(e);
        whole - head - tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_time_is_a_union_clipped_to_the_step_and_its_process() {
        let mut t = Trace {
            strings: vec!["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__".into()],
            ..Trace::default()
        };
        let name = 0;
        for (process, start_ns, end_ns) in [(1, 0, 50), (1, 40, 70), (1, 90, 200), (2, 0, 1000)] {
            t.host_ops.push(HostOp {
                process,
                start_ns,
                end_ns,
                name,
                kind: cutrace_trace::HostOpKind::CpuOp,
                thread: 1,
                external_id: 0,
            });
        }
        let l = Loaders::new(&t);
        // [10, 70) + [90, 100)
        assert_eq!(l.time_in(1, 10, 100), 60 + 10);
        assert_eq!(l.time_in(3, 0, 100), 0);
        assert_eq!(l.time_in(2, 5, 6), 1);
        assert_eq!(l.time_in(1, 70, 90), 0);
        assert_eq!(l.time_in(1, 0, 1000), 70 + 110);
        assert_eq!(l.time_in(1, 45, 46), 1);
        assert_eq!(l.time_in(1, 100, 100), 0);
    }

    /// Against a brute-force union, on windows over random loaders.
    #[test]
    fn loader_time_equals_a_brute_force_union() {
        let mut t = Trace {
            strings: vec!["enumerate(DataLoader)#x".into()],
            ..Trace::default()
        };
        let name = 0;
        let mut seed = 0x9e37_79b9_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..60 {
            let a = next(1000);
            t.host_ops.push(HostOp {
                process: 1,
                start_ns: a,
                end_ns: a + next(80),
                name,
                kind: cutrace_trace::HostOpKind::CpuOp,
                thread: 1,
                external_id: 0,
            });
        }
        let l = Loaders::new(&t);
        for _ in 0..300 {
            let s = next(1100);
            let e = s + next(300);
            let brute = (s..e)
                .filter(|&x| t.host_ops.iter().any(|o| o.start_ns <= x && x < o.end_ns))
                .count() as u64;
            assert_eq!(l.time_in(1, s, e), brute, "[{s}, {e})");
        }
    }
}
