//! Steps: the repeated host ranges that mark a program's iterations (torch.profiler's
//! `ProfilerStep#N`, or any NVTX / `record_function` range a user names), each with how busy its
//! GPUs were during it. Step-to-step variation (a slow step every N: checkpointing, garbage
//! collection, a data-loader stall) is what a whole-trace busy figure hides.
//!
//! A step's GPU busy time is the union of its process's kernel intervals on that device, clipped
//! to the step's host interval: what the GPU did while the step ran, whichever step launched it.
//! Devices are never unioned with each other. In a trace merged from several processes, a step
//! counts only the kernels of the process that recorded it.

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
    pub count: u64,
    /// Processes with steps.
    pub processes: u64,
    /// Step durations (host range lengths), nearest-rank median, and the extremes.
    pub duration_min_ns: Ns,
    pub duration_median_ns: Ns,
    pub duration_max_ns: Ns,
    /// Per GPU: how busy it was during the steps (only GPUs some step saw busy).
    pub devices: Vec<StepDeviceSummary>,
    /// Every step, in start order (then process).
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDeviceSummary {
    pub device: u32,
    /// Steps during which this GPU ran kernels of the step's process.
    pub steps: u64,
    /// Busy share of a step (busy / step duration), over those steps: nearest-rank median, min.
    pub busy_pct_median: f64,
    pub busy_pct_min: f64,
    /// Sum over the steps of the GPU's busy time in each.
    pub busy_ns: Ns,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub name: String,
    /// The process that recorded the step.
    pub pid: u32,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// Kernels of the step's process that ran, at least partly, during the step.
    pub kernels: u64,
    /// Per GPU the step's process ran kernels on during the step.
    pub devices: Vec<StepDevice>,
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

/// The steps of `trace` that `which` selects, clipped to `window`; `None` when there are none.
pub fn steps(trace: &Trace, window: Option<&Window>, which: &StepMatch) -> Option<Steps> {
    // Names are interned: test each distinct name once.
    let mut name_ok: BTreeMap<u32, bool> = BTreeMap::new();
    let mut found: Vec<(Ns, Ns, u32, String)> = Vec::new();
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
        if let Some((s, e)) = clip(window, r.start_ns, r.end_ns) {
            found.push((s, e, r.process, trace.str(r.name).to_owned()));
        }
    }
    if found.is_empty() {
        return None;
    }
    found.sort();
    let merged = trace.meta.id_parts.len() > 1;
    // Lanes by (device, pid): pid only in a merged trace, where steps see their own process.
    let mut lanes_iv: BTreeMap<LaneKey, Vec<(Ns, Ns)>> = BTreeMap::new();
    for k in &trace.kernels {
        let pid = if merged {
            trace.meta.id_origin(k.stream).0
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
            let mut starts: Vec<Ns> = iv.iter().map(|x| x.0).collect();
            let mut ends: Vec<Ns> = iv.iter().map(|x| x.1).collect();
            starts.sort_unstable();
            ends.sort_unstable();
            let busy = BusyIndex::new(merged_runs(&mut iv));
            (key, Lane { busy, starts, ends })
        })
        .collect();

    let mut per_dev: BTreeMap<u32, (Vec<f64>, Ns)> = BTreeMap::new();
    let mut processes: Vec<u32> = Vec::new();
    let rows: Vec<Step> = found
        .into_iter()
        .map(|(s, e, pid, name)| {
            processes.push(pid);
            let duration = e - s;
            let mut kernels = 0;
            let mut devices = Vec::new();
            for ((dev, lane_pid), lane) in &lanes {
                if lane_pid.is_some_and(|p| p != pid) {
                    continue;
                }
                let n = lane.kernels_in(s, e);
                if n == 0 {
                    continue;
                }
                kernels += n;
                let busy = lane.busy.busy_within(s, e);
                let busy_pct = pct(busy, duration);
                let acc = per_dev.entry(*dev).or_default();
                acc.0.push(busy_pct);
                acc.1 = acc.1.saturating_add(busy);
                devices.push(StepDevice {
                    device: *dev,
                    busy_ns: busy,
                    busy_pct,
                });
            }
            Step {
                name,
                pid,
                start_ns: s,
                end_ns: e,
                duration_ns: duration,
                kernels,
                devices,
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
        .map(|(device, (mut pcts, busy_ns))| {
            pcts.sort_by(f64::total_cmp);
            StepDeviceSummary {
                device,
                steps: pcts.len() as u64,
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
        duration_min_ns: durations[0],
        duration_median_ns: durations[median_of(durations.len())],
        duration_max_ns: durations[durations.len() - 1],
        devices,
        steps: rows,
    })
}
