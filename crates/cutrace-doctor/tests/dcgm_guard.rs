//! The DCGM guard as counter sessions use it, with a stand-in `dcgmi` that logs its calls.

use cutrace_doctor::dcgm::{DcgmError, DcgmGuard, PauseOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn stand_in(name: &str, body: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("cutrace-guard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let log = dir.join("log");
    let dcgmi = dir.join("dcgmi");
    std::fs::write(
        &dcgmi,
        format!("#!/bin/sh\necho \"$*\" >> {}\n{body}\n", log.display()),
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dcgmi, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (dcgmi, log)
}

fn lines(log: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn drop_resumes() {
    let (dcgmi, log) = stand_in("drop", "");
    {
        let _g = DcgmGuard::pause(&PauseOptions {
            dcgmi: Some(dcgmi),
            deadline: None,
        })
        .expect("pause");
        assert_eq!(lines(&log), ["profile --pause"]);
    }
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

#[test]
fn early_return_with_error_resumes() {
    fn session(dcgmi: PathBuf) -> Result<(), String> {
        let _g = DcgmGuard::pause(&PauseOptions {
            dcgmi: Some(dcgmi),
            deadline: None,
        })
        .map_err(|e| e.to_string())?;
        Err("the counter session failed".into())
    }
    let (dcgmi, log) = stand_in("error", "");
    assert!(session(dcgmi).is_err());
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

#[test]
fn explicit_resume_reports_dcgmi_failure() {
    // dcgmi that fails on --resume only.
    let (dcgmi, log) = stand_in("resumefail", "[ \"$2\" = --resume ] && exit 4; exit 0");
    let g = DcgmGuard::pause(&PauseOptions {
        dcgmi: Some(dcgmi),
        deadline: None,
    })
    .expect("pause");
    let err = g.resume().expect_err("resume must report the failure");
    assert!(err.to_string().contains("exit status 4"), "{err}");
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
}

#[test]
fn failed_pause_does_not_resume() {
    let (dcgmi, log) = stand_in("pausefail", "echo 'Error: DCGM not running' >&2; exit 1");
    let err = DcgmGuard::pause(&PauseOptions {
        dcgmi: Some(dcgmi),
        deadline: None,
    })
    .expect_err("must fail");
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

#[test]
fn deadline_resumes_while_the_session_still_runs() {
    let (dcgmi, log) = stand_in("deadline", "");
    let t = Instant::now();
    let g = DcgmGuard::pause(&PauseOptions {
        dcgmi: Some(dcgmi),
        deadline: Some(Duration::from_millis(300)),
    })
    .expect("pause");
    while lines(&log).len() < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lines(&log), ["profile --pause", "profile --resume"]);
    assert!(t.elapsed() >= Duration::from_millis(250));
    // Ending the session afterwards does not resume a second time.
    g.resume().expect("already resumed by the deadline");
    assert_eq!(lines(&log).len(), 2);
}
