//! The export formats end to end, in process: every fixture is exported with the library's
//! writers and read back or decoded independently of them. One test binary for all formats.

/// A SKIPPED line written straight to stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen in CI's log.
macro_rules! loud {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(format!("{}\n", format_args!($($t)*)).as_bytes());
    }};
}

// The helpers the CLI's tests share, by path: one copy until the workspace has a test-support
// crate.
#[allow(dead_code)]
#[path = "../../../cutrace/tests/common/shared.rs"]
mod shared;

mod chrome;
mod perfetto;
mod tables;
