//! The recorder's notes (the `HEAD` chunk's and those in later `META` chunks, where the injection
//! puts what happens while recording, such as another CUPTI tool in the program being refused)
//! reach `cutrace report` (text and JSON) and `cutrace convert`'s meta.json. The trace is written
//! here with the format's own writer; no GPU needed.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cutrace_trace::native::{part_file_name, Header, Meta, Tail, Writer};
use cutrace_trace::DeviceProps;
use serde_json::Value;

const HEAD_NOTE: &str = "using the libcupti the program had already loaded (libcupti.so.13), so \
                         the process holds one CUPTI";
const CONFLICT_NOTE: &str = "another CUPTI tool in the program (torch.profiler, Nsight, a CUPTI \
                             library) tried to subscribe and got \
                             CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: it recorded no CUDA \
                             activity; this trace is unaffected";

fn tmpdir(name: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("notes-cli-{name}"))
}

/// One process's part: a kernel and its launch, the header's note, then the conflict note in a
/// `META` chunk (twice, as a note repeated by the recorder would be).
fn part(pid: u32) -> Vec<u8> {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        notes: vec![HEAD_NOTE.into()],
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    cutrace_testkit::records::push_launch_and_kernel(&mut w, pid, 1_000);
    w.flush().unwrap();
    for _ in 0..2 {
        w.write_meta(&Meta {
            notes: vec![CONFLICT_NOTE.into()],
            // Every process on one GPU, as the recorder identifies it.
            devices: vec![DeviceProps {
                device: 0,
                name: "H200".into(),
                uuid: Some("GPU-shared".into()),
                ..DeviceProps::default()
            }],
            ..Meta::default()
        })
        .unwrap();
    }
    w.finish(&Tail::default()).unwrap().into_inner()
}

/// A trace directory with one part per pid.
/// (the temporary directory that holds it, removed on drop; the trace)
fn trace(name: &str, pids: &[u32]) -> (cutrace_testkit::Dir, PathBuf) {
    let tmp = tmpdir(name);
    let dir = tmp.join("trace");
    std::fs::create_dir_all(&dir).unwrap();
    for &pid in pids {
        std::fs::write(dir.join(part_file_name("h", pid, 0)), part(pid)).unwrap();
    }
    (tmp, dir)
}

fn cutrace(args: &[&str], path: &Path) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cutrace {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn report_text_shows_the_recorders_notes_after_the_data_loss_line() {
    let (_tmp, dir) = trace("text", &[4242]);
    let text = stdout(&cutrace(&["report", "--wide"], &dir));
    let loss = text.find("data loss: none recorded").expect(&text);
    let notes = text.find("Notes from the recorder (2):").expect(&text);
    assert!(loss < notes, "{text}");
    // Header note first, then the META note, once although recorded twice; no pid tag with
    // one part.
    assert!(
        text.contains(&format!("\n  - {HEAD_NOTE}\n  - {CONFLICT_NOTE}\n")),
        "{text}"
    );
    assert_eq!(text.matches("tried to subscribe").count(), 1, "{text}");
}

#[test]
fn report_text_tags_notes_with_their_process_when_there_are_several() {
    let (_tmp, dir) = trace("text-parts", &[11, 12]);
    let text = stdout(&cutrace(&["report", "--wide"], &dir));
    assert!(text.contains("Notes from the recorder (4):"), "{text}");
    for pid in [11, 12] {
        assert!(
            text.contains(&format!("  - [pid {pid}] {CONFLICT_NOTE}\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("  - [pid {pid}] {HEAD_NOTE}\n")),
            "{text}"
        );
    }
}

#[test]
fn report_json_carries_the_notes_with_pid_and_part() {
    let (_tmp, dir) = trace("json", &[4242]);
    let v: Value =
        serde_json::from_slice(&cutrace(&["report", "--format", "json"], &dir).stdout).unwrap();
    let notes = v["notes"].as_array().expect("notes array");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0]["text"], HEAD_NOTE);
    assert_eq!(notes[1]["text"], CONFLICT_NOTE);
    assert_eq!(notes[1]["pid"], 4242);
    assert!(notes[1]["part"]
        .as_str()
        .unwrap()
        .ends_with(&part_file_name("h", 4242, 0)));
}

#[test]
fn a_trace_without_notes_has_no_notes_section() {
    let fixture = cutrace_testkit::fixture("native/nvtx");
    let text = stdout(&cutrace(&["report", "--wide"], &fixture));
    assert!(!text.contains("Notes from the recorder"), "{text}");
    let v: Value =
        serde_json::from_slice(&cutrace(&["report", "--format", "json"], &fixture).stdout).unwrap();
    assert_eq!(v["notes"], serde_json::json!([]));
}

#[test]
fn convert_writes_the_notes_into_meta_json() {
    let (_tmp, dir) = trace("convert", &[11, 12]);
    let out = dir.parent().unwrap().join("csv");
    let o = cutrace(&["convert", "--csv", out.to_str().unwrap()], &dir);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("4 notes from the recorder in meta.json"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let meta: Value =
        serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    let notes = meta["notes"].as_array().expect("notes array");
    let got: Vec<(u64, &str)> = notes
        .iter()
        .map(|n| (n["pid"].as_u64().unwrap(), n["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (11, HEAD_NOTE),
            (11, CONFLICT_NOTE),
            (12, HEAD_NOTE),
            (12, CONFLICT_NOTE)
        ]
    );
    // The per-part headers are still there, with only their own (HEAD) notes.
    assert_eq!(meta["parts"][0]["notes"], serde_json::json!([HEAD_NOTE]));
}

/// Each output's summary line says where the recorder's notes went (or that the output does not
/// carry them), and counts in the singular for one.
#[test]
fn every_convert_summary_says_where_the_notes_went_in_good_english() {
    let (_tmp, dir) = trace("summaries", &[7]);
    let out = dir.parent().unwrap();
    let (csv, parquet) = (out.join("csv"), out.join("parquet"));
    let (chrome, perfetto) = (out.join("t.json"), out.join("t.pftrace"));
    let mut args = vec!["convert"];
    for (flag, p) in [
        ("--csv", &csv),
        ("--parquet", &parquet),
        ("--chrome", &chrome),
        ("--perfetto", &perfetto),
    ] {
        args.extend([flag, p.to_str().unwrap()]);
    }
    let err = String::from_utf8(cutrace(&args, &dir).stderr).unwrap();
    let line = |what: &str| -> &str {
        err.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no summary line with {what:?} in\n{err}"))
    };
    // One kernel, one launch, nothing else: singular where one.
    let counts = "1 kernel, 1 API call, 0 copies, 0 memsets, 0 syncs, 0 ranges";
    for l in err.lines().filter(|l| l.starts_with("cutrace: wrote")) {
        assert!(l.contains(counts), "{l}");
    }
    assert!(
        line("csv").contains("; 2 notes from the recorder in meta.json"),
        "{err}"
    );
    assert!(
        line("as Parquet").contains(
            "; 2 notes from the recorder in meta.json and in each file's `cutrace.meta` \
             key-value metadata"
        ),
        "{err}"
    );
    let l = line("t.json");
    assert!(l.contains("1 flow arrow ("), "{l}");
    assert!(
        l.contains("; 2 notes from the recorder in the file's top-level \"cutrace\" member"),
        "{l}"
    );
    let l = line("t.pftrace");
    assert!(l.contains("1 flow arrow ("), "{l}");
    assert!(
        l.contains("; 2 notes from the recorder: not included in the .pftrace"),
        "{l}"
    );
    // Where the summaries say they are, they are.
    let v: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    assert_eq!(v["cutrace"]["notes"].as_array().map(Vec::len), Some(2));
    let pq = std::fs::read(parquet.join("kernels.parquet")).unwrap();
    assert!(pq.windows(12).any(|w| w == b"cutrace.meta"));
    assert!(pq
        .windows(CONFLICT_NOTE.len().min(60))
        .any(|w| w == &CONFLICT_NOTE.as_bytes()[..w.len()]));
    assert!(!std::fs::read(&perfetto)
        .unwrap()
        .windows(20)
        .any(|w| w == &CONFLICT_NOTE.as_bytes()[..20]));

    // A trace with one copy: "1 copy", never "1 copies".
    let fixture = cutrace_testkit::fixture("native/conflict");
    let csv = out.join("conflict-csv");
    let err =
        String::from_utf8(cutrace(&["convert", "--csv", csv.to_str().unwrap()], &fixture).stderr)
            .unwrap();
    assert!(err.contains(", 1 copy, "), "{err}");
    assert!(!err.contains("1 copies"), "{err}");
}

/// A real trace from the H200 (gpu/run.sh, conflict phase): `python3 gpu/torch_conflict.py`, a
/// program that starts torch.profiler itself, under `cutrace record`. The injection reused the
/// libcupti torch had loaded, held the subscriber slot, and recorded torch.profiler's refused
/// `cuptiSubscribe` as a note; the program's 100 adds, its fill and its reduction are all there.
#[test]
fn the_h200_conflict_trace_says_what_happened_to_torch_profiler() {
    let fixture = cutrace_testkit::fixture("native/conflict");
    let text = stdout(&cutrace(&["report", "--wide"], &fixture));
    assert!(text.contains("records: 102 kernels"), "{text}");
    assert!(text.contains("Notes from the recorder (2):"), "{text}");
    assert!(
        text.contains("tried to subscribe and got CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{text}"
    );
    assert!(text.contains("nvidia/cu13/lib/libcupti.so.13"), "{text}");
    assert!(
        text.contains("kernels: 102, attributed 102, orphans 0"),
        "{text}"
    );
    let v: Value =
        serde_json::from_slice(&cutrace(&["report", "--format", "json"], &fixture).stdout).unwrap();
    let notes = v["notes"].as_array().expect("notes array");
    assert_eq!(notes.len(), 2);
    assert!(notes.iter().all(|n| n["pid"] == 510));
    assert!(notes[1]["text"]
        .as_str()
        .unwrap()
        .contains("MULTIPLE_SUBSCRIBERS"));
}

/// Two processes' parts reuse CUPTI's per-process correlation ids (both start at 1): each kernel
/// joins its own process's launch call, never the other's, and no duplicate id is reported.
#[test]
fn parts_of_several_processes_keep_their_correlation_apart() {
    let (_tmp, dir) = trace("corr", &[42, 200]);
    let v: Value =
        serde_json::from_slice(&cutrace(&["report", "--format", "json"], &dir).stdout).unwrap();
    let c = &v["correlation"];
    assert_eq!(c["attributed"], 2, "{c}");
    assert_eq!(c["orphans"], 0, "{c}");
    assert_eq!(c["duplicate_api_correlation_ids"], 0, "{c}");
    // Each part's kernel starts 900 ns after its own call ends: a cross join would show otherwise.
    let lat = &v["launch_latency"];
    assert_eq!(lat["max_ns"], 900, "{lat}");
    assert_eq!(lat["min_ns"], 900, "{lat}");
}
