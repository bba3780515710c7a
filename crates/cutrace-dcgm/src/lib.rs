//! Pausing DCGM's profiling metrics around a counter session, and resuming them on every exit
//! path. "Due to current hardware limitations, collection of profiling metrics with DCGM will
//! conflict with usage of other developer tools"; the documented workaround is
//! `dcgmi profile --pause` ... `dcgmi profile --resume` (DCGM feature overview,
//! https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html).
//!
//! DCGM's pause is one switch for the whole host, so cutrace counts who holds it. Every pause
//! has a *holder*: a watchdog process started *before* pausing (the `watchdog` module), in its
//! own session (a Ctrl-C to cutrace's process group does not reach it), named
//! [`WATCHDOG_NAME`]. While it lives it holds a shared `flock` on `hold.lock` in the per-user
//! [`StateDir`], and a record
//! `holder.*` there says who it is (its pid and start time from `/proc/PID/stat`, role, command,
//! deadline). When its session ends — the pipe from cutrace reports end-of-file because cutrace
//! closed it or died, even by SIGKILL, or the deadline passed — the watchdog removes its record,
//! drops its shared lock and tries to take the lock exclusively without waiting: only the last
//! holder gets it, and only the last holder runs `dcgmi profile --resume` (keeping the
//! exclusive lock while dcgmi runs, so a new pause waits for that resume to finish instead of
//! being undone by it). The kernel releases a dead holder's lock, so liveness needs no pid
//! guessing. One code path for every exit.
//!
//! Every `dcgmi` runs with a deadline ([`DCGMI_TIMEOUT`], [`DCGMI_TIMEOUT_ENV`]): past it, it is
//! killed with its process group and the command and the deadline are named. Children are
//! started through `posix_spawn`, which gives them their signal mask, default signal
//! dispositions and descriptors without any code of ours running between fork and exec; the
//! watchdog is the cutrace binary started again ([`WatchdogExe`]). The crate has no `unsafe`
//! code.

mod spawn;
pub mod text;
mod watchdog;

pub use watchdog::{watchdog_main, WatchdogExe, WATCHDOG_SUBCOMMAND};

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{SigSet, SigmaskHow, Signal as NixSignal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use rustix::fs::FlockOperation;
use rustix::io::Errno;
use rustix::process::{self, Pid, Signal};

/// "When paused, DCGM will publish BLANK values for profiling metrics."
pub const BLANK_WARNING: &str = "while DCGM is paused it publishes BLANK values for profiling metrics: utilization panels go blank, and an alert rule that reads blank as zero will fire";

/// The watchdog's process name (`/proc/PID/comm`, at most 15 bytes): the marker that a pid in a
/// holder record is still that watchdog and not dcgmi it has become or an unrelated process.
pub const WATCHDOG_NAME: &str = "cutrace-dcgm-wd";

/// The longest deadline accepted: a pause meant to last longer is a plain pause.
pub const MAX_DEADLINE: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a pause waits for another cutrace's resume (which holds the lock) to finish.
const LOCK_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum DcgmError {
    #[error("dcgmi not found on PATH; DCGM's command line tool is needed to pause its profiling metrics (if nothing runs DCGM here, there is nothing to pause)")]
    NotFound,
    #[error("could not run {path}")]
    Spawn {
        path: String,
        source: std::io::Error,
    },
    #[error("`dcgmi profile {action}` failed ({status}): {stderr}")]
    Failed {
        action: &'static str,
        status: String,
        stderr: String,
    },
    #[error("could not start the resume watchdog: {0}")]
    Watchdog(std::io::Error),
    #[error("the resume watchdog (pid {pid}) ended abnormally: {status}")]
    WatchdogStatus { pid: i32, status: String },
    #[error("refusing to keep cutrace's DCGM state in {path}: {reason}")]
    State { path: PathBuf, reason: String },
    #[error("{what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("waited {0:?} for another cutrace's `dcgmi profile --resume` to finish (it holds {1}); is a dcgmi hanging?")]
    LockBusy(Duration, PathBuf),
    #[error("the --for duration must be at most 7 days ({0:?} asked)")]
    DeadlineTooLong(Duration),
    #[error("`{command}` did not finish within {} (its deadline; {DCGMI_TIMEOUT_ENV} sets it): killed it; {after}", human(*.deadline))]
    TimedOut {
        command: String,
        deadline: Duration,
        /// What that leaves behind and what to do.
        after: &'static str,
    },
    #[error("{DCGMI_TIMEOUT_ENV}={0:?}: expected whole seconds (`20`) or milliseconds (`500ms`), more than 0 and at most 1 h")]
    BadTimeout(String),
}

/// Sets how long one `dcgmi` command may take before it is killed.
pub const DCGMI_TIMEOUT_ENV: &str = cutrace_settings::var::DCGMI_TIMEOUT;

/// How long one `dcgmi profile` may run by default: it answers in well under a second when the
/// host engine is up; a hung one must not hold the pause, or a terminal, for ever.
pub const DCGMI_TIMEOUT: Duration = Duration::from_secs(20);

/// The deadline of every `dcgmi` command: [`DCGMI_TIMEOUT_ENV`] or [`DCGMI_TIMEOUT`].
pub fn dcgmi_timeout() -> Result<Duration, DcgmError> {
    let Some(v) = std::env::var_os(DCGMI_TIMEOUT_ENV) else {
        return Ok(DCGMI_TIMEOUT);
    };
    let v = v.to_string_lossy().into_owned();
    let t = v.trim();
    let d = match t.strip_suffix("ms") {
        Some(ms) => ms.trim().parse().ok().map(Duration::from_millis),
        None => t
            .strip_suffix('s')
            .unwrap_or(t)
            .trim()
            .parse()
            .ok()
            .map(Duration::from_secs),
    };
    d.filter(|d| !d.is_zero() && *d <= Duration::from_secs(3600))
        .ok_or(DcgmError::BadTimeout(v))
}

/// How long a pause waits for another cutrace's resume (which holds the lock) to finish: longer
/// than that resume's dcgmi may take before its watchdog kills it.
fn lock_wait() -> Duration {
    LOCK_WAIT.max(dcgmi_timeout().unwrap_or(DCGMI_TIMEOUT) + Duration::from_secs(10))
}

/// `dcgmi` on PATH, as an absolute path (the watchdog runs it without a PATH search).
pub fn find_dcgmi() -> Result<PathBuf, DcgmError> {
    let path = std::env::var_os("PATH").ok_or(DcgmError::NotFound)?;
    std::env::split_paths(&path)
        .map(|d| d.join("dcgmi"))
        .find(|p| is_executable(p))
        .ok_or(DcgmError::NotFound)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn dcgmi_profile(dcgmi: &Path, action: &'static str) -> Result<(), DcgmError> {
    let deadline = dcgmi_timeout()?;
    let out = match spawn::output_within(dcgmi, &["profile", action], deadline) {
        Ok(Some(out)) => out,
        Ok(None) => {
            return Err(DcgmError::TimedOut {
                command: format!("{} profile {action}", dcgmi.display()),
                deadline,
                after: if action == "--pause" {
                    "DCGM may or may not be paused; `cutrace dcgm resume` resumes it"
                } else {
                    "DCGM may still be paused; check the DCGM host engine (nv-hostengine), then `cutrace dcgm resume`"
                },
            })
        }
        Err(source) => {
            return Err(DcgmError::Spawn {
                path: dcgmi.display().to_string(),
                source,
            })
        }
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(DcgmError::Failed {
            action,
            status: out.status.to_string(),
            stderr: format!(
                "{} {}",
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            )
            .trim()
            .to_string(),
        })
    }
}

/// `dcgmi profile --pause`, nothing else: no holder, no watchdog.
pub fn pause_plain(dcgmi: &Path) -> Result<(), DcgmError> {
    dcgmi_profile(dcgmi, "--pause")
}

/// `dcgmi profile --resume`, now, whoever holds the pause.
pub fn resume_now(dcgmi: &Path) -> Result<(), DcgmError> {
    dcgmi_profile(dcgmi, "--resume")
}

/// A pid to signal or wait for; never 0 or negative (to kill(2) those mean a process group).
fn positive_pid(raw: i32) -> Option<Pid> {
    (raw > 0).then(|| Pid::from_raw(raw)).flatten()
}

fn euid() -> u32 {
    process::geteuid().as_raw()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The per-user state directory.

/// Where cutrace keeps its DCGM holders: private to one user, never `$TMPDIR` (a `resume` run
/// with another TMPDIR must find what a `pause` left).
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

/// `$XDG_RUNTIME_DIR/cutrace-dcgm` when XDG_RUNTIME_DIR is an absolute directory owned by this
/// user that nobody else can write, else `/tmp/cutrace-dcgm-UID`.
pub fn default_state_path() -> PathBuf {
    state_path_for(std::env::var_os("XDG_RUNTIME_DIR"), euid())
}

/// [`default_state_path`] given XDG_RUNTIME_DIR and the uid: nothing else (TMPDIR least of
/// all) decides it.
fn state_path_for(xdg_runtime_dir: Option<std::ffi::OsString>, uid: u32) -> PathBuf {
    if let Some(x) = xdg_runtime_dir.map(PathBuf::from) {
        let ok = x.is_absolute()
            && std::fs::symlink_metadata(&x)
                .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0);
        if ok {
            return x.join("cutrace-dcgm");
        }
    }
    PathBuf::from(format!("/tmp/cutrace-dcgm-{uid}"))
}

impl StateDir {
    /// The default per-user directory ([`default_state_path`]), created and checked.
    pub fn for_user() -> Result<StateDir, DcgmError> {
        StateDir::open(&default_state_path())
    }

    /// Create `path` with mode 0700 if it is missing, then insist that it is a real directory
    /// (not a symbolic link), owned by this user, that no other user can enter.
    pub fn open(path: &Path) -> Result<StateDir, DcgmError> {
        let refuse = |reason: String| DcgmError::State {
            path: path.to_path_buf(),
            reason,
        };
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(refuse(format!("cannot create it: {e}"))),
        }
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(refuse("it is a symbolic link; remove it".into()));
        }
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => refuse("it is a symbolic link; remove it".into()),
                Some(libc::ENOTDIR) => refuse("it is not a directory; remove it".into()),
                _ => refuse(format!("cannot open it: {e}")),
            })?;
        let m = dir
            .metadata()
            .map_err(|e| refuse(format!("cannot stat it: {e}")))?;
        if m.uid() != euid() {
            return Err(refuse(format!(
                "it belongs to uid {}, not to you (uid {}); someone else created it: remove it, or set XDG_RUNTIME_DIR to a private directory",
                m.uid(),
                euid()
            )));
        }
        if m.mode() & 0o077 != 0 {
            return Err(refuse(format!(
                "its mode {:o} lets other users in; it must be 700 (`chmod 700 {}` if you made it)",
                m.mode() & 0o7777,
                path.display()
            )));
        }
        Ok(StateDir {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn hold_path(&self) -> PathBuf {
        self.path.join("hold.lock")
    }

    fn open_hold(&self) -> Result<File, DcgmError> {
        let p = self.hold_path();
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)
            .map_err(|source| DcgmError::Io {
                what: "cannot open",
                path: p,
                source,
            })
    }

    /// The live holders, oldest first. Records whose watchdog is gone (pid no longer alive with
    /// the recorded start time) are removed.
    pub fn holders(&self) -> Vec<Holder> {
        let Ok(rd) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with("holder.") || name.ends_with(".tmp") {
                continue;
            }
            let path = e.path();
            match Holder::read(&path) {
                Some(h) if h.is_alive() => out.push(h),
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        out.sort_by_key(|h| (h.since, h.pid));
        out
    }
}

/// Take `flock(op)` (a non-blocking operation) on `f`, retrying for up to `LOCK_WAIT`.
fn lock_waiting(f: &File, op: FlockOperation, path: &Path) -> Result<(), DcgmError> {
    let t = Instant::now();
    loop {
        match rustix::fs::flock(f, op) {
            Ok(()) => return Ok(()),
            Err(e) if e == Errno::WOULDBLOCK || e == Errno::INTR => {}
            Err(e) => {
                return Err(DcgmError::Io {
                    what: "cannot lock",
                    path: path.to_path_buf(),
                    source: e.into(),
                })
            }
        }
        let wait = lock_wait();
        if t.elapsed() > wait {
            return Err(DcgmError::LockBusy(wait, path.to_path_buf()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn try_lock(f: &File, op: FlockOperation) -> bool {
    rustix::fs::flock(f, op).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Holder records.

/// Why a holder holds the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A session (`cutrace dcgm run`, a [`DcgmGuard`]): it leaves when the session ends.
    Run,
    /// `cutrace dcgm pause [--for]`: it leaves at its deadline, or when `resume` or a newer
    /// `pause` tells it to (SIGTERM: it then exits without resuming).
    Pause,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Run => "run",
            Role::Pause => "pause",
        }
    }
}

/// One live holder, as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub role: Role,
    /// The watchdog's pid and its start time (field 22 of /proc/PID/stat, clock ticks since
    /// boot): together they name one process, whatever later reuses the pid.
    pub pid: i32,
    pub start: u64,
    /// The cutrace process that paused.
    pub owner: i32,
    /// What it paused for (the command of a `run`).
    pub label: String,
    /// Unix seconds.
    pub since: u64,
    /// Unix seconds of its deadline, if it has one.
    pub until: Option<u64>,
    record: PathBuf,
}

impl Holder {
    fn render(&self) -> String {
        format!(
            "role={}\npid={}\nstart={}\nowner={}\nsince={}\nuntil={}\nlabel={}\n",
            self.role.as_str(),
            self.pid,
            self.start,
            self.owner,
            self.since,
            self.until.map(|u| u.to_string()).unwrap_or_default(),
            self.label.replace(['\n', '\r'], " ")
        )
    }

    fn read(path: &Path) -> Option<Holder> {
        let mut text = String::new();
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ok()?
            .read_to_string(&mut text)
            .ok()?;
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
        };
        Some(Holder {
            role: match get("role")? {
                "run" => Role::Run,
                "pause" => Role::Pause,
                _ => return None,
            },
            pid: get("pid")?.parse().ok().filter(|&p: &i32| p > 0)?,
            start: get("start")?.parse().ok()?,
            owner: get("owner")?.parse().ok()?,
            since: get("since")?.parse().ok()?,
            until: match get("until")? {
                "" => None,
                u => Some(u.parse().ok()?),
            },
            label: get("label").unwrap_or_default().to_string(),
            record: path.to_path_buf(),
        })
    }

    fn write(&self) -> std::io::Result<()> {
        let mut tmp = self.record.clone().into_os_string();
        tmp.push(".tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(self.render().as_bytes())?;
        drop(f);
        std::fs::rename(&tmp, &self.record)
    }

    /// The recorded process still runs (not a zombie) with the recorded start time.
    pub fn is_alive(&self) -> bool {
        proc_stat(self.pid).is_some_and(|s| s.start == self.start && s.state != 'Z')
    }

    /// Still the watchdog itself (not yet dcgmi), of this user: safe to signal.
    fn is_signallable_watchdog(&self) -> bool {
        proc_stat(self.pid)
            .is_some_and(|s| s.start == self.start && s.state != 'Z' && s.comm == WATCHDOG_NAME)
            && std::fs::metadata(format!("/proc/{}", self.pid)).is_ok_and(|m| m.uid() == euid())
    }
}

struct ProcStat {
    comm: String,
    state: char,
    start: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    // Fields after the comm start at field 3 (state); starttime is field 22.
    let start = rest.nth(22 - 4)?.parse().ok()?;
    Some(ProcStat { comm, state, start })
}

/// Stop a `pause` watchdog that is verifiably ours (pid, start time, name, uid) with SIGTERM, on
/// which it exits without resuming, and wait (bounded) until it is gone. Never SIGKILL, never a
/// pid that is not that watchdog.
fn cancel_pause_watchdog(h: &Holder) -> bool {
    if h.role != Role::Pause || !h.is_signallable_watchdog() {
        return false;
    }
    // A plain signal to a process just verified to be our watchdog.
    let Some(pid) = positive_pid(h.pid) else {
        return false;
    };
    if process::kill_process(pid, Signal::TERM).is_err() {
        return false;
    }
    let t = Instant::now();
    while h.is_alive() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&h.record);
    !h.is_alive()
}

// ---------------------------------------------------------------------------------------------
// The watchdog.

/// The error of a `dcgmi profile --resume` that ran past its deadline.
fn resume_timed_out(dcgmi: &Path, deadline: Duration) -> DcgmError {
    DcgmError::TimedOut {
        command: format!("{} profile --resume", dcgmi.display()),
        deadline,
        after: "DCGM may still be paused: check the DCGM host engine (nv-hostengine), then `cutrace dcgm resume`",
    }
}

fn wait_pid(pid: i32) -> Result<(), DcgmError> {
    let Some(p) = positive_pid(pid) else {
        return Ok(());
    };
    let status = loop {
        match process::waitpid(Some(p), process::WaitOptions::empty()) {
            Ok(Some((_, status))) => break status,
            Err(Errno::INTR) => continue,
            // ECHILD: already reaped (SIGCHLD ignored); nothing more to learn.
            _ => return Ok(()),
        }
    };
    match (status.exit_status(), status.terminating_signal()) {
        (Some(0), _) => Ok(()),
        (Some(code), _) => Err(DcgmError::Failed {
            action: "--resume",
            status: format!("exit status {code}"),
            stderr: String::from("(see dcgmi's message above)"),
        }),
        (None, sig) => Err(DcgmError::WatchdogStatus {
            pid,
            status: format!("killed by signal {}", sig.unwrap_or(0)),
        }),
    }
}

fn cloexec_pipe() -> Result<(File, File), DcgmError> {
    // O_CLOEXEC: no end may leak into the profiled program (the watchdog would wait for it).
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| DcgmError::Watchdog(e.into()))?;
    Ok((File::from(r), File::from(w)))
}

static RECORD_SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A watchdog holding the pause (not yet paused: the caller runs dcgmi next).
struct Started {
    holder: Holder,
    /// Read end of the watchdog's reports ('S' already read).
    report: File,
}

/// Lock the hold file shared, start a watchdog that locks it shared too, wait until it is
/// ready (then our lock may go: the watchdog's holds), and record it. `session`: the read end of
/// the session's pipe (None for a `pause`).
#[allow(clippy::too_many_arguments)]
fn start_holder(
    exe: &WatchdogExe,
    dcgmi: &Path,
    state: &StateDir,
    role: Role,
    deadline: Option<Duration>,
    label: &str,
    session: Option<BorrowedFd>,
) -> Result<Started, DcgmError> {
    if let Some(d) = deadline {
        if d > MAX_DEADLINE {
            return Err(DcgmError::DeadlineTooLong(d));
        }
    }
    let hold = state.open_hold()?;
    lock_waiting(
        &hold,
        FlockOperation::NonBlockingLockShared,
        &state.hold_path(),
    )?;
    let (mut report_r, report_w) = cloexec_pipe()?;
    let owner = std::process::id();
    let seq = RECORD_SEQ.fetch_add(1, Ordering::SeqCst);
    let record = state.path.join(format!("holder.{owner}.{seq}"));
    let args = watchdog::WatchArgs {
        role,
        dcgmi: dcgmi.to_path_buf(),
        state: state.path.clone(),
        record: record.clone(),
        deadline,
        dcgmi_deadline: dcgmi_timeout()?,
        owner,
    };
    let pid = watchdog::spawn_watchdog(exe, &args, session, report_w.as_fd())?;
    drop(report_w); // the watchdog has its own
    let mut b = [0u8; 1];
    let ready = report_r.read_exact(&mut b).is_ok() && b[0] == b'S';
    // Only now: until the watchdog holds its shared lock, ours keeps a resume from running.
    drop(hold);
    if !ready {
        let _ = wait_pid(pid);
        return Err(DcgmError::Watchdog(std::io::Error::other(
            "the watchdog ended before it was ready",
        )));
    }
    let now = unix_now();
    let holder = Holder {
        role,
        pid,
        start: proc_stat(pid).map(|s| s.start).unwrap_or(0),
        owner: owner as i32,
        label: label.to_string(),
        since: now,
        until: deadline.map(|d| now + d.as_secs()),
        record,
    };
    if let Err(e) = holder.write() {
        eprintln!(
            "cutrace: warning: could not record the DCGM holder in {}: {e}",
            holder.record.display()
        );
    }
    Ok(Started {
        holder,
        report: report_r,
    })
}

/// "90 s", "10 min", "2 h 5 min".
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{} ms", d.as_millis()),
        1..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ if s % 3600 / 60 == 0 => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// How a holder's session ended, as its watchdog reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The deadline passed while the session still ran (the watchdog left then).
    pub deadline_passed: bool,
    /// This holder was the last and resumed DCGM; false: other holders keep it paused.
    pub resumed: bool,
}

// ---------------------------------------------------------------------------------------------
// Sessions: the guard.

/// Options for a pause.
#[derive(Debug, Clone, Default)]
pub struct PauseOptions {
    /// The dcgmi to run; None: `dcgmi` on PATH.
    pub dcgmi: Option<PathBuf>,
    /// Resume after this long even while the session still runs (at most [`MAX_DEADLINE`]).
    pub deadline: Option<Duration>,
    /// The state directory; None: [`default_state_path`].
    pub state_dir: Option<PathBuf>,
    /// What the session is, for `cutrace dcgm resume`'s list of holders.
    pub label: Option<String>,
    /// How to start the watchdog; the default suits the cutrace binary.
    pub watchdog: WatchdogExe,
}

impl PauseOptions {
    fn dcgmi(&self) -> Result<PathBuf, DcgmError> {
        match &self.dcgmi {
            Some(p) => Ok(p.clone()),
            None => find_dcgmi(),
        }
    }

    fn state(&self) -> Result<StateDir, DcgmError> {
        match &self.state_dir {
            Some(p) => StateDir::open(p),
            None => StateDir::for_user(),
        }
    }
}

/// DCGM's profiling metrics paused for as long as this value lives. Dropping it, calling
/// `resume`, returning with an error, a signal or SIGKILL of this process: each ends this
/// session's hold, through the watchdog, which resumes DCGM if no other session holds it.
#[derive(Debug)]
pub struct DcgmGuard {
    /// For the message when its resume runs past its deadline.
    dcgmi: PathBuf,
    pipe_write: Option<File>,
    report: Option<File>,
    watchdog: i32,
    state: StateDir,
    done: bool,
}

impl DcgmGuard {
    pub fn pause(opts: &PauseOptions) -> Result<DcgmGuard, DcgmError> {
        let dcgmi = opts.dcgmi()?;
        let state = opts.state()?;
        let (read_end, write_end) = cloexec_pipe()?;
        let started = start_holder(
            &opts.watchdog,
            &dcgmi,
            &state,
            Role::Run,
            opts.deadline,
            opts.label.as_deref().unwrap_or("a counter session"),
            Some(read_end.as_fd()),
        );
        drop(read_end); // the watchdog has its own
        let started = started?;
        let mut guard = DcgmGuard {
            dcgmi: dcgmi.clone(),
            pipe_write: Some(write_end),
            report: Some(started.report),
            watchdog: started.holder.pid,
            state,
            done: false,
        };
        if let Err(e) = pause_plain(&dcgmi) {
            // Nothing was paused by us; the watchdog leaves without resuming.
            guard.cancel();
            let _ = std::fs::remove_file(&started.holder.record);
            return Err(e);
        }
        Ok(guard)
    }

    pub fn watchdog_pid(&self) -> i32 {
        self.watchdog
    }

    pub fn state_dir(&self) -> &StateDir {
        &self.state
    }

    /// End this guard's hold now: DCGM resumes unless other holders remain. Reports what
    /// happened and dcgmi's result.
    pub fn resume(mut self) -> Result<Release, DcgmError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<Release, DcgmError> {
        if self.done {
            return Ok(Release {
                deadline_passed: false,
                resumed: false,
            });
        }
        self.done = true;
        // Closing our write end is the watchdog's cue.
        drop(self.pipe_write.take());
        let status = wait_pid(self.watchdog);
        let mut said = Vec::new();
        if let Some(mut r) = self.report.take() {
            let _ = r.read_to_end(&mut said);
        }
        let release = Release {
            deadline_passed: said.contains(&b'T'),
            resumed: said.contains(&b'R'),
        };
        if said.contains(&b'K') {
            return Ok(release);
        }
        if said.contains(&b'X') {
            return Err(resume_timed_out(&self.dcgmi, dcgmi_timeout()?));
        }
        status.map(|()| release)
    }

    fn cancel(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(mut w) = self.pipe_write.take() {
            let _ = w.write_all(b"C");
        }
        let _ = wait_pid(self.watchdog);
    }
}

impl Drop for DcgmGuard {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("cutrace: warning: resuming DCGM profiling metrics: {e}; run `dcgmi profile --resume`");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `cutrace dcgm pause` and `resume`.

/// What `pause` did.
#[derive(Debug)]
pub struct PauseReport {
    /// The new watchdog.
    pub holder: Holder,
    /// Earlier `pause` watchdogs this one replaced (stopped without resuming).
    pub replaced: Vec<Holder>,
    /// Sessions that hold the pause too.
    pub others: Vec<Holder>,
}

/// `cutrace dcgm pause [--for D]`: a detached watchdog holds the pause until the deadline, or,
/// without one, until `resume`. The newest `pause` replaces an earlier one of this user (its
/// deadline no longer applies); `run` sessions are unaffected and keep holding.
pub fn pause_manual(
    watchdog: &WatchdogExe,
    dcgmi: &Path,
    state: &StateDir,
    deadline: Option<Duration>,
) -> Result<PauseReport, DcgmError> {
    let earlier: Vec<Holder> = state
        .holders()
        .into_iter()
        .filter(|h| h.role == Role::Pause)
        .collect();
    let started = start_holder(
        watchdog,
        dcgmi,
        state,
        Role::Pause,
        deadline,
        "cutrace dcgm pause",
        None,
    )?;
    let holder = started.holder;
    drop(started.report);
    if let Err(e) = pause_plain(dcgmi) {
        // Our own child, not yet reaped: SIGTERM makes it leave without resuming.
        if let Some(pid) = positive_pid(holder.pid) {
            let _ = process::kill_process(pid, Signal::TERM);
        }
        let _ = wait_pid(holder.pid);
        let _ = std::fs::remove_file(&holder.record);
        return Err(e);
    }
    let replaced = earlier.into_iter().filter(cancel_pause_watchdog).collect();
    let others = state
        .holders()
        .into_iter()
        .filter(|h| h.role == Role::Run)
        .collect();
    Ok(PauseReport {
        holder,
        replaced,
        others,
    })
}

/// What `resume` did.
#[derive(Debug)]
pub enum ResumeReport {
    /// Nobody else held the pause: dcgmi resumed it.
    Resumed { cancelled: Vec<Holder> },
    /// Sessions still hold the pause: DCGM was left paused; the last of them resumes it.
    HeldByOthers {
        cancelled: Vec<Holder>,
        holders: Vec<Holder>,
    },
    /// Resumed although these sessions hold the pause.
    Forced {
        cancelled: Vec<Holder>,
        holders: Vec<Holder>,
    },
}

/// `cutrace dcgm resume [--force]`: stop this user's `pause` watchdogs (they exit without
/// resuming), then resume if no session holds the pause — or regardless, with `force`.
pub fn release_and_resume(
    dcgmi: &Path,
    state: &StateDir,
    force: bool,
) -> Result<ResumeReport, DcgmError> {
    let cancelled: Vec<Holder> = state
        .holders()
        .into_iter()
        .filter(|h| h.role == Role::Pause)
        .filter(cancel_pause_watchdog)
        .collect();
    let hold = state.open_hold()?;
    let t = Instant::now();
    loop {
        if try_lock(&hold, FlockOperation::NonBlockingLockExclusive) {
            // Held exclusively while dcgmi runs: a pause that starts meanwhile waits for it.
            resume_now(dcgmi)?;
            return Ok(ResumeReport::Resumed { cancelled });
        }
        let holders = state.holders();
        if !holders.is_empty() || t.elapsed() > lock_wait() {
            // (No records but still locked for that long: a holder whose record could not be
            // written; it is listed as nobody.)
            if force {
                resume_now(dcgmi)?;
                return Ok(ResumeReport::Forced { cancelled, holders });
            }
            return Ok(ResumeReport::HeldByOthers { cancelled, holders });
        }
        // Locked but no record: a holder is starting or leaving right now.
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// `cutrace dcgm run`.

/// How a command run under a pause ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The command's exit code, or 128 + the signal that ended it.
    pub exit_code: i32,
    /// A SIGINT/SIGTERM/SIGHUP this process received and passed on to the command.
    pub forwarded_signal: Option<i32>,
    /// How the hold ended.
    pub release: Release,
    /// When `release.resumed` is false: who still holds the pause.
    pub still_held_by: Vec<Holder>,
}

/// Pause DCGM, run `cmd`, resume (unless other sessions still hold the pause). SIGINT, SIGTERM
/// and SIGHUP sent to this process are passed on to the command, so the resume happens after
/// it has stopped; SIGKILL of this process is covered by the watchdog. Call it from a process
/// with no other thread running: the signals are blocked in the calling thread only, and a
/// thread that has them unblocked would take them instead.
pub fn run_paused(
    opts: &PauseOptions,
    program: &Path,
    argv: &[std::ffi::OsString],
) -> Result<RunOutcome, RunError> {
    use std::os::unix::process::ExitStatusExt;
    // Until the command starts, a signal ends cutrace as it would anyway (the watchdog then
    // resumes); from here on it is passed on to the command.
    let guard = DcgmGuard::pause(opts)?;
    let state = guard.state.clone();
    let mut forwarding = match Forwarding::start() {
        Ok(f) => f,
        Err(e) => {
            let _ = guard.resume();
            return Err(RunError::Signals(e));
        }
    };
    // The command gets an empty signal mask, and otherwise what cutrace was given: its
    // standard descriptors, its signal dispositions, the descriptors it inherited.
    let io = spawn::Io::Inherit;
    let child = spawn::spawn(&spawn::Spawn {
        program,
        args: argv.to_vec(),
        stdio: [io, io, io],
        own_group: false,
        mask: SigSet::empty(),
        default_signals: false,
        close_inherited: false,
    });
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = guard.resume();
            return Err(RunError::Spawn(e));
        }
    };
    let status = forwarding.wait(child);
    let released = guard.resume();
    let sig = forwarding.finish();
    let status = status.map_err(RunError::Spawn)?;
    let release = released?;
    Ok(RunOutcome {
        exit_code: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        forwarded_signal: sig,
        release,
        still_held_by: if release.resumed {
            Vec::new()
        } else {
            state.holders()
        },
    })
}

/// SIGINT, SIGTERM and SIGHUP taken as data while a command runs under a pause, to be passed
/// on to it: blocked in this thread and read from a signalfd, with SIGCHLD for the command's
/// end. Dropping it (or [`Forwarding::finish`]) restores the mask there was before; what arrived
/// meanwhile was passed on or dropped, never left pending.
struct Forwarding {
    fd: SignalFd,
    old: SigSet,
    got: Option<i32>,
}

impl Forwarding {
    fn set() -> SigSet {
        [
            NixSignal::SIGINT,
            NixSignal::SIGTERM,
            NixSignal::SIGHUP,
            NixSignal::SIGCHLD,
        ]
        .into_iter()
        .collect()
    }

    fn start() -> std::io::Result<Forwarding> {
        let set = Forwarding::set();
        let old = set
            .thread_swap_mask(SigmaskHow::SIG_BLOCK)
            .map_err(std::io::Error::from)?;
        let fd = match SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = old.thread_set_mask();
                return Err(e.into());
            }
        };
        Ok(Forwarding { fd, old, got: None })
    }

    /// Wait for `child`, passing on every SIGINT, SIGTERM and SIGHUP to it.
    fn wait(&mut self, child: Pid) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let pid = nix::unistd::Pid::from_raw(child.as_raw_pid());
        loop {
            match process::waitpid(Some(child), process::WaitOptions::NOHANG) {
                Ok(Some((_, st))) => return Ok(std::process::ExitStatus::from_raw(st.as_raw())),
                Ok(None) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            // SIGCHLD wakes it; the timeout covers a SIGCHLD set to be ignored by our caller.
            let mut fds = [rustix::event::PollFd::new(
                &self.fd,
                rustix::event::PollFlags::IN,
            )];
            let tick = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 200_000_000,
            };
            let _ = rustix::event::poll(&mut fds, Some(&tick));
            while let Ok(Some(info)) = self.fd.read_signal() {
                let Ok(sig) = NixSignal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                if sig != NixSignal::SIGCHLD {
                    self.got = Some(sig as i32);
                    let _ = nix::sys::signal::kill(pid, sig);
                }
            }
        }
    }

    /// Stop: the signal passed on, if any.
    fn finish(mut self) -> Option<i32> {
        self.restore();
        self.got.take()
    }

    fn restore(&mut self) {
        while let Ok(Some(_)) = self.fd.read_signal() {}
        let _ = self.old.thread_set_mask();
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.restore();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Dcgm(#[from] DcgmError),
    #[error("could not run the command: {0}")]
    Spawn(std::io::Error),
    #[error("could not take over SIGINT, SIGTERM and SIGHUP to pass them on to the command: {0}")]
    Signals(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cutrace-dcgm-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn state_dir_is_created_private() {
        let d = scratch("create");
        let s = StateDir::open(&d.join("state")).expect("state dir");
        let m = std::fs::symlink_metadata(s.path()).expect("stat");
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700);
        assert_eq!(m.uid(), euid());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn state_dir_refuses_a_symlink() {
        let d = scratch("symlink");
        std::fs::create_dir(d.join("elsewhere")).expect("mkdir");
        std::fs::set_permissions(d.join("elsewhere"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::os::unix::fs::symlink(d.join("elsewhere"), d.join("state")).expect("symlink");
        let e = StateDir::open(&d.join("state")).expect_err("a symlink must be refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn state_dir_refuses_one_others_can_enter() {
        let d = scratch("mode");
        let p = d.join("state");
        std::fs::create_dir(&p).expect("mkdir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = StateDir::open(&p).expect_err("a world-writable dir must be refused");
        assert!(e.to_string().contains("lets other users in"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn state_dir_refuses_one_of_another_user() {
        if euid() != 0 {
            return; // only root can make a directory that belongs to someone else
        }
        let d = scratch("owner");
        let p = d.join("state");
        std::fs::create_dir(&p).expect("mkdir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::chown(&p, Some(4242), Some(4242)).expect("chown");
        let e = StateDir::open(&p).expect_err("someone else's dir must be refused");
        assert!(e.to_string().contains("belongs to uid 4242"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn state_path_is_xdg_runtime_dir_or_private_tmp() {
        let d = scratch("xdg");
        let uid = euid();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(
            state_path_for(Some(d.clone().into_os_string()), uid),
            d.join("cutrace-dcgm")
        );
        let tmp_one = PathBuf::from(format!("/tmp/cutrace-dcgm-{uid}"));
        assert_eq!(state_path_for(None, uid), tmp_one);
        // Not this user's, writable by others, relative, missing: not used.
        assert_eq!(
            state_path_for(Some(d.clone().into_os_string()), uid + 1),
            PathBuf::from(format!("/tmp/cutrace-dcgm-{}", uid + 1))
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert_eq!(
            state_path_for(Some(d.clone().into_os_string()), uid),
            tmp_one
        );
        assert_eq!(state_path_for(Some("relative/dir".into()), uid), tmp_one);
        assert_eq!(
            state_path_for(Some(d.join("missing").into_os_string()), uid),
            tmp_one
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn own_process_start_time_is_read() {
        let me = proc_stat(std::process::id() as i32).expect("own stat");
        assert!(me.start > 0);
        assert_ne!(me.state, 'Z');
    }

    #[test]
    fn records_of_dead_or_reused_pids_are_dropped() {
        let d = scratch("records");
        let s = StateDir::open(&d.join("state")).expect("state");
        let me = proc_stat(std::process::id() as i32).expect("own stat");
        let mk = |name: &str, start: u64| Holder {
            role: Role::Run,
            pid: std::process::id() as i32,
            start,
            owner: 1,
            label: "x\ny".into(),
            since: 5,
            until: None,
            record: s.path().join(name),
        };
        mk("holder.live", me.start).write().expect("write");
        // Same pid, other start time: a reused pid, not that holder.
        mk("holder.reused", me.start + 1).write().expect("write");
        std::fs::write(s.path().join("holder.garbage"), "role=nonsense\n").expect("write");
        let hs = s.holders();
        assert_eq!(hs.len(), 1, "{hs:?}");
        assert_eq!(hs[0].label, "x y");
        assert!(s.path().join("holder.live").exists());
        assert!(!s.path().join("holder.reused").exists());
        assert!(!s.path().join("holder.garbage").exists());
        // Alive but not a watchdog: never signalled.
        let mut p = hs[0].clone();
        p.role = Role::Pause;
        assert!(!cancel_pause_watchdog(&p));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_millis(300)), "300 ms");
        assert_eq!(human(Duration::from_secs(90)), "90 s");
        assert_eq!(human(Duration::from_secs(600)), "10 min");
        assert_eq!(human(Duration::from_secs(7200)), "2 h");
        assert_eq!(human(Duration::from_secs(7500)), "2 h 5 min");
    }
}
