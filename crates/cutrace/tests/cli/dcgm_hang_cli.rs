//! `cutrace dcgm` with a stand-in `dcgmi` that never returns and ignores SIGTERM, SIGINT and
//! SIGHUP: every dcgmi command has a deadline, the stuck one is killed and named, and it never
//! wedges a later `dcgm` command.

use cutrace_settings::var;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Sandbox {
    dir: PathBuf,
    /// Owns `dir`: removes it on drop, after `Drop for Sandbox` ran.
    _tmp: cutrace_testkit::Dir,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let tmp = cutrace_testkit::Dir::new(&format!("dcgm-hang-{name}"));
        let dir = tmp.to_path_buf();
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        std::fs::create_dir_all(dir.join("run")).expect("mkdir");
        std::fs::set_permissions(dir.join("run"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        // Logs its arguments; when they contain $DCGMI_HANG_ON it records its pid, ignores the
        // signals a terminal or `kill` would send, and sleeps (in a child, as a real tool's
        // helper would) for far longer than any test.
        let dcgmi = dir.join("bin/dcgmi");
        std::fs::write(
            &dcgmi,
            "#!/bin/sh\necho \"$*\" >> \"$DCGMI_LOG\"\ncase \"$*\" in *\"$DCGMI_HANG_ON\"*)\n  echo $$ >> \"$DCGMI_PIDS\"\n  trap '' TERM INT HUP\n  sleep 1000\n  sleep 1000\nesac\n",
        )
        .expect("write dcgmi");
        std::fs::set_permissions(&dcgmi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Sandbox { dir, _tmp: tmp }
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("dcgmi.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn hung_pids(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("dcgmi.pids"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Run cutrace with `args`, dcgmi hanging on arguments containing `hang_on`, and a 1 s
    /// dcgmi deadline; fail (after killing it) if cutrace itself takes longer than `limit`.
    /// Returns (exit code, stderr).
    fn run(&self, args: &[&str], hang_on: &str, limit: Duration) -> (Option<i32>, String) {
        let path = format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let err_path = self.dir.join("stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cutrace"))
            .args(args)
            .env("PATH", path)
            .env("DCGMI_LOG", self.dir.join("dcgmi.log"))
            .env("DCGMI_PIDS", self.dir.join("dcgmi.pids"))
            .env("DCGMI_HANG_ON", hang_on)
            .env(var::DCGMI_TIMEOUT, "1")
            .env("TMPDIR", &self.dir)
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path).expect("stderr file"))
            .spawn()
            .expect("spawn cutrace");
        let t = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if t.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                self.kill_hung();
                panic!(
                    "cutrace {} did not finish within {limit:?}; dcgmi log {:?}",
                    args.join(" "),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = std::fs::read_to_string(&err_path).unwrap_or_default();
        eprintln!("cutrace {}: {status}\n{err}", args.join(" "));
        (status.code(), err)
    }

    /// What a failed test may have left running: the hung dcgmi, its children, its group, and
    /// the watchdogs the holder records name.
    fn kill_hung(&self) {
        let mut pids = self.hung_pids();
        let children: Vec<String> = std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                        let ppid = stat
                            .rsplit(')')
                            .next()?
                            .split_whitespace()
                            .nth(1)?
                            .to_string();
                        pids.contains(&ppid)
                            .then(|| e.file_name().to_string_lossy().into_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let watchdogs: Vec<String> = std::fs::read_dir(self.dir.join("run/cutrace-dcgm"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let text = std::fs::read_to_string(e.path()).ok()?;
                        text.lines()
                            .find_map(|l| l.strip_prefix("pid="))
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        for pid in &pids {
            // `--` before the negative pid: without it this system's kill(1) reads `-9 -24` as
            // the group `-2`, a signal to some unrelated process group.
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
        pids.extend(children);
        pids.extend(watchdogs);
        for pid in pids {
            let _ = Command::new("kill")
                .args(["-9", &pid])
                .stderr(Stdio::null())
                .status();
        }
    }

    fn assert_no_hung_dcgmi_left(&self) {
        let t = Instant::now();
        let pids = self.hung_pids();
        assert!(!pids.is_empty(), "dcgmi never hung: {:?}", self.log());
        while pids.iter().any(|p| alive(p)) {
            if t.elapsed() > Duration::from_secs(5) {
                self.kill_hung();
                panic!("a hung dcgmi was left running: {pids:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill_hung();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const LIMIT: Duration = Duration::from_secs(15);

/// Defect: `dcgm pause` with a dcgmi that never returns blocked for ever.
#[test]
fn a_hung_pause_is_killed_at_its_deadline_and_named() {
    let sb = Sandbox::new("pause");
    let (code, err) = sb.run(&["dcgm", "pause"], "--pause", LIMIT);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("profile --pause"), "{err}");
    assert!(err.contains("did not finish within 1 s"), "{err}");
    sb.assert_no_hung_dcgmi_left();
    // Nothing is held: a resume with a working dcgmi goes through at once.
    let (code, err) = sb.run(&["dcgm", "resume"], "(never)", Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
}

/// Defect: the watchdog's `dcgmi profile --resume` ignored SIGTERM, SIGINT and SIGHUP and
/// inherited the hold lock, so `dcgm run` never returned and every later `dcgm` command failed
/// after 30 s until someone `kill -9`ed it.
#[test]
fn a_hung_resume_is_killed_and_never_wedges_later_runs() {
    let sb = Sandbox::new("resume");
    let (code, err) = sb.run(&["dcgm", "run", "--", "true"], "--resume", LIMIT);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("profile --resume"), "{err}");
    assert!(err.contains("did not finish within 1 s"), "{err}");
    sb.assert_no_hung_dcgmi_left();
    // The hold lock went with the killed dcgmi: a new run pauses and resumes at once.
    let t = Instant::now();
    let (code, err) = sb.run(
        &["dcgm", "run", "--", "true"],
        "(never)",
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    let log = sb.log();
    assert_eq!(
        log[log.len() - 2..],
        ["profile --pause", "profile --resume"],
        "{log:?}"
    );
}

/// `dcgm pause --for` whose resume hangs at the deadline: the detached watchdog kills it, and
/// the next pause is not kept waiting for the lock.
#[test]
fn a_hung_resume_after_pause_for_releases_the_lock() {
    let sb = Sandbox::new("pausefor");
    let (code, err) = sb.run(&["dcgm", "pause", "--for", "1s"], "--resume", LIMIT);
    assert_eq!(code, Some(0), "{err}");
    // The deadline passes, the watchdog's resume hangs, and is killed a second later.
    let t = Instant::now();
    while sb.hung_pids().is_empty() && t.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    sb.assert_no_hung_dcgmi_left();
    let t = Instant::now();
    let (code, err) = sb.run(
        &["dcgm", "run", "--", "true"],
        "(never)",
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
}

/// A Ctrl-C while `dcgm run`'s pause hangs ends cutrace at once, as it would without a pause
/// (the signal is passed on to the command only once the command runs), and the watchdog then
/// resumes DCGM.
#[test]
fn ctrl_c_while_the_pause_hangs_ends_cutrace_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let sb = Sandbox::new("int-pause");
    let path = format!(
        "{}:{}",
        sb.dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["dcgm", "run", "--", "true"])
        .env("PATH", path)
        .env("DCGMI_LOG", sb.dir.join("dcgmi.log"))
        .env("DCGMI_PIDS", sb.dir.join("dcgmi.pids"))
        .env("DCGMI_HANG_ON", "--pause")
        .env(var::DCGMI_TIMEOUT, "60")
        .env("XDG_RUNTIME_DIR", sb.dir.join("run"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cutrace");
    let t = Instant::now();
    while sb.hung_pids().is_empty() {
        assert!(t.elapsed() < LIMIT, "dcgmi never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("cutrace still waits for the hung pause after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(2), "{status}");
    let t = Instant::now();
    while !sb.log().iter().any(|l| l == "profile --resume") {
        assert!(t.elapsed() < LIMIT, "never resumed: {:?}", sb.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}
