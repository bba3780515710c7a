//! `cutrace report`: reads a trace (cutrace's own or a torch.profiler/Kineto JSON), runs the
//! analysis in `cutrace-analysis`, and writes it as text (`cutrace_export::text::report`) or as
//! one JSON object: `cutrace_analysis::Report` serialized as is, whose field names are a contract.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use cutrace_analysis::{analyze, parse_time_arg, trace_bounds, Options, StepMatch, Window};
use cutrace_export::html::{self, report::page as html_page};
use cutrace_export::text::{self, report::steps_not_found, report::window_outside_trace};

use cutrace_export::job;

use super::load;
use super::progress::ProgressLine;

/// Busy time, idle gaps, launch latency, top kernels and API calls of a trace.
///
/// Busy time is the union of kernel intervals per device (never a sum); idle gaps are the holes
/// between busy runs. A GPU's idle time is split, gap by gap, where the next kernel's launch
/// call returned: before it the GPU waited for the host, after it for launched work to start.
/// For a GPU's largest gaps the report says what the host was doing: when the
/// launch of the kernel after the gap returned (late in the gap: the GPU waited for the host;
/// before it: the kernel was queued behind something else), which CUDA calls and NVTX ranges
/// covered the gap, and for how long the host was outside any CUDA call. When the trace marks
/// steps (torch.profiler's `ProfilerStep#N`, or the NVTX ranges `--steps` names), each step's
/// duration and each GPU's busy share during it. Kernels are joined to their launching API calls by correlation id; kernels
/// without one are counted as orphans. Lost data (dropped records, an incomplete trace, events
/// the importer skipped) is always reported.
///
/// Several ranks' traces (a directory of torch.profiler traces, one per rank; a `cutrace record`
/// directory of a whole job; several files or directories) are a distributed job: per rank its
/// busy time, communication (the union of its communication kernels: NCCL, RCCL, DeepEP, custom
/// all-reduce, … and --comm-kernels; docs/REPORT.md, "Communication kernels"), exposed
/// communication (communication with no compute kernel on that GPU) and the time it waited at
/// collectives for the last rank;
/// across ranks each step's slowest rank and spread, and each collective's arrival skew. An
/// empty or truncated rank is reported, not fatal. Timestamps are each host's own clock: between
/// hosts their offset adds to skew and wait (docs/REPORT.md, "A distributed job").
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace report trace.json.gz                 torch.profiler (Kineto) trace: busy, idle, gaps, kernels
  cutrace report run1/                         a `cutrace record` trace directory (all processes)
  cutrace report run1/ --from 2s --to 2.5s     only that half second after the trace start
  cutrace report run1/ --steps train_step      per-step time and GPU busy share of NVTX "train_step"
  cutrace report trace.json --format json | jq '.devices[0].busy_ns'
  cutrace report job/                          a distributed job: per rank NCCL, wait, stragglers
  cutrace report t.json --critical-path        what each step waited on: what to shorten first
  cutrace report job/ --critical-path --html p.html   the path across the ranks, on the page
  cutrace report --rank-summary r3.json -o s3.json   one rank's map step; `report s*.json` reduces

JSON: integers are exact nanoseconds; absolute times of cutrace's own traces are above 2^53, which
jq before 1.7 and JavaScript round (durations and counts are far below it): read them with
Python's json, or jq 1.7+. `schema_version` rises when a field is renamed, removed or changes
meaning."#)]
pub struct Args {
    /// The trace: a cutrace trace (file or directory of parts) or a torch.profiler JSON trace
    /// (`.json` or `.json.gz`); read once, so a pipe or FIFO works, and `-` is stdin. Several
    /// ranks' traces or summaries, or a directory of them, are a job (docs/REPORT.md).
    #[arg(required = true, value_name = "TRACE")]
    pub files: Vec<PathBuf>,
    /// Map step for a job spread over machines: reduce the one TRACE (one rank) to a small
    /// summary written to --output; `cutrace report S0.json S1.json …` then gives the job report.
    #[arg(long, requires = "output")]
    pub rank_summary: bool,
    /// Where --rank-summary writes (a new file; `-` is stdout).
    #[arg(long, short = 'o', value_name = "SUMMARY.json")]
    pub output: Option<PathBuf>,
    /// Threads reading a job's ranks, one rank's trace each at a time: 1 to 256. Default: one
    /// per core.
    #[arg(long, value_name = "N", value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Raise the readers' limits for an unusual trace: `NAME=VALUE[,NAME=VALUE…]` with NAME one
    /// of chunk-bytes, chunk-rows, rows-per-byte, string-bytes, event-bytes and VALUE an integer
    /// (K, M, G: binary multiples). The defaults are far above any recorded trace; see
    /// docs/FORMAT.md, "Limits".
    #[arg(long, value_name = "NAME=VALUE")]
    pub limit: Option<cutrace_trace::Limits>,
    /// Output format: `text` for people, `json` for scripts (one JSON object on stdout).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Start of the time window. A plain integer is nanoseconds on the trace clock
    /// (`5153875767895669`); a number with a unit (`250us`, `12.5ms`, `2s`, `100ns`) is an offset
    /// from the trace start: its earliest record, the first "trace clock" value of the report
    /// (a viewer such as Perfetto may count from an earlier profiler event). Intervals are
    /// clipped to the window.
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// End of the time window (exclusive), written like --from.
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Length of each top list: largest gaps, kernel names, API names, ranges. Per stream, the
    /// text shows only the largest gap; the JSON lists N per stream too.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Number of orphan correlation ids listed (the orphan count is always exact).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub orphans: usize,
    /// Host ranges that mark the program's steps (NVTX ranges, `record_function` names): each
    /// step's duration and how busy each GPU was during it. `NAME*` matches names starting with
    /// NAME. Default: torch.profiler's `ProfilerStep#*`, shown when the trace has them.
    #[arg(long, value_name = "NAME")]
    pub steps: Option<String>,
    /// Write the report as one self-contained HTML page instead (zoomable timeline, charts,
    /// sortable tables; nothing fetched when viewed) to a new file, or to stdout for `-`. For a
    /// job: the ranks side by side, a timeline lane per rank, the slowest rank per step and the
    /// collectives' skew (--from and --to still apply to one trace only).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Replace the --html file if it exists (a regular file only, never a link), as
    /// `convert --force` does; without it an existing file is refused and left as it is.
    #[arg(long, requires = "html")]
    pub force: bool,
    /// The long form of the text: lines as long as they need, names as recorded (demangled).
    /// Without it the text fits 120 columns: long lines wrap, and a table shows a kernel's name
    /// without its `void`, its parameter list and its namespaces, wrapped under the name column
    /// when longer (the JSON keeps every name whole).
    #[arg(long)]
    pub wide: bool,
    /// Kernels whose name matches REGEX are communication too, after cutrace's own table
    /// (NCCL, RCCL, MSCCL++, DeepEP, NVSHMEM, custom all-reduce, …: docs/REPORT.md,
    /// "Communication kernels"), for a library the table does not know: `--comm-kernels
    /// 'my_allreduce|ring_exchange'`. Matched against the name as recorded (mangled or
    /// demangled), anywhere in it; the verdict's rules list counts them as `comm_kernels`.
    #[arg(long, value_name = "REGEX")]
    pub comm_kernels: Option<String>,
    /// Add each step's critical path, and the window's: the chain of dependent host ops,
    /// launches, GPU work, stream waits and synchronizations whose length is the step's time,
    /// what it is made of, the segments to shorten first and the slack of large work off it
    /// (docs/REPORT.md, `critical_path`). For a job, across its ranks: which rank each step
    /// waited for. With --html the page draws it as the timeline's first lane, and a click on
    /// a segment shows it there.
    #[arg(long)]
    pub critical_path: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    if let Some(re) = &args.comm_kernels {
        crate::cmd::comm_kernels(re)?;
    }
    let from = time_arg("--from", args.from.as_deref())?;
    let to = time_arg("--to", args.to.as_deref())?;
    let limits = args.limit.unwrap_or_default();
    let which = args
        .steps
        .as_deref()
        .map_or_else(StepMatch::profiler_steps, StepMatch::parse);
    if let (true, Some(dest)) = (args.rank_summary, &args.output) {
        if let Some(w) = job::write_rank_summary(&args.files, &which, &limits, dest, out)? {
            eprintln!("cutrace: warning: {w}");
        }
        return Ok(0);
    }
    let line = std::sync::Mutex::new(ProgressLine::new());
    let progress = |k: usize, n: usize| {
        let _ = line
            .lock()
            .map(|mut l| l.show(|| format!("cutrace: read {k} of {n} ranks")));
    };
    let json = args.format == Format::Json;
    let mut req = job::Request::new(&which, limits, args.top, json);
    // A job has its own page; its time window is one trace's only.
    req.one_trace_options = job::given(false, args.from.is_some(), args.to.is_some());
    req.html = args.html.is_some();
    (req.threads, req.steps_given) = (args.threads, args.steps.is_some());
    req.wide = args.wide;
    req.critical_path = args.critical_path;
    let file = match job::report(&args.files, &req, &progress)? {
        job::Report::OneTrace(p) => {
            // A directory that held the trace deeper down (a TensorBoard log directory's latest
            // profile run) says which file was read.
            if let [given] = &args.files[..] {
                if given != &p {
                    eprintln!("cutrace: {}: reading {}", given.display(), p.display());
                }
            }
            p
        }
        job::Report::Job(bytes) => {
            line.into_inner().ok().map(ProgressLine::finish);
            out.write_all(&bytes)
                .context("writing the report to stdout")?;
            return Ok(0);
        }
        job::Report::JobPage(page) => {
            line.into_inner().ok().map(ProgressLine::finish);
            if let Some(dest) = &args.html {
                let mode = cutrace_export::files::mode_of_inputs(&args.files);
                html::write_to(dest, &page, out, mode, args.force)
                    .with_context(|| format!("writing {}", dest.display()))?;
            }
            return Ok(0);
        }
    };
    let trace = load(&file, &limits)?;
    // The trace start only matters for offsets like `12.5ms`; skip the pass otherwise.
    let relative = [from, to]
        .iter()
        .any(|b| matches!(b, Some(cutrace_analysis::TimeArg::FromStart(_))));
    let start = if relative {
        trace_bounds(&trace).map_or(0, |b| b.0)
    } else {
        0
    };
    let window = Window::resolve(from, to, start).context("--from/--to")?;
    let opts = Options {
        window,
        top: args.top,
        orphan_list: args.orphans,
        steps: Some(which.clone()),
    };
    let mut report =
        analyze(&trace, &opts).with_context(|| format!("analysing {}", file.display()))?;
    if args.critical_path {
        let (window, steps) = (opts.window.as_ref(), report.steps.as_ref());
        report.critical_path = Some(cutrace_analysis::critical_path::critical_path(
            &trace, window, steps, args.top,
        ));
    }
    if report.steps.is_none() && args.steps.is_some() {
        let windowed = opts.window.is_some();
        anyhow::bail!(steps_not_found(&which, &file, windowed, &trace));
    }
    if let Some(dest) = &args.html {
        let title = file.display().to_string();
        let page = html_page(&title, &trace, &report, opts.window.as_ref())?;
        let mode = cutrace_export::files::mode_of_inputs([&file]);
        html::write_to(dest, &page, out, mode, args.force)
            .with_context(|| format!("writing {}", dest.display()))?;
        return Ok(0);
    }
    match args.format {
        Format::Json => {
            let mut json = serde_json::to_vec(&report).context("serializing the report")?;
            json.push(b'\n');
            out.write_all(&json)
                .context("writing the report to stdout")?;
            if let Some(why) = window_outside_trace(&report) {
                eprintln!("cutrace: warning: {why}");
            }
        }
        Format::Text => {
            let mut text = String::new();
            text::report::render(&mut text, &file, &report, args.top, args.wide);
            out.write_all(text.as_bytes())
                .context("writing the report to stdout")?;
        }
    }
    Ok(0)
}

fn time_arg(flag: &str, v: Option<&str>) -> anyhow::Result<Option<cutrace_analysis::TimeArg>> {
    v.map(parse_time_arg).transpose().context(flag.to_owned())
}
