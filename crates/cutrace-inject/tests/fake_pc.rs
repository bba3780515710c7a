//! The injection's PC sampling (`cutrace profile --pc-sampling`) against a fake libcupti with
//! the PC Sampling API (tests/fake_cupti/fake_pc.c): a session enabled and configured in
//! continuous mode at context creation, the cubin of a loaded module copied and mapped to
//! source lines, the data read on the decode thread and at Disable, every sample CUPTI counted
//! kept or accounted for; failures that leave tracing on, or stop the program with
//! --require-counters. No GPU needed; skips itself, loudly, where no C compiler is found.

use cutrace_settings::var;
use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_testkit::Dir;

mod util;

/// Runs `pc_child` in a new process against the fake, with PC sampling asked for.
fn run(tag: &str, env: &[(&str, &str)]) -> Option<(std::process::Output, Dir)> {
    let lib = util::programs()?.fake_cupti_profiler.clone();
    let dir = Dir::new(&format!("fake-pc-{tag}"));
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "pc_child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_INJECT_CHILD", "1")
        .env(var::CUPTI_LIB, &lib)
        .env(var::OUTPUT_DIR, &dir.0)
        .env(var::PC_SAMPLING, "1")
        .env_remove(var::PC_PERIOD)
        .env_remove(var::COUNTERS)
        .env_remove(var::PM_METRICS)
        .env_remove(var::COUNTERS_REQUIRE)
        .env_remove("FAKE_PC_MODE")
        .env_remove(var::API);
    for (k, v) in env {
        c.env(k, v);
    }
    Some((c.output().unwrap(), dir))
}

type Hook = unsafe extern "C" fn();

/// A hook of the fake libcupti the injection loaded.
fn hook(name: &std::ffi::CStr) -> Hook {
    let lib = std::ffi::CString::new(std::env::var(var::CUPTI_LIB).unwrap()).unwrap();
    // SAFETY: the fake the injection already loaded; RTLD_NOLOAD returns its handle.
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!h.is_null(), "the injection did not load the fake libcupti");
    // SAFETY: the fake's hooks take nothing and return nothing (fake_pc.c, fake_profiler.c).
    unsafe {
        let f = libc::dlsym(h, name.as_ptr());
        assert!(!f.is_null(), "{name:?}");
        std::mem::transmute::<*mut libc::c_void, Hook>(f)
    }
}

#[test]
fn pc_child() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    // SAFETY: the fake's hooks call the injection's subscriber callback.
    unsafe {
        hook(c"fake_context_created")();
        hook(c"fake_module_loaded")();
    }
    // The decode thread reads every 100 ms: the first read's PCs come from it.
    std::thread::sleep(std::time::Duration::from_millis(400));
    if std::env::var("FAKE_PC_DESTROY").is_ok() {
        // SAFETY: as above.
        unsafe { hook(c"fake_context_destroyed")() };
    }
    // Returning ends the process through exit(): the injection disables and writes.
}

fn part(dir: &Path) -> cutrace_trace::Trace {
    let parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cutrace"))
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    cutrace_trace::native::read(&parts[0], &mut |_, _| {}).unwrap()
}

/// (PC offset, reason, samples, file, line), sorted.
fn rows(t: &cutrace_trace::Trace) -> Vec<(u64, String, u64, String, u32)> {
    let mut v: Vec<_> = t
        .pc_samples
        .iter()
        .map(|s| {
            assert_eq!(t.str(s.function), "_Z5chainPKjPji");
            assert_eq!(
                (s.cubin_crc, s.function_index, s.correlation_id),
                (0xABC, 3, 0)
            );
            let r = t.str(s.stall_reason);
            let r = r
                .strip_prefix("smsp__pcsamp_warps_issue_stalled_")
                .unwrap_or(r);
            let file = s
                .source_file
                .map(|f| t.str(f).to_string())
                .unwrap_or_default();
            (s.pc_offset, r.to_string(), s.samples, file, s.source_line)
        })
        .collect();
    v.sort();
    v
}

fn check_samples(t: &cutrace_trace::Trace) {
    let f = "/src/k.cu".to_string();
    assert_eq!(
        rows(t),
        [
            (16, "long_scoreboard".into(), 90, f.clone(), 101),
            (16, "long_scoreboard_not_issued".into(), 89, f.clone(), 101),
            (16, "selected".into(), 10, f.clone(), 101),
            (32, "selected".into(), 5, f.clone(), 102),
            (48, "long_scoreboard".into(), 7, f, 103),
        ]
    );
    let info = t.meta.pc_sampling.clone().expect("META pc_sampling");
    assert_eq!(info.collection_mode, "continuous");
    assert_eq!(info.devices, [0]);
    assert_eq!(info.stall_reasons.len(), 4);
    assert_eq!((info.samples_total, info.samples_non_user), (127, 15));
    // Disable said three PCs did not fit its buffer.
    assert_eq!(
        (info.pcs_lost, info.rows_dropped_queue, info.records_odd),
        (3, 0, 0)
    );
    assert_eq!(info.error, None);
}

#[test]
fn samples_are_read_mapped_to_lines_and_every_one_accounted_for() {
    let Some((o, dir)) = run("ok", &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(util::cutrace_lines(&o.stderr).is_empty(), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    check_samples(&t);
}

#[test]
fn a_context_destroyed_hands_over_its_last_records() {
    let Some((o, dir)) = run("destroy", &[("FAKE_PC_DESTROY", "1")]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    check_samples(&part(&dir.0));
}

#[test]
fn a_period_out_of_range_is_named_and_tracing_carries_on() {
    let Some((o, dir)) = run("period", &[(var::PC_PERIOD, "40")]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("PC sampling is off"), "{err}");
    assert!(err.contains(&format!("{}=40", var::PC_PERIOD)), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete);
    assert!(t.pc_samples.is_empty());
}

#[test]
fn busy_or_denied_counters_turn_pc_sampling_off_with_the_fix() {
    let Some((o, dir)) = run("busy", &[("FAKE_PC_MODE", "2")]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines = util::cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("GPU 0: cuptiPCSamplingEnable returned CUPTI_ERROR_HARDWARE_BUSY"),
        "{err}"
    );
    assert!(lines[0].ends_with("tracing carries on"), "{err}");
    let t = part(&dir.0);
    assert!(t.pc_samples.is_empty());
    assert!(t
        .meta
        .pc_sampling
        .unwrap()
        .error
        .unwrap()
        .contains("HARDWARE_BUSY"));

    let hint = "The doctor's counter-access check (fail): counters are restricted to admins.";
    let Some((o, dir)) = run(
        "denied",
        &[
            ("FAKE_PC_MODE", "1"),
            (var::COUNTERS_ACCESS_HINT, hint),
            (var::COUNTERS_REQUIRE, "1"),
        ],
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("cuptiPCSamplingEnable returned CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
        "{err}"
    );
    assert!(err.contains(hint), "{err}");
    let t = part(&dir.0);
    assert!(t
        .meta
        .pc_sampling
        .unwrap()
        .error
        .unwrap()
        .contains("INSUFFICIENT_PRIVILEGES"));
}
