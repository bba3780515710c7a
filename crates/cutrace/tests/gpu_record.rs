//! End to end on a real GPU: build a CUDA workload with nvcc, trace it with `cutrace record`,
//! and check the trace against the program's own account (gpu/check.py: exact kernel, copy and
//! API counts, 0 orphans, per-stream busy time within 2 % of its cudaEvent timings).
//!
//! Needs nvcc, an NVIDIA driver and python3; anywhere else (CI has no GPU) it says SKIPPED and
//! why. The H200 runs the full set through gpu/run.sh, whose traces are committed as fixtures
//! (tests/fixtures/native) that the other tests check without a GPU.

/// A SKIPPED line written straight to stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen in CI's log.
macro_rules! loud {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(format!("{}\n", format_args!($($t)*)).as_bytes());
    }};
}

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn missing_gpu() -> Option<String> {
    if !Path::new("/proc/driver/nvidia/version").exists() {
        return Some("no NVIDIA driver (/proc/driver/nvidia/version is absent)".into());
    }
    for tool in ["nvcc", "python3"] {
        let ok = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return Some(format!("`{tool}` is not on PATH"));
        }
    }
    let inject = Path::new(env!("CARGO_BIN_EXE_cutrace")).with_file_name("libcutrace_inject.so");
    if !inject.exists() {
        return Some(format!(
            "{} is not built (cargo build -p cutrace-inject)",
            inject.display()
        ));
    }
    None
}

#[test]
fn record_two_streams_on_a_real_gpu() {
    if let Some(why) = missing_gpu() {
        loud!(
            "SKIPPED (GPU test): {why}; on a GPU machine this test, and gpu/run.sh, run for real"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("cutrace-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("workloads");
    let st = Command::new("nvcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(repo().join("gpu/workloads.cu"))
        .status()
        .unwrap();
    assert!(st.success(), "nvcc failed");
    let trace = dir.join("two_streams.trace");
    let expected = dir.join("two_streams.json");
    let st = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(["two_streams", "--json"])
        .arg(&expected)
        .status()
        .unwrap();
    assert!(st.success(), "the traced workload failed");
    let csv = dir.join("two_streams.csv");
    let st = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .arg(&trace)
        .arg("--csv")
        .arg(&csv)
        .status()
        .unwrap();
    assert!(st.success(), "cutrace convert failed");
    let out = Command::new("python3")
        .arg(repo().join("gpu/check.py"))
        .args([&expected, &csv, &trace])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the trace does not match the program's own account: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
