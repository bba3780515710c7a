//! The report's first answer ([`Summary`]): per GPU, how busy it was over its window, compute and
//! communication apart, what its idle time waited on and which few gaps hold most of it, and the
//! step time when the trace has steps. Every figure is one the report already computes (busy,
//! the idle split, the largest gaps, the steps) or a union of the same kernels split by name:
//! communication kernels are those [`cutrace_trace::is_comm_kernel`] names (the table
//! `COMM_RULES`: NCCL, RCCL, MSCCL, DeepEP, custom and fused all-reduce, MSCCL++, MoE
//! all-to-all, userbuffers, NVSHMEM, PyTorch SymmetricMemory), compute the rest. The two unions overlap where both ran at once, so compute + communication can exceed
//! busy; exposed communication is what ran with no compute beside it.

use std::collections::HashMap;

use cutrace_trace::{is_comm_kernel, Ns, Trace};
use serde::Serialize;

use crate::intervals::{intersection_ns, merged_runs};

/// The largest gaps the verdict names: fewest of the largest that hold half the idle time, at
/// most this many.
pub(crate) const MAX_GAPS_NAMED: usize = 5;

/// Gaps shorter than 1 µs, from a timeline's decade histogram (its buckets below 1 µs).
pub fn gaps_under_1us(hist: &[crate::timeline::GapBucket]) -> u64 {
    hist.iter()
        .filter(|b| b.to_ns.is_some_and(|t| t <= 1_000))
        .map(|b| b.count)
        .sum()
}

/// The first answer of a report, per GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub devices: Vec<DeviceVerdict>,
    /// The steps' median duration, when the report has steps.
    pub step_median_ns: Option<Ns>,
    pub steps: u64,
    /// The steps' time in `enumerate(DataLoader)` (their `dataloader_ns`, summed) and its share
    /// of their summed duration: the host fetching batches. Absent when the trace has no data
    /// loader ops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps_dataloader_ns: Option<Ns>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps_dataloader_pct: Option<f64>,
    /// Which rule of the communication table ([`cutrace_trace::COMM_RULES`]) classified the
    /// communication kernels the verdict counts, in the table's order; rules that matched
    /// nothing are left out.
    pub communication_rules: Vec<RuleCount>,
}

/// The communication kernels one rule classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleCount {
    pub rule: &'static str,
    pub library: &'static str,
    /// Kernels (timed, overlapping their device's window) whose name the rule matched.
    pub kernels: u64,
}

/// Per rule of the communication table, the kernels inside their device's span it matched.
pub(crate) fn rule_counts(trace: &Trace, spans: &HashMap<u32, (Ns, Ns)>) -> Vec<RuleCount> {
    // Per name: the rule's index in the table (the user's rule after it), or past it for none.
    let rules: Vec<&cutrace_trace::CommRule> = cutrace_trace::COMM_RULES
        .iter()
        .chain([&cutrace_trace::comm::USER_COMM_RULE])
        .collect();
    let none = rules.len();
    let mut rule_of: HashMap<u32, usize> = HashMap::new();
    let mut counts = vec![0u64; none];
    for k in trace.kernels.iter().filter(|k| !k.untimed()) {
        let Some(&(from, to)) = spans.get(&k.device) else {
            continue;
        };
        if k.start_ns.max(from) >= k.end_ns.min(to) {
            continue;
        }
        let r = *rule_of.entry(k.name).or_insert_with(|| {
            cutrace_trace::comm_rule(trace.str(k.name)).map_or(none, |r| {
                rules.iter().position(|x| x.rule == r.rule).unwrap_or(none)
            })
        });
        if let Some(c) = counts.get_mut(r) {
            *c += 1;
        }
    }
    rules
        .into_iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(r, kernels)| RuleCount {
            rule: r.rule,
            library: r.library,
            kernels,
        })
        .collect()
}

/// One GPU's verdict; percentages are of its window unless said otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceVerdict {
    pub device: u32,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub busy_pct: f64,
    /// The union of the window's compute kernels (not communication).
    pub compute_ns: Ns,
    pub compute_pct: f64,
    /// The union of its communication kernels.
    pub communication_ns: Ns,
    pub communication_pct: f64,
    /// Communication with no compute kernel running beside it.
    pub exposed_communication_ns: Ns,
    /// The union of copies on this device (not part of busy, which is kernels).
    pub copy_ns: Ns,
    pub idle_ns: Ns,
    pub idle_pct: f64,
    /// The idle gaps (exact), and of them those shorter than 1 µs: on ROCm most "gaps" are a
    /// nanosecond between one kernel's end and the next's start (1,658 of 2,358 in a DDP
    /// ResNet-18 on an MI300), exact but no sign of fragmentation.
    pub gaps: u64,
    pub gaps_under_1us: u64,
    /// Idle time before the next kernel's launch returned: the GPU waited for the host
    /// (`idle_split.before_launch_ns`); `None` when the trace has no launch calls to tell.
    pub idle_waiting_for_host_ns: Option<Ns>,
    /// Share of the idle time.
    pub idle_waiting_for_host_pct: Option<f64>,
    /// Idle time before kernels whose launch call is not in the trace (`idle_split.unknown_ns`):
    /// whether the GPU waited for the host there cannot be told. `None` without such gaps.
    pub idle_launch_unknown_ns: Option<Ns>,
    /// Share of the idle time.
    pub idle_launch_unknown_pct: Option<f64>,
    /// The fewest of the largest gaps that hold half the idle time (at most five), and what
    /// they hold.
    pub largest_gaps: u64,
    pub largest_gaps_min_ns: Ns,
    pub largest_gaps_max_ns: Ns,
    /// Share of the idle time those gaps hold.
    pub largest_gaps_idle_pct: f64,
}

/// Compute, communication and exposed communication per device (unions), for the devices that
/// ran communication kernels, of kernels clipped to `[from, to)` per device.
pub(crate) fn lanes(trace: &Trace, spans: &HashMap<u32, (Ns, Ns)>) -> HashMap<u32, (Ns, Ns, Ns)> {
    let mut is_comm: HashMap<u32, bool> = HashMap::new();
    let mut comm = |name: u32| {
        *is_comm
            .entry(name)
            .or_insert_with(|| is_comm_kernel(trace.str(name)))
    };
    // Only a device with communication kernels needs its intervals: elsewhere compute is busy
    // (and a trace of millions of kernels holds no copy of them here).
    let mut with_comm: std::collections::HashSet<u32> = std::collections::HashSet::new();
    for k in trace.kernels.iter().filter(|k| !k.untimed()) {
        if spans.contains_key(&k.device) && !with_comm.contains(&k.device) && comm(k.name) {
            with_comm.insert(k.device);
        }
    }
    type Lane = (Vec<(Ns, Ns)>, Vec<(Ns, Ns)>);
    let mut by: HashMap<u32, Lane> = HashMap::new();
    for k in trace.kernels.iter().filter(|k| !k.untimed()) {
        if !with_comm.contains(&k.device) {
            continue;
        }
        let Some(&(from, to)) = spans.get(&k.device) else {
            continue;
        };
        let (a, b) = (k.start_ns.max(from), k.end_ns.min(to));
        if a >= b {
            continue;
        }
        let lane = by.entry(k.device).or_default();
        if comm(k.name) {
            lane.1.push((a, b));
        } else {
            lane.0.push((a, b));
        }
    }
    by.into_iter()
        .map(|(dev, (mut compute, mut comm))| {
            let compute = merged_runs(&mut compute);
            let comm = merged_runs(&mut comm);
            let sum = |r: &[(Ns, Ns)]| r.iter().map(|x| x.1 - x.0).sum::<Ns>();
            let (c, m) = (sum(&compute), sum(&comm));
            (dev, (c, m, m - intersection_ns(&comm, &compute)))
        })
        .collect()
}
