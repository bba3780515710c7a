//! `cutrace convert --chrome`'s wiring: the command writes what the library writes (the format
//! itself is tested in process in cutrace-export's tests), gzip-compressed by the file name, to
//! a file it refuses to overwrite without --force and then replaces atomically, and says in its
//! summary line when a trace is incomplete.

use std::io::{Read, Write as _};
use std::path::Path;
use std::process::{Command, Output};

use cutrace_testkit::{repo, Dir};
use serde_json::Value;

fn cutrace(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .output()
        .expect("run cutrace")
}

fn explain(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cutrace convert SRC --chrome OUT`; returns its stderr.
fn export(src: &Path, out: &Path) -> String {
    let o = cutrace(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--chrome".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        o.status.success(),
        "convert {}: {}",
        src.display(),
        explain(&o)
    );
    String::from_utf8(o.stderr).unwrap()
}

/// The export as a JSON value (gzip or plain).
fn parse(path: &Path) -> Value {
    serde_json::from_slice(&read_plain(path)).unwrap()
}

fn read_plain(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        bytes
    }
}

#[test]
fn gzip_output_is_the_plain_output_compressed() {
    let dir = Dir::new("gzip");
    let src = repo().join("tests/fixtures/native/copy_overlap");
    let plain = dir.path("t.json");
    let gz = dir.path("t.json.gz");
    export(&src, &plain);
    export(&src, &gz);
    let gz_bytes = std::fs::read(&gz).unwrap();
    assert!(gz_bytes.starts_with(&[0x1f, 0x8b]), "not gzip");
    assert!(gz_bytes.len() < std::fs::metadata(&plain).unwrap().len() as usize);
    assert_eq!(read_plain(&gz), std::fs::read(&plain).unwrap());
}
#[test]
fn csv_and_chrome_together() {
    let dir = Dir::new("both");
    let src = repo().join("tests/fixtures/native/nvtx");
    let csv = dir.path("tables");
    let json = dir.path("t.json");
    let o = cutrace(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--csv".as_ref(),
        csv.as_os_str(),
        "--chrome".as_ref(),
        json.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", explain(&o));
    let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
    assert_eq!(kernels.lines().count(), 1 + 22);
    let v = parse(&json);
    let n = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .count();
    assert_eq!(n, 22);
}
#[test]
fn refuses_to_overwrite_without_force_and_reports_bad_input() {
    let dir = Dir::new("errors");
    let src = repo().join("tests/fixtures/native/two_streams");
    let out = dir.path("taken.json");
    std::fs::write(&out, "keep me").unwrap();
    let args = |force: bool| {
        let mut a: Vec<&std::ffi::OsStr> = vec![
            "convert".as_ref(),
            src.as_os_str(),
            "--chrome".as_ref(),
            out.as_os_str(),
        ];
        if force {
            a.push("--force".as_ref());
        }
        a
    };
    let o = cutrace(&args(false));
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let o = cutrace(&args(true));
    assert!(o.status.success(), "{}", explain(&o));
    assert_eq!(parse(&out)["cutrace"]["complete"], true);

    // Neither output: clap says one is required.
    let o = cutrace(&["convert".as_ref(), src.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("required"), "{err}");
    assert!(err.contains("--csv") && err.contains("--chrome"), "{err}");

    // An unreadable input is reported as such, and no output is left behind.
    let missing = dir.path("no-such-trace");
    let fresh = dir.path("fresh.json");
    let o = cutrace(&[
        "convert".as_ref(),
        missing.as_os_str(),
        "--chrome".as_ref(),
        fresh.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-trace"), "{err}");
    assert!(!fresh.exists());

    // An output in a directory that does not exist: named in the error.
    let nodir = dir.path("nodir/t.json");
    let o = cutrace(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--chrome".as_ref(),
        nodir.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nodir"));
}
#[test]
fn help_has_an_example_per_format() {
    let o = cutrace(&["convert".as_ref(), "--help".as_ref()]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("cutrace convert trace/ --csv tables/"),
        "{help}"
    );
    assert!(
        help.contains("cutrace convert trace/ --chrome trace.json.gz"),
        "{help}"
    );
}
/// `--force` replaces a regular file only once the new export is complete, leaves no temporary
/// file behind, and never removes or writes through anything else at that path.
#[test]
fn force_replaces_regular_files_only_and_atomically() {
    let dir = Dir::new("force");
    let src = repo().join("tests/fixtures/native/nvtx");
    let out = dir.path("t.json");
    std::fs::write(&out, b"old").unwrap();
    let o = cutrace(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--chrome".as_ref(),
        out.as_os_str(),
        "--force".as_ref(),
    ]);
    assert!(o.status.success(), "{}", explain(&o));
    assert!(parse(&out)["traceEvents"].is_array());
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [std::ffi::OsString::from("t.json")],
        "no temporary file left"
    );

    let link = dir.path("l.json");
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    let o = cutrace(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--chrome".as_ref(),
        link.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a regular file"),
        "{}",
        explain(&o)
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is still there"
    );
}

/// The command's file is the library's export, byte for byte, and its summary line says when the
/// trace is incomplete (a killed recorder's) and when it is not.
#[test]
fn the_command_writes_the_library_export_and_says_when_a_trace_is_incomplete() {
    let dir = Dir::new("chrome-cli");
    for name in ["nvtx", "sigkill"] {
        let src = repo().join("tests/fixtures/native").join(name);
        let out = dir.path(&format!("{name}.json"));
        let stderr = export(&src, &out);
        let mut t = cutrace_export::input::load(
            &src,
            &cutrace_trace::ReadOptions::default(),
            &mut |_, _| {},
        )
        .unwrap();
        let mut want = Vec::new();
        cutrace_export::chrome::write_trace(&mut want, &mut t).unwrap();
        want.flush().unwrap();
        assert!(
            std::fs::read(&out).unwrap() == want,
            "{name}: the files differ"
        );
        assert_eq!(stderr.contains("INCOMPLETE"), name == "sigkill", "{stderr}");
    }
}

/// The two ranks of the real torchrun job, each converted to Chrome JSON, read back as a job:
/// each file states its rank (`distributedInfo`), so `cutrace report` numbers them from the
/// traces, not by file order, with the native job's figures.
#[test]
fn a_job_converted_to_chrome_reports_its_ranks_from_the_files() {
    let d = cutrace_testkit::Dir::new("chrome-job");
    let job = d.path("job");
    std::fs::create_dir(&job).unwrap();
    // Named against their ranks' order, so that file order would number them wrongly.
    for (part, name) in [("vm-623", "b.json"), ("vm-624", "a.json")] {
        let src = format!("tests/fixtures/native/torchrun_gloo/{part}.cutrace");
        let out = job.join(name);
        let o = crate::util::cutrace(&["convert", &src, "--chrome", out.to_str().unwrap()]);
        assert!(o.status.success(), "{o:?}");
    }
    let native = crate::util::cutrace_json(&["report", "tests/fixtures/native/torchrun_gloo"]);
    let chrome = crate::util::cutrace_json(&["report", job.to_str().unwrap()]);
    assert_eq!(chrome["world_size"], 2);
    let (n, c) = (
        native["ranks"].as_array().unwrap(),
        chrome["ranks"].as_array().unwrap(),
    );
    assert_eq!(c.len(), 2);
    for (n, c) in n.iter().zip(c) {
        assert_eq!(c["rank_from"], "trace", "{c}");
        assert_eq!(c["rank"], n["rank"]);
        assert_eq!(c["pid"], n["pid"]);
        for key in ["busy_ns", "kernels", "window_ns", "idle_ns"] {
            assert_eq!(c[key], n[key], "{key}");
        }
    }
}
