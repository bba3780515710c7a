//! The reduce step of a distributed job's analysis: [`RankSummary`]s joined across ranks into
//! one [`JobReport`]: per rank busy, communication, exposed communication and the time it waited
//! for the others; per step the slowest rank and the spread; per collective the arrival skew.
//!
//! Collectives are matched across ranks by process group and sequence number where the trace
//! wrote one, else by their order within the group (the k-th call in group `0` on every rank is
//! one call: collectives of one group run in the same order on every rank). Ranks whose traces
//! carry no annotation are matched by the order of their NCCL kernels. For each call found on at
//! least two ranks, skew = the last rank's kernel start − the first's, and each rank waited the
//! last start − its own start. Steps are matched by their `#N` (`ProfilerStep#N`) where every
//! step name has one, else by their order on each rank.
//!
//! Clocks: every timestamp is its host's clock (CUPTI's and Kineto's timestamps are not
//! aligned across machines). Ranks on one host share one clock; between hosts the offset of
//! their clocks adds directly to skew and wait. [`ClockInfo`] says which case a job is in.

use std::collections::{BTreeMap, BTreeSet};

use cutrace_trace::Ns;
use serde::Serialize;

use crate::job::{DeadReason, RankFrom, RankLosses, RankStep, RankSummary};
use crate::job_verdict::{JobSummary, RankNs, RankPct, RankSteps};
use crate::percentile::nearest_rank;
use crate::summary::pct;

/// The job report's JSON version; rises when a field is renamed, removed or changes meaning.
pub const JOB_SCHEMA_VERSION: u32 = 2;

/// A distributed job's report. `cutrace report JOB --format json` prints
/// `cutrace_export::text::job::report_json` of it, which adds the words of each note (`text`)
/// and of the clock (`note`): the documented schema (docs/REPORT.md) is that one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobReport {
    pub schema_version: u32,
    /// Always `job`: tells this report from a one-trace report.
    pub kind: &'static str,
    /// The largest world size a rank's trace states; `null` when none states one.
    pub world_size: Option<u32>,
    /// Live ranks (in `ranks`) and dead ones.
    pub ranks_found: u64,
    /// Ranks below `world_size` with no trace at all.
    pub missing_ranks: Vec<u32>,
    /// Ranks whose trace could not be read or holds no kernel: reported, left out of the rest.
    pub dead_ranks: Vec<DeadRank>,
    pub clock: ClockInfo,
    /// Live ranks, by rank.
    pub ranks: Vec<JobRank>,
    pub steps: JobSteps,
    pub collectives: JobCollectives,
    /// What makes the numbers less than exact, as facts (the words are the renderers').
    pub notes: Vec<JobNote>,
    /// The first answer: the ranks together, the straggler, the slowest rank per step, skew.
    pub summary: JobSummary,
}

/// One thing that makes a job's numbers less than exact. `kind` is stable, for scripts; the
/// words are `cutrace_export::text::job::note_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobNote {
    /// Found while reading the inputs (parts left out, files that are not traces), in the
    /// reader's words.
    Input { note: String },
    /// A trace states a world size beyond any job: missing ranks are not listed.
    WorldTooLarge { world_size: u32 },
    /// Two summaries of one rank: one is left out.
    DuplicateRank {
        rank: u32,
        left_out: Vec<String>,
        kept: Vec<String>,
    },
    /// Neither the trace nor its file name states a rank: numbered by input order.
    NumberedByOrder { paths: Vec<String>, rank: u32 },
    /// A rank's trace lost data.
    RankLostData { rank: u32, losses: RankLosses },
    /// A rank's trace is incomplete.
    RankIncomplete { rank: u32, reason: Option<String> },
    /// No rank's trace holds an NCCL kernel.
    NoNcclKernels,
    /// Collectives matched by the order of the ranks' NCCL kernels, not by annotation.
    MatchedByOrder { calls: u64 },
    /// Matched collectives whose names differ between ranks.
    NamesDiffer { collectives: u64 },
    /// Sequence numbers given to several calls of one rank's group.
    SharedSequence { numbers: u64 },
    /// Collective calls found on one rank only.
    Unmatched { calls: u64 },
}

impl JobNote {
    /// The stable name scripts match on (the JSON's `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            JobNote::Input { .. } => "input",
            JobNote::WorldTooLarge { .. } => "world_too_large",
            JobNote::DuplicateRank { .. } => "duplicate_rank",
            JobNote::NumberedByOrder { .. } => "numbered_by_order",
            JobNote::RankLostData { .. } => "rank_lost_data",
            JobNote::RankIncomplete { .. } => "rank_incomplete",
            JobNote::NoNcclKernels => "no_nccl_kernels",
            JobNote::MatchedByOrder { .. } => "matched_by_order",
            JobNote::NamesDiffer { .. } => "names_differ",
            JobNote::SharedSequence { .. } => "shared_sequence",
            JobNote::Unmatched { .. } => "unmatched",
        }
    }
}

/// A rank with a trace and no figures, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadRank {
    pub rank: u32,
    pub paths: Vec<String>,
    pub reason: DeadReason,
}

/// How the ranks' clocks relate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClockInfo {
    /// Hosts the live ranks ran on (as their traces name them).
    pub hosts: Vec<String>,
    /// Live ranks whose trace does not name its host (torch.profiler's traces do not).
    pub ranks_without_host: u64,
    /// `one_host` (one clock: skew and wait are exact), `several_hosts` (each host's own clock:
    /// their offset adds to skew and wait between hosts), or `unknown`.
    pub alignment: &'static str,
    /// Each rank's clock against the others', read from when its matched collectives ended:
    /// NCCL's kernels of one call end together on every rank (the last arrival completes it),
    /// so a rank whose collectives end a steady amount later on its clock has its clock that
    /// far ahead. Ranks with a matched collective, by rank.
    pub offsets: Vec<ClockOffset>,
    /// The largest `offset_ns` either way; null when no collective was matched.
    pub offset_max_ns: Option<Ns>,
}

/// One rank's clock offset, as [`ClockInfo::offsets`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClockOffset {
    pub rank: u32,
    /// The median, over its matched collectives, of its kernel's end minus the median end of
    /// that call's ranks: positive when its clock reads later than theirs.
    pub offset_ns: i64,
    /// Matched collectives it took part in.
    pub calls: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRank {
    pub rank: u32,
    /// `trace`, `file_name`, or `input_order` (numbered by the reduce; see `notes`).
    pub rank_from: &'static str,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub paths: Vec<String>,
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    /// What its trace says it lost (also in `notes`); all 0 when nothing it knows of.
    pub data_loss: RankLosses,
    pub devices: Vec<u32>,
    pub kernels: u64,
    /// Sums over the rank's GPUs: the span of its kernels, their union, and idle.
    pub window_ns: Ns,
    /// The union of all kernels on its GPU or GPUs (summed over GPUs, each a union).
    pub busy_ns: Ns,
    pub busy_pct: f64,
    /// The union of its compute (not communication) kernels: `busy_ns − exposed_comm_ns`.
    pub compute_ns: Ns,
    /// The union of its NCCL kernels.
    pub comm_ns: Ns,
    /// NCCL time during which no compute kernel ran on that GPU.
    pub exposed_comm_ns: Ns,
    /// Share of `comm_ns` that overlapped compute; `null` without communication.
    pub hidden_comm_pct: Option<f64>,
    /// Summed over matched collectives: the last rank's arrival − this rank's.
    pub wait_ns: Ns,
    pub idle_ns: Ns,
    pub idle_before_launch_ns: Ns,
    pub idle_after_launch_ns: Ns,
    pub idle_unknown_ns: Ns,
    pub steps: u64,
    pub step_median_ns: Option<Ns>,
    pub step_max_ns: Option<Ns>,
    pub collectives: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobSteps {
    /// The step names matched (`ProfilerStep#*`).
    pub matched: String,
    /// `number` (every step name ends in `#N`, and a rank's steps have distinct N: step N of
    /// every rank is one step) or `order` (the k-th step of every rank).
    pub matched_by: &'static str,
    /// The steps, in number or order; each with the ranks that have it.
    pub steps: Vec<JobStep>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStep {
    pub index: u64,
    /// The step's name on the lowest rank that has it.
    pub name: String,
    pub ranks: u64,
    pub slowest_rank: u32,
    pub slowest_ns: Ns,
    pub fastest_rank: u32,
    pub fastest_ns: Ns,
    /// slowest − fastest.
    pub spread_ns: Ns,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCollectives {
    /// Calls found on at least two ranks (skew and wait count these).
    pub matched: u64,
    /// Of those, calls found on fewer ranks than their group's size.
    pub partial: u64,
    /// Calls found on one rank only.
    pub unmatched: u64,
    /// Arrival skew over the matched calls: nearest-rank median, maximum, and the sum.
    pub skew_median_ns: Option<Ns>,
    pub skew_max_ns: Option<Ns>,
    pub skew_total_ns: Ns,
    /// Per process group (`null`: NCCL kernels without annotation).
    pub groups: Vec<GroupSkew>,
    /// The matched calls with the largest skew, largest first (`top` of them).
    pub largest: Vec<CollectiveSkew>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupSkew {
    pub group: Option<String>,
    pub desc: Option<String>,
    pub size: Option<u32>,
    /// `seq` (the trace's sequence numbers) or `order` (order within the group).
    pub matched_by: &'static str,
    pub calls: u64,
    pub skew_max_ns: Ns,
    pub skew_total_ns: Ns,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollectiveSkew {
    pub group: Option<String>,
    /// The group's sequence number, or null when matched by order.
    pub seq: Option<u64>,
    /// 0-based position of the call in its group (on the first rank listed).
    pub order: u64,
    pub name: String,
    pub ranks: u64,
    pub first_rank: u32,
    pub last_rank: u32,
    pub first_start_ns: Ns,
    pub last_start_ns: Ns,
    pub skew_ns: Ns,
}

/// The largest world size whose missing ranks are listed (a million ranks).
const MAX_WORLD_LISTED: u32 = 1 << 20;

/// Joins the ranks' summaries. `top` bounds `collectives.largest`. Never fails: dead, missing,
/// duplicate and unnumbered ranks are reported in the result.
pub fn from_summaries(summaries: &[RankSummary], top: usize) -> JobReport {
    let mut notes = Vec::new();
    let numbered = number_ranks(summaries, &mut notes);
    let mut dead_ranks = Vec::new();
    let mut live: Vec<(u32, &'static str, &RankSummary)> = Vec::new();
    for (rank, from, s) in numbered {
        match &s.dead {
            Some(why) => dead_ranks.push(DeadRank {
                rank,
                paths: s.paths.clone(),
                reason: why.clone(),
            }),
            None => live.push((rank, from, s)),
        }
    }
    let world_size = summaries.iter().filter_map(|s| s.world_size).max();
    let found: BTreeSet<u32> = live
        .iter()
        .map(|l| l.0)
        .chain(dead_ranks.iter().map(|d| d.rank))
        .collect();
    // A world size is what a trace says: one beyond any job (a damaged or hostile value) is not
    // enumerated, which would take minutes and gigabytes.
    let listed = match world_size {
        Some(n) if n > MAX_WORLD_LISTED => {
            notes.push(JobNote::WorldTooLarge { world_size: n });
            0
        }
        n => n.unwrap_or(0),
    };
    let missing_ranks: Vec<u32> = (0..listed).filter(|r| !found.contains(r)).collect();
    for (rank, _, s) in &live {
        if s.data_loss.any() {
            notes.push(JobNote::RankLostData {
                rank: *rank,
                losses: s.data_loss.clone(),
            });
        }
        if !s.complete {
            notes.push(JobNote::RankIncomplete {
                rank: *rank,
                reason: s.incomplete_reason.clone(),
            });
        }
    }
    if !live.is_empty() && live.iter().all(|l| l.2.comm_kernels == 0) {
        notes.push(JobNote::NoNcclKernels);
    }
    let (collectives, wait, end_offsets) = collectives(&live, top, &mut notes);
    let ranks: Vec<JobRank> = live
        .iter()
        .enumerate()
        .map(|(i, (rank, from, s))| job_rank(*rank, from, s, wait[i]))
        .collect();
    let steps = job_steps(&live);
    let lost = (dead_ranks.len() as u64, missing_ranks.len() as u64);
    let summary = job_summary(&ranks, lost, &steps, &collectives);
    JobReport {
        schema_version: JOB_SCHEMA_VERSION,
        kind: "job",
        world_size,
        ranks_found: found.len() as u64,
        missing_ranks,
        dead_ranks,
        clock: clock_info(&live, end_offsets),
        ranks,
        steps,
        collectives,
        notes,
        summary,
    }
}

/// Every summary's rank, by rank: unknown ranks get the lowest numbers no other summary has, in
/// input order; a second summary of one rank is left out. Each case is noted.
fn number_ranks<'a>(
    summaries: &'a [RankSummary],
    notes: &mut Vec<JobNote>,
) -> Vec<(u32, &'static str, &'a RankSummary)> {
    // rank → its index in `out`
    let mut taken: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: Vec<(u32, &'static str, &RankSummary)> = Vec::new();
    let mut unknown = Vec::new();
    for s in summaries {
        let Some(r) = s.rank else {
            unknown.push(s);
            continue;
        };
        let from = match s.rank_from {
            RankFrom::FileName => "file_name",
            _ => "trace",
        };
        if let Some(&i) = taken.get(&r) {
            // A live trace of the rank wins over a dead one (an empty copy beside the real
            // trace), whatever their order; else the first is kept.
            let first = out[i].2;
            let (kept, left) = if first.dead.is_some() && s.dead.is_none() {
                out[i] = (r, from, s);
                (s, first)
            } else {
                (first, s)
            };
            notes.push(JobNote::DuplicateRank {
                rank: r,
                left_out: left.paths.clone(),
                kept: kept.paths.clone(),
            });
            continue;
        }
        taken.insert(r, out.len());
        out.push((r, from, s));
    }
    let mut next = 0u32;
    for s in unknown {
        while taken.contains_key(&next) {
            next += 1;
        }
        taken.insert(next, out.len());
        notes.push(JobNote::NumberedByOrder {
            paths: s.paths.clone(),
            rank: next,
        });
        out.push((next, "input_order", s));
    }
    out.sort_by_key(|o| o.0);
    out
}

fn job_rank(rank: u32, from: &'static str, s: &RankSummary, wait_ns: Ns) -> JobRank {
    let mut durations: Vec<Ns> = s.steps.iter().map(|x| x.duration_ns).collect();
    durations.sort_unstable();
    JobRank {
        rank,
        rank_from: from,
        host: s.host.clone(),
        pid: s.pid,
        paths: s.paths.clone(),
        complete: s.complete,
        incomplete_reason: s.incomplete_reason.clone(),
        data_loss: s.data_loss.clone(),
        devices: s.devices.iter().map(|d| d.device).collect(),
        kernels: s.kernels,
        window_ns: s.window_ns,
        busy_ns: s.busy_ns,
        busy_pct: pct(s.busy_ns, s.window_ns),
        compute_ns: s.busy_ns.saturating_sub(s.exposed_comm_ns),
        comm_ns: s.comm_ns,
        exposed_comm_ns: s.exposed_comm_ns,
        hidden_comm_pct: (s.comm_ns > 0)
            .then(|| pct(s.comm_ns.saturating_sub(s.exposed_comm_ns), s.comm_ns)),
        wait_ns,
        idle_ns: s.idle_ns,
        idle_before_launch_ns: s.idle_before_launch_ns,
        idle_after_launch_ns: s.idle_after_launch_ns,
        idle_unknown_ns: s.idle_unknown_ns,
        steps: durations.len() as u64,
        step_median_ns: (!durations.is_empty())
            .then(|| durations[nearest_rank(durations.len(), 500) - 1]),
        step_max_ns: durations.last().copied(),
        collectives: s.collectives.len() as u64,
    }
}

/// `end_offsets`: per live rank (by index), its collectives' ends minus their calls' median ends.
fn clock_info(live: &[(u32, &'static str, &RankSummary)], end_offsets: Vec<Vec<i64>>) -> ClockInfo {
    let hosts: BTreeSet<String> = live.iter().filter_map(|l| l.2.host.clone()).collect();
    let without = live.iter().filter(|l| l.2.host.is_none()).count() as u64;
    let hosts: Vec<String> = hosts.into_iter().collect();
    let alignment = match (hosts.len(), without) {
        (1, 0) => "one_host",
        (n, _) if n > 1 => "several_hosts",
        _ => "unknown",
    };
    let mut offsets: Vec<ClockOffset> = live
        .iter()
        .zip(end_offsets)
        .filter(|(_, d)| !d.is_empty())
        .map(|(l, mut d)| {
            d.sort_unstable();
            ClockOffset {
                rank: l.0,
                offset_ns: d[(d.len() - 1) / 2],
                calls: d.len() as u64,
            }
        })
        .collect();
    offsets.sort_by_key(|o| o.rank);
    let offset_max_ns = offsets.iter().map(|o| o.offset_ns.unsigned_abs()).max();
    ClockInfo {
        hosts,
        ranks_without_host: without,
        alignment,
        offsets,
        offset_max_ns,
    }
}

fn job_steps(live: &[(u32, &'static str, &RankSummary)]) -> JobSteps {
    let matched = live
        .iter()
        .map(|l| l.2.steps_matched.clone())
        .find(|m| !m.is_empty())
        .unwrap_or_default();
    // Ranks need not trace the same steps (an on-demand trace starts at the next step on each
    // rank): torch's `ProfilerStep#N` names say which step each is.
    let numbers: Option<Vec<Vec<u64>>> = live
        .iter()
        .map(|l| {
            let n: Option<Vec<u64>> = l.2.steps.iter().map(|st| step_number(&st.name)).collect();
            n.filter(|n| {
                let mut d = n.clone();
                d.sort_unstable();
                d.dedup();
                d.len() == n.len()
            })
        })
        .collect();
    let matched_by = if numbers.is_some() { "number" } else { "order" };
    // key → (rank, step) in rank order
    let mut by_key: BTreeMap<u64, Vec<(u32, &RankStep)>> = BTreeMap::new();
    for (i, (rank, _, s)) in live.iter().enumerate() {
        for (k, st) in s.steps.iter().enumerate() {
            let key = numbers.as_ref().map_or(k as u64, |n| n[i][k]);
            by_key.entry(key).or_default().push((*rank, st));
        }
    }
    let steps = by_key
        .into_values()
        .enumerate()
        .map(|(k, on)| {
            let mut slow: Option<(Ns, u32)> = None;
            let mut fast: Option<(Ns, u32)> = None;
            for (rank, st) in &on {
                // Ties: the lower rank (live is in rank order).
                if slow.is_none_or(|(d, _)| st.duration_ns > d) {
                    slow = Some((st.duration_ns, *rank));
                }
                if fast.is_none_or(|(d, _)| st.duration_ns < d) {
                    fast = Some((st.duration_ns, *rank));
                }
            }
            let (slow, fast) = (slow.unwrap_or_default(), fast.unwrap_or_default());
            JobStep {
                index: k as u64 + 1,
                name: on.first().map(|o| o.1.name.clone()).unwrap_or_default(),
                ranks: on.len() as u64,
                slowest_rank: slow.1,
                slowest_ns: slow.0,
                fastest_rank: fast.1,
                fastest_ns: fast.0,
                spread_ns: slow.0 - fast.0,
            }
        })
        .collect();
    JobSteps {
        matched,
        matched_by,
        steps,
    }
}

/// The N of a step named `…#N` (`ProfilerStep#12`).
pub(crate) fn step_number(name: &str) -> Option<u64> {
    let (_, n) = name.rsplit_once('#')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// A call's key across ranks: its group, its sequence number or its order in the group, and
/// which of the rank's calls with that number it is (torch gives the operations of one
/// coalesced call, and point-to-point operations, numbers that other calls of the group also
/// have): the k-th call numbered n on one rank is the k-th numbered n on every rank.
pub(crate) type CallKey = (Option<String>, bool, u64, u64);

/// Each of a rank's arrivals' [`CallKey`], in their order.
pub(crate) fn call_keys(arrivals: &[crate::job::Arrival]) -> Vec<CallKey> {
    // (group, seq) → calls of this rank seen with it so far
    let mut seen: BTreeMap<(Option<String>, u64), u64> = BTreeMap::new();
    arrivals
        .iter()
        .map(|a| match a.seq {
            Some(seq) => {
                let k = seen.entry((a.group.clone(), seq)).or_default();
                *k += 1;
                (a.group.clone(), true, seq, *k - 1)
            }
            None => (a.group.clone(), false, a.order, 0),
        })
        .collect()
}

/// The collectives' skews, and each live rank's wait (indexed like `live`).
/// One rank's arrival at a call: (rank index, kernel start, order, name, kernel end).
type CallArrival<'a> = (usize, Ns, u64, &'a str, Ns);

fn collectives(
    live: &[(u32, &'static str, &RankSummary)],
    top: usize,
    notes: &mut Vec<JobNote>,
) -> (JobCollectives, Vec<Ns>, Vec<Vec<i64>>) {
    // key → (rank index, start, order, name, end)
    let mut calls: BTreeMap<CallKey, Vec<CallArrival<'_>>> = BTreeMap::new();
    // group → (desc, size)
    let mut group_facts: BTreeMap<Option<String>, (Option<String>, Option<u32>)> = BTreeMap::new();
    let mut shared_seq = 0u64;
    for (i, (_, _, s)) in live.iter().enumerate() {
        for (a, key) in s.collectives.iter().zip(call_keys(&s.collectives)) {
            if key.1 && key.3 == 1 {
                shared_seq += 1;
            }
            calls
                .entry(key)
                .or_default()
                .push((i, a.start_ns, a.order, &a.name, a.end_ns));
            let f = group_facts.entry(a.group.clone()).or_default();
            f.0 = f.0.take().or(a.group_desc.clone());
            f.1 = f.1.or(a.group_size);
        }
    }
    let mut wait = vec![0 as Ns; live.len()];
    let mut end_offsets: Vec<Vec<i64>> = vec![Vec::new(); live.len()];
    let mut ends: Vec<Ns> = Vec::new();
    let (mut matched, mut partial, mut unmatched) = (0u64, 0u64, 0u64);
    let mut skews: Vec<Ns> = Vec::new();
    let mut largest: Vec<CollectiveSkew> = Vec::new();
    let mut groups: BTreeMap<Option<String>, GroupSkew> = BTreeMap::new();
    let mut names_differ = 0u64;
    for ((group, by_seq, n, _), arr) in &calls {
        if arr.len() < 2 {
            unmatched += 1;
            continue;
        }
        matched += 1;
        let facts = group_facts.get(group).cloned().unwrap_or_default();
        if facts
            .1
            .is_some_and(|size| (arr.len() as u64) < u64::from(size))
        {
            partial += 1;
        }
        if arr.iter().any(|a| a.3 != arr[0].3) {
            names_differ += 1;
        }
        // Ties: the lower rank first (arr is in rank order).
        let first = arr.iter().min_by_key(|a| a.1).copied().unwrap_or(arr[0]);
        let last = arr
            .iter()
            .rev()
            .max_by_key(|a| a.1)
            .copied()
            .unwrap_or(arr[0]);
        for a in arr {
            wait[a.0] = wait[a.0].saturating_add(last.1 - a.1);
        }
        ends.clear();
        ends.extend(arr.iter().map(|a| a.4));
        ends.sort_unstable();
        let mid = ends[(ends.len() - 1) / 2];
        for a in arr {
            let d = i128::from(a.4) - i128::from(mid);
            end_offsets[a.0].push(d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64);
        }
        let skew = last.1 - first.1;
        skews.push(skew);
        let g = groups.entry(group.clone()).or_insert_with(|| GroupSkew {
            group: group.clone(),
            desc: facts.0.clone(),
            size: facts.1,
            matched_by: if *by_seq { "seq" } else { "order" },
            calls: 0,
            skew_max_ns: 0,
            skew_total_ns: 0,
        });
        g.calls += 1;
        g.skew_max_ns = g.skew_max_ns.max(skew);
        g.skew_total_ns = g.skew_total_ns.saturating_add(skew);
        largest.push(CollectiveSkew {
            group: group.clone(),
            seq: by_seq.then_some(*n),
            order: arr[0].2,
            name: arr[0].3.to_owned(),
            ranks: arr.len() as u64,
            first_rank: live[first.0].0,
            last_rank: live[last.0].0,
            first_start_ns: first.1,
            last_start_ns: last.1,
            skew_ns: skew,
        });
    }
    if let Some(g) = groups.get(&None) {
        notes.push(JobNote::MatchedByOrder { calls: g.calls });
    }
    if names_differ > 0 {
        notes.push(JobNote::NamesDiffer {
            collectives: names_differ,
        });
    }
    if shared_seq > 0 {
        notes.push(JobNote::SharedSequence {
            numbers: shared_seq,
        });
    }
    if unmatched > 0 {
        notes.push(JobNote::Unmatched { calls: unmatched });
    }
    largest.sort_by(|a, b| {
        b.skew_ns
            .cmp(&a.skew_ns)
            .then_with(|| (&a.group, a.seq, a.order).cmp(&(&b.group, b.seq, b.order)))
    });
    largest.truncate(top);
    let skew_total_ns = skews.iter().fold(0, |t: Ns, &s| t.saturating_add(s));
    skews.sort_unstable();
    let out = JobCollectives {
        matched,
        partial,
        unmatched,
        skew_median_ns: (!skews.is_empty()).then(|| skews[nearest_rank(skews.len(), 500) - 1]),
        skew_max_ns: skews.last().copied(),
        skew_total_ns,
        groups: groups.into_values().collect(),
        largest,
    };
    (out, wait, end_offsets)
}

impl JobReport {
    /// [`from_summaries`], as a constructor.
    pub fn from_summaries(summaries: &[RankSummary], top: usize) -> JobReport {
        from_summaries(summaries, top)
    }
}

/// The verdict of a job whose live ranks are `ranks` (by rank), with `dead` dead ranks and
/// `missing` missing ones.
fn job_summary(
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
        busy_pct: crate::summary::pct(busy_ns, window_ns),
        compute_ns,
        compute_pct: crate::summary::pct(compute_ns, window_ns),
        comm_ns,
        comm_pct: crate::summary::pct(comm_ns, window_ns),
        exposed_comm_ns,
        exposed_comm_pct: crate::summary::pct(exposed_comm_ns, window_ns),
        idle_ns,
        idle_pct: crate::summary::pct(idle_ns, window_ns),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::RankFrom;
    use crate::steps::StepMatch;
    use cutrace_testkit::records::{complete_trace, host_range, kernel, launch};
    use cutrace_trace::{Collective, Distributed, Interner, Trace};

    const AR: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

    /// One rank: a gemm on stream 7 over [t, t+1000), an all-reduce on stream 20 from
    /// t + 800 + late to t + 1500 (its first 200 ns hidden behind the gemm when late = 0), a
    /// step over [t, t + 1600 + late), annotated as group "0" call `seq` when `seq` is set.
    fn rank(r: u32, late: Ns, seq: Option<u64>, annotate: bool) -> Trace {
        let mut i = Interner::new();
        let t = 10_000;
        let ks = vec![
            kernel(&mut i, "gemm", 0, 7, 1, t, t + 1_000),
            kernel(&mut i, AR, 0, 20, 2, t + 800 + late, t + 1_500 + late),
        ];
        let calls = vec![
            launch(&mut i, 1, t - 100, t - 50),
            launch(&mut i, 2, t, t + 10),
        ];
        let mut tr = complete_trace(i, ks, calls);
        let mut i = Interner::from_strings(std::mem::take(&mut tr.strings));
        tr.ranges
            .push(host_range(&mut i, "ProfilerStep#1", t, t + 1_600 + late));
        if annotate {
            tr.collectives.push(Collective {
                correlation_id: 2,
                device: 0,
                name: i.intern("allreduce"),
                group_name: Some(i.intern("0")),
                group_desc: Some(i.intern("default_pg")),
                group_size: Some(3),
                seq,
                in_nelems: Some(1024),
                out_nelems: Some(1024),
                dtype: Some(i.intern("Float")),
            });
        }
        tr.strings = i.into_strings();
        tr.meta.distributed = Some(Distributed {
            rank: Some(r),
            world_size: Some(4),
            ..Distributed::default()
        });
        tr.meta.paths = vec![format!("rank{r}.json")];
        tr
    }

    fn summary(t: &Trace) -> RankSummary {
        RankSummary::from_trace(t, (None, RankFrom::Unknown), &StepMatch::profiler_steps()).unwrap()
    }

    #[test]
    fn busy_comm_exposed_wait_skew_and_steps() {
        let s: Vec<RankSummary> = [(0, 0), (1, 300), (2, 50)]
            .iter()
            .map(|&(r, late)| summary(&rank(r, late, None, true)))
            .collect();
        // Rank 0: busy [t, t+1500) = 1500; comm 700, of which 200 under the gemm.
        assert_eq!(
            (s[0].busy_ns, s[0].comm_ns, s[0].exposed_comm_ns),
            (1_500, 700, 500)
        );
        // Rank 1: the all-reduce starts at t+1100, after the gemm: all exposed, and a gap.
        assert_eq!(
            (s[1].busy_ns, s[1].comm_ns, s[1].exposed_comm_ns),
            (1_700, 700, 700)
        );
        assert_eq!(s[1].idle_ns, 100);
        let j = from_summaries(&s, 10);
        assert_eq!(j.world_size, Some(4));
        assert_eq!(j.missing_ranks, vec![3]);
        let wait: Vec<Ns> = j.ranks.iter().map(|r| r.wait_ns).collect();
        assert_eq!(wait, vec![300, 0, 250]);
        assert_eq!(j.collectives.matched, 1);
        assert_eq!(j.collectives.partial, 0);
        let c = &j.collectives.largest[0];
        assert_eq!((c.first_rank, c.last_rank, c.skew_ns), (0, 1, 300));
        assert_eq!(c.name, "allreduce");
        assert_eq!(j.collectives.groups[0].matched_by, "order");
        let st = &j.steps.steps[0];
        assert_eq!((st.slowest_rank, st.slowest_ns), (1, 1_900));
        assert_eq!((st.fastest_rank, st.spread_ns), (0, 300));
        assert_eq!(j.ranks[0].hidden_comm_pct.map(|p| p.round()), Some(29.0));
        assert_eq!(j.clock.alignment, "unknown");
    }

    #[test]
    fn matching_falls_back_to_kernels_and_prefers_seq() {
        // No annotations: the NCCL kernels themselves, by order.
        let s: Vec<RankSummary> = [(0, 0), (1, 40)]
            .iter()
            .map(|&(r, late)| summary(&rank(r, late, None, false)))
            .collect();
        assert_eq!(s[0].collectives_from, "kernels");
        assert_eq!(s[0].collectives[0].name, "AllReduce");
        let j = from_summaries(&s, 10);
        assert_eq!(j.collectives.largest[0].skew_ns, 40);
        assert_eq!(j.collectives.groups[0].group, None);
        assert!(
            j.notes.contains(&JobNote::MatchedByOrder { calls: 1 }),
            "{:?}",
            j.notes
        );
        // Sequence numbers that differ are different calls, whatever their order.
        let s: Vec<RankSummary> = [(0, 0, 5), (1, 40, 6)]
            .iter()
            .map(|&(r, late, q)| summary(&rank(r, late, Some(q), true)))
            .collect();
        let j = from_summaries(&s, 10);
        assert_eq!((j.collectives.matched, j.collectives.unmatched), (0, 2));
        assert!(j.ranks.iter().all(|r| r.wait_ns == 0));
    }

    #[test]
    fn calls_sharing_a_sequence_number_pair_up_by_their_order() {
        // Rank 0 has a second call numbered 5 in group "0" (a coalesced or point-to-point
        // operation) that rank 1 lacks: it is unmatched, not rank 0 waiting for itself.
        let mut s: Vec<RankSummary> = [(0, 0), (1, 300)]
            .iter()
            .map(|&(r, late)| summary(&rank(r, late, Some(5), true)))
            .collect();
        let mut extra = s[0].collectives[0].clone();
        extra.start_ns += 50_000;
        extra.end_ns += 50_000;
        s[0].collectives.push(extra);
        let j = from_summaries(&s, 10);
        assert_eq!((j.collectives.matched, j.collectives.unmatched), (1, 1));
        let wait: Vec<Ns> = j.ranks.iter().map(|r| r.wait_ns).collect();
        assert_eq!(wait, vec![300, 0]);
        assert_eq!(j.collectives.skew_max_ns, Some(300));
        assert_eq!(j.collectives.largest[0].ranks, 2);
        assert!(
            j.notes.contains(&JobNote::SharedSequence { numbers: 1 }),
            "{:?}",
            j.notes
        );
    }

    #[test]
    fn a_ranks_data_loss_is_reported() {
        let mut t = rank(0, 0, None, true);
        t.meta.dropped_by_cupti = 7;
        t.meta.source_drops = vec![("Out-of-range".into(), 4181), ("Blocklisted".into(), 0)];
        let s = vec![summary(&t), summary(&rank(1, 0, None, true))];
        let lost = RankLosses {
            dropped_by_cupti: 7,
            profiler_own: vec![("Out-of-range".into(), 4181)],
            ..RankLosses::default()
        };
        assert_eq!(s[0].data_loss, lost);
        assert!(!s[1].data_loss.any());
        let j = from_summaries(&s, 10);
        assert_eq!(j.ranks[0].data_loss, s[0].data_loss);
        assert!(j.notes.contains(&JobNote::RankLostData {
            rank: 0,
            losses: lost
        }));
    }

    #[test]
    fn steps_pair_up_by_their_profiler_step_number() {
        // Rank 1's trace starts a step later (an on-demand trace starts at the next step on
        // each rank): its ProfilerStep#2 pairs with rank 0's #2, not with its #1.
        let step = |name: &str, d: Ns| RankStep {
            name: name.into(),
            start_ns: 0,
            end_ns: d,
            duration_ns: d,
            busy_ns: 0,
        };
        let mut a = summary(&rank(0, 0, None, true));
        let mut b = summary(&rank(1, 0, None, true));
        a.steps = vec![step("ProfilerStep#1", 100), step("ProfilerStep#2", 200)];
        b.steps = vec![step("ProfilerStep#2", 260), step("ProfilerStep#3", 300)];
        let j = from_summaries(&[a.clone(), b.clone()], 10);
        assert_eq!(j.steps.matched_by, "number");
        let got: Vec<(String, u64, u32, Ns)> = j
            .steps
            .steps
            .iter()
            .map(|s| (s.name.clone(), s.ranks, s.slowest_rank, s.spread_ns))
            .collect();
        assert_eq!(
            got,
            vec![
                ("ProfilerStep#1".into(), 1, 0, 0),
                ("ProfilerStep#2".into(), 2, 1, 60),
                ("ProfilerStep#3".into(), 1, 1, 0),
            ]
        );
        // Names without a number (NVTX `train_step`): by order.
        b.steps[0].name = "train_step".into();
        let j = from_summaries(&[a, b], 10);
        assert_eq!(j.steps.matched_by, "order");
        assert_eq!(j.steps.steps.len(), 2);
        assert_eq!(j.steps.steps[1].spread_ns, 100);
        assert_eq!(step_number("ProfilerStep#12"), Some(12));
        assert_eq!(step_number("ProfilerStep#"), None);
        assert_eq!(step_number("step#-1"), None);
    }

    #[test]
    fn a_world_size_beyond_any_job_is_not_enumerated() {
        let mut s = summary(&rank(0, 0, None, true));
        s.world_size = Some(u32::MAX);
        let j = from_summaries(&[s], 10);
        assert!(j.missing_ranks.is_empty());
        assert!(j.notes.contains(&JobNote::WorldTooLarge {
            world_size: u32::MAX
        }));
    }

    #[test]
    fn a_summary_whose_figures_disagree_is_told() {
        let mut s = summary(&rank(0, 0, None, true));
        assert_eq!(s.check(), Ok(()));
        s.exposed_comm_ns = s.comm_ns + 1;
        assert!(s.check().unwrap_err().contains("exposed_comm_ns"));
        // The reduce itself does not panic on such a summary.
        let j = from_summaries(&[s], 10);
        assert_eq!(j.ranks[0].hidden_comm_pct, Some(0.0));
    }

    #[test]
    fn dead_duplicate_and_unnumbered_ranks_are_reported_not_fatal() {
        let mut s = vec![summary(&rank(0, 0, None, true))];
        s.push(RankSummary::dead(
            Some(2),
            RankFrom::FileName,
            vec!["rank2.json".into()],
            DeadReason::Unreadable {
                error: "the file is empty".into(),
            },
        ));
        s.push(summary(&rank(0, 10, None, true)));
        let mut anon = rank(9, 0, None, true);
        anon.meta.distributed = None;
        s.push(summary(&anon));
        let empty = Trace::default();
        s.push(summary(&empty));
        let j = from_summaries(&s, 10);
        assert_eq!(j.dead_ranks.len(), 2);
        assert_eq!(j.dead_ranks[0].rank, 2);
        // The anonymous live rank takes 1, the empty trace 3.
        assert_eq!(
            j.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(j.ranks[1].rank_from, "input_order");
        assert_eq!(j.dead_ranks[1].rank, 3);
        assert!(j
            .notes
            .iter()
            .any(|n| matches!(n, JobNote::DuplicateRank { rank: 0, .. })));
        // A dead copy of a rank listed first does not shadow its live trace.
        let live = summary(&rank(5, 0, None, true));
        let dead = RankSummary::dead(
            Some(5),
            RankFrom::FileName,
            vec!["rank5.json".into()],
            DeadReason::Unreadable {
                error: "the file is empty".into(),
            },
        );
        let k = from_summaries(&[dead, live], 10);
        assert_eq!(k.ranks.len(), 1);
        assert!(k.dead_ranks.is_empty());
        assert!(k.notes.contains(&JobNote::DuplicateRank {
            rank: 5,
            left_out: vec!["rank5.json".into()],
            kept: vec!["rank5.json".into()]
        }));
        assert!(j.missing_ranks.is_empty());
        // A summary survives JSON both ways.
        let text = serde_json::to_string(&s[0]).unwrap();
        assert!(text.starts_with("{\"cutrace_rank_summary\":3,"));
        let back: RankSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s[0]);
    }

    proptest::proptest! {
        /// Record order and summary order do not matter: CUPTI's buffers are unordered, and the
        /// ranks' summaries arrive as their threads finish.
        #[test]
        fn order_of_records_and_of_summaries_does_not_matter(
            lates in proptest::collection::vec(0u64..2_000, 2..6),
            seed in 0u64..1_000,
        ) {
            let traces: Vec<Trace> = lates
                .iter()
                .enumerate()
                .map(|(r, &late)| rank(r as u32, late, None, r % 2 == 0))
                .collect();
            let base: Vec<RankSummary> = traces.iter().map(summary).collect();
            let want = from_summaries(&base, 10);
            // A cheap deterministic shuffle: rotate and reverse by the seed.
            let mut shuffled: Vec<RankSummary> = traces
                .into_iter()
                .map(|mut t| {
                    t.kernels.reverse();
                    t.kernels.rotate_left(seed as usize % 2);
                    summary(&t)
                })
                .collect();
            shuffled.rotate_left(seed as usize % lates.len());
            if seed % 2 == 1 {
                shuffled.reverse();
            }
            proptest::prop_assert_eq!(from_summaries(&shuffled, 10), want);
        }
    }

    #[test]
    fn a_rank_on_two_gpus_sums_their_unions() {
        let mut t = rank(0, 0, None, false);
        let mut i = Interner::from_strings(std::mem::take(&mut t.strings));
        // GPU 1: an all-reduce alone (all exposed) and a gemm inside another one (hidden).
        t.kernels
            .push(kernel(&mut i, AR, 1, 20, 10, 50_000, 51_000));
        t.kernels
            .push(kernel(&mut i, AR, 1, 20, 11, 60_000, 61_000));
        t.kernels
            .push(kernel(&mut i, "gemm", 1, 7, 12, 59_000, 62_000));
        t.strings = i.into_strings();
        let s = summary(&t);
        assert_eq!(s.devices.len(), 2);
        assert_eq!(s.devices[1].comm_ns, 2_000);
        assert_eq!(s.devices[1].exposed_comm_ns, 1_000);
        assert_eq!(s.devices[1].busy_ns, 4_000);
        assert_eq!(s.busy_ns, 1_500 + 4_000);
        assert_eq!(s.exposed_comm_ns, 500 + 1_000);
    }
}
