//! A distributed job's first answer ([`JobSummary`]): how busy the ranks' GPUs were together,
//! compute and communication apart, how much communication was exposed, which rank waited most
//! and least at collectives (the one that waited least arrived last: the likely straggler),
//! which rank was slowest in most steps, and the collectives' arrival skew. Every figure is one
//! the job report already holds (its ranks, steps and collectives), summed or picked; the words
//! are the renderers'.

use cutrace_trace::Ns;
use serde::Serialize;

use crate::job_reduce::{JobCollectives, JobRank, JobSteps};
use crate::summary::pct;

/// The job's verdict. Sums are over the live ranks (each rank's figure being already the sum over
/// its GPUs, each GPU a union); percentages are of `window_ns`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Live ranks, dead ranks, ranks below the world size with no trace, and live ranks whose
    /// trace lost data or is incomplete.
    pub ranks: u64,
    pub dead_ranks: u64,
    pub missing_ranks: u64,
    pub ranks_lost_data: u64,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub busy_pct: f64,
    /// The union of compute (not communication) kernels: busy − exposed communication.
    pub compute_ns: Ns,
    pub compute_pct: f64,
    pub comm_ns: Ns,
    pub comm_pct: f64,
    pub exposed_comm_ns: Ns,
    pub exposed_comm_pct: f64,
    pub idle_ns: Ns,
    pub idle_pct: f64,
    /// The live ranks with the lowest and highest `busy_pct` (ties: the lower rank).
    pub busy_pct_min: Option<RankPct>,
    pub busy_pct_max: Option<RankPct>,
    /// Summed `wait_ns` of every rank.
    pub wait_ns: Ns,
    /// The rank that waited most at collectives and the one that waited least (it arrived last
    /// most: the likely straggler); both `null` unless their waits differ.
    pub most_waiting: Option<RankNs>,
    pub least_waiting: Option<RankNs>,
    /// Steps matched across ranks, and the rank that was the slowest in most of them (ties: the
    /// lower rank) with how many; `null` without steps.
    pub steps: u64,
    pub slowest_rank: Option<RankSteps>,
    /// The steps' spread (slowest − fastest rank): nearest-rank median and maximum.
    pub step_spread_median_ns: Option<Ns>,
    pub step_spread_max_ns: Option<Ns>,
    /// As in `collectives`: calls matched across ranks and their arrival skew.
    pub collectives_matched: u64,
    pub skew_median_ns: Option<Ns>,
    pub skew_max_ns: Option<Ns>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RankPct {
    pub rank: u32,
    pub pct: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RankNs {
    pub rank: u32,
    pub ns: Ns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RankSteps {
    pub rank: u32,
    /// Steps in which it was the slowest rank.
    pub steps: u64,
}

/// The verdict of a job whose live ranks are `ranks` (by rank), with `dead` dead ranks and
/// `missing` missing ones.
pub fn job_summary(
    ranks: &[JobRank],
    (dead, missing): (u64, u64),
    steps: &JobSteps,
    collectives: &JobCollectives,
) -> JobSummary {
    let sum = |f: fn(&JobRank) -> Ns| ranks.iter().fold(0u64, |a, r| a.saturating_add(f(r)));
    let window_ns = sum(|r| r.window_ns);
    let busy_ns = sum(|r| r.busy_ns);
    let compute_ns = sum(|r| r.compute_ns);
    let comm_ns = sum(|r| r.comm_ns);
    let exposed_comm_ns = sum(|r| r.exposed_comm_ns);
    let idle_ns = sum(|r| r.idle_ns);
    let by_busy = |r: &&JobRank| RankPct {
        rank: r.rank,
        pct: r.busy_pct,
    };
    // `total_cmp` orders every float; ranks come sorted, so the first of equals is the lower.
    let busy_pct_min = ranks
        .iter()
        .reduce(|a, b| {
            if b.busy_pct.total_cmp(&a.busy_pct).is_lt() {
                b
            } else {
                a
            }
        })
        .map(|r| by_busy(&r));
    let busy_pct_max = ranks
        .iter()
        .reduce(|a, b| {
            if b.busy_pct.total_cmp(&a.busy_pct).is_gt() {
                b
            } else {
                a
            }
        })
        .map(|r| by_busy(&r));
    let most = ranks
        .iter()
        .max_by_key(|r| (r.wait_ns, std::cmp::Reverse(r.rank)));
    let least = ranks.iter().min_by_key(|r| (r.wait_ns, r.rank));
    let (most_waiting, least_waiting) = match (most, least) {
        (Some(m), Some(l)) if m.wait_ns != l.wait_ns => (
            Some(RankNs {
                rank: m.rank,
                ns: m.wait_ns,
            }),
            Some(RankNs {
                rank: l.rank,
                ns: l.wait_ns,
            }),
        ),
        _ => (None, None),
    };
    let mut slowest: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for s in &steps.steps {
        *slowest.entry(s.slowest_rank).or_default() += 1;
    }
    let slowest_rank = slowest
        .iter()
        .max_by_key(|(rank, n)| (**n, std::cmp::Reverse(**rank)))
        .map(|(&rank, &steps)| RankSteps { rank, steps });
    let mut spreads: Vec<Ns> = steps.steps.iter().map(|s| s.spread_ns).collect();
    spreads.sort_unstable();
    JobSummary {
        ranks: ranks.len() as u64,
        dead_ranks: dead,
        missing_ranks: missing,
        ranks_lost_data: ranks
            .iter()
            .filter(|r| !r.complete || r.data_loss.any())
            .count() as u64,
        window_ns,
        busy_ns,
        busy_pct: pct(busy_ns, window_ns),
        compute_ns,
        compute_pct: pct(compute_ns, window_ns),
        comm_ns,
        comm_pct: pct(comm_ns, window_ns),
        exposed_comm_ns,
        exposed_comm_pct: pct(exposed_comm_ns, window_ns),
        idle_ns,
        idle_pct: pct(idle_ns, window_ns),
        busy_pct_min,
        busy_pct_max,
        wait_ns: sum(|r| r.wait_ns),
        most_waiting,
        least_waiting,
        steps: steps.steps.len() as u64,
        slowest_rank,
        step_spread_median_ns: (!spreads.is_empty())
            .then(|| spreads[crate::percentile::nearest_rank(spreads.len(), 500) - 1]),
        step_spread_max_ns: spreads.last().copied(),
        collectives_matched: collectives.matched,
        skew_median_ns: collectives.skew_median_ns,
        skew_max_ns: collectives.skew_max_ns,
    }
}
