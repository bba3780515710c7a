//! The watchdog: a process of its own that holds one pause and resumes DCGM when its holder's
//! session ends, even when cutrace is killed with SIGKILL.
//!
//! It is the cutrace binary itself, started again through `posix_spawn` with a hidden
//! subcommand ([`WatchdogExe`]) that calls [`watchdog_main`]; the library's own tests start
//! their test binary the same way. So it runs ordinary, safe Rust from its first instruction: no
//! code runs in a forked copy of a multi-threaded cutrace.
//!
//! What it is given:
//! - stdin: the read end of a pipe whose write end only the session holds (close-on-exec, so
//!   the profiled program never gets it). End of file means the session ended, by returning,
//!   by a signal, or by SIGKILL; a `C` means the session's pause failed and there is nothing to
//!   resume. A `pause` has no session: stdin is /dev/null and SIGTERM ends it instead.
//! - stdout: where it reports, one byte each: `S` ready (it holds the lock), `T` deadline
//!   passed, `R` resuming, `K` kept paused for other holders, `X` its dcgmi ran past its
//!   deadline and was killed.
//! - stderr: cutrace's, for what it says when the deadline passes (/dev/null for `pause`,
//!   whose cutrace has returned by then).
//! - arguments: the role, dcgmi's path, the state directory, its record, its deadline, dcgmi's
//!   deadline and the pid of the cutrace that started it.
//!
//! It starts with SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN and SIGTTOU
//! blocked (the spawn sets its mask, so no signal can arrive before it is ready), then leaves
//! cutrace's session with setsid: a Ctrl-C or a hang-up of cutrace's terminal does not reach
//! it. They stay blocked for its whole life; SIGTERM of a `pause` watchdog is read from a
//! signalfd and means "exit without resuming", until it starts resuming.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::FlockOperation;
use rustix::io::Errno;

use super::spawn::{self, Io, Spawn};
use super::{human, resume_timed_out, DcgmError, Role, StateDir, WATCHDOG_NAME};

/// How to start the watchdog: a program and the arguments that make it call
/// [`watchdog_main`] with the rest of its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogExe {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// The hidden subcommand of the cutrace binary that runs [`watchdog_main`].
pub const WATCHDOG_SUBCOMMAND: [&str; 2] = ["dcgm", "__watchdog"];

impl Default for WatchdogExe {
    /// The running executable (through /proc/self/exe, which still works when the file was
    /// replaced since) with [`WATCHDOG_SUBCOMMAND`]: right for the cutrace binary.
    fn default() -> WatchdogExe {
        WatchdogExe {
            program: PathBuf::from("/proc/self/exe"),
            args: WATCHDOG_SUBCOMMAND.iter().map(OsString::from).collect(),
        }
    }
}

/// The signals blocked in the watchdog for its whole life.
fn blocked() -> SigSet {
    [
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGTERM,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ]
    .into_iter()
    .collect()
}

/// What the watchdog is told (its command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchArgs {
    pub role: Role,
    pub dcgmi: PathBuf,
    pub state: PathBuf,
    pub record: PathBuf,
    pub deadline: Option<Duration>,
    pub dcgmi_deadline: Duration,
    pub owner: u32,
}

impl WatchArgs {
    fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = Vec::new();
        let mut put = |k: &str, val: &OsStr| {
            v.push(k.into());
            v.push(val.to_owned());
        };
        put("--role", OsStr::new(self.role.as_str()));
        put("--dcgmi", self.dcgmi.as_os_str());
        put("--state", self.state.as_os_str());
        put("--record", self.record.as_os_str());
        if let Some(d) = self.deadline {
            put("--deadline-ms", OsStr::new(&d.as_millis().to_string()));
        }
        put(
            "--dcgmi-deadline-ms",
            OsStr::new(&self.dcgmi_deadline.as_millis().to_string()),
        );
        put("--owner", OsStr::new(&self.owner.to_string()));
        v
    }

    fn parse(args: &[OsString]) -> Option<WatchArgs> {
        let get = |k: &str| {
            args.chunks(2)
                .find(|kv| kv.len() == 2 && kv[0] == k)
                .map(|kv| kv[1].clone())
        };
        let num = |k: &str| -> Option<u64> { get(k)?.to_str()?.parse().ok() };
        Some(WatchArgs {
            role: match get("--role")?.to_str()? {
                "run" => Role::Run,
                "pause" => Role::Pause,
                _ => return None,
            },
            dcgmi: get("--dcgmi")?.into(),
            state: get("--state")?.into(),
            record: get("--record")?.into(),
            deadline: match get("--deadline-ms") {
                Some(_) => Some(Duration::from_millis(num("--deadline-ms")?)),
                None => None,
            },
            dcgmi_deadline: Duration::from_millis(num("--dcgmi-deadline-ms")?),
            owner: num("--owner")?.try_into().ok()?,
        })
    }
}

/// Start the watchdog of one holder. `session`: the read end of the session's pipe (None for
/// a `pause`); `report`: the write end of the pipe it reports on.
pub(crate) fn spawn_watchdog(
    exe: &WatchdogExe,
    args: &WatchArgs,
    session: Option<BorrowedFd>,
    report: BorrowedFd,
) -> Result<i32, DcgmError> {
    let mut argv = vec![OsString::from(WATCHDOG_NAME)];
    argv.extend(exe.args.iter().cloned());
    argv.extend(args.to_args());
    let stderr = std::io::stderr();
    let pid = spawn::spawn(&Spawn {
        program: &exe.program,
        args: argv,
        stdio: [
            session.map_or(Io::Null, Io::Fd),
            Io::Fd(report),
            if args.role == Role::Pause {
                // Its cutrace returns at once and may be read through a pipe: hold none open.
                Io::Null
            } else {
                Io::Fd(stderr.as_fd())
            },
        ],
        // Not a group leader, so that it can call setsid.
        own_group: false,
        mask: blocked(),
        // Blocked, not ignored: it takes nothing else from cutrace's dispositions.
        default_signals: true,
        close_inherited: true,
    })
    .map_err(DcgmError::Watchdog)?;
    Ok(pid.as_raw_pid())
}

/// Writes one report byte; a session that went away is no error.
fn say(b: &[u8]) {
    let _ = rustix::io::write(std::io::stdout(), b);
}

fn tell(msg: &str) {
    let _ = rustix::io::write(std::io::stderr(), msg.as_bytes());
}

/// The watchdog's life (see the module documentation). `args`: what follows the hidden
/// subcommand. Returns its exit status: dcgmi's, 0 when it did not resume, 124 when dcgmi ran
/// past its deadline, 2 for arguments it does not understand, 3 when it could not start.
pub fn watchdog_main(args: &[OsString]) -> i32 {
    let Some(a) = WatchArgs::parse(args) else {
        tell("cutrace: the DCGM resume watchdog is started by `cutrace dcgm`, not by hand\n");
        return 2;
    };
    // Already blocked by the spawn; again in case something else started it.
    let _ = blocked().thread_block();
    let _ = rustix::process::setsid();
    let name = std::ffi::CString::new(WATCHDOG_NAME).expect("no NUL");
    let _ = nix::sys::prctl::set_name(&name);
    let cancel = match a.role {
        Role::Pause => {
            let term: SigSet = [Signal::SIGTERM].into_iter().collect();
            match SignalFd::with_flags(&term, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    tell(&format!(
                        "cutrace: the DCGM resume watchdog cannot watch for SIGTERM: {e}\n"
                    ));
                    return 3;
                }
            }
        }
        Role::Run => None,
    };
    // The hold lock, shared, beside the one of the cutrace that started us (which keeps its
    // own until we say `S`), so it is never refused and never lapses.
    let hold = match StateDir::open(&a.state).and_then(|s| s.open_hold()) {
        Ok(f) => f,
        Err(e) => {
            tell(&format!("cutrace: the DCGM resume watchdog: {e}\n"));
            return 3;
        }
    };
    if rustix::fs::flock(&hold, FlockOperation::NonBlockingLockShared).is_err() {
        tell("cutrace: the DCGM resume watchdog could not share the hold lock\n");
        return 3;
    }
    say(b"S");
    let ended = wait_for_the_end(&a, cancel.as_ref());
    let _ = std::fs::remove_file(&a.record);
    if ended == End::Cancelled {
        return 0;
    }
    drop(cancel); // SIGTERM stays blocked: ignored from here on, while it resumes
    let deadline_passed = ended == End::Deadline;
    if deadline_passed {
        say(b"T");
    }
    let limit = a.deadline.map(human).unwrap_or_default();
    let _ = rustix::fs::flock(&hold, FlockOperation::Unlock);
    if rustix::fs::flock(&hold, FlockOperation::NonBlockingLockExclusive) == Err(Errno::WOULDBLOCK)
    {
        // Another holder is alive: the last one to leave resumes.
        if deadline_passed {
            tell(&format!("cutrace: the --for time limit ({limit}) ran out while the command was still running; other cutrace sessions still hold the pause, so DCGM stays paused until the last of them ends.\n"));
        }
        say(b"K");
        return 0;
    }
    if deadline_passed {
        tell(&format!("cutrace: the --for time limit ({limit}) ran out while the command was still running: resuming DCGM profiling metrics now; the command keeps running without the counters guaranteed.\n"));
    }
    say(b"R");
    // dcgmi runs as our child: we keep the exclusive lock (a new pause waits for this resume)
    // and a hung dcgmi is killed with everything it started, so the lock is released and never
    // wedges a later run.
    let resumed = resume(&a);
    drop(hold);
    match resumed {
        Ok(Some(st)) => {
            use std::os::unix::process::ExitStatusExt;
            st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
        }
        Ok(None) => {
            // The session reports it when it is still there; nobody else would.
            if rustix::process::getppid().map(|p| p.as_raw_pid() as u32) != Some(a.owner) {
                tell(&format!(
                    "cutrace: {}\n",
                    resume_timed_out(&a.dcgmi, a.dcgmi_deadline)
                ));
            }
            say(b"X");
            124
        }
        Err(e) => {
            tell(&format!(
                "cutrace: could not run {}: {e}\n",
                a.dcgmi.display()
            ));
            127
        }
    }
}

/// `dcgmi profile --resume` with our stderr as its output, the default signal dispositions,
/// an empty mask, a process group of its own and its deadline.
fn resume(a: &WatchArgs) -> std::io::Result<Option<std::process::ExitStatus>> {
    let stderr = std::io::stderr();
    let pid = spawn::spawn(&Spawn {
        program: &a.dcgmi,
        args: ["dcgmi", "profile", "--resume"]
            .map(OsString::from)
            .to_vec(),
        stdio: [Io::Null, Io::Fd(stderr.as_fd()), Io::Fd(stderr.as_fd())],
        own_group: true,
        mask: SigSet::empty(),
        default_signals: true,
        close_inherited: true,
    })?;
    spawn::wait_within(pid, Instant::now(), a.dcgmi_deadline)
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The session closed its end of the pipe or died.
    Session,
    /// The deadline passed.
    Deadline,
    /// Nothing to resume: the session's pause failed, or SIGTERM told a `pause` to go.
    Cancelled,
}

fn wait_for_the_end(a: &WatchArgs, cancel: Option<&SignalFd>) -> End {
    let start = Instant::now();
    let stdin = std::io::stdin();
    loop {
        let remaining = match a.deadline {
            Some(d) => match d.checked_sub(start.elapsed()) {
                Some(r) if !r.is_zero() => Some(r),
                _ => return End::Deadline,
            },
            None => None,
        };
        let mut fds = Vec::with_capacity(2);
        if a.role == Role::Run {
            fds.push(PollFd::new(&stdin, PollFlags::IN));
        }
        if let Some(c) = cancel {
            fds.push(PollFd::new(c, PollFlags::IN));
        }
        let ts = remaining.map(|r| Timespec {
            tv_sec: r.as_secs() as _,
            tv_nsec: r.subsec_nanos() as _,
        });
        match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(0) | Err(Errno::INTR) => continue, // the loop re-checks the deadline
            Ok(_) => {}
            Err(_) => return End::Session,
        }
        let session_ready = a.role == Role::Run && !fds[0].revents().is_empty();
        let cancel_ready = cancel.is_some() && !fds[fds.len() - 1].revents().is_empty();
        drop(fds);
        if cancel_ready {
            if let Some(c) = cancel {
                if let Ok(Some(_)) = c.read_signal() {
                    return End::Cancelled;
                }
            }
        }
        if session_ready {
            let mut buf = [0u8; 64];
            match rustix::io::read(&stdin, &mut buf) {
                Ok(0) => return End::Session,
                Ok(n) if buf[..n].contains(&b'C') => return End::Cancelled,
                Ok(_) | Err(Errno::INTR) | Err(Errno::AGAIN) => {}
                Err(_) => return End::Session,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        let a = WatchArgs {
            role: Role::Pause,
            dcgmi: "/opt/dcgm/bin/dcgmi".into(),
            state: "/run/user/7/cutrace-dcgm".into(),
            record: "/run/user/7/cutrace-dcgm/holder.12.0".into(),
            deadline: Some(Duration::from_millis(1500)),
            dcgmi_deadline: Duration::from_secs(20),
            owner: 12,
        };
        assert_eq!(WatchArgs::parse(&a.to_args()), Some(a.clone()));
        let b = WatchArgs {
            role: Role::Run,
            deadline: None,
            ..a
        };
        assert_eq!(WatchArgs::parse(&b.to_args()), Some(b.clone()));
        // Missing or malformed: refused, not guessed.
        assert_eq!(WatchArgs::parse(&[]), None);
        let mut bad = b.to_args();
        bad[1] = "stop".into();
        assert_eq!(WatchArgs::parse(&bad), None);
    }

    #[test]
    fn started_by_hand_it_explains_and_does_nothing() {
        assert_eq!(watchdog_main(&["--role".into(), "run".into()]), 2);
    }
}
