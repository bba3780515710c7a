//! The correlation join: kernels, copies and memsets to the API calls that launched them, orphan
//! accounting, and launch-to-start latency.
//!
//! The only link is `correlation_id`. API calls with id 0 launch nothing and are not indexed. A
//! device record whose id matches no API call is an orphan: counted exactly, listed up to a cap
//! (smallest ids first, so the list is the same for any record order), never a panic. When two API
//! calls share an id (a runtime call and the driver call beneath it, or a duplicated record), the
//! runtime call wins, then the earlier start, then the earlier end: a choice by content.
//!
//! Launch-to-start latency = kernel start − end of its API call, as i64. It can be negative: the
//! GPU may start a kernel before the launch call returns, and on imported traces host and device
//! clocks may disagree; negative values are reported, not hidden. It is measured
//! for attributed kernels whose (unclipped) start lies in the time window. The kernels of one
//! CUDA graph launch share that call's correlation id; each is measured from the call's end.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use cutrace_trace::{ApiCall, ApiKind, Ns, Trace};
use serde::Serialize;

use crate::percentile::{percentiles, Percentiles, Scratch};
use crate::window::{clip, Window};

/// correlation_id → index of the API call that owns it.
#[derive(Debug, Clone)]
pub struct ApiIndex {
    lookup: Lookup,
    /// API calls whose id was already taken by another call.
    pub duplicate_ids: u64,
    /// API calls with a non-zero correlation id.
    pub indexed: u64,
}

#[derive(Debug, Clone)]
enum Lookup {
    /// Ids are dense: from `base`, a bit per id (set: some call has it) and, per 64 ids, how
    /// many bits are set before them; `slots` holds the call of each set bit in id order. 4 bytes
    /// per call and 1/4 byte per id, where a slot per id took 4 per id (ids also number copies,
    /// syncs and calls not recorded: on recorded traces about twice the calls).
    Dense {
        base: u64,
        bits: Vec<u64>,
        rank: Vec<u32>,
        slots: Vec<u32>,
    },
    /// Sparse ids: sorted (id, index) pairs.
    Sparse(Vec<(u64, u32)>),
}

const NONE: u32 = u32::MAX;

/// Whether API call `a` is preferred over `b` for the same correlation id.
fn api_preferred(a: &ApiCall, b: &ApiCall) -> bool {
    let rank = |c: &ApiCall| (c.kind != ApiKind::Runtime, c.start_ns, c.end_ns);
    rank(a) < rank(b)
}

impl ApiIndex {
    pub fn build(calls: &[ApiCall]) -> Self {
        let mut lo = u64::MAX;
        let mut hi = 0;
        let mut n = 0u64;
        for c in calls.iter().filter(|c| c.correlation_id != 0) {
            lo = lo.min(c.correlation_id);
            hi = hi.max(c.correlation_id);
            n += 1;
        }
        let mut duplicate_ids = 0;
        // Correlation ids are a counter, so a table indexed by id is usually small and makes the
        // join a plain array read; sparse ids fall back to a sorted list.
        let lookup = if n > 0 && hi - lo < n.saturating_mul(2).saturating_add(4096) {
            let ids = (hi - lo + 1) as usize;
            let mut bits = vec![0u64; ids.div_ceil(64)];
            for c in calls.iter().filter(|c| c.correlation_id != 0) {
                let off = (c.correlation_id - lo) as usize;
                bits[off / 64] |= 1 << (off % 64);
            }
            let mut rank = Vec::with_capacity(bits.len());
            let mut set = 0u32;
            for w in &bits {
                rank.push(set);
                set += w.count_ones();
            }
            let mut slots = vec![NONE; set as usize];
            for (i, c) in calls.iter().enumerate() {
                if c.correlation_id == 0 {
                    continue;
                }
                let off = (c.correlation_id - lo) as usize;
                let slot = &mut slots[dense_rank(&bits, &rank, off)];
                if *slot == NONE {
                    *slot = i as u32;
                } else {
                    duplicate_ids += 1;
                    if api_preferred(c, &calls[*slot as usize]) {
                        *slot = i as u32;
                    }
                }
            }
            Lookup::Dense {
                base: lo,
                bits,
                rank,
                slots,
            }
        } else {
            let mut pairs: Vec<(u64, u32)> = calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.correlation_id != 0)
                .map(|(i, c)| (c.correlation_id, i as u32))
                .collect();
            pairs.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0).then_with(|| {
                    let (ca, cb) = (&calls[a.1 as usize], &calls[b.1 as usize]);
                    if api_preferred(ca, cb) {
                        Ordering::Less
                    } else if api_preferred(cb, ca) {
                        Ordering::Greater
                    } else {
                        Ordering::Equal
                    }
                })
            });
            let before = pairs.len();
            pairs.dedup_by_key(|p| p.0);
            duplicate_ids = (before - pairs.len()) as u64;
            Lookup::Sparse(pairs)
        };
        ApiIndex {
            lookup,
            duplicate_ids,
            indexed: n,
        }
    }

    /// Index of the API call with this correlation id.
    #[inline]
    pub fn get(&self, correlation_id: u64) -> Option<usize> {
        if correlation_id == 0 {
            return None;
        }
        match &self.lookup {
            Lookup::Dense {
                base,
                bits,
                rank,
                slots,
            } => {
                let off = usize::try_from(correlation_id.checked_sub(*base)?).ok()?;
                let word = *bits.get(off / 64)?;
                if word & (1 << (off % 64)) == 0 {
                    return None;
                }
                let i = slots[dense_rank(bits, rank, off)];
                (i != NONE).then_some(i as usize)
            }
            Lookup::Sparse(pairs) => pairs
                .binary_search_by_key(&correlation_id, |p| p.0)
                .ok()
                .map(|j| pairs[j].1 as usize),
        }
    }
}

/// The position among the set bits of bit `off` (set): the bits set before its word, and before
/// it in its word.
#[inline]
fn dense_rank(bits: &[u64], rank: &[u32], off: usize) -> usize {
    let below = bits[off / 64] & ((1u64 << (off % 64)) - 1);
    rank[off / 64] as usize + below.count_ones() as usize
}

/// How one kind of device record joined to API calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JoinCounts {
    pub records: u64,
    pub attributed: u64,
    /// Records with no API call: exact count (includes those with correlation id 0).
    pub orphans: u64,
    /// Orphans whose correlation id is 0 (RUNTIME/DRIVER activity was not enabled, typically).
    pub without_correlation_id: u64,
    /// Smallest non-zero orphan ids, ascending, capped; `orphans` is the exact count.
    pub orphan_correlation_ids: Vec<u64>,
}

/// The `correlation` section of a report. `kernels`, `attributed` and `orphans` are the contract.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Correlation {
    pub kernels: u64,
    pub attributed: u64,
    pub orphans: u64,
    pub kernels_without_correlation_id: u64,
    pub orphan_correlation_ids: Vec<u64>,
    pub memcpys: JoinCounts,
    pub memsets: JoinCounts,
    pub api_calls: u64,
    /// API calls with a non-zero correlation id (the only ones that can launch work).
    pub api_calls_with_correlation_id: u64,
    /// API calls whose correlation id another call already had.
    pub duplicate_api_correlation_ids: u64,
}

/// Launch-to-start latency over attributed kernels, in ns (nearest-rank percentiles).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LaunchLatency {
    /// Kernels measured.
    pub kernels: u64,
    /// Of those, kernels that start before their API call ends (clock skew on imported traces).
    pub negative: u64,
    pub min_ns: Option<i64>,
    pub p50_ns: Option<i64>,
    pub p90_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub max_ns: Option<i64>,
}

/// i64 → u64 preserving order (flip the sign bit), so latencies can share the report's u64
/// scratch buffer with the summaries.
const SIGN: u64 = 1 << 63;

#[inline]
fn bias(v: i64) -> u64 {
    (v as u64) ^ SIGN
}

#[inline]
fn unbias(v: u64) -> i64 {
    (v ^ SIGN) as i64
}

impl LaunchLatency {
    /// From the percentiles of biased values (see [`bias`]), `negative` of them below zero.
    fn from_biased(p: Option<Percentiles<u64>>, negative: u64) -> Self {
        match p {
            None => LaunchLatency::default(),
            Some(Percentiles {
                count,
                min,
                p50,
                p90,
                p99,
                max,
            }) => LaunchLatency {
                kernels: count,
                negative,
                min_ns: Some(unbias(min)),
                p50_ns: Some(unbias(p50)),
                p90_ns: Some(unbias(p90)),
                p99_ns: Some(unbias(p99)),
                max_ns: Some(unbias(max)),
            },
        }
    }
}

/// `a − b` as a signed difference; exact whenever it fits in i64 (always, for timestamps < 2^63).
#[inline]
pub fn signed_diff(a: Ns, b: Ns) -> i64 {
    a.wrapping_sub(b) as i64
}

/// Whether a kernel's own start lies in the window (a clipped start would fake its latency).
#[inline]
fn starts_in(window: Option<&Window>, t: Ns) -> bool {
    window.is_none_or(|w| w.from_ns <= t && t < w.to_ns)
}

/// Keeps the `cap` smallest ids seen.
struct SmallestIds {
    cap: usize,
    heap: BinaryHeap<u64>,
}

impl SmallestIds {
    fn new(cap: usize) -> Self {
        SmallestIds {
            cap,
            heap: BinaryHeap::new(),
        }
    }

    #[inline]
    fn offer(&mut self, id: u64) {
        if self.heap.len() < self.cap {
            self.heap.push(id);
        } else if self.heap.peek().is_some_and(|&top| id < top) {
            self.heap.pop();
            self.heap.push(id);
        }
    }

    fn into_sorted(self) -> Vec<u64> {
        self.heap.into_sorted_vec()
    }
}

/// Joins records given as (correlation_id, kept-in-window) to the index.
fn join_counts(index: &ApiIndex, ids: impl Iterator<Item = u64>, orphan_cap: usize) -> JoinCounts {
    let mut jc = JoinCounts::default();
    let mut listed = SmallestIds::new(orphan_cap);
    for id in ids {
        jc.records += 1;
        if index.get(id).is_some() {
            jc.attributed += 1;
        } else {
            jc.orphans += 1;
            if id == 0 {
                jc.without_correlation_id += 1;
            } else {
                listed.offer(id);
            }
        }
    }
    jc.orphan_correlation_ids = listed.into_sorted();
    jc
}

/// Correlation join of every device record kind, plus launch-to-start latency of kernels.
pub fn correlate(
    trace: &Trace,
    window: Option<&Window>,
    orphan_cap: usize,
) -> (Correlation, LaunchLatency) {
    let index = ApiIndex::build(&trace.api_calls);
    correlate_in(trace, &index, window, orphan_cap, &mut Scratch::default())
}

/// [`correlate`] with the caller's index of the API calls and scratch buffer for the latency
/// values.
pub(crate) fn correlate_in(
    trace: &Trace,
    index: &ApiIndex,
    window: Option<&Window>,
    orphan_cap: usize,
    scratch: &mut Scratch,
) -> (Correlation, LaunchLatency) {
    // The biased launch-to-start latency of an attributed kernel (API call `i`), if measured.
    let latency = |k: &cutrace_trace::Kernel, i: usize| {
        // A profiled kernel has no start time to measure from (`Kernel::untimed`).
        (starts_in(window, k.start_ns) && !k.untimed())
            .then(|| bias(signed_diff(k.start_ns, trace.api_calls[i].end_ns)))
    };
    let mut kernels = JoinCounts::default();
    let mut listed = SmallestIds::new(orphan_cap);
    // The latencies' count, range and negatives first, so that the values can be kept as
    // offsets from the smallest in 32 bits when they span less than 4.3 s (half the memory).
    let (mut measured, mut lo, mut hi, mut negative) = (0usize, u64::MAX, 0u64, 0u64);
    for k in &trace.kernels {
        if clip(window, k.start_ns, k.end_ns).is_none() {
            continue;
        }
        kernels.records += 1;
        match index.get(k.correlation_id) {
            Some(i) => {
                kernels.attributed += 1;
                if let Some(v) = latency(k, i) {
                    measured += 1;
                    lo = lo.min(v);
                    hi = hi.max(v);
                    negative += u64::from(v < SIGN);
                }
            }
            None => {
                kernels.orphans += 1;
                if k.correlation_id == 0 {
                    kernels.without_correlation_id += 1;
                } else {
                    listed.offer(k.correlation_id);
                }
            }
        }
    }
    kernels.orphan_correlation_ids = listed.into_sorted();
    let memcpys = join_counts(
        index,
        trace
            .memcpys
            .iter()
            .filter(|r| clip(window, r.start_ns, r.end_ns).is_some())
            .map(|r| r.correlation_id),
        orphan_cap,
    );
    let memsets = join_counts(
        index,
        trace
            .memsets
            .iter()
            .filter(|r| clip(window, r.start_ns, r.end_ns).is_some())
            .map(|r| r.correlation_id),
        orphan_cap,
    );
    let correlation = Correlation {
        kernels: kernels.records,
        attributed: kernels.attributed,
        orphans: kernels.orphans,
        kernels_without_correlation_id: kernels.without_correlation_id,
        orphan_correlation_ids: kernels.orphan_correlation_ids,
        memcpys,
        memsets,
        api_calls: trace.api_calls.len() as u64,
        api_calls_with_correlation_id: index.indexed,
        duplicate_api_correlation_ids: index.duplicate_ids,
    };
    // The second pass meets the same kernels in the same order, so it fills exactly `measured`.
    let latencies = trace
        .kernels
        .iter()
        .filter(|k| clip(window, k.start_ns, k.end_ns).is_some())
        .filter_map(|k| index.get(k.correlation_id).and_then(|i| latency(k, i)));
    let p = if measured == 0 {
        None
    } else if hi - lo <= u64::from(u32::MAX) {
        let values = scratch.narrow(measured);
        for (slot, v) in values.iter_mut().zip(latencies) {
            *slot = (v - lo) as u32;
        }
        percentiles(values).map(|p| Percentiles {
            count: p.count,
            min: lo + u64::from(p.min),
            p50: lo + u64::from(p.p50),
            p90: lo + u64::from(p.p90),
            p99: lo + u64::from(p.p99),
            max: lo + u64::from(p.max),
        })
    } else {
        let values = scratch.wide(measured);
        for (slot, v) in values.iter_mut().zip(latencies) {
            *slot = v;
        }
        percentiles(values)
    };
    (correlation, LaunchLatency::from_biased(p, negative))
}

/// Launch-to-start latency of every attributed kernel in the window, as (correlation_id,
/// latency_ns) sorted by id then latency; and the orphans' correlation ids, sorted. For tests and
/// callers that want per-kernel values; the report only keeps the percentiles.
pub fn launch_latencies(trace: &Trace, window: Option<&Window>) -> (Vec<(u64, i64)>, Vec<u64>) {
    let index = ApiIndex::build(&trace.api_calls);
    let mut lat = Vec::new();
    let mut orphans = Vec::new();
    for k in &trace.kernels {
        if clip(window, k.start_ns, k.end_ns).is_none() {
            continue;
        }
        match index.get(k.correlation_id) {
            Some(i) => {
                // A profiled kernel has no start time to measure from (`Kernel::untimed`).
                if starts_in(window, k.start_ns) && !k.untimed() {
                    lat.push((
                        k.correlation_id,
                        signed_diff(k.start_ns, trace.api_calls[i].end_ns),
                    ));
                }
            }
            None => orphans.push(k.correlation_id),
        }
    }
    lat.sort_unstable();
    orphans.sort_unstable();
    (lat, orphans)
}

/// An API call's duration inside the window, if it overlaps it.
pub(crate) fn api_span(window: Option<&Window>, c: &ApiCall) -> Option<Ns> {
    clip(window, c.start_ns, c.end_ns).map(|(s, e)| e.saturating_sub(s))
}

#[cfg(test)]
mod tests {
    use cutrace_testkit::records::launch;
    use cutrace_trace::Interner;

    use super::*;

    /// The dense index finds every id across word edges, none of the ids in between, and the
    /// preferred call of a duplicated id; the sorted list (sparse ids) agrees.
    #[test]
    fn both_lookups_find_the_preferred_call_of_every_id() {
        let mut i = Interner::new();
        let ids = [1000u64, 1063, 1064, 1065, 1127, 1128, 1300, 1064, 1301];
        let mut calls: Vec<ApiCall> = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| launch(&mut i, id, 10 * k as u64, 10 * k as u64 + 5))
            .collect();
        // The second call with 1064 starts later: the first stays the one the id names.
        calls.push(launch(&mut i, 0, 0, 1));
        let dense = ApiIndex::build(&calls);
        assert!(matches!(dense.lookup, Lookup::Dense { .. }));
        let mut far = calls.clone();
        far.push(launch(&mut i, 1 << 40, 0, 1));
        let sparse = ApiIndex::build(&far);
        assert!(matches!(sparse.lookup, Lookup::Sparse(_)));
        for index in [&dense, &sparse] {
            assert_eq!(index.duplicate_ids, 1);
            for (k, &id) in ids.iter().enumerate() {
                let want = if id == 1064 { 2 } else { k };
                assert_eq!(index.get(id), Some(want), "id {id}");
            }
            for id in [0, 999, 1001, 1062, 1066, 1129, 1299, 1302] {
                assert_eq!(index.get(id), None, "id {id}");
            }
        }
        assert_eq!(sparse.get(1 << 40), Some(calls.len()));
    }
}
