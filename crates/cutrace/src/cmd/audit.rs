//! `cutrace audit`: which binaries will break on CUDA 13 (dropped CUPTI APIs), and which bundle
//! their own libcupti.

use anyhow::Context;
use cutrace_audit::{AuditOptions, Progress, RealFs};
use cutrace_export::text::escape_lines;
use std::io::Write;
use std::path::PathBuf;

/// Scan ELF executables, shared libraries, object files and `ar` archives under PATHs
/// (recursing into directories such as a virtualenv or /opt) for CUPTI APIs dropped in CUDA
/// 13.0 (Event, Metric, PC Sampling Activity) or deprecated there (Profiling), and for copies
/// of libcupti (bundled, wheel-repaired `libcupti-<hash>.so.N`, statically linked, static
/// archives).
///
/// A file is reported when it imports such an API; when it defines it (a statically linked
/// CUPTI: the dropped API is inside, whether it is called cannot be told from symbols); or,
/// at lower confidence, when its bytes name it without a symbol (a dlopen/dlsym lookup such as
/// `dlsym(h, "cuptiEventGroupCreate")`: every ELF file is read whole for this; --no-strings
/// skips it). Paths are reported as their real paths. /proc, /sys, /dev and other pseudo
/// filesystems are not entered unless given as a PATH. Progress goes to stderr on a terminal,
/// or every 2 s once a walk takes over a second.
///
/// Exit status: 0 nothing dropped found and every file and directory read; 1 a dropped API
/// found (imported, statically linked, or named in strings); 3 nothing dropped found but some
/// files or directories could not be read (listed as `error:`; the audit is incomplete); 2 a
/// usage error or a PATH that does not exist.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace audit /opt/app/bin/server                      one binary
  cutrace audit $(python3 -c 'import site; print(site.getsitepackages()[0])')   a whole Python environment
  cutrace audit / --one-file-system --no-strings         a whole machine's root filesystem, quickly
  cutrace audit /opt --format json                       for scripts"#)]
pub struct Args {
    /// Files or directories to scan.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Stay on the filesystem of each PATH: no directory or linked file on another one is read
    /// (like `find -xdev`).
    #[arg(long, short = 'x')]
    one_file_system: bool,
    /// Do not read whole files looking for API names (dlsym lookups): only ELF headers and
    /// symbol tables are read (far less I/O on large trees).
    #[arg(long)]
    no_strings: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    let opts = AuditOptions {
        strings: !args.no_strings,
        one_file_system: args.one_file_system,
    };
    // As `report` reads: progress on stderr when it is a terminal (live), or once the walk
    // takes over a second (a line every 2 s), so a long walk is never silent.
    let mut line = super::progress::ProgressLine::new();
    let live = line.live();
    let mut progress = |p: &Progress| {
        line.show(|| {
            let errors = if p.errors > 0 {
                format!(", {} unreadable", p.errors)
            } else {
                String::new()
            };
            let text = format!(
                "cutrace: audit: {} files scanned ({} ELF{errors}); at {}",
                p.files_scanned,
                p.elf_files,
                p.path.display()
            );
            // A live line is cut to a terminal's width.
            if live {
                text.chars().take(150).collect()
            } else {
                text
            }
        });
    };
    let report = cutrace_audit::audit_with(&args.paths, &opts, &RealFs, &mut progress)?;
    if let Some(took) = line.finish() {
        eprintln!(
            "cutrace: audited {} files in {:.1} s",
            report.files_scanned,
            took.as_secs_f64()
        );
    }
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        // File names are anyone's choice: control characters escaped.
        Format::Text => escape_lines(&report.render_text()).into_owned(),
    };
    out.write_all(text.as_bytes())
        .context("writing the audit to stdout")?;
    if report.incomplete {
        eprintln!(
            "cutrace: audit incomplete: {} files or directories could not be read",
            report.errors.len()
        );
    }
    Ok(report.exit_status)
}
