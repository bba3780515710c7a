//! The cutrace command line: argument parsing, progress and printing. The work happens in the
//! library crates; each subcommand lives in its own module under `cmd/`.

use clap::{Parser, Subcommand};

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
        Some("record") => RECORD_FAILED,
        Some("doctor") => DOCTOR_FAILED,
        _ => 2,
    };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = e.print();
            std::process::exit(failed);
        }
    };
    let result = match cli.command {
        Command::Report(a) => cmd::report::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Audit(a) => cmd::audit::run(a),
        Command::Dcgm(a) => cmd::dcgm::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("cutrace: error: {e}");
            // A cause whose text the line above already holds (a message that quotes its OS
            // error) is not repeated.
            let mut shown = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !shown.contains(&c) {
                    eprintln!("  caused by: {c}");
                    shown.push_str(&c);
                }
            }
            std::process::exit(failed);
        }
    }
}
