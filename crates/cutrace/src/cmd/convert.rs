//! `cutrace convert`: a trace (native, or a torch.profiler/Kineto JSON) to plain CSV tables or
//! Parquet files and a JSON metadata file, so any tool (pandas, pyarrow, DuckDB, Polars, a
//! spreadsheet) reads it; and/or to
//! Chrome Trace Event JSON for Perfetto UI, chrome://tracing, Holistic Trace Analysis and
//! TensorBoard (see `chrome.rs`). What may be asked, how the outputs are staged and put in place,
//! and what is said of them is `cutrace_export::convert`'s; this module parses the flags, reads
//! the trace with progress on stderr and prints what was written.

use std::io::IsTerminal;
use std::path::PathBuf;

use cutrace_export::convert::{ConvertPlan, JobPlan, Request};

/// Convert a trace to CSV or Parquet tables, to Perfetto's own format, or to Chrome Trace Event
/// JSON for Perfetto / chrome://tracing / HTA.
///
/// --csv writes one CSV file per record kind plus meta.json; --parquet the same tables as Parquet
/// files (typed columns: unsigned integers stay unsigned, timestamps exact nanoseconds), for
/// pandas, pyarrow, DuckDB or Polars. --chrome writes the trace in the
/// shape torch.profiler (Kineto) exports: ui.perfetto.dev, chrome://tracing, Holistic Trace
/// Analysis and TensorBoard open it, and `cutrace report` reads it back to the same numbers.
/// --perfetto writes Perfetto's protobuf format: a quarter of the JSON's size, for traces too
/// big for the JSON importers. --pprof writes the PC samples of a `cutrace profile
/// --pc-sampling` trace as a pprof profile. Give any of --csv, --parquet, --chrome, --perfetto,
/// --pprof, each its own
/// path (--csv and --parquet may share a directory: their file names differ). A trace the
/// recorder did not finish is converted as far as it was recovered, and said to be incomplete.
///
/// A distributed job (several ranks' traces, or a directory of them, as `cutrace report` reads
/// one) converts to every format but --pprof: --parquet to hive-style partitions
/// (DIR/TABLE/rank=N/part.parquet); --csv to one file per table holding every rank's rows with
/// a `rank` column last, and DIR/meta/rank=N/meta.json; --chrome and --perfetto to one file in
/// which each rank is a process (`rank N (host H, pid P)`) holding its GPUs, streams and host
/// threads. Ranks are numbered as `cutrace report JOB` numbers them. Timestamps stay each
/// host's own clock (nothing is shifted): ranks of one host line up exactly, ranks of different
/// hosts are offset by their clocks' difference; the file and the summary on stderr say which
/// case the job is in.
#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("output").required(true).multiple(true).args(["csv", "parquet", "chrome", "perfetto", "pprof"])),
    after_help = "Examples:\n  \
        cutrace convert trace/ --csv tables/              CSV tables + meta.json in tables/\n  \
        cutrace convert trace/ --parquet tables/          kernels.parquet, api_calls.parquet, …\n  \
        cutrace convert trace/ --chrome trace.json.gz     for Perfetto / chrome://tracing / HTA\n  \
        cutrace convert trace/ --perfetto trace.pftrace   Perfetto's own format: big traces, small file\n  \
        cutrace convert pcs/ --pprof stalls.pb.gz         PC samples for go tool pprof / speedscope\n  \
        cutrace convert trace/ --chrome - | gzip > t.json.gz   `-`: to stdout\n  \
        cutrace convert trace/ --csv t/ --parquet t/ --force   replace the tables already in t/\n  \
        cutrace convert job/ --parquet pq/                a job: pq/kernels/rank=0/part.parquet, …\n  \
        cutrace convert job/ --perfetto job.pftrace       a job: one process per rank, one time axis"
)]
pub struct Args {
    /// A native trace (directory or .cutrace part) or a torch.profiler JSON trace; or a job's
    /// (as `cutrace report` reads one): to --parquet DIR/TABLE/rank=N/part.parquet (docs/SQL.md),
    /// --csv, --chrome or --perfetto (one process per rank).
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Output directory for kernels.csv, api_calls.csv, memcpys.csv, memsets.csv, syncs.csv,
    /// ranges.csv, marks.csv, overheads.csv and meta.json. A directory that already holds
    /// cutrace tables (CSV or Parquet) is refused without --force.
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
    /// Output directory for the same tables as Parquet (kernels.parquet, api_calls.parquet, …)
    /// and meta.json; each file also holds meta.json's content under the key `cutrace.meta`.
    /// May be the --csv directory. A directory that already holds cutrace tables is refused
    /// without --force.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
    /// Output file for Chrome Trace Event JSON (Kineto's shape); gzip-compressed when the name
    /// ends in `.gz`; `-` writes it to stdout, uncompressed (`./-` is a file named `-`).
    /// Timestamps are exact: µs with 3 decimals from integer nanoseconds.
    #[arg(long, value_name = "OUT.json[.gz]")]
    chrome: Option<PathBuf>,
    /// Output file for Perfetto's protobuf trace format (ui.perfetto.dev, trace_processor):
    /// much smaller than --chrome and without the JSON importer's size limits; gzip-compressed
    /// when the name ends in `.gz`; `-` writes it to stdout (not a terminal), uncompressed.
    /// Timestamps are CUPTI's integer nanoseconds.
    #[arg(long, value_name = "OUT.pftrace")]
    perfetto: Option<PathBuf>,
    /// Output file for the PC samples of a `cutrace profile --pc-sampling` trace as a pprof
    /// profile (`go tool pprof`, speedscope, Pyroscope): one location per sampled instruction
    /// with its source line, the stall reason, device and pid as labels, values `samples` and
    /// `samples_not_issued`; gzip-compressed when the name ends in `.gz` (as pprof's tools
    /// expect: name it `.pb.gz`); `-` writes it to stdout (not a terminal).
    #[arg(long, value_name = "OUT.pb.gz")]
    pprof: Option<PathBuf>,
    /// Overwrite the --chrome / --perfetto / --pprof file if it exists, and replace the tables in a
    /// --csv / --parquet directory that holds some: the tables of the format not written this
    /// time are removed from it, so a directory never mixes two exports.
    #[arg(long)]
    force: bool,
    /// Convert a trace with damaged chunks (the report says what was lost): without it such a
    /// trace is refused, so a damaged file is not silently turned into a smaller, clean-looking
    /// one. A trace merely cut off (a recorder killed) converts without it.
    #[arg(long)]
    allow_damaged: bool,
    /// Raise the readers' limits for an unusual trace: `NAME=VALUE[,NAME=VALUE…]` with NAME one
    /// of chunk-bytes, chunk-rows, rows-per-byte, string-bytes, event-bytes and VALUE an integer
    /// (K, M, G: binary multiples). The defaults are far above any recorded trace; see
    /// docs/FORMAT.md, "Limits".
    #[arg(long, value_name = "NAME=VALUE")]
    limit: Option<cutrace_trace::Limits>,
    /// Copy each part's recorded command line (`cutrace record --record-cmdline`) into
    /// meta.json and the Parquet files. Left out by default: a command line can hold secrets,
    /// and the recorder asked for it keeps it in a file only its owner reads.
    #[arg(long)]
    with_cmdline: bool,
}

/// Checks the request before the read (`ConvertPlan::new`), reads the trace with progress, and
/// prints a line for each output as it is put in place.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let req = Request {
        traces: args.traces,
        csv: args.csv,
        parquet: args.parquet,
        chrome: args.chrome,
        perfetto: args.perfetto,
        pprof: args.pprof,
        force: args.force,
        allow_damaged: args.allow_damaged,
        with_cmdline: args.with_cmdline,
        limits: args.limit.unwrap_or_default(),
        stdout_is_terminal: std::io::stdout().is_terminal(),
    };
    match ConvertPlan::new(req)? {
        ConvertPlan::Trace(plan) => {
            // As `report` reads: progress on stderr for a long read, the reader picked by the
            // input.
            let t = super::load(plan.trace(), plan.limits())?;
            plan.run(t, &mut |w| {
                for l in w.lines() {
                    eprintln!("cutrace: {l}");
                }
            })?;
        }
        ConvertPlan::Job(plan) => run_job(plan)?,
    }
    Ok(0)
}

/// A job (several traces, one per rank) to hive-style Parquet partitions and/or one Chrome or
/// Perfetto file and CSV tables with a rank column, with a line of progress.
fn run_job(plan: JobPlan) -> anyhow::Result<()> {
    let traces = plan.traces();
    let line = std::sync::Mutex::new(super::progress::ProgressLine::new());
    let done = |what: &'static str, n: usize| {
        let text = || format!("cutrace: {what} {n} of {traces} ranks");
        let _ = line.lock().map(|mut l| l.show(text));
    };
    let w = plan.run(&done)?;
    let _ = line.into_inner().map(|l| l.finish());
    for l in w.lines() {
        eprintln!("cutrace: {l}");
    }
    Ok(())
}
