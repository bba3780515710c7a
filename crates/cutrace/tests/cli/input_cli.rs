//! Input read once from anything: stdin (`-`), a pipe, `<(…)`, a FIFO give the report the file
//! gives; a damaged native part is read around its damage, and `convert` refuses it unless told.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::cutrace;
use cutrace_testkit::{loud, repo};

const KINETO: &str = "tests/fixtures/kineto/two_streams.json.gz";
const PART: &str = "tests/fixtures/native/two_streams/vm-466.cutrace";

type TempDir = cutrace_testkit::Dir;

/// The JSON report without the input's name (the one thing that differs between a file and a
/// pipe of it).
fn report_of(stdout: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    let t = &mut v["trace"];
    t["paths"] = serde_json::Value::Null;
    if let Some(parts) = t["parts"].as_array_mut() {
        for p in parts {
            p["path"] = serde_json::Value::Null;
        }
    }
    v
}

fn of_file(rel: &str) -> serde_json::Value {
    let o = cutrace(&["report", rel, "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    report_of(&o.stdout)
}

/// The file's bytes, uncompressed when it is gzip (as `zcat` would give them).
fn bytes_of(rel: &str, unzip: bool) -> Vec<u8> {
    let raw = std::fs::read(repo().join(rel)).unwrap();
    if !unzip {
        return raw;
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut out).unwrap();
    out
}

fn report_from_stdin(bytes: &[u8]) -> serde_json::Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["report", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = bytes.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    report_of(&o.stdout)
}

#[test]
fn stdin_gives_the_report_the_file_gives() {
    for (rel, unzip) in [(KINETO, false), (KINETO, true), (PART, false)] {
        assert_eq!(
            report_from_stdin(&bytes_of(rel, unzip)),
            of_file(rel),
            "{rel} (uncompressed: {unzip})"
        );
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn process_substitution_gives_the_report_the_file_gives() {
    if !have("bash") {
        loud!("SKIPPED: no bash for <(…)");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_cutrace");
    for (rel, filter) in [(KINETO, "gzip -dc"), (PART, "cat")] {
        let o = Command::new("bash")
            .current_dir(repo())
            .args([
                "-c",
                &format!("\"{bin}\" report <({filter} {rel}) --format json"),
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(report_of(&o.stdout), of_file(rel), "{rel}");
    }
}

fn mkfifo(p: &Path) {
    let o = Command::new("mkfifo").arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_fifo_gives_the_report_the_file_gives() {
    if !have("mkfifo") {
        loud!("SKIPPED: no mkfifo");
        return;
    }
    let d = TempDir::new("input-fifo");
    for (i, rel) in [KINETO, PART].into_iter().enumerate() {
        // A FIFO named like the file: the name must not make cutrace open it twice.
        let name = Path::new(rel).file_name().unwrap();
        let fifo = d.0.join(format!("{i}-{}", name.to_string_lossy()));
        mkfifo(&fifo);
        let bytes = bytes_of(rel, false);
        let f = fifo.clone();
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(f).unwrap();
            let _ = w.write_all(&bytes);
        });
        let mut child = Command::new(env!("CARGO_BIN_EXE_cutrace"))
            .args(["report", fifo.to_str().unwrap(), "--format", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A reader that opened the FIFO twice would wait forever for a second writer.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{rel}: cutrace report on a FIFO did not finish");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(
            o.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(report_of(&o.stdout), of_file(rel), "{rel}");
    }
}

/// The fixture part with one bit of its HEAD chunk's JSON flipped.
fn part_with_bad_head(d: &TempDir) -> PathBuf {
    let mut b = bytes_of(PART, false);
    assert_eq!(&b[12..16], b"HEAD");
    b[12 + 20 + 3] ^= 0x04;
    let p = d.0.join("vm-466.cutrace");
    std::fs::write(&p, b).unwrap();
    p
}

#[test]
fn one_bit_in_head_loses_no_kernel_and_convert_refuses_unless_allowed() {
    let d = TempDir::new("input-head");
    let p = part_with_bad_head(&d);
    let o = cutrace(&["report", p.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let damaged: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let whole = of_file(PART);
    assert_eq!(damaged["trace"]["kernels"], whole["trace"]["kernels"]);
    assert_eq!(damaged["trace"]["api_calls"], whole["trace"]["api_calls"]);
    let loss = &damaged["data_loss"];
    assert_eq!(loss["complete"], false);
    assert_eq!(loss["damaged_regions"], 1);
    assert!(loss["damaged_bytes"].as_u64().unwrap() > 0);
    // The text says so too.
    let o = cutrace(&["report", p.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("damaged bytes skipped"), "{text}");

    let csv = d.0.join("csv");
    let o = cutrace(&[
        "convert",
        p.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(
        !o.status.success(),
        "a damaged trace converts only when allowed"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--allow-damaged"), "{err}");
    assert!(!csv.join("kernels.csv").exists());
    let o = cutrace(&[
        "convert",
        p.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--allow-damaged",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
    assert_eq!(
        kernels.lines().count() as u64 - 1,
        whole["trace"]["kernels"].as_u64().unwrap()
    );
}

#[test]
fn a_cut_trace_converts_without_being_allowed() {
    let d = TempDir::new("input-cut");
    let b = bytes_of(PART, false);
    let p = d.0.join("vm-466.cutrace");
    std::fs::write(&p, &b[..b.len() - 40]).unwrap();
    let out = d.0.join("t.json");
    let o = cutrace(&[
        "convert",
        p.to_str().unwrap(),
        "--chrome",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn limit_raises_a_limit_and_a_bad_one_is_refused() {
    let o = cutrace(&[
        "report",
        KINETO,
        "--limit",
        "string-bytes=2M,event-bytes=1G",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cutrace(&["report", KINETO, "--limit", "nonsense=3"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("string-bytes"), "{err}");
    // A limit set below what the trace holds is a clear error naming it.
    let o = cutrace(&["report", KINETO, "--limit", "string-bytes=4"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--limit string-bytes=N"), "{err}");
}
