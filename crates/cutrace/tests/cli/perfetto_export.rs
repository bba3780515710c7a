//! `cutrace convert --perfetto`'s wiring: the file is the library's export (whose format
//! cutrace-export's tests decode and check), an existing file is kept without --force and
//! replaced with it, and outputs that cannot be written are refused before the read.

use std::path::Path;
use std::process::Command;

use cutrace_testkit::{repo as root, Dir};

fn convert(src: &str, args: &[&str], out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .arg(src)
        .args(args)
        .arg(out)
        .current_dir(root())
        .output()
        .unwrap()
}

#[test]
fn an_existing_file_is_kept_without_force_and_replaced_with_it() {
    let tmp = Dir::new("perfetto-force");
    let out = tmp.path("t.pftrace");
    std::fs::write(&out, b"mine").unwrap();
    let o = convert("tests/fixtures/native/nvtx", &["--perfetto"], &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("already exists") && err.contains("--force") && err.contains("--perfetto"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"mine");
    let o = convert(
        "tests/fixtures/native/nvtx",
        &["--force", "--perfetto"],
        &out,
    );
    assert!(o.status.success());
    // What the library writes (its format is tested in cutrace-export's tests).
    let t = cutrace_export::input::load(
        &root().join("tests/fixtures/native/nvtx"),
        &cutrace_trace::ReadOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    let mut want = Vec::new();
    cutrace_export::perfetto::write_perfetto(&mut want, &t).unwrap();
    assert!(
        std::fs::read(&out).unwrap() == want,
        "not the library's export"
    );
}
/// Outputs that cannot be written are refused before the read, naming the flag and the path.
#[test]
fn an_output_that_cannot_be_written_is_refused_up_front() {
    let tmp = Dir::new("perfetto-unwritable");
    let dir = tmp.0.clone();
    for (flag, out, want) in [
        ("--perfetto", dir.clone(), "is a directory"),
        ("--chrome", dir.join("no/such/x.json"), "does not exist"),
        (
            "--perfetto",
            dir.join("no/such/x.pftrace"),
            "does not exist",
        ),
    ] {
        let o = convert("tests/fixtures/native/nvtx", &[flag], &out);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag) && err.contains(want), "{err}");
    }
}
