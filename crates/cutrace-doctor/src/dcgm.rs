//! Pausing DCGM's profiling metrics around a counter session, and resuming them on every exit
//! path. "Due to current hardware limitations, collection of profiling metrics with DCGM will
//! conflict with usage of other developer tools"; the documented workaround is
//! `dcgmi profile --pause` ... `dcgmi profile --resume` (DCGM feature overview, seed ref 8).
//!
//! The resume is done by a watchdog process forked *before* pausing, in its own session (so a
//! Ctrl-C to cutrace's process group does not reach it). It waits until the read end of a pipe
//! reports end-of-file — which happens when cutrace closes the write end (normal resume, error,
//! drop) or when the kernel closes it because cutrace died, even by SIGKILL — or until an
//! optional deadline passes, then execs `dcgmi profile --resume`. One code path for every exit.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// "When paused, DCGM will publish BLANK values for profiling metrics."
pub const BLANK_WARNING: &str = "while DCGM is paused it publishes BLANK values for profiling metrics: utilization panels go blank, and an alert rule that reads blank as zero will fire";

#[derive(Debug, thiserror::Error)]
pub enum DcgmError {
    #[error("dcgmi not found on PATH; DCGM's command line tool is needed to pause its profiling metrics (if nothing runs DCGM here, there is nothing to pause)")]
    NotFound,
    #[error("could not run {path}: {source}")]
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
}

/// `dcgmi` on PATH, as an absolute path (resolved before forking: only execve is safe after it).
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
    let out = Command::new(dcgmi)
        .args(["profile", action])
        .output()
        .map_err(|source| DcgmError::Spawn {
            path: dcgmi.display().to_string(),
            source,
        })?;
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

/// `dcgmi profile --pause`, nothing else: DCGM stays paused until someone resumes it.
pub fn pause_plain(dcgmi: &Path) -> Result<(), DcgmError> {
    dcgmi_profile(dcgmi, "--pause")
}

/// `dcgmi profile --resume`, now.
pub fn resume_now(dcgmi: &Path) -> Result<(), DcgmError> {
    dcgmi_profile(dcgmi, "--resume")
}

/// What the watchdog waits for before it resumes.
struct WatchSpec {
    /// Read end of the pipe whose write end the parent holds; None: deadline only.
    pipe_read: Option<i32>,
    deadline: Option<Duration>,
    /// Detach stdout/stderr too (the caller is about to exit and may be read through a pipe).
    quiet: bool,
}

/// Fork the watchdog. Returns its pid. Everything the child needs is prepared before the fork;
/// after it the child only makes async-signal-safe calls (setsid, sigaction, open, dup2, close,
/// poll, read, clock_gettime, execve, _exit).
fn spawn_watchdog(dcgmi: &Path, spec: WatchSpec) -> Result<i32, DcgmError> {
    let prog =
        CString::new(dcgmi.as_os_str().as_bytes()).map_err(|e| DcgmError::Watchdog(e.into()))?;
    let args: Vec<CString> = ["dcgmi", "profile", "--resume"]
        .iter()
        .map(|a| CString::new(*a).expect("static strings have no NUL"))
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let devnull = CString::new("/dev/null").expect("no NUL");
    let max_fd = unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            (rl.rlim_cur as i64).clamp(256, 65536) as i32
        } else {
            1024
        }
    };
    let timeout_ms: i64 = spec
        .deadline
        .map(|d| d.as_millis().min(i64::MAX as u128) as i64)
        .unwrap_or(-1);

    // SAFETY: the child branch below calls only async-signal-safe functions on data prepared
    // above, and never returns (execve or _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(DcgmError::Watchdog(std::io::Error::last_os_error()));
    }
    if pid > 0 {
        return Ok(pid);
    }
    unsafe {
        libc::setsid();
        for sig in [libc::SIGPIPE, libc::SIGINT, libc::SIGHUP] {
            // SIGPIPE is ignored by Rust programs and would stay ignored in dcgmi; SIGINT and
            // SIGHUP from a terminal must not stop the resume.
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = if sig == libc::SIGPIPE {
                libc::SIG_DFL
            } else {
                libc::SIG_IGN
            };
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        let null = libc::open(devnull.as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            if spec.quiet {
                libc::dup2(null, 1);
                libc::dup2(null, 2);
            } else {
                libc::dup2(2, 1);
            }
        }
        let keep = spec.pipe_read.unwrap_or(-1);
        for fd in 3..max_fd {
            if fd != keep {
                libc::close(fd);
            }
        }
        let start = now_ms();
        loop {
            let remaining = if timeout_ms < 0 {
                -1
            } else {
                (timeout_ms - (now_ms() - start)).max(0)
            };
            if timeout_ms >= 0 && remaining == 0 {
                break;
            }
            let wait = if remaining < 0 {
                -1
            } else {
                remaining.min(i32::MAX as i64) as i32
            };
            let mut pfd = libc::pollfd {
                fd: keep,
                events: libc::POLLIN,
                revents: 0,
            };
            let n = if keep >= 0 {
                libc::poll(&mut pfd, 1, wait)
            } else {
                libc::poll(std::ptr::null_mut(), 0, wait)
            };
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            if n == 0 {
                continue; // loop re-checks the deadline
            }
            let mut buf = [0u8; 64];
            let r = libc::read(keep, buf.as_mut_ptr().cast(), buf.len());
            if r == 0 || (r < 0 && *libc::__errno_location() != libc::EINTR) {
                break; // EOF: the parent closed its end or died
            }
        }
        libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
        libc::_exit(127);
    }
}

// time_t and c_long are not i64 on every target.
#[allow(clippy::unnecessary_cast)]
fn now_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as i64 * 1000 + ts.tv_nsec as i64 / 1_000_000
}

fn wait_pid(pid: i32) -> Result<(), DcgmError> {
    let mut status = 0;
    loop {
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        // ECHILD: already reaped (SIGCHLD ignored); nothing more to learn.
        return Ok(());
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(DcgmError::Failed {
            action: "--resume",
            status: format!("exit status {}", libc::WEXITSTATUS(status)),
            stderr: String::from("(see dcgmi's message above)"),
        })
    } else {
        Err(DcgmError::WatchdogStatus {
            pid,
            status: format!("killed by signal {}", libc::WTERMSIG(status)),
        })
    }
}

/// Options for a pause.
#[derive(Debug, Clone, Default)]
pub struct PauseOptions {
    /// The dcgmi to run; None: `dcgmi` on PATH.
    pub dcgmi: Option<PathBuf>,
    /// Resume after this long even while the session still runs.
    pub deadline: Option<Duration>,
}

impl PauseOptions {
    fn dcgmi(&self) -> Result<PathBuf, DcgmError> {
        match &self.dcgmi {
            Some(p) => Ok(p.clone()),
            None => find_dcgmi(),
        }
    }
}

/// DCGM's profiling metrics paused for as long as this value lives. Dropping it, calling
/// `resume`, returning with an error, a signal or SIGKILL of this process: each resumes, through
/// the watchdog.
#[derive(Debug)]
pub struct DcgmGuard {
    pipe_write: i32,
    watchdog: i32,
    done: bool,
}

impl DcgmGuard {
    pub fn pause(opts: &PauseOptions) -> Result<DcgmGuard, DcgmError> {
        let dcgmi = opts.dcgmi()?;
        let mut fds = [0i32; 2];
        // O_CLOEXEC: the write end must not leak into the profiled program, or the watchdog
        // would wait for it too.
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(DcgmError::Watchdog(std::io::Error::last_os_error()));
        }
        let [read_end, write_end] = fds;
        let pid = spawn_watchdog(
            &dcgmi,
            WatchSpec {
                pipe_read: Some(read_end),
                deadline: opts.deadline,
                quiet: false,
            },
        );
        // SAFETY: closing our copy of the read end; the watchdog has its own.
        unsafe { libc::close(read_end) };
        let pid = match pid {
            Ok(p) => p,
            Err(e) => {
                unsafe { libc::close(write_end) };
                return Err(e);
            }
        };
        let guard = DcgmGuard {
            pipe_write: write_end,
            watchdog: pid,
            done: false,
        };
        if let Err(e) = pause_plain(&dcgmi) {
            // Nothing was paused; stop the watchdog without letting it resume.
            let mut g = guard;
            g.cancel();
            return Err(e);
        }
        Ok(guard)
    }

    pub fn watchdog_pid(&self) -> i32 {
        self.watchdog
    }

    /// Resume now and report dcgmi's result.
    pub fn resume(mut self) -> Result<(), DcgmError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), DcgmError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        // SAFETY: our write end; closing it is the watchdog's cue.
        unsafe { libc::close(self.pipe_write) };
        wait_pid(self.watchdog)
    }

    fn cancel(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        // SAFETY: signalling and reaping our own child, then closing our fd.
        unsafe {
            libc::kill(self.watchdog, libc::SIGKILL);
            libc::close(self.pipe_write);
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

/// Pause, and leave a detached watchdog that resumes after `deadline` (for `cutrace dcgm pause
/// --for`): the caller may exit at once. Returns the watchdog's pid.
pub fn pause_for(dcgmi: &Path, deadline: Duration) -> Result<i32, DcgmError> {
    let pid = spawn_watchdog(
        dcgmi,
        WatchSpec {
            pipe_read: None,
            deadline: Some(deadline),
            quiet: true,
        },
    )?;
    if let Err(e) = pause_plain(dcgmi) {
        // SAFETY: our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = wait_pid(pid);
        return Err(e);
    }
    Ok(pid)
}

/// Where `cutrace dcgm pause --for` records its watchdog, so `cutrace dcgm resume` can stop it.
pub fn watchdog_pidfile() -> PathBuf {
    std::env::temp_dir().join("cutrace-dcgm-watchdog.pid")
}

/// Stop a watchdog left by `pause --for`, if one is recorded and still ours. Returns its pid.
pub fn cancel_recorded_watchdog() -> Option<i32> {
    let file = watchdog_pidfile();
    let pid: i32 = std::fs::read_to_string(&file).ok()?.trim().parse().ok()?;
    let _ = std::fs::remove_file(&file);
    // Only a process that is still a cutrace (the forked watchdog has not exec'd dcgmi yet).
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    if !Path::new(OsStr::from_bytes(argv0))
        .file_name()
        .is_some_and(|n| n.as_bytes().starts_with(b"cutrace"))
    {
        return None;
    }
    // SAFETY: a plain signal to a pid we recorded and checked.
    (unsafe { libc::kill(pid, libc::SIGKILL) } == 0).then_some(pid)
}

static CHILD_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static GOT_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    use std::sync::atomic::Ordering;
    GOT_SIGNAL.store(sig, Ordering::SeqCst);
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// How a command run under a pause ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    /// The command's exit code, or 128 + the signal that ended it.
    pub exit_code: i32,
    /// A SIGINT/SIGTERM/SIGHUP this process received and passed on to the command.
    pub forwarded_signal: Option<i32>,
}

/// Pause DCGM, run `cmd`, resume. SIGINT, SIGTERM and SIGHUP sent to this process are passed
/// on to the command, so the resume happens after it has stopped; SIGKILL of this process is
/// covered by the watchdog.
pub fn run_paused(opts: &PauseOptions, cmd: &mut Command) -> Result<RunOutcome, RunError> {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::Ordering;
    let guard = DcgmGuard::pause(opts)?;
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    CHILD_PID.store(child.id() as i32, Ordering::SeqCst);
    let sigs = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let mut old: Vec<libc::sigaction> = Vec::new();
    for sig in sigs {
        // SAFETY: installing a handler that only does async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            let mut prev: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &sa, &mut prev);
            old.push(prev);
        }
    }
    let status = child.wait();
    for (sig, prev) in sigs.iter().zip(old.iter()) {
        // SAFETY: restoring what was there.
        unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
    }
    CHILD_PID.store(0, Ordering::SeqCst);
    let resumed = guard.resume();
    let status = status.map_err(RunError::Spawn)?;
    resumed?;
    let sig = GOT_SIGNAL.swap(0, Ordering::SeqCst);
    Ok(RunOutcome {
        exit_code: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        forwarded_signal: (sig != 0).then_some(sig),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Dcgm(#[from] DcgmError),
    #[error("could not run the command: {0}")]
    Spawn(std::io::Error),
}
