//! The part files of a trace directory as `cutrace report` and `cutrace convert` read them: a part
//! left empty (or cut inside its magic) by a worker killed before its first write, a file that is
//! not a part, how many parts and processes were read, and a warning when the parts look like
//! separate runs recorded into one directory. Built from the committed H200 fixtures and parts
//! written with the format's own writer; no GPU needed.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cutrace_trace::native::{Header, Tail, Writer};
use serde_json::Value;

/// A temp dir per test, removed on drop.
struct Dir(cutrace_testkit::Dir);

impl Dir {
    fn new(name: &str) -> Dir {
        Dir(cutrace_testkit::Dir::new(&format!("parts-cli-{name}")))
    }
    /// A trace directory holding copies of these fixture parts.
    fn trace(&self, fixture_parts: &[&str]) -> PathBuf {
        let t = self.0.join("trace");
        std::fs::create_dir_all(&t).unwrap();
        for rel in fixture_parts {
            let src = fixtures().join(rel);
            std::fs::copy(&src, t.join(src.file_name().unwrap())).unwrap();
        }
        t
    }
}

fn fixtures() -> PathBuf {
    cutrace_testkit::fixture("native")
}

fn cutrace(args: &[&str], path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .arg(path)
        .output()
        .unwrap()
}

/// stdout of a run that must succeed.
fn ok(args: &[&str], path: &Path) -> String {
    let o = cutrace(args, path);
    assert!(
        o.status.success(),
        "cutrace {args:?} {} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        path.display(),
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&ok(&["report", "--format", "json"], path)).unwrap()
}

/// A part with one kernel and its launch at `t0`, written as process `pid` on `host`.
fn part(host: &str, pid: u32, t0: u64) -> Vec<u8> {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some(host.into()),
        pid: Some(pid),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    cutrace_testkit::records::push_launch_and_kernel(&mut w, pid, t0);
    w.finish(&Tail::default()).unwrap().into_inner()
}

/// An empty part (a worker killed between creating its file and its first write) next to a good
/// one: report and convert read the good one, and say the trace is incomplete, naming the part.
#[test]
fn an_empty_part_next_to_a_good_one_is_read_as_incomplete() {
    for (case, bytes) in [("empty", &b""[..]), ("cut-magic", &b"\x89CUTR"[..])] {
        let dir = Dir::new(case);
        let trace = dir.trace(&["two_streams/vm-466.cutrace"]);
        std::fs::write(trace.join("h-2.cutrace"), bytes).unwrap();

        let text = ok(&["report", "--wide"], &trace);
        assert!(text.contains("records: 47 kernels"), "{case}: {text}");
        let loss = text.lines().find(|l| l.starts_with("data loss:")).unwrap();
        assert!(
            loss.contains("INCOMPLETE") && loss.contains("h-2.cutrace"),
            "{case}: {loss}"
        );
        assert!(
            text.contains("parts: 2 files read, from 1 process (pid 466) and 1 part with no pid"),
            "{case}: {text}"
        );

        let csv = dir.0.join("csv");
        let o = cutrace(&["convert", "--csv", csv.to_str().unwrap()], &trace);
        assert!(o.status.success(), "{case}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("INCOMPLETE"));
        let meta: Value =
            serde_json::from_slice(&std::fs::read(csv.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["complete"], false, "{case}");
        assert!(meta["incomplete_reason"]
            .as_str()
            .unwrap()
            .contains("h-2.cutrace"));
        let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
        assert_eq!(
            kernels.lines().count(),
            1 + 47,
            "{case}: header + 47 kernels"
        );
    }
}

/// A `.cutrace` file that does not start like a part is not one: alone it is refused, naming the
/// file; among good parts it is left out, named in the incomplete reason.
#[test]
fn a_file_that_is_not_a_part_is_named() {
    let dir = Dir::new("not-a-part");
    let trace = dir.trace(&["two_streams/vm-466.cutrace"]);
    let bad = trace.join("h-2.cutrace");
    std::fs::write(&bad, b"GIF8").unwrap();
    let alone = cutrace(&["report"], &bad);
    assert!(!alone.status.success());
    assert!(String::from_utf8_lossy(&alone.stderr).contains("h-2.cutrace"));

    let v = json(&trace);
    assert_eq!(v["trace"]["kernels"], 47);
    assert_eq!(v["data_loss"]["complete"], false);
    let reason = v["data_loss"]["incomplete_reason"].as_str().unwrap();
    assert!(
        reason.contains("h-2.cutrace") && reason.contains("not a cutrace part"),
        "{reason}"
    );
}

/// The header says how many parts and processes were read; one run's parts, which overlap in
/// time, get no warning. JSON keeps `trace.paths` and adds `trace.parts` and
/// `trace.separate_runs`.
#[test]
fn the_report_names_the_parts_and_processes_it_read() {
    let multiproc = fixtures().join("multiproc");
    let text = ok(&["report", "--wide"], &multiproc);
    assert!(
        text.contains("parts: 4 files read, from 4 processes (pids 491, 492, 493, 494) on host vm"),
        "{text}"
    );
    assert!(!text.contains("WARNING"), "{text}");
    let v = json(&multiproc);
    assert_eq!(v["trace"]["paths"].as_array().unwrap().len(), 4);
    let pids: Vec<u64> = v["trace"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [491, 492, 493, 494]);
    assert!(v["trace"]["separate_runs"].is_null());
    // One part: said too, in the singular.
    let text = ok(&["report", "--wide"], &fixtures().join("two_streams"));
    assert!(
        text.contains("parts: 1 file read, from 1 process (pid 466) on host vm"),
        "{text}"
    );
}

/// Two unrelated runs recorded into one directory (the two_streams and copy_overlap workloads,
/// recorded minutes apart): a gap between their records, so a warning.
#[test]
fn parts_with_a_gap_between_them_are_flagged_as_separate_runs() {
    let dir = Dir::new("gap");
    let trace = dir.trace(&["two_streams/vm-466.cutrace", "copy_overlap/vm-478.cutrace"]);
    let text = ok(&["report", "--wide"], &trace);
    let warning = text
        .lines()
        .find(|l| l.starts_with("WARNING: these parts may be from separate runs"))
        .unwrap_or_else(|| panic!("no warning in\n{text}"));
    assert!(
        warning.contains("2 time spans that do not overlap")
            && warning.contains("last record of vm-466.cutrace and the first of vm-478.cutrace")
            && warning.ends_with("record each run into a fresh -o directory"),
        "{warning}"
    );
    let v = json(&trace);
    let s = &v["trace"]["separate_runs"];
    assert_eq!(s["time_spans"], 2, "{s}");
    let g = &s["first_gap"];
    assert_eq!(
        g["gap_ns"].as_u64().unwrap(),
        g["to_ns"].as_u64().unwrap() - g["from_ns"].as_u64().unwrap()
    );
    assert!(g["gap_ns"].as_u64().unwrap() > 0);
}

/// Parts from two hosts overlap in time but their clocks are not comparable: a warning.
#[test]
fn parts_from_two_hosts_are_flagged_as_separate_runs() {
    let dir = Dir::new("hosts");
    let trace = dir.trace(&[]);
    std::fs::write(trace.join("node1-10.cutrace"), part("node1", 10, 1_000_000)).unwrap();
    std::fs::write(trace.join("node2-10.cutrace"), part("node2", 10, 1_000_500)).unwrap();
    let text = ok(&["report", "--wide"], &trace);
    assert!(
        text.contains("parts: 2 files read, from 2 processes (pids node1:10, node2:10) on 2 hosts (node1, node2)"),
        "{text}"
    );
    assert!(
        text.contains(
            "WARNING: these parts may be from separate runs merged into one timeline: they come \
             from 2 hosts (node1, node2)"
        ),
        "{text}"
    );
    assert_eq!(
        json(&trace)["trace"]["separate_runs"]["hosts"],
        serde_json::json!(["node1", "node2"])
    );
}

/// No records at all: the report (and the error for a directory without parts) points at
/// `cutrace doctor`, which diagnoses a missing driver or CUPTI.
#[test]
fn a_trace_without_records_points_at_cutrace_doctor() {
    let dir = Dir::new("no-records");
    let trace = dir.trace(&[]);
    let o = cutrace(&["report"], &trace);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no *.cutrace parts") && err.contains("`cutrace doctor`"),
        "{err}"
    );
    std::fs::write(trace.join("h-1.cutrace"), b"").unwrap();
    let text = ok(&["report", "--wide"], &trace);
    assert!(
        text.contains("no records at all:") && text.contains("`cutrace doctor`"),
        "{text}"
    );
}
