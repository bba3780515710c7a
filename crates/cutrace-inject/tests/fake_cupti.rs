//! The whole injection (load, version check, subscribe, callbacks, writer thread, exit flush,
//! part file) against a fake libcupti built from tests/fake_cupti/fake_cupti.c: no GPU needed.
//! Skips itself, loudly, where no C compiler is found.

use std::path::{Path, PathBuf};
use std::process::Command;

mod util;

fn build_fake() -> Option<PathBuf> {
    util::programs().map(|p| p.fake_cupti.clone())
}

/// Runs this test binary's `child` test in a new process with the given environment.
fn run_child(mode: &str, lib: &Path, out_dir: &Path) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_INJECT_CHILD", "1")
        .env("FAKE_CUPTI_MODE", mode)
        .env("CUTRACE_CUPTI_LIB", lib)
        .env("CUTRACE_OUTPUT_DIR", out_dir)
        .output()
        .unwrap()
}

#[test]
fn child() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    // A fork without exec: the child's exit must leave the parent's part alone.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        std::process::exit(0);
    }
    if pid > 0 {
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    println!("HOST OUTPUT");
    // Returning ends the process through exit(): the injection's atexit flush runs.
}

fn cutrace_lines(o: &std::process::Output) -> Vec<String> {
    util::cutrace_lines(&o.stderr)
}

#[test]
fn records_flow_from_cupti_buffers_to_a_complete_part() {
    let Some(lib) = build_fake() else { return };
    let dir = std::env::temp_dir().join(format!("cutrace-fake-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = run_child("0", &lib, &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    assert!(cutrace_lines(&o).is_empty(), "{:?}", cutrace_lines(&o));
    let parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&parts[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (t, h) = cutrace_trace::native::read_file(&parts[0], &mut |_, _| {}).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert_eq!(h.cupti_version, Some(130001));
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(t.api_calls.len(), 3);
    assert!(t
        .kernels
        .iter()
        .all(|k| t.str(k.name) == "_Z4fakePf" && k.stream == 7));
    assert!(t
        .api_calls
        .iter()
        .all(|a| t.str(a.name) == "cudaLaunchKernel"));
    let mut corr: Vec<u64> = t.kernels.iter().map(|k| k.correlation_id).collect();
    corr.sort();
    assert_eq!(corr, vec![1, 2, 3]);
}

#[test]
fn another_subscriber_means_one_line_and_untraced() {
    let Some(lib) = build_fake() else { return };
    let dir = std::env::temp_dir().join(format!("cutrace-fake-sub-{}", std::process::id()));
    let o = run_child("1", &lib, &dir);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    let lines = cutrace_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("Fix:"), "{}", lines[0]);
    assert!(!dir.exists(), "no trace is written when untraced");
}

#[test]
fn old_cupti_is_refused_with_both_versions() {
    let Some(lib) = build_fake() else { return };
    let dir = std::env::temp_dir().join(format!("cutrace-fake-old-{}", std::process::id()));
    let o = run_child("2", &lib, &dir);
    assert!(o.status.success());
    let lines = cutrace_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("older than CUDA 13") && lines[0].contains("24"),
        "{}",
        lines[0]
    );
}
