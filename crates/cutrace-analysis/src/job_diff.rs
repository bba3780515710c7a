//! Two jobs side by side, rank by rank: busy, communication, exposed communication, wait and
//! step time of each rank in both, and the job-wide collective skew. Pure over two
//! [`JobReport`]s.

use serde::Serialize;

use crate::job_reduce::{JobRank, JobReport};
use crate::job_verdict::{RankNs, RankSteps};

/// The JSON version of [`JobDiff`].
pub const JOB_DIFF_SCHEMA_VERSION: u32 = 2;

/// Two jobs compared. `cutrace diff --format json` prints `cutrace_export::text::job::diff_json`
/// of it, which adds each caveat's words (`text`): the documented schema is that one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobDiff {
    pub schema_version: u32,
    /// Always `job`.
    pub kind: &'static str,
    /// The first answer: step time, the ranks' shares, the slowest rank and the likely
    /// straggler of each job.
    pub headline: JobHeadline,
    /// Every rank live in either job, by rank.
    pub ranks: Vec<RankDiff>,
    pub skew_max_ns: Pair,
    pub skew_median_ns: Pair,
    pub skew_total_ns: Pair,
    /// The slowest step of each job (its duration and rank).
    pub slowest_step_ns: Pair,
    /// What makes the comparison less than like for like, as facts (the words are the
    /// renderers': `cutrace_export::text::job::caveat_text`).
    pub caveats: Vec<JobCaveat>,
}

/// One thing that makes two jobs' comparison less than like for like; `kind` is stable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobCaveat {
    /// The jobs have different numbers of live ranks.
    RankCounts { base: u64, new: u64 },
    /// A job has dead or missing ranks: its skew and wait cover the others only.
    DeadOrMissing {
        side: &'static str,
        dead: u64,
        missing: u64,
    },
    /// A job's ranks are not known to share one clock.
    ClocksNotShared { side: &'static str },
}

impl JobCaveat {
    pub fn kind(&self) -> &'static str {
        match self {
            JobCaveat::RankCounts { .. } => "rank_counts",
            JobCaveat::DeadOrMissing { .. } => "dead_or_missing",
            JobCaveat::ClocksNotShared { .. } => "clocks_not_shared",
        }
    }
}

/// The job diff's first lines, from figures each job report already holds (its steps and its
/// `summary`); the skew is the diff's own `skew_*` pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobHeadline {
    /// Steps matched across ranks in each job (`steps.steps`).
    pub steps: Pair,
    /// The job's step time: the nearest-rank median over its steps of each step's time on its
    /// slowest rank (`steps.steps[].slowest_ns`: a step of the job ends with its last rank's);
    /// null without steps.
    pub step_median_ns: Pair,
    /// The ranks' GPUs together, as shares of their summed kernel spans (`summary`'s
    /// `busy_pct`, `compute_pct`, `comm_pct`, `exposed_comm_pct`, `idle_pct`).
    pub busy_pct: PctPair,
    pub compute_pct: PctPair,
    pub comm_pct: PctPair,
    pub exposed_comm_pct: PctPair,
    pub idle_pct: PctPair,
    /// `summary.slowest_rank` of each job: the rank slowest in most steps, and in how many.
    pub slowest_rank_base: Option<RankSteps>,
    pub slowest_rank_new: Option<RankSteps>,
    /// `summary.least_waiting` of each job: the rank that waited least at collectives (it
    /// arrived last most: the likely straggler).
    pub least_waiting_base: Option<RankNs>,
    pub least_waiting_new: Option<RankNs>,
}

/// A share in both jobs, in percent, and its change in percentage points (new − base).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PctPair {
    pub base: f64,
    pub new: f64,
    pub points: f64,
}

impl PctPair {
    fn of(base: f64, new: f64) -> PctPair {
        PctPair {
            base,
            new,
            points: new - base,
        }
    }
}

/// [`JobHeadline`] of two job reports.
fn headline(base: &JobReport, new: &JobReport) -> JobHeadline {
    let step_median = |j: &JobReport| {
        let mut t: Vec<u64> = j.steps.steps.iter().map(|s| s.slowest_ns).collect();
        t.sort_unstable();
        (!t.is_empty()).then(|| t[crate::percentile::nearest_rank(t.len(), 500) - 1])
    };
    let (b, n) = (&base.summary, &new.summary);
    JobHeadline {
        steps: Pair::of(
            Some(base.steps.steps.len() as u64),
            Some(new.steps.steps.len() as u64),
        ),
        step_median_ns: Pair::of(step_median(base), step_median(new)),
        busy_pct: PctPair::of(b.busy_pct, n.busy_pct),
        compute_pct: PctPair::of(b.compute_pct, n.compute_pct),
        comm_pct: PctPair::of(b.comm_pct, n.comm_pct),
        exposed_comm_pct: PctPair::of(b.exposed_comm_pct, n.exposed_comm_pct),
        idle_pct: PctPair::of(b.idle_pct, n.idle_pct),
        slowest_rank_base: b.slowest_rank,
        slowest_rank_new: n.slowest_rank,
        least_waiting_base: b.least_waiting,
        least_waiting_new: n.least_waiting,
    }
}

/// One figure in both jobs; `null` where a job does not have it. `delta` = new − base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub base: Option<u64>,
    pub new: Option<u64>,
    pub delta: Option<i64>,
}

impl Pair {
    pub fn of(base: Option<u64>, new: Option<u64>) -> Pair {
        let delta = match (base, new) {
            (Some(b), Some(n)) => Some(crate::units::delta_ns(b, n)),
            _ => None,
        };
        Pair { base, new, delta }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankDiff {
    pub rank: u32,
    pub busy_ns: Pair,
    pub comm_ns: Pair,
    pub exposed_comm_ns: Pair,
    pub wait_ns: Pair,
    pub idle_ns: Pair,
    pub step_median_ns: Pair,
    pub busy_pct_base: Option<f64>,
    pub busy_pct_new: Option<f64>,
}

/// Compares `new` with `base`, rank by rank.
pub fn diff_jobs(base: &JobReport, new: &JobReport) -> JobDiff {
    let mut ranks: Vec<u32> = base
        .ranks
        .iter()
        .chain(&new.ranks)
        .map(|r| r.rank)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let find = |j: &'_ JobReport, r: u32| j.ranks.iter().find(|x| x.rank == r).cloned();
    let rows = ranks
        .into_iter()
        .map(|r| {
            let (b, n) = (find(base, r), find(new, r));
            let f = |g: fn(&JobRank) -> Option<u64>| {
                Pair::of(b.as_ref().and_then(g), n.as_ref().and_then(g))
            };
            RankDiff {
                rank: r,
                busy_ns: f(|x| Some(x.busy_ns)),
                comm_ns: f(|x| Some(x.comm_ns)),
                exposed_comm_ns: f(|x| Some(x.exposed_comm_ns)),
                wait_ns: f(|x| Some(x.wait_ns)),
                idle_ns: f(|x| Some(x.idle_ns)),
                step_median_ns: f(|x| x.step_median_ns),
                busy_pct_base: b.as_ref().map(|x| x.busy_pct),
                busy_pct_new: n.as_ref().map(|x| x.busy_pct),
            }
        })
        .collect();
    let slowest = |j: &JobReport| j.steps.steps.iter().map(|s| s.slowest_ns).max();
    let mut caveats = Vec::new();
    let (nb, nn) = (base.ranks.len() as u64, new.ranks.len() as u64);
    if nb != nn {
        caveats.push(JobCaveat::RankCounts { base: nb, new: nn });
    }
    for (side, j) in [("base", base), ("new", new)] {
        if !j.dead_ranks.is_empty() || !j.missing_ranks.is_empty() {
            caveats.push(JobCaveat::DeadOrMissing {
                side,
                dead: j.dead_ranks.len() as u64,
                missing: j.missing_ranks.len() as u64,
            });
        }
        if j.clock.alignment != "one_host" {
            caveats.push(JobCaveat::ClocksNotShared { side });
        }
    }
    JobDiff {
        schema_version: JOB_DIFF_SCHEMA_VERSION,
        kind: "job",
        headline: headline(base, new),
        ranks: rows,
        skew_max_ns: Pair::of(base.collectives.skew_max_ns, new.collectives.skew_max_ns),
        skew_median_ns: Pair::of(
            base.collectives.skew_median_ns,
            new.collectives.skew_median_ns,
        ),
        skew_total_ns: Pair::of(
            Some(base.collectives.skew_total_ns),
            Some(new.collectives.skew_total_ns),
        ),
        slowest_step_ns: Pair::of(slowest(base), slowest(new)),
        caveats,
    }
}
