//! `cutrace audit`: which binaries will break on CUDA 13 (dropped CUPTI APIs), and which bundle
//! their own libcupti.

use std::path::PathBuf;

/// Scan ELF executables and shared libraries under PATHs (recursing into directories such as a
/// virtualenv or /opt) for imports of CUPTI APIs dropped in CUDA 13.0 (Event, Metric, PC
/// Sampling Activity) or deprecated there (Profiling), and for bundled copies of libcupti.
///
/// Exit status: 1 when a dropped API is found, 0 otherwise, 2 on a usage error.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace audit /opt/app/bin/server                      one binary
  cutrace audit $(python3 -c 'import site; print(site.getsitepackages()[0])')   a whole Python environment
  cutrace audit /opt --format json                       for scripts"#)]
pub struct Args {
    /// Files or directories to scan.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let report = cutrace_doctor::audit::audit(&args.paths)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", report.render_text()),
    }
    Ok(report.exit_status)
}
