//! `cutrace monitor -- CMD`: runs a program under the injection library, as `record` does, but
//! instead of writing a trace each CUDA process sends summaries to this command over a private
//! Unix socket, and this command serves them as Prometheus metrics on `--listen` while the
//! program runs (docs/MONITOR.md). The program's output passes through untouched (it inherits
//! stdin, stdout and stderr) and its exit status is this command's.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use cutrace_launch::{cleared_vars, injection_env, preload_value, resolve_program};
use cutrace_monitor::{http, prom, socket, State};
use cutrace_settings::{ApiMode, Settings};

/// The kinds monitor mode needs: kernels for busy, the launch calls for latency, copies.
const MONITOR_KINDS: [&str; 4] = ["kernel", "runtime", "driver", "memcpy"];
/// How long, after the program exits, its processes' last batches may take to arrive.
const DRAIN: Duration = Duration::from_secs(3);

/// Run a program and serve its GPUs' busy time as Prometheus metrics while it runs.
///
/// Every CUDA process the program starts reports, without writing a trace, the union of its
/// kernels' intervals per GPU (busy, never a sum), communication-kernel time, copies, launch
/// latency and what was dropped; the metrics are per GPU (one union over all its processes)
/// and per process. The program's output, stdin and exit status are its own.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace monitor -- python3 train.py                         metrics on 127.0.0.1:9464/metrics
  cutrace monitor --listen 127.0.0.1:9500 -- ./my_app        another port
  cutrace monitor --linger 30 -- python3 bench.py            keep serving 30 s after it exits
  curl -s 127.0.0.1:9464/metrics | grep cutrace_gpu_busy      read it by hand
  cutrace monitor --record run1 -- ./my_app                   metrics, and a trace in run1/
  cutrace monitor --duty 2s/20s -- python3 train.py           traced 2 s of every 20 s

With --record DIR the processes also write the trace `cutrace record -o DIR` would (kernels,
launch calls and copies), from the same records the metrics are made of: `cutrace report DIR`
then gives the same busy time per GPU and process as the last scrape.

Prometheus: add a scrape job for the address (`static_configs: [{targets: ["127.0.0.1:9464"]}]`);
`rate(cutrace_gpu_busy_seconds_total[1m])` is the fraction of time the GPU ran a kernel.
docs/MONITOR.md says what each metric measures and how it differs from nvidia-smi's and DCGM's
GPU_UTIL.

Where nothing can be traced (no CUDA driver, no libcupti, a program that uses no GPU) the
program still runs, and cutrace_monitor_untraced_info{reason="…"} says why.

Security: the processes report over a Unix socket in a new directory only your user can enter
(0700, the socket 0600); a sender of another user, or one claiming another pid, is refused.
/metrics listens on loopback unless --listen names another address: the labels carry pids and
program names.

Signals: Ctrl-C and Ctrl-\ reach the program from the terminal; SIGTERM, SIGHUP (and SIGINT or
SIGQUIT sent with kill) sent to cutrace are passed on to it, and cutrace waits for it to exit.

Exit status: the program's own (128+N when a signal N ended it). Before the program starts:
125 when cutrace itself fails (the --listen address taken, no injection library), 126 when the
program cannot be run, 127 when it is not found."#)]
pub struct Args {
    /// Address for the /metrics endpoint (HOST:PORT). Non-loopback addresses expose pids and
    /// program names to whoever can reach them.
    #[arg(long, default_value = "127.0.0.1:9464", value_parser = parse_listen)]
    pub(crate) listen: SocketAddr,
    /// Seconds to keep serving /metrics after the program exited, so a scraper gets the final
    /// values.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub(crate) linger: u64,
    /// Seconds after a process ended before its own series leave /metrics (its time stays in
    /// its GPUs' busy), so short-lived processes do not pile up labels.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub(crate) forget_after: u64,
    /// Trace only part of the time, to cut the cost: ON/PERIOD (e.g. 2s/20s: records on for
    /// the first 2 s of every 20 s). Busy then counts the on windows only, and
    /// cutrace_process_traced_seconds_total says how long they were.
    #[arg(long, value_name = "ON/PERIOD", value_parser = parse_duty)]
    pub(crate) duty: Option<cutrace_settings::Duty>,
    /// Seconds a kernel launch may go without completing before it is a stuck kernel: logged
    /// once, and its process's flight recorder written to --dump-stuck. A program that
    /// delivered no record for half of it has CUPTI hand over what it holds (CUPTI keeps back
    /// every record of a buffer that holds a kernel still running), which names the kernel.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) stuck_after: u64,
    /// Where a process with a stuck kernel writes its last records (a part, as `cutrace
    /// capture --last`), created when first needed [default: $XDG_STATE_HOME/cutrace/stuck,
    /// else ~/.local/state/cutrace/stuck].
    #[arg(long, value_name = "DIR")]
    pub(crate) dump_stuck: Option<PathBuf>,
    /// Write no flight recorder when a kernel is stuck (the hang is still logged).
    #[arg(long, conflicts_with = "dump_stuck")]
    pub(crate) no_dump_stuck: bool,
    /// Also write a trace into DIR (created if missing), as `cutrace record -o DIR` would,
    /// from the same records as the metrics.
    #[arg(long, value_name = "DIR")]
    pub(crate) record: Option<PathBuf>,
    /// Print nothing of cutrace's own but warnings and errors.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true)]
    pub(crate) command: Vec<OsString>,
}

/// This machine's name, for the GPUs' `host` label.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Where the socket's private directory goes: `XDG_RUNTIME_DIR` when it is an absolute
/// directory, else the temporary directory.
fn socket_base() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

/// Why nothing will be traced on this machine, when that is known before the program runs.
pub(crate) fn untraced_here() -> Option<String> {
    if cutrace_cupti::api::driver_version().is_none() {
        return Some(
            "no CUDA driver on this machine (libcuda.so.1 cannot be loaded): the program runs \
             untraced"
                .into(),
        );
    }
    None
}

/// What the injection is told in monitor mode: the kinds it summarises, the socket.
/// `--listen HOST:PORT`: an IP address and port, or `localhost:PORT` (the IPv4 loopback).
pub(crate) fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        if let Ok(p) = port.parse::<u16>() {
            return Ok(SocketAddr::from(([127, 0, 0, 1], p)));
        }
    }
    Err(format!(
        "'{text}' is not an address to listen on: give IP:PORT, e.g. 127.0.0.1:9464 (this \
         machine only), 0.0.0.0:9464 (every interface) or [::1]:9464"
    ))
}

/// `--duty ON/PERIOD`.
pub(crate) fn parse_duty(text: &str) -> Result<cutrace_settings::Duty, String> {
    // Each time with its unit: a bare 2/20 would be read as milliseconds.
    let units = text
        .split('/')
        .all(|t| t.trim().ends_with("ms") || t.trim().ends_with('s'));
    let parsed = cutrace_settings::Duty::parse(text).filter(|_| units);
    parsed.ok_or_else(|| {
        format!(
            "'{text}' is not a duty cycle: give ON/PERIOD with ON shorter than PERIOD, each in \
             ms or s (e.g. 2s/20s or 500ms/10s)"
        )
    })
}

pub(crate) fn monitor_settings(
    sock: &Path,
    duty: Option<cutrace_settings::Duty>,
    stuck_after: u64,
) -> Settings {
    Settings {
        monitor_duty: duty,
        monitor_stuck_after_s: Some(stuck_after),
        // The programs send to no listener but this user's (root in a container is uid 0 too).
        monitor_uid: Some(nix::unistd::getuid().as_raw()),
        kinds: Some(MONITOR_KINDS.iter().map(|k| (*k).to_string()).collect()),
        run_id: Some(cutrace_launch::new_run_id()),
        // Only the calls that launch work or copy: the others are not summarised.
        api: Some(ApiMode::Launches),
        monitor_socket: Some(sock.to_path_buf()),
        knobs: super::record::inherited_knobs(),
        ..Settings::default()
    }
}

/// Reads the socket into `state` and serves its metrics on `listener`, each on a thread of its
/// own, for as long as the process lives.
pub(crate) fn start_serving(
    sock: &socket::PrivateSocket,
    listener: std::net::TcpListener,
    state: &Arc<Mutex<State>>,
) -> anyhow::Result<()> {
    let units = sock
        .listener
        .try_clone()
        .context("sharing the monitor's socket with its reader thread")?;
    let st = state.clone();
    std::thread::spawn(move || socket::serve(&units, st));
    let (st, host) = (state.clone(), hostname());
    // The figures are copied under the lock and rendered after it, so a scrape never holds
    // up the senders for longer than the copy.
    let render = move || {
        let snapshot = match st.lock() {
            Ok(mut s) => {
                s.forget_ended(Instant::now());
                s.snapshot()
            }
            Err(_) => return String::new(),
        };
        prom::render(&snapshot, &host)
    };
    std::thread::spawn(move || http::serve(listener, Arc::new(render)));
    Ok(())
}

/// Where stuck kernels' flight recorders go.
#[derive(Debug, Clone)]
pub(crate) struct Dump {
    dir: PathBuf,
    /// The default under the user's state directory (made when first needed, and only as a
    /// private directory of the user's own), not one the user named.
    default: bool,
    /// Made and checked already.
    ready: bool,
}

impl Dump {
    /// Makes the directory (once): a named one as a trace directory, the default one private.
    fn prepare(&mut self) -> anyhow::Result<()> {
        if !self.ready {
            if self.default {
                private_dir(&self.dir)?;
            } else {
                cutrace_launch::prepare_output(&self.dir)?;
            }
            self.ready = true;
        }
        Ok(())
    }
}

/// Makes `dir`'s missing parts (0700) and checks that it and its parent are directories of
/// this user's own that no one else can write, none of them a symbolic link: a state directory
/// named by an environment variable may point anywhere (`sudo -E` keeps a user's for root).
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let me = nix::unistd::geteuid().as_raw();
    let parent = dir.parent().context("a dump directory without a parent")?;
    for d in [parent, dir] {
        if !d.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .with_context(|| format!("making {}", d.display()))?;
        }
        let m = std::fs::symlink_metadata(d).with_context(|| format!("reading {}", d.display()))?;
        if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
            anyhow::bail!(
                "{} is not a directory of your own that only you can write (a link, another \
                 user's, or writable by others): give --dump-stuck DIR, or --no-dump-stuck",
                d.display()
            );
        }
    }
    Ok(())
}

/// Logs each stuck kernel once (a launch pending past `--stuck-after`), and, with a dump
/// directory, has that process write its flight recorder there (`cutrace capture --last`).
pub(crate) fn watch_stuck(state: &Arc<Mutex<State>>, dump: Option<Dump>) {
    let st = state.clone();
    let mut dump = dump;
    let _ = std::thread::Builder::new()
        .name("cutrace-stuck".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            if !log_stuck(&st, dump.as_mut()) {
                return;
            }
        });
}

/// Logs the stuck kernels `state` holds and not yet logged (each once), asking each one's
/// process for its flight recorder when there is a dump directory. The directory is made
/// outside the state's lock (a home on a network file system may hang); false when the lock
/// is poisoned.
pub(crate) fn log_stuck(state: &Mutex<State>, mut dump: Option<&mut Dump>) -> bool {
    let stuck = match state.lock() {
        Ok(mut s) => std::mem::take(&mut s.stuck),
        Err(_) => return false,
    };
    for k in stuck {
        let rank = k.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let kernel = k
            .kernel
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let mut line = format!(
            "cutrace: stuck kernel: {} (pid {}{rank}) has had a kernel{kernel} launched {:.0} s \
             ago that has not completed",
            k.command,
            k.pid,
            k.age_ns as f64 / 1e9
        );
        if let Some(d) = dump.as_deref_mut() {
            if let Err(e) = d.prepare() {
                eprintln!(
                    "{line}; its last records cannot go to {}: {e:#}",
                    d.dir.display()
                );
                continue;
            }
            let req = cutrace_monitor::wire::CaptureRequest {
                pid: Some(k.pid),
                capture: cutrace_monitor::wire::Capture {
                    dir: d.dir.to_string_lossy().into_owned(),
                    seconds: 0,
                    last: true,
                },
            };
            let me = cutrace_monitor::peer::Peer::pid_only(std::process::id());
            let told = state
                .lock()
                .is_ok_and(|mut s| !s.capture(&me, &req).told.is_empty());
            if told {
                line += &format!("; its last records go to {}", d.dir.display());
            }
        }
        eprintln!("{line}");
    }
    true
}

/// `--dump-stuck DIR`, made (0700) and absolute; else the default under the user's state
/// directory, made only when a kernel is first stuck; none with `--no-dump-stuck` (or no home).
pub(crate) fn dump_dir(dir: Option<&Path>, off: bool) -> anyhow::Result<Option<Dump>> {
    if off {
        return Ok(None);
    }
    let Some(d) = dir else {
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".local/state"))
            });
        return Ok(state.map(|s| Dump {
            dir: s.join("cutrace/stuck"),
            default: true,
            ready: false,
        }));
    };
    let (d, _) = cutrace_launch::prepare_output(d)?;
    Ok(Some(Dump {
        dir: std::fs::canonicalize(&d).with_context(|| format!("resolving {}", d.display()))?,
        default: false,
        ready: true,
    }))
}

/// Warns when `addr` is reachable from other machines.
pub(crate) fn warn_if_not_loopback(addr: SocketAddr) {
    if !addr.ip().is_loopback() {
        eprintln!(
            "cutrace: warning: --listen {addr} is not a loopback address: whoever can reach it \
             reads the metrics' labels (pids, program names, ranks, job ids)"
        );
    }
}

/// The program's environment: record's injection, in monitor mode (writing a trace into
/// `record` too, when given).
fn program_env(
    inject: &Path,
    sock: &Path,
    record: Option<&Path>,
    duty: Option<cutrace_settings::Duty>,
    stuck_after: u64,
) -> Vec<(String, OsString)> {
    let settings = Settings {
        output_dir: record.map(Path::to_path_buf),
        ..monitor_settings(sock, duty, stuck_after)
    };
    let mut env = injection_env(inject, &settings);
    match preload_value(inject, std::env::var_os("LD_PRELOAD").as_deref()) {
        Some(v) => env.push(("LD_PRELOAD".into(), v)),
        None => eprintln!(
            "cutrace: warning: {} cannot go in LD_PRELOAD (its path holds a space or colon), so \
             CUPTI entry points are not interposed",
            inject.display()
        ),
    }
    env
}

/// The signals the monitor takes instead of dying of them while its program runs: blocked here
/// (before any thread starts, so every thread has them blocked; the program gets an empty mask)
/// and read from a signalfd by [`pass_signals_on`].
pub(crate) fn block_signals() -> Option<nix::sys::signal::SigSet> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set.thread_block().ok()?;
    Some(set)
}

/// Passes the signals someone sent the monitor on to the program (`child`, while it runs; 0
/// after), and sets `stop` (which ends `--linger`). A signal the terminal sent (Ctrl-C, Ctrl-\)
/// reached the program's process group already and is not sent twice.
fn pass_signals_on(set: nix::sys::signal::SigSet, child: Arc<Mutex<u32>>, stop: Arc<AtomicBool>) {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let Ok(fd) = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC) else {
        return;
    };
    // The kernel's own signals (from a terminal) carry si_code SI_KERNEL.
    const SI_KERNEL: i32 = 0x80;
    let _ = std::thread::Builder::new()
        .name("cutrace-signals".into())
        .spawn(move || {
            while let Ok(Some(info)) = fd.read_signal() {
                stop.store(true, Ordering::SeqCst);
                let Ok(sig) = nix::sys::signal::Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                // Held from reading the pid to sending: the main thread takes it to say the
                // program is reaped, so no signal can land on a pid taken over since.
                let Ok(pid) = child.lock() else { return };
                if *pid != 0 && info.ssi_code != SI_KERNEL {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), sig);
                }
            }
        });
}

/// Waits until process `pid` (a child) has exited, without reaping it: its pid stays its own
/// (a zombie) until `wait`, so a signal passed on before then cannot reach a process that
/// took the pid over.
fn wait_unreaped(pid: u32) {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    while let Err(nix::errno::Errno::EINTR) =
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
    {}
}

/// The exit status a shell would give: the code, or 128 + the signal.
fn exit_code(status: nix::sys::wait::WaitStatus) -> i32 {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => 128 + sig as i32,
        _ => 125,
    }
}

/// Starts the program, with `env`'s changes to this environment, through posix_spawn(3) with
/// an empty signal mask and SIGPIPE at its default: this thread blocks the signals it passes on
/// (they come through a signalfd) and a mask survives exec; started through std's spawn the
/// program inherited that mask (measured: `SigBlk: …4007`) and never saw a Ctrl-C or a TERM. No
/// code of ours runs between fork and exec.
fn spawn_program(
    prog: &std::ffi::OsStr,
    rest: &[OsString],
    env: &[(String, OsString)],
) -> std::io::Result<nix::unistd::Pid> {
    use nix::spawn::{posix_spawnp, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use std::ffi::CString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let errno = |e: nix::errno::Errno| std::io::Error::from_raw_os_error(e as i32);
    let c = |s: &std::ffi::OsStr| {
        CString::new(s.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let cleared = cleared_vars(env);
    let kept = std::env::vars_os().filter(|(k, _)| {
        !cleared.iter().any(|c| k == c) && !env.iter().any(|(n, _)| k == n.as_str())
    });
    let vars = kept
        .chain(env.iter().map(|(k, v)| (k.into(), v.clone())))
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect::<Vec<_>>();
    let argv = std::iter::once(prog)
        .chain(rest.iter().map(OsString::as_os_str))
        .map(c)
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut attr = PosixSpawnAttr::init().map_err(errno)?;
    attr.set_sigmask(&nix::sys::signal::SigSet::empty())
        .map_err(errno)?;
    // Rust ignores SIGPIPE in its own process, and an ignored signal survives exec: the program
    // gets it back at its default (as std's spawn does), so `yes | head` ends as in a shell.
    let pipe: nix::sys::signal::SigSet = [nix::sys::signal::Signal::SIGPIPE].into_iter().collect();
    attr.set_sigdefault(&pipe).map_err(errno)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )
    .map_err(errno)?;
    let actions = PosixSpawnFileActions::init().map_err(errno)?;
    posix_spawnp(&c(prog)?, &actions, &attr, &argv, &vars).map_err(errno)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (prog, rest) = args
        .command
        .split_first()
        .context("no command given: cutrace monitor [OPTIONS] -- CMD ARGS...")?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if let Err(e) = resolve_program(prog, std::env::var_os("PATH").as_deref(), &cwd) {
        eprintln!("cutrace: cannot run {}", e.message);
        return Ok(e.code);
    }
    let exe = std::env::current_exe().ok();
    let inject = super::record::inject_lib(exe.as_deref())?;
    let listener = http::bind(args.listen)?;
    // The address bound (`--listen 127.0.0.1:0` picks a port).
    let bound = listener.local_addr().unwrap_or(args.listen);
    warn_if_not_loopback(args.listen);
    let signals = block_signals();
    let base = socket_base();
    let sock = socket::create(&base)?;
    let state = Arc::new(Mutex::new(State {
        untraced_reason: untraced_here(),
        forget_after: Some(Duration::from_secs(args.forget_after)),
        stuck_after_ns: Some(args.stuck_after * 1_000_000_000),
        ..State::default()
    }));
    start_serving(&sock, listener, &state)?;
    let mut dump = dump_dir(args.dump_stuck.as_deref(), args.no_dump_stuck)?;
    watch_stuck(&state, dump.clone());
    if !args.quiet {
        eprintln!(
            "cutrace: serving metrics on http://{}/metrics while the program runs (`cutrace \
             capture --socket {} --all -o DIR` has it write a trace)",
            bound,
            sock.path.display()
        );
    }
    let record = match &args.record {
        Some(dir) => Some(cutrace_launch::prepare_output(dir)?.0),
        None => None,
    };
    let env = program_env(
        &inject,
        &sock.path,
        record.as_deref(),
        args.duty,
        args.stuck_after,
    );
    let child = match spawn_program(prog, rest, &env) {
        Ok(pid) => pid,
        Err(e) => {
            eprintln!("cutrace: cannot run {}: {e}", Path::new(prog).display());
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let (running, stop) = (
        Arc::new(Mutex::new(child.as_raw() as u32)),
        Arc::new(AtomicBool::new(false)),
    );
    if let Some(set) = signals {
        pass_signals_on(set, running.clone(), stop.clone());
    }
    wait_unreaped(child.as_raw() as u32);
    // No more signals to it: once reaped, its pid may be another process's. Reaped with the
    // lock held, so a signal being passed on finishes first.
    let status = {
        let mut pid = running.lock().unwrap_or_else(|e| e.into_inner());
        *pid = 0;
        loop {
            match nix::sys::wait::waitpid(child, None) {
                Err(nix::errno::Errno::EINTR) => {}
                r => break r.context("waiting for the program")?,
            }
        }
    };
    drain(&state);
    // A kernel found stuck in the program's last batches, which the watcher (every 500 ms) may
    // not have seen yet, is still said.
    log_stuck(&state, dump.as_mut());
    if args.linger > 0 && !stop.load(Ordering::SeqCst) {
        if !args.quiet {
            eprintln!(
                "cutrace: the program exited; serving its final metrics for {} s more (a \
                 signal ends it sooner)",
                args.linger
            );
        }
        let until = Instant::now() + Duration::from_secs(args.linger);
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    drop(sock);
    if let (Some(dir), false) = (&record, args.quiet) {
        eprintln!(
            "cutrace: the trace is in {}; `cutrace report {}` reads it",
            dir.display(),
            cutrace_launch::shell_quote(&dir.display().to_string())
        );
    }
    Ok(exit_code(status))
}

/// Waits (at most [`DRAIN`]) for the program's processes to close their connections, so their
/// last batches are counted.
fn drain(state: &Mutex<State>) {
    let start = Instant::now();
    while start.elapsed() < DRAIN {
        match state.lock() {
            Ok(s) if s.connections_open > 0 => {}
            _ => return,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
