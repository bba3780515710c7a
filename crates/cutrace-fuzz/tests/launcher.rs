//! The launcher's answer is the peak RSS of the one child it started: a child that touches
//! 64 MiB reports at least that, a shell that exits at once reports far less (the launcher adds
//! nothing of its own).

use std::io::Write;
use std::process::{Command, Stdio};

const ARG_SEP: char = '\u{1f}';

/// Ask a fresh launcher to run `/bin/sh -c script`; returns (verdict, peak RSS in bytes).
fn launch(script: &str) -> (String, u64) {
    let mut l = Command::new(env!("CARGO_BIN_EXE_cutrace-fuzz"))
        .arg("--launcher")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the launcher");
    let mut to = l.stdin.take().expect("stdin");
    writeln!(to, "30000{ARG_SEP}/bin/sh{ARG_SEP}-c{ARG_SEP}{script}").expect("request");
    drop(to);
    let out = l.wait_with_output().expect("launcher reply");
    assert!(out.status.success(), "launcher: {:?}", out.status);
    let reply = String::from_utf8(out.stdout).expect("utf-8");
    let mut f = reply.trim_end().split(ARG_SEP);
    let kind = f.next().unwrap_or("").to_string();
    let peak = f.next().and_then(|p| p.parse().ok()).expect("a peak");
    (kind, peak)
}

#[test]
fn the_peak_is_the_one_childs() {
    let (kind, big) = launch("dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null");
    assert_eq!(kind, "pass");
    assert!(big >= 60 << 20, "a 64 MiB child reported {big} bytes");
    let (kind, small) = launch("exit 0");
    assert_eq!(kind, "pass");
    assert!(
        small < 32 << 20,
        "a shell that exits reported {small} bytes"
    );
}
