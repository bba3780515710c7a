//! `cutrace dcgm` with a stand-in `dcgmi` on PATH that appends its arguments to a log: every
//! way cutrace can end must leave DCGM resumed, SIGKILL included.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("cutrace-dcgm-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        let dcgmi = dir.join("bin/dcgmi");
        std::fs::write(&dcgmi, "#!/bin/sh\necho \"$*\" >> \"$DCGMI_LOG\"\n").expect("write dcgmi");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dcgmi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Sandbox { dir }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("dcgmi.log")
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        let path = format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.args(args)
            .env("PATH", path)
            .env("DCGMI_LOG", self.log_path())
            .env("TMPDIR", &self.dir);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.cmd(args).output().expect("run cutrace");
        eprintln!(
            "cutrace {}\n--- stdout\n{}--- stderr\n{}--- dcgmi log\n{:?}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        out
    }

    /// Wait (bounded) until the log has `n` lines.
    fn wait_log(&self, n: usize, within: Duration) -> Vec<String> {
        let t = Instant::now();
        loop {
            let l = self.log();
            if l.len() >= n || t.elapsed() > within {
                return l;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const PAUSE_RESUME: [&str; 2] = ["profile --pause", "profile --resume"];

fn kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Start `cutrace dcgm run -- sh -c 'echo $$ > pidfile; exec sleep 30'` and wait for the pause.
fn start_long_run(sb: &Sandbox) -> (Child, PathBuf) {
    let pidfile = sb.dir.join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let child = sb
        .cmd(&["dcgm", "run", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cutrace");
    let t = Instant::now();
    while !(pidfile.exists() && sb.log().len() == 1) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "cutrace never paused: {:?}",
            sb.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sb.log(), ["profile --pause"]);
    (child, pidfile)
}

fn pid_alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{}", pid.trim())).exists()
}

#[test]
fn normal_exit_resumes() {
    let sb = Sandbox::new("normal");
    let out = sb.run(&["dcgm", "run", "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(sb.log(), PAUSE_RESUME);
    assert!(String::from_utf8_lossy(&out.stderr).contains("BLANK"));
}

#[test]
fn failing_command_resumes_and_passes_its_status_on() {
    let sb = Sandbox::new("fail");
    let out = sb.run(&["dcgm", "run", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn command_that_cannot_start_resumes_and_errors() {
    let sb = Sandbox::new("nostart");
    let out = sb.run(&["dcgm", "run", "--", "/nonexistent/cutrace-no-such-program"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not run the command"));
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn sigterm_of_cutrace_resumes_after_stopping_the_command() {
    let sb = Sandbox::new("sigterm");
    let (mut child, pidfile) = start_long_run(&sb);
    kill(child.id(), "-TERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + 15), "{status}");
    assert_eq!(sb.log(), PAUSE_RESUME);
    let grandchild = std::fs::read_to_string(pidfile).expect("pid");
    assert!(!pid_alive(&grandchild), "the command was not stopped");
}

#[test]
fn ctrl_c_resumes() {
    let sb = Sandbox::new("sigint");
    let (mut child, _) = start_long_run(&sb);
    kill(child.id(), "-INT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + 2), "{status}");
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn sigkill_of_cutrace_still_resumes() {
    let sb = Sandbox::new("sigkill");
    let (mut child, pidfile) = start_long_run(&sb);
    kill(child.id(), "-KILL");
    let _ = child.wait();
    let log = sb.wait_log(2, Duration::from_secs(10));
    // The orphaned command is ours to clean up.
    if let Ok(pid) = std::fs::read_to_string(pidfile) {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
    assert_eq!(log, PAUSE_RESUME);
}

#[test]
fn pause_for_resumes_at_the_deadline() {
    let sb = Sandbox::new("deadline");
    let t = Instant::now();
    let out = sb.run(&["dcgm", "pause", "--for", "1s"]);
    assert_eq!(out.status.code(), Some(0));
    // cutrace returns at once; its output pipe is not held open by the watchdog.
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(sb.log(), ["profile --pause"]);
    let log = sb.wait_log(2, Duration::from_secs(10));
    assert_eq!(log, PAUSE_RESUME);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "resumed before the deadline"
    );
}

#[test]
fn resume_cancels_a_pending_deadline() {
    let sb = Sandbox::new("cancel");
    assert_eq!(
        sb.run(&["dcgm", "pause", "--for", "10m"]).status.code(),
        Some(0)
    );
    let pid = std::fs::read_to_string(sb.dir.join("cutrace-dcgm-watchdog.pid")).expect("pidfile");
    assert!(pid_alive(&pid));
    let out = sb.run(&["dcgm", "resume"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled the pending resume watchdog"));
    let t = Instant::now();
    while pid_alive(&pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pid_alive(&pid), "watchdog {pid} still alive");
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn plain_pause_then_resume() {
    let sb = Sandbox::new("plain");
    let out = sb.run(&["dcgm", "pause"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("until `cutrace dcgm resume`"));
    assert_eq!(sb.run(&["dcgm", "resume"]).status.code(), Some(0));
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn missing_dcgmi_is_explained() {
    let sb = Sandbox::new("missing");
    let out = sb
        .cmd(&["dcgm", "pause"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dcgmi not found on PATH"));
    assert!(sb.log().is_empty());
}
