//! Exact integer percentiles by the nearest-rank definition.
//!
//! For `n` sorted values and a percentile `p` (in per-mille, so p99.9 is expressible), the value
//! reported is the one at 1-based rank `ceil(p * n / 1000)`, at least 1. It is always one of the
//! measured values (no interpolation, no floats): p50 of [10, 50, 50, 50, 100] is 50, p99 is 100,
//! and min/max are ranks 1 and n.

use serde::Serialize;

/// 1-based nearest rank of per-mille `p` among `n` values (`n > 0`).
pub fn nearest_rank(n: usize, per_mille: u32) -> usize {
    let n128 = n as u128;
    let rank = (u128::from(per_mille) * n128).div_ceil(1000);
    (rank as usize).clamp(1, n)
}

/// Distribution of a set of integer values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Percentiles<T> {
    pub count: u64,
    pub min: T,
    pub p50: T,
    pub p90: T,
    pub p99: T,
    pub max: T,
}

/// The percentiles of `values` (reordered in place, in O(n) by successive selection), or `None`
/// when there are none.
pub fn percentiles<T: Ord + Copy>(values: &mut [T]) -> Option<Percentiles<T>> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let ranks = [
        1,
        nearest_rank(n, 500),
        nearest_rank(n, 900),
        nearest_rank(n, 990),
        n,
    ];
    let mut out = [values[0]; 5];
    // Each selection leaves everything after the chosen index >= it, so the next (higher) rank
    // only needs to look at the tail: total work stays linear.
    let mut lo = 0;
    for (slot, &rank) in out.iter_mut().zip(ranks.iter()) {
        let idx = rank - 1;
        if idx >= lo {
            let (_, v, _) = values[lo..].select_nth_unstable(idx - lo);
            *slot = *v;
            lo = idx;
        } else {
            *slot = values[idx];
        }
    }
    Some(Percentiles {
        count: n as u64,
        min: out[0],
        p50: out[1],
        p90: out[2],
        p99: out[3],
        max: out[4],
    })
}

/// The value at nearest rank `per_mille` of `values` (reordered in place).
pub fn percentile<T: Ord + Copy>(values: &mut [T], per_mille: u32) -> Option<T> {
    if values.is_empty() {
        return None;
    }
    let idx = nearest_rank(values.len(), per_mille) - 1;
    Some(*values.select_nth_unstable(idx).1)
}

/// The report's one buffer for a pass's values (durations, latencies), reused by every pass so
/// that they touch the same memory. A pass stores each value as its offset from a base it knows
/// (its group's smallest) in 32 bits when the offsets fit, else whole in 64; the other width's
/// buffer is freed.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    narrow: Vec<u32>,
    wide: Vec<u64>,
}

impl Scratch {
    /// `n` zeroed 32-bit slots (the 64-bit buffer freed).
    pub(crate) fn narrow(&mut self, n: usize) -> &mut Vec<u32> {
        self.wide = Vec::new();
        self.narrow.clear();
        self.narrow.resize(n, 0);
        &mut self.narrow
    }

    /// `n` zeroed 64-bit slots (the 32-bit buffer freed).
    pub(crate) fn wide(&mut self, n: usize) -> &mut Vec<u64> {
        self.narrow = Vec::new();
        self.wide.clear();
        self.wide.resize(n, 0);
        &mut self.wide
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nearest_rank_on_the_seed_latencies() {
        let mut v = vec![50i64, 100, 50, 10, 50];
        let p = percentiles(&mut v).unwrap();
        assert_eq!((p.min, p.p50, p.p90, p.p99, p.max), (10, 50, 100, 100, 100));
        assert_eq!(nearest_rank(100, 990), 99);
        assert_eq!(nearest_rank(1, 10), 1);
        assert!(percentiles::<i64>(&mut []).is_none());
    }

    proptest! {
        #[test]
        fn matches_sorting(mut v in proptest::collection::vec(-1000i64..1000, 1..200), pm in 1u32..=1000) {
            let mut sorted = v.clone();
            sorted.sort_unstable();
            // The definition itself: the smallest rank r with r / n >= p.
            let n = sorted.len();
            let rank = (1..=n).find(|r| r * 1000 >= pm as usize * n).unwrap();
            let want = sorted[rank - 1];
            prop_assert_eq!(percentile(&mut v.clone(), pm), Some(want));
            let p = percentiles(&mut v).unwrap();
            prop_assert_eq!(p.min, sorted[0]);
            prop_assert_eq!(p.max, *sorted.last().unwrap());
            prop_assert_eq!(p.p50, sorted[nearest_rank(sorted.len(), 500) - 1]);
            prop_assert_eq!(p.p99, sorted[nearest_rank(sorted.len(), 990) - 1]);
        }
    }
}
