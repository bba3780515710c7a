//! `cutrace doctor`: why can't I trace or profile here? Evidence and the exact fix, per check.

use anyhow::Context;
use cutrace_doctor::Root;
use cutrace_export::text::escape_lines;
use std::io::Write;
use std::path::PathBuf;

/// Check whether CUDA tracing and GPU counter profiling work on this machine, and if not, why
/// and what to run. Reads /proc, /dev, /etc and /sys (under --root when given).
///
/// Exit status: 0 when tracing and counters are both available, 1 when counters are not, 2 when
/// even tracing is not; 3 when there was nothing to check: --root does not exist or is not a
/// directory (with --format json, stdout then holds `{"error": "..."}`), or the command line was
/// wrong.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace doctor                      checks this machine; exit 0 / 1 / 2 (/ 3) as above
  cutrace doctor --probe              also opens a real Range Profiler session on each GPU
  cutrace doctor --format json        for scripts and fleet checks
  cutrace doctor --root /mnt/snap     checks a copied /proc, /sys, /etc tree (another node's)"#)]
pub struct Args {
    /// Read every file under DIR instead of `/` (a fixture tree, a mounted image, a container's root).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also start and end a CUPTI Range Profiler session on each GPU and report CUPTI's real answer.
    #[arg(long)]
    probe: bool,
    /// Show evidence and explanations for checks that passed too.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The exit status when --root cannot be checked: distinct from the verdicts (0, 1, 2), so a
/// script never reads a typo in the path as "tracing is not available".
pub const EXIT_BAD_ROOT: i32 = 3;

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    if let Some(problem) = root_problem(&args.root) {
        let msg = format!("--root {}: {problem}", args.root.display());
        eprintln!("cutrace: error: {msg}");
        if let Format::Json = args.format {
            writeln!(out, "{}", serde_json::json!({ "error": msg }))
                .context("writing the doctor's report to stdout")?;
        }
        return Ok(EXIT_BAD_ROOT);
    }
    let root = Root::new(&args.root);
    let mut report = cutrace_doctor::doctor(&root);
    if args.probe {
        report = report.with_probe(cutrace_doctor::probe::run(&root, &|k| {
            std::env::var(k).ok()
        }));
    }
    // A FIFO or device where a file should be is skipped, not waited on: say which.
    for (path, what) in root.not_read() {
        eprintln!("cutrace: note: {path} (under --root) is {what}: not read");
    }
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?),
        // Evidence quotes what other users control (process command lines, file contents).
        Format::Text => write!(out, "{}", escape_lines(&report.render_text(args.verbose))),
    }
    .context("writing the doctor's report to stdout")?;
    Ok(report.exit_status)
}

/// Why `root` cannot be checked, if it cannot.
fn root_problem(root: &std::path::Path) -> Option<String> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some("is not a directory; give the directory that holds proc, sys and etc".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist".into()),
        Err(e) => Some(format!("cannot be read: {e}")),
    }
}
