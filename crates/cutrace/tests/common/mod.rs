//! Helpers shared by the CLI tests: native trace parts written by hand, running the binary, and
//! (from `shared.rs`) the committed real traces found on disk and a temporary directory per test.
//! (Each test crate uses some of them.)
#![allow(dead_code)]

use std::io::Cursor;

use cutrace_trace::native::Writer;
use cutrace_trace::{ApiCall, ApiKind, Kernel};

mod shared;
pub use shared::*;

/// A `cudaLaunchKernel` call of process `pid` at `t0` (100 ns long) and the kernel it launched,
/// `gemm` on device 0 stream 7, from `t0 + 1,000` to `t0 + 4,000` ns; both with correlation id 1.
pub fn push_launch_and_kernel(w: &mut Writer<Cursor<Vec<u8>>>, pid: u32, t0: u64) {
    let k = w.intern("_Z4gemmPf");
    let a = w.intern("cudaLaunchKernel");
    w.push_api(&ApiCall {
        kind: ApiKind::Runtime,
        name: a,
        cbid: 211,
        process: pid,
        thread: 1,
        correlation_id: 1,
        start_ns: t0,
        end_ns: t0 + 100,
        return_value: 0,
    });
    w.push_kernel(&Kernel {
        device: 0,
        context: 1,
        stream: 7,
        correlation_id: 1,
        start_ns: t0 + 1_000,
        end_ns: t0 + 4_000,
        name: k,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        registers_per_thread: 8,
        static_shared_bytes: 0,
        dynamic_shared_bytes: 0,
        graph_id: 0,
    });
}

/// `cutrace ARGS…` run from the repository root.
pub fn cutrace(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

/// `cutrace ARGS… --format json`, which must succeed, parsed.
pub fn cutrace_json(args: &[&str]) -> serde_json::Value {
    let o = cutrace(&[args, &["--format", "json"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}
