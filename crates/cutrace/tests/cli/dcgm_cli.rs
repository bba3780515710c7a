//! `cutrace dcgm` with a stand-in `dcgmi` on PATH that appends its arguments to a log: every
//! way cutrace can end must leave DCGM resumed, SIGKILL included.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Sandbox {
    dir: PathBuf,
    /// Owns `dir`: removes it on drop, after `Drop for Sandbox` ran.
    _tmp: cutrace_testkit::Dir,
}

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let tmp = cutrace_testkit::Dir::new(&format!("dcgm-{name}"));
        let dir = tmp.to_path_buf();
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        // The per-user state directory lives under XDG_RUNTIME_DIR, which must be private.
        std::fs::create_dir_all(dir.join("run")).expect("mkdir");
        std::fs::set_permissions(dir.join("run"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let dcgmi = dir.join("bin/dcgmi");
        std::fs::write(&dcgmi, "#!/bin/sh\necho \"$*\" >> \"$DCGMI_LOG\"\n").expect("write dcgmi");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dcgmi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Sandbox { dir, _tmp: tmp }
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
            .env("TMPDIR", &self.dir)
            .env("XDG_RUNTIME_DIR", self.dir.join("run"));
        c
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.join("run/cutrace-dcgm")
    }

    /// The holder records in the state directory: (file name, contents).
    fn records(&self) -> Vec<(String, String)> {
        records_in(&self.state_dir())
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

fn records_in(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("holder."))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read_to_string(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `key=value` from a holder record.
fn field(record: &str, key: &str) -> String {
    record
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {record:?}"))
        .to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
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
fn command_that_cannot_start_exits_like_a_shell_without_pausing() {
    let sb = Sandbox::new("nostart");
    let out = sb.run(&["dcgm", "run", "--", "/nonexistent/cutrace-no-such-program"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("No such file or directory"));
    assert!(stderr(&out).contains("nothing was paused"));
    let out = sb.run(&["dcgm", "run", "--", "cutrace-no-such-program-on-path"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("command not found"));
    let not_exec = sb.dir.join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").expect("write");
    let out = sb.run(&["dcgm", "run", "--", not_exec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126));
    assert!(stderr(&out).contains("Permission denied"));
    let out = sb.run(&["dcgm", "run", "--", sb.dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126));
    assert!(
        sb.log().is_empty(),
        "DCGM was paused for a command that cannot start"
    );
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
fn pause_for_resumes_at_the_deadline_and_leaves_no_record() {
    let sb = Sandbox::new("deadline");
    let t = Instant::now();
    let out = sb.run(&["dcgm", "pause", "--for", "1s"]);
    assert_eq!(out.status.code(), Some(0));
    // cutrace returns at once; its output pipe is not held open by the watchdog.
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(sb.log(), ["profile --pause"]);
    assert_eq!(sb.records().len(), 1, "{:?}", sb.records());
    let log = sb.wait_log(2, Duration::from_secs(10));
    assert_eq!(log, PAUSE_RESUME);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "resumed before the deadline"
    );
    assert!(sb.records().is_empty(), "stale: {:?}", sb.records());
}

#[test]
fn resume_cancels_a_pending_deadline_found_whatever_tmpdir_says() {
    let sb = Sandbox::new("cancel");
    let out = sb.run(&["dcgm", "pause", "--for", "10m"]);
    assert_eq!(out.status.code(), Some(0));
    let recs = sb.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(field(&recs[0].1, "role"), "pause");
    let pid = field(&recs[0].1, "pid");
    assert!(pid_alive(&pid));
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim(),
        "cutrace-dcgm-wd"
    );
    // The state directory is private, and not under TMPDIR.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(sb.state_dir()).unwrap().mode() & 0o777,
        0o700
    );
    let other_tmp = sb.dir.join("other-tmp");
    std::fs::create_dir_all(&other_tmp).unwrap();
    let out = sb
        .cmd(&["dcgm", "resume"])
        .env("TMPDIR", &other_tmp)
        .output()
        .expect("run");
    eprintln!("{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("cancelled the pending resume watchdog"));
    let t = Instant::now();
    while pid_alive(&pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pid_alive(&pid), "watchdog {pid} still alive");
    // It exited without resuming: the one resume is `resume`'s own.
    assert_eq!(sb.log(), PAUSE_RESUME);
    assert!(sb.records().is_empty(), "stale: {:?}", sb.records());
}

/// The fallback state directory, removed at the end of the test if the test created it: tests
/// leave nothing behind in /tmp, but one that existed belongs to someone's real session.
struct RemoveIfNew(Option<PathBuf>);

impl RemoveIfNew {
    fn new(dir: &Path) -> RemoveIfNew {
        RemoveIfNew((!dir.exists()).then(|| dir.to_path_buf()))
    }
}

impl Drop for RemoveIfNew {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[test]
fn without_xdg_runtime_dir_state_is_in_a_private_tmp_dir_named_by_uid() {
    let sb = Sandbox::new("fallback");
    let uid = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        .expect("euid");
    let dir = PathBuf::from(format!("/tmp/cutrace-dcgm-{uid}"));
    let _made_here = RemoveIfNew::new(&dir);
    let out = sb
        .cmd(&["dcgm", "pause", "--for", "10m"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(&dir).expect("state dir");
    assert!(m.is_dir());
    assert_eq!(m.mode() & 0o777, 0o700);
    assert_eq!(m.uid().to_string(), uid);
    assert!(!records_in(&dir).is_empty());
    let out = sb
        .cmd(&["dcgm", "resume"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", "/nonexistent-tmp")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("cancelled the pending resume watchdog"));
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn plain_pause_replaces_an_earlier_pause_for_and_really_stays_paused() {
    let sb = Sandbox::new("replace");
    assert_eq!(
        sb.run(&["dcgm", "pause", "--for", "2s"]).status.code(),
        Some(0)
    );
    let out = sb.run(&["dcgm", "pause"]);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("until `cutrace dcgm resume`"), "{err}");
    assert!(
        err.contains("replaces the earlier `cutrace dcgm pause`"),
        "{err}"
    );
    assert!(err.contains("would have resumed them in"), "{err}");
    // The earlier deadline passes: nothing resumes.
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(sb.log(), ["profile --pause", "profile --pause"]);
    assert_eq!(sb.records().len(), 1, "{:?}", sb.records());
    let out = sb.run(&["dcgm", "resume"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("ended the `cutrace dcgm pause` hold"));
    assert_eq!(
        sb.log(),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
}

#[test]
fn absurd_pause_duration_is_refused_not_a_panic() {
    let sb = Sandbox::new("absurd");
    let out = sb.run(&["dcgm", "pause", "--for", "9999999999999999h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("longer than 7 days"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"));
    assert!(sb.log().is_empty());
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

#[test]
fn overlapping_runs_resume_only_when_the_last_ends() {
    let sb = Sandbox::new("overlap");
    let first = sb
        .cmd(&["dcgm", "run", "--", "sleep", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn first");
    std::thread::sleep(Duration::from_millis(200));
    let second = sb
        .cmd(&["dcgm", "run", "--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn second");
    let first = first.wait_with_output().expect("first");
    assert_eq!(first.status.code(), Some(0));
    // The second still runs: DCGM must still be paused.
    assert_eq!(sb.log(), ["profile --pause", "profile --pause"]);
    let err = stderr(&first);
    assert!(err.contains("stay paused"), "{err}");
    assert!(err.contains("`sleep 3`"), "{err}");
    let second = second.wait_with_output().expect("second");
    assert_eq!(second.status.code(), Some(0));
    assert!(stderr(&second).contains("DCGM profiling metrics resumed."));
    assert_eq!(
        sb.log(),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
    assert!(sb.records().is_empty(), "stale: {:?}", sb.records());
}

#[test]
fn a_pause_keeps_dcgm_paused_across_a_run() {
    let sb = Sandbox::new("pauserun");
    assert_eq!(sb.run(&["dcgm", "pause"]).status.code(), Some(0));
    let out = sb.run(&["dcgm", "run", "--", "true"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("`cutrace dcgm pause`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.log(), ["profile --pause", "profile --pause"]);
    assert_eq!(sb.run(&["dcgm", "resume"]).status.code(), Some(0));
    assert_eq!(
        sb.log(),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
}

#[test]
fn resume_while_a_run_holds_says_who_and_only_force_resumes() {
    let sb = Sandbox::new("held");
    let (mut child, pidfile) = start_long_run(&sb);
    let out = sb.run(&["dcgm", "resume"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("NOT resumed"), "{err}");
    assert!(
        err.contains(&format!("cutrace pid {}", child.id())),
        "{err}"
    );
    assert!(err.contains("exec sleep 30"), "{err}");
    assert_eq!(sb.log(), ["profile --pause"]);
    let out = sb.run(&["dcgm", "resume", "--force"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("--force"));
    assert_eq!(sb.log(), PAUSE_RESUME);
    // The session was not disturbed.
    let grandchild = std::fs::read_to_string(&pidfile).expect("pid");
    assert!(pid_alive(&grandchild));
    assert!(child.try_wait().expect("try_wait").is_none());
    kill(child.id(), "-TERM");
    let _ = child.wait();
}

#[test]
fn resume_never_signals_a_process_a_record_merely_names() {
    let sb = Sandbox::new("forged");
    let (mut child, pidfile) = start_long_run(&sb);
    let grandchild = std::fs::read_to_string(&pidfile).expect("pid");
    let alive = |child: &mut Child| child.try_wait().expect("try_wait").is_none();
    // The old fixed pidfile in TMPDIR, naming the live session (a reused pid): ignored now.
    std::fs::write(
        sb.dir.join("cutrace-dcgm-watchdog.pid"),
        format!("{}\n", child.id()),
    )
    .unwrap();
    let out = sb.run(&["dcgm", "resume"]);
    assert!(alive(&mut child), "resume killed the session");
    assert!(pid_alive(&grandchild), "resume killed the command");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(sb.log(), ["profile --pause"]);

    let real = sb.records();
    assert_eq!(real.len(), 1, "{real:?}");
    let wd_pid = field(&real[0].1, "pid");
    let wd_start = field(&real[0].1, "start");
    let cutrace_start = std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    // A `pause` record naming the live `cutrace dcgm run` (right pid, right start time, but not a
    // watchdog) and one naming the run's own watchdog (which ignores SIGTERM).
    let forge = |name: &str, pid: &str, start: &str| {
        std::fs::write(
            sb.state_dir().join(name),
            format!("role=pause\npid={pid}\nstart={start}\nowner=1\nsince=0\nuntil=\nlabel=x\n"),
        )
        .unwrap()
    };
    forge(
        "holder.forged-cutrace",
        &child.id().to_string(),
        &cutrace_start,
    );
    forge("holder.forged-watchdog", &wd_pid, &wd_start);
    let out = sb.run(&["dcgm", "resume"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(alive(&mut child), "the session was killed");
    assert!(pid_alive(&grandchild), "the command was killed");
    assert!(pid_alive(&wd_pid), "the session's watchdog was killed");
    assert_eq!(sb.log(), ["profile --pause"]);
    // The session still ends properly, and resumes.
    for f in ["holder.forged-cutrace", "holder.forged-watchdog"] {
        let _ = std::fs::remove_file(sb.state_dir().join(f));
    }
    kill(child.id(), "-TERM");
    let _ = child.wait();
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn run_for_expiring_mid_command_says_so() {
    let sb = Sandbox::new("runfor");
    let t = Instant::now();
    let child = sb
        .cmd(&["dcgm", "run", "--for", "1s", "--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let log = sb.wait_log(2, Duration::from_secs(10));
    assert_eq!(log, PAUSE_RESUME);
    assert!(
        t.elapsed() < Duration::from_millis(2800),
        "resumed only at the end"
    );
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("the --for time limit (1 s) ran out while the command was still running"),
        "{err}"
    );
    assert!(
        err.contains("already been resumed by the --for time limit"),
        "{err}"
    );
    assert_eq!(sb.log(), PAUSE_RESUME);
}

#[test]
fn help_names_only_tools_that_exist() {
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["dcgm", "--help"])
        .output()
        .expect("help");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("cutrace profile"), "{text}");
    assert!(text.contains("ncu"), "{text}");
    assert!(text.contains("cutrace doctor"), "{text}");
}

/// SigIgn or SigBlk from a `/proc/PID/status` dump, as a bit mask (bit N-1: signal N).
fn sig_mask(status: &str, key: &str) -> u64 {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {status:?}"));
    u64::from_str_radix(hex.trim(), 16).expect("hex mask")
}

/// Started by a parent that ignores SIGINT, SIGHUP, SIGQUIT, SIGTERM and SIGPIPE (as `nohup`
/// or a shell's `&` do), cutrace still gives both dcgmi commands (the pause it runs and the
/// resume its watchdog runs) the default disposition of each, an empty signal mask, a process
/// group of their own, and none of its descriptors: the hold lock above all, nor one cutrace
/// inherited.
#[test]
fn dcgmi_gets_default_signals_no_mask_and_none_of_our_descriptors() {
    let sb = Sandbox::new("childstate");
    let dcgmi = sb.dir.join("bin/dcgmi");
    std::fs::write(
        &dcgmi,
        "#!/bin/sh\necho \"$*\" >> \"$DCGMI_LOG\"\nn=$(wc -l < \"$DCGMI_LOG\")\nwhile read -r l; do echo \"$l\"; done < /proc/$$/status > \"$DCGMI_LOG.status.$n\"\nls -l /proc/$$/fd > \"$DCGMI_LOG.fd.$n\" 2>&1\nps -o pid=,pgid= -p $$ > \"$DCGMI_LOG.pgid.$n\"\n",
    )
    .expect("write dcgmi");
    let mut sh = Command::new("sh");
    for (k, v) in sb.cmd(&[]).get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    let out = sh
        .args([
            "-c",
            "exec 7>>\"$DCGMI_LOG.leak\"; trap '' INT HUP QUIT TERM PIPE; exec \"$0\" dcgm run -- true",
            env!("CARGO_BIN_EXE_cutrace"),
        ])
        .output()
        .expect("run");
    eprintln!("{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(sb.log(), PAUSE_RESUME);
    // SIGHUP 1, SIGINT 2, SIGQUIT 3, SIGPIPE 13, SIGTERM 15.
    let ours: u64 = [1u32, 2, 3, 13, 15].iter().map(|s| 1u64 << (s - 1)).sum();
    for n in 1..=2 {
        let read = |what: &str| {
            std::fs::read_to_string(format!("{}.{what}.{n}", sb.log_path().display())).expect(what)
        };
        let status = read("status");
        assert_eq!(sig_mask(&status, "SigIgn:") & ours, 0, "call {n}: {status}");
        assert_eq!(sig_mask(&status, "SigBlk:"), 0, "call {n}: {status}");
        let fds = read("fd");
        assert!(!fds.contains("hold.lock"), "call {n}: {fds}");
        assert!(!fds.contains("signalfd"), "call {n}: {fds}");
        // Not even one cutrace was given without close-on-exec (fd 7 of the shell above).
        assert!(!fds.contains(".leak"), "call {n}: {fds}");
        // Its stdout and stderr, no more.
        assert!(fds.matches("pipe:").count() <= 2, "call {n}: {fds}");
        let ids: Vec<String> = read("pgid")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert_eq!(
            ids[0], ids[1],
            "call {n} does not lead its own process group"
        );
    }
}

/// A Ctrl-C at a terminal goes to the whole foreground process group: cutrace and its command
/// stop, and the watchdog, in a session of its own, resumes DCGM.
#[test]
fn ctrl_c_to_the_whole_process_group_resumes() {
    use std::os::unix::process::CommandExt;
    let sb = Sandbox::new("pgrp-int");
    let pidfile = sb.dir.join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut child = sb
        .cmd(&["dcgm", "run", "--", "sh", "-c", &script])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cutrace");
    let t = Instant::now();
    while !(pidfile.exists() && sb.log().len() == 1) {
        assert!(t.elapsed() < Duration::from_secs(10), "never paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .expect("kill")
        .success();
    assert!(ok);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + 2), "{status}");
    assert_eq!(sb.wait_log(2, Duration::from_secs(10)), PAUSE_RESUME);
    assert!(sb.records().is_empty(), "stale: {:?}", sb.records());
}
