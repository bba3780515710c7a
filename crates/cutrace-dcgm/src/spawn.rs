//! Starting the processes this crate runs (`dcgmi` and the watchdog) through `posix_spawn`,
//! which sets up the child before it runs a single instruction of the new program: its signal
//! mask, the default disposition of the signals cutrace or its parent may have set to ignore
//! (an ignored disposition survives exec), its process group, its standard descriptors, and no
//! other descriptor of ours. All of it is nix's safe wrapper around posix_spawn(3); no code of
//! ours runs between fork and exec, so none of it has to be `unsafe`.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::spawn::{posix_spawn, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::{SigSet, Signal};
use rustix::io::Errno;
use rustix::process::{self, Pid, WaitOptions};

/// The signals a child gets with their default disposition: those a terminal, `kill` or a
/// closed pipe send, which cutrace's caller (`nohup`, a shell's `&`) may have set to ignore.
pub(crate) const DEFAULTED: [Signal; 5] = [
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGTERM,
    Signal::SIGQUIT,
    Signal::SIGPIPE,
];

/// Where one standard descriptor of the child comes from.
#[derive(Clone, Copy)]
pub(crate) enum Io<'a> {
    /// `/dev/null`.
    Null,
    /// The same descriptor as ours, whatever it is (or closed, if ours is).
    Inherit,
    /// This descriptor of ours.
    Fd(BorrowedFd<'a>),
}

/// How to start a child.
pub(crate) struct Spawn<'a> {
    pub program: &'a Path,
    /// argv, argv[0] included.
    pub args: Vec<OsString>,
    /// stdin, stdout, stderr.
    pub stdio: [Io<'a>; 3],
    /// Lead a process group of its own (so that a kill reaches everything it starts).
    pub own_group: bool,
    /// The child's signal mask (empty for a program that is not ours).
    pub mask: SigSet,
    /// Give the child the default disposition of [`DEFAULTED`] (for `dcgmi`; a command the
    /// user runs keeps what it was given, as under any other wrapper).
    pub default_signals: bool,
    /// Close every descriptor this process inherited without close-on-exec (for `dcgmi` and
    /// the watchdog; a command the user runs gets what the user gave cutrace).
    pub close_inherited: bool,
}

fn errno(e: nix::errno::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

fn cstring(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// Start `spec`. Besides its three standard descriptors the child keeps none of this process's
/// own: those are close-on-exec. With `close_inherited`, any descriptor this process inherited
/// without that flag is closed in the child too (from the list in /proc/self/fd).
pub(crate) fn spawn(spec: &Spawn) -> std::io::Result<Pid> {
    let mut attr = PosixSpawnAttr::init().map_err(errno)?;
    let mut flags = PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK;
    if spec.default_signals {
        flags |= PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF;
        attr.set_sigdefault(&DEFAULTED.into_iter().collect())
            .map_err(errno)?;
    }
    if spec.own_group {
        flags |= PosixSpawnFlags::POSIX_SPAWN_SETPGROUP;
        attr.set_pgroup(nix::unistd::Pid::from_raw(0))
            .map_err(errno)?;
    }
    attr.set_flags(flags).map_err(errno)?;
    attr.set_sigmask(&spec.mask).map_err(errno)?;

    let mut actions = PosixSpawnFileActions::init().map_err(errno)?;
    // The sources first move above the standard descriptors (a source that is itself 0, 1 or 2
    // would be overwritten by an earlier dup2, or keep its close-on-exec flag when dup2'd onto
    // itself); these copies are close-on-exec and die with the exec.
    let mut sources: Vec<OwnedFd> = Vec::new();
    let null = File::options().read(true).write(true).open("/dev/null")?;
    for (target, io) in spec.stdio.iter().enumerate() {
        let fd = match io {
            Io::Null => null.as_fd(),
            Io::Fd(fd) => *fd,
            Io::Inherit => continue,
        };
        let copy = rustix::io::fcntl_dupfd_cloexec(fd, 10)?;
        actions
            .add_dup2(copy.as_raw_fd(), target as i32)
            .map_err(errno)?;
        sources.push(copy);
    }
    for fd in inherited_fds() {
        if spec.close_inherited && fd > 2 {
            // An fd closed since the listing is no error: glibc ignores EBADF for close actions.
            actions.add_close(fd).map_err(errno)?;
        }
    }
    let args = spec
        .args
        .iter()
        .map(|a| cstring(a))
        .collect::<std::io::Result<Vec<_>>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let pid = posix_spawn(spec.program, &actions, &attr, &args, &env).map_err(errno)?;
    drop(sources);
    Pid::from_raw(pid.as_raw()).ok_or_else(|| std::io::Error::other("posix_spawn returned pid 0"))
}

use std::os::unix::ffi::OsStringExt;

/// This process's open descriptors, as /proc/self/fd lists them.
fn inherited_fds() -> Vec<i32> {
    std::fs::read_dir("/proc/self/fd")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Wait for `pid` at most until `deadline` (from `start`). `None`: it ran past it, and it and
/// its process group (which it leads) were killed and reaped.
pub(crate) fn wait_within(
    pid: Pid,
    start: Instant,
    deadline: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    loop {
        match process::waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some((_, st))) => return Ok(Some(ExitStatus::from_raw(st.as_raw()))),
            Ok(None) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        if start.elapsed() >= deadline {
            let _ = process::kill_process_group(pid, process::Signal::KILL);
            let _ = process::kill_process(pid, process::Signal::KILL);
            while let Err(Errno::INTR) = process::waitpid(Some(pid), WaitOptions::empty()) {}
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A program's result with its output captured.
pub(crate) struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Run `program args…` to completion with stdin from /dev/null and its output captured, for at
/// most `deadline`; `Ok(None)`: it ran past it, and it and everything it started were killed.
/// The child leads a process group of its own, with an empty signal mask, the default
/// disposition of [`DEFAULTED`] and no descriptor of ours.
pub(crate) fn output_within(
    program: &Path,
    args: &[&str],
    deadline: Duration,
) -> std::io::Result<Option<Captured>> {
    let pipe = || -> std::io::Result<(File, File)> {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        Ok((File::from(r), File::from(w)))
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let mut argv = vec![program.as_os_str().to_owned()];
    argv.extend(args.iter().map(OsString::from));
    let pid = spawn(&Spawn {
        program,
        args: argv,
        stdio: [Io::Null, Io::Fd(out_w.as_fd()), Io::Fd(err_w.as_fd())],
        own_group: true,
        mask: SigSet::empty(),
        default_signals: true,
        close_inherited: true,
    })?;
    let start = Instant::now();
    drop((out_w, err_w));
    // Drain both pipes on threads: a child blocked writing a full pipe would never exit.
    let drain = |mut r: File| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let (out_rx, err_rx) = (drain(out_r), drain(err_r));
    let Some(status) = wait_within(pid, start, deadline)? else {
        return Ok(None);
    };
    // A grandchild that left the group may hold the pipes open: wait for its output briefly.
    let grace = Duration::from_millis(500);
    Ok(Some(Captured {
        status,
        stdout: out_rx.recv_timeout(grace).unwrap_or_default(),
        stderr: err_rx.recv_timeout(grace).unwrap_or_default(),
    }))
}
