//! `cutrace capture`: has processes that report to `cutrace agent` (or a `cutrace monitor`)
//! write ordinary trace parts for the next N seconds, with no restart and no code change; the
//! parts land in one directory that `cutrace report` reads as any recording.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use cutrace_monitor::socket;
use cutrace_monitor::wire::{self, Capture, CaptureRequest, Message, MAX_CAPTURE_SECONDS};

/// Make running processes write a trace for the next N seconds (no restart).
///
/// The processes must have been started with the environment `cutrace agent env` prints (or by
/// `cutrace monitor`); each writes one part, `HOST-PID.cutrace`, into DIR, as `cutrace record`
/// would (kernels, launch calls and copies), then goes on reporting. Only your own user's
/// processes are asked.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace capture --all --seconds 10 -o cap1          every process of yours reporting to the agent
  cutrace capture --pid 4242 --seconds 30 -o cap2     one process (the pid label of /metrics)
  cutrace capture --pid 4242 --last -o cap3           what it did just before (flight recorder)
  cutrace report cap1                                  then read it

--last writes at once what each process kept of its last records (its flight recorder: the
last 65,536 kernels, launch calls and copies), instead of capturing from now on.

The agent's socket is found as `cutrace agent` places it (--socket-dir to say another); for a
`cutrace monitor`, pass the socket it printed with --socket. A process already writing a trace
(`cutrace monitor --record`, or a capture still running) ignores the request.

Exit status: 0 when at least one process was asked and wrote its part; 1 when none could be
asked (the reason is printed); 2 on bad arguments or an unreachable agent."#)]
pub struct Args {
    /// The process to capture, by its pid as /metrics labels it.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    pid: Option<u32>,
    /// Every process of yours that reports.
    #[arg(long)]
    all: bool,
    /// Write the records each process kept from just before (its flight recorder), at once.
    #[arg(long, conflicts_with = "seconds")]
    last: bool,
    /// How long to capture.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=MAX_CAPTURE_SECONDS as i64))]
    seconds: u32,
    /// The trace directory (created if missing; 0700).
    #[arg(short, long)]
    output: PathBuf,
    /// The agent's socket directory [default: as `cutrace agent`'s].
    #[arg(long, conflicts_with = "socket")]
    socket_dir: Option<PathBuf>,
    /// A monitor's socket, as `cutrace monitor` prints it.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print nothing of cutrace's own but warnings and errors.
    #[arg(short, long)]
    quiet: bool,
}

fn socket_path(args: &Args) -> PathBuf {
    if let Some(s) = &args.socket {
        return s.clone();
    }
    let dir = args.socket_dir.clone().unwrap_or_else(|| {
        socket::agent_dir(
            std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .as_deref(),
        )
    });
    dir.join(socket::SOCKET_NAME)
}

/// Sends the request and reads the monitor's reply.
fn ask(path: &Path, req: CaptureRequest) -> anyhow::Result<wire::CaptureReply> {
    let mut s = socket::connect_checked(path).with_context(|| {
        format!(
            "cannot reach a cutrace agent at {}. Fix: start `cutrace agent` (and the programs \
             with `cutrace agent env`), or pass --socket-dir or --socket",
            path.display()
        )
    })?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(&wire::encode(&Message::CaptureRequest(req)))?;
    match wire::FrameReader::default().next(&mut s) {
        Ok(Some(Message::CaptureReply(r))) => Ok(r),
        Ok(_) => anyhow::bail!(
            "{} answered something else than a capture reply",
            path.display()
        ),
        Err(e) => anyhow::bail!("reading the reply from {}: {e}", path.display()),
    }
}

/// The parts in `dir` (a process in a container names its part by its pid in there, so they
/// are counted whatever their pid).
fn parts_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cutrace"))
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (dir, made) = cutrace_launch::prepare_output(&args.output)?;
    let dir =
        std::fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    let path = socket_path(&args);
    let req = CaptureRequest {
        pid: args.pid.filter(|_| !args.all),
        capture: Capture {
            dir: dir.to_string_lossy().into_owned(),
            seconds: args.seconds,
            last: args.last,
        },
    };
    // A directory made here and left empty goes again when nothing could be captured.
    let unmake = |dir: &Path| {
        if made {
            let _ = std::fs::remove_dir(dir);
        }
    };
    let reply = match ask(&path, req) {
        Ok(r) => r,
        Err(e) => {
            unmake(&dir);
            return Err(e);
        }
    };
    if reply.told.is_empty() {
        let why = reply
            .refused
            .unwrap_or_else(|| "no process could be asked".into());
        eprintln!(
            "cutrace: nothing captured: {why}. Fix: check `curl -s 127.0.0.1:9464/metrics | grep \
             cutrace_process_up` for the pids that report, and that they run as you"
        );
        unmake(&dir);
        return Ok(1);
    }
    let pids = reply
        .told
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let (what, secs) = if args.last {
        ("the last records of".to_string(), 0)
    } else {
        (format!("{} s of", args.seconds), u64::from(args.seconds))
    };
    if !args.quiet {
        eprintln!(
            "cutrace: capturing {what} {} process(es) ({pids}) into {}",
            reply.told.len(),
            dir.display()
        );
    }
    // Each finishes its part at the end of its time, at its writer's next turn (within about a
    // flush period); a little more for the last chunks.
    let until = Instant::now() + Duration::from_secs(secs) + Duration::from_millis(1500);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let parts = parts_in(&dir);
    if !args.quiet {
        eprintln!(
            "cutrace: {} part(s) in {}; `cutrace report {}` reads them",
            parts.len(),
            dir.display(),
            cutrace_launch::shell_quote(&dir.display().to_string())
        );
    }
    Ok(if parts.is_empty() { 1 } else { 0 })
}
