//! `cutrace doctor` end to end on the doctor crate's fixture trees: exit status and output.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cutrace-doctor/tests/fixtures")
        .join(name)
}

fn cutrace(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .output()
        .expect("run cutrace");
    eprintln!(
        "cutrace {}\n--- stdout\n{}\n--- stderr\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn exit_status_follows_the_verdict() {
    for (name, want) in [
        ("h200-root-open", 0),
        ("admin-only-unprivileged", 1),
        ("cupti13-driver12", 2),
        ("no-driver", 2),
    ] {
        let root = fixture(name);
        let out = cutrace(&["doctor", "--root", root.to_str().expect("utf-8 path")]);
        assert_eq!(out.status.code(), Some(want), "{name}");
    }
}

#[test]
fn json_output_parses_and_names_the_failure() {
    let root = fixture("conf-drift-redhat");
    let out = cutrace(&[
        "doctor",
        "--root",
        root.to_str().expect("utf-8 path"),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let drift = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "config-drift")
        .expect("config-drift check");
    assert_eq!(drift["status"], "fail");
    assert_eq!(drift["fix"][0], "sudo dracut --regenerate-all -f");
    assert_eq!(v["counters_available"], false);
}

#[test]
fn text_output_shows_evidence_and_fix_for_failures() {
    let root = fixture("admin-only-unprivileged");
    let out = cutrace(&["doctor", "--root", root.to_str().expect("utf-8 path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" FAIL counter-access"), "{text}");
    assert!(
        text.contains("evidence: /proc/driver/nvidia/params: RmProfilingAdminOnly: 1"),
        "{text}"
    );
    assert!(
        text.contains("NVreg_RestrictProfilingToAdminUsers=0"),
        "{text}"
    );
    assert!(
        text.contains("tracing: available; counter profiling: NOT available"),
        "{text}"
    );
}

#[test]
fn a_missing_root_is_a_usage_error() {
    let out = cutrace(&["doctor", "--root", "/nonexistent/cutrace-root"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}
