//! Helpers shared by the CLI tests: running the binary, and (from `shared.rs`, which the export
//! crate's tests share) records written by hand, the committed real traces found on disk and a
//! temporary directory per test. (Each test crate uses some of them.)
#![allow(dead_code)]

mod shared;
pub use shared::*;

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
