//! The critical path across the ranks of a job ([`crate::critical_path`] joined over ranks). Each
//! rank's step graph is walked in the map step ([`rank_chains`]), cut at its communication kernels into chains: from the step's end back to
//! the first communication kernel on the path, and from each communication kernel's start back
//! to the next one. The reduce ([`job_path`]) joins them at the collectives, matched across ranks
//! as the job report matches them (process group and sequence number, else order in the group):
//! a collective ends when its last rank arrives, so where the path meets a collective that
//! another rank reached later, the time before that arrival is the other rank's, and the path
//! goes on along that rank's chain. Ranks' clocks are their hosts': a path across hosts carries
//! their offset (the job report's `clock` says whether the ranks share a host).

use std::collections::HashMap;

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::critical_path::graph::{Graph, Seg, SpanSel};
use crate::critical_path::index::Index;
use crate::critical_path::{
    runs_of, segment, Composition, Inferred, Kind, OpTime, PathRun, Recorded, Segment,
};
use crate::job::RankSummary;
use crate::job_reduce::{call_keys, step_number, CallKey};
use crate::steps::StepMatch;

/// One rank's chains, made while its trace is held.
#[derive(Debug, Clone, Default)]
pub struct RankChains {
    /// Each collective arrival's key across ranks, its name, and its kernel's start and end.
    arrivals: Vec<(CallKey, String, Ns, Ns)>,
    steps: Vec<StepChains>,
    /// What its steps' graphs inferred and took from records, summed over its steps.
    inferred: Inferred,
    recorded: Recorded,
}

#[derive(Debug, Clone)]
struct StepChains {
    name: String,
    start_ns: Ns,
    end_ns: Ns,
    from_end: Chain,
    /// Arrival index → the chain back from its kernel's start.
    from_arrival: HashMap<usize, Chain>,
}

/// Segments in time order; when `at` is set the first is the communication kernel of that
/// arrival, where the chain was cut.
#[derive(Debug, Clone, Default)]
struct Chain {
    segs: Vec<Segment>,
    at: Option<usize>,
}

/// The chains of `trace`'s steps (`which`), and its arrivals as `summary` lists them.
pub fn rank_chains(trace: &Trace, summary: &RankSummary, which: &StepMatch) -> RankChains {
    let keys = call_keys(&summary.collectives);
    let arrivals: Vec<(CallKey, String, Ns, Ns)> = summary
        .collectives
        .iter()
        .zip(keys)
        .map(|(a, k)| (k, a.name.clone(), a.start_ns, a.end_ns))
        .collect();
    let by_kernel: HashMap<(u32, Ns), usize> = summary
        .collectives
        .iter()
        .enumerate()
        .map(|(i, a)| ((a.device, a.start_ns), i))
        .collect();
    let Some(steps) = crate::steps::steps(trace, None, which) else {
        return RankChains {
            arrivals,
            ..RankChains::default()
        };
    };
    let ix = Index::new(trace);
    let mut out = Vec::new();
    let (mut inferred, mut recorded) = (Inferred::default(), Recorded::default());
    for st in &steps.steps {
        let sel = SpanSel {
            start_ns: st.start_ns,
            end_ns: st.end_ns,
            pid: Some(st.pid),
        };
        let mut step_inferred = Inferred::default();
        let (mut g, ends) = Graph::build(&ix, &sel, &mut step_inferred);
        inferred.add(&step_inferred);
        recorded.add(&g.recorded);
        let Some(&sink) = ends.0.get(&(st.start_ns, st.end_ns)) else {
            continue;
        };
        g.set_main(sink);
        let arrival_of = |seg: &Seg| -> Option<usize> {
            if seg.kind != Kind::Communication {
                return None;
            }
            let lane = &ix.streams[g.gpu_lanes[seg.lane as usize] as usize];
            let op = lane.ops[seg.op as usize];
            by_kernel.get(&(lane.device, op.start)).copied()
        };
        let chain = |from: u32| -> Chain {
            let (path, stopped) = g.walk_until(from, |s| arrival_of(s).is_some());
            let at = if stopped {
                path.first().and_then(|p| arrival_of(&p.seg))
            } else {
                None
            };
            Chain {
                segs: path.iter().map(|p| segment(&ix, &g, p)).collect(),
                at,
            }
        };
        let from_end = chain(sink);
        let mut from_arrival = HashMap::new();
        for gn in &g.gpu {
            let lane = &ix.streams[g.gpu_lanes[gn.lane as usize] as usize];
            let op = lane.ops[gn.op as usize];
            if op.start < st.start_ns || op.start > st.end_ns {
                continue;
            }
            if let Some(&a) = by_kernel.get(&(lane.device, op.start)) {
                from_arrival.insert(a, chain(gn.start));
            }
        }
        out.push(StepChains {
            name: st.name.clone(),
            start_ns: st.start_ns,
            end_ns: st.end_ns,
            from_end,
            from_arrival,
        });
    }
    RankChains {
        arrivals,
        steps: out,
        inferred,
        recorded,
    }
}

/// The job's critical path per step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobCriticalPath {
    /// `number` (`ProfilerStep#N`'s N on every rank) or `order`, as the job's steps.
    pub steps_matched_by: &'static str,
    /// Live ranks whose trace was not read here (a rank summary carries no chains): left out of
    /// every path.
    pub ranks_left_out: Vec<u32>,
    /// What the ranks' step graphs inferred, summed over the ranks and their steps (as the
    /// one-trace report's `critical_path.inferred`).
    pub inferred: Inferred,
    /// What they took from the traces' records, summed the same way.
    pub recorded: Recorded,
    pub steps: Vec<JobStepPath>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStepPath {
    /// 1-based, in step order.
    pub index: u64,
    pub name: String,
    /// The rank whose step ended last: the path starts from its step's end.
    pub end_rank: u32,
    /// The rank whose step's start the path reaches.
    pub start_rank: u32,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The sum of the segments.
    pub length_ns: Ns,
    pub segments: u64,
    pub composition: Composition,
    /// Where the path left a rank for the one it waited for, in time order.
    pub rank_waits: Vec<RankWait>,
    pub longest_segments: Vec<Segment>,
    /// The whole path in its order, neighbours of one kind merged (for the page's timeline;
    /// not in the JSON). Each rank's times are on its host's clock.
    #[serde(skip)]
    pub runs: Vec<PathRun>,
}

impl JobCriticalPath {
    /// The step whose path is longest (ties: the earlier step).
    pub fn slowest_step(&self) -> Option<&JobStepPath> {
        self.steps
            .iter()
            .max_by_key(|s| (s.length_ns, std::cmp::Reverse(s.index)))
    }
}

/// A rank on the path waiting at a collective for a rank that arrived later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankWait {
    pub rank: u32,
    pub waited_for_rank: u32,
    /// The collective (`allreduce`).
    pub op: String,
    /// The waiting rank's arrival (its kernel's start) and how long before the last one.
    pub at_ns: Ns,
    pub wait_ns: Ns,
}

/// Joins the ranks' chains (`(rank, chains)`, in rank order) into each step's path;
/// `left_out`: the live ranks without chains.
pub fn join(ranks: &[(u32, &RankChains)], left_out: Vec<u32>, top: usize) -> JobCriticalPath {
    // A collective's arrivals on every rank: key → (rank index, arrival index, start).
    let mut calls: HashMap<&CallKey, Vec<(usize, usize, Ns)>> = HashMap::new();
    for (ri, (_, c)) in ranks.iter().enumerate() {
        for (ai, a) in c.arrivals.iter().enumerate() {
            calls.entry(&a.0).or_default().push((ri, ai, a.2));
        }
    }
    let by_number = ranks
        .iter()
        .all(|(_, c)| c.steps.iter().all(|s| step_number(&s.name).is_some()));
    // step key → (rank index, step index)
    let mut steps: std::collections::BTreeMap<u64, Vec<(usize, usize)>> = Default::default();
    for (ri, (_, c)) in ranks.iter().enumerate() {
        for (si, s) in c.steps.iter().enumerate() {
            let key = if by_number {
                step_number(&s.name).unwrap_or(si as u64)
            } else {
                si as u64
            };
            steps.entry(key).or_default().push((ri, si));
        }
    }
    let out = steps
        .into_values()
        .enumerate()
        .filter_map(|(k, on)| step_path(ranks, &calls, &on, k as u64 + 1, top))
        .collect();
    let (mut inferred, mut recorded) = (Inferred::default(), Recorded::default());
    for (_, c) in ranks {
        inferred.add(&c.inferred);
        recorded.add(&c.recorded);
    }
    JobCriticalPath {
        steps_matched_by: if by_number { "number" } else { "order" },
        ranks_left_out: left_out,
        inferred,
        recorded,
        steps: out,
    }
}

fn step_path(
    ranks: &[(u32, &RankChains)],
    calls: &HashMap<&CallKey, Vec<(usize, usize, Ns)>>,
    on: &[(usize, usize)],
    index: u64,
    top: usize,
) -> Option<JobStepPath> {
    let step_of = |ri: usize| {
        on.iter()
            .find(|o| o.0 == ri)
            .map(|o| &ranks[ri].1.steps[o.1])
    };
    // Ties: the lower rank.
    let &(first, _) = on
        .iter()
        .max_by_key(|(ri, si)| (ranks[*ri].1.steps[*si].end_ns, std::cmp::Reverse(*ri)))?;
    let end_step = step_of(first)?;
    let (mut ri, mut chain) = (first, &end_step.from_end);
    let mut segs: Vec<Segment> = Vec::new();
    let mut waits: Vec<RankWait> = Vec::new();
    let mut start_ns = end_step.start_ns;
    let with_rank = |s: &Segment, r: u32| {
        let mut s = s.clone();
        s.place.rank = Some(r);
        s
    };
    for _ in 0..=calls.len() + 1 {
        let rank = ranks[ri].0;
        let body = if chain.at.is_some() {
            &chain.segs[1..]
        } else {
            &chain.segs[..]
        };
        segs.extend(body.iter().rev().map(|s| with_rank(s, rank)));
        start_ns = step_of(ri).map_or(start_ns, |s| s.start_ns);
        let Some(ai) = chain.at else { break };
        let Some(comm) = chain.segs.first() else {
            break;
        };
        let own = &ranks[ri].1.arrivals[ai];
        let last = calls.get(&own.0).and_then(|v| {
            v.iter()
                .max_by_key(|a| (a.2, std::cmp::Reverse(a.0)))
                .copied()
        });
        let next = match last {
            // Another rank arrived later, and before the collective ended here.
            Some((lri, lai, lstart))
                if lri != ri && lstart > comm.start_ns && lstart < comm.end_ns =>
            {
                let mut after = with_rank(comm, rank);
                after.start_ns = lstart;
                after.length_ns = after.end_ns - lstart;
                segs.push(after);
                waits.push(RankWait {
                    rank,
                    waited_for_rank: ranks[lri].0,
                    op: own.1.clone(),
                    at_ns: comm.start_ns,
                    wait_ns: lstart - comm.start_ns,
                });
                (lri, lai)
            }
            _ => {
                segs.push(with_rank(comm, rank));
                (ri, ai)
            }
        };
        ri = next.0;
        let Some(c) = step_of(ri).and_then(|s| s.from_arrival.get(&next.1)) else {
            break;
        };
        chain = c;
    }
    segs.reverse();
    waits.reverse();
    let length_ns = segs.iter().map(|s| s.length_ns).sum();
    let mut composition = compose(&segs, top);
    composition.rank_wait_ns = Some(waits.iter().map(|w| w.wait_ns).sum());
    let runs = runs_of(segs.iter().map(|s| (s.start_ns, s.end_ns, s.kind)));
    let mut longest: Vec<Segment> = segs.clone();
    longest.sort_by_key(|s| (std::cmp::Reverse(s.length_ns), s.start_ns));
    longest.truncate(top);
    Some(JobStepPath {
        index,
        name: end_step.name.clone(),
        end_rank: ranks[first].0,
        start_rank: ranks[ri].0,
        start_ns,
        end_ns: end_step.end_ns,
        length_ns,
        segments: segs.len() as u64,
        composition,
        rank_waits: waits,
        longest_segments: longest,
        runs,
    })
}

/// A composition of segments that already carry their names.
fn compose(segs: &[Segment], top: usize) -> Composition {
    let mut c = Composition::default();
    let mut ops: HashMap<&str, Ns> = HashMap::new();
    for s in segs {
        let d = s.length_ns;
        let slot = match s.kind {
            Kind::Host => {
                *ops.entry(&s.name).or_default() += d;
                &mut c.host_ns
            }
            Kind::Kernel => &mut c.compute_ns,
            Kind::Communication => &mut c.communication_ns,
            Kind::Copy | Kind::Memset => &mut c.copy_ns,
            Kind::Launch | Kind::Queue => &mut c.launch_ns,
            Kind::Sync => &mut c.sync_ns,
            Kind::StreamWait => &mut c.stream_wait_ns,
            Kind::Unexplained => &mut c.unexplained_ns,
        };
        *slot += d;
    }
    let mut ops: Vec<(&str, Ns)> = ops.into_iter().collect();
    ops.sort_by_key(|&(n, ns)| (std::cmp::Reverse(ns), n));
    c.host_ops = ops
        .into_iter()
        .take(top)
        .map(|(n, ns)| OpTime {
            name: n.to_owned(),
            ns,
        })
        .collect();
    c
}
