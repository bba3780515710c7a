//! The cutrace command line: argument parsing, progress and printing. The work happens in the
//! library crates; each subcommand lives in its own module under `cmd/`.

use std::io::Write;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cutrace_export::text::escape_lines;

/// stderr never panics: `std`'s `eprintln!` and `eprint!` panic when the write fails (`2>/dev/full`), and a
/// warning that cannot be shown is no reason to abort a command. Defined before `mod cmd` so the
/// commands use it too.
/// Its lines quote paths and names anyone may choose: control characters are escaped (only
/// `eprint!`, which draws the progress line in place, writes them).
macro_rules! eprintln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($t)*);
        let _ = writeln!(
            std::io::stderr(),
            "{}",
            cutrace_export::text::escape_lines(&line)
        );
    }};
}
macro_rules! eprint {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

mod cmd;

/// Trace CUDA programs through CUPTI and get numbers that are not lies.
///
/// Start with `cutrace report TRACE` on a torch.profiler (Kineto) JSON trace or a cutrace trace,
/// `cutrace record -- CMD` to trace a program with no code change, and `cutrace doctor` when
/// profiling fails on a machine and you want to know why.
#[derive(Parser)]
#[command(name = "cutrace", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Report(cmd::report::Args),
    Diff(cmd::diff::Args),
    Record(cmd::record::Args),
    Profile(cmd::profile::Args),
    Sample(cmd::sample::Args),
    Monitor(cmd::monitor::Args),
    Agent(cmd::agent::Args),
    Capture(cmd::capture::Args),
    Convert(cmd::convert::Args),
    Doctor(cmd::doctor::Args),
    Audit(cmd::audit::Args),
    Dcgm(cmd::dcgm::Args),
}

/// `cutrace record`'s own failures exit 125 (as `env`, `timeout` and `docker run` do), so they
/// cannot be mistaken for the traced program's exit status; `cutrace doctor`'s exit 3, since 2 is
/// one of its verdicts ("even tracing is not available"); every other subcommand's exit 2.
const RECORD_FAILED: i32 = 125;
const DOCTOR_FAILED: i32 = 3;

fn main() {
    let sub = std::env::args_os().nth(1);
    let failed = match sub.as_ref().and_then(|s| s.to_str()) {
        Some("record" | "profile" | "sample" | "monitor") => RECORD_FAILED,
        Some("doctor") => DOCTOR_FAILED,
        _ => 2,
    };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version: a write error is an error here too (`cutrace --help > /dev/full`).
        Err(e) if !e.use_stderr() => match e.print() {
            Ok(()) => std::process::exit(0),
            Err(io) if io.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            Err(io) => {
                eprintln!("cutrace: error: writing the help to stdout\n  caused by: {io}");
                std::process::exit(failed);
            }
        },
        Err(e) => {
            let _ = e.print();
            std::process::exit(failed);
        }
    };
    // Every command's output goes through this one handle (`cutrace convert --chrome -` writes
    // its export through its own, to stdout as well), and every write error comes back here.
    let mut out = Stdout {
        inner: std::io::stdout().lock(),
        reader_gone: false,
    };
    let result = match cli.command {
        Command::Report(a) => cmd::report::run(a, &mut out),
        Command::Diff(a) => cmd::diff::run(a, &mut out),
        Command::Record(a) => cmd::record::run(a),
        Command::Profile(a) => cmd::profile::run(a, &mut out),
        Command::Sample(a) => cmd::sample::run(a),
        Command::Monitor(a) => cmd::monitor::run(a),
        Command::Agent(a) => cmd::agent::run(a, &mut out),
        Command::Capture(a) => cmd::capture::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Doctor(a) => cmd::doctor::run(a, &mut out),
        Command::Audit(a) => cmd::audit::run(a, &mut out),
        Command::Dcgm(a) => cmd::dcgm::run(a),
    }
    .and_then(|code| {
        out.flush().context("writing stdout")?;
        Ok(code)
    });
    match result {
        Ok(code) => std::process::exit(code),
        // The reader went away (`cutrace report … | head`): nothing more to say, to anyone.
        Err(e) if reader_gone(&e) => std::process::exit(0),
        Err(e) => {
            // Each error in the chain says only its own part (none repeats its source's text).
            // Errors quote input (names, paths, a trace's text): control characters escaped.
            let safe = |e: &dyn std::fmt::Display| escape_lines(&e.to_string()).into_owned();
            eprintln!("cutrace: error: {}", safe(&e));
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {}", safe(&cause));
            }
            std::process::exit(failed);
        }
    }
}

/// Whether `e` comes from writing to a pipe whose reader closed it.
fn reader_gone(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// stdout for the commands. Once its reader has gone (`cutrace doctor | head -3`: EPIPE), the
/// rest of the output is dropped without an error, so the command still finishes and exits with
/// its own status (doctor's and audit's are verdicts). Any other write error (a full disk: ENOSPC,
/// EIO) is returned, and `main` exits non-zero with it.
struct Stdout<'a> {
    inner: std::io::StdoutLock<'a>,
    reader_gone: bool,
}

impl Stdout<'_> {
    fn gone<T>(&mut self, r: std::io::Result<T>, none: T) -> std::io::Result<T> {
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.reader_gone = true;
                Ok(none)
            }
            r => r,
        }
    }
}

impl Write for Stdout<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.reader_gone {
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.gone(r, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.reader_gone {
            return Ok(());
        }
        let r = self.inner.flush();
        self.gone(r, ())
    }
}
