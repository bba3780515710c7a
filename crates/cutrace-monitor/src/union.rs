//! Busy time as a running union of intervals that arrive in any order and never end: the open
//! runs are kept exactly, and the oldest are retired below a watermark so memory stays bounded.
//!
//! Intervals are half-open `[start, end)`; touching intervals merge, zero-length ones add
//! nothing, and the total does not depend on arrival order (docs/ARCHITECTURE.md, "Busy is a
//! union"), as long as nothing arrives below the watermark. CUPTI delivers a context's records
//! late (at the next flush, seconds later), so the watermark trails the newest end by
//! [`WatermarkUnion::horizon_ns`] of GPU time, and it rises earlier only when more than
//! `max_runs` runs are open. What arrives below it cannot be merged exactly (the runs it might
//! overlap are gone) and is counted in [`WatermarkUnion::late_ns`], never added.

use std::collections::BTreeMap;

use cutrace_trace::Ns;

/// GPU time kept open behind the newest end: records arriving later than this are late.
pub const DEFAULT_HORIZON_NS: Ns = 120_000_000_000;
/// Open runs kept before the oldest are retired early.
pub const DEFAULT_MAX_RUNS: usize = 65_536;
/// Upper bounds (ns) of the idle-gap histogram's buckets; `+Inf` is implied.
pub const GAP_BOUNDS_NS: [Ns; 9] = [
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    100_000_000_000,
];

/// The idle gaps between a union's final runs, as a histogram over [`GAP_BOUNDS_NS`]: a gap is
/// counted once both runs around it are retired (nothing can arrive inside it any more).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gaps {
    pub buckets: [u64; GAP_BOUNDS_NS.len() + 1],
    pub sum_ns: Ns,
}

impl Gaps {
    fn add(&mut self, gap: Ns) {
        let k = GAP_BOUNDS_NS
            .iter()
            .position(|&b| gap <= b)
            .unwrap_or(GAP_BOUNDS_NS.len());
        self.buckets[k] = self.buckets[k].saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(gap);
    }
}

#[derive(Debug, Clone)]
pub struct WatermarkUnion {
    /// Open runs, start → end: disjoint and not touching.
    open: BTreeMap<Ns, Ns>,
    open_ns: Ns,
    retired_ns: Ns,
    /// Nothing at or below this is open any more.
    watermark: Ns,
    newest_end: Ns,
    late_ns: Ns,
    /// The end of the last run retired (0 before any), where the next gap starts.
    last_retired_end: Ns,
    gaps: Gaps,
    pub horizon_ns: Ns,
    pub max_runs: usize,
}

impl Default for WatermarkUnion {
    fn default() -> Self {
        WatermarkUnion::new(DEFAULT_HORIZON_NS, DEFAULT_MAX_RUNS)
    }
}

impl WatermarkUnion {
    pub fn new(horizon_ns: Ns, max_runs: usize) -> Self {
        WatermarkUnion {
            open: BTreeMap::new(),
            open_ns: 0,
            retired_ns: 0,
            watermark: 0,
            newest_end: 0,
            late_ns: 0,
            last_retired_end: 0,
            gaps: Gaps::default(),
            horizon_ns,
            max_runs: max_runs.max(1),
        }
    }

    /// Time covered by at least one interval added (retired and open runs together).
    pub fn total_ns(&self) -> Ns {
        self.retired_ns.saturating_add(self.open_ns)
    }

    /// The latest end added so far (0 before any).
    pub fn newest_end(&self) -> Ns {
        self.newest_end
    }

    /// A copy with the same totals and no open runs, for reading (rendering) without the runs.
    pub fn frozen(&self) -> WatermarkUnion {
        WatermarkUnion {
            open: BTreeMap::new(),
            open_ns: 0,
            retired_ns: self.total_ns(),
            ..*self
        }
    }

    /// Retires the oldest open runs until at most `n` are open (a budget shared with other
    /// unions ran out): later records below the new watermark count as late.
    pub fn shrink_to(&mut self, n: usize) {
        while self.open.len() > n {
            let Some((s, e)) = self.open.pop_first() else {
                break;
            };
            self.open_ns -= e - s;
            self.retired(s, e);
        }
    }

    /// The idle gaps between the runs retired so far.
    pub fn gaps(&self) -> Gaps {
        self.gaps
    }

    /// Counts the gap before a run `[s, e)` that retires now, in start order.
    fn retired(&mut self, s: Ns, e: Ns) {
        if self.last_retired_end > 0 && s > self.last_retired_end {
            self.gaps.add(s - self.last_retired_end);
        }
        self.last_retired_end = self.last_retired_end.max(e);
        self.retired_ns = self.retired_ns.saturating_add(e - s);
        self.watermark = e;
    }

    /// Interval time that arrived below the watermark and was left out of the total.
    pub fn late_ns(&self) -> Ns {
        self.late_ns
    }

    pub fn open_runs(&self) -> usize {
        self.open.len()
    }

    /// Adds `[s, e)`.
    pub fn add(&mut self, s: Ns, e: Ns) {
        if e <= s {
            return;
        }
        if e <= self.watermark {
            self.late_ns = self.late_ns.saturating_add(e - s);
            return;
        }
        let mut s = s;
        if s < self.watermark {
            self.late_ns = self.late_ns.saturating_add(self.watermark - s);
            s = self.watermark;
        }
        let mut e = e;
        // Runs that overlap or touch [s, e]: the one starting at or before s, and those
        // starting inside (s, e].
        if let Some((&ps, &pe)) = self.open.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.open.remove(&ps);
                self.open_ns -= pe - ps;
            }
        }
        while let Some((&ns, &ne)) = self.open.range(s..=e).next() {
            e = e.max(ne);
            self.open.remove(&ns);
            self.open_ns -= ne - ns;
        }
        self.open.insert(s, e);
        self.open_ns += e - s;
        self.newest_end = self.newest_end.max(e);
        self.retire();
    }

    /// Retires every open run: nothing more will be added (its process ended), so the total is
    /// kept and the memory given back.
    pub fn seal(&mut self) {
        while let Some((s, e)) = self.open.pop_first() {
            self.retired(s, e);
        }
        self.open_ns = 0;
    }

    /// Retires runs that end more than the horizon before the newest end, and the oldest runs
    /// past `max_runs`.
    fn retire(&mut self) {
        let keep_after = self.newest_end.saturating_sub(self.horizon_ns);
        while let Some((&s, &e)) = self.open.first_key_value() {
            if e > keep_after && self.open.len() <= self.max_runs {
                break;
            }
            self.open.remove(&s);
            self.open_ns -= e - s;
            self.retired(s, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn oracle(iv: &[(Ns, Ns)]) -> Ns {
        let mut v = iv.to_vec();
        cutrace_analysis::union_ns(&mut v)
    }

    #[test]
    fn touching_merge_zero_length_adds_nothing() {
        let mut u = WatermarkUnion::default();
        u.add(0, 100);
        u.add(100, 200);
        u.add(150, 150);
        u.add(300, 250);
        assert_eq!((u.total_ns(), u.open_runs()), (200, 1));
        u.add(50, 400);
        assert_eq!((u.total_ns(), u.open_runs()), (400, 1));
        u.seal();
        assert_eq!((u.total_ns(), u.open_runs()), (400, 0));
        u.add(10, 20);
        assert_eq!((u.total_ns(), u.late_ns()), (400, 10));
    }

    #[test]
    fn what_arrives_below_the_watermark_is_counted_late_not_added() {
        let mut u = WatermarkUnion::new(1_000, 16);
        u.add(0, 100);
        u.add(5_000, 5_100); // retires [0,100): the watermark is 100
        assert_eq!(u.total_ns(), 200);
        u.add(50, 150); // 50 ns below the watermark, 50 above
        assert_eq!((u.total_ns(), u.late_ns()), (250, 50));
    }

    #[test]
    fn totals_at_the_end_of_time_saturate_rather_than_overflow() {
        let mut u = WatermarkUnion::new(10, 2);
        u.add(0, Ns::MAX);
        u.seal();
        for _ in 0..3 {
            u.add(0, Ns::MAX - 1);
        }
        assert_eq!((u.total_ns(), u.late_ns()), (Ns::MAX, Ns::MAX));
        let mut v = WatermarkUnion::new(10, 2);
        for k in 0..8 {
            v.add(k * 100, k * 100 + 10);
        }
        v.shrink_to(1);
        assert_eq!(
            (v.open_runs(), v.total_ns(), v.frozen().total_ns()),
            (1, 80, 80)
        );
    }

    proptest! {
        /// Any order, any overlap: the union equals the sorted oracle while nothing is late.
        #[test]
        fn equals_the_oracle_in_any_order(
            mut iv in proptest::collection::vec((0u64..10_000, 0u64..500), 0..200),
            seed in any::<u64>(),
        ) {
            let iv: Vec<(Ns, Ns)> = iv.drain(..).map(|(s, l)| (s, s + l)).collect();
            let mut shuffled = iv.clone();
            let n = shuffled.len();
            let mut x = seed | 1;
            for i in (1..n).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                shuffled.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut u = WatermarkUnion::default();
            for &(s, e) in &shuffled {
                u.add(s, e);
            }
            prop_assert_eq!(u.total_ns(), oracle(&iv));
            prop_assert_eq!(u.late_ns(), 0);
        }

        /// Sealed, the gaps counted are exactly the gaps between the oracle's merged runs.
        #[test]
        fn sealed_gaps_are_the_oracles(
            mut iv in proptest::collection::vec((0u64..100_000, 1u64..3_000), 1..100),
        ) {
            let iv: Vec<(Ns, Ns)> = iv.drain(..).map(|(s, l)| (s, s + l)).collect();
            let mut u = WatermarkUnion::default();
            for &(s, e) in &iv {
                u.add(s, e);
            }
            u.seal();
            let mut v = iv.clone();
            v.sort_unstable();
            let mut merged: Vec<(Ns, Ns)> = Vec::new();
            for (s, e) in v {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            let gaps: Vec<Ns> = merged.windows(2).map(|w| w[1].0 - w[0].1).collect();
            let g = u.gaps();
            prop_assert_eq!(g.buckets.iter().sum::<u64>(), gaps.len() as u64);
            prop_assert_eq!(g.sum_ns, gaps.iter().sum::<Ns>());
        }

        /// With few runs kept, the total plus what was late covers the union, and the total
        /// never exceeds it.
        #[test]
        fn bounded_runs_never_overcount(
            mut iv in proptest::collection::vec((0u64..10_000, 1u64..50), 0..200),
        ) {
            let iv: Vec<(Ns, Ns)> = iv.drain(..).map(|(s, l)| (s, s + l)).collect();
            let mut u = WatermarkUnion::new(100, 4);
            for &(s, e) in &iv {
                u.add(s, e);
                prop_assert!(u.open_runs() <= 4);
            }
            let exact = oracle(&iv);
            prop_assert!(u.total_ns() <= exact);
            prop_assert!(u.total_ns() + u.late_ns() >= exact);
        }
    }
}
