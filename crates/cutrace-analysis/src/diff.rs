//! Two traces side by side ("before" and "after" a change): per GPU, busy and idle time, the
//! idle split and gap counts; launch-to-start latency; and the kernel and API names whose summed
//! time changed most. Pure over two [`Trace`]s, like the rest of this crate.
//!
//! Nothing here assumes the two traces cover the same amount of work. Totals (summed durations,
//! busy and idle nanoseconds) are only comparable when they do, so the diff says when they do not
//! (kernel counts or GPU windows more than 10 % apart) and keeps the length-independent figures
//! beside them: busy as a share of the window, mean duration per call. A trace with lost data
//! (incomplete, dropped records, orphans) is named in a caveat as well: its totals are lower
//! bounds.

use std::collections::BTreeMap;

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::correlate::LaunchLatency;
use crate::error::AnalysisError;
use crate::report::{analyze, DeviceReport, Options, Report, WindowInfo};
use crate::summary::{api_summary, kernel_summary, NameStats};
use crate::window::Window;

/// Version of the diff's JSON shape; rises when a field is renamed, removed or changes meaning.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// Counts or windows further apart than this (relative to the larger) make totals incomparable.
const SAME_WORK_TOLERANCE: f64 = 0.10;

/// The whole comparison; `cutrace diff --format json` prints it as is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub schema_version: u32,
    pub base: Side,
    pub new: Side,
    /// What makes the comparison less than exact, in words; empty when nothing does.
    pub caveats: Vec<Caveat>,
    /// Every GPU of either trace, by device id.
    pub devices: Vec<DeviceDiff>,
    pub launch_latency: LatencyPair,
    pub kernel_names: NameCounts,
    /// Kernel names by the size of their change in summed duration, largest first (`top` rows).
    pub kernels: Vec<NameDiff>,
    pub api_names: NameCounts,
    /// API names likewise.
    pub api: Vec<NameDiff>,
}

/// One trace's totals and the data it lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Side {
    /// "native" or "kineto".
    pub source: &'static str,
    /// The part of the trace compared (its own clock); null: the whole trace.
    pub window: Option<WindowInfo>,
    /// Kernels compared (inside the window, when there is one).
    pub kernels: u64,
    /// API calls compared (likewise).
    pub api_calls: u64,
    /// Kernels whose launch call is not in the trace.
    pub orphans: u64,
    pub complete: bool,
    /// Records dropped by the recorder and by CUPTI together.
    pub dropped: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Caveat {
    /// `data_loss`, `empty_window`, `orphans`, `different_work`, `different_devices` or
    /// `api_records`: stable, for scripts.
    pub kind: &'static str,
    pub text: String,
}

/// One GPU in both traces (`None` on the side that does not have it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceDiff {
    pub device: u32,
    pub base: Option<DeviceSide>,
    pub new: Option<DeviceSide>,
    /// `new.busy_pct − base.busy_pct`, in percentage points, when both have kernels.
    pub busy_pct_points: Option<f64>,
}

/// A GPU's figures in one trace (see `cutrace report`'s `devices[]` for each).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSide {
    pub kernels: u64,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub busy_pct: f64,
    pub idle_ns: Ns,
    pub gaps: u64,
    /// Idle time before the next kernel's launch call returned (the GPU waited for the host).
    pub idle_before_launch_ns: Option<Ns>,
    /// Idle time after it (launched work not yet started).
    pub idle_after_launch_ns: Option<Ns>,
    /// Idle time whose next kernel has no launch call in the trace.
    pub idle_unknown_ns: Option<Ns>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatencyPair {
    pub base: LaunchLatency,
    pub new: LaunchLatency,
}

/// How many distinct names each trace has, and how many are in one only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NameCounts {
    pub base: u64,
    pub new: u64,
    pub only_base: u64,
    pub only_new: u64,
}

/// One name in both traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NameDiff {
    /// Demangled for display, as in `cutrace report`.
    pub name: String,
    pub base: Option<NameSide>,
    pub new: Option<NameSide>,
    /// `new.total_ns − base.total_ns` (an absent side counts 0).
    pub total_change_ns: i64,
    /// Change of the mean duration per call, in percent of the base's, when both have calls.
    pub mean_change_pct: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NameSide {
    pub count: u64,
    /// Summed duration of the calls (a sum: overlapping calls count twice).
    pub total_ns: Ns,
    /// `total_ns / count`, rounded down.
    pub mean_ns: Ns,
}

/// What to compare and how much to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffOptions {
    /// Rows of the kernel and API lists (the name counts are always exact).
    pub top: usize,
    /// Only this part of the base trace (its own clock), as `cutrace report --from/--to`.
    pub base_window: Option<Window>,
    /// Only this part of the new trace.
    pub new_window: Option<Window>,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            top: 10,
            base_window: None,
            new_window: None,
        }
    }
}

/// Compares `new` against `base`.
pub fn diff(base: &Trace, new: &Trace, opts: &DiffOptions) -> Result<Diff, AnalysisError> {
    let run = |t: &Trace,
               window: Option<Window>|
     -> Result<(Report, Vec<NameStats>, Vec<NameStats>), AnalysisError> {
        let r = analyze(
            t,
            &Options {
                window,
                top: 0,
                orphan_list: 0,
            },
        )?;
        let k = kernel_summary(t, window.as_ref())
            .into_iter()
            .map(|k| k.stats)
            .collect();
        Ok((r, k, api_summary(t, window.as_ref())))
    };
    let (rb, kb, ab) = run(base, opts.base_window)?;
    let (rn, kn, an) = run(new, opts.new_window)?;
    let (kernel_names, kernels) = name_diffs(&kb, &kn, opts.top);
    let (api_names, api) = name_diffs(&ab, &an, opts.top);

    let mut by_dev: BTreeMap<u32, (Option<DeviceSide>, Option<DeviceSide>)> = BTreeMap::new();
    for d in &rb.devices {
        by_dev.entry(d.device).or_default().0 = Some(device_side(d));
    }
    for d in &rn.devices {
        by_dev.entry(d.device).or_default().1 = Some(device_side(d));
    }
    let devices: Vec<DeviceDiff> = by_dev
        .into_iter()
        .map(|(device, (b, n))| DeviceDiff {
            device,
            busy_pct_points: match (&b, &n) {
                (Some(b), Some(n)) if b.kernels > 0 && n.kernels > 0 => {
                    Some(n.busy_pct - b.busy_pct)
                }
                _ => None,
            },
            base: b,
            new: n,
        })
        .collect();

    let (base, new) = (side(&rb, &ab), side(&rn, &an));
    let caveats = caveats(&base, &new, &rb, &rn, &devices);
    Ok(Diff {
        schema_version: DIFF_SCHEMA_VERSION,
        base,
        new,
        caveats,
        devices,
        launch_latency: LatencyPair {
            base: rb.launch_latency,
            new: rn.launch_latency,
        },
        kernel_names,
        kernels,
        api_names,
        api,
    })
}

fn side(r: &Report, api: &[NameStats]) -> Side {
    Side {
        source: r.trace.source,
        window: r.window,
        kernels: r.devices.iter().map(|d| d.timeline.kernels).sum(),
        api_calls: api.iter().map(|a| a.count).sum(),
        orphans: r.correlation.orphans,
        complete: r.data_loss.complete,
        dropped: r
            .data_loss
            .dropped_by_recorder
            .saturating_add(r.data_loss.dropped_by_cupti),
    }
}

fn device_side(d: &DeviceReport) -> DeviceSide {
    let t = &d.timeline;
    let split = d.idle_split.as_ref();
    DeviceSide {
        kernels: t.kernels,
        window_ns: t.window_ns,
        busy_ns: t.busy_ns,
        busy_pct: d.busy_pct,
        idle_ns: t.idle_ns,
        gaps: t.gaps,
        idle_before_launch_ns: split.map(|s| s.before_launch_ns),
        idle_after_launch_ns: split.map(|s| s.after_launch_ns),
        idle_unknown_ns: split.map(|s| s.unknown_ns),
    }
}

/// True when `a` and `b` are more than the tolerance apart, relative to the larger.
fn far_apart(a: u64, b: u64) -> bool {
    let hi = a.max(b);
    hi > 0 && (hi - a.min(b)) as f64 > SAME_WORK_TOLERANCE * hi as f64
}

fn caveats(
    base: &Side,
    new: &Side,
    rb: &Report,
    rn: &Report,
    devices: &[DeviceDiff],
) -> Vec<Caveat> {
    let mut out = Vec::new();
    for (label, s, r) in [("base", base, rb), ("new", new, rn)] {
        let mut lost = Vec::new();
        if !s.complete {
            lost.push(format!(
                "incomplete ({})",
                r.data_loss
                    .incomplete_reason
                    .as_deref()
                    .unwrap_or("no reason recorded")
            ));
        }
        if s.dropped > 0 {
            lost.push(format!("{} records dropped", s.dropped));
        }
        if !lost.is_empty() {
            out.push(Caveat {
                kind: "data_loss",
                text: format!(
                    "the {label} trace lost data: {}; its totals are lower bounds",
                    lost.join(", ")
                ),
            });
        }
        if let (Some(w), 0) = (s.window, s.kernels) {
            out.push(Caveat {
                kind: "empty_window",
                text: format!(
                    "the {label} trace has no kernels in the window ({}; the trace runs from \
                     {} to {} ns): an offset such as --from 2s counts from each trace's own start",
                    match w.to_ns {
                        Some(t) => format!("{} to {t} ns on its clock", w.from_ns),
                        None => format!("from {} ns on its clock to its end", w.from_ns),
                    },
                    r.trace.first_ns.unwrap_or(0),
                    r.trace.last_ns.unwrap_or(0)
                ),
            });
        }
        if s.orphans > 0 {
            out.push(Caveat {
                kind: "orphans",
                text: format!(
                    "the {label} trace has {} kernels without their launch call: they count in \
                     busy time and the kernel table, not in launch latency or the idle split",
                    s.orphans
                ),
            });
        }
    }
    let windows = |r: &Report| r.devices.iter().map(|d| d.timeline.window_ns).sum::<u64>();
    let (wb, wn) = (windows(rb), windows(rn));
    if far_apart(base.kernels, new.kernels) || far_apart(wb, wn) {
        out.push(Caveat {
            kind: "different_work",
            text: format!(
                "the traces cover different amounts of work ({} vs {} kernels, GPU windows {} vs \
                 {} ns): compare busy percentages and mean durations; summed totals differ with \
                 the length of the capture",
                base.kernels, new.kernels, wb, wn
            ),
        });
    }
    // `cutrace record --api lean` (the default) leaves state queries out by choice: against a
    // trace that has them, they would read as calls the change removed.
    let mode = |r: &Report| {
        r.notes
            .iter()
            .find_map(|n| {
                ["lean", "launches"]
                    .into_iter()
                    .find(|m| n.text.starts_with(&format!("api records: {m}")))
            })
            .unwrap_or("all")
    };
    let (mb, mn) = (mode(rb), mode(rn));
    if mb != mn {
        out.push(Caveat {
            kind: "api_records",
            text: format!(
                "the traces recorded different API calls (base: {mb}, new: {mn}; `cutrace record --api`): a call one of them left out by choice shows as only in the other"
            ),
        });
    }
    let one_sided: Vec<String> = devices
        .iter()
        .filter(|d| d.base.is_none() || d.new.is_none())
        .map(|d| {
            format!(
                "GPU {} only in the {} trace",
                d.device,
                if d.base.is_some() { "base" } else { "new" }
            )
        })
        .collect();
    if !one_sided.is_empty() {
        out.push(Caveat {
            kind: "different_devices",
            text: format!("{} (GPUs are matched by device id)", one_sided.join(", ")),
        });
    }
    out
}

/// Rows of both summaries matched by display name (names that display alike are merged), sorted
/// by the size of the change in summed time, largest first, then by name.
fn name_diffs(base: &[NameStats], new: &[NameStats], top: usize) -> (NameCounts, Vec<NameDiff>) {
    fn sides(rows: &[NameStats]) -> BTreeMap<&str, NameSide> {
        let mut m: BTreeMap<&str, NameSide> = BTreeMap::new();
        for r in rows {
            let s = m.entry(r.name.as_str()).or_insert(NameSide {
                count: 0,
                total_ns: 0,
                mean_ns: 0,
            });
            s.count += r.count;
            s.total_ns = s.total_ns.saturating_add(r.total_ns);
            s.mean_ns = s.total_ns.checked_div(s.count).unwrap_or(0);
        }
        m
    }
    let (mb, mn) = (sides(base), sides(new));
    let mut names: Vec<&str> = mb.keys().chain(mn.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let counts = NameCounts {
        base: mb.len() as u64,
        new: mn.len() as u64,
        only_base: mb.keys().filter(|k| !mn.contains_key(*k)).count() as u64,
        only_new: mn.keys().filter(|k| !mb.contains_key(*k)).count() as u64,
    };
    let mut rows: Vec<NameDiff> = names
        .into_iter()
        .map(|name| {
            let (b, n) = (mb.get(name).copied(), mn.get(name).copied());
            let total = |s: Option<NameSide>| i128::from(s.map_or(0, |s| s.total_ns));
            let change = (total(n) - total(b)).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
            NameDiff {
                name: name.to_owned(),
                total_change_ns: change as i64,
                mean_change_pct: match (b, n) {
                    (Some(b), Some(n)) if b.mean_ns > 0 => {
                        Some((n.mean_ns as f64 - b.mean_ns as f64) * 100.0 / b.mean_ns as f64)
                    }
                    _ => None,
                },
                base: b,
                new: n,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_change_ns
            .unsigned_abs()
            .cmp(&a.total_change_ns.unsigned_abs())
            .then_with(|| a.name.cmp(&b.name))
    });
    rows.truncate(top);
    (counts, rows)
}
