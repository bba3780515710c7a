//! `cutrace monitor` end to end, no GPU: the fake libcupti plays scripted kernel, launch and
//! copy records over time in a host program that starts the injection as the CUDA driver does;
//! the monitor's /metrics must equal `cutrace report` of a `cutrace record` capture of the same
//! records, to the nanosecond, per GPU and per process (two processes on one GPU: a union, not
//! a sum). Without CUDA the program still runs, its output and exit status pass through, and
//! /metrics says why nothing is traced. Hostile senders leave the monitor alive and bounded.
//! Tests that need the C stand-ins skip themselves, loudly, without a C compiler.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cutrace_settings::var;
use cutrace_testkit::{loud, Run};

use crate::util::bin;

#[path = "../../../cutrace-inject/tests/util/mod.rs"]
mod fake;

pub(crate) const UUID_HEX: &str = "00112233445566778899aabbccddeeff";
pub(crate) const UUID: &str = "GPU-00112233-4455-6677-8899-aabbccddeeff";

/// A free loopback port (bound, then let go).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics`; `None` while nothing listens.
pub(crate) fn metrics(port: u16) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The values of metric `name` whose labels contain every one of `want`, as written.
pub(crate) fn values(text: &str, name: &str, want: &[&str]) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| want.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit_once(' ').map(|(_, v)| v.to_string()))
        .collect()
}

/// `12.000000345` → 12000000345 ns, exactly.
fn ns(seconds: &str) -> u64 {
    let (s, f) = seconds.split_once('.').unwrap();
    assert_eq!(f.len(), 9, "{seconds}");
    s.parse::<u64>().unwrap() * 1_000_000_000 + f.parse::<u64>().unwrap()
}

/// A script for the fake libcupti: `groups` flushes of kernels on two streams of one GPU,
/// overlapping and touching, some of them NCCL's, each with its launch call, and a copy.
/// Returns the script and its kernel count.
pub(crate) fn script(seed: u64, groups: u32) -> (String, usize) {
    let mut x = seed | 1;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut s = format!("device 0 {UUID_HEX}\n");
    let (mut corr, mut kernels) = (1, 0);
    for g in 0..groups {
        let base = 5_000_000 + u64::from(g) * 200_000;
        for _ in 0..30 {
            let start = base + next(150_000);
            let len = [0, 800, 2_000, 9_000][next(4) as usize];
            let stream = 7 + 6 * next(2);
            let comm = u64::from(next(6) == 0);
            s += &format!("api {corr} {} {}\n", start - 700, start - 250);
            s += &format!("kernel 0 {stream} {start} {} {corr} {comm}\n", start + len);
            corr += 1;
            kernels += 1;
        }
        s += &format!("memcpy 0 7 {base} {} 65536 {corr}\n", base + 300);
        corr += 1;
        s += "flush\n";
    }
    (s, kernels)
}

pub(crate) struct Setup {
    pub(crate) dir: cutrace_testkit::Dir,
    pub(crate) fake_cupti: PathBuf,
    pub(crate) host: PathBuf,
    inject: PathBuf,
}

/// The C stand-ins and the injection library cargo built; `None`, after a SKIPPED line, when
/// either is missing.
pub(crate) fn setup(name: &str) -> Option<Setup> {
    let p = fake::programs()?;
    let exe = std::env::current_exe().ok()?;
    let inject = exe.with_file_name("libcutrace_inject.so");
    if !inject.is_file() {
        loud!(
            "SKIPPED: {} is missing (`cargo test --workspace` builds it)",
            inject.display()
        );
        return None;
    }
    Some(Setup {
        dir: cutrace_testkit::Dir::new(name),
        fake_cupti: p.fake_cupti.clone(),
        host: p.host.clone(),
        inject,
    })
}

impl Setup {
    /// `cutrace ARGS…` with the fake libcupti and the real injection library, the host program
    /// waiting for `wait` before it exits.
    pub(crate) fn cutrace(&self, args: &[&str], wait: &Path) -> Command {
        let mut c = bin();
        c.args(args)
            .env(var::CUPTI_LIB, &self.fake_cupti)
            .env(var::INJECT_LIB, &self.inject)
            .env(var::FLUSH_PERIOD_MS, "20")
            .env("FAKE_HOST_WAIT", wait)
            // A stuck kernel's flight recorder goes to STATE/cutrace/stuck by default: here.
            .env("XDG_STATE_HOME", self.dir.path(""))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.host.parent().unwrap().display()),
            )
            .env_remove("FAKE_CUPTI_SCRIPT");
        c
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The fake libcupti playing `script` in the host program (its STEPS `steps`), recorded as
    /// `cutrace record` does into DIR/trace; the trace.
    pub(crate) fn record_script(&self, script: &Path, steps: &str) -> PathBuf {
        let done = self.write("go", "");
        let trace = self.dir.join("trace");
        let kinds = [
            "record",
            "-q",
            "--kinds",
            "kernel,runtime,driver,memcpy",
            "-o",
        ];
        self.cutrace(&kinds, &done)
            .arg(&trace)
            .args(["--", "host", "-", "local", steps])
            .env("FAKE_CUPTI_SCRIPT", script)
            .run_code(3);
        trace
    }

    /// `cutrace report --format json TRACE`'s busy_ns of its one device.
    pub(crate) fn report_busy(&self, trace: &Path) -> u64 {
        let o = bin()
            .args(["report", "--format", "json"])
            .arg(trace)
            .run_ok();
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let devices = r["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 1, "{r}");
        devices[0]["busy_ns"].as_u64().unwrap()
    }
}

/// A running `cutrace monitor`, stopped (its program let go, then killed) when dropped.
pub(crate) struct Running {
    pub(crate) child: Option<Child>,
    wait: PathBuf,
}

impl Running {
    pub(crate) fn start(mut c: Command, wait: &Path) -> Running {
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running {
            child: Some(child),
            wait: wait.to_path_buf(),
        }
    }

    /// Lets the program exit and returns the monitor's output.
    pub(crate) fn finish(mut self) -> std::process::Output {
        std::fs::write(&self.wait, "").unwrap();
        self.child.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Running {
    /// After a failed test: its program let go, then SIGTERM (the monitor removes its socket's
    /// directory on it), then SIGKILL if it has not exited within 5 s.
    fn drop(&mut self) {
        let _ = std::fs::write(&self.wait, "");
        if let Some(mut c) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(c.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls /metrics until `done` says so (at most 30 s); the last text.
pub(crate) fn poll(port: u16, done: &dyn Fn(&str) -> bool) -> String {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(t) = metrics(port) {
            if done(&t) {
                return t;
            }
            last = t;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("/metrics never got there; last:\n{last}");
}

pub(crate) fn kernels_seen(t: &str) -> u64 {
    values(t, "cutrace_process_kernels_total", &[])
        .iter()
        .map(|v| v.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn metrics_equal_the_report_of_a_recording_of_the_same_records() {
    let Some(s) = setup("monitor-vs-report") else {
        return;
    };
    let (text, kernels) = script(5, 6);
    let sc = s.write("script", &text);
    // The same records, recorded as a trace.
    let trace = s.record_script(&sc, "iw");
    let want = s.report_busy(&trace);
    assert!(want > 0);
    // Communication and its exposed part, as the job analysis defines them.
    let o = bin()
        .args(["report", "--rank-summary"])
        .arg(&trace)
        .args(["-o", "-"])
        .run_ok();
    let rank: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (comm, exposed) = (
        rank["comm_ns"].as_u64().unwrap(),
        rank["exposed_comm_ns"].as_u64().unwrap(),
    );
    assert!(comm > 0 && exposed > 0 && exposed < comm, "{rank}");
    // Monitored.
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "--listen", &listen], &wait);
    c.args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc);
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| kernels_seen(t) == kernels as u64);
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID, "gpu=\"0\""]);
    let proc = values(&t, "cutrace_process_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(gpu.len(), 1, "{t}");
    assert_eq!(proc.len(), 1, "{t}");
    assert_eq!(ns(&gpu[0]), want, "{t}");
    assert_eq!(ns(&proc[0]), want, "{t}");
    // Each stream's busy, as the report gives it per stream.
    let o = bin()
        .args(["report", "--format", "json"])
        .arg(&trace)
        .run_ok();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let streams = r["devices"][0]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{r}");
    for st in streams {
        let label = format!("stream=\"{}\"", st["stream"]);
        let v = values(
            &t,
            "cutrace_process_stream_busy_seconds_total",
            &[UUID, &label],
        );
        assert_eq!(v.len(), 1, "{label}: {t}");
        assert_eq!(Some(ns(&v[0])), st["busy_ns"].as_u64(), "{label}: {t}");
    }
    let one = |name: &str| {
        let v = values(&t, name, &[UUID]);
        assert_eq!(v.len(), 1, "{name}: {t}");
        ns(&v[0])
    };
    assert_eq!(one("cutrace_process_comm_busy_seconds_total"), comm, "{t}");
    assert_eq!(
        one("cutrace_process_exposed_comm_seconds_total"),
        exposed,
        "{t}"
    );
    assert!(
        values(&t, "cutrace_monitor_untraced_info", &[]).is_empty(),
        "{t}"
    );
    let copies = values(&t, "cutrace_process_copy_bytes_total", &[UUID]);
    assert_eq!(copies, ["393216"], "{t}");
    let latency = values(&t, "cutrace_process_launch_latency_seconds_count", &[UUID]);
    assert_eq!(latency, [kernels.to_string()], "{t}");
    let o = m.finish();
    // The host program's own exit status and output.
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("init 1"));
}

#[test]
fn two_processes_on_one_gpu_give_the_union_and_each_its_own_busy() {
    let Some(s) = setup("monitor-two") else {
        return;
    };
    let (ta, ka) = script(17, 4);
    let (tb, kb) = script(29, 4);
    let (a, b) = (s.write("a", &ta), s.write("b", &tb));
    let both = format!(
        "FAKE_CUPTI_SCRIPT={} host - local iw & FAKE_CUPTI_SCRIPT={} host - local iw & wait",
        a.display(),
        b.display()
    );
    let done = s.write("go", "");
    let trace = s.dir.join("trace");
    let mut rec = s.cutrace(
        &[
            "record",
            "-q",
            "--kinds",
            "kernel,runtime,driver,memcpy",
            "-o",
        ],
        &done,
    );
    rec.arg(&trace)
        .args(["--", "/bin/sh", "-c", &both])
        .run_ok();
    let union = s.report_busy(&trace);
    let mut each: Vec<u64> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| s.report_busy(&e.unwrap().path()))
        .collect();
    each.sort_unstable();
    assert_eq!(each.len(), 2);
    assert!(union < each[0] + each[1], "the scripts overlap in time");
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "-q", "--listen", &listen], &wait);
    c.args(["--", "/bin/sh", "-c", &both]);
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| kernels_seen(t) == (ka + kb) as u64);
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        gpu.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [union],
        "{t}"
    );
    let mut got: Vec<u64> = values(&t, "cutrace_process_gpu_busy_seconds_total", &[UUID])
        .iter()
        .map(|v| ns(v))
        .collect();
    got.sort_unstable();
    assert_eq!(got, each, "{t}");
    assert_eq!(m.finish().status.code(), Some(0));
}

/// The injection library cargo built, else a stand-in with an ELF header (a program that
/// never starts CUDA never loads it beyond LD_PRELOAD).
fn inject_or_stand_in(dir: &Path) -> PathBuf {
    let built = std::env::current_exe()
        .unwrap()
        .with_file_name("libcutrace_inject.so");
    if built.is_file() {
        return built;
    }
    let lib = dir.join("libcutrace_inject.so");
    std::fs::write(&lib, b"\x7fELF, not really a library").unwrap();
    lib
}

#[test]
fn without_cuda_the_program_runs_and_the_metrics_say_why() {
    let dir = cutrace_testkit::Dir::new("monitor-nocuda");
    let wait = dir.join("go");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let script = format!(
        "echo out; echo err >&2; while [ ! -e {} ]; do sleep 0.02; done; exit 7",
        wait.display()
    );
    let mut c = bin();
    // No libcupti to find, as on a machine without CUDA.
    c.args([
        "monitor", "--listen", &listen, "--", "/bin/sh", "-c", &script,
    ])
    .env(var::INJECT_LIB, inject_or_stand_in(&dir))
    .env(var::CUPTI_LIB, dir.join("no-libcupti.so"));
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| t.contains("cutrace_monitor_untraced_info{"));
    let why = t
        .lines()
        .find(|l| l.starts_with("cutrace_monitor_untraced_info{reason=\""))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(why.ends_with(" 1"), "{why}");
    assert!(
        why.contains("no CUDA driver") || why.contains("no CUDA process has reported"),
        "{why}"
    );
    let o = m.finish();
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("err\n"), "{err}");
    assert!(err.contains(&format!("http://{listen}/metrics")), "{err}");
}

#[test]
fn a_taken_port_is_named_with_the_fix_and_the_program_does_not_run() {
    let dir = cutrace_testkit::Dir::new("monitor-port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let ran = dir.join("ran");
    let o = bin()
        .env(var::INJECT_LIB, inject_or_stand_in(&dir))
        .args(["monitor", "--listen", &addr, "--", "/bin/sh", "-c"])
        .arg(format!("touch {}", ran.display()))
        .run_code(125);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&addr) && err.contains("in use") && err.contains("--listen"),
        "{err}"
    );
    assert!(!ran.exists());
    // A missing program: 127, as record says.
    let o = bin()
        .args([
            "monitor",
            "--listen",
            "127.0.0.1:0",
            "--",
            "no-such-program-xyz",
        ])
        .run_code(127);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-program-xyz"));
}

/// One frame of the monitor's wire format, as the injected library writes it.
fn frame(m: &cutrace_monitor::wire::Message) -> Vec<u8> {
    cutrace_monitor::wire::encode(m)
}

/// Peak resident memory of `pid`, in kB.
fn peak_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn send(sock: &Path, bytes: &[u8]) {
    let mut c = std::os::unix::net::UnixStream::connect(sock).unwrap();
    // The monitor closes a connection it refuses: a write may then fail, which is the point.
    let _ = c.write_all(bytes);
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
}

#[test]
fn hostile_senders_leave_the_monitor_alive_and_bounded() {
    use cutrace_monitor::wire::{Batch, DeviceBatch, Hello, Message, StreamRuns};
    let dir = cutrace_testkit::Dir::new("monitor-hostile");
    let wait = dir.join("go");
    let said = dir.join("socket-path");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let script = format!(
        "echo \"${}\" > {}; while [ ! -e {} ]; do sleep 0.02; done",
        var::MONITOR_SOCKET,
        said.display(),
        wait.display()
    );
    let mut c = bin();
    c.args([
        "monitor", "-q", "--listen", &listen, "--", "/bin/sh", "-c", &script,
    ])
    .env(var::INJECT_LIB, inject_or_stand_in(&dir));
    let m = Running::start(c, &wait);
    poll(port, &|_| {
        said.exists() && std::fs::read(&said).is_ok_and(|b| b.ends_with(b"\n"))
    });
    let sock = PathBuf::from(std::fs::read_to_string(&said).unwrap().trim());
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(sock.parent().unwrap()), mode(&sock)), (0o700, 0o600));
    let monitor_pid = m.child.as_ref().unwrap().id();
    let before = peak_kb(monitor_pid);
    // Garbage, a frame claiming 4 GiB, a hello for another pid.
    send(&sock, &vec![0xa5; 64 << 10]);
    let mut huge = frame(&Message::Untraced(String::new()));
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    send(&sock, &huge);
    let other = Message::Hello(Hello {
        pid: 1,
        ..Hello::default()
    });
    send(&sock, &frame(&other));
    // A flood: one sender, 2,000 batches of 1,000 runs each (32 MB), far past the open runs the
    // monitor keeps.
    let me = Message::Hello(Hello {
        pid: std::process::id(),
        host: "h".into(),
        command: "flood".into(),
        ..Hello::default()
    });
    let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    c.write_all(&frame(&me)).unwrap();
    for seq in 1..=2_000u64 {
        let base = seq * 10_000_000;
        let runs = (0..1_000)
            .map(|i| (base + i * 100, base + i * 100 + 50))
            .collect();
        let b = Message::Batch(Batch {
            seq,
            devices: vec![DeviceBatch {
                device: 0,
                uuid: Some(UUID.into()),
                kernels: 1_000,
                streams: vec![StreamRuns { stream: 1, runs }],
                ..DeviceBatch::default()
            }],
            ..Batch::default()
        });
        c.write_all(&frame(&b)).unwrap();
    }
    drop(c);
    let t = poll(port, &|t| kernels_seen(t) == 2_000_000);
    for reason in ["bad_magic", "too_long", "peer_pid"] {
        let r = format!("reason=\"{reason}\"");
        assert_eq!(
            values(&t, "cutrace_monitor_rejected_frames_total", &[&r]),
            ["1"],
            "{t}"
        );
    }
    // Exact while within the horizon: 2,000 × 1,000 runs of 50 ns.
    let busy = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        busy.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [100_000_000]
    );
    let grew = peak_kb(monitor_pid).saturating_sub(before);
    assert!(grew < 64 * 1024, "the monitor grew by {grew} kB");
    let o = m.finish();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!sock.exists() && !sock.parent().unwrap().exists());
}

/// The release binary `.ci/run` builds before the tests (a debug build folds runs about ten
/// times slower than the monitor does in use).
fn release_bin() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/cutrace");
    p.is_file().then_some(p)
}

#[test]
fn a_gigabyte_flood_leaves_the_monitor_alive_exact_and_bounded() {
    use cutrace_monitor::wire::{Batch, DeviceBatch, Hello, Message, StreamRuns, HEADER_LEN};
    let Some(release) = release_bin() else {
        loud!("SKIPPED a_gigabyte_flood_leaves_the_monitor_alive_exact_and_bounded: no target/release/cutrace (`cargo build --release -p cutrace` first)");
        return;
    };
    let dir = cutrace_testkit::Dir::new("monitor-flood");
    let wait = dir.join("go");
    let said = dir.join("socket-path");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let script = format!(
        "echo \"${}\" > {}; while [ ! -e {} ]; do sleep 0.02; done",
        var::MONITOR_SOCKET,
        said.display(),
        wait.display()
    );
    let mut c = Command::new(&release);
    c.args([
        "monitor", "-q", "--listen", &listen, "--", "/bin/sh", "-c", &script,
    ])
    .env(var::INJECT_LIB, inject_or_stand_in(&dir));
    let m = Running::start(c, &wait);
    poll(port, &|_| {
        said.exists() && std::fs::read(&said).is_ok_and(|b| b.ends_with(b"\n"))
    });
    let sock = PathBuf::from(std::fs::read_to_string(&said).unwrap().trim());
    let monitor_pid = m.child.as_ref().unwrap().id();
    let before = peak_kb(monitor_pid);
    // 64,000 batches of 1,000 runs of 50 ns each, every run new: 1.03 GB of frames. One frame
    // is encoded and its sequence number and runs rewritten in place for each batch.
    const BATCHES: u64 = 64_000;
    const RUNS: u64 = 1_000;
    let me = Message::Hello(Hello {
        pid: std::process::id(),
        host: "h".into(),
        command: "flood".into(),
        ..Hello::default()
    });
    let mut frame = frame(&Message::Batch(Batch {
        seq: 1,
        devices: vec![DeviceBatch {
            device: 0,
            uuid: Some(UUID.into()),
            kernels: RUNS,
            streams: vec![StreamRuns {
                stream: 1,
                runs: vec![(0, 0); RUNS as usize],
            }],
            ..DeviceBatch::default()
        }],
        ..Batch::default()
    }));
    // The stream's runs end the frame (one GPU, one stream).
    let runs_at = frame.len() - 16 * RUNS as usize;
    let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    c.write_all(&self::frame(&me)).unwrap();
    let mut sent = 0u64;
    for seq in 1..=BATCHES {
        frame[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&seq.to_le_bytes());
        let base = 1_000_000_000 + seq * 1_000_000;
        for i in 0..RUNS {
            let at = runs_at + 16 * i as usize;
            let start = base + i * 100;
            frame[at..at + 8].copy_from_slice(&start.to_le_bytes());
            frame[at + 8..at + 16].copy_from_slice(&(start + 50).to_le_bytes());
        }
        c.write_all(&frame).unwrap();
        sent += frame.len() as u64;
    }
    drop(c);
    assert!(sent > 1_000_000_000, "{sent} bytes");
    let start = Instant::now();
    let t = loop {
        let t = metrics(port).unwrap_or_default();
        if kernels_seen(&t) == BATCHES * RUNS || start.elapsed() > Duration::from_secs(120) {
            break t;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(kernels_seen(&t), BATCHES * RUNS, "{t}");
    // Exact: the runs arrive in time order, so retiring the oldest past 65,536 open runs loses
    // nothing.
    let busy = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        busy.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [BATCHES * RUNS * 50]
    );
    let grew = peak_kb(monitor_pid).saturating_sub(before);
    assert!(grew < 64 * 1024, "the monitor grew by {grew} kB");
    let o = m.finish();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn listen_addresses_duty_cycles_and_unreachable_agents_are_answered_plainly() {
    let dir = cutrace_testkit::Dir::new("monitor-args");
    let monitor = |args: &[&str]| {
        let mut c = bin();
        c.arg("monitor")
            .args(args)
            .args(["--", "true"])
            .env(var::INJECT_LIB, inject_or_stand_in(&dir));
        c
    };
    // localhost is the IPv4 loopback; a name it cannot take says what it takes.
    monitor(&["-q", "--listen", "localhost:0"]).run_ok();
    // (125: cutrace's own failure, as `record` says it, never a code the program could give.)
    let o = monitor(&["--listen", "gpu-node:9464"]).run_code(125);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("give IP:PORT, e.g. 127.0.0.1:9464"), "{err}");
    // A duty cycle's times need their units: 2/20 would be milliseconds.
    let o = monitor(&["--duty", "2/20"]).run_code(125);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("each in ms or s (e.g. 2s/20s"), "{err}");
    monitor(&["-q", "--listen", "127.0.0.1:0", "--duty", "500ms/2s"]).run_ok();
    // A capture that reaches no agent leaves no directory behind, and one that was there stays.
    let out = dir.join("cap");
    let o = bin()
        .args(["capture", "--all", "-o"])
        .arg(&out)
        .arg("--socket")
        .arg(dir.join("no-agent.sock"))
        .run_code(2);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot reach a cutrace agent"),
        "{o:?}"
    );
    assert!(!out.exists());
    std::fs::create_dir(&out).unwrap();
    bin()
        .args(["capture", "--all", "-o"])
        .arg(&out)
        .arg("--socket")
        .arg(dir.join("no-agent.sock"))
        .run_code(2);
    assert!(out.is_dir());
}

#[test]
fn the_program_starts_with_no_signal_blocked_so_a_term_ends_it() {
    let dir = cutrace_testkit::Dir::new("monitor-sigmask");
    // The monitor blocks the signals it passes on; its program must not inherit that mask.
    let o = bin()
        .args(["monitor", "-q", "--listen", "127.0.0.1:0", "--"])
        .args(["grep", "^SigBlk", "/proc/self/status"])
        .env(var::INJECT_LIB, inject_or_stand_in(&dir))
        .run_ok();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "SigBlk:\t0000000000000000"
    );
    // Nor SIGPIPE ignored, as Rust has it in its own process: `yes | head` ends quietly.
    let o = bin()
        .args(["monitor", "-q", "--listen", "127.0.0.1:0", "--"])
        .args(["grep", "^SigIgn", "/proc/self/status"])
        .env(var::INJECT_LIB, inject_or_stand_in(&dir))
        .run_ok();
    let ign = String::from_utf8_lossy(&o.stdout);
    let mask = u64::from_str_radix(ign.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & (1 << (13 - 1)), 0, "SIGPIPE ignored: {ign}");
    // A program that is no shell (a shell clears its own mask when it starts): a TERM sent to
    // the monitor reaches `sleep`, which ends by it, and the monitor says so as a shell would.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = bin();
    c.args(["monitor", "-q", "--listen", &listen, "--", "sleep", "60"])
        .env(var::INJECT_LIB, inject_or_stand_in(&dir));
    let mut m = Running::start(c, &dir.join("unused"));
    poll(port, &|t| t.contains("cutrace_monitor_processes"));
    let child = m.child.take().unwrap();
    let started = Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .run_ok();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 15), "{o:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn sigterm_reaches_the_program_and_the_socket_goes_with_the_monitor() {
    let dir = cutrace_testkit::Dir::new("monitor-sigterm");
    let said = dir.join("socket-path");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // The program says where the socket is, then waits for a TERM of its own.
    let script = format!(
        "trap 'echo got-term; exit 42' TERM; echo \"${}\" > {}; while :; do sleep 0.02; done",
        var::MONITOR_SOCKET,
        said.display()
    );
    let mut c = bin();
    c.args([
        "monitor", "-q", "--listen", &listen, "--", "/bin/sh", "-c", &script,
    ])
    .env(var::INJECT_LIB, inject_or_stand_in(&dir));
    let mut m = Running::start(c, &dir.join("unused"));
    poll(port, &|_| {
        std::fs::read(&said).is_ok_and(|b| b.ends_with(b"\n"))
    });
    let sock = PathBuf::from(std::fs::read_to_string(&said).unwrap().trim());
    assert!(sock.exists());
    let child = m.child.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .run_ok();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(42),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "got-term\n");
    assert!(!sock.exists() && !sock.parent().unwrap().exists());
}

#[test]
fn ended_processes_leave_no_labels_after_forget_after_and_their_gpu_keeps_their_time() {
    let Some(s) = setup("monitor-forget") else {
        return;
    };
    let (text, _) = script(53, 2);
    let sc = s.write("script", &text);
    // Three short-lived CUDA processes, one after the other, then a wait.
    let wait = s.dir.join("monitor-go");
    let prog = format!(
        "for i in 1 2 3; do host - local i; done; while [ ! -e {} ]; do sleep 0.02; done",
        wait.display()
    );
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(
        &["monitor", "-q", "--forget-after", "1", "--listen", &listen],
        &wait,
    );
    c.args(["--", "/bin/sh", "-c", &prog])
        .env("FAKE_CUPTI_SCRIPT", &sc);
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| {
        values(t, "cutrace_monitor_forgotten_processes_total", &[]) == ["3"]
    });
    assert!(values(&t, "cutrace_process_up", &[]).is_empty(), "{t}");
    assert!(
        values(&t, "cutrace_process_gpu_busy_seconds_total", &[]).is_empty(),
        "{t}"
    );
    // The three replayed the same records: the GPU's union is one script's, not three.
    let trace = s.record_script(&sc, "i");
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        gpu.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [s.report_busy(&trace)]
    );
    assert!(
        values(&t, "cutrace_monitor_untraced_info", &[]).is_empty(),
        "{t}"
    );
    assert_eq!(m.finish().status.code(), Some(0));
}

#[test]
fn monitor_with_record_writes_the_trace_of_the_very_records_it_serves() {
    let Some(s) = setup("monitor-record") else {
        return;
    };
    let (text, kernels) = script(23, 4);
    let sc = s.write("script", &text);
    let port = free_port();
    let wait = s.dir.join("go");
    let trace = s.dir.join("both");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "--listen", &listen, "--record"], &wait);
    c.arg(&trace)
        .args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc);
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| kernels_seen(t) == kernels as u64);
    let o = m.finish();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("the trace is in"), "{err}");
    let want = s.report_busy(&trace);
    assert!(want > 0);
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    let proc = values(&t, "cutrace_process_gpu_busy_seconds_total", &[UUID]);
    assert_eq!((gpu.len(), proc.len()), (1, 1), "{t}");
    assert_eq!((ns(&gpu[0]), ns(&proc[0])), (want, want), "{t}");
    let o = bin()
        .args(["report", "--format", "json"])
        .arg(&trace)
        .run_ok();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["devices"][0]["kernels"].as_u64(),
        Some(kernels as u64),
        "{r}"
    );
}

/// The H200's last scrapes (tests/fixtures/monitor_h200/metrics.json) equal `cutrace report` of
/// the parts written from the same records there: the GPU's union and each process's busy.
#[test]
fn the_h200_metrics_equal_the_report_of_their_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/monitor_h200");
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("metrics.json")).unwrap()).unwrap();
    let report = |p: &Path| -> serde_json::Value {
        let o = bin().args(["report", "--format", "json"]).arg(p).run_ok();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    for (name, m) in want.as_object().unwrap() {
        let dir = root.join(name);
        let r = report(&dir);
        assert_eq!(r["devices"][0]["busy_ns"], m["gpu_busy_ns"], "{name}");
        assert_eq!(r["devices"][0]["kernels"], m["kernels"], "{name}");
        let mut each: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cutrace"))
            .map(|p| report(&p)["devices"][0]["busy_ns"].as_u64().unwrap())
            .collect();
        each.sort_unstable();
        let got: Vec<u64> = m["process_busy_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(each, got, "{name}");
    }
    // Two processes sharing the GPU: the union is well below their sum.
    let two = &want["two_processes"];
    let sum: u64 = two["process_busy_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(two["gpu_busy_ns"].as_u64().unwrap() < sum);
}

#[test]
fn a_duty_cycle_turns_the_records_off_and_on_and_counts_only_the_on_time() {
    let Some(s) = setup("monitor-duty") else {
        return;
    };
    let (text, _) = script(29, 2);
    let sc = s.write("script", &text);
    let log = s.dir.join("cupti.log");
    let port = free_port();
    let wait = s.dir.join("go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(
        &[
            "monitor",
            "-q",
            "--duty",
            "100ms/400ms",
            "--listen",
            &listen,
        ],
        &wait,
    );
    c.args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_CUPTI_LOG", &log);
    let m = Running::start(c, &wait);
    let start = Instant::now();
    poll(port, &|t| kernels_seen(t) > 0);
    std::thread::sleep(Duration::from_millis(1_800));
    let t = metrics(port).unwrap();
    let wall = start.elapsed().as_secs_f64();
    let o = m.finish();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The kernel kind (10) went off and on again, alternating, several times.
    let calls: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| *l == "enable 10" || *l == "disable 10")
        .map(String::from)
        .collect();
    let offs = calls.iter().filter(|l| l.starts_with("disable")).count();
    assert!(offs >= 3, "{calls:?}");
    assert!(calls.windows(2).all(|w| w[0] != w[1]), "{calls:?}");
    // Traced a quarter of the time, about.
    let traced: f64 = values(&t, "cutrace_process_traced_seconds_total", &[])[0]
        .parse()
        .unwrap();
    assert!(
        traced < 0.5 * wall && traced > 0.1 * wall,
        "traced {traced} s of {wall} s"
    );
}

pub(crate) fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The Grafana dashboard's PromQL expressions, `$__rate_interval` as `1m`.
pub(crate) fn dashboard_exprs() -> Vec<String> {
    let d: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("deploy/grafana/cutrace-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let e = t["expr"].as_str().unwrap();
            out.push(
                e.replace("$__rate_interval", "1m")
                    .replace("$instance", ".*"),
            );
        }
    }
    out
}

/// Every metric the dashboard plots is one cutrace exports (histograms by their series).
#[test]
fn the_dashboard_plots_only_metrics_cutrace_exports() {
    let mut s = cutrace_monitor::State::default();
    let mut c = None;
    s.apply(
        1,
        &mut c,
        cutrace_monitor::wire::Message::Hello(cutrace_monitor::wire::Hello {
            pid: 1,
            ..Default::default()
        }),
    )
    .unwrap();
    let text = cutrace_monitor::prom::render(&s, "h");
    let mut known = std::collections::BTreeSet::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = l.split_once(' ').unwrap();
        known.insert(name.to_string());
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                known.insert(format!("{name}{suffix}"));
            }
        }
    }
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 6);
    for e in &exprs {
        let names: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("cutrace_"))
            .collect();
        assert!(!names.is_empty(), "{e}");
        for n in names {
            assert!(
                known.contains(n),
                "the dashboard plots {n}, which cutrace does not export: {e}"
            );
        }
    }
}

/// The DaemonSet's agent arguments start a real agent (the paths, address and group swapped
/// for a test's own), so the example cannot drift from the command line.
#[test]
fn the_daemonset_example_starts_an_agent() {
    let Some(s) = setup("agent-daemonset") else {
        return;
    };
    let yaml = std::fs::read_to_string(repo_file("deploy/kubernetes/cutrace-agent.yaml")).unwrap();
    let args: Vec<String> = yaml
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim_start()[2..].trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("agent"), "{yaml}");
    let port = free_port();
    let sock_dir = s.dir.join("run/cutrace/agent");
    std::fs::create_dir_all(sock_dir.parent().unwrap()).unwrap();
    let gid = nix::unistd::getgid().as_raw().to_string();
    let mut c = bin();
    for a in &args {
        c.arg(match a.as_str() {
            "0.0.0.0:9464" => format!("127.0.0.1:{port}"),
            "/run/cutrace/agent" => sock_dir.display().to_string(),
            "2000" => gid.clone(),
            other => other.to_string(),
        });
    }
    let agent = Running::start(c, &s.dir.join("unused"));
    let t = poll(port, &|_| sock_dir.join("monitor.sock").exists());
    assert!(t.contains("cutrace_monitor_connections_total 0"), "{t}");
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let m = std::fs::metadata(&sock_dir).unwrap();
    assert_eq!(
        (m.permissions().mode() & 0o777, m.gid().to_string()),
        (0o750, gid)
    );
    drop(agent);
}

#[test]
fn capture_has_a_running_process_write_a_part_that_report_reads() {
    let Some(s) = setup("agent-capture") else {
        return;
    };
    // 200 flushes of 30 kernels, one each flush period (20 ms): about 4 s of records.
    let (text, total) = script(101, 200);
    let sc = s.write("script", &text);
    // Each scripted kernel as (stream, start, end, correlation id, name).
    let scripted: std::collections::BTreeSet<(u64, u64, u64, u64, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("kernel "))
        .map(|l| {
            let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            let name = if f[5] == 1 {
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
            } else {
                "_Z4fakePf"
            };
            (f[1], f[2], f[3], f[4], name.to_string())
        })
        .collect();
    // A part's kernels, each exactly as scripted and none twice; how many.
    let exact = |part: &Path, csv: &Path| -> usize {
        bin()
            .args(["convert"])
            .arg(part)
            .arg("--csv")
            .arg(csv)
            .run_ok();
        let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
        let mut rows = kernels.lines();
        let head: Vec<&str> = rows.next().unwrap().split(',').collect();
        let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
        let (st, a, b, c, nm) = (
            col("stream"),
            col("start_ns"),
            col("end_ns"),
            col("correlation_id"),
            col("name"),
        );
        let mut seen = std::collections::BTreeSet::new();
        for row in rows {
            let f: Vec<&str> = row.split(',').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let k = (n(st), n(a), n(b), n(c), f[nm].to_string());
            assert!(scripted.contains(&k), "{k:?} is no scripted kernel");
            assert!(seen.insert(k.clone()), "{k:?} twice");
        }
        seen.len()
    };
    let sock_dir = s.dir.join("agent");
    let (agent, port) = start_agent(&s, &sock_dir, &[]);
    let env = agent_env(&s, &sock_dir);
    let wait = s.dir.join("go");
    let prog = Command::new(&s.host)
        .args(["-", "local", "iw"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_HOST_WAIT", &wait)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    poll(port, &|t| kernels_seen(t) > 0);
    let cap = s.dir.join("cap");
    let o = bin()
        .args(["capture", "--pid"])
        .arg(prog.id().to_string())
        .args(["--seconds", "1", "-o"])
        .arg(&cap)
        .arg("--socket-dir")
        .arg(&sock_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("1 part(s)"), "{err}");
    // The part holds some of the scripted kernels, each exactly as scripted, not all of them.
    let r: serde_json::Value = serde_json::from_slice(
        &bin()
            .args(["report", "--format", "json"])
            .arg(&cap)
            .run_ok()
            .stdout,
    )
    .unwrap();
    let k = r["devices"][0]["kernels"].as_u64().unwrap();
    assert!(k > 0 && k < total as u64, "{k} of {total}: {r}");
    assert_eq!(exact(&cap, &s.dir.join("csv")) as u64, k);
    // The flight recorder: what it kept from before, at once; every record folded before the
    // request is there (fewer than it keeps), each as scripted.
    let seen = kernels_seen(&metrics(port).unwrap());
    let last = s.dir.join("last");
    let o = bin()
        .args(["capture", "--last", "--pid"])
        .arg(prog.id().to_string())
        .arg("-o")
        .arg(&last)
        .arg("--socket-dir")
        .arg(&sock_dir)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(
        &bin()
            .args(["report", "--format", "json"])
            .arg(&last)
            .run_ok()
            .stdout,
    )
    .unwrap();
    let k = r["devices"][0]["kernels"].as_u64().unwrap();
    assert!(
        k >= seen && k <= total as u64,
        "{k}: {seen} seen before, {total} in all"
    );
    assert_eq!(exact(&last, &s.dir.join("csv-last")) as u64, k);
    // Another user's pid, or one that does not report: refused with the reason, exit 1.
    let o = bin()
        .args(["capture", "--pid", "1", "--seconds", "1", "-o"])
        .arg(s.dir.join("cap2"))
        .arg("--socket-dir")
        .arg(&sock_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing captured"), "{err}");
    std::fs::write(&wait, "").unwrap();
    let o = prog.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    drop(agent);
}

#[test]
fn the_flight_recorder_keeps_a_kernels_name_as_it_was_when_the_record_came() {
    let Some(s) = setup("capture-last-names") else {
        return;
    };
    // A kernel named _Z6beforev; then the memory its name pointer points to is reused
    // (`rename`: as when its module is unloaded and another loaded) by a kernel _Z5afterv at the
    // same pointer, before the flight recorder is written.
    let sc = s.write(
        "script",
        &format!(
            "device 0 {UUID_HEX}\napi 1 100 200\nkernel 0 7 300 900 1 2\nflush\n\
             rename\napi 2 1000 1100\nkernel 0 7 1200 1300 2 2\nflush\n"
        ),
    );
    let sock_dir = s.dir.join("agent");
    let (agent, port) = start_agent(&s, &sock_dir, &[]);
    let env = agent_env(&s, &sock_dir);
    let wait = s.dir.join("go");
    let prog = Command::new(&s.host)
        .args(["-", "local", "iw"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_HOST_WAIT", &wait)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    poll(port, &|t| kernels_seen(t) == 2);
    let last = s.dir.join("last");
    bin()
        .args(["capture", "--last", "--pid"])
        .arg(prog.id().to_string())
        .arg("-o")
        .arg(&last)
        .arg("--socket-dir")
        .arg(&sock_dir)
        .run_ok();
    let csv = s.dir.join("csv");
    bin()
        .arg("convert")
        .arg(&last)
        .arg("--csv")
        .arg(&csv)
        .run_ok();
    let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
    assert!(kernels.contains(",300,900,_Z6beforev,"), "{kernels}");
    assert!(kernels.contains(",1200,1300,_Z5afterv,"), "{kernels}");
    std::fs::write(&wait, "").unwrap();
    assert_eq!(prog.wait_with_output().unwrap().status.code(), Some(3));
    drop(agent);
}

/// `cutrace agent env`'s lines as (name, value), the values unquoted.
pub(crate) fn agent_env(s: &Setup, socket_dir: &Path) -> Vec<(String, String)> {
    let o = bin()
        .args(["agent", "env", "--socket-dir"])
        .arg(socket_dir)
        .env(var::INJECT_LIB, &s.inject)
        .env(var::FLUSH_PERIOD_MS, "20")
        .run_ok();
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.strip_prefix("export ").unwrap().split_once('=').unwrap();
            (k.to_string(), v.trim_matches('\'').to_string())
        })
        .collect()
}

#[test]
fn agent_env_refuses_a_socket_directory_others_could_have_made() {
    let Some(s) = setup("agent-env-dir") else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let open = s.dir.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = s.dir.join("link");
    std::os::unix::fs::symlink(&s.dir, &link).unwrap();
    for dir in [&open, &link] {
        let o = bin()
            .args(["agent", "env", "--socket-dir"])
            .arg(dir)
            .env(var::INJECT_LIB, &s.inject)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(o.stdout.is_empty(), "nothing to eval on refusal");
        assert!(
            err.contains("not safe to report to") && err.contains("Fix:"),
            "{err}"
        );
    }
    // Not made yet: the lines come, with a note to start the agent first.
    let o = bin()
        .args(["agent", "env", "--socket-dir"])
        .arg(s.dir.join("later"))
        .env(var::INJECT_LIB, &s.inject)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("does not exist yet"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(var::MONITOR_SOCKET));
}

#[test]
fn an_agent_merges_three_processes_started_with_its_environment() {
    let Some(s) = setup("agent-three") else {
        return;
    };
    let scripts: Vec<(PathBuf, usize)> = [61, 67, 71]
        .iter()
        .map(|&seed| {
            let (text, n) = script(seed, 3);
            (s.write(&format!("script-{seed}"), &text), n)
        })
        .collect();
    let total: usize = scripts.iter().map(|(_, n)| n).sum();
    // The same three recorded.
    let both: Vec<String> = scripts
        .iter()
        .map(|(p, _)| format!("FAKE_CUPTI_SCRIPT={} host - local i &", p.display()))
        .collect();
    let done = s.write("go", "");
    let trace = s.dir.join("trace");
    let mut rec = s.cutrace(
        &[
            "record",
            "-q",
            "--kinds",
            "kernel,runtime,driver,memcpy",
            "-o",
        ],
        &done,
    );
    rec.arg(&trace)
        .args(["--", "/bin/sh", "-c", &format!("{} wait", both.join(" "))])
        .run_ok();
    let union = s.report_busy(&trace);
    let mut each: Vec<u64> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| s.report_busy(&e.unwrap().path()))
        .collect();
    each.sort_unstable();
    assert!(union < each.iter().sum::<u64>());
    // The agent, and three programs started with `cutrace agent env`'s environment.
    let sock_dir = s.dir.join("agent");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = bin();
    c.args(["agent", "-q", "--listen", &listen, "--socket-dir"])
        .arg(&sock_dir);
    let mut agent = Running::start(c, &s.dir.join("unused"));
    poll(port, &|_| sock_dir.join("monitor.sock").exists());
    let env = agent_env(&s, &sock_dir);
    assert!(env.iter().any(|(k, _)| k == var::MONITOR_SOCKET), "{env:?}");
    let programs: Vec<Child> = scripts
        .iter()
        .map(|(p, _)| {
            Command::new(&s.host)
                .args(["-", "local", "i"])
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env(var::CUPTI_LIB, &s.fake_cupti)
                .env("FAKE_CUPTI_SCRIPT", p)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut p in programs {
        assert_eq!(p.wait().unwrap().code(), Some(3));
    }
    let t = poll(port, &|t| kernels_seen(t) == total as u64);
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        gpu.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [union],
        "{t}"
    );
    let mut got: Vec<u64> = values(&t, "cutrace_process_gpu_busy_seconds_total", &[UUID])
        .iter()
        .map(|v| ns(v))
        .collect();
    got.sort_unstable();
    assert_eq!(got, each, "{t}");
    // A second agent on the same socket is refused; SIGTERM stops the first, socket and all.
    let o = bin()
        .args(["agent", "--listen", "127.0.0.1:0", "--socket-dir"])
        .arg(&sock_dir)
        .run_code(2);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another cutrace agent already serves"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let child = agent.child.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .run_ok();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!sock_dir.exists());
}

/// `cutrace agent -q --listen 127.0.0.1:PORT --socket-dir DIR ARGS…`, started; with its port.
fn start_agent(s: &Setup, sock_dir: &Path, args: &[&str]) -> (Running, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut c = bin();
    c.args(["agent", "-q", "--listen", &listen])
        .env("XDG_STATE_HOME", s.dir.path(""))
        .args(args)
        .arg("--socket-dir")
        .arg(sock_dir);
    let agent = Running::start(c, &s.dir.join("unused"));
    poll(port, &|_| sock_dir.join("monitor.sock").exists());
    (agent, port)
}

#[test]
fn a_thousand_short_lived_processes_leave_no_labels_after_the_ageing_time() {
    let Some(s) = setup("agent-thousand") else {
        return;
    };
    let (text, per) = script(89, 1);
    let sc = s.write("script", &text);
    let sock_dir = s.dir.join("agent");
    let (agent, port) = start_agent(&s, &sock_dir, &["--forget-after", "1"]);
    let env = agent_env(&s, &sock_dir);
    let start = Instant::now();
    // 1,000 CUDA processes, eight at a time, each replaying the same records and exiting.
    let st = Command::new("/bin/sh")
        .args([
            "-c",
            "seq 1000 | xargs -P 8 -I{} \"$0\" - local i >/dev/null",
        ])
        .arg(&s.host)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .status()
        .unwrap();
    // xargs says 123: every host exits with status 3.
    assert_eq!(st.code(), Some(123));
    let t = poll(port, &|t| {
        values(t, "cutrace_monitor_forgotten_processes_total", &[]) == ["1000"]
    });
    eprintln!("1,000 processes through the agent in {:?}", start.elapsed());
    // No process's label is left; the GPU kept every one's time: the same records each, so
    // one script's union.
    for family in [
        "cutrace_process_up",
        "cutrace_process_gpu_busy_seconds_total",
        "cutrace_process_kernels_total",
    ] {
        assert!(values(&t, family, &[]).is_empty(), "{family}: {t}");
    }
    assert_eq!(values(&t, "cutrace_monitor_processes", &[]), ["0"]);
    assert_eq!(
        values(&t, "cutrace_monitor_connections_total", &[]),
        ["1000"]
    );
    let rejected: Vec<String> = values(&t, "cutrace_monitor_rejected_frames_total", &[]);
    assert!(rejected.is_empty(), "{t}");
    let trace = s.record_script(&sc, "i");
    let gpu = values(&t, "cutrace_gpu_busy_seconds_total", &[UUID]);
    assert_eq!(
        gpu.iter().map(|v| ns(v)).collect::<Vec<_>>(),
        [s.report_busy(&trace)]
    );
    assert!(per > 0);
    let pid = agent.child.as_ref().unwrap().id();
    let kb = peak_kb(pid);
    assert!(kb < 64 * 1024, "the agent peaked at {kb} kB");
}

/// A container's process (here: its own user and pid namespaces, as `unshare` makes them)
/// says hello with its pid in there; the agent knows it by its pid here, from the kernel.
#[test]
fn a_process_in_its_own_pid_namespace_reports_under_its_pid_here() {
    let Some(s) = setup("agent-pidns") else {
        return;
    };
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "--pid", "--fork", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        loud!("SKIPPED: unshare cannot make a user and pid namespace here");
        return;
    }
    let (text, kernels) = script(41, 2);
    let sc = s.write("script", &text);
    let sock_dir = s.dir.join("agent");
    let (agent, port) = start_agent(&s, &sock_dir, &[]);
    let env = agent_env(&s, &sock_dir);
    let o = Command::new("unshare")
        .args(["--user", "--map-root-user", "--pid", "--fork"])
        .arg(&s.host)
        .args(["-", "local", "i"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = poll(port, &|t| kernels_seen(t) == kernels as u64);
    assert!(
        values(&t, "cutrace_monitor_rejected_frames_total", &[]).is_empty(),
        "{t}"
    );
    // Its pid in its namespace is 1; here it is another.
    let pids: Vec<String> = t
        .lines()
        .filter(|l| l.starts_with("cutrace_process_up{"))
        .filter_map(|l| {
            l.split("pid=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(String::from)
        })
        .collect();
    assert_eq!(pids.len(), 1, "{t}");
    assert_ne!(pids[0], "1", "{t}");
    drop(agent);
}

#[test]
fn processes_outlive_a_killed_agent_and_report_to_the_next_one() {
    let Some(s) = setup("agent-restart") else {
        return;
    };
    // 150 flushes of 30 kernels, one a flush period (20 ms): about 3 s of records.
    let (text, total) = script(97, 150);
    let sc = s.write("script", &text);
    let sock_dir = s.dir.join("agent");
    let (mut first, port) = start_agent(&s, &sock_dir, &[]);
    let env = agent_env(&s, &sock_dir);
    let wait = s.dir.join("go");
    let prog = Command::new(&s.host)
        .args(["-", "local", "iw"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_HOST_WAIT", &wait)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = poll(port, &|t| kernels_seen(t) > 0);
    let before = kernels_seen(&t);
    assert!(
        before < total as u64,
        "the records came too fast to kill the agent between"
    );
    // SIGKILL: the socket is left behind, dead.
    let mut c = first.child.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(sock_dir.join("monitor.sock").exists());
    std::thread::sleep(Duration::from_millis(300));
    let (second, port2) = start_agent(&s, &sock_dir, &[]);
    // The program reconnects (once a second) and reports the rest to the new agent.
    poll(port2, &|t| {
        values(t, "cutrace_process_up", &[]) == ["1"] && kernels_seen(t) > 0
    });
    std::fs::write(&wait, "").unwrap();
    let o = prog.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = poll(port2, &|t| values(t, "cutrace_process_up", &[]) == ["0"]);
    let after = kernels_seen(&t);
    let dropped: u64 = values(
        &t,
        "cutrace_process_dropped_records_total",
        &["source=\"cutrace\""],
    )
    .iter()
    .map(|v| v.parse::<u64>().unwrap())
    .sum();
    // None counted twice: what the first agent showed, what the second got and what the
    // program could not send are at most what it ran (the rest went down with the first).
    assert!(after > 0, "{t}");
    assert!(
        before + after + dropped <= total as u64,
        "{before} + {after} + {dropped} > {total}"
    );
    drop(second);
}

#[test]
fn a_program_counts_what_it_could_not_send_while_no_agent_ran() {
    let Some(s) = setup("agent-down-drops") else {
        return;
    };
    // 30 kernels while the first agent runs; then, once it is gone (cue `down`), 8 buffers of
    // 35,000 kernels that do not touch: 280,000 intervals, past the 262,144 a program holds for
    // an agent; then, once the next agent runs (cue `up`), 30 more.
    let down = s.dir.join("down");
    let up = s.dir.join("up");
    let (mut text, _) = script(7, 1);
    for g in 0..8u64 {
        text += &format!("wait {}\n", down.display());
        for i in 0..35_000u64 {
            let start = 100_000_000 + (g * 35_000 + i) * 1_000;
            text += &format!("kernel 0 7 {start} {} 0 0\n", start + 500);
        }
        text += "flush\n";
    }
    let (tail, _) = script(11, 1);
    text += &format!("wait {}\n", up.display());
    text += tail.lines().skip(1).collect::<Vec<_>>().join("\n").as_str();
    text += "\n";
    let sc = s.write("script", &text);
    let sock_dir = s.dir.join("agent");
    let (mut first, port) = start_agent(&s, &sock_dir, &[]);
    let env = agent_env(&s, &sock_dir);
    let wait = s.dir.join("go");
    let prog = Command::new(&s.host)
        .args(["-", "local", "iw"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(var::CUPTI_LIB, &s.fake_cupti)
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_HOST_WAIT", &wait)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll(port, &|t| kernels_seen(t) == 30);
    let mut c = first.child.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    std::fs::write(&down, "").unwrap();
    // The eight buffers come at one a flush period: give them time to be folded and dropped.
    std::thread::sleep(Duration::from_secs(3));
    let (second, port2) = start_agent(&s, &sock_dir, &[]);
    poll(port2, &|t| values(t, "cutrace_process_up", &[]) == ["1"]);
    std::fs::write(&up, "").unwrap();
    std::fs::write(&wait, "").unwrap();
    assert_eq!(prog.wait_with_output().unwrap().status.code(), Some(3));
    let t = poll(port2, &|t| values(t, "cutrace_process_up", &[]) == ["0"]);
    let dropped: u64 = values(
        &t,
        "cutrace_process_dropped_records_total",
        &["source=\"cutrace\""],
    )
    .iter()
    .map(|v| v.parse::<u64>().unwrap())
    .sum();
    let after = kernels_seen(&t);
    // What it could not hold is counted, and with what the next agent got, it is every record
    // the program had after the first agent went: none lost unsaid, none counted twice.
    assert!(dropped >= 280_000 - 262_144, "{dropped} dropped: {t}");
    assert_eq!(
        after + dropped,
        280_000 + 30,
        "{after} seen + {dropped} dropped: {t}"
    );
    drop(second);
}

#[test]
fn a_kernel_that_never_completes_shows_as_a_pending_launch_and_its_age() {
    let Some(s) = setup("monitor-stuck") else {
        return;
    };
    // Launch 2's kernel never comes; CUPTI's clock then reads 61 s after that launch returned.
    let sc = s.write(
        "script",
        &format!(
            "device 0 {UUID_HEX}\napi 1 100 200\nkernel 0 7 300 900 1 0\napi 2 1000 1100\n\
             api 3 1200 1300\nkernel 0 7 1400 1500 3 1\nflush\nnow 61000001100\nflush\n"
        ),
    );
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let dump = s.dir.join("dump");
    let mut c = s.cutrace(
        &["monitor", "-q", "--listen", &listen, "--dump-stuck"],
        &wait,
    );
    c.arg(&dump)
        .args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc);
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| {
        values(t, "cutrace_process_oldest_pending_launch_seconds", &[]) == ["61.000000000"]
    });
    assert_eq!(
        values(&t, "cutrace_process_launches_pending", &[]),
        ["1"],
        "{t}"
    );
    assert_eq!(kernels_seen(&t), 2, "{t}");
    // Past the default 60 s: logged once, and the flight recorder written to the dump.
    let start = Instant::now();
    while std::fs::read_dir(&dump).map_or(0, |d| d.count()) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "no dump");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let o = m.finish();
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("stuck kernel: host").count(), 1, "{err}");
    assert!(err.contains("has had a kernel launched 61 s ago"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(
        &bin()
            .args(["report", "--format", "json"])
            .arg(&dump)
            .run_ok()
            .stdout,
    )
    .unwrap();
    assert_eq!(r["devices"][0]["kernels"], 2, "{r}");
}

#[test]
fn a_hung_kernel_that_cupti_holds_back_is_forced_out_named_and_cleared_by_its_stream() {
    let Some(s) = setup("monitor-held") else {
        return;
    };
    let log = s.dir.join("cupti.log");
    let go_on = s.dir.join("go-on");
    // As on the H200: while kernel 2 runs, CUPTI hands over nothing of its buffer (its launch,
    // the kernel before it) on an unforced flush, and on a forced one hands it over with the
    // running kernel's record unfinished (start = end = 0). Kernel 3, later on stream 7, says
    // it ended.
    let sc = s.write(
        "script",
        &format!(
            "device 0 {UUID_HEX}\napi 1 100 200\nkernel 0 7 300 900 1 0\nflush\n\
             api 2 1000 1100\nkernel 0 7 0 0 2 1\nnow 61000001100\nhold\nflush\n\
             wait {}\napi 3 70000000000 70000000100\nkernel 0 7 70000000200 70000000300 3 0\n\
             flush\n",
            go_on.display()
        ),
    );
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(
        &["monitor", "-q", "--listen", &listen, "--stuck-after", "2"],
        &wait,
    );
    c.args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_CUPTI_LOG", &log);
    let m = Running::start(c, &wait);
    let nccl = ["kernel=\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\""];
    let t = poll(port, &|t| {
        values(t, "cutrace_process_pending_kernel_info", &nccl) == ["1"]
    });
    assert_eq!(
        values(&t, "cutrace_process_launches_pending", &[]),
        ["1"],
        "{t}"
    );
    assert_eq!(
        values(&t, "cutrace_process_oldest_pending_launch_seconds", &[]),
        ["61.000000000"],
        "{t}"
    );
    // The unfinished record is no kernel of the busy figures.
    assert_eq!(kernels_seen(&t), 1, "{t}");
    let flushes = std::fs::read_to_string(&log).unwrap();
    assert!(
        flushes.lines().any(|l| l == "flush 1"),
        "no forced flush: {flushes}"
    );
    // With no --dump-stuck, the flight recorder goes to the user's state directory (the
    // watcher asks within half a second).
    let dump = s.dir.join("cutrace/stuck");
    let start = Instant::now();
    while std::fs::read_dir(&dump).map_or(0, |d| d.count()) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no dump in {}",
            dump.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&go_on, "").unwrap();
    let t = poll(port, &|t| {
        values(t, "cutrace_process_unfinished_kernels_total", &[]) == ["1"]
    });
    assert_eq!(
        values(&t, "cutrace_process_launches_pending", &[]),
        ["0"],
        "{t}"
    );
    assert!(
        values(&t, "cutrace_process_pending_kernel_info", &nccl).is_empty(),
        "{t}"
    );
    assert_eq!(kernels_seen(&t), 2, "{t}");
    let o = m.finish();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("stuck kernel: host").count(), 1, "{err}");
    assert!(
        err.contains(
            "has had a kernel (ncclDevKernel_AllReduce_Sum_f32_RING_LL) launched 61 s ago"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!("its last records go to {}", dump.display())),
        "{err}"
    );
    let parts = std::fs::read_dir(&dump).unwrap().count();
    assert_eq!(parts, 1, "{err}");
}

/// `cutrace monitor --stuck-after 2` of a program whose last batch holds a launch pending for
/// 61 s (its kernel unfinished), the program ending right after: the monitor's stderr.
fn stuck_in_the_last_batch(s: &Setup) -> String {
    let sc = s.write(
        "script",
        &format!(
            "device 0 {UUID_HEX}\napi 1 100 200\nkernel 0 7 300 900 1 0\nflush\n\
             api 2 1000 1100\nkernel 0 7 0 0 2 1\nnow 61000001100\nflush\n"
        ),
    );
    let go = s.write("go", "");
    let o = s
        .cutrace(
            &[
                "monitor",
                "-q",
                "--listen",
                "127.0.0.1:0",
                "--stuck-after",
                "2",
            ],
            &go,
        )
        .args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .run_code(3);
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_kernel_found_stuck_in_the_last_batch_before_exit_is_still_logged() {
    let Some(s) = setup("monitor-stuck-at-exit") else {
        return;
    };
    // The monitor exits before its stuck watcher's next turn.
    let err = stuck_in_the_last_batch(&s);
    assert_eq!(err.matches("stuck kernel: host").count(), 1, "{err}");
    assert!(
        err.contains(
            "has had a kernel (ncclDevKernel_AllReduce_Sum_f32_RING_LL) launched 61 s ago"
        ),
        "{err}"
    );
}

#[test]
fn the_default_dump_directory_must_be_the_users_own_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let Some(s) = setup("monitor-dump-private") else {
        return;
    };
    // $XDG_STATE_HOME/cutrace made writable by everyone (or swapped for a link) by someone.
    let shared = s.dir.join("cutrace");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = stuck_in_the_last_batch(&s);
    assert!(err.contains("stuck kernel: host"), "{err}");
    assert!(
        err.contains("its last records cannot go to")
            && err.contains("is not a directory of your own that only you can write"),
        "{err}"
    );
    assert!(!shared.join("stuck").exists());
}

#[test]
fn a_process_that_runs_untraced_says_why_in_the_metrics() {
    let Some(s) = setup("monitor-untraced") else {
        return;
    };
    let port = free_port();
    let wait = s.dir.join("monitor-go");
    let listen = format!("127.0.0.1:{port}");
    let mut c = s.cutrace(&["monitor", "-q", "--listen", &listen], &wait);
    // The fake libcupti's mode 1: another CUPTI subscriber holds the slot.
    c.args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_MODE", "1");
    let m = Running::start(c, &wait);
    let t = poll(port, &|t| t.contains("cutrace_process_untraced_info{"));
    let line = t
        .lines()
        .find(|l| l.starts_with("cutrace_process_untraced_info{"))
        .unwrap();
    assert!(
        line.contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{line}"
    );
    let why = values(
        &t,
        "cutrace_monitor_untraced_info",
        &["MULTIPLE_SUBSCRIBERS"],
    );
    assert_eq!(why, ["1"], "{t}");
    let o = m.finish();
    assert_eq!(o.status.code(), Some(3));
    // The program's own line on stderr, as under record.
    assert!(String::from_utf8_lossy(&o.stderr).contains("runs untraced"));
}
