//! `cutrace convert`'s outputs: two outputs that name one file are refused before the read; a
//! table directory that holds an earlier export is replaced only with --force, and then holds
//! one export only; `-` writes --chrome / --perfetto to stdout; the trace being converted is
//! never overwritten. (What the tables hold is tested in process in cutrace-export's tests.)

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use cutrace_testkit::{repo, Dir};

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
    let kernels = std::fs::read_to_string(t.join("kernels.csv")).unwrap();
    assert_eq!(kernels.lines().count(), 1 + 47, "trace B's kernels");
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
