//! Running a program from a test so that a failure explains itself: the command line, its exit
//! status, its stdout and its stderr are in the panic message.

use std::process::{Command, Output};

/// The command line (its working directory and environment changes too), the exit status, stdout
/// and stderr, for a failure message.
pub fn show(cmd: &Command, out: &Output) -> String {
    let mut s = String::new();
    if let Some(d) = cmd.get_current_dir() {
        s += &format!("in {}:\n", d.display());
    }
    for (k, v) in cmd.get_envs() {
        let v = v.map_or("(removed)".into(), |v| v.to_string_lossy().into_owned());
        s += &format!("{}={} ", k.to_string_lossy(), v);
    }
    s += &cmd.get_program().to_string_lossy();
    for a in cmd.get_args() {
        s += &format!(" {:?}", a.to_string_lossy());
    }
    format!(
        "{s}\nexit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a [`Command`] to completion from a test.
pub trait Run {
    /// Its output, whatever the exit status; panics (naming the program) only if it cannot start.
    fn run(&mut self) -> Output;
    /// Its output, which must have exit status 0; otherwise panics with [`show`].
    fn run_ok(&mut self) -> Output;
    /// Its output, which must have exit status `code`; otherwise panics with [`show`].
    fn run_code(&mut self, code: i32) -> Output;
}

impl Run for Command {
    fn run(&mut self) -> Output {
        match self.output() {
            Ok(o) => o,
            Err(e) => panic!("cannot run {:?}: {e}", self.get_program()),
        }
    }

    fn run_ok(&mut self) -> Output {
        self.run_code(0)
    }

    fn run_code(&mut self, code: i32) -> Output {
        let out = self.run();
        assert_eq!(out.status.code(), Some(code), "{}", show(self, &out));
        out
    }
}
