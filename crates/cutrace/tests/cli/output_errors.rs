//! Every command that writes to stdout handles a failed write without a panic: a full disk
//! (`> /dev/full`, ENOSPC) exits non-zero with a message that says what failed, and a reader
//! that goes away early (`| head`, EPIPE) ends the command quietly with its own exit status.

use std::io::Read;
use std::process::{Command, Stdio};

use cutrace_testkit::repo;

fn cutrace() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
    c.current_dir(repo());
    c
}

/// Runs `cutrace args` with stdout on /dev/full; returns (exit status, stderr).
fn to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = cutrace().args(args).stdout(full).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_no_panic(args: &[&str], err: &str) {
    assert!(
        !err.contains("panicked") && !err.contains("failed printing"),
        "cutrace {args:?}: {err}"
    );
}

#[test]
fn a_full_disk_is_an_error_with_a_message_never_a_panic() {
    let doctor_root = repo().join("crates/cutrace-doctor/tests/fixtures");
    let root = std::fs::read_dir(&doctor_root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a doctor fixture root");
    let root = root.to_str().unwrap();
    for (args, what, failed) in [
        (
            vec!["doctor", "--root", root],
            "writing the doctor's report to stdout",
            3,
        ),
        (
            vec!["doctor", "--root", root, "--format", "json"],
            "writing the doctor's report to stdout",
            3,
        ),
        (
            vec!["report", "tests/fixtures/native/nvtx"],
            "writing the report to stdout",
            2,
        ),
        (
            vec!["report", "tests/fixtures/native/nvtx", "--format", "json"],
            "writing the report to stdout",
            2,
        ),
        (
            vec![
                "diff",
                "tests/fixtures/native/nvtx",
                "tests/fixtures/native/nvtx",
            ],
            "writing the diff to stdout",
            2,
        ),
        (
            vec!["convert", "tests/fixtures/native/nvtx", "--chrome", "-"],
            "writing stdout",
            2,
        ),
    ] {
        let (code, err) = to_dev_full(&args);
        assert_no_panic(&args, &err);
        assert_eq!(code, Some(failed), "cutrace {args:?}: {err}");
        assert!(
            err.contains(&format!("cutrace: error: {what}")),
            "cutrace {args:?}: {err}"
        );
        assert!(
            err.contains("No space left on device"),
            "cutrace {args:?}: {err}"
        );
    }
}

/// `cutrace report … | head -1`: the reader takes what it wants and closes the pipe. The output
/// here (the JSON of 5,000 kernels, megabytes) is far larger than a pipe holds, so cutrace is
/// still writing when the pipe closes, whatever the timing.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    for args in [
        vec![
            "report",
            "tests/fixtures/native/tiny_5000",
            "--format",
            "json",
            "--top",
            "100000",
            "--orphans",
            "100000",
        ],
        vec![
            "convert",
            "tests/fixtures/native/tiny_5000",
            "--chrome",
            "-",
        ],
    ] {
        let mut child = cutrace()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 100];
        out.read_exact(&mut first).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_no_panic(&args, &err);
        assert_eq!(o.status.code(), Some(0), "cutrace {args:?}: {err}");
        assert!(!err.contains("error"), "cutrace {args:?}: {err}");
    }
}

/// doctor's and audit's exit status is a verdict; a reader that goes away does not change it.
#[test]
fn a_verdict_survives_a_reader_that_goes_away() {
    let doctor_root = repo().join("crates/cutrace-doctor/tests/fixtures");
    for root in std::fs::read_dir(&doctor_root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
    {
        let args = ["doctor", "--root", root.to_str().unwrap(), "--verbose"];
        let whole = cutrace().args(args).output().unwrap();
        // A verdict (0, 1, 2), not doctor's own failure (3).
        assert!(matches!(whole.status.code(), Some(0..=2)), "{root:?}");
        // The reader closes its end before cutrace writes anything: every write fails.
        let mut child = cutrace()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_no_panic(&args, &err);
        assert_eq!(o.status.code(), whole.status.code(), "{root:?}: {err}");
    }
}

/// An error's cause is shown beneath it, once: no message pastes its source's text.
#[test]
fn an_error_and_its_cause_are_each_said_once() {
    for args in [
        ["report", "/nonexistent/cutrace-test.json"],
        ["audit", "/nonexistent/cutrace-test-dir"],
        ["diff", "/nonexistent/cutrace-a"],
    ] {
        let args: Vec<&str> = args
            .into_iter()
            .chain((args[0] == "diff").then_some("/nonexistent/cutrace-b"))
            .collect();
        let o = cutrace().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "cutrace {args:?}: {err}");
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert!(err.contains("\n  caused by: No such file"), "{err}");
    }
}

/// `--help` to a full stdout is an error (clap's own exit ignored it and exited 0), and a full
/// stderr never panics: the command keeps its own exit status.
#[test]
fn help_to_a_full_disk_and_a_full_stderr() {
    let (code, err) = to_dev_full(&["report", "--help"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("writing the help to stdout"), "{err}");
    assert_no_panic(&["report", "--help"], &err);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    for (args, want) in [
        (&["report", "/nonexistent/cutrace-test.json"][..], 2),
        (&["doctor", "--root", "/nonexistent/cutrace-root"][..], 3),
    ] {
        let o = cutrace()
            .args(args)
            .stderr(full.try_clone().unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(want), "{args:?}");
    }
}

/// Control characters in what the doctor quotes (another user's process command line) and in
/// the names cutrace's errors and notes echo reach the terminal escaped, never raw.
#[test]
fn the_doctor_and_errors_escape_control_characters() {
    let d = cutrace_testkit::Dir::new("escape-doctor");
    let root = d.path("root");
    let fixture = repo().join("crates/cutrace-doctor/tests/fixtures/dcgm-hostengine");
    let st = Command::new("cp")
        .args(["-r"])
        .arg(&fixture)
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(
        root.join("proc/1/cmdline"),
        b"nv-hostengine\0--evil\x1b]0;pwned\x07\0",
    )
    .unwrap();
    let o = cutrace()
        .args(["doctor", "-v", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("--evil\\u{1b}]0;pwned\\u{7}"), "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out}");
    let o = cutrace()
        .args(["report", "/nonexistent/\x1b[2Jcleared.json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\\u{1b}[2Jcleared"), "{err}");
    assert!(!err.contains('\x1b'), "{err}");
}
