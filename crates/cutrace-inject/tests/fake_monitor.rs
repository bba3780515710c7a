//! Monitor mode against the fake libcupti: scripted kernel, launch and copy records delivered
//! over several flushes reach a monitor's socket as summaries whose busy is the exact union of
//! the scripted intervals, per process and per GPU (two processes on one GPU: a union, not a
//! sum), and a monitor that is gone costs the program nothing. No GPU needed; skips itself,
//! loudly, where no C compiler is found.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use cutrace_monitor::socket;
use cutrace_monitor::State;
use cutrace_settings::var;

mod util;

const UUID_HEX: &str = "00112233445566778899aabbccddeeff";
const UUID: &str = "GPU-00112233-4455-6677-8899-aabbccddeeff";

#[test]
fn child() {
    if std::env::var("CUTRACE_MONITOR_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    // Long enough for the writer's periodic flushes to deliver the script group by group.
    let ms = std::env::var("CHILD_SLEEP_MS").map_or(300, |v| v.parse().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(ms));
    println!("HOST OUTPUT");
}

/// A script of `groups` flushes of kernels on two streams of device 0 (overlapping, touching,
/// some communication kernels), their launch calls and a copy each; and the kernel intervals.
fn script(seed: u64, groups: u32) -> (String, Vec<(u64, u64)>) {
    let mut x = seed | 1;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut s = format!("device 0 {UUID_HEX}\n");
    let mut iv = Vec::new();
    let mut corr = 1;
    for g in 0..groups {
        let base = 1_000_000 + u64::from(g) * 100_000;
        for _ in 0..40 {
            let start = base + next(90_000);
            // Some touch the previous kernel, some are zero-length.
            let len = [0, 500, 1_000, 7_000][next(4) as usize];
            let stream = 7 + 6 * next(2);
            let comm = u64::from(next(5) == 0);
            s += &format!("api {corr} {} {}\n", start - 900, start - 300);
            s += &format!("kernel 0 {stream} {start} {} {corr} {comm}\n", start + len);
            iv.push((start, start + len));
            corr += 1;
        }
        s += &format!("memcpy 0 7 {base} {} 4096 {corr}\n", base + 100);
        corr += 1;
        s += "flush\n";
    }
    (s, iv)
}

/// `groups` flushes of `per` kernels of 50 ns on one stream, 100 ns apart (none merge), each
/// with its launch call.
fn spaced_kernels(groups: u64, per: u64) -> String {
    let mut text = format!("device 0 {UUID_HEX}\n");
    let mut corr = 1;
    for g in 0..groups {
        for i in 0..per {
            let start = 1_000_000 + (g * per + i) * 100;
            text += &format!("api {corr} {} {}\n", start - 90, start - 10);
            text += &format!("kernel 0 7 {start} {} {corr} 0\n", start + 50);
            corr += 1;
        }
        text += "flush\n";
    }
    text
}

fn union(iv: &[(u64, u64)]) -> u64 {
    let mut v = iv.to_vec();
    v.sort_unstable();
    let (mut total, mut end) = (0u64, 0u64);
    for (s, e) in v {
        if e <= s {
            continue;
        }
        let s = s.max(end);
        if e > s {
            total += e - s;
            end = e;
        }
    }
    total
}

fn run_child(lib: &Path, script: &Path, sock: &Path) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_MONITOR_CHILD", "1")
        .env("FAKE_CUPTI_SCRIPT", script)
        .env(var::CUPTI_LIB, lib)
        .env(var::MONITOR_SOCKET, sock)
        .env(var::FLUSH_PERIOD_MS, "20")
        .env(var::KINDS, "kernel,runtime,memcpy")
        .env_remove(var::OUTPUT_DIR)
        .output()
        .unwrap()
}

/// Serves a private socket into a state; the socket, its directory and the state.
fn monitor(dir: &Path) -> (Arc<socket::PrivateSocket>, Arc<Mutex<State>>) {
    let sock = Arc::new(socket::create(dir).unwrap());
    let state = Arc::new(Mutex::new(State::default()));
    let (s2, st2) = (sock.clone(), state.clone());
    std::thread::spawn(move || socket::serve(&s2.listener, st2));
    (sock, state)
}

/// Waits until every one of `pids` has ended its connection.
fn wait_ended(state: &Mutex<State>, n: usize) {
    for _ in 0..500 {
        let s = state.lock().unwrap();
        if s.processes.len() == n && s.processes.values().all(|p| p.ended) {
            return;
        }
        drop(s);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!(
        "the processes did not all report: {:?}",
        state.lock().unwrap()
    );
}

#[test]
fn scripted_records_reach_the_monitor_as_exact_busy() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-one");
    let (sock, state) = monitor(&dir);
    let (text, iv) = script(7, 5);
    let path = dir.join("script");
    std::fs::write(&path, text).unwrap();
    let o = run_child(&p.fake_cupti, &path, &sock.path);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    assert!(
        util::cutrace_lines(&o.stderr).is_empty(),
        "{:?}",
        util::cutrace_lines(&o.stderr)
    );
    wait_ended(&state, 1);
    let s = state.lock().unwrap();
    let proc = s.processes.values().next().unwrap();
    let g = &proc.gpus[UUID];
    assert_eq!(g.busy.total_ns(), union(&iv));
    assert_eq!(s.gpus[UUID].busy.total_ns(), union(&iv));
    assert_eq!(g.kernels, iv.len() as u64);
    assert_eq!((g.copies, g.copy_bytes), (5, 5 * 4096));
    // Every kernel's launch call ended 300 ns + its start - 300: all joined.
    assert_eq!(g.latency.count(), iv.len() as u64);
    assert_eq!(g.latency.sum_ns, 300 * iv.len() as u64);
    // Delivered over several flushes, so several batches; none lost.
    assert!(proc.last_seq >= 2, "{}", proc.last_seq);
    assert_eq!((proc.batches_lost, proc.dropped_by_cutrace), (0, 0));
    assert!(proc.traced_ns > 0);
}

#[test]
fn two_processes_on_one_gpu_give_a_union_not_a_sum() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-two");
    let (sock, state) = monitor(&dir);
    let (ta, a) = script(11, 4);
    let (tb, b) = script(23, 4);
    let (pa, pb) = (dir.join("a"), dir.join("b"));
    std::fs::write(&pa, ta).unwrap();
    std::fs::write(&pb, tb).unwrap();
    let (lib, sp) = (p.fake_cupti.clone(), sock.path.clone());
    let other = std::thread::spawn(move || run_child(&lib, &pb, &sp));
    let oa = run_child(&p.fake_cupti, &pa, &sock.path);
    let ob = other.join().unwrap();
    assert!(oa.status.success() && ob.status.success());
    wait_ended(&state, 2);
    let s = state.lock().unwrap();
    let mut each: Vec<u64> = s
        .processes
        .values()
        .map(|p| p.gpus[UUID].busy.total_ns())
        .collect();
    each.sort_unstable();
    let mut want = vec![union(&a), union(&b)];
    want.sort_unstable();
    assert_eq!(each, want);
    let both: Vec<(u64, u64)> = a.iter().chain(&b).copied().collect();
    let device = s.gpus[UUID].busy.total_ns();
    assert_eq!(device, union(&both));
    assert!(
        device < union(&a) + union(&b),
        "the scripts overlap in time"
    );
}

#[test]
fn a_monitor_that_is_gone_costs_the_program_nothing() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-gone");
    let (text, _) = script(3, 3);
    let path = dir.join("script");
    std::fs::write(&path, text).unwrap();
    let o = run_child(&p.fake_cupti, &path, &dir.join("no-such.sock"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    assert!(util::cutrace_lines(&o.stderr).is_empty());
    // And it wrote no trace.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A monitor that accepts but never reads: the socket fills, and the program still runs and
/// exits at its own pace (sends never block; the last batch gets a bounded time at exit).
#[test]
fn a_monitor_that_does_not_read_never_blocks_the_program() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-stuck");
    let sock = socket::create(&dir).unwrap();
    // 20,000 kernels that do not merge: 320 KB of runs, more than a socket buffer holds.
    let text = spaced_kernels(10, 2_000);
    let path = dir.join("script");
    std::fs::write(&path, text).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_MONITOR_CHILD", "1")
        .env("FAKE_CUPTI_SCRIPT", &path)
        .env(var::CUPTI_LIB, &p.fake_cupti)
        .env(var::MONITOR_SOCKET, &sock.path)
        .env(var::FLUSH_PERIOD_MS, "20")
        .env(var::KINDS, "kernel,runtime")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Accepted and held, never read.
    let (held, _) = sock.listener.accept().unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the program blocked on a monitor that does not read");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success());
    // 300 ms of the program's own, and at most a second for the last batch.
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // The socket really was full: what reached it holds fewer runs than the program folded.
    let mut got = Vec::new();
    let mut held = held;
    std::io::Read::read_to_end(&mut held, &mut got).unwrap();
    assert!(
        got.len() < 20_000 * 16,
        "{} bytes reached the socket",
        got.len()
    );
}

/// A monitor that starts after the program: the summaries folded meanwhile are held, and sent
/// whole once it is there (the program reconnects once a second).
#[test]
fn a_monitor_that_comes_late_gets_everything_held_for_it() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-late");
    let (text, iv) = script(31, 3);
    let path = dir.join("script");
    std::fs::write(&path, text).unwrap();
    let sock_path = dir.join("late.sock");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_MONITOR_CHILD", "1")
        .env("CHILD_SLEEP_MS", "2500")
        .env("FAKE_CUPTI_SCRIPT", &path)
        .env(var::CUPTI_LIB, &p.fake_cupti)
        .env(var::MONITOR_SOCKET, &sock_path)
        .env(var::FLUSH_PERIOD_MS, "20")
        .env(var::KINDS, "kernel,runtime,memcpy")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Every group is delivered (and folded) before anyone listens.
    std::thread::sleep(std::time::Duration::from_millis(800));
    let listener = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    let state = Arc::new(Mutex::new(State::default()));
    let st = state.clone();
    std::thread::spawn(move || socket::serve(&listener, st));
    assert!(child.wait().unwrap().success());
    wait_ended(&state, 1);
    let s = state.lock().unwrap();
    let proc = s.processes.values().next().unwrap();
    assert_eq!(proc.gpus[UUID].busy.total_ns(), union(&iv));
    assert_eq!(proc.dropped_by_cutrace, 0);
}

/// A monitor slow to read when the program exits: the batch before the last still fills the
/// socket, and the last one (the records of the exit's flush) must follow it, not be lost.
#[test]
fn the_last_batch_follows_one_the_socket_was_still_taking() {
    let Some(p) = util::programs() else { return };
    let dir = cutrace_testkit::Dir::new("monitor-slow-exit");
    let sock = socket::create(&dir).unwrap();
    // 60,000 kernels that do not merge (960 KB of runs), a group of 2,000 a flush: the socket
    // is full long before the program exits, with records folded behind it.
    let text = spaced_kernels(30, 2_000);
    let path = dir.join("script");
    std::fs::write(&path, text).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_MONITOR_CHILD", "1")
        .env("CHILD_SLEEP_MS", "200")
        // Buffers enough for the groups the exit's flush delivers at once.
        .env(var::MAX_BUFFERS, "64")
        .env("FAKE_CUPTI_SCRIPT", &path)
        .env(var::CUPTI_LIB, &p.fake_cupti)
        .env(var::MONITOR_SOCKET, &sock.path)
        .env(var::FLUSH_PERIOD_MS, "20")
        .env(var::KINDS, "kernel,runtime")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (conn, _) = sock.listener.accept().unwrap();
    let pid = child.id();
    // Not read for 500 ms (the program exits meanwhile), then read to the end.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Raw bytes first, decoded after: a reader as quick as the monitor's release build.
    let mut bytes = Vec::new();
    let mut conn = conn;
    std::io::Read::read_to_end(&mut conn, &mut bytes).unwrap();
    let mut state = State::default();
    let mut reader = cutrace_monitor::wire::FrameReader::default();
    let mut hello = None;
    let mut cur = std::io::Cursor::new(bytes);
    while let Some(m) = reader.next(&mut cur).unwrap() {
        state.apply(pid, &mut hello, m).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let proc = &state.processes[&pid];
    let g = &proc.gpus[UUID];
    assert_eq!(
        (g.kernels, proc.dropped_by_cutrace, proc.dropped_by_cupti),
        (60_000, 0, 0)
    );
    assert_eq!(g.busy.total_ns(), 60_000 * 50);
}
