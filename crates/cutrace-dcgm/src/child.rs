//! The code of this crate that must be `unsafe`, and why: it runs where only
//! async-signal-safe calls are allowed, which no safe Rust API can promise.
//!
//! - The watchdog is forked from a possibly multi-threaded cutrace and must outlive it (by
//!   SIGKILL too), so it cannot be a `std::process::Command`: it is a `fork` without `exec` that
//!   keeps the inherited `flock` on the hold file. After such a fork only async-signal-safe
//!   calls are allowed (no allocation, no lock: another thread may have held the allocator's
//!   lock at the fork), so the child speaks to the kernel through `libc` on memory prepared
//!   before the fork. The same reason as the doctor's forked probe child.
//! - `pre_exec` runs in the child between fork and exec, under the same rule.
//! - Installing a signal handler (`sigaction`) is unsafe because the handler must itself be
//!   async-signal-safe: the watchdog's SIGTERM flag and `dcgm run`'s forwarding to its command.
//!
//! Everything else in the crate is safe code (`#![deny(unsafe_code)]` at the crate root); each
//! block here says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::{dcgmi_timeout, resume_timed_out, DcgmError, WatchSpec, WATCHDOG_NAME};

/// Give `cmd` the default disposition of every signal cutrace or its parent may have set to
/// ignore (an ignored disposition survives exec).
pub(crate) fn default_signals_in_child(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec and calls only signal(2), which is
    // async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGTERM,
                libc::SIGQUIT,
                libc::SIGPIPE,
            ] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

static WD_CANCEL: AtomicBool = AtomicBool::new(false);

extern "C" fn wd_on_sigterm(_: libc::c_int) {
    WD_CANCEL.store(true, Ordering::SeqCst);
}

/// Fork the watchdog. Returns its pid. Everything the child needs is prepared before the fork;
/// after it the child only makes async-signal-safe system calls (setsid, prctl, sigaction,
/// sigprocmask, open, dup2, close, ppoll, read, write, unlink, flock, clock_gettime, fork,
/// setpgid, waitpid, nanosleep, kill, getppid, execve, _exit).
pub(crate) fn spawn_watchdog(dcgmi: &Path, spec: &WatchSpec) -> Result<i32, DcgmError> {
    let wd_err = |e: std::ffi::NulError| DcgmError::Watchdog(e.into());
    let prog = CString::new(dcgmi.as_os_str().as_bytes()).map_err(wd_err)?;
    let record = CString::new(spec.record.as_os_str().as_bytes()).map_err(wd_err)?;
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
    let name = CString::new(WATCHDOG_NAME).expect("no NUL");
    let resume_msg = spec.deadline_resume_msg.as_bytes().to_vec();
    let dcgmi_deadline = dcgmi_timeout()?;
    let dcgmi_ms = dcgmi_deadline.as_millis().min(i64::MAX as u128) as i64;
    let timeout_msg =
        format!("cutrace: {}\n", resume_timed_out(dcgmi, dcgmi_deadline)).into_bytes();
    let owner = std::process::id() as libc::pid_t;
    let kept_msg = spec.deadline_kept_msg.as_bytes().to_vec();
    // Linux caps RLIMIT_NOFILE at fs.nr_open, so None (unlimited) does not occur; it would mean
    // the highest cap.
    let max_fd = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(65536, |n| n.clamp(256, 65536)) as i32;
    let timeout_ms: i64 = spec
        .deadline
        .map(|d| d.as_millis().min(i64::MAX as u128) as i64)
        .unwrap_or(-1);
    let keep = spec.pipe_read.unwrap_or(-1);
    let (hold, report, quiet, sigterm_cancels) = (
        spec.hold_fd,
        spec.report_fd,
        spec.quiet,
        spec.sigterm_cancels,
    );

    // SAFETY: the child branch below calls only async-signal-safe functions on data prepared
    // above, and never returns (execve or _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(DcgmError::Watchdog(std::io::Error::last_os_error()));
    }
    if pid > 0 {
        return Ok(pid);
    }
    // SAFETY: the forked child of a possibly multi-threaded process: only async-signal-safe
    // calls on memory prepared before the fork (C strings, pointer arrays, byte buffers), no
    // allocation, no lock; every path ends in execve or _exit. The sigset_t and sigaction values
    // are plain C structs for which all-zero is valid before sigemptyset/sigaction fill them.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
        let set = |sig: libc::c_int, handler: libc::sighandler_t| {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        };
        // SIGINT and SIGHUP from a terminal must not stop the resume; SIGPIPE: a report nobody
        // reads any more must not kill the watchdog.
        set(libc::SIGINT, libc::SIG_IGN);
        set(libc::SIGHUP, libc::SIG_IGN);
        set(libc::SIGPIPE, libc::SIG_IGN);
        // SIGTERM is blocked except inside ppoll, so its flag is never missed.
        let mut term: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut term);
        libc::sigaddset(&mut term, libc::SIGTERM);
        let mut old_mask: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &term, &mut old_mask);
        let mut poll_mask = old_mask;
        libc::sigdelset(&mut poll_mask, libc::SIGTERM);
        set(
            libc::SIGTERM,
            if sigterm_cancels {
                wd_on_sigterm as *const () as libc::sighandler_t
            } else {
                libc::SIG_IGN
            },
        );
        let null = libc::open(devnull.as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            if quiet {
                libc::dup2(null, 1);
                libc::dup2(null, 2);
            } else {
                libc::dup2(2, 1);
            }
        }
        for fd in 3..max_fd {
            if fd != keep && fd != hold && fd != report {
                libc::close(fd);
            }
        }
        let say = |fd: i32, b: &[u8]| {
            libc::write(fd, b.as_ptr().cast(), b.len());
        };
        say(report, b"S");
        let start = now_ms();
        let mut deadline_passed = false;
        loop {
            if WD_CANCEL.load(Ordering::SeqCst) {
                libc::unlink(record.as_ptr());
                libc::_exit(0);
            }
            let remaining = if timeout_ms < 0 {
                -1
            } else {
                (timeout_ms - (now_ms() - start)).max(0)
            };
            if timeout_ms >= 0 && remaining == 0 {
                deadline_passed = true;
                break;
            }
            let ts = libc::timespec {
                tv_sec: (remaining / 1000) as libc::time_t,
                tv_nsec: ((remaining % 1000) * 1_000_000) as libc::c_long,
            };
            let mut pfd = libc::pollfd {
                fd: keep,
                events: libc::POLLIN,
                revents: 0,
            };
            let n = libc::ppoll(
                &mut pfd,
                if keep >= 0 { 1 } else { 0 },
                if remaining < 0 { std::ptr::null() } else { &ts },
                &poll_mask,
            );
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
            if r > 0 && buf[..r as usize].contains(&b'C') {
                // The session's pause failed: nothing to resume.
                libc::unlink(record.as_ptr());
                libc::_exit(0);
            }
            if r == 0 || (r < 0 && *libc::__errno_location() != libc::EINTR) {
                break; // EOF: the session closed its end or died
            }
        }
        if deadline_passed {
            say(report, b"T");
        }
        libc::unlink(record.as_ptr());
        libc::flock(hold, libc::LOCK_UN);
        if libc::flock(hold, libc::LOCK_EX | libc::LOCK_NB) != 0
            && *libc::__errno_location() == libc::EWOULDBLOCK
        {
            // Another holder is alive: the last one to leave resumes.
            if deadline_passed && !quiet {
                say(2, &kept_msg);
            }
            say(report, b"K");
            libc::_exit(0);
        }
        if deadline_passed && !quiet {
            say(2, &resume_msg);
        }
        say(report, b"R");
        // dcgmi runs as our child, not in our place: the watchdog keeps the exclusive lock (a
        // new pause waits for this resume), dcgmi gets none of our descriptors, the default
        // signal dispositions and an empty mask, and a deadline; a hung dcgmi is killed with
        // everything it started, so the lock is released and never wedges a later run.
        set(libc::SIGCHLD, libc::SIG_DFL);
        let child = libc::fork();
        if child == 0 {
            libc::setpgid(0, 0);
            for sig in [
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGTERM,
                libc::SIGQUIT,
                libc::SIGPIPE,
            ] {
                set(sig, libc::SIG_DFL);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::close(hold);
            libc::close(report);
            if keep >= 0 {
                libc::close(keep);
            }
            libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
        if child < 0 {
            libc::_exit(126);
        }
        // Both sides set the group, so that a kill right after the fork reaches it.
        libc::setpgid(child, child);
        // A `resume` that verified this pid a moment ago may still send SIGTERM: the watchdog
        // must not die of it while dcgmi runs.
        set(libc::SIGTERM, libc::SIG_IGN);
        let started = now_ms();
        let mut status: libc::c_int = 0;
        loop {
            let r = libc::waitpid(child, &mut status, libc::WNOHANG);
            if r == child {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(0); // ECHILD: nothing left to wait for
            }
            if now_ms() - started >= dcgmi_ms {
                libc::kill(-child, libc::SIGKILL);
                libc::kill(child, libc::SIGKILL);
                while libc::waitpid(child, &mut status, 0) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                // The session reports it when it is still there; nobody else would.
                if !quiet && libc::getppid() != owner {
                    say(2, &timeout_msg);
                }
                say(report, b"X");
                libc::_exit(124);
            }
            let nap = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            libc::nanosleep(&nap, std::ptr::null_mut());
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        libc::_exit(128 + libc::WTERMSIG(status));
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

// ---------------------------------------------------------------------------------------------
// `cutrace dcgm run`: SIGINT, SIGTERM and SIGHUP passed on to the command.

static CHILD_PID: AtomicI32 = AtomicI32::new(0);
static GOT_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    GOT_SIGNAL.store(sig, Ordering::SeqCst);
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// While it lives, SIGINT, SIGTERM and SIGHUP to this process go to `pid`; dropping it restores
/// the dispositions there were before.
pub(crate) struct Forwarding {
    old: Vec<libc::sigaction>,
}

impl Forwarding {
    pub(crate) fn to(pid: u32) -> Forwarding {
        CHILD_PID.store(pid as i32, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in FORWARDED {
            // SAFETY: installing a handler that only does async-signal-safe work (an atomic
            // store, kill); all-zero is a valid sigaction before the fields are set.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = forward_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                let mut prev: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &sa, &mut prev);
                old.push(prev);
            }
        }
        Forwarding { old }
    }

    /// The signal received and forwarded, if any (and forget it).
    pub(crate) fn take_signal() -> Option<i32> {
        let sig = GOT_SIGNAL.swap(0, Ordering::SeqCst);
        (sig != 0).then_some(sig)
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        for (sig, prev) in FORWARDED.iter().zip(self.old.iter()) {
            // SAFETY: restoring what was there.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        CHILD_PID.store(0, Ordering::SeqCst);
    }
}
