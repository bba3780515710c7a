//! `cutrace convert`: a trace (native, or a torch.profiler/Kineto JSON) to plain CSV tables or
//! Parquet files and a JSON metadata file, so any tool (pandas, pyarrow, DuckDB, Polars, a
//! spreadsheet) reads it; and/or to
//! Chrome Trace Event JSON for Perfetto UI, chrome://tracing, Holistic Trace Analysis and
//! TensorBoard (see `chrome.rs`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cutrace_export::counter_tracks::counter_timeline;
use cutrace_export::files;
use cutrace_export::input::{self, Unit};
use cutrace_export::outputs::{
    check_distinct, is_stdout, shown, table_groups, tables_in, Output, Outputs,
};
use cutrace_export::staged::Staged;
use cutrace_export::text::{count, name_some};
use cutrace_export::{chrome, meta, perfetto};
use cutrace_trace::Trace;

/// Convert a trace to CSV or Parquet tables, to Perfetto's own format, or to Chrome Trace Event
/// JSON for Perfetto / chrome://tracing / HTA.
///
/// --csv writes one CSV file per record kind plus meta.json; --parquet the same tables as Parquet
/// files (typed columns: unsigned integers stay unsigned, timestamps exact nanoseconds), for
/// pandas, pyarrow, DuckDB or Polars. --chrome writes the trace in the
/// shape torch.profiler (Kineto) exports: ui.perfetto.dev, chrome://tracing, Holistic Trace
/// Analysis and TensorBoard open it, and `cutrace report` reads it back to the same numbers.
/// --perfetto writes Perfetto's protobuf format: a quarter of the JSON's size, for traces too
/// big for the JSON importers. Give any of --csv, --parquet, --chrome, --perfetto, each its own
/// path (--csv and --parquet may share a directory: their file names differ). A trace the
/// recorder did not finish is converted as far as it was recovered, and said to be incomplete.
#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("output").required(true).multiple(true).args(["csv", "parquet", "chrome", "perfetto"])),
    after_help = "Examples:\n  \
        cutrace convert trace/ --csv tables/              CSV tables + meta.json in tables/\n  \
        cutrace convert trace/ --parquet tables/          kernels.parquet, api_calls.parquet, …\n  \
        cutrace convert trace/ --chrome trace.json.gz     for Perfetto / chrome://tracing / HTA\n  \
        cutrace convert trace/ --perfetto trace.pftrace   Perfetto's own format: big traces, small file\n  \
        cutrace convert trace/ --chrome - | gzip > t.json.gz   `-`: to stdout\n  \
        cutrace convert trace/ --csv t/ --parquet t/ --force   replace the tables already in t/\n  \
        cutrace convert job/ --parquet pq/                a job: pq/kernels/rank=0/part.parquet, …"
)]
pub struct Args {
    /// A native trace (directory or .cutrace part) or a torch.profiler JSON trace; or a job's
    /// (as `cutrace report` reads one), to --parquet DIR/TABLE/rank=N/part.parquet (docs/SQL.md).
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
    /// Overwrite the --chrome / --perfetto file if it exists, and replace the tables in a
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

pub fn run(args: Args) -> anyhow::Result<i32> {
    // Before the (possibly long) read: a table directory that cannot be one.
    for (flag, dir) in [("--csv", &args.csv), ("--parquet", &args.parquet)] {
        if let Some(dir) = dir {
            if is_stdout(dir) {
                anyhow::bail!(
                    "{flag} takes a directory (it writes one file per table there); `-` (stdout) \
                     is for --chrome and --perfetto; write ./- for a directory named `-`"
                );
            }
            if std::fs::symlink_metadata(dir).is_ok() && std::fs::metadata(dir).is_err() {
                anyhow::bail!(
                    "{flag} {} is a link to nothing; give a directory",
                    dir.display()
                );
            }
            // The path itself or the nearest part of it that exists must be a directory.
            if let Some(file) = dir
                .ancestors()
                .find(|a| std::fs::metadata(a).is_ok())
                .filter(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
            {
                anyhow::bail!(
                    "{flag} takes a directory (it writes one file per table there), but {} is a \
                     file; choose a new or existing directory",
                    file.display()
                );
            }
        }
    }
    for (flag, out) in [("--chrome", &args.chrome), ("--perfetto", &args.perfetto)] {
        if let Some(out) = out {
            if is_stdout(out) {
                if std::io::stdout().is_terminal() {
                    anyhow::bail!(
                        "{flag} - writes the export to stdout, which is a terminal here; \
                         redirect it to a file or a pipe (`{flag} - | gzip > out.gz`), or give a \
                         file name"
                    );
                }
                continue;
            }
            // Before the (possibly long) read: say at once that the output cannot be written.
            if std::fs::metadata(out).is_ok_and(|m| m.is_dir()) {
                anyhow::bail!(
                    "{flag} takes a file name, but {} is a directory",
                    out.display()
                );
            }
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                if !parent.is_dir() {
                    anyhow::bail!(
                        "{flag} {}: the folder {} does not exist",
                        out.display(),
                        parent.display()
                    );
                }
            }
            if !args.force && std::fs::symlink_metadata(out).is_ok() {
                return Err(exists(out, flag));
            }
        }
    }
    let limits = args.limit.unwrap_or_default();
    let trace = &match input::classify(&args.traces, &limits)? {
        input::Inputs::Trace(p) => p,
        input::Inputs::Job { units, notes } => return run_job(&args, &units, notes),
    };
    let outs = Outputs {
        csv: args.csv.as_ref(),
        parquet: args.parquet.as_ref(),
        chrome: args.chrome.as_ref(),
        perfetto: args.perfetto.as_ref(),
    };
    check_distinct(&outs, trace).map_err(anyhow::Error::msg)?;
    let groups = table_groups(args.csv.as_ref(), args.parquet.as_ref());
    // A directory that holds an earlier export's tables: replaced only with --force, so that a
    // directory never ends up with tables of two traces (as --chrome never overwrites a file).
    if !args.force {
        for g in &groups {
            let found = cutrace_export::files::shown_entries(&g.dir, &tables_in(&g.dir));
            if !found.is_empty() {
                anyhow::bail!(
                    "{} {} already holds cutrace tables ({}); pass --force to replace them (the \
                     tables of a format not written this time are removed, so the directory \
                     holds one export), or choose another directory",
                    g.flags(),
                    g.dir.display(),
                    name_some(&found)
                );
            }
        }
    }
    // As `report` reads: progress on stderr for a long read, the reader picked by the input.
    let mut t = super::load(trace, &limits)?;
    if t.meta.damaged_regions > 0 && !args.allow_damaged {
        anyhow::bail!(
            "{}: the trace is damaged ({} bytes in {} stretches skipped; every good chunk around \
             them was read: {}); nothing written. `--allow-damaged` converts what was recovered",
            trace.display(),
            t.meta.damaged_bytes,
            t.meta.damaged_regions,
            t.meta.incomplete_reason.as_deref().unwrap_or("")
        );
    }
    // Exports are as private as the trace: the most restrictive mode of the files read.
    let mode = files::mode_of_inputs(
        std::iter::once(trace.as_path()).chain(t.meta.paths.iter().map(Path::new)),
    );
    for g in &groups {
        files::create_dir_all(&g.dir, files::dir_mode(mode))
            .with_context(|| format!("creating {}", g.dir.display()))?;
        let meta = meta::meta_json_text(&t, args.with_cmdline)?;
        // Both formats of one directory are staged together and renamed into place together.
        let mut st = Staged::new(&g.dir, mode);
        if g.csv {
            st.csv_tables(&t)?;
        }
        if g.parquet {
            st.parquet_tables(&t, &meta)?;
        }
        st.write("meta.json", meta.as_bytes())?;
        let removed = st.commit(args.force)?;
        let removed = match removed.len() {
            0 => String::new(),
            n => format!(
                "; removed {} of an earlier export ({})",
                count(n, "table", "tables"),
                name_some(&removed)
            ),
        };
        let incomplete = if t.meta.complete {
            ""
        } else {
            " (the trace is INCOMPLETE; see meta.json)"
        };
        if g.csv {
            let notes = notes_at(&t, "in meta.json");
            eprintln!(
                "cutrace: wrote {} to {}{notes}{incomplete}{}",
                record_counts(&t),
                g.dir.display(),
                if g.parquet { "" } else { removed.as_str() }
            );
        }
        if g.parquet {
            let notes = notes_at(
                &t,
                "in meta.json and in each file's `cutrace.meta` key-value metadata",
            );
            eprintln!(
                "cutrace: wrote {} to {} as Parquet{notes}{incomplete}{removed}",
                record_counts(&t),
                g.dir.display(),
            );
        }
    }
    if let Some(out) = &args.perfetto {
        let w = export_file(out, "--perfetto", args.force, mode, |w| {
            perfetto::write_perfetto(w, &t)
        })?;
        let inverted = match w.inverted {
            0 => String::new(),
            n => format!(
                "; {} that end before they start written as zero-length slices",
                count(n as usize, "record", "records")
            ),
        };
        let notes = notes_at(
            &t,
            ": not included in the .pftrace (--csv or --parquet writes them to meta.json; \
             `cutrace report` shows them)",
        );
        eprintln!(
            "cutrace: wrote {}, {} ({}, {}) to {}{inverted}{notes}{}",
            record_counts(&t),
            count(w.flows as usize, "flow arrow", "flow arrows"),
            count(w.tracks as usize, "track", "tracks"),
            count(w.packets as usize, "packet", "packets"),
            shown(out),
            if t.meta.complete {
                ""
            } else {
                " (the trace is INCOMPLETE: this is what was recovered)"
            }
        );
        for s in counter_timeline(&t).summary(".pftrace") {
            eprintln!("cutrace: {s}");
        }
    }
    if let Some(out) = &args.chrome {
        // Last: the trace's times are moved to the file's time base (see write_trace).
        let w = export_file(out, "--chrome", args.force, mode, |w| {
            chrome::write_trace(w, &mut t)
        })?;
        let incomplete = if t.meta.complete {
            String::new()
        } else {
            format!(
                " (the trace is INCOMPLETE{}: this is what was recovered; the file's \"cutrace\" \
                 member says so)",
                t.meta
                    .incomplete_reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )
        };
        let inverted = match w.inverted {
            0 => String::new(),
            n => format!(
                "; {} that end before they start written with dur 0",
                count(n as usize, "record", "records")
            ),
        };
        let notes = notes_at(
            &t,
            "in the file's top-level \"cutrace\" member (\"notes\"), which viewers ignore",
        );
        eprintln!(
            "cutrace: wrote {}, {} ({}) to {}{inverted}{notes}{incomplete}",
            record_counts(&t),
            count(w.flows as usize, "flow arrow", "flow arrows"),
            count(w.events as usize, "event", "events"),
            shown(out),
        );
        for s in counter_timeline(&t).summary("JSON (\"ph\":\"C\" events)") {
            eprintln!("cutrace: {s}");
        }
        if w.rows_past_u32_tid > 0 {
            eprintln!(
                "cutrace: warning: {} of overlapping GPU work in {} have a tid above 2^32-1; \
                 Perfetto's JSON importer shows them on the GPU's process row and drops the \
                 events that overlap there (--perfetto keeps every row apart)",
                count(w.rows_past_u32_tid as usize, "row", "rows"),
                shown(out)
            );
        }
    }
    Ok(0)
}

/// A job (several traces, one per rank) to hive-style Parquet partitions, ranks read in parallel.
fn run_job(args: &Args, units: &[Unit], notes: Vec<String>) -> anyhow::Result<i32> {
    use cutrace_export::parquet::job;
    let (Some(dir), None, None, None) = (&args.parquet, &args.csv, &args.chrome, &args.perfetto)
    else {
        anyhow::bail!("{}", job::JobError::NotParquet(units.len()));
    };
    let opts = job::JobOptions {
        limits: args.limit.unwrap_or_default(),
        allow_damaged: args.allow_damaged,
        with_cmdline: args.with_cmdline,
        replace: args.force,
        workers: input::default_threads(),
    };
    let line = std::sync::Mutex::new(super::progress::ProgressLine::new());
    let done = |n: usize| {
        let text = || format!("cutrace: converted {n} of {} ranks", units.len());
        let _ = line.lock().map(|mut l| l.show(text));
    };
    let w = job::write_job(dir, units, &opts, &done)?;
    let _ = line.into_inner().map(|l| l.finish());
    for l in notes.iter().chain(&w.lines(dir)) {
        eprintln!("cutrace: {l}");
    }
    Ok(0)
}

/// "N kernels, N API calls, N copies, N memsets, N syncs, N ranges" (singular for 1), for the
/// summary lines.
fn record_counts(t: &Trace) -> String {
    [
        count(t.kernels.len(), "kernel", "kernels"),
        count(t.api_calls.len(), "API call", "API calls"),
        count(t.memcpys.len(), "copy", "copies"),
        count(t.memsets.len(), "memset", "memsets"),
        count(t.syncs.len(), "sync", "syncs"),
        count(t.ranges.len(), "range", "ranges"),
    ]
    .join(", ")
}

/// "; N notes from the recorder WHERE" for a summary line: where this output put the recorder's
/// notes (or that it could not). Empty when the trace has none.
fn notes_at(t: &Trace, place: &str) -> String {
    match t.meta.notes.len() {
        0 => String::new(),
        n => format!(
            "; {} from the recorder{}{place}",
            count(n, "note", "notes"),
            if place.starts_with(':') { "" } else { " " }
        ),
    }
}

fn exists(out: &Path, flag: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} already exists; pass --force to overwrite it, or choose another {flag} path",
        out.display()
    )
}

/// Writes one export file through `write`: gzip-compressed when the name ends in `.gz`; to
/// stdout, as is, for `-`. The export goes to a new file beside `out` (exclusive create,
/// random name, permission bits `mode`), put in place only once complete: without --force it
/// never replaces a name that appeared meanwhile; with --force it replaces a regular file (a
/// link there is replaced, not written through). A failed export leaves `out` untouched.
fn export_file<T>(
    out: &Path,
    flag: &str,
    force: bool,
    mode: u32,
    write: impl FnOnce(&mut Output) -> std::io::Result<T>,
) -> anyhow::Result<T> {
    if force {
        if let Ok(m) = std::fs::symlink_metadata(out) {
            if !m.file_type().is_file() {
                anyhow::bail!(
                    "{} exists and is not a regular file (a link, a directory or a device); \
                     --force replaces only regular files: remove it or choose another {flag} path",
                    out.display()
                );
            }
        }
    }
    let mut w = Output::open(out, mode).with_context(|| format!("creating {}", out.display()))?;
    // On an error the OutFile is dropped, which removes the temporary file.
    let n = write(&mut w).with_context(|| format!("writing {}", shown(out)))?;
    let file = w
        .finish()
        .with_context(|| format!("writing {}", shown(out)))?;
    match file.map(|f| f.commit(force)) {
        Some(Err(e)) if e.kind() == std::io::ErrorKind::AlreadyExists && !force => {
            Err(exists(out, flag))
        }
        Some(Err(e)) => Err(e).with_context(|| format!("writing {}", shown(out))),
        _ => Ok(n),
    }
}
