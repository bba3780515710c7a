//! Two traces side by side ("before" and "after" a change): per GPU, busy and idle time, the
//! idle split and gap counts; launch-to-start latency; and the kernel and API names whose summed
//! time changed most. Pure over two [`Trace`]s, like the rest of this crate.
//!
//! Nothing here assumes the two traces cover the same amount of work. Totals (summed durations,
//! busy and idle nanoseconds) are only comparable when they do, so the diff says when they do not
//! (kernel counts more than 10 % apart; a faster or slower run of the same work is what a diff is
//! for) and keeps the length-independent figures beside them: busy as a share of the kernel
//! span, mean duration per call.
//!
//! Names are matched on a normalised key: the demangler cutrace uses writes a template argument
//! `(unsigned long)1` where torch.profiler's names (the C++ runtime's demangler) say `1ul`, so a
//! native trace and a Kineto trace of one program would otherwise list every such kernel twice. A trace with lost data
//! (incomplete, dropped records, orphans) is named in a caveat as well: its totals are lower
//! bounds. Traces with hardware counters compare them per kernel name ([`crate::counters`]), and
//! traces with PM samples compare their layers per GPU ([`crate::pm::pm_diff`]).

use std::collections::{BTreeMap, HashMap};

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::correlate::LaunchLatency;
use crate::error::AnalysisError;
use crate::report::{analyze, DeviceReport, Options, Report, WindowInfo};
use crate::steps::{steps, StepMatch, Steps};
use crate::summary::{api_name_totals, kernel_name_totals, NameTotal};
use crate::units::fmt_ns;
use crate::window::Window;

/// Version of the diff's JSON shape; rises when a field is renamed, removed or changes meaning.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// Kernel counts further apart than this (relative to the larger) make totals incomparable.
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
    /// Step durations and busy shares, when either trace has steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepsDiff>,
    /// Hardware counters per kernel name and metric, when either trace has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::counters::CountersDiff>,
    /// PM-sample layers per GPU (window and idle gaps), when either trace has PM samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pm_samples: Option<crate::pm::PmDiff>,
}

/// The steps of both traces (see [`crate::steps`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepsDiff {
    /// The names matched: `ProfilerStep#*`, or what `--steps` gave.
    pub matched: String,
    pub base: Option<StepSide>,
    pub new: Option<StepSide>,
    /// `new.duration_median_ns − base.duration_median_ns`, when both have steps.
    pub median_change_ns: Option<i64>,
}

/// One trace's steps, summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSide {
    pub count: u64,
    pub duration_min_ns: Option<Ns>,
    pub duration_median_ns: Option<Ns>,
    pub duration_max_ns: Option<Ns>,
    /// Per GPU: its median busy share of a step (over the steps it ran kernels in).
    pub devices: Vec<StepDeviceSide>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDeviceSide {
    pub device: u32,
    pub busy_pct_median: f64,
}

fn step_side(s: Steps) -> StepSide {
    StepSide {
        count: s.count,
        duration_min_ns: s.duration_min_ns,
        duration_median_ns: s.duration_median_ns,
        duration_max_ns: s.duration_max_ns,
        devices: s
            .devices
            .iter()
            .map(|d| StepDeviceSide {
                device: d.device,
                busy_pct_median: d.busy_pct_median,
            })
            .collect(),
    }
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
    /// `data_loss`, `empty_window`, `no_kernels`, `orphans`, `separate_runs`, `different_work`,
    /// `api_records` or `different_devices`: stable, for scripts.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOptions {
    /// Rows of the kernel and API lists (the name counts are always exact).
    pub top: usize,
    /// The host ranges that mark steps (default: torch.profiler's `ProfilerStep#*`).
    pub steps: StepMatch,
    /// Only this part of the base trace (its own clock), as `cutrace report --from/--to`.
    pub base_window: Option<Window>,
    /// Only this part of the new trace.
    pub new_window: Option<Window>,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            top: 10,
            steps: StepMatch::profiler_steps(),
            base_window: None,
            new_window: None,
        }
    }
}

/// Compares `new` against `base`.
pub fn diff(base: &Trace, new: &Trace, opts: &DiffOptions) -> Result<Diff, AnalysisError> {
    let run = |t: &Trace,
               window: Option<Window>|
     -> Result<(Report, Vec<NameTotal>, Vec<NameTotal>), AnalysisError> {
        let r = analyze(
            t,
            &Options {
                window,
                top: 0,
                orphan_list: 0,
            },
        )?;
        Ok((
            r,
            kernel_name_totals(t, window.as_ref()),
            api_name_totals(t, window.as_ref()),
        ))
    };
    let (rb, kb, ab) = run(base, opts.base_window)?;
    let (rn, kn, an) = run(new, opts.new_window)?;
    let (kernel_names, kernels) = name_diffs(&kb, &kn, opts.top);
    let (api_names, api) = name_diffs(&ab, &an, opts.top);
    let (sb, sn) = (
        steps(base, opts.base_window.as_ref(), &opts.steps).map(step_side),
        steps(new, opts.new_window.as_ref(), &opts.steps).map(step_side),
    );
    let steps = (sb.is_some() || sn.is_some()).then(|| StepsDiff {
        matched: opts.steps.text(),
        median_change_ns: match (&sb, &sn) {
            (Some(b), Some(n)) => match (b.duration_median_ns, n.duration_median_ns) {
                (Some(x), Some(y)) => Some(y as i64 - x as i64),
                _ => None,
            },
            _ => None,
        },
        base: sb,
        new: sn,
    });

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

    let counters = crate::counters::counters_diff(
        base,
        new,
        (opts.base_window.as_ref(), opts.new_window.as_ref()),
        opts.top,
        match_key,
    );
    let pm_samples = crate::pm::pm_diff(
        base,
        new,
        (opts.base_window.as_ref(), opts.new_window.as_ref()),
    );
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
        steps,
        counters,
        pm_samples,
    })
}

fn side(r: &Report, api: &[NameTotal]) -> Side {
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

/// The `--api` mode a recorder note names (`api records: lean — …`), when it is one that leaves
/// calls out: `lean` or `launches`.
pub fn api_records_note(text: &str) -> Option<&'static str> {
    ["lean", "launches"]
        .into_iter()
        .find(|m| text.starts_with(&format!("api records: {m}")))
}

/// Which API calls a trace holds: `torch.profiler` for Kineto traces (its own selection), else
/// the recorder's `--api` mode of each part (`all` when a part says nothing), `mixed` when the
/// parts differ.
fn api_mode(r: &Report) -> String {
    if r.trace.source == "kineto" {
        return "torch.profiler".into();
    }
    let of_part = |part: Option<&str>| {
        r.notes
            .iter()
            .filter(|n| n.part.as_deref() == part)
            .find_map(|n| api_records_note(&n.text))
            .unwrap_or("all")
    };
    let mut modes: Vec<&str> = if r.trace.parts.is_empty() {
        vec![of_part(None)]
    } else {
        r.trace
            .parts
            .iter()
            .map(|p| of_part(Some(p.path.as_str())))
            .collect()
    };
    modes.sort_unstable();
    modes.dedup();
    match modes.as_slice() {
        [one] => (*one).to_owned(),
        _ => "mixed".into(),
    }
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
        if s.kernels == 0 {
            let span = match (r.trace.first_ns, r.trace.last_ns) {
                (Some(a), Some(b)) => format!("its records span {}", fmt_ns(b - a)),
                _ => "it holds no timed records".into(),
            };
            let (kind, text) = match (s.window, r.trace.first_ns) {
                (Some(w), first) => {
                    let first = first.unwrap_or(0);
                    let at = |t: Ns| fmt_ns(t.saturating_sub(first));
                    (
                        "empty_window",
                        format!(
                            "the {label} trace has no kernels in the window ({} to {} after \
                             its start; {span}): an offset such as --from 2s counts from each \
                             trace's own start",
                            at(w.from_ns.max(first)),
                            w.to_ns.map_or_else(|| "its end".into(), at),
                        ),
                    )
                }
                (None, _) => (
                    "no_kernels",
                    format!("the {label} trace has no kernels ({span})"),
                ),
            };
            out.push(Caveat { kind, text });
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
        if let Some(sr) = &r.trace.separate_runs {
            let what = if sr.run_ids.len() > 1 {
                format!("parts of {} `cutrace record` runs", sr.run_ids.len())
            } else if sr.hosts.len() > 1 {
                format!("parts from {} hosts, whose clocks differ", sr.hosts.len())
            } else {
                format!("parts in {} separate time spans", sr.time_spans)
            };
            out.push(Caveat {
                kind: "separate_runs",
                text: format!(
                    "the {label} trace may hold several runs ({what}): its figures mix them; \
                     compare one run's directory"
                ),
            });
        }
    }
    // Only the amount of work decides: a faster or slower run of the same work is what a diff is
    // for, so the GPU windows may differ freely.
    if base.kernels > 0 && new.kernels > 0 && far_apart(base.kernels, new.kernels) {
        out.push(Caveat {
            kind: "different_work",
            text: format!(
                "the traces hold different amounts of work ({} vs {} kernels): compare busy \
                 shares and mean durations; summed totals grow with the length of the capture",
                base.kernels, new.kernels
            ),
        });
    }
    // `cutrace record --api lean` (the default) leaves state queries out by choice, and
    // torch.profiler records its own selection: calls one trace left out would read as calls the
    // change removed.
    let (mb, mn) = (api_mode(rb), api_mode(rn));
    if mb != mn || mb == "mixed" {
        out.push(Caveat {
            kind: "api_records",
            text: format!(
                "the traces recorded different sets of API calls (base: {mb}, new: {mn}; \
                 `cutrace record --api`, torch.profiler its own): a call one of them left out \
                 shows as only in the other"
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

/// The key two spellings of one demangled name share: integer template arguments written as casts
/// (`(unsigned long)1`, cpp_demangle) become their literal suffixes (`1ul`, the C++ runtime's
/// demangler, which torch.profiler's names come from); `(bool)1`/`(bool)0` become
/// `true`/`false`; spaces are dropped (`> >` and `>>`).
pub fn match_key(name: &str) -> String {
    const CASTS: [(&str, &str); 7] = [
        ("(unsigned long long)", "ull"),
        ("(long long)", "ll"),
        ("(unsigned long)", "ul"),
        ("(long)", "l"),
        ("(unsigned int)", "u"),
        ("(int)", ""),
        ("(bool)", "bool"),
    ];
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    'scan: while !rest.is_empty() {
        for (cast, suffix) in CASTS {
            if let Some(after) = rest.strip_prefix(cast) {
                let digits = after
                    .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                    .unwrap_or(after.len());
                if digits > 0 {
                    let num = &after[..digits];
                    if suffix == "bool" {
                        out.push_str(if num == "0" { "false" } else { "true" });
                    } else {
                        out.push_str(num);
                        out.push_str(suffix);
                    }
                    rest = &after[digits..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_whitespace() {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A 64-bit hash of a match key, the same for both sides of a diff (fixed keys). Two different
/// keys meet with odds of about n²/2^65: 1 in 30 million for a million names.
fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// Rows of both summaries matched by [`match_key`] (names with one key are merged, shown as the
/// base's spelling), sorted by the size of the change in summed time, largest first, then by
/// name.
fn name_diffs(base: &[NameTotal], new: &[NameTotal], top: usize) -> (NameCounts, Vec<NameDiff>) {
    /// Key (a 64-bit hash of the [`match_key`]: a trace of a million names once held a million
    /// key strings per side here) → (a spelling to show, the merged figures).
    fn sides(rows: &[NameTotal]) -> HashMap<u64, (&str, NameSide)> {
        let mut m: HashMap<u64, (&str, NameSide)> = HashMap::with_capacity(rows.len());
        for r in rows {
            let (_, s) = m.entry(key_hash(&match_key(&r.name))).or_insert((
                r.name.as_str(),
                NameSide {
                    count: 0,
                    total_ns: 0,
                    mean_ns: 0,
                },
            ));
            s.count += r.count;
            s.total_ns = s.total_ns.saturating_add(r.total_ns);
            s.mean_ns = s.total_ns.checked_div(s.count).unwrap_or(0);
        }
        m
    }
    let (mb, mn) = (sides(base), sides(new));
    let mut keys: Vec<&u64> = mb.keys().chain(mn.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    let counts = NameCounts {
        base: mb.len() as u64,
        new: mn.len() as u64,
        only_base: mb.keys().filter(|k| !mn.contains_key(*k)).count() as u64,
        only_new: mn.keys().filter(|k| !mb.contains_key(*k)).count() as u64,
    };
    // Each key's change first; names are copied only for the `top` rows shown (a trace of a
    // million distinct names once made a million rows here).
    let change_of = |key: &u64| {
        let total = |s: Option<&(&str, NameSide)>| i128::from(s.map_or(0, |s| s.1.total_ns));
        (total(mn.get(key)) - total(mb.get(key))).clamp(i128::from(i64::MIN), i128::from(i64::MAX))
            as i64
    };
    let shown = |key: &u64| mb.get(key).or(mn.get(key)).map_or("", |x| x.0);
    let mut keyed: Vec<(i64, &u64)> = keys.into_iter().map(|k| (change_of(k), k)).collect();
    let order = |a: &(i64, &u64), b: &(i64, &u64)| {
        b.0.unsigned_abs()
            .cmp(&a.0.unsigned_abs())
            .then_with(|| shown(a.1).cmp(shown(b.1)))
    };
    if keyed.len() > top {
        keyed.select_nth_unstable_by(top, order);
        keyed.truncate(top);
    }
    let mut rows: Vec<NameDiff> = keyed
        .into_iter()
        .map(|(change, key)| {
            let (b, n) = (mb.get(key).copied(), mn.get(key).copied());
            let name = b.or(n).map_or("", |x| x.0);
            let (b, n) = (b.map(|x| x.1), n.map(|x| x.1));
            NameDiff {
                name: name.to_owned(),
                total_change_ns: change,
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
