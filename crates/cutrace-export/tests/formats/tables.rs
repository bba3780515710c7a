//! The tables CSV and Parquet share (`tables::build`, `csv::write`, `parquet::write`), from
//! traces written here with the native format's own writer: the NVTX domain of ranges and marks
//! reaches the tables (also through a Chrome export and back, and into Perfetto), and the GPU
//! tables say which process recorded each row (`pid`), also in a trace merged from several
//! processes. Where pyarrow is installed, it reads the Parquet files to the CSV's values
//! (tests/parquet_pyarrow.py).

use std::collections::HashMap;
use std::io::{Cursor, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_export::{chrome, csv, meta, parquet, perfetto, tables};
use cutrace_trace::native::{marker_flags, part_file_name, Header, MarkerEvent, Tail, Writer};
use cutrace_trace::{CopyKind, Memcpy, Memset, ReadOptions, SyncKind, Synchronization, Trace};

use cutrace_testkit::records::push_launch_and_kernel;
use cutrace_testkit::{loud, repo, Dir};

fn load(path: &Path) -> Trace {
    cutrace_export::input::load(path, &ReadOptions::default(), &mut |_, _| {}).unwrap()
}

/// Every table of the trace at `src` into `dir`, as CSV and as Parquet with meta.json's text, as
/// `cutrace convert --csv DIR --parquet DIR` writes them.
fn export_tables(src: &Path, dir: &Path) {
    let t = load(src);
    std::fs::create_dir_all(dir).unwrap();
    let meta = meta::meta_json_text(&t, false).unwrap();
    std::fs::write(dir.join("meta.json"), &meta).unwrap();
    for name in tables::NAMES {
        let tb = tables::build(&t, name);
        let mut f = std::fs::File::create(dir.join(format!("{name}.csv"))).unwrap();
        csv::write(&mut f, &tb).unwrap();
        f.flush().unwrap();
        let mut f = std::fs::File::create(dir.join(format!("{name}.parquet"))).unwrap();
        parquet::write(&mut f, &tb, &meta).unwrap();
        f.flush().unwrap();
    }
}

/// Every table `t` is exported to and meta.json into `dir`, as `convert --csv DIR --parquet
/// DIR` writes them; meta.json's text.
fn write_every_table(t: &Trace, dir: &Dir) -> String {
    let meta = meta::meta_json_text(t, false).unwrap();
    std::fs::write(dir.path("meta.json"), &meta).unwrap();
    for name in tables::names_for(t) {
        let tb = tables::build(t, name);
        let mut f = std::fs::File::create(dir.path(&format!("{name}.csv"))).unwrap();
        csv::write(&mut f, &tb).unwrap();
        f.flush().unwrap();
        let mut f = std::fs::File::create(dir.path(&format!("{name}.parquet"))).unwrap();
        parquet::write(&mut f, &tb, &meta).unwrap();
        f.flush().unwrap();
    }
    meta
}

/// The fields of one CSV line (RFC 4180 quoting, as the export writes it).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// A CSV table as rows of column → value (no field of these tables spans lines).
fn read_csv(dir: &Path, table: &str) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(dir.join(format!("{table}.csv"))).unwrap();
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    lines
        .map(|l| {
            let f = fields(l);
            assert_eq!(f.len(), header.len(), "{l}");
            header.iter().cloned().zip(f).collect()
        })
        .collect()
}

fn header(pid: u32) -> Header {
    Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        ..Header::default()
    }
}

/// One process's part: a launch and its kernel, a copy, a memset and a sync (correlation ids
/// 1–4, stream 7, as every process counts them), and NVTX ranges and marks in the domains
/// "NCCL", "MyDomain" and NVTX's default one (which CUPTI reports as null: an empty string).
fn part(pid: u32) -> Vec<u8> {
    let mut w = Writer::new(Cursor::new(Vec::new()), &header(pid)).unwrap();
    push_launch_and_kernel(&mut w, pid, 1_000);
    w.push_memcpy(&Memcpy {
        kind: CopyKind::HtoD,
        bytes: 64,
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 2,
        start_ns: 5_000,
        end_ns: 5_100,
    });
    w.push_memset(&Memset {
        bytes: 64,
        value: 0,
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 3,
        start_ns: 5_200,
        end_ns: 5_300,
    });
    w.push_sync(
        &Synchronization {
            kind: SyncKind::StreamSynchronize,
            device: 0,
            context: 1,
            stream: Some(7),
            correlation_id: 4,
            start_ns: 5_300,
            end_ns: 5_400,
            wait_on_stream: None,
            event_record_correlation: None,
        },
        true,
    );
    let empty = w.intern("");
    let marker = |w: &mut Writer<Cursor<Vec<u8>>>,
                  ts_ns: u64,
                  id: u32,
                  flags: u32,
                  name: &str,
                  domain: &str| {
        let name = w.intern(name);
        let domain = if domain.is_empty() {
            empty
        } else {
            w.intern(domain)
        };
        w.push_marker(&MarkerEvent {
            ts_ns,
            id,
            flags,
            name,
            domain,
            process: pid,
            thread: 1,
        });
    };
    use marker_flags::{END, INSTANTANEOUS, START};
    marker(&mut w, 100, 1, START, "allreduce", "NCCL");
    marker(&mut w, 200, 1, END, "", "NCCL");
    marker(&mut w, 300, 2, START, "step", "MyDomain");
    marker(&mut w, 400, 2, END, "", "MyDomain");
    marker(&mut w, 500, 3, START, "plain", "");
    marker(&mut w, 600, 3, END, "", "");
    marker(&mut w, 700, 4, INSTANTANEOUS, "ckpt", "MyDomain");
    marker(&mut w, 800, 5, INSTANTANEOUS, "tick", "");
    w.finish(&Tail::default()).unwrap().into_inner()
}

/// A trace directory with one part per pid.
fn trace(dir: &Dir, pids: &[u32]) -> PathBuf {
    let t = dir.path("trace");
    std::fs::create_dir_all(&t).unwrap();
    for &pid in pids {
        std::fs::write(t.join(part_file_name("h", pid, 0)), part(pid)).unwrap();
    }
    t
}

fn pyarrow() -> bool {
    Command::new("python3")
        .args(["-c", "import pyarrow"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The Parquet export read by pyarrow equals the CSV export (tests/parquet_pyarrow.py).
fn pyarrow_agrees(pq: &Path, csv: &Path) {
    if !pyarrow() {
        loud!("SKIPPED (pyarrow not installed): reading the Parquet export with pyarrow");
        return;
    }
    let o = Command::new("python3")
        .arg(repo().join("tests/parquet_pyarrow.py"))
        .args([pq, csv])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pyarrow: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn nvtx_domains_reach_the_ranges_and_marks_tables() {
    let dir = Dir::new("tables-domains");
    let t = trace(&dir, &[42]);
    let c = dir.path("tables");
    export_tables(&t, &c);
    let ranges: Vec<(String, String, String)> = read_csv(&c, "ranges")
        .into_iter()
        .map(|r| {
            (
                r["name"].clone(),
                r["domain"].clone(),
                r["nvtx_domain"].clone(),
            )
        })
        .collect();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        ranges,
        [
            s("allreduce", "Host", "NCCL"),
            s("step", "Host", "MyDomain"),
            // NVTX's default domain: null (an empty field).
            s("plain", "Host", ""),
        ]
    );
    let marks: Vec<(String, String)> = read_csv(&c, "marks")
        .into_iter()
        .map(|r| (r["name"].clone(), r["nvtx_domain"].clone()))
        .collect();
    assert_eq!(
        marks,
        [
            ("ckpt".to_owned(), "MyDomain".to_owned()),
            ("tick".to_owned(), String::new())
        ]
    );
    let pq = std::fs::read(c.join("ranges.parquet")).unwrap();
    assert!(pq.windows(11).any(|w| w == b"nvtx_domain"));
    pyarrow_agrees(&c, &c);

    // Two processes merged: each keeps its domains.
    let dir = Dir::new("tables-domains-merged");
    let t = trace(&dir, &[42, 43]);
    let c = dir.path("tables");
    export_tables(&t, &c);
    let mut domains: Vec<String> = read_csv(&c, "ranges")
        .into_iter()
        .map(|r| format!("{}:{}", r["process"], r["nvtx_domain"]))
        .collect();
    domains.sort();
    assert_eq!(
        domains,
        [
            "42:",
            "42:MyDomain",
            "42:NCCL",
            "43:",
            "43:MyDomain",
            "43:NCCL"
        ]
    );
}
/// The NVTX domain also survives the viewers' formats: the Chrome JSON carries it as the range's
/// or mark's `args.domain` (read back by cutrace's importer), the Perfetto trace as a `domain`
/// debug annotation.
#[test]
fn nvtx_domains_reach_chrome_and_perfetto_and_come_back_from_chrome() {
    let dir = Dir::new("tables-domains-viewers");
    let t = trace(&dir, &[42]);
    let (j, pf) = (dir.path("t.json"), dir.path("t.pftrace"));
    let mut trace = load(&t);
    let mut bytes = Vec::new();
    perfetto::write_perfetto(&mut bytes, &trace).unwrap();
    std::fs::write(&pf, bytes).unwrap();
    let mut bytes = Vec::new();
    chrome::write_trace(&mut bytes, &mut trace).unwrap();
    std::fs::write(&j, bytes).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    let mut seen: Vec<(String, String, String)> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "user_annotation")
        .map(|e| {
            (
                e["ph"].as_str().unwrap().to_owned(),
                e["name"].as_str().unwrap().to_owned(),
                e["args"]["domain"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    seen.sort();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        seen,
        [
            s("X", "allreduce", "NCCL"),
            s("X", "plain", ""),
            s("X", "step", "MyDomain"),
            s("i", "ckpt", "MyDomain"),
            s("i", "tick", ""),
        ]
    );
    // Back through the importer: the tables of the Chrome file hold the same domains.
    let c = dir.path("csv");
    export_tables(&j, &c);
    let mut ranges: Vec<String> = read_csv(&c, "ranges")
        .into_iter()
        .map(|r| format!("{}:{}", r["name"], r["nvtx_domain"]))
        .collect();
    ranges.sort();
    assert_eq!(ranges, ["allreduce:NCCL", "plain:", "step:MyDomain"]);
    let mut marks: Vec<String> = read_csv(&c, "marks")
        .into_iter()
        .map(|r| format!("{}:{}", r["name"], r["nvtx_domain"]))
        .collect();
    marks.sort();
    assert_eq!(marks, ["ckpt:MyDomain", "tick:"]);
    // Perfetto: interned debug-annotation name "domain", and the domain names as values.
    let bytes = std::fs::read(&pf).unwrap();
    let has = |n: &[u8]| bytes.windows(n.len()).any(|w| w == n);
    assert!(has(b"domain") && has(b"NCCL") && has(b"MyDomain"));
}
#[test]
fn gpu_tables_name_the_process_of_each_row_also_in_a_merged_trace() {
    let dir = Dir::new("tables-pid");
    let t = trace(&dir, &[42, 43]);
    let c = dir.path("tables");
    export_tables(&t, &c);
    for table in ["kernels", "memcpys", "memsets", "syncs"] {
        let mut rows: Vec<(String, String, String)> = read_csv(&c, table)
            .into_iter()
            .map(|r| {
                (
                    r["pid"].clone(),
                    r["correlation_id"].clone(),
                    r["stream"].clone(),
                )
            })
            .collect();
        rows.sort();
        let base = |n: u64| (n << 32).to_string();
        let (one, two) = match table {
            "kernels" => (1u64, (1u64 << 32) + 1),
            "memcpys" => (2, (1 << 32) + 2),
            "memsets" => (3, (1 << 32) + 3),
            _ => (4, (1 << 32) + 4),
        };
        // The ids keep their offsets (unchanged columns); pid says whose they are.
        assert_eq!(
            rows,
            [
                ("42".into(), one.to_string(), "7".into()),
                (
                    "43".into(),
                    two.to_string(),
                    (base(1).parse::<u64>().unwrap() + 7).to_string()
                ),
            ],
            "{table}"
        );
    }
    pyarrow_agrees(&c, &c);

    // One process: its pid. A torch.profiler trace does not say: null.
    let dir = Dir::new("tables-pid-one");
    let t = trace(&dir, &[42]);
    let c = dir.path("tables");
    export_tables(&t, &c);
    assert!(read_csv(&c, "kernels").iter().all(|r| r["pid"] == "42"));
    let k = dir.path("k");
    export_tables(&repo().join("examples/two_streams.json.gz"), &k);
    let kernels = read_csv(&k, "kernels");
    assert_eq!(kernels.len(), 10);
    assert!(kernels.iter().all(|r| r["pid"].is_empty()), "{kernels:?}");
}

/// The PM samples of the real `cutrace sample` fixture (one NaN value added) reach the
/// `pm_samples` table row for row, the NaN as an empty field; `names_for` lists the table for
/// this trace only, and meta.json carries the sampling facts; pyarrow reads the Parquet file to
/// the CSV's values.
#[test]
fn pm_samples_reach_their_table_with_nan_as_null() {
    let dir = Dir::new("tables-pm");
    let mut t = load(&repo().join("tests/fixtures/native/sample_pm"));
    assert!(!tables::names_for(&t).contains(&tables::COUNTERS));
    assert!(tables::names_for(&t).contains(&tables::PM_SAMPLES));
    assert!(!tables::names_for(&Trace::default()).contains(&tables::PM_SAMPLES));
    t.pm_samples[3].value = f64::NAN;
    // Every table of the trace and meta.json, as `convert --csv DIR --parquet DIR` writes them.
    let meta = write_every_table(&t, &dir);

    let rows = read_csv(&dir.path(""), "pm_samples");
    assert_eq!(rows.len(), t.pm_samples.len());
    assert!(rows.len() > 100);
    for (r, s) in rows.iter().zip(&t.pm_samples) {
        assert_eq!(r["start_ns"], s.start_ns.to_string());
        assert_eq!(r["end_ns"], s.end_ns.to_string());
        assert_eq!(r["device"], s.device.to_string());
        assert_eq!(r["metric"], t.str(s.metric));
        if s.value.is_nan() {
            assert_eq!(r["value"], "");
        } else {
            assert_eq!(
                r["value"].parse::<f64>().unwrap().to_bits(),
                s.value.to_bits()
            );
        }
    }
    assert_eq!(rows[3]["value"], "");
    let m: serde_json::Value = serde_json::from_str(&meta).unwrap();
    let info = t.meta.pm_sampling.as_ref().unwrap();
    assert_eq!(m["pm_sampling"]["samples"], info.samples);
    assert_eq!(m["pm_sampling"]["interval_ns"], info.interval_ns);
    pyarrow_agrees(&dir.path(""), &dir.path(""));
}

/// Every allocation and free is a row of the `memory` table, in the trace's order, sizes and
/// totals exact, unknown ones empty (null in Parquet); a trace without memory events has no
/// such table.
#[test]
fn memory_events_reach_their_table_with_unknowns_as_null() {
    use cutrace_trace::{MemoryOp, MemoryPlace};
    let dir = Dir::new("tables-memory");
    let mut t = load(&repo().join("tests/fixtures/kineto/hta_memory.json.gz"));
    assert!(tables::names_for(&t).contains(&tables::MEMORY));
    assert!(!tables::names_for(&Trace::default()).contains(&tables::MEMORY));
    t.memory[5].op = MemoryOp::Unknown;
    t.memory[5].bytes = None;
    t.memory[6].total_reserved = None;
    write_every_table(&t, &dir);
    let rows = read_csv(&dir.path(""), "memory");
    assert_eq!(rows.len(), t.memory.len());
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for (r, m) in rows.iter().zip(&t.memory) {
        assert_eq!(r["ts_ns"], m.ts_ns.to_string());
        assert_eq!(r["process"], m.process.to_string());
        assert_eq!(r["thread"], m.thread.to_string());
        let place = if m.place == MemoryPlace::Gpu {
            "gpu"
        } else {
            "cpu"
        };
        assert_eq!(
            (r["place"].as_str(), r["device_type"].as_str()),
            (place, "")
        );
        assert_eq!(r["device"], m.device.to_string());
        assert_eq!(r["level"], "framework");
        let op = match m.op {
            MemoryOp::Alloc => "alloc",
            MemoryOp::Free => "free",
            MemoryOp::Unknown => "unknown",
        };
        assert_eq!(r["op"], op);
        assert_eq!(r["address"], opt(m.address));
        assert_eq!(r["bytes"], opt(m.bytes));
        assert_eq!(r["total_allocated"], opt(m.total_allocated));
        assert_eq!(r["total_reserved"], opt(m.total_reserved));
    }
    assert_eq!(
        (rows[5]["op"].as_str(), rows[5]["bytes"].as_str()),
        ("unknown", "")
    );
    assert_eq!(rows[6]["total_reserved"], "");
    pyarrow_agrees(&dir.path(""), &dir.path(""));
}

/// Every host op of the 2021 trace (its `Operator` events but the two steps) is a row of the
/// `cpu_ops` table, in the trace's order, times exact, its `External id`; a trace without host
/// ops has no such table; pyarrow reads the Parquet file to the CSV's values.
#[test]
fn host_ops_reach_the_cpu_ops_table() {
    let dir = Dir::new("tables-cpu-ops");
    let t = load(&repo().join("tests/fixtures/kineto/tb_resnet50_2021_operators.json.gz"));
    assert!(tables::names_for(&t).contains(&tables::CPU_OPS));
    assert!(!tables::names_for(&Trace::default()).contains(&tables::CPU_OPS));
    write_every_table(&t, &dir);
    let rows = read_csv(&dir.path(""), "cpu_ops");
    assert_eq!(rows.len(), t.host_ops.len());
    assert_eq!(rows.len(), 33);
    for (r, o) in rows.iter().zip(&t.host_ops) {
        assert_eq!(r["category"], "cpu_op");
        assert_eq!(r["name"], t.str(o.name));
        assert_eq!(r["process"], "119771");
        assert_eq!(r["thread"], o.thread.to_string());
        assert_eq!(r["start_ns"], o.start_ns.to_string());
        assert_eq!(r["end_ns"], o.end_ns.to_string());
        assert_eq!(r["external_id"], o.external_id.to_string());
    }
    let loader = rows
        .iter()
        .find(|r| r["name"].starts_with("enumerate(DataLoader)"))
        .unwrap();
    assert_eq!(
        (loader["start_ns"].as_str(), loader["end_ns"].as_str()),
        ("1610366662413704000", "1610366662457534000")
    );
    pyarrow_agrees(&dir.path(""), &dir.path(""));
}
