//! End to end on a real GPU: build a CUDA workload with nvcc, trace it with `cutrace record`,
//! and check the trace against the program's own account (gpu/check.py: exact kernel, copy and
//! API counts, 0 orphans, per-stream busy time within 2 % of its cudaEvent timings).
//!
//! Needs nvcc, an NVIDIA driver and python3, so it is `#[ignore]`d: cargo lists it as ignored
//! (CI has no GPU), and `cargo test -- --ignored` on a GPU machine runs it. The H200 runs the
//! full set through gpu/run.sh, whose traces are committed as fixtures (tests/fixtures/native)
//! that the other tests check without a GPU.

use std::path::Path;
use std::process::Command;

use cutrace_testkit::repo;

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

// Ignored where cargo cannot know whether a GPU is there; `cargo test -- --ignored` runs it, and
// then a missing GPU, nvcc or python3 fails it: asked to run, it must not pass without running.
#[test]
#[ignore = "needs an NVIDIA GPU and CUDA 13 (run on the GPU machine: cargo test -- --ignored)"]
fn record_two_streams_on_a_real_gpu() {
    if let Some(why) = missing_gpu() {
        panic!("this GPU test cannot run here: {why}");
    }
    let dir = cutrace_testkit::Dir::new("gpu");
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
