//! `cutrace convert`: a native trace (a part or a directory of parts) to plain CSV tables and a
//! JSON metadata file, so any tool (pandas, pyarrow, DuckDB, a spreadsheet) reads it.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use cutrace_trace::{Trace, TraceMeta};

/// Convert a trace into CSV tables (one file per record kind) plus meta.json.
#[derive(clap::Args)]
pub struct Args {
    /// A native trace (directory or .cutrace part) or a torch.profiler JSON trace.
    trace: PathBuf,
    /// Output directory for kernels.csv, api_calls.csv, memcpys.csv, memsets.csv, syncs.csv,
    /// ranges.csv, marks.csv, overheads.csv and meta.json.
    #[arg(long)]
    csv: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let t = cutrace_trace::native::read(&args.trace, &mut |_, _| {})
        .or_else(|_| cutrace_trace::open(&args.trace, &mut |_, _| {}))
        .with_context(|| format!("reading {}", args.trace.display()))?;
    std::fs::create_dir_all(&args.csv)
        .with_context(|| format!("creating {}", args.csv.display()))?;
    let headers = part_headers(&args.trace);
    write_csv(&args.csv, &t, &headers)?;
    let notes = match t.meta.notes.len() {
        0 => String::new(),
        1 => "; 1 note from the recorder in meta.json".into(),
        n => format!("; {n} notes from the recorder in meta.json"),
    };
    eprintln!(
        "cutrace: wrote {} kernels, {} API calls, {} copies, {} memsets, {} syncs, {} ranges to {}{notes}{}",
        t.kernels.len(),
        t.api_calls.len(),
        t.memcpys.len(),
        t.memsets.len(),
        t.syncs.len(),
        t.ranges.len(),
        args.csv.display(),
        if t.meta.complete { "" } else { " (the trace is INCOMPLETE; see meta.json)" }
    );
    Ok(0)
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
