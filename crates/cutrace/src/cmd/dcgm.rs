//! `cutrace dcgm`: pause DCGM's profiling metrics so a counter session can take the GPU's
//! performance counters, and resume them, always.

use cutrace_doctor::dcgm::{self, PauseOptions, BLANK_WARNING};
use std::process::Command;
use std::time::Duration;

/// Pause or resume DCGM's profiling metrics (`dcgmi profile --pause/--resume`).
///
/// DCGM and CUPTI-based profilers (Nsight Compute, cutrace profile) share one counter
/// reservation; while DCGM watches profiling metrics the others get CUPTI_ERROR_HARDWARE_BUSY.
/// While paused, DCGM publishes BLANK values for profiling metrics.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace dcgm run -- ncu --metrics sm__cycles_elapsed.avg ./app   pause, run, always resume
  cutrace dcgm pause --for 10m                                      pause; a watchdog resumes
  cutrace dcgm resume                                               resume now"#)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Pause DCGM's profiling metrics. With --for, a watchdog resumes them after that long.
    Pause {
        /// Resume automatically after this long (e.g. 90s, 10m, 1h), even if nobody runs resume.
        #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
        for_: Option<Duration>,
    },
    /// Resume DCGM's profiling metrics (and cancel a pending `pause --for` watchdog).
    Resume,
    /// Pause, run a command, resume: on success, failure, Ctrl-C, SIGTERM, and even when
    /// cutrace itself is killed with SIGKILL.
    Run {
        /// Resume after this long even if the command is still running.
        #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
        for_: Option<Duration>,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// `90s`, `10m`, `1h`, `500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number with a unit, like 90s or 10m"))?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    if ms == 0 {
        return Err("the duration must be more than 0".into());
    }
    Ok(Duration::from_millis(ms))
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{} ms", d.as_millis()),
        1..=119 => format!("{s} s"),
        _ => format!("{} min", s / 60),
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.action {
        Action::Pause { for_: None } => {
            let dcgmi = dcgm::find_dcgmi()?;
            dcgm::pause_plain(&dcgmi)?;
            eprintln!("cutrace: DCGM profiling metrics paused; they stay paused until `cutrace dcgm resume` (prefer `pause --for 30m`, which resumes on its own).");
            eprintln!("cutrace: note: {BLANK_WARNING}.");
            Ok(0)
        }
        Action::Pause { for_: Some(d) } => {
            let dcgmi = dcgm::find_dcgmi()?;
            dcgm::cancel_recorded_watchdog();
            let pid = dcgm::pause_for(&dcgmi, d)?;
            let file = dcgm::watchdog_pidfile();
            if let Err(e) = std::fs::write(&file, format!("{pid}\n")) {
                eprintln!(
                    "cutrace: warning: could not record the watchdog in {}: {e}",
                    file.display()
                );
            }
            eprintln!("cutrace: DCGM profiling metrics paused for {}; watchdog pid {pid} resumes them then (or run `cutrace dcgm resume`).", human(d));
            eprintln!("cutrace: note: {BLANK_WARNING}.");
            Ok(0)
        }
        Action::Resume => {
            let dcgmi = dcgm::find_dcgmi()?;
            if let Some(pid) = dcgm::cancel_recorded_watchdog() {
                eprintln!("cutrace: cancelled the pending resume watchdog (pid {pid})");
            }
            dcgm::resume_now(&dcgmi)?;
            eprintln!("cutrace: DCGM profiling metrics resumed.");
            Ok(0)
        }
        Action::Run { for_, command } => {
            let opts = PauseOptions {
                dcgmi: None,
                deadline: for_,
            };
            let (prog, rest) = command
                .split_first()
                .ok_or_else(|| anyhow::anyhow!("no command given"))?;
            let mut cmd = Command::new(prog);
            cmd.args(rest);
            eprintln!(
                "cutrace: pausing DCGM profiling metrics while `{}` runs; {BLANK_WARNING}.",
                command.join(" ")
            );
            let outcome = dcgm::run_paused(&opts, &mut cmd)?;
            eprintln!("cutrace: DCGM profiling metrics resumed.");
            Ok(outcome.exit_code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("0s").is_err());
    }
}
