//! A distributed job's first answer ([`JobSummary`]): how busy the ranks' GPUs were together,
//! compute and communication apart, how much communication was exposed, which rank waited most
//! and least at collectives (the one that waited least arrived last: the likely straggler),
//! which rank was slowest in most steps, and the collectives' arrival skew. Every figure is one
//! the job report already holds (its ranks, steps and collectives), summed or picked; the words
//! are the renderers'.

use cutrace_trace::Ns;
use serde::Serialize;

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
