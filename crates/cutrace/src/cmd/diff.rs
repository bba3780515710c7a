//! `cutrace diff BASE NEW`: two traces side by side, as `cutrace_analysis::diff` computes them;
//! readable text or one JSON object (`cutrace_analysis::Diff` serialized as is).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cutrace_analysis::{
    parse_time_arg, trace_bounds, DiffOptions, DiffSide, StepMatch, TimeArg, Window,
};
use cutrace_export::html::diff::PageSide;
use cutrace_export::html::TimelineLod;
use cutrace_trace::Trace;

use cutrace_export::job;

use super::load;
use super::report::Format;

/// Compare two traces: did a change make the GPU busier, and where did the time go?
///
/// For each GPU: busy time (the union of kernel intervals) and its share of the kernel span
/// (first kernel start to last kernel end), idle time split where each gap's next kernel was
/// launched (waiting for the host, or launched and not yet started), and the number of idle gaps;
/// step time and each GPU's busy share per step, when the traces mark steps; launch-to-start
/// latency; then the kernel and CUDA API names whose summed duration changed most, with their
/// call counts and mean durations; hardware counters per kernel name (`cutrace profile`) and the
/// PM-sample layers per GPU (`cutrace sample`: kernels running, GPU, SMs, tensor pipes, DRAM),
/// when the traces have them. Either trace may be a `cutrace record` trace or a torch.profiler
/// JSON trace.
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
  cutrace diff jobA/ jobB/                         two distributed jobs, rank by rank
  cutrace diff jobA/ jobB/ --critical-path         … and which rank each step's path waited for
  cutrace diff a.json b.json --critical-path --html d.html   how the path changed, each side drawn

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
    /// How the critical path changed (`cutrace report --critical-path`): its length and
    /// composition over the steps (or the window), and the work on it whose time changed most.
    /// One trace on each side, or a job on each side: then the path across the ranks, step by
    /// step, with the ranks it waited for and the work on it by rank. With --html (one trace on
    /// each side) the page says the same and draws each side's path on its timeline.
    #[arg(long)]
    pub critical_path: bool,
    /// Write the diff as one self-contained HTML page instead (the two reports side by side)
    /// to a new file, or to stdout for `-`.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Replace the --html file if it exists (a regular file only, never a link), as
    /// `convert --force` does; without it an existing file is refused and left as it is.
    #[arg(long, requires = "html")]
    pub force: bool,
    /// The long form of the text: lines as long as they need. Without it the text fits 120
    /// columns (long lines wrap).
    #[arg(long)]
    pub wide: bool,
    /// Kernels whose name matches REGEX are communication too, after cutrace's own table
    /// (NCCL, RCCL, MSCCL++, DeepEP, NVSHMEM, custom all-reduce, …: docs/REPORT.md,
    /// "Communication kernels"), for a library the table does not know: `--comm-kernels
    /// 'my_allreduce|ring_exchange'`. Matched against the name as recorded (mangled or
    /// demangled), anywhere in it; the verdict's rules list counts them as `comm_kernels`.
    #[arg(long, value_name = "REGEX")]
    pub comm_kernels: Option<String>,
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

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    if let Some(re) = &args.comm_kernels {
        crate::cmd::comm_kernels(re)?;
    }
    let from = offset("--from", args.from.as_deref())?;
    let to = offset("--to", args.to.as_deref())?;
    let limits = args.limit.unwrap_or_default();
    let which = args
        .steps
        .as_deref()
        .map_or_else(StepMatch::profiler_steps, StepMatch::parse);
    let mut req = job::Request::new(&which, limits, args.top, args.format == Format::Json);
    req.wide = args.wide;
    req.one_trace_options = job::given(args.html.is_some(), args.from.is_some(), args.to.is_some());
    req.critical_path = args.critical_path;
    let line = std::sync::Mutex::new(super::progress::ProgressLine::new());
    let progress = |side: &str, k: usize, n: usize| {
        let _ = line
            .lock()
            .map(|mut l| l.show(|| format!("cutrace: {side}: read {k} of {n} ranks")));
    };
    if let Some(bytes) = job::diff(&args.base, &args.new, &req, &progress)? {
        line.into_inner()
            .ok()
            .map(super::progress::ProgressLine::finish);
        out.write_all(&bytes)
            .context("writing the diff to stdout")?;
        return Ok(0);
    }
    let opts = DiffOptions {
        top: args.top,
        steps: which.clone(),
        base_window: None,
        new_window: None,
        page: args.html.is_some(),
    };
    // One trace at a time: each is read, reduced to what the diff needs (and its timeline, for
    // the page), and dropped before the other is read.
    let html = args.html.is_some();
    let paths = std::cell::RefCell::new(Vec::new());
    let side = |path: &Path| -> anyhow::Result<(DiffSide, Option<TimelineLod>)> {
        let t = load(path, &limits)?;
        let w = window(&t, from, to)?;
        let mut side = cutrace_analysis::diff_side(&t, w, &opts)
            .with_context(|| format!("analysing {}", path.display()))?;
        let cp = args.critical_path.then(|| {
            let steps = side.report.steps.as_ref();
            cutrace_analysis::critical_path::critical_path(&t, w.as_ref(), steps, args.top)
        });
        // The page draws each side's path on its timeline and lists it under it.
        let timeline = html
            .then(|| cutrace_export::html::path::timeline_with_path(&t, w.as_ref(), cp.as_ref()))
            .transpose()
            .with_context(|| format!("drawing the timeline of {}", path.display()))?;
        if let Some(cp) = cp {
            if html {
                side.report.critical_path = Some(cp.clone());
            }
            paths.borrow_mut().push(cp);
        }
        Ok((side, timeline))
    };
    let (base, base_timeline) = side(&args.base)?;
    let (new, new_timeline) = side(&args.new)?;
    let d = cutrace_analysis::diff_sides(&base, &new, &opts);
    let path_diff = match &paths.into_inner()[..] {
        [b, n] => Some(cutrace_analysis::critical_path::diff(b, n, args.top)),
        _ => None,
    };
    if args.steps.is_some() && d.steps.is_none() {
        let windowed = from.is_some() || to.is_some();
        anyhow::bail!(cutrace_export::text::diff::steps_not_found(
            &which, windowed
        ));
    }
    if let (Some(dest), Some(lb), Some(ln)) = (&args.html, &base_timeline, &new_timeline) {
        let (b, n) = (
            args.base.display().to_string(),
            args.new.display().to_string(),
        );
        let page = cutrace_export::html::diff::page(
            &PageSide {
                title: &b,
                side: &base,
                timeline: lb,
            },
            &PageSide {
                title: &n,
                side: &new,
                timeline: ln,
            },
            &d,
            path_diff.as_ref(),
        );
        let mode = cutrace_export::files::mode_of_inputs([&args.base, &args.new]);
        cutrace_export::html::write_to(dest, &page, out, mode, args.force)
            .with_context(|| format!("writing {}", dest.display()))?;
        return Ok(0);
    }
    // Without a page the sides' reports and names are done with: only the diff's rows are
    // written.
    drop((base, new));
    match args.format {
        Format::Json => {
            // Written as it serializes: the rows are not held twice.
            let mut w = std::io::BufWriter::new(&mut *out);
            #[derive(serde::Serialize)]
            struct WithPath<T: serde::Serialize> {
                #[serde(flatten)]
                diff: T,
                #[serde(skip_serializing_if = "Option::is_none")]
                critical_path: Option<cutrace_analysis::critical_path::PathDiff>,
            }
            let j = WithPath {
                diff: cutrace_export::text::diff::json(&d),
                critical_path: path_diff,
            };
            serde_json::to_writer(&mut w, &j)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .and_then(|()| w.flush())
                .context("writing the diff to stdout")?;
        }
        Format::Text => {
            let mut text = String::from("cutrace diff\n");
            if from.is_some() || to.is_some() {
                let _ = writeln!(
                    text,
                    "window: {} to {} after each trace's start (its first record)",
                    args.from.as_deref().unwrap_or("0s"),
                    args.to.as_deref().unwrap_or("its end"),
                );
            }
            cutrace_export::text::diff::render(&mut text, &args.base, &args.new, &d);
            if let Some(pd) = &path_diff {
                cutrace_export::text::critical_path::render_diff(&mut text, pd, args.wide);
            }
            if !args.wide {
                text = cutrace_export::text::fit(&text);
            }
            out.write_all(text.as_bytes())
                .context("writing the diff to stdout")?;
        }
    }
    Ok(0)
}
