//! `cutrace dcgm`: pause DCGM's profiling metrics so a counter session can take the GPU's
//! performance counters, and resume them, always — but only when the last cutrace session that
//! needs them paused has ended.

use cutrace_dcgm::{self as dcgm, Holder, PauseOptions, ResumeReport, BLANK_WARNING};
use std::path::PathBuf;
use std::time::Duration;

/// Pause or resume DCGM's profiling metrics (`dcgmi profile --pause/--resume`).
///
/// DCGM and CUPTI-based profilers (Nsight Compute's `ncu`, the counter check of `cutrace doctor
/// --probe`) share one counter reservation; while DCGM watches profiling metrics the others get
/// CUPTI_ERROR_HARDWARE_BUSY. While paused, DCGM publishes BLANK values for profiling metrics.
///
/// Overlapping `run`s and `pause`s of one user are counted: DCGM resumes when the last of them
/// ends, never while another still runs.
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
    ///
    /// A new `pause` replaces an earlier `pause` of yours (its --for no longer applies);
    /// running `cutrace dcgm run` sessions keep their own hold.
    Pause {
        /// Resume automatically after this long (e.g. 90s, 10m, 1h; at most 7 days), even if
        /// nobody runs resume — unless a `cutrace dcgm run` still holds the pause then.
        #[arg(long = "for", value_name = "DURATION", value_parser = dcgm::text::parse_duration)]
        for_: Option<Duration>,
    },
    /// Resume DCGM's profiling metrics, ending your `pause` (and its pending --for watchdog).
    ///
    /// If a `cutrace dcgm run` of yours still holds the pause, says which and leaves DCGM
    /// paused (exit 1): it resumes when the last of them ends. --force resumes anyway.
    Resume {
        /// Resume even while `cutrace dcgm run` sessions hold the pause (their counters may
        /// then be taken back by DCGM).
        #[arg(long)]
        force: bool,
    },
    /// Pause, run a command, resume: on success, failure, Ctrl-C, SIGTERM, and even when
    /// cutrace itself is killed with SIGKILL. Another session still holding the pause keeps it.
    Run {
        /// Resume after this long (at most 7 days) even if the command is still running.
        #[arg(long = "for", value_name = "DURATION", value_parser = dcgm::text::parse_duration)]
        for_: Option<Duration>,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The resume watchdog that `pause` and `run` start (cutrace_dcgm::WATCHDOG_SUBCOMMAND).
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn human(d: Duration) -> String {
    dcgm::human(d)
}

fn now_unix() -> u64 {
    dcgm::text::unix_now()
}

fn list(holders: &[Holder]) -> String {
    dcgm::text::list(holders, now_unix())
}

/// A command is looked up like a shell would, before anything is paused: missing gives 127,
/// present but not runnable 126 (`record`'s lookup, so both commands answer alike).
pub(super) fn resolve_program(prog: &str) -> Result<PathBuf, (i32, String)> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cutrace_launch::resolve_program(
        std::ffi::OsStr::new(prog),
        std::env::var_os("PATH").as_deref(),
        &cwd,
    )
    .map_err(|e| (e.code, e.message))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.action {
        Action::Pause { for_ } => {
            let dcgmi = dcgm::find_dcgmi()?;
            let state = dcgm::StateDir::for_user()?;
            let r = dcgm::pause_manual(&dcgm::WatchdogExe::default(), &dcgmi, &state, for_)?;
            match for_ {
                Some(d) => eprintln!("cutrace: DCGM profiling metrics paused for {}; watchdog pid {} resumes them then (or run `cutrace dcgm resume`).", human(d), r.holder.pid),
                None => eprintln!("cutrace: DCGM profiling metrics paused; they stay paused until `cutrace dcgm resume` (watchdog pid {} holds them; prefer `pause --for 30m`, which resumes on its own).", r.holder.pid),
            }
            for old in &r.replaced {
                let was = match old.until {
                    Some(u) => format!(
                        "it would have resumed them in {}",
                        human(Duration::from_secs(u.saturating_sub(now_unix())))
                    ),
                    None => "it held them until resume".into(),
                };
                eprintln!("cutrace: this replaces the earlier `cutrace dcgm pause` (watchdog pid {}; {was}), which has stopped without resuming.", old.pid);
            }
            if !r.others.is_empty() {
                eprintln!("cutrace: also holding the pause: {}; DCGM resumes only when the last holder ends.", list(&r.others));
            }
            eprintln!("cutrace: note: {BLANK_WARNING}.");
            Ok(0)
        }
        Action::Resume { force } => {
            let dcgmi = dcgm::find_dcgmi()?;
            let state = dcgm::StateDir::for_user()?;
            let report = dcgm::release_and_resume(&dcgmi, &state, force)?;
            let cancelled = match &report {
                ResumeReport::Resumed { cancelled }
                | ResumeReport::HeldByOthers { cancelled, .. }
                | ResumeReport::Forced { cancelled, .. } => cancelled,
            };
            for c in cancelled {
                match c.until {
                    Some(_) => eprintln!("cutrace: cancelled the pending resume watchdog of `cutrace dcgm pause --for` (pid {})", c.pid),
                    None => eprintln!("cutrace: ended the `cutrace dcgm pause` hold (watchdog pid {})", c.pid),
                }
            }
            match report {
                ResumeReport::Resumed { .. } => {
                    eprintln!("cutrace: DCGM profiling metrics resumed.");
                    Ok(0)
                }
                ResumeReport::HeldByOthers { holders, .. } => {
                    eprintln!("cutrace: DCGM profiling metrics NOT resumed: still held by {}. They resume when the last of these ends; `cutrace dcgm resume --force` resumes now anyway (those sessions may then lose the counters to DCGM).", list(&holders));
                    Ok(1)
                }
                ResumeReport::Forced { holders, .. } => {
                    eprintln!("cutrace: DCGM profiling metrics resumed (--force) although still held by {}; their counters may now be taken back by DCGM.", list(&holders));
                    Ok(0)
                }
            }
        }
        Action::Watchdog { args } => Ok(dcgm::watchdog_main(&args)),
        Action::Run { for_, command } => {
            let prog = command
                .first()
                .ok_or_else(|| anyhow::anyhow!("no command given"))?;
            // Before pausing anything: a command that cannot start is answered like a shell.
            let resolved = match resolve_program(prog) {
                Ok(p) => p,
                Err((code, msg)) => {
                    eprintln!("cutrace: {msg} (nothing was paused)");
                    return Ok(code);
                }
            };
            let opts = PauseOptions {
                dcgmi: Some(dcgm::find_dcgmi()?),
                deadline: for_,
                state_dir: None,
                label: Some(command.join(" ")),
                ..PauseOptions::default()
            };
            let argv: Vec<std::ffi::OsString> = command.iter().map(Into::into).collect();
            eprintln!(
                "cutrace: pausing DCGM profiling metrics while `{}` runs; {BLANK_WARNING}.",
                command.join(" ")
            );
            let outcome = match dcgm::run_paused(&opts, &resolved, &argv) {
                Ok(o) => o,
                Err(dcgm::RunError::Spawn(e)) => {
                    let code = if e.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    };
                    eprintln!("cutrace: {prog}: {e}");
                    return Ok(code);
                }
                Err(e) => return Err(e.into()),
            };
            say_release(&outcome);
            Ok(outcome.exit_code)
        }
    }
}

/// How a run's hold on DCGM's pause ended (`dcgm run`, `profile --pause-dcgm`).
pub(super) fn say_release(outcome: &dcgm::RunOutcome) {
    let r = outcome.release;
    match (r.deadline_passed, r.resumed) {
        (false, true) => eprintln!("cutrace: DCGM profiling metrics resumed."),
        (true, true) => eprintln!("cutrace: DCGM profiling metrics had already been resumed by the --for time limit, while the command was still running."),
        (deadline, false) => eprintln!(
            "cutrace: DCGM profiling metrics stay paused: {}still held by {}; the last of them resumes them.",
            if deadline { "this run's --for time limit ended its hold earlier; " } else { "" },
            list(&outcome.still_held_by)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_program;

    #[test]
    fn programs_resolve_like_a_shell() {
        assert_eq!(resolve_program("/nonexistent/x").unwrap_err().0, 127);
        assert_eq!(
            resolve_program("cutrace-surely-no-such-program")
                .unwrap_err()
                .0,
            127
        );
        assert_eq!(resolve_program("/").unwrap_err().0, 126);
        assert!(resolve_program("sh").is_ok());
    }
}
