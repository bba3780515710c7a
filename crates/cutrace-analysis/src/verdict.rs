//! The report's first answer ([`Summary`]): per GPU, how busy it was over its window, compute and
//! communication apart, what its idle time waited on and which few gaps hold most of it, and the
//! step time when the trace has steps. Every figure is one the report already computes (busy,
//! the idle split, the largest gaps, the steps) or a union of the same kernels split by name:
//! communication kernels are those [`cutrace_trace::is_comm_kernel`] names (NCCL, RCCL), compute
//! the rest. The two unions overlap where both ran at once, so compute + communication can exceed
//! busy; exposed communication is what ran with no compute beside it.

use std::collections::HashMap;

use cutrace_trace::{is_comm_kernel, Ns, Trace};
use serde::Serialize;

use crate::intervals::{intersection_ns, merged_runs};
use crate::report::Report;
use crate::summary::pct;

/// The largest gaps the verdict names: fewest of the largest that hold half the idle time, at
/// most this many.
const MAX_GAPS_NAMED: usize = 5;

/// The first answer of a report, per GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub devices: Vec<DeviceVerdict>,
    /// The steps' median duration, when the report has steps.
    pub step_median_ns: Option<Ns>,
    pub steps: u64,
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
    /// Idle time before the next kernel's launch returned: the GPU waited for the host
    /// (`idle_split.before_launch_ns`); `None` when the trace has no launch calls to tell.
    pub idle_waiting_for_host_ns: Option<Ns>,
    /// Share of the idle time.
    pub idle_waiting_for_host_pct: Option<f64>,
    /// The fewest of the largest gaps that hold half the idle time (at most five), and what
    /// they hold.
    pub largest_gaps: u64,
    pub largest_gaps_min_ns: Ns,
    pub largest_gaps_max_ns: Ns,
    /// Share of the idle time those gaps hold.
    pub largest_gaps_idle_pct: f64,
}

/// Compute and communication unions per device, of kernels clipped to `[from, to)` per device.
fn lanes(trace: &Trace, spans: &HashMap<u32, (Ns, Ns)>) -> HashMap<u32, (Ns, Ns, Ns)> {
    let mut is_comm: HashMap<u32, bool> = HashMap::new();
    type Lane = (Vec<(Ns, Ns)>, Vec<(Ns, Ns)>);
    let mut by: HashMap<u32, Lane> = HashMap::new();
    for k in trace.kernels.iter().filter(|k| !k.untimed()) {
        let Some(&(from, to)) = spans.get(&k.device) else {
            continue;
        };
        let (a, b) = (k.start_ns.max(from), k.end_ns.min(to));
        if a >= b {
            continue;
        }
        let c = *is_comm
            .entry(k.name)
            .or_insert_with(|| is_comm_kernel(trace.str(k.name)));
        let lane = by.entry(k.device).or_default();
        if c {
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

/// The verdict of `report`, made over `trace`: the kernels inside each device's window (which
/// the report's time window already bounds).
pub fn summary(trace: &Trace, report: &Report) -> Summary {
    let spans: HashMap<u32, (Ns, Ns)> = report
        .devices
        .iter()
        .filter_map(|d| {
            let t = &d.timeline;
            Some((d.device, (t.window_start_ns?, t.window_end_ns?)))
        })
        .collect();
    let lanes = lanes(trace, &spans);
    let devices = report
        .devices
        .iter()
        .filter(|d| d.timeline.kernels > 0)
        .map(|d| {
            let t = &d.timeline;
            let (compute, comm, exposed) = lanes.get(&d.device).copied().unwrap_or_default();
            let mut held = 0;
            let mut named = 0;
            for g in t.largest_gaps.iter().take(MAX_GAPS_NAMED) {
                if held * 2 >= t.idle_ns {
                    break;
                }
                held += g.length_ns;
                named += 1;
            }
            let gaps = &t.largest_gaps[..named];
            let waiting = d
                .idle_split
                .filter(|s| s.gaps_before_launch + s.gaps_after_launch > 0)
                .map(|s| s.before_launch_ns);
            DeviceVerdict {
                device: d.device,
                window_ns: t.window_ns,
                busy_ns: t.busy_ns,
                busy_pct: d.busy_pct,
                compute_ns: compute,
                compute_pct: pct(compute, t.window_ns),
                communication_ns: comm,
                communication_pct: pct(comm, t.window_ns),
                exposed_communication_ns: exposed,
                copy_ns: d.copy_busy_ns,
                idle_ns: t.idle_ns,
                idle_pct: pct(t.idle_ns, t.window_ns),
                idle_waiting_for_host_ns: waiting,
                idle_waiting_for_host_pct: waiting.map(|w| pct(w, t.idle_ns)),
                largest_gaps: named as u64,
                largest_gaps_min_ns: gaps.iter().map(|g| g.length_ns).min().unwrap_or(0),
                largest_gaps_max_ns: gaps.iter().map(|g| g.length_ns).max().unwrap_or(0),
                largest_gaps_idle_pct: pct(held, t.idle_ns),
            }
        })
        .collect();
    Summary {
        devices,
        step_median_ns: report.steps.as_ref().and_then(|s| s.duration_median_ns),
        steps: report.steps.as_ref().map_or(0, |s| s.count),
    }
}
