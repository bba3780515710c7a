//! `cutrace convert`: a trace (native, or a torch.profiler/Kineto JSON) to plain CSV tables and a
//! JSON metadata file, so any tool (pandas, pyarrow, DuckDB, a spreadsheet) reads it; and/or to
//! Chrome Trace Event JSON for Perfetto UI, chrome://tracing, Holistic Trace Analysis and
//! TensorBoard (see `chrome.rs`).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cutrace_trace::{Trace, TraceMeta};

use super::chrome;

/// Convert a trace to CSV tables, or to Chrome Trace Event JSON for Perfetto / chrome://tracing /
/// HTA.
///
/// --csv writes one CSV file per record kind plus meta.json. --chrome writes the trace in the
/// shape torch.profiler (Kineto) exports: ui.perfetto.dev, chrome://tracing, Holistic Trace
/// Analysis and TensorBoard open it, and `cutrace report` reads it back to the same numbers.
/// Give --csv, --chrome, or both. A trace the recorder did not finish is converted as far as it
/// was recovered, and said to be incomplete.
#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("output").required(true).multiple(true).args(["csv", "chrome"])),
    after_help = "Examples:\n  \
        cutrace convert trace/ --csv tables/              CSV tables + meta.json in tables/\n  \
        cutrace convert trace/ --chrome trace.json.gz     for Perfetto / chrome://tracing / HTA"
)]
pub struct Args {
    /// A native trace (directory or .cutrace part) or a torch.profiler JSON trace.
    trace: PathBuf,
    /// Output directory for kernels.csv, api_calls.csv, memcpys.csv, memsets.csv, syncs.csv,
    /// ranges.csv, marks.csv, overheads.csv and meta.json.
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
    /// Output file for Chrome Trace Event JSON (Kineto's shape); gzip-compressed when the name
    /// ends in `.gz`. Timestamps are exact: µs with 3 decimals from integer nanoseconds.
    #[arg(long, value_name = "OUT.json[.gz]")]
    chrome: Option<PathBuf>,
    /// Overwrite the --chrome file if it exists.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(out) = &args.chrome {
        // Before the (possibly long) read: say at once that the output is in the way.
        if !args.force && std::fs::symlink_metadata(out).is_ok() {
            return Err(exists(out));
        }
    }
    let mut t = cutrace_trace::native::read(&args.trace, &mut |_, _| {})
        .or_else(|_| cutrace_trace::open(&args.trace, &mut |_, _| {}))
        .with_context(|| format!("reading {}", args.trace.display()))?;
    if let Some(dir) = &args.csv {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let headers = part_headers(&args.trace);
        write_csv(dir, &t, &headers)?;
        let notes = match t.meta.notes.len() {
            0 => String::new(),
            1 => "; 1 note from the recorder in meta.json".into(),
            n => format!("; {n} notes from the recorder in meta.json"),
        };
        eprintln!(
            "cutrace: wrote {} to {}{notes}{}",
            record_counts(&t),
            dir.display(),
            if t.meta.complete {
                ""
            } else {
                " (the trace is INCOMPLETE; see meta.json)"
            }
        );
    }
    if let Some(out) = &args.chrome {
        // Written relative to a whole second before the first record (Kineto's
        // baseTimeNanoseconds): absolute CUPTI times (~1.8e15 µs) do not fit a double's 53 bits at
        // ns resolution, and viewers parse `ts` as doubles. The base is in the file; cutrace's
        // importer adds it back.
        let base = chrome::time_base(&t);
        t.map_times(|x| chrome::to_base(x, base));
        let w = write_chrome_file(out, &t, base, args.force)?;
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
            n => format!("; {n} records that end before they start written with dur 0"),
        };
        eprintln!(
            "cutrace: wrote {}, {} flow arrows ({} events) to {}{inverted}{incomplete}",
            record_counts(&t),
            w.flows,
            w.events,
            out.display(),
        );
    }
    Ok(0)
}

/// "N kernels, N API calls, N copies, N memsets, N syncs, N ranges", for the summary lines.
fn record_counts(t: &Trace) -> String {
    format!(
        "{} kernels, {} API calls, {} copies, {} memsets, {} syncs, {} ranges",
        t.kernels.len(),
        t.api_calls.len(),
        t.memcpys.len(),
        t.memsets.len(),
        t.syncs.len(),
        t.ranges.len()
    )
}

fn exists(out: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} already exists; pass --force to overwrite it, or choose another --chrome path",
        out.display()
    )
}

/// The output file, gzip-compressed when its name ends in `.gz`.
enum Output {
    Plain(std::io::BufWriter<std::fs::File>),
    Gzip(Box<std::io::BufWriter<flate2::write::GzEncoder<std::io::BufWriter<std::fs::File>>>>),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Plain(w) => w.write(buf),
            Output::Gzip(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.write_all(buf),
            Output::Gzip(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.flush(),
            Output::Gzip(w) => w.flush(),
        }
    }
}

impl Output {
    fn finish(self) -> std::io::Result<()> {
        let mut file = match self {
            Output::Plain(w) => w,
            Output::Gzip(w) => w.into_inner().map_err(|e| e.into_error())?.finish()?,
        };
        file.flush()?;
        file.get_ref().sync_all()
    }
}

/// Writes the Chrome JSON to `out`: a new file (`--force`: replaces one), removed again if the
/// write fails, so a failed export leaves no half-written JSON behind.
fn write_chrome_file(
    out: &Path,
    t: &Trace,
    base: cutrace_trace::Ns,
    force: bool,
) -> anyhow::Result<chrome::Written> {
    // Without --force the file is created here, exclusively, so on failure it is ours to remove.
    // With --force the export goes to a new file beside it, renamed over it only once complete:
    // a failed export leaves the old file (or whatever the path is: a link, a device) untouched.
    let target = if force {
        if let Ok(m) = std::fs::symlink_metadata(out) {
            if !m.file_type().is_file() {
                anyhow::bail!(
                    "{} exists and is not a regular file (a link, a directory or a device); \
                     --force replaces only regular files: remove it or choose another --chrome path",
                    out.display()
                );
            }
        }
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export".into());
        out.with_file_name(format!(".{name}.cutrace-{}.tmp", std::process::id()))
    } else {
        out.to_path_buf()
    };
    let file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !force => {
            return Err(exists(out))
        }
        Err(e) => return Err(e).with_context(|| format!("creating {}", target.display())),
    };
    let file = std::io::BufWriter::with_capacity(1 << 20, file);
    let gz = out
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("gz"));
    let mut w = if gz {
        let enc = flate2::write::GzEncoder::new(file, flate2::Compression::new(3));
        Output::Gzip(Box::new(std::io::BufWriter::with_capacity(1 << 20, enc)))
    } else {
        Output::Plain(file)
    };
    let result = chrome::write_chrome(&mut w, t, base)
        .and_then(|n| w.finish().map(|()| n))
        .and_then(|n| {
            if force {
                std::fs::rename(&target, out)?;
            }
            Ok(n)
        });
    result.or_else(|e| {
        let _ = std::fs::remove_file(&target);
        Err(e).with_context(|| format!("writing {}", out.display()))
    })
}

fn part_headers(path: &Path) -> Vec<cutrace_trace::native::Header> {
    let parts: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|x| x == "cutrace"));
        v.sort();
        v
    } else {
        vec![path.to_owned()]
    };
    parts
        .iter()
        .filter_map(|p| cutrace_trace::native::read_file(p, &mut |_, _| {}).ok())
        .map(|(_, h)| h)
        .collect()
}

fn q(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn table(dir: &Path, name: &str, header: &str, body: String) -> anyhow::Result<()> {
    let p = dir.join(name);
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?,
    );
    writeln!(f, "{header}")?;
    f.write_all(body.as_bytes())?;
    f.flush()?;
    Ok(())
}

fn meta_json(m: &TraceMeta, headers: &[cutrace_trace::native::Header]) -> serde_json::Value {
    serde_json::json!({
        "paths": m.paths,
        "complete": m.complete,
        "incomplete_reason": m.incomplete_reason,
        "dropped_by_recorder": m.dropped_by_recorder,
        "dropped_by_cupti": m.dropped_by_cupti,
        "cupti_version": m.cupti_version,
        "cuda_driver_version": m.cuda_driver_version,
        "driver_version": m.driver_version,
        "host": m.host,
        "pid": m.pid,
        "devices": m.devices.iter().map(|d| serde_json::json!({
            "device": d.device, "name": d.name, "compute_capability": d.compute_capability,
            "sm_count": d.sm_count, "global_memory_bytes": d.global_memory_bytes, "uuid": d.uuid,
        })).collect::<Vec<_>>(),
        "skipped_events": m.skipped_events,
        // Every part's notes (HEAD and later META chunks), each with its pid and part file;
        // `parts[].notes` holds only what each header had.
        "notes": m.notes,
        "parts": headers,
    })
}

/// Writes every table of `t` as CSV into `dir`.
pub fn write_csv(
    dir: &Path,
    t: &Trace,
    headers: &[cutrace_trace::native::Header],
) -> anyhow::Result<()> {
    let mut b = String::new();
    for k in &t.kernels {
        let _ = writeln!(
            b,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            k.device,
            k.context,
            k.stream,
            k.correlation_id,
            k.start_ns,
            k.end_ns,
            q(t.str(k.name)),
            k.grid[0],
            k.grid[1],
            k.grid[2],
            k.block[0],
            k.block[1],
            k.block[2],
            k.registers_per_thread,
            k.static_shared_bytes,
            k.dynamic_shared_bytes,
            k.graph_id
        );
    }
    table(dir, "kernels.csv", "device,context,stream,correlation_id,start_ns,end_ns,name,grid_x,grid_y,grid_z,block_x,block_y,block_z,registers_per_thread,static_shared_bytes,dynamic_shared_bytes,graph_id", std::mem::take(&mut b))?;
    for a in &t.api_calls {
        let _ = writeln!(
            b,
            "{:?},{},{},{},{},{},{},{},{}",
            a.kind,
            q(t.str(a.name)),
            a.cbid,
            a.process,
            a.thread,
            a.correlation_id,
            a.start_ns,
            a.end_ns,
            a.return_value
        );
    }
    table(
        dir,
        "api_calls.csv",
        "kind,name,cbid,process,thread,correlation_id,start_ns,end_ns,return_value",
        std::mem::take(&mut b),
    )?;
    for m in &t.memcpys {
        let _ = writeln!(
            b,
            "{},{},{},{},{},{},{},{}",
            m.kind.label(),
            m.bytes,
            m.device,
            m.context,
            m.stream,
            m.correlation_id,
            m.start_ns,
            m.end_ns
        );
    }
    table(
        dir,
        "memcpys.csv",
        "kind,bytes,device,context,stream,correlation_id,start_ns,end_ns",
        std::mem::take(&mut b),
    )?;
    for m in &t.memsets {
        let _ = writeln!(
            b,
            "{},{},{},{},{},{},{},{}",
            m.bytes, m.value, m.device, m.context, m.stream, m.correlation_id, m.start_ns, m.end_ns
        );
    }
    table(
        dir,
        "memsets.csv",
        "bytes,value,device,context,stream,correlation_id,start_ns,end_ns",
        std::mem::take(&mut b),
    )?;
    for s in &t.syncs {
        let _ = writeln!(
            b,
            "{},{},{},{},{},{},{}",
            s.kind.label(),
            s.device,
            s.context,
            s.stream.map(|x| x.to_string()).unwrap_or_default(),
            s.correlation_id,
            s.start_ns,
            s.end_ns
        );
    }
    table(
        dir,
        "syncs.csv",
        "kind,device,context,stream,correlation_id,start_ns,end_ns",
        std::mem::take(&mut b),
    )?;
    for r in &t.ranges {
        let _ = writeln!(
            b,
            "{:?},{},{},{},{},{}",
            r.domain,
            q(t.str(r.name)),
            r.process,
            r.thread,
            r.start_ns,
            r.end_ns
        );
    }
    table(
        dir,
        "ranges.csv",
        "domain,name,process,thread,start_ns,end_ns",
        std::mem::take(&mut b),
    )?;
    for m in &t.marks {
        let _ = writeln!(
            b,
            "{},{},{},{}",
            q(t.str(m.name)),
            m.process,
            m.thread,
            m.ts_ns
        );
    }
    table(
        dir,
        "marks.csv",
        "name,process,thread,ts_ns",
        std::mem::take(&mut b),
    )?;
    for o in &t.overheads {
        let _ = writeln!(
            b,
            "{},{},{},{},{}",
            q(t.str(o.kind)),
            o.process,
            o.thread,
            o.start_ns,
            o.end_ns
        );
    }
    table(
        dir,
        "overheads.csv",
        "kind,process,thread,start_ns,end_ns",
        std::mem::take(&mut b),
    )?;
    let meta = meta_json(&t.meta, headers);
    std::fs::write(dir.join("meta.json"), serde_json::to_vec_pretty(&meta)?)?;
    Ok(())
}
