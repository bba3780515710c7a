//! What cutrace writes, when the trace or the place it writes to is hostile: a link planted
//! where convert stages its tables is never written through; exports are no more readable than
//! the trace they come from; a part's command line stays out of the exports unless asked for;
//! control characters of a trace never reach the terminal raw.

use std::io::Cursor;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cutrace_testkit::{repo, Dir};
use cutrace_trace::native::{part_file_name, Tail, Writer};
use cutrace_trace::Header;

const SECRET: &str = "--token=s3cret";

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o777
}

/// A trace directory `dir/trace` with one part of mode 0600 holding a recorded command line,
/// a kernel named `kernel_name` and its launch.
fn private_trace(dir: &Dir, kernel_name: &str) -> PathBuf {
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(42),
        cmdline: Some(vec!["train.py".into(), SECRET.into()]),
        ..Header::default()
    };
    let mut w = Writer::new(Cursor::new(Vec::new()), &header).unwrap();
    cutrace_testkit::records::push_launch_and_kernel(&mut w, 42, 1_000);
    if kernel_name != "_Z4gemmPf" {
        // A second kernel, named by the test (the helper's is fixed).
        let name = w.intern(kernel_name);
        w.push_kernel(
            &cutrace_trace::Kernel {
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: 9,
                start_ns: 10_000,
                end_ns: 12_000,
                name,
                launch: 0,
            },
            &cutrace_trace::Launch {
                grid: [1, 1, 1],
                block: [32, 1, 1],
                registers_per_thread: 8,
                static_shared_bytes: 0,
                dynamic_shared_bytes: 0,
                graph_id: 0,
            },
        );
    }
    w.flush().unwrap();
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let trace = dir.path("trace");
    std::fs::create_dir_all(&trace).unwrap();
    let part = trace.join(part_file_name("h", 42, 0));
    std::fs::write(&part, bytes).unwrap();
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o600)).unwrap();
    trace
}

#[test]
fn a_link_planted_at_a_staging_name_is_not_written_through() {
    let d = Dir::new("safety-link");
    let victim = d.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = d.path("out");
    std::fs::create_dir_all(&out).unwrap();
    // Staging names used to be `.{table}.cutrace-tmp-PID`: plant links at that name for the
    // process ids likely to come next (pids are handed out in order), for every table.
    let next = Command::new("true").spawn().unwrap();
    let pid = next.id();
    let mut next = next;
    next.wait().unwrap();
    let names: Vec<String> = cutrace_export::tables::NAMES
        .iter()
        .map(|n| format!("{n}.csv"))
        .chain(["meta.json".into()])
        .collect();
    for p in pid + 1..pid + 64 {
        for n in &names {
            let _ = std::os::unix::fs::symlink(&victim, out.join(format!(".{n}.cutrace-tmp-{p}")));
        }
    }
    let planted = std::fs::read_dir(&out).unwrap().count();
    ok(run(&[
        "convert".as_ref(),
        "tests/fixtures/native/nvtx".as_ref(),
        "--csv".as_ref(),
        out.as_os_str(),
    ]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    for n in &names {
        let m = std::fs::symlink_metadata(out.join(n)).unwrap();
        assert!(m.file_type().is_file(), "{n} is not a regular file");
    }
    // The planted links are left alone, and no temporary file is left beside them.
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        planted + names.len()
    );
}

#[test]
fn exports_are_as_private_as_the_trace_and_leave_out_the_command_line() {
    let d = Dir::new("safety-mode");
    let trace = private_trace(&d, "_Z4gemmPf");
    let tables = d.path("tables");
    let chrome = d.path("t.json");
    let perfetto = d.path("t.pftrace");
    ok(run(&[
        "convert".as_ref(),
        trace.as_os_str(),
        "--csv".as_ref(),
        tables.as_os_str(),
        "--parquet".as_ref(),
        tables.as_os_str(),
        "--chrome".as_ref(),
        chrome.as_os_str(),
        "--perfetto".as_ref(),
        perfetto.as_os_str(),
    ]));
    // A directory convert creates is searchable by whom the files are readable by.
    assert_eq!(mode(&tables), 0o700);
    let mut outputs: Vec<PathBuf> = std::fs::read_dir(&tables)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(outputs.len(), 2 * cutrace_export::tables::NAMES.len() + 1);
    outputs.extend([chrome.clone(), perfetto.clone()]);
    for p in &outputs {
        assert_eq!(mode(p), 0o600, "{}", p.display());
        let bytes = std::fs::read(p).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the command line",
            p.display()
        );
    }
    // Asked for, it is there (meta.json, and each Parquet file's copy of it).
    ok(run(&[
        "convert".as_ref(),
        trace.as_os_str(),
        "--csv".as_ref(),
        tables.as_os_str(),
        "--parquet".as_ref(),
        tables.as_os_str(),
        "--force".as_ref(),
        "--with-cmdline".as_ref(),
    ]));
    for name in ["meta.json", "kernels.parquet"] {
        let bytes = std::fs::read(tables.join(name)).unwrap();
        assert!(
            bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{name} lacks the command line"
        );
        assert_eq!(mode(&tables.join(name)), 0o600);
    }
}

#[test]
fn force_does_not_open_up_the_file_it_replaces() {
    let d = Dir::new("safety-force");
    let chrome = d.path("t.json");
    std::fs::write(&chrome, "old").unwrap();
    std::fs::set_permissions(&chrome, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(run(&[
        "convert".as_ref(),
        "tests/fixtures/native/nvtx".as_ref(),
        "--chrome".as_ref(),
        chrome.as_os_str(),
        "--force".as_ref(),
    ]));
    assert_ne!(std::fs::read(&chrome).unwrap(), b"old");
    assert_eq!(mode(&chrome), 0o600);
}

#[test]
fn control_characters_of_a_trace_never_reach_the_terminal_raw() {
    let d = Dir::new("safety-escape");
    // Sets the terminal's title, then clears the screen.
    let trace = private_trace(&d, "evil\x1b]0;pwned\x07\x1b[2Jkernel");
    let o = ok(run(&["report".as_ref(), trace.as_os_str()]));
    assert!(
        !o.stdout.iter().any(|&b| b == 0x1b || b == 0x07),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("evil\\u{1b}]0;pwned"), "{text}");
}
