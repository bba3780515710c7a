//! The DCGM guard as counter sessions use it, with a stand-in `dcgmi` that logs its calls.
//!
//! The guard's watchdog is a program started anew (in cutrace, the cutrace binary); here it is
//! this test binary, so it has its own `main` (`harness = false` in Cargo.toml): started as
//! `THIS __watchdog ARGS` it is the watchdog, otherwise it runs the tests below. It takes test
//! names (substrings; `--exact` for whole names) and `--list`, as libtest does.

use cutrace_dcgm::{DcgmError, DcgmGuard, PauseOptions, Release, WatchdogExe};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// (the temporary directory holding them, removed on drop; the stand-in dcgmi; its log)
fn stand_in(name: &str, body: &str) -> (cutrace_testkit::Dir, PathBuf, PathBuf) {
    let dir = cutrace_testkit::Dir::new(&format!("guard-{name}"));
    let log = dir.join("log");
    let dcgmi = dir.join("dcgmi");
    std::fs::write(
        &dcgmi,
        format!("#!/bin/sh\necho \"$*\" >> {}\n{body}\n", log.display()),
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dcgmi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (dir, dcgmi, log)
}

/// Options with a state directory of the test's own (the stand-in's directory), so parallel
/// tests do not count each other as holders.
fn opts(dcgmi: &std::path::Path, deadline: Option<Duration>) -> PauseOptions {
    PauseOptions {
        dcgmi: Some(dcgmi.to_path_buf()),
        deadline,
        state_dir: Some(dcgmi.parent().expect("dir").join("state")),
        label: None,
        watchdog: WatchdogExe {
            program: std::env::current_exe().expect("own path"),
            args: vec![WATCHDOG.into()],
        },
    }
}

const WATCHDOG: &str = "__watchdog";

fn lines(log: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn drop_resumes() {
    let (_dir, dcgmi, log) = stand_in("drop", "");
    {
        let _g = DcgmGuard::pause(&opts(&dcgmi, None)).expect("pause");
        assert_eq!(lines(&log), ["profile --pause"]);
    }
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

fn early_return_with_error_resumes() {
    fn session(dcgmi: PathBuf) -> Result<(), String> {
        let _g = DcgmGuard::pause(&opts(&dcgmi, None)).map_err(|e| e.to_string())?;
        Err("the counter session failed".into())
    }
    let (_dir, dcgmi, log) = stand_in("error", "");
    assert!(session(dcgmi).is_err());
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

fn explicit_resume_reports_dcgmi_failure() {
    // dcgmi that fails on --resume only.
    let (_dir, dcgmi, log) = stand_in("resumefail", "[ \"$2\" = --resume ] && exit 4; exit 0");
    let g = DcgmGuard::pause(&opts(&dcgmi, None)).expect("pause");
    let err = g.resume().expect_err("resume must report the failure");
    assert!(err.to_string().contains("exit status 4"), "{err}");
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

fn failed_pause_does_not_resume() {
    let (_dir, dcgmi, log) = stand_in("pausefail", "echo 'Error: DCGM not running' >&2; exit 1");
    let err = DcgmGuard::pause(&opts(&dcgmi, None)).expect_err("must fail");
    match err {
        DcgmError::Failed { action, stderr, .. } => {
            assert_eq!(action, "--pause");
            assert!(stderr.contains("DCGM not running"));
        }
        other => panic!("unexpected {other}"),
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(lines(&log), ["profile --pause"]);
}

fn deadline_resumes_while_the_session_still_runs() {
    let (_dir, dcgmi, log) = stand_in("deadline", "");
    let t = Instant::now();
    let g = DcgmGuard::pause(&opts(&dcgmi, Some(Duration::from_millis(300)))).expect("pause");
    while lines(&log).len() < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
    assert!(t.elapsed() >= Duration::from_millis(250));
    // Ending the session afterwards does not resume a second time.
    let r = g.resume().expect("already resumed by the deadline");
    assert_eq!(
        r,
        Release {
            deadline_passed: true,
            resumed: true
        }
    );
    assert_eq!(lines(&log).len(), 2);
}

fn overlapping_guards_resume_once_when_the_last_ends() {
    let (_dir, dcgmi, log) = stand_in("overlap", "");
    let first = DcgmGuard::pause(&opts(&dcgmi, None)).expect("first");
    let second = DcgmGuard::pause(&opts(&dcgmi, None)).expect("second");
    let r = first.resume().expect("first ends");
    assert!(!r.resumed, "the first guard resumed while the second holds");
    assert_eq!(lines(&log), ["profile --pause", "profile --pause"]);
    let r = second.resume().expect("second ends");
    assert!(r.resumed);
    assert_eq!(
        lines(&log),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
}

fn a_deadline_does_not_resume_while_another_guard_holds() {
    let (_dir, dcgmi, log) = stand_in("deadlineheld", "");
    let long = DcgmGuard::pause(&opts(&dcgmi, None)).expect("long");
    let short = DcgmGuard::pause(&opts(&dcgmi, Some(Duration::from_millis(200)))).expect("short");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(lines(&log), ["profile --pause", "profile --pause"]);
    let r = short.resume().expect("short ends");
    assert_eq!(
        r,
        Release {
            deadline_passed: true,
            resumed: false
        }
    );
    drop(long);
    assert_eq!(
        lines(&log),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
}

fn a_failed_pause_does_not_count_as_a_holder() {
    // dcgmi whose first --pause fails, later calls succeed.
    let (_dir, dcgmi, log) = stand_in(
        "failedholder",
        "[ \"$2\" = --pause ] && [ ! -e \"$(dirname \"$0\")/ok\" ] && { touch \"$(dirname \"$0\")/ok\"; exit 1; }; exit 0",
    );
    assert!(DcgmGuard::pause(&opts(&dcgmi, None)).is_err());
    let g = DcgmGuard::pause(&opts(&dcgmi, None)).expect("second pause");
    assert!(g.resume().expect("resume").resumed);
    assert_eq!(
        lines(&log),
        ["profile --pause", "profile --pause", "profile --resume"]
    );
}

const TESTS: &[(&str, fn())] = &[
    ("drop_resumes", drop_resumes),
    (
        "early_return_with_error_resumes",
        early_return_with_error_resumes,
    ),
    (
        "explicit_resume_reports_dcgmi_failure",
        explicit_resume_reports_dcgmi_failure,
    ),
    ("failed_pause_does_not_resume", failed_pause_does_not_resume),
    (
        "deadline_resumes_while_the_session_still_runs",
        deadline_resumes_while_the_session_still_runs,
    ),
    (
        "overlapping_guards_resume_once_when_the_last_ends",
        overlapping_guards_resume_once_when_the_last_ends,
    ),
    (
        "a_deadline_does_not_resume_while_another_guard_holds",
        a_deadline_does_not_resume_while_another_guard_holds,
    ),
    (
        "a_failed_pause_does_not_count_as_a_holder",
        a_failed_pause_does_not_count_as_a_holder,
    ),
];

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == WATCHDOG) {
        std::process::exit(cutrace_dcgm::watchdog_main(&args[1..]));
    }
    let flag = |f: &str| args.iter().any(|a| a == f);
    // Names to select; the values of libtest's options that take one are not names.
    let mut filters = Vec::new();
    let mut skip_next = false;
    for a in args.iter().filter_map(|a| a.to_str()) {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        match a {
            "--test-threads" | "--format" | "--color" | "--skip" | "-Z" | "--logfile" => {
                skip_next = true
            }
            _ if a.starts_with('-') => {}
            _ => filters.push(a.to_string()),
        }
    }
    let exact = flag("--exact");
    let chosen: Vec<_> = TESTS
        .iter()
        .filter(|(name, _)| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        name == f
                    } else {
                        name.contains(f.as_str())
                    }
                })
        })
        .collect();
    if flag("--list") {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, test) in &chosen {
        let ok = std::panic::catch_unwind(test).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            failed.push(*name);
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        chosen.len() - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        eprintln!("failures: {failed:?}");
        std::process::exit(101);
    }
}
