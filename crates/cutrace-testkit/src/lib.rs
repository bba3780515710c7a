//! What the workspace's tests share, so that no test file carries its own copy: the repository
//! root and its committed fixtures, a temporary directory per test that is removed on drop,
//! records written by hand, mini ELF files, seeded hostile inputs, the SKIPPED note, and a
//! process runner whose failures show the command, its stdout and its stderr.
//!
//! GPU tests do not skip through here: they are `#[ignore = "needs an NVIDIA GPU and CUDA 13 (run
//! on the GPU machine: cargo test -- --ignored)"]`, so that cargo reports them as ignored where
//! they cannot run, never as passed, and fail (not skip) when asked to run without a GPU.

pub mod bench;
pub mod counters;
pub mod fuzz_inputs;
pub mod mini_elf;
pub mod records;
mod run;
pub mod synthetic;

pub use records::native_fixtures;
pub use run::{show, Run};

use std::path::{Path, PathBuf};

/// A SKIPPED line written straight to stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen in CI's log. For tests that need a tool this machine may lack
/// (python3, a C compiler, pyarrow); a test that needs a GPU is `#[ignore]`d instead.
#[macro_export]
macro_rules! loud {
    ($($t:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::io::stderr().write_all(format!("{}\n", format_args!($($t)*)).as_bytes());
    }};
}

/// The repository root.
pub fn repo() -> PathBuf {
    // This crate sits at crates/cutrace-testkit.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/cutrace-testkit has two parents")
        .to_path_buf()
}

/// A committed fixture: `tests/fixtures/REL` under the repository root.
pub fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// A temporary directory for one test, removed when dropped (also when the test fails: tests
/// leave nothing behind). Its name, `$TMPDIR/cutrace-NAME-XXXXXX`, is unique, so tests of one
/// binary running in parallel threads never share one.
pub struct Dir(pub PathBuf, tempfile::TempDir);

impl Dir {
    /// A new, empty directory whose name starts with `cutrace-NAME-`.
    pub fn new(name: &str) -> Dir {
        let t = tempfile::Builder::new()
            .prefix(&format!("cutrace-{name}-"))
            .tempdir()
            .expect("creating a temporary directory");
        Dir(t.path().to_path_buf(), t)
    }

    /// `NAME` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Keeps the directory after the test (to look into while changing a test; no committed
    /// test should call it) and returns its path.
    pub fn keep(self) -> PathBuf {
        self.1.keep()
    }
}

impl std::ops::Deref for Dir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Dir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Dir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

/// Whether `tool --version` runs and succeeds (python3, cc, nvcc…).
pub fn have(tool: &str) -> bool {
    std::process::Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn dirs_are_unique_and_removed_on_drop() {
        let a = Dir::new("kit");
        let b = Dir::new("kit");
        assert_ne!(a.0, b.0);
        assert!(a
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("cutrace-kit-"));
        std::fs::create_dir_all(a.path("x/y")).unwrap();
        std::fs::write(a.path("x/y/z"), b"z").unwrap();
        let (pa, pb) = (a.0.clone(), b.0.clone());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists());
    }

    #[test]
    fn a_failed_run_shows_the_command_its_status_and_both_outputs() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo to-stdout; echo to-stderr >&2; exit 3"]);
        // A Command is not UnwindSafe; nothing of it is used after the panic.
        let msg = *std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            c.run_ok();
        }))
        .unwrap_err()
        .downcast::<String>()
        .unwrap();
        for needed in ["sh", "exit 3", "to-stdout", "to-stderr", "exit status: 3"] {
            assert!(msg.contains(needed), "{needed:?} missing from {msg}");
        }
        assert_eq!(
            Command::new("sh")
                .args(["-c", "exit 4"])
                .run_code(4)
                .status
                .code(),
            Some(4)
        );
    }

    #[test]
    fn the_repository_and_its_fixtures_are_found() {
        assert!(repo().join("Cargo.toml").is_file());
        assert!(fixture("native").is_dir());
        let traces = native_fixtures(&repo());
        assert!(traces.iter().any(|t| t == "two_streams"), "{traces:?}");
    }
}
