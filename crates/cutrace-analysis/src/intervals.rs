//! Interval arithmetic on the trace clock: unions, merged runs, intersections, busy-within.
//!
//! Definitions used everywhere in cutrace: intervals are half-open `[start, end)`; touching
//! intervals merge (`[0,100)` and `[100,200)` are one run, no gap); zero-length (and inverted)
//! intervals add no busy time and split no gap; nothing depends on input order.

use cutrace_trace::Ns;

/// Merges intervals (any order) into sorted, disjoint, non-touching runs. Zero-length and
/// inverted intervals are dropped. Reorders `intervals`.
pub fn merged_runs(intervals: &mut [(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    intervals.sort_unstable_by_key(|iv| iv.0);
    let mut runs: Vec<(Ns, Ns)> = Vec::new();
    for &(s, e) in intervals.iter().filter(|iv| iv.1 > iv.0) {
        match runs.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => runs.push((s, e)),
        }
    }
    runs
}

/// [`merged_runs`] in place: `intervals` becomes its merged runs (sorted, disjoint, touching
/// ones joined, zero-length ones gone), with no second vector, and gives back what it no
/// longer needs. For the page's lanes, where one thread's calls can be millions.
pub fn merge_in_place(intervals: &mut Vec<(Ns, Ns)>) {
    intervals.sort_unstable_by_key(|iv| iv.0);
    let mut w = 0;
    for i in 0..intervals.len() {
        let (s, e) = intervals[i];
        if e <= s {
            continue;
        }
        if w > 0 && s <= intervals[w - 1].1 {
            intervals[w - 1].1 = intervals[w - 1].1.max(e);
        } else {
            intervals[w] = (s, e);
            w += 1;
        }
    }
    intervals.truncate(w);
    intervals.shrink_to_fit();
}

/// Total time covered by at least one interval (the union), in any order. Reorders `intervals`.
pub fn union_ns(intervals: &mut [(Ns, Ns)]) -> Ns {
    merged_runs(intervals).iter().map(|r| r.1 - r.0).sum()
}

/// Time covered by both sets of merged runs (each sorted and disjoint, as [`merged_runs`] gives).
pub fn intersection_ns(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Ns {
    let mut cursor = RunIntersector::new(b);
    for &(s, e) in a {
        cursor.add(s, e);
    }
    cursor.total()
}

/// Intersects a stream of increasing disjoint runs with fixed merged runs, in one forward pass.
#[derive(Debug)]
pub struct RunIntersector<'a> {
    runs: &'a [(Ns, Ns)],
    cursor: usize,
    total: Ns,
}

impl<'a> RunIntersector<'a> {
    pub fn new(runs: &'a [(Ns, Ns)]) -> Self {
        RunIntersector {
            runs,
            cursor: 0,
            total: 0,
        }
    }

    /// Adds run `[s, e)`; runs must come in increasing order and not overlap each other.
    #[inline]
    pub fn add(&mut self, s: Ns, e: Ns) {
        while let Some(&(rs, re)) = self.runs.get(self.cursor) {
            if re <= s {
                self.cursor += 1;
                continue;
            }
            if rs >= e {
                return;
            }
            self.total += re.min(e) - rs.max(s);
            if re > e {
                // This fixed run may also overlap the next added run.
                return;
            }
            self.cursor += 1;
        }
    }

    pub fn total(&self) -> Ns {
        self.total
    }
}

/// Merged runs with prefix sums, answering "how much busy time lies in `[s, e)`" in O(log n).
#[derive(Debug, Clone, Default)]
pub struct BusyIndex {
    runs: Vec<(Ns, Ns)>,
    /// `prefix[i]` = busy time of `runs[..i]`.
    prefix: Vec<Ns>,
}

impl BusyIndex {
    /// From sorted, disjoint runs (as [`merged_runs`] gives).
    pub fn new(runs: Vec<(Ns, Ns)>) -> Self {
        let mut prefix = Vec::with_capacity(runs.len() + 1);
        let mut acc = 0;
        prefix.push(0);
        for r in &runs {
            acc += r.1 - r.0;
            prefix.push(acc);
        }
        BusyIndex { runs, prefix }
    }

    /// Busy time inside `[s, e)`.
    pub fn busy_within(&self, s: Ns, e: Ns) -> Ns {
        if e <= s {
            return 0;
        }
        // First run ending after s, first run starting at or after e.
        let lo = self.runs.partition_point(|r| r.1 <= s);
        let hi = self.runs.partition_point(|r| r.0 < e);
        if lo >= hi {
            return 0;
        }
        let mut total = self.prefix[hi] - self.prefix[lo];
        let first = self.runs[lo];
        total -= s.saturating_sub(first.0).min(first.1 - first.0);
        let last = self.runs[hi - 1];
        total -= last.1.saturating_sub(e).min(last.1 - last.0);
        total
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn merging_in_place_gives_the_merged_runs() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for n in [0usize, 1, 2, 7, 100, 1000] {
            let mut v: Vec<(Ns, Ns)> = (0..n)
                .map(|_| {
                    let s = next(10_000);
                    (s, s + next(60))
                })
                .collect();
            let want = merged_runs(&mut v.clone());
            merge_in_place(&mut v);
            assert_eq!(v, want, "{n} intervals");
        }
    }

    use super::*;
    use proptest::prelude::*;

    fn covered(iv: &[(Ns, Ns)], t: Ns) -> bool {
        iv.iter().any(|&(s, e)| s <= t && t < e)
    }

    #[test]
    fn seed_union_touching_and_zero_length() {
        let mut seed = [
            (1_000, 5_000),
            (5_200, 9_000),
            (3_000, 4_000),
            (4_000, 6_000),
            (9_000, 9_000),
        ];
        assert_eq!(union_ns(&mut seed), 8_000);
        assert_eq!(union_ns(&mut [(0, 100), (100, 200)]), 200);
        assert_eq!(union_ns(&mut [(9_000, 9_000)]), 0);
        assert_eq!(
            merged_runs(&mut [(0, 100), (100, 200), (150, 150), (300, 301)]),
            vec![(0, 200), (300, 301)]
        );
    }

    proptest! {
        #[test]
        fn union_intersection_and_busy_within_match_a_per_ns_count(
            a in proptest::collection::vec((0u64..120, 0u64..30), 0..12),
            b in proptest::collection::vec((0u64..120, 0u64..30), 0..12),
            q in (0u64..150, 0u64..150),
        ) {
            let a: Vec<(Ns, Ns)> = a.into_iter().map(|(s, d)| (s, s + d)).collect();
            let b: Vec<(Ns, Ns)> = b.into_iter().map(|(s, d)| (s, s + d)).collect();
            let ra = merged_runs(&mut a.clone());
            let rb = merged_runs(&mut b.clone());
            let oracle_a = (0..160).filter(|&t| covered(&a, t)).count() as Ns;
            let oracle_ab = (0..160).filter(|&t| covered(&a, t) && covered(&b, t)).count() as Ns;
            prop_assert_eq!(union_ns(&mut a.clone()), oracle_a);
            prop_assert_eq!(intersection_ns(&ra, &rb), oracle_ab);
            let (qs, qe) = (q.0.min(q.1), q.0.max(q.1));
            let oracle_q = (qs..qe).filter(|&t| covered(&a, t)).count() as Ns;
            prop_assert_eq!(BusyIndex::new(ra).busy_within(qs, qe), oracle_q);
        }
    }
}
