//! `cutrace convert`'s outputs: two outputs that name one file are refused before the read; a
//! table directory that holds an earlier export is replaced only with --force, and then holds
//! one export only; `-` writes --chrome / --perfetto to stdout; the NVTX domain of ranges and
//! marks reaches the tables (`nvtx_domain`); the GPU tables say which process recorded each row
//! (`pid`), also in a trace merged from several processes. Traces are written here with the
//! format's own writer, or are the repository's fixtures; no GPU needed.

macro_rules! loud {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(format!("{}\n", format_args!($($t)*)).as_bytes());
    }};
}

mod common;

use common::{repo, Dir};

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cutrace_trace::native::{marker_flags, part_file_name, Header, MarkerEvent, Tail, Writer};
use cutrace_trace::{CopyKind, Memcpy, Memset, SyncKind, Synchronization};

/// `cutrace convert ARGS…`, run in `cwd`, stdout captured.
fn convert_in<S: AsRef<OsStr>>(cwd: &Path, args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn convert<S: AsRef<OsStr>>(args: &[S]) -> Output {
    convert_in(&repo(), args)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", err(&o));
    o
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
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
fn csv(dir: &Path, table: &str) -> Vec<HashMap<String, String>> {
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

const NVTX: &str = "tests/fixtures/native/nvtx";
const TWO_STREAMS: &str = "tests/fixtures/native/two_streams";

#[test]
fn chrome_and_perfetto_with_one_path_are_refused_before_anything_is_written() {
    let dir = Dir::new("convert-outputs-same");
    let x = dir.path("x");
    let o = convert(&[
        NVTX.as_ref(),
        "--chrome".as_ref(),
        x.as_os_str(),
        "--perfetto".as_ref(),
        x.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("name the same file"), "{}", err(&o));
    assert!(!x.exists(), "something was written");

    // With --force, and spelled differently, on a file that exists: still refused, untouched.
    std::fs::write(&x, "keep me").unwrap();
    std::fs::create_dir(dir.path("sub")).unwrap();
    let other = dir.path("sub/../././x");
    let o = convert(&[
        NVTX.as_ref(),
        "--force".as_ref(),
        "--chrome".as_ref(),
        x.as_os_str(),
        "--perfetto".as_ref(),
        other.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("name the same file"), "{}", err(&o));
    assert_eq!(std::fs::read_to_string(&x).unwrap(), "keep me");

    // A link to the other output is the same file too.
    #[cfg(unix)]
    {
        let link = dir.path("link");
        std::os::unix::fs::symlink(&x, &link).unwrap();
        let o = convert(&[
            NVTX.as_ref(),
            "--force".as_ref(),
            "--chrome".as_ref(),
            link.as_os_str(),
            "--perfetto".as_ref(),
            x.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        assert_eq!(std::fs::read_to_string(&x).unwrap(), "keep me");
    }
}

#[test]
fn an_export_file_that_is_a_table_directory_or_one_of_its_tables_is_refused() {
    let dir = Dir::new("convert-outputs-file-in-dir");
    let tables = dir.path("t");
    let o = convert(&[
        NVTX.as_ref(),
        "--csv".as_ref(),
        tables.as_os_str(),
        "--chrome".as_ref(),
        tables.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("is also the --csv directory"),
        "{}",
        err(&o)
    );
    assert!(!tables.exists(), "the directory was made");

    // A file named like a table in a table directory (one the other format would remove, too).
    std::fs::create_dir(&tables).unwrap();
    for name in ["kernels.csv", "kernels.parquet", "meta.json"] {
        let o = convert(&[
            NVTX.as_ref(),
            "--parquet".as_ref(),
            tables.as_os_str(),
            "--perfetto".as_ref(),
            tables.join(name).as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", err(&o));
        assert!(
            err(&o).contains("has the name of a table file in the --parquet directory"),
            "{}",
            err(&o)
        );
        assert!(listing(&tables).is_empty(), "{:?}", listing(&tables));
    }

    // Another name in that directory is fine.
    ok(convert(&[
        NVTX.as_ref(),
        "--parquet".as_ref(),
        tables.as_os_str(),
        "--perfetto".as_ref(),
        tables.join("trace.pftrace").as_os_str(),
    ]));
    assert!(tables.join("trace.pftrace").exists());
}

/// --csv and --parquet may name one directory: both formats of one trace, one meta.json.
#[test]
fn csv_and_parquet_may_share_a_directory() {
    let dir = Dir::new("convert-outputs-share");
    let t = dir.path("t");
    let o = ok(convert(&[
        NVTX.as_ref(),
        "--csv".as_ref(),
        t.as_os_str(),
        "--parquet".as_ref(),
        t.join(".").as_os_str(),
    ]));
    let e = err(&o);
    assert!(e.contains("22 kernels") && e.contains("as Parquet"), "{e}");
    let names = listing(&t);
    assert_eq!(names.len(), 17, "{names:?}");
    assert!(names.contains(&"kernels.csv".into()) && names.contains(&"kernels.parquet".into()));
}

#[test]
fn a_table_directory_holding_tables_is_replaced_only_with_force_and_never_mixed() {
    let dir = Dir::new("convert-outputs-mixed");
    let t = dir.path("same");
    // Trace A, both formats.
    ok(convert(&[
        NVTX.as_ref(),
        "--csv".as_ref(),
        t.as_os_str(),
        "--parquet".as_ref(),
        t.as_os_str(),
    ]));
    let before: Vec<(String, Vec<u8>)> = listing(&t)
        .into_iter()
        .map(|n| (n.clone(), std::fs::read(t.join(&n)).unwrap()))
        .collect();
    // Trace B without --force: refused, naming what is there; nothing changed.
    for flag in ["--csv", "--parquet"] {
        let o = convert(&[TWO_STREAMS.as_ref(), flag.as_ref(), t.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        let e = err(&o);
        assert!(
            e.contains("already holds cutrace tables (kernels.csv, kernels.parquet")
                && e.contains("--force")
                && e.contains(flag),
            "{e}"
        );
        let after: Vec<(String, Vec<u8>)> = listing(&t)
            .into_iter()
            .map(|n| (n.clone(), std::fs::read(t.join(&n)).unwrap()))
            .collect();
        assert!(after == before, "{flag}: the directory changed");
    }
    // With --force: B's CSV and meta.json, and none of A's Parquet files.
    let o = ok(convert(&[
        TWO_STREAMS.as_ref(),
        "--csv".as_ref(),
        t.as_os_str(),
        "--force".as_ref(),
    ]));
    assert!(
        err(&o).contains("removed 8 tables of an earlier export (kernels.parquet"),
        "{}",
        err(&o)
    );
    let names = listing(&t);
    assert!(names.iter().all(|n| !n.ends_with(".parquet")), "{names:?}");
    assert_eq!(names.len(), 9, "{names:?}");
    assert_eq!(csv(&t, "kernels").len(), 47, "trace B's kernels");
    let meta = std::fs::read_to_string(t.join("meta.json")).unwrap();
    assert!(meta.contains("two_streams"), "{meta}");
    // And back to Parquet only: the CSV files go.
    ok(convert(&[
        NVTX.as_ref(),
        "--parquet".as_ref(),
        t.as_os_str(),
        "--force".as_ref(),
    ]));
    let names = listing(&t);
    assert!(names.iter().all(|n| !n.ends_with(".csv")), "{names:?}");
    assert_eq!(names.len(), 9, "{names:?}");

    // Files that are not cutrace tables are neither a reason to refuse nor removed.
    let other = dir.path("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    std::fs::write(other.join("trace.json"), "mine").unwrap();
    ok(convert(&[
        NVTX.as_ref(),
        "--csv".as_ref(),
        other.as_os_str(),
    ]));
    ok(convert(&[
        NVTX.as_ref(),
        "--parquet".as_ref(),
        other.as_os_str(),
        "--force".as_ref(),
    ]));
    assert_eq!(
        std::fs::read_to_string(other.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("trace.json")).unwrap(),
        "mine"
    );
}

/// `-` is stdout for --chrome and --perfetto: the same bytes as the file export, and no file
/// named `-`. Both to stdout is refused; `-` for a table directory too.
#[test]
fn a_dash_writes_chrome_and_perfetto_to_stdout() {
    let dir = Dir::new("convert-outputs-stdout");
    let src = repo().join(NVTX);
    for (flag, file) in [("--chrome", "t.json"), ("--perfetto", "t.pftrace")] {
        let o = ok(convert_in(
            &dir.0,
            &[src.as_os_str(), flag.as_ref(), "-".as_ref()],
        ));
        assert!(
            !dir.path("-").exists(),
            "{flag}: a file named - was written"
        );
        assert!(err(&o).contains("to stdout"), "{}", err(&o));
        ok(convert_in(
            &dir.0,
            &[src.as_os_str(), flag.as_ref(), file.as_ref()],
        ));
        let want = std::fs::read(dir.path(file)).unwrap();
        assert!(!want.is_empty());
        assert!(o.stdout == want, "{flag} - differs from the file export");
    }
    // `./-` is a file of that name.
    ok(convert_in(
        &dir.0,
        &[src.as_os_str(), "--chrome".as_ref(), "./-".as_ref()],
    ));
    assert!(dir.path("-").is_file());

    let o = convert_in(
        &dir.0,
        &[
            src.as_os_str(),
            "--chrome".as_ref(),
            "-".as_ref(),
            "--perfetto".as_ref(),
            "-".as_ref(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("both write to stdout"), "{}", err(&o));
    assert!(o.stdout.is_empty());
    for flag in ["--csv", "--parquet"] {
        let o = convert_in(&dir.0, &[src.as_os_str(), flag.as_ref(), "-".as_ref()]);
        assert_eq!(o.status.code(), Some(2), "{}", err(&o));
        assert!(err(&o).contains("takes a directory"), "{}", err(&o));
    }
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
    common::push_launch_and_kernel(&mut w, pid, 1_000);
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
    let dir = Dir::new("convert-outputs-domains");
    let t = trace(&dir, &[42]);
    let (c, p) = (dir.path("csv"), dir.path("pq"));
    ok(convert(&[
        t.as_os_str(),
        "--csv".as_ref(),
        c.as_os_str(),
        "--parquet".as_ref(),
        p.as_os_str(),
    ]));
    let ranges: Vec<(String, String, String)> = csv(&c, "ranges")
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
    let marks: Vec<(String, String)> = csv(&c, "marks")
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
    let pq = std::fs::read(p.join("ranges.parquet")).unwrap();
    assert!(pq.windows(11).any(|w| w == b"nvtx_domain"));
    pyarrow_agrees(&p, &c);

    // Two processes merged: each keeps its domains.
    let dir = Dir::new("convert-outputs-domains-merged");
    let t = trace(&dir, &[42, 43]);
    let c = dir.path("csv");
    ok(convert(&[t.as_os_str(), "--csv".as_ref(), c.as_os_str()]));
    let mut domains: Vec<String> = csv(&c, "ranges")
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
    let dir = Dir::new("convert-outputs-domains-viewers");
    let t = trace(&dir, &[42]);
    let (j, pf) = (dir.path("t.json"), dir.path("t.pftrace"));
    ok(convert(&[
        t.as_os_str(),
        "--chrome".as_ref(),
        j.as_os_str(),
        "--perfetto".as_ref(),
        pf.as_os_str(),
    ]));
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
    ok(convert(&[j.as_os_str(), "--csv".as_ref(), c.as_os_str()]));
    let mut ranges: Vec<String> = csv(&c, "ranges")
        .into_iter()
        .map(|r| format!("{}:{}", r["name"], r["nvtx_domain"]))
        .collect();
    ranges.sort();
    assert_eq!(ranges, ["allreduce:NCCL", "plain:", "step:MyDomain"]);
    let mut marks: Vec<String> = csv(&c, "marks")
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
    let dir = Dir::new("convert-outputs-pid");
    let t = trace(&dir, &[42, 43]);
    let (c, p) = (dir.path("csv"), dir.path("pq"));
    ok(convert(&[
        t.as_os_str(),
        "--csv".as_ref(),
        c.as_os_str(),
        "--parquet".as_ref(),
        p.as_os_str(),
    ]));
    for table in ["kernels", "memcpys", "memsets", "syncs"] {
        let mut rows: Vec<(String, String, String)> = csv(&c, table)
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
    pyarrow_agrees(&p, &c);

    // One process: its pid. A torch.profiler trace does not say: null.
    let dir = Dir::new("convert-outputs-pid-one");
    let t = trace(&dir, &[42]);
    let c = dir.path("csv");
    ok(convert(&[t.as_os_str(), "--csv".as_ref(), c.as_os_str()]));
    assert!(csv(&c, "kernels").iter().all(|r| r["pid"] == "42"));
    let k = dir.path("k");
    ok(convert(&[
        "examples/two_streams.json.gz".as_ref(),
        "--csv".as_ref(),
        k.as_os_str(),
    ]));
    let kernels = csv(&k, "kernels");
    assert_eq!(kernels.len(), 10);
    assert!(kernels.iter().all(|r| r["pid"].is_empty()), "{kernels:?}");
}

#[test]
fn not_even_force_overwrites_the_trace_being_converted() {
    let d = Dir::new("convert-outputs-self");
    let src = d.path("k.json.gz");
    std::fs::copy(repo().join("examples/two_streams.json.gz"), &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    for flag in ["--chrome", "--perfetto"] {
        let o = convert_in(&d.0, &["k.json.gz", flag, "./k.json.gz", "--force"]);
        assert!(!o.status.success(), "{flag}");
        assert!(
            err(&o).contains("is the trace being converted"),
            "{}",
            err(&o)
        );
    }
    assert_eq!(
        std::fs::read(&src).unwrap(),
        before,
        "the source was touched"
    );
    // An export into a native trace directory would become a stray file among its parts.
    let t = d.path("trace");
    std::fs::create_dir(&t).unwrap();
    for e in std::fs::read_dir(repo().join("tests/fixtures/native/two_streams")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), t.join(e.file_name())).unwrap();
    }
    let o = convert_in(&d.0, &["trace", "--chrome", "trace/x.json"]);
    assert!(
        err(&o).contains("is the trace being converted (or inside it)"),
        "{}",
        err(&o)
    );
}
