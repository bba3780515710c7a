//! Running the `cutrace` binary cargo built for these tests. Fixtures, temporary directories and
//! records come from cutrace-testkit.

use std::process::{Command, Output};

use cutrace_testkit::{repo, Run};

/// The `cutrace` binary, to be given arguments.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
}

/// `cutrace ARGS…` run from the repository root.
pub fn cutrace(args: &[&str]) -> Output {
    bin().current_dir(repo()).args(args).run()
}

/// `cutrace ARGS… --format json`, which must succeed, parsed.
pub fn cutrace_json(args: &[&str]) -> serde_json::Value {
    let out = bin()
        .current_dir(repo())
        .args(args)
        .args(["--format", "json"])
        .run_ok();
    serde_json::from_slice(&out.stdout).unwrap()
}
