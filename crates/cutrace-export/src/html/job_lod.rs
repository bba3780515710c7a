//! A distributed job's timeline: one lane per rank, each bucket holding the share of the rank's
//! GPU time that was busy (the union of its kernels, per GPU) and the share that was
//! communication (the union of its communication kernels), at the levels of detail of
//! [`super::lod`].
//!
//! Ranks are read one at a time and only their buckets are kept ([`rank_buckets`], in the map
//! step), before the job's span is known. So that they join exactly into one grid afterwards
//! ([`job_lod`]), every bucket width is a power of two nanoseconds and every grid starts at a
//! multiple of its width: a rank's buckets then nest in the job's, whose width is a power of two
//! at least as large (the job spans at least as much as any rank).

use std::collections::BTreeMap;

use cutrace_analysis::merged_runs;
use cutrace_trace::{is_comm_kernel, Ns, Trace};

use super::lod::{coarser, share_char, Grid, Lane, TimelineLod, BASE_BUCKETS, MIN_BUCKET_NS, ZOOM};

/// The encoded lanes of a job stay under this many bytes, as one trace's do.
pub const BUDGET_BYTES: u64 = super::lod::BUDGET_BYTES;
/// Most ranks drawn (the lowest ranks); the page says how many more there are, and its tables
/// list every rank. At one level of detail a lane is 2 KiB.
pub const MAX_RANK_LANES: usize = 512;
/// Levels of detail at most (as a GPU's lane of one trace).
const MAX_LEVELS: u32 = 4;

/// Each rank's timeline buckets, by the paths its trace was read from.
pub type RankLanes = std::collections::HashMap<Vec<String>, RankBuckets>;

/// One rank's buckets: per bucket of `width_ns` from `start_ns`, its GPUs' busy and
/// communication time (each GPU a union, summed over its GPUs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankBuckets {
    /// The first start and last end of its timed kernels.
    pub first_ns: Ns,
    pub last_ns: Ns,
    /// A multiple of `width_ns`, at or before `first_ns`.
    pub start_ns: Ns,
    /// A power of two.
    pub width_ns: Ns,
    /// GPUs with kernel time: a bucket holds at most `width_ns` of each.
    pub devices: u32,
    pub busy: Vec<Ns>,
    pub comm: Vec<Ns>,
}

/// Levels of detail for a job of `ranks` lanes: as many as fit [`BUDGET_BYTES`], at least one.
pub fn rank_levels(ranks: usize) -> u32 {
    let lanes = ranks.min(MAX_RANK_LANES) as u64;
    let bytes = |levels: u32| {
        (0..levels)
            .map(|k| 2 * BASE_BUCKETS * ZOOM.pow(k))
            .sum::<u64>()
    };
    (1..=MAX_LEVELS)
        .rev()
        .find(|&l| bytes(l) * lanes <= BUDGET_BYTES)
        .unwrap_or(1)
}

/// Buckets of the finest of `levels` levels.
pub fn fine_buckets(levels: u32) -> u64 {
    BASE_BUCKETS * ZOOM.pow(levels.clamp(1, MAX_LEVELS) - 1)
}

/// The power-of-two width whose aligned grid covers `span` in `n` buckets (`n` ≥ 2): a grid
/// starting up to one width before the span needs `span / width + 1` of them.
fn width_for(span: Ns, n: u64) -> Ns {
    span.div_ceil(n.max(2) - 1)
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(1 << 63)
}

/// `trace`'s buckets on a grid of at most `n` buckets; `None` when no kernel has time.
pub fn rank_buckets(trace: &Trace, n: u64) -> Option<RankBuckets> {
    // Names are interned: classify each distinct name once.
    let mut is_comm: BTreeMap<u32, bool> = BTreeMap::new();
    // device → (all kernels, communication kernels)
    type Intervals = Vec<(Ns, Ns)>;
    let mut by_device: BTreeMap<u32, (Intervals, Intervals)> = BTreeMap::new();
    let mut bounds: Option<(Ns, Ns)> = None;
    for k in trace
        .kernels
        .iter()
        .filter(|k| !k.untimed() && k.end_ns > k.start_ns)
    {
        let iv = (k.start_ns, k.end_ns);
        bounds = Some(bounds.map_or(iv, |(a, b)| (a.min(iv.0), b.max(iv.1))));
        let lane = by_device.entry(k.device).or_default();
        lane.0.push(iv);
        let comm = *is_comm
            .entry(k.name)
            .or_insert_with(|| is_comm_kernel(trace.str(k.name)));
        if comm {
            lane.1.push(iv);
        }
    }
    let (first, last) = bounds?;
    let width = width_for(last - first, n);
    let start = first - first % width;
    let grid = Grid {
        start,
        width,
        n: (last - start).div_ceil(width) as usize,
    };
    let mut busy = vec![0; grid.n];
    let mut comm = vec![0; grid.n];
    for (all, nccl) in by_device.values_mut() {
        for (s, e) in merged_runs(all) {
            grid.add(s, e, |b, ns| busy[b] += ns);
        }
        for (s, e) in merged_runs(nccl) {
            grid.add(s, e, |b, ns| comm[b] += ns);
        }
    }
    Some(RankBuckets {
        first_ns: first,
        last_ns: last,
        start_ns: start,
        width_ns: width,
        devices: by_device.len() as u32,
        busy,
        comm,
    })
}

/// The job's timeline: one lane per rank of `ranks` (in the order given), on one grid over the
/// ranks' span with `levels` levels (fewer when the finest buckets would be under
/// [`MIN_BUCKET_NS`]). Times are each rank's own clock: ranks of one host share it.
pub fn job_lod(ranks: &[(u32, &RankBuckets)], levels: u32) -> TimelineLod {
    let (Some(first), Some(last)) = (
        ranks.iter().map(|r| r.1.first_ns).min(),
        ranks.iter().map(|r| r.1.last_ns).max(),
    ) else {
        return TimelineLod {
            start_ns: 0,
            span_ns: 0,
            gpu_bucket_ns: 0,
            stream_bucket_ns: 0,
            base_buckets: BASE_BUCKETS,
            zoom: ZOOM,
            lanes: Vec::new(),
            streams_not_drawn: 0,
            host_threads_not_drawn: 0,
            path_drawn: None,
        };
    };
    let mut levels = levels.clamp(1, MAX_LEVELS);
    // Every rank's width divides it: both are powers of two, and the job's span is the larger.
    let widest = ranks.iter().map(|r| r.1.width_ns).max().unwrap_or(1);
    let mut width = width_for(last - first, fine_buckets(levels)).max(widest);
    let start = first - first % width;
    let n = (last - start).div_ceil(width) as usize;
    let mut sums: Vec<(Vec<Ns>, Vec<Ns>)> = ranks
        .iter()
        .map(|(_, r)| {
            let (mut busy, mut comm) = (vec![0; n], vec![0; n]);
            for (i, (b, c)) in r.busy.iter().zip(&r.comm).enumerate() {
                let at = r.start_ns + i as u64 * r.width_ns;
                let j = ((at.saturating_sub(start)) / width) as usize;
                if let Some(x) = busy.get_mut(j) {
                    *x += b;
                    comm[j] += c;
                }
            }
            (busy, comm)
        })
        .collect();
    while levels > 1 && width < MIN_BUCKET_NS {
        for (busy, comm) in &mut sums {
            (*busy, *comm) = (coarser(busy), coarser(comm));
        }
        width *= ZOOM;
        levels -= 1;
    }
    let lanes = ranks
        .iter()
        .zip(&sums)
        .map(|((rank, r), (busy, comm))| Lane {
            device: 0,
            stream: None,
            pid: None,
            rank: Some(*rank),
            role: None,
            bucket_ns: None,
            levels: encode_levels(busy, comm, width, r.devices.max(1), levels),
        })
        .collect();
    TimelineLod {
        start_ns: start,
        span_ns: last - start,
        gpu_bucket_ns: width,
        stream_bucket_ns: width,
        base_buckets: (n as u64).div_ceil(ZOOM.pow(levels - 1)),
        zoom: ZOOM,
        lanes,
        streams_not_drawn: 0,
        host_threads_not_drawn: 0,
        path_drawn: None,
    }
}

/// The finest sums, then each coarser level; encoded coarsest first, two characters a bucket:
/// the busy share and the communication share of the rank's GPUs' time in it.
fn encode_levels(busy: &[Ns], comm: &[Ns], width: Ns, devices: u32, levels: u32) -> Vec<String> {
    let (mut busy, mut comm, mut width) = (busy.to_vec(), comm.to_vec(), width);
    let mut out = Vec::with_capacity(levels as usize);
    for _ in 0..levels {
        let capacity = width.saturating_mul(u64::from(devices));
        let mut s = String::with_capacity(busy.len() * 2);
        for (b, c) in busy.iter().zip(&comm) {
            s.push(share_char(*b, capacity));
            s.push(share_char(*c, capacity));
        }
        out.push(s);
        (busy, comm) = (coarser(&busy), coarser(&comm));
        width = width.saturating_mul(ZOOM);
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(start: Ns, width: Ns, busy: &[Ns], comm: &[Ns]) -> RankBuckets {
        RankBuckets {
            first_ns: start,
            last_ns: start + width * busy.len() as u64,
            start_ns: start,
            width_ns: width,
            devices: 1,
            busy: busy.to_vec(),
            comm: comm.to_vec(),
        }
    }

    #[test]
    fn a_ranks_buckets_join_the_jobs_grid_exactly() {
        // Rank 1 spans 3 MiB ns in 4096-ns buckets; rank 0's finer buckets (1024 ns from 8192)
        // land, whole, in the job's bucket that holds them.
        let r0 = rank(8192, 1024, &[1024, 512, 0, 256], &[0, 512, 0, 0]);
        let r1 = rank(0, 4096, &[4096; 768], &[0; 768]);
        assert_eq!(width_for(r1.last_ns - r1.first_ns, fine_buckets(1)), 4096);
        let lod = job_lod(&[(0, &r0), (1, &r1)], 1);
        assert_eq!(lod.gpu_bucket_ns, 4096);
        assert_eq!((lod.start_ns, lod.span_ns), (0, 3 << 20));
        let lanes: Vec<(Option<u32>, &str)> = lod
            .lanes
            .iter()
            .map(|l| (l.rank, l.levels[0].as_str()))
            .collect();
        assert_eq!(lanes.len(), 2);
        // 1792 of 4096 ns busy is 27/64 (`R`), 512 of communication 7/64.
        let mut want0 = "00".repeat(768);
        want0.replace_range(4..6, "R7");
        assert_eq!(lanes[0], (Some(0), want0.as_str()));
        assert_eq!(lanes[1], (Some(1), "/0".repeat(768).as_str()));
    }

    #[test]
    fn levels_shrink_with_ranks_to_fit_the_budget() {
        assert_eq!(rank_levels(1), 4);
        assert_eq!(rank_levels(8), 4);
        assert_eq!(rank_levels(64), 2);
        assert_eq!(rank_levels(100_000), 1);
        for r in [1, 9, 10, 37, 38, 156, 157, 512, 4096] {
            let l = rank_levels(r);
            let bytes: u64 = (0..l).map(|k| 2 * BASE_BUCKETS * ZOOM.pow(k)).sum();
            assert!(bytes * r.min(MAX_RANK_LANES) as u64 <= BUDGET_BYTES, "{r}");
        }
    }

    #[test]
    fn widths_are_powers_of_two_covering_the_span() {
        for (span, n) in [
            (0, 1024),
            (1, 1024),
            (1023, 1024),
            (1_000_000_007, 4096),
            (u64::MAX, 2),
        ] {
            let w = width_for(span, n);
            assert!(w.is_power_of_two(), "{span}");
            // An aligned grid starting up to a width early still covers the span in n buckets.
            assert!(span / w < n, "{span} {n} {w}");
        }
    }
}
