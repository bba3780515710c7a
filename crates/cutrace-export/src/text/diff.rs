//! The text of `cutrace diff`: a `cutrace_analysis::Diff` as a person reads it.

use std::fmt::Write as _;
use std::path::Path;

use cutrace_analysis::diff::{Caveat, DeviceSide, NameCounts, NameDiff, Side};
use cutrace_analysis::diff::{StepSide, StepsDiff};
use cutrace_analysis::{Diff, LaunchLatency};

use super::{count, fmt_ns};

/// A caveat in words, as the text, the page and the JSON's `text` give it.
pub fn caveat_text(c: &Caveat) -> String {
    let span = |span: &Option<u64>| match span {
        Some(ns) => format!("its records span {}", fmt_ns(*ns)),
        None => "it holds no timed records".into(),
    };
    match c {
        Caveat::DataLoss {
            side,
            complete,
            incomplete_reason,
            dropped,
        } => {
            let mut lost = Vec::new();
            if !complete {
                lost.push(format!(
                    "incomplete ({})",
                    incomplete_reason.as_deref().unwrap_or("no reason recorded")
                ));
            }
            if *dropped > 0 {
                lost.push(format!("{dropped} records dropped"));
            }
            format!(
                "the {side} trace lost data: {}; its totals are lower bounds",
                lost.join(", ")
            )
        }
        Caveat::EmptyWindow {
            side,
            from_offset_ns,
            to_offset_ns,
            span_ns,
        } => format!(
            "the {side} trace has no kernels in the window ({} to {} after its start; {}): an \
             offset such as --from 2s counts from each trace's own start",
            fmt_ns(*from_offset_ns),
            to_offset_ns.map_or_else(|| "its end".into(), fmt_ns),
            span(span_ns),
        ),
        Caveat::NoKernels { side, span_ns } => {
            format!("the {side} trace has no kernels ({})", span(span_ns))
        }
        Caveat::Orphans { side, kernels } => format!(
            "the {side} trace has {kernels} kernels without their launch call: they count in \
             busy time and the kernel table, not in launch latency or the idle split"
        ),
        Caveat::LaunchesWithoutGpuRecords {
            side,
            launches,
            of_launch_calls,
        } => format!(
            "the {side} trace lost GPU records: {launches} of its {of_launch_calls} kernel \
             launches have no kernel or copy record; its GPU totals are lower bounds"
        ),
        Caveat::SeparateRuns {
            side,
            run_ids,
            hosts,
            time_spans,
        } => {
            let what = if *run_ids > 1 {
                format!("parts of {run_ids} `cutrace record` runs")
            } else if *hosts > 1 {
                format!("parts from {hosts} hosts, whose clocks differ")
            } else {
                format!("parts in {time_spans} separate time spans")
            };
            format!(
                "the {side} trace may hold several runs ({what}): its figures mix them; compare \
                 one run's directory"
            )
        }
        Caveat::DifferentWork {
            base_kernels,
            new_kernels,
        } => format!(
            "the traces hold different amounts of work ({base_kernels} vs {new_kernels} \
             kernels): compare busy shares and mean durations; summed totals grow with the \
             length of the capture"
        ),
        Caveat::ApiRecords { base, new } => format!(
            "the traces recorded different sets of API calls (base: {base}, new: {new}; \
             `cutrace record --api`, torch.profiler its own): a call one of them left out shows \
             as only in the other"
        ),
        Caveat::DifferentDevices { devices } => {
            let list: Vec<String> = devices
                .iter()
                .map(|d| format!("GPU {} only in the {} trace", d.device, d.side))
                .collect();
            format!("{} (GPUs are matched by device id)", list.join(", "))
        }
    }
}

/// The diff as `cutrace diff --format json` prints it (docs/DIFF.md): the `Diff`'s fields in
/// their order, each caveat with its words added as `text`.
#[derive(serde::Serialize)]
pub struct Json<'a> {
    schema_version: u32,
    base: &'a Side,
    new: &'a Side,
    caveats: Vec<CaveatJson<'a>>,
    devices: &'a [cutrace_analysis::diff::DeviceDiff],
    launch_latency: &'a cutrace_analysis::diff::LatencyPair,
    kernel_names: &'a NameCounts,
    kernels: &'a [NameDiff],
    api_names: &'a NameCounts,
    api: &'a [NameDiff],
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<&'a StepsDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counters: Option<&'a cutrace_analysis::counters::CountersDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pm_samples: Option<&'a cutrace_analysis::pm::PmDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pc_samples: Option<&'a cutrace_analysis::pc::PcDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<&'a cutrace_analysis::memory::MemoryDiff>,
}

#[derive(serde::Serialize)]
struct CaveatJson<'a> {
    #[serde(flatten)]
    facts: &'a Caveat,
    text: String,
}

/// See [`Json`].
pub fn json(d: &Diff) -> Json<'_> {
    Json {
        schema_version: d.schema_version,
        base: &d.base,
        new: &d.new,
        caveats: d
            .caveats
            .iter()
            .map(|c| CaveatJson {
                facts: c,
                text: caveat_text(c),
            })
            .collect(),
        devices: &d.devices,
        launch_latency: &d.launch_latency,
        kernel_names: &d.kernel_names,
        kernels: &d.kernels,
        api_names: &d.api_names,
        api: &d.api,
        steps: d.steps.as_ref(),
        counters: d.counters.as_ref(),
        pm_samples: d.pm_samples.as_ref(),
        pc_samples: d.pc_samples.as_ref(),
        memory: d.memory.as_ref(),
    }
}

fn fmt_change(ns: i64) -> String {
    match ns {
        0 => "0 ns".into(),
        n if n < 0 => format!("-{}", fmt_ns(n.unsigned_abs())),
        n => format!("+{}", fmt_ns(n as u64)),
    }
}

fn change(base: u64, new: u64) -> String {
    let d = i128::from(new) - i128::from(base);
    let abs = fmt_change(d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64);
    if base == 0 {
        abs
    } else {
        // Rounded first, so a change below 0.05 % reads +0.0 %, never -0.0 %.
        let p = (d as f64 * 1000.0 / base as f64).round() / 10.0 + 0.0;
        format!("{abs} ({p:+.1} %)")
    }
}

/// A row of durations: base, new and their change; `-` where a side has none.
fn time_row(o: &mut String, label: &str, x: Option<u64>, y: Option<u64>) {
    let cell = |v: Option<u64>| v.map_or_else(|| "-".into(), fmt_ns);
    let delta = match (x, y) {
        (Some(x), Some(y)) => change(x, y),
        _ => "-".into(),
    };
    let _ = writeln!(o, "  {label:<40} {:>14} {:>14}  {delta}", cell(x), cell(y));
}

/// A row of counts: base, new and their difference.
fn count_row(o: &mut String, label: &str, x: u64, y: u64) {
    let _ = writeln!(
        o,
        "  {label:<40} {x:>14} {y:>14}  {:+}",
        i128::from(y) - i128::from(x)
    );
}

/// A change in percentage points, rounded first so that a change below 0.05 reads +0.0, never
/// -0.0.
fn points(p: f64) -> String {
    format!("{:+.1} points", (p * 10.0).round() / 10.0 + 0.0)
}

fn side_line(label: &str, path: &Path, s: &Side) -> String {
    let window = if s.window.is_some() {
        " in the window"
    } else {
        ""
    };
    format!(
        "  {label:<5} {} ({} trace): {} kernels, {} API calls{window}{}",
        super::escape_controls(&path.display().to_string()),
        s.source,
        s.kernels,
        s.api_calls,
        if s.complete && s.dropped == 0 {
            String::new()
        } else {
            "; lost data (see below)".into()
        }
    )
}

/// Appends the diff's text to `o`, its control characters escaped (a trace's names reach a
/// terminal).
pub fn render(o: &mut String, base: &Path, new: &Path, d: &Diff) {
    let from = o.len();
    render_unescaped(o, base, new, d);
    super::escape_from(o, from);
}

fn render_unescaped(o: &mut String, base: &Path, new: &Path, d: &Diff) {
    let _ = writeln!(o, "{}", side_line("base", base, &d.base));
    let _ = writeln!(o, "{}", side_line("new", new, &d.new));
    if !d.caveats.is_empty() {
        let _ = writeln!(o, "Not like for like ({}):", d.caveats.len());
        for c in &d.caveats {
            let _ = writeln!(o, "  - {}", caveat_text(c));
        }
    }
    for dev in &d.devices {
        render_device(
            o,
            dev.device,
            dev.base.as_ref(),
            dev.new.as_ref(),
            dev.busy_pct_points,
        );
    }
    if let Some(st) = &d.steps {
        render_steps(o, st);
    }
    render_latency(o, &d.launch_latency.base, &d.launch_latency.new);
    render_names(o, "Kernels", &d.kernel_names, &d.kernels);
    render_names(o, api_calls_label(d), &d.api_names, &d.api);
    if let Some(c) = &d.counters {
        super::counters::render_diff(o, c);
    }
    if let Some(p) = &d.pm_samples {
        super::diff_pm::render_diff(o, p);
    }
    if let Some(p) = &d.pc_samples {
        super::pc::render_diff(o, p);
    }
    if let Some(m) = &d.memory {
        super::memory::render_diff(o, m);
    }
}

fn render_device(
    o: &mut String,
    device: u32,
    b: Option<&DeviceSide>,
    n: Option<&DeviceSide>,
    busy_points: Option<f64>,
) {
    let _ = writeln!(o, "\nGPU {device}");
    let (b, n) = match (b, n) {
        (Some(b), Some(n)) => (b, n),
        (Some(s), None) | (None, Some(s)) => {
            let which = if b.is_some() { "base" } else { "new" };
            let _ = writeln!(
                o,
                "  only in the {which} trace: {} kernels, busy {} = {:.1} % of a {} kernel span",
                s.kernels,
                fmt_ns(s.busy_ns),
                s.busy_pct,
                fmt_ns(s.window_ns)
            );
            return;
        }
        (None, None) => return,
    };
    let _ = writeln!(o, "  {:<40} {:>14} {:>14}  Δ", "", "base", "new");
    let row = |o: &mut String, label: &str, x: u64, y: u64| time_row(o, label, Some(x), Some(y));
    row(
        o,
        "kernel span (first start → last end)",
        b.window_ns,
        n.window_ns,
    );
    row(o, "busy (union of kernel intervals)", b.busy_ns, n.busy_ns);
    let _ = writeln!(
        o,
        "  {:<40} {:>14} {:>14}  {}",
        "busy, share of the kernel span",
        format!("{:.1} %", b.busy_pct),
        format!("{:.1} %", n.busy_pct),
        busy_points.map_or_else(|| "-".into(), points)
    );
    row(o, "idle", b.idle_ns, n.idle_ns);
    let parts = [
        (
            "  before the next launch returned",
            b.idle_before_launch_ns,
            n.idle_before_launch_ns,
        ),
        (
            "  after it (launched, not started)",
            b.idle_after_launch_ns,
            n.idle_after_launch_ns,
        ),
        (
            "  no launch call in the trace",
            b.idle_unknown_ns,
            n.idle_unknown_ns,
        ),
    ];
    for (label, x, y) in parts {
        match (x, y) {
            (Some(x), Some(y)) if x > 0 || y > 0 => row(o, label, x, y),
            _ => {}
        }
    }
    count_row(o, "idle gaps", b.gaps, n.gaps);
    count_row(o, "kernels", b.kernels, n.kernels);
}

fn render_steps(o: &mut String, st: &StepsDiff) {
    let _ = writeln!(o, "\nSteps (host ranges \"{}\")", st.matched);
    let (b, n) = match (&st.base, &st.new) {
        (Some(b), Some(n)) => (b, n),
        (Some(s), None) | (None, Some(s)) => {
            let (has, lacks) = if st.base.is_some() {
                ("base", "new")
            } else {
                ("new", "base")
            };
            let _ = writeln!(
                o,
                "  only the {has} trace has them ({}, median {}); the {lacks} trace has none \
                 (`--steps NAME` names other ranges)",
                count(s.count as usize, "step", "steps"),
                s.duration_median_ns.map_or_else(|| "-".into(), fmt_ns)
            );
            return;
        }
        (None, None) => return,
    };
    let _ = writeln!(o, "  {:<40} {:>14} {:>14}  Δ", "", "base", "new");
    count_row(o, "steps", b.count, n.count);
    time_row(
        o,
        "step time, median",
        b.duration_median_ns,
        n.duration_median_ns,
    );
    time_row(
        o,
        "step time, shortest",
        b.duration_min_ns,
        n.duration_min_ns,
    );
    time_row(
        o,
        "step time, longest",
        b.duration_max_ns,
        n.duration_max_ns,
    );
    let devices: std::collections::BTreeSet<u32> = b
        .devices
        .iter()
        .chain(&n.devices)
        .map(|d| d.device)
        .collect();
    let pct = |s: &StepSide, dev: u32| {
        s.devices
            .iter()
            .find(|d| d.device == dev)
            .map(|d| d.busy_pct_median)
    };
    for dev in devices {
        let (x, y) = (pct(b, dev), pct(n, dev));
        let cell = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1} %"));
        let delta = match (x, y) {
            (Some(x), Some(y)) => points(y - x),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "  {:<40} {:>14} {:>14}  {delta}",
            format!("GPU {dev} busy in a step, median"),
            cell(x),
            cell(y)
        );
    }
}

fn render_latency(o: &mut String, b: &LaunchLatency, n: &LaunchLatency) {
    if b.kernels == 0 && n.kernels == 0 {
        return;
    }
    let cell = |v: Option<i64>| match v {
        Some(v) if v < 0 => format!("-{}", fmt_ns(v.unsigned_abs())),
        Some(v) => fmt_ns(v as u64),
        None => "-".into(),
    };
    let _ = writeln!(
        o,
        "\nLaunch-to-start latency (launch call end → kernel start)\n  {:<8} {:>8} {:>13} {:>13} {:>13}",
        "", "kernels", "p50", "p90", "p99"
    );
    for (label, l) in [("base", b), ("new", n)] {
        let _ = writeln!(
            o,
            "  {label:<8} {:>8} {:>13} {:>13} {:>13}",
            l.kernels,
            cell(l.p50_ns),
            cell(l.p90_ns),
            cell(l.p99_ns)
        );
    }
}

fn render_names(o: &mut String, what: &str, counts: &NameCounts, rows: &[NameDiff]) {
    if counts.base == 0 && counts.new == 0 {
        return;
    }
    let _ = writeln!(
        o,
        "\n{what} by change in summed duration (top {} of {} names; {} only in base, {} only in new)",
        rows.len(),
        counts.base + counts.only_new,
        counts.only_base,
        counts.only_new
    );
    if rows.is_empty() {
        return;
    }
    let st = super::Style::default();
    let sides = || rows.iter().flat_map(|r| [r.base, r.new]).flatten();
    let total = st.col(
        sides()
            .map(|s| s.total_ns)
            .chain(rows.iter().map(|r| r.total_change_ns.unsigned_abs())),
    );
    let mean = st.col(sides().map(|s| s.mean_ns));
    let _ = writeln!(
        o,
        "  (totals in {}, means in {}; base → new)",
        total.unit, mean.unit
    );
    let cols = [
        super::num("Δ total"),
        super::num("total"),
        super::num("→"),
        super::num("calls"),
        super::num("→"),
        super::num("mean"),
        super::num("→"),
        super::num("Δ mean"),
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let opt = |s: Option<u64>, c: &super::Col| s.map_or_else(|| "-".into(), |v| c.num(v));
            let calls = |s: Option<cutrace_analysis::diff::NameSide>| {
                s.map_or_else(|| "-".into(), |s| s.count.to_string())
            };
            let delta = total.signed(r.total_change_ns);
            vec![
                if r.total_change_ns > 0 {
                    format!("+{delta}")
                } else {
                    delta
                },
                opt(r.base.map(|s| s.total_ns), &total),
                opt(r.new.map(|s| s.total_ns), &total),
                calls(r.base),
                calls(r.new),
                opt(r.base.map(|s| s.mean_ns), &mean),
                opt(r.new.map(|s| s.mean_ns), &mean),
                r.mean_change_pct
                    .map_or_else(|| "-".into(), |p| format!("{p:+.1} %")),
            ]
        })
        .collect();
    let names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    super::table(o, &st, &cols, &cells, Some(("name", &names)));
}

/// Why `cutrace diff --steps` found nothing: in neither trace (or their windows) does a host
/// range match; how to list a trace's range names.
pub fn steps_not_found(which: &cutrace_analysis::StepMatch, windowed: bool) -> String {
    format!(
        "--steps {}: no host range in either trace{} matches it ({}`cutrace report TRACE --steps \
         X` lists a trace's range names)",
        which.text(),
        if windowed { "'s window" } else { "" },
        if matches!(which, cutrace_analysis::StepMatch::Exact(_)) {
            "end it with * to match names that start with it; "
        } else {
            ""
        }
    )
}

/// What the diff calls the traces' API calls: `HIP` when both are ROCm's, `CUDA` when neither
/// is, and neither word when they differ.
pub fn api_calls_label(d: &Diff) -> &'static str {
    let hip = |r: Option<&str>| r == Some("hip");
    match (hip(d.base.api_runtime), hip(d.new.api_runtime)) {
        (true, true) => "HIP API calls",
        (false, false) => "CUDA API calls",
        _ => "API calls",
    }
}

#[cfg(test)]
mod tests {
    use cutrace_analysis::diff::OneSided;

    use super::*;

    #[test]
    fn caveats_are_said_in_words_from_their_facts() {
        let said = |c: Caveat| caveat_text(&c);
        assert_eq!(
            said(Caveat::EmptyWindow {
                side: "base",
                from_offset_ns: 990_100,
                to_offset_ns: None,
                span_ns: Some(19_400)
            }),
            "the base trace has no kernels in the window (990.100 µs to its end after its \
             start; its records span 19.400 µs): an offset such as --from 2s counts from each \
             trace's own start"
        );
        assert_eq!(
            said(Caveat::DataLoss {
                side: "new",
                complete: false,
                incomplete_reason: None,
                dropped: 7
            }),
            "the new trace lost data: incomplete (no reason recorded), 7 records dropped; its \
             totals are lower bounds"
        );
        assert!(said(Caveat::DifferentWork {
            base_kernels: 100,
            new_kernels: 80
        })
        .contains("(100 vs 80 kernels)"));
        assert!(said(Caveat::ApiRecords {
            base: "all".into(),
            new: "lean".into()
        })
        .contains("(base: all, new: lean;"));
        assert_eq!(
            said(Caveat::DifferentDevices {
                devices: vec![
                    OneSided {
                        device: 1,
                        side: "new"
                    },
                    OneSided {
                        device: 3,
                        side: "base"
                    }
                ]
            }),
            "GPU 1 only in the new trace, GPU 3 only in the base trace (GPUs are matched by \
             device id)"
        );
        for (c, what) in [
            (
                Caveat::SeparateRuns {
                    side: "base",
                    run_ids: 2,
                    hosts: 0,
                    time_spans: 1,
                },
                "(parts of 2 `cutrace record` runs)",
            ),
            (
                Caveat::SeparateRuns {
                    side: "base",
                    run_ids: 0,
                    hosts: 0,
                    time_spans: 3,
                },
                "(parts in 3 separate time spans)",
            ),
            (
                Caveat::NoKernels {
                    side: "new",
                    span_ns: None,
                },
                "(it holds no timed records)",
            ),
            (
                Caveat::LaunchesWithoutGpuRecords {
                    side: "base",
                    launches: 260,
                    of_launch_calls: 260,
                },
                "260 of its 260 kernel launches have no kernel",
            ),
        ] {
            assert!(said(c).contains(what), "{what}");
        }
    }

    /// The JSON is the `Diff` as it serializes, field for field, each caveat's facts with its
    /// words added as `text`.
    #[test]
    fn the_json_is_the_diff_with_each_caveats_words() {
        use cutrace_testkit::records::seed_trace;
        let (a, b) = (seed_trace(&[11, 12]), seed_trace(&[13]));
        let d = cutrace_analysis::diff(&a, &b, &cutrace_analysis::DiffOptions::default()).unwrap();
        assert!(!d.caveats.is_empty());
        let plain = serde_json::to_value(&d).unwrap();
        let mut ours = serde_json::to_value(json(&d)).unwrap();
        for (c, facts) in ours["caveats"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(&d.caveats)
        {
            let text = c.as_object_mut().unwrap().remove("text").unwrap();
            assert_eq!(text, serde_json::Value::from(caveat_text(facts)));
        }
        assert_eq!(ours, plain);
    }
}
