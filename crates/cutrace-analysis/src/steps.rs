//! Steps: the repeated host ranges that mark a program's iterations (torch.profiler's
//! `ProfilerStep#N`, or any NVTX / `record_function` range a user names), each with how busy its
//! GPUs were during it. Step-to-step variation (a slow step every N: checkpointing, garbage
//! collection, a data-loader stall) is what a whole-trace busy figure hides.
//!
//! A step's GPU busy time is the union of its process's kernel intervals on that device, clipped
//! to the step's host interval: what the GPU did while the step ran, whichever step launched it.
//! Devices are never unioned with each other. In a trace merged from several processes, a step
//! counts only the kernels of the process that recorded it. Every step counts for every GPU its
//! process ran kernels on anywhere in the trace, at 0 % when the GPU did nothing during it: the
//! idle step is the one to find.
//!
//! Left out, and counted: steps of zero length, steps inside another matching step of the same
//! process (a nested or repeated annotation would count its GPU work twice), and steps the time
//! window cuts (a cut step's length is not a step time).

use std::collections::BTreeMap;

use cutrace_trace::{Ns, RangeDomain, Trace};
use serde::Serialize;

use crate::intervals::{merged_runs, BusyIndex};
use crate::percentile::nearest_rank;
use crate::summary::pct;
use crate::window::{clip, Window};

/// Which host ranges are steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepMatch {
    /// Ranges whose name starts with this (`ProfilerStep#` matches `ProfilerStep#12`).
    Prefix(String),
    /// Ranges with exactly this name.
    Exact(String),
}

impl StepMatch {
    /// torch.profiler's step annotations (`prof.step()`), the default.
    pub fn profiler_steps() -> Self {
        StepMatch::Prefix("ProfilerStep#".into())
    }

    /// `NAME*` is a prefix, anything else an exact name.
    pub fn parse(text: &str) -> Self {
        match text.strip_suffix('*') {
            Some(p) => StepMatch::Prefix(p.to_owned()),
            None => StepMatch::Exact(text.to_owned()),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            StepMatch::Prefix(p) => name.starts_with(p.as_str()),
            StepMatch::Exact(n) => name == n,
        }
    }

    /// As the user would write it: `ProfilerStep#*`, `train_step`.
    pub fn text(&self) -> String {
        match self {
            StepMatch::Prefix(p) => format!("{p}*"),
            StepMatch::Exact(n) => n.clone(),
        }
    }
}

/// Every step found, in time order, and a summary over them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steps {
    /// The names matched, as given: `ProfilerStep#*` (a prefix) or an exact name.
    pub matched: String,
    /// Steps kept (the list below).
    pub count: u64,
    /// Processes with steps.
    pub processes: u64,
    /// Matching ranges left out: zero-length ones, ones inside another matching range of the
    /// same process, and ones the time window cuts.
    pub zero_length_left_out: u64,
    pub nested_left_out: u64,
    pub cut_by_window_left_out: u64,
    /// Step durations (host range lengths), nearest-rank median, and the extremes; null when
    /// no step is kept.
    pub duration_min_ns: Option<Ns>,
    pub duration_median_ns: Option<Ns>,
    pub duration_max_ns: Option<Ns>,
    /// Per GPU: how busy it was during the steps of the processes that used it.
    pub devices: Vec<StepDeviceSummary>,
    /// Every step kept, by start time (then end, process, name).
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDeviceSummary {
    pub device: u32,
    /// Steps of the processes that ran kernels on this GPU (anywhere in the trace): each counts,
    /// at 0 % when the GPU did nothing during it.
    pub steps: u64,
    /// Of those, steps during which it ran none of the step's process's kernels.
    pub idle_steps: u64,
    /// Busy share of a step (busy / step duration), over those steps: nearest-rank median, min.
    pub busy_pct_median: f64,
    pub busy_pct_min: f64,
    /// Sum over the steps of the GPU's busy time in each.
    pub busy_ns: Ns,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// 1-based, in the order of the list.
    pub index: u64,
    pub name: String,
    /// The process that recorded the step.
    pub pid: u32,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// Kernels of the step's process that ran, at least partly, during the step.
    pub kernels: u64,
    /// Per GPU the step's process ran kernels on anywhere in the trace (0 when idle in it).
    pub devices: Vec<StepDevice>,
    /// Time of the step its process spent fetching batches: the union of its
    /// `enumerate(DataLoader)` host ops inside the step ([`crate::host_ops`]). Absent when the
    /// trace has no such op.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataloader_ns: Option<Ns>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDevice {
    pub device: u32,
    /// The union of the process's kernel intervals on this GPU, inside the step.
    pub busy_ns: Ns,
    /// `busy_ns` over the step's duration.
    pub busy_pct: f64,
}

/// A lane's key: the device, and the process in a merged trace (`None` otherwise).
type LaneKey = (u32, Option<u32>);

/// Kernels of one (device, process): their busy runs and sorted starts and ends (to count the
/// kernels overlapping an interval with two binary searches).
struct Lane {
    busy: BusyIndex,
    starts: Vec<Ns>,
    ends: Vec<Ns>,
}

impl Lane {
    /// Kernels with `start < e` and `end > s`: every kernel that started before `e`, less
    /// those that had ended by `s` (which all started before `e` too).
    fn kernels_in(&self, s: Ns, e: Ns) -> u64 {
        let started = self.starts.partition_point(|&x| x < e);
        let ended = self.ends.partition_point(|&x| x <= s);
        started.saturating_sub(ended) as u64
    }
}

/// The steps of `trace` that `which` selects, inside `window`; `None` when no host range
/// matches (inside the window, cut or not).
pub fn steps(trace: &Trace, window: Option<&Window>, which: &StepMatch) -> Option<Steps> {
    // Names are interned: test each distinct name once.
    let mut name_ok: BTreeMap<u32, bool> = BTreeMap::new();
    // (pid, start, end, name)
    let mut found: Vec<(u32, Ns, Ns, u32)> = Vec::new();
    let (mut zero, mut cut) = (0u64, 0u64);
    for r in &trace.ranges {
        if r.domain != RangeDomain::Host {
            continue;
        }
        let ok = *name_ok
            .entry(r.name)
            .or_insert_with(|| which.matches(trace.str(r.name)));
        if !ok {
            continue;
        }
        if r.end_ns <= r.start_ns {
            zero += 1;
            continue;
        }
        match clip(window, r.start_ns, r.end_ns) {
            Some((s, e)) if (s, e) == (r.start_ns, r.end_ns) => {
                found.push((r.process, s, e, r.name))
            }
            Some(_) => cut += 1,
            None => {}
        }
    }
    // Per process, by start, longest first: a range inside the last kept one is nested.
    found.sort_by(|a, b| (a.0, a.1, b.2).cmp(&(b.0, b.1, a.2)));
    let mut nested = 0u64;
    let mut kept: Vec<(u32, Ns, Ns, u32)> = Vec::with_capacity(found.len());
    for f in found {
        match kept.last() {
            Some(k) if k.0 == f.0 && f.2 <= k.2 => nested += 1,
            _ => kept.push(f),
        }
    }
    if kept.is_empty() && zero + nested + cut == 0 {
        return None;
    }
    kept.sort_by_key(|k| (k.1, k.2, k.0, k.3));
    let merged = trace.meta.id_parts.len() > 1;
    // Lanes by (device, pid): pid only in a merged trace, where steps see their own process. A
    // merged part without a known pid cannot be charged to anyone's steps.
    let mut lanes_iv: BTreeMap<LaneKey, Vec<(Ns, Ns)>> = BTreeMap::new();
    for k in &trace.kernels {
        let pid = if merged {
            match trace.meta.id_origin(k.stream).0 {
                Some(p) => Some(p),
                None => continue,
            }
        } else {
            None
        };
        lanes_iv
            .entry((k.device, pid))
            .or_default()
            .push((k.start_ns, k.end_ns.max(k.start_ns)));
    }
    let lanes: BTreeMap<LaneKey, Lane> = lanes_iv
        .into_iter()
        .map(|(key, mut iv)| {
            // merged_runs sorts the intervals by start: the starts come out sorted with them.
            let busy = BusyIndex::new(merged_runs(&mut iv));
            let starts: Vec<Ns> = iv.iter().map(|x| x.0).collect();
            let mut ends: Vec<Ns> = iv.iter().map(|x| x.1).collect();
            ends.sort_unstable();
            (key, Lane { busy, starts, ends })
        })
        .collect();

    // device → (busy shares, busy total, idle steps)
    let mut per_dev: BTreeMap<u32, (Vec<f64>, Ns, u64)> = BTreeMap::new();
    let mut processes: Vec<u32> = Vec::new();
    let rows: Vec<Step> = kept
        .into_iter()
        .enumerate()
        .map(|(i, (pid, s, e, name))| {
            processes.push(pid);
            let duration = e - s;
            let mut kernels = 0;
            let mut devices = Vec::new();
            for ((dev, lane_pid), lane) in &lanes {
                if lane_pid.is_some_and(|p| p != pid) {
                    continue;
                }
                let n = lane.kernels_in(s, e);
                kernels += n;
                let busy = lane.busy.busy_within(s, e);
                let busy_pct = pct(busy, duration);
                let acc = per_dev.entry(*dev).or_default();
                acc.0.push(busy_pct);
                acc.1 = acc.1.saturating_add(busy);
                acc.2 += u64::from(n == 0);
                devices.push(StepDevice {
                    device: *dev,
                    busy_ns: busy,
                    busy_pct,
                });
            }
            Step {
                index: i as u64 + 1,
                name: crate::names::held(trace.str(name)),
                pid,
                start_ns: s,
                end_ns: e,
                duration_ns: duration,
                kernels,
                devices,
                dataloader_ns: None,
            }
        })
        .collect();
    processes.sort_unstable();
    processes.dedup();
    let mut durations: Vec<Ns> = rows.iter().map(|r| r.duration_ns).collect();
    durations.sort_unstable();
    // nearest_rank is 1-based.
    let median_of = |n: usize| nearest_rank(n, 500) - 1;
    let devices = per_dev
        .into_iter()
        .map(|(device, (mut pcts, busy_ns, idle_steps))| {
            pcts.sort_by(f64::total_cmp);
            StepDeviceSummary {
                device,
                steps: pcts.len() as u64,
                idle_steps,
                busy_pct_median: pcts[median_of(pcts.len())],
                busy_pct_min: pcts[0],
                busy_ns,
            }
        })
        .collect();
    Some(Steps {
        matched: which.text(),
        count: rows.len() as u64,
        processes: processes.len() as u64,
        zero_length_left_out: zero,
        nested_left_out: nested,
        cut_by_window_left_out: cut,
        duration_min_ns: durations.first().copied(),
        duration_median_ns: (!durations.is_empty()).then(|| durations[median_of(durations.len())]),
        duration_max_ns: durations.last().copied(),
        devices,
        steps: rows,
    })
}
