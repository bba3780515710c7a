//! `cutrace agent`: the monitor as a node daemon. It serves `/metrics` for every process that
//! reports to its socket, at a fixed place in the user's runtime directory, until it is
//! stopped; `cutrace agent env` prints the environment that makes a program report to it (for
//! a Slurm TaskProlog, a pod spec or a shell). The socket, its checks and the metrics are
//! `cutrace monitor`'s (docs/MONITOR.md).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use cutrace_launch::{injection_env, shell_quote};
use cutrace_monitor::{http, socket, State};

use super::monitor::{
    block_signals, monitor_settings, start_serving, untraced_here, warn_if_not_loopback,
};

/// Serve every reporting process's GPU busy time as Prometheus metrics, until stopped.
///
/// Programs report to the agent when started with the environment `cutrace agent env` prints
/// (CUDA_INJECTION64_PATH and cutrace's settings); nothing else changes for them. The metrics
/// are `cutrace monitor`'s: per GPU one union over all its processes, and per process.
#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_long_help = r#"Examples:
  cutrace agent                                         serve on 127.0.0.1:9464 until stopped
  cutrace agent --listen 127.0.0.1:9500                 another address
  eval "$(cutrace agent env)"; python3 train.py         a program that reports to it
  cutrace agent env > /etc/slurm/cutrace-env            the same lines, for a Slurm TaskProlog
                                                        script that prints them (`cat` that file)
  sudo cutrace agent --group gpuusers --socket-dir /run/cutrace-agent
                                                        one agent for every member of gpuusers

The socket is DIR/monitor.sock, DIR being $XDG_RUNTIME_DIR/cutrace-agent (else
/tmp/cutrace-agent-UID), 0700 and checked to be your own; --socket-dir chooses another, and
`cutrace agent env` must be given the same one. Only your user's processes can report, each for
its own pid only; with --group GROUP, that group's members' processes too (the directory is
then 0750 of the group). A second agent on the same socket is refused; one left by an agent
that died is replaced.

`cutrace agent env` leaves LD_PRELOAD alone: a profiler the program starts itself
(torch.profiler) then fails without cutrace's one-line explanation (`cutrace record` and
`cutrace monitor` preload it).

SIGINT, SIGTERM and SIGHUP stop the agent (exit 0); the socket goes with it."#
)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// Address for the /metrics endpoint (HOST:PORT). Non-loopback addresses expose pids and
    /// program names to whoever can reach them.
    #[arg(long, default_value = "127.0.0.1:9464", value_parser = super::monitor::parse_listen)]
    listen: SocketAddr,
    /// Seconds after a process ended before its own series leave /metrics.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    forget_after: u64,
    /// The socket's directory [default: $XDG_RUNTIME_DIR/cutrace-agent, else
    /// /tmp/cutrace-agent-UID].
    #[arg(long, global = true)]
    socket_dir: Option<PathBuf>,
    /// For `agent env`: the programs trace only part of the time, ON/PERIOD (e.g. 2s/20s), as
    /// `cutrace monitor --duty`.
    #[arg(long, global = true, value_name = "ON/PERIOD", value_parser = super::monitor::parse_duty)]
    duty: Option<cutrace_settings::Duty>,
    /// Let the processes of this group's members report too (a name or number): the socket's
    /// directory is then 0750 of the group and the socket 0660. Run the agent as root (or as
    /// the user whose processes report): a program sends only to an agent of its own user or
    /// root's.
    #[arg(long, global = true, value_name = "GROUP")]
    group: Option<String>,
    /// Seconds a kernel launch may go without completing before it is a stuck kernel: logged
    /// once, and its process's flight recorder written to --dump-stuck. `agent env` passes it
    /// on: a program silent for half of it has CUPTI hand over its unfinished kernels.
    #[arg(long, global = true, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    stuck_after: u64,
    /// Where a process with a stuck kernel writes its last records (a part, as `cutrace
    /// capture --last`), created when first needed [default: $XDG_STATE_HOME/cutrace/stuck,
    /// else ~/.local/state/cutrace/stuck]. Only processes of the agent's own user write there.
    #[arg(long, value_name = "DIR")]
    dump_stuck: Option<PathBuf>,
    /// Write no flight recorder when a kernel is stuck (the hang is still logged).
    #[arg(long, conflicts_with = "dump_stuck")]
    no_dump_stuck: bool,
    /// Print nothing of cutrace's own but warnings and errors.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print, as shell `export` lines, the environment that makes a program report to the agent.
    Env,
}

fn socket_dir(args: &Args) -> PathBuf {
    args.socket_dir.clone().unwrap_or_else(|| {
        socket::agent_dir(
            std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .as_deref(),
        )
    })
}

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    match args.action {
        Some(Action::Env) => print_env(&args, out),
        None => serve(&args),
    }
}

/// `--group`'s gid: a number, or a name from the group database.
fn group_id(args: &Args) -> anyhow::Result<Option<u32>> {
    let Some(g) = &args.group else {
        return Ok(None);
    };
    if let Ok(n) = g.parse::<u32>() {
        return Ok(Some(n));
    }
    match nix::unistd::Group::from_name(g) {
        Ok(Some(grp)) => Ok(Some(grp.gid.as_raw())),
        _ => anyhow::bail!(
            "--group {g}: no such group. Fix: give a group name from `getent group`, or its number"
        ),
    }
}

fn print_env(args: &Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().ok();
    let inject = super::record::inject_lib(exe.as_deref())?;
    let group = group_id(args)?;
    let dir = socket_dir(args);
    // A directory someone else made (in /tmp, before the agent) would hand them the socket's
    // place: refused here, as the agent refuses it.
    if std::fs::symlink_metadata(&dir).is_ok() {
        socket::check_agent_dir(&dir, group).with_context(|| {
            format!(
                "the agent's socket directory {} is not safe to report to. Fix: remove it and \
                 start `cutrace agent` (it makes it 0700), or pass --socket-dir DIR",
                dir.display()
            )
        })?;
    } else if !args.quiet {
        eprintln!(
            "cutrace: note: {} does not exist yet: start `cutrace agent` (which makes it, 0700) \
             before the programs, or they report to no one",
            dir.display()
        );
    }
    let sock = dir.join(socket::SOCKET_NAME);
    let mut settings = monitor_settings(&sock, args.duty, args.stuck_after);
    // One agent serves many runs: no run id.
    settings.run_id = None;
    for (k, v) in injection_env(&inject, &settings) {
        writeln!(out, "export {k}={}", shell_quote(&v.to_string_lossy()))?;
    }
    Ok(0)
}

fn serve(args: &Args) -> anyhow::Result<i32> {
    let listener = http::bind(args.listen)?;
    // The address bound (`--listen 127.0.0.1:0` picks a port).
    let bound = listener.local_addr().unwrap_or(args.listen);
    warn_if_not_loopback(args.listen);
    // Before any thread starts, so that every thread has them blocked.
    let signals = block_signals().context("blocking SIGINT, SIGTERM and SIGHUP")?;
    let group = group_id(args)?;
    let sock = socket::create_shared(&socket_dir(args), group)?;
    let state = Arc::new(Mutex::new(State {
        stuck_after_ns: Some(args.stuck_after * 1_000_000_000),
        group,
        untraced_reason: untraced_here(),
        forget_after: Some(Duration::from_secs(args.forget_after)),
        ..State::default()
    }));
    start_serving(&sock, listener, &state)?;
    super::monitor::watch_stuck(
        &state,
        super::monitor::dump_dir(args.dump_stuck.as_deref(), args.no_dump_stuck)?,
    );
    if !args.quiet {
        eprintln!(
            "cutrace: agent serving metrics on http://{}/metrics for the processes reporting to \
             {}; start them with the environment of `cutrace agent env`",
            bound,
            sock.path.display()
        );
    }
    let fd = nix::sys::signalfd::SignalFd::with_flags(
        &signals,
        nix::sys::signalfd::SfdFlags::SFD_CLOEXEC,
    )
    .context("reading signals")?;
    // Any of them stops the agent; the socket goes with it.
    let _ = fd.read_signal();
    drop(sock);
    Ok(0)
}
