//! `cutrace diff BASE NEW`: two traces side by side, as `cutrace_analysis::diff` computes them;
//! readable text or one JSON object (`cutrace_analysis::Diff` serialized as is).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cutrace_analysis::diff::{DeviceSide, NameCounts, NameDiff, Side};
use cutrace_analysis::diff::{StepSide, StepsDiff};
use cutrace_analysis::{
    parse_time_arg, trace_bounds, Diff, DiffOptions, LaunchLatency, StepMatch, TimeArg, Window,
};
use cutrace_trace::Trace;

use super::report::{count, fmt_ns, load, short_name, Format};

/// Compare two traces: did a change make the GPU busier, and where did the time go?
///
/// For each GPU: busy time (the union of kernel intervals) and its share of the kernel span
/// (first kernel start to last kernel end), idle time split where each gap's next kernel was
/// launched (waiting for the host, or launched and not yet started), and the number of idle gaps;
/// step time and each GPU's busy share per step, when the traces mark steps; launch-to-start
/// latency; then the kernel and CUDA API names whose summed duration changed most, with their
/// call counts and mean durations. Either trace may be a `cutrace record` trace or a
/// torch.profiler JSON trace.
///
/// The diff says when the comparison is not like for like: a trace that lost data (its totals are
/// lower bounds) or has no kernels, orphan kernels, a directory holding several runs, different
/// amounts of work (compare percentages and means, not totals), GPUs in one trace only, or API
/// calls recorded in one trace and left out in the other.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace diff before.json.gz after.json.gz        two torch.profiler traces of the same steps
  cutrace diff run1/ run2/ --top 20                two `cutrace record` traces, 20 names per table
  cutrace diff a/ b.json --format json | jq '.devices[0].busy_pct_points'
  cutrace diff run1/ run2/ --from 5s --to 15s     the same ten seconds of each run (past warm-up)
  cutrace diff run1/ run2/ --steps train_step      step time per NVTX "train_step" range

Columns: "Δ" is new − base; a name missing from one trace shows "-" on that side. Summed durations
double-count calls that overlap (they are sums, not busy time)."#)]
pub struct Args {
    /// The trace to compare against (before the change).
    pub base: PathBuf,
    /// The trace to compare (after the change).
    pub new: PathBuf,
    /// Raise the readers' limits for an unusual trace: `NAME=VALUE[,NAME=VALUE…]` with NAME one
    /// of chunk-bytes, chunk-rows, rows-per-byte, string-bytes, event-bytes and VALUE an integer
    /// (K, M, G: binary multiples). The defaults are far above any recorded trace; see
    /// docs/FORMAT.md, "Limits".
    #[arg(long, value_name = "NAME=VALUE")]
    pub limit: Option<cutrace_trace::Limits>,
    /// Output format: `text` for people, `json` for scripts (one JSON object on stdout).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Rows in the kernel and API tables (the name counts above them are always exact).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Compare only from this offset after each trace's own start (`500ms`, `2s`, `250us`):
    /// the two traces' clocks differ, so one absolute time cannot serve both. Intervals are
    /// clipped to the window, as in `cutrace report`.
    #[arg(long, value_name = "OFFSET")]
    pub from: Option<String>,
    /// End of the window (exclusive), an offset like --from.
    #[arg(long, value_name = "OFFSET")]
    pub to: Option<String>,
    /// Host ranges that mark the program's steps (NVTX ranges, `record_function` names), as in
    /// `cutrace report --steps`: step time and GPU busy share per step, side by side. `NAME*`
    /// matches names starting with NAME. Default: torch.profiler's `ProfilerStep#*`, shown when
    /// either trace has them.
    #[arg(long, value_name = "NAME")]
    pub steps: Option<String>,
}

/// `--from`/`--to` as offsets; an absolute time is refused with the reason.
fn offset(flag: &str, text: Option<&str>) -> anyhow::Result<Option<TimeArg>> {
    let Some(text) = text else { return Ok(None) };
    match parse_time_arg(text).with_context(|| flag.to_owned())? {
        TimeArg::Absolute(_) => anyhow::bail!(
            "{flag} {text}: a plain number is an absolute time on one trace's clock, and the two \
             traces' clocks differ; give an offset from each trace's start with a unit, such as \
             {flag} 2s or {flag} 500ms"
        ),
        a => Ok(Some(a)),
    }
}

fn window(t: &Trace, from: Option<TimeArg>, to: Option<TimeArg>) -> anyhow::Result<Option<Window>> {
    if from.is_none() && to.is_none() {
        return Ok(None);
    }
    let start = trace_bounds(t).map_or(0, |b| b.0);
    Window::resolve(from, to, start).context("--from/--to")
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let from = offset("--from", args.from.as_deref())?;
    let to = offset("--to", args.to.as_deref())?;
    let limits = args.limit.unwrap_or_default();
    let base = load(&args.base, &limits)?;
    let new = load(&args.new, &limits)?;
    let which = args
        .steps
        .as_deref()
        .map_or_else(StepMatch::profiler_steps, StepMatch::parse);
    let opts = DiffOptions {
        top: args.top,
        steps: which.clone(),
        base_window: window(&base, from, to)?,
        new_window: window(&new, from, to)?,
    };
    let d = cutrace_analysis::diff(&base, &new, &opts).with_context(|| {
        format!(
            "comparing {} with {}",
            args.new.display(),
            args.base.display()
        )
    })?;
    if args.steps.is_some() && d.steps.is_none() {
        anyhow::bail!(
            "--steps {}: no host range in either trace{} matches it ({}`cutrace report TRACE \
             --steps X` lists a trace's range names)",
            which.text(),
            if from.is_some() || to.is_some() {
                "'s window"
            } else {
                ""
            },
            if matches!(which, StepMatch::Exact(_)) {
                "end it with * to match names that start with it; "
            } else {
                ""
            }
        );
    }
    let mut out = String::new();
    match args.format {
        Format::Json => {
            out = serde_json::to_string(&d).context("serializing the diff")?;
            out.push('\n');
        }
        Format::Text => {
            let _ = writeln!(out, "cutrace diff");
            if from.is_some() || to.is_some() {
                let _ = writeln!(
                    out,
                    "window: {} to {} after each trace's start (its first record)",
                    args.from.as_deref().unwrap_or("0s"),
                    args.to.as_deref().unwrap_or("its end"),
                );
            }
            render(&mut out, &args.base, &args.new, &d)
        }
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(e).context("writing the diff to stdout"),
    }
}

/// `+1.500 ms`, `-250 ns`, `0 ns`.
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
        path.display(),
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

fn render(o: &mut String, base: &Path, new: &Path, d: &Diff) {
    let _ = writeln!(o, "{}", side_line("base", base, &d.base));
    let _ = writeln!(o, "{}", side_line("new", new, &d.new));
    if !d.caveats.is_empty() {
        let _ = writeln!(o, "Not like for like ({}):", d.caveats.len());
        for c in &d.caveats {
            let _ = writeln!(o, "  - {}", c.text);
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
    render_names(o, "Kernels", &d.kernel_names, &d.kernels, 90);
    render_names(o, "CUDA API calls", &d.api_names, &d.api, 60);
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

fn render_names(o: &mut String, what: &str, counts: &NameCounts, rows: &[NameDiff], width: usize) {
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
    let _ = writeln!(
        o,
        "  {:>12} {:>25} {:>17} {:>25} {:>10}  name",
        "Δ total", "total base → new", "calls base → new", "mean base → new", "Δ mean"
    );
    let opt = |s: Option<u64>| s.map_or_else(|| "-".into(), fmt_ns);
    for r in rows {
        let calls = |s: Option<cutrace_analysis::diff::NameSide>| {
            s.map_or_else(|| "-".into(), |s| s.count.to_string())
        };
        let mean = format!(
            "{} → {}",
            opt(r.base.map(|s| s.mean_ns)),
            opt(r.new.map(|s| s.mean_ns)),
        );
        let _ = writeln!(
            o,
            "  {:>12} {:>25} {:>17} {:>25} {:>10}  {}",
            fmt_change(r.total_change_ns),
            format!(
                "{} → {}",
                opt(r.base.map(|s| s.total_ns)),
                opt(r.new.map(|s| s.total_ns))
            ),
            format!("{} → {}", calls(r.base), calls(r.new)),
            mean,
            r.mean_change_pct
                .map_or_else(|| "-".into(), |p| format!("{p:+.1} %")),
            short_name(&r.name, width)
        );
    }
}
