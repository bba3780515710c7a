//! `cutrace convert --parquet`: the export of a real H200 trace is byte-for-byte the one in
//! tests/fixtures/parquet (which pyarrow read and checked against the CSV export when it was
//! made: its README), and, where pyarrow is installed, pyarrow reads today's export to the same
//! values as the CSV export (tests/parquet_pyarrow.py). The format itself is tested value by
//! value against an independent reader in the writer's unit tests.

use std::process::Command;

use cutrace_testkit::loud;
use cutrace_testkit::repo as root;

/// `cutrace convert ARGS…` from the repository root, whatever its outcome.
fn run_convert<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

/// `cutrace convert ARGS…`, which must succeed.
fn convert(args: &[&str]) -> std::process::Output {
    let out = run_convert(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const TABLES: [&str; 8] = [
    "kernels",
    "api_calls",
    "memcpys",
    "memsets",
    "syncs",
    "ranges",
    "marks",
    "overheads",
];

#[test]
fn the_h200_trace_exports_to_the_parquet_files_pyarrow_checked() {
    let tmp = cutrace_testkit::Dir::new("parquet");
    let _ = std::fs::remove_dir_all(&tmp);
    let pq = tmp.join("pq");
    let csv = tmp.join("csv");
    let out = convert(&[
        "tests/fixtures/native/copy_overlap",
        "--parquet",
        pq.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("19 kernels, 203 API calls, 16 copies, 1 memset, 7 syncs")
            && err.contains("as Parquet"),
        "{err}"
    );
    let golden = root().join("tests/fixtures/parquet/copy_overlap");
    for t in TABLES {
        let f = format!("{t}.parquet");
        let a = std::fs::read(pq.join(&f)).unwrap();
        let b = std::fs::read(golden.join(&f)).unwrap();
        assert!(
            a == b,
            "{f} differs from the pyarrow-checked file in {}. After an intended change to \
             the writer, a version bump (created_by names the version) or a new zlib-rs \
             (compressed bytes may differ), regenerate it as its README says and check it \
             with pyarrow again",
            golden.display()
        );
    }
    let py = Command::new("python3")
        .args(["-c", "import pyarrow"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !py {
        loud!(
            "SKIPPED (pyarrow not installed): reading today's Parquet export with pyarrow; the \
             byte-for-byte comparison with the pyarrow-checked files above still ran"
        );
    } else {
        let o = Command::new("python3")
            .arg(root().join("tests/parquet_pyarrow.py"))
            .args([&pq, &csv])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "pyarrow: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 8);
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_kineto_trace_exports_too_and_an_incomplete_one_says_so() {
    let tmp = cutrace_testkit::Dir::new("parquet-k");
    let _ = std::fs::remove_dir_all(&tmp);
    let out = convert(&[
        "examples/two_streams.json.gz",
        "--parquet",
        tmp.join("k").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("10 kernels"));
    for t in TABLES {
        let b = std::fs::read(tmp.join("k").join(format!("{t}.parquet"))).unwrap();
        assert!(b.starts_with(b"PAR1") && b.ends_with(b"PAR1"), "{t}");
    }
    // A part cut mid-chunk: converted as far as recovered, and said to be incomplete.
    let part = std::fs::read_dir(root().join("tests/fixtures/native/nvtx"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cutrace"))
        .unwrap();
    let bytes = std::fs::read(&part).unwrap();
    let cut = tmp.join("cut.cutrace");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = convert(&[
        cut.to_str().unwrap(),
        "--parquet",
        tmp.join("c").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("INCOMPLETE"), "{err}");
    let meta = std::fs::read_to_string(tmp.join("c/meta.json")).unwrap();
    assert!(meta.contains("\"complete\": false"), "{meta}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_table_directory_that_is_a_file_is_refused_before_reading() {
    let tmp = cutrace_testkit::Dir::new("parquet-file");
    let f = tmp.path("tables");
    std::fs::write(&f, b"keep me").unwrap();
    for flag in ["--parquet", "--csv"] {
        let out = run_convert(&[
            std::ffi::OsStr::new("tests/fixtures/native/nvtx"),
            std::ffi::OsStr::new(flag),
            f.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{flag} takes a directory")) && err.contains("is a file"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&f).unwrap(), b"keep me");
}

#[test]
fn a_failed_export_leaves_the_old_tables_and_no_partial_files() {
    let dir = cutrace_testkit::Dir::new("parquet-fail");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("syncs.parquet")).unwrap(); // in the way of one table
    std::fs::write(dir.join("kernels.parquet"), b"an older export").unwrap();
    // Without --force the directory's tables are refused outright (convert_outputs.rs); with
    // it, the export is staged and fails as a whole.
    let out = run_convert(&[
        std::ffi::OsStr::new("tests/fixtures/native/nvtx"),
        std::ffi::OsStr::new("--parquet"),
        dir.as_os_str(),
        std::ffi::OsStr::new("--force"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("syncs.parquet"), "{err}");
    // Nothing was renamed into place before the failure, and no temporary file is left.
    assert!(
        std::fs::read(dir.join("kernels.parquet")).unwrap() == b"an older export",
        "the older kernels.parquet was replaced"
    );
    assert!(err.contains("nothing was written"), "{err}");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut left_sorted = left.clone();
    left_sorted.sort();
    assert_eq!(
        left_sorted,
        ["kernels.parquet", "syncs.parquet"],
        "{left:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
