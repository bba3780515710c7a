//! One module per subcommand; each defines its `Args` and a `run` returning the exit status.
//! Commands write their output to the handle `main` gives them and return write errors, which
//! `main` handles once (a reader that went away, a full disk).

use std::path::Path;

use cutrace_trace::{Limits, ReadOptions, Trace};

pub mod agent;
pub mod audit;
pub mod capture;
pub mod convert;
pub mod dcgm;
pub mod diff;
pub mod doctor;
pub mod monitor;
pub mod profile;
mod progress;
pub mod record;
pub mod report;
pub mod sample;

/// `--threads N`: a count from 1 to [`cutrace_trace::limits::MAX_THREADS`].
pub(crate) fn parse_threads(v: &str) -> Result<usize, String> {
    let max = cutrace_trace::limits::MAX_THREADS;
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{v:?} is not a thread count: give a number from 1 to {max} (the default is one per \
             core)"
        )),
    }
}

/// Reads the trace for report, diff and convert (`cutrace_export::input::load`), showing
/// progress on stderr when it is a terminal or the read takes over a second.
pub(crate) fn load(path: &Path, limits: &Limits) -> anyhow::Result<Trace> {
    // For benchmarks: `var::IMPORT_THREADS` of 1 reads a Kineto trace on one thread.
    let opts = ReadOptions {
        import_threads: std::env::var(cutrace_settings::var::IMPORT_THREADS)
            .ok()
            .and_then(|v| v.parse().ok()),
        limits: *limits,
    };
    let mut line = progress::ProgressLine::new();
    let name = path.display().to_string();
    let mut progress = |done: u64, total: Option<u64>| {
        line.show(|| {
            let pct = total
                .filter(|&t| t > 0)
                .map(|t| format!(" of {} MB ({}%)", t / 1_000_000, done * 100 / t))
                .unwrap_or_default();
            format!("cutrace: reading {name}: {} MB{pct}", done / 1_000_000)
        });
    };
    let result = cutrace_export::input::load(path, &opts, &mut progress);
    let took = line.finish();
    let trace = result?;
    if let Some(took) = took {
        eprintln!("cutrace: read {name} in {:.1} s", took.as_secs_f64());
    }
    Ok(trace)
}

/// `--comm-kernels REGEX`: kernels whose name matches are communication too, after the table.
pub fn comm_kernels(re: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let rx = regex_lite::Regex::new(re).with_context(|| {
        format!("--comm-kernels {re:?} is not a regular expression (regex syntax: `nccl|my_ring`)")
    })?;
    if re.is_empty() {
        anyhow::bail!("--comm-kernels: an empty REGEX would match every kernel; give a name part");
    }
    cutrace_trace::comm::set_user_rule(Box::new(move |name| rx.is_match(name)));
    Ok(())
}
