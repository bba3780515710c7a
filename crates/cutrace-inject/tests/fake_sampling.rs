//! The injection's PM sampling (`cutrace sample`) against a fake libcupti with PM Sampling
//! (tests/fake_cupti/fake_pm.c): a session opened at context creation, the samples decoded with
//! their times, the first one dropped as an outlier, an overflow and the samples it cost counted,
//! NaN kept; failures that leave tracing on, or stop the program with --require-counters. No GPU
//! needed; skips itself, loudly, where no C compiler is found.

use cutrace_settings::var;
use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_testkit::Dir;

mod util;

const METRICS: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed,pcie__read_bytes.sum";

/// Runs `sampling_child` in a new process against the fake, with sampling asked for.
fn run(tag: &str, env: &[(&str, &str)]) -> Option<(std::process::Output, Dir)> {
    let lib = util::programs()?.fake_cupti_profiler.clone();
    let dir = Dir::new(&format!("fake-sampling-{tag}"));
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "sampling_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("CUTRACE_INJECT_CHILD", "1")
    .env(var::CUPTI_LIB, &lib)
    .env(var::OUTPUT_DIR, &dir.0)
    .env(var::PM_METRICS, METRICS)
    .env(var::PM_INTERVAL_NS, "100000")
    .env_remove(var::COUNTERS)
    .env_remove(var::PM_DEVICES)
    .env_remove(var::PM_OPTIONAL)
    .env_remove(var::COUNTERS_REQUIRE)
    .env_remove("FAKE_PROFILER_MODE")
    .env_remove(var::API);
    for (k, v) in env {
        c.env(k, v);
    }
    Some((c.output().unwrap(), dir))
}

#[test]
fn sampling_child() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    let lib = std::ffi::CString::new(std::env::var(var::CUPTI_LIB).unwrap()).unwrap();
    // SAFETY: the fake the injection already loaded; RTLD_NOLOAD returns its handle.
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!h.is_null(), "the injection did not load the fake libcupti");
    type Created = unsafe extern "C" fn();
    // SAFETY: the fake's hook, with this signature (fake_profiler.c).
    let created = unsafe {
        let c = libc::dlsym(h, c"fake_context_created".as_ptr());
        assert!(!c.is_null());
        std::mem::transmute::<*mut libc::c_void, Created>(c)
    };
    // SAFETY: calling the fake's hook, which calls the injection's subscriber callback.
    unsafe { created() };
    // Returning ends the process through exit(): the injection's atexit drain and flush run.
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

#[test]
fn samples_are_kept_with_their_times_the_first_dropped_and_losses_counted() {
    let Some((o, dir)) = run("ok", &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(util::cutrace_lines(&o.stderr).is_empty(), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    let mut rows: Vec<(u64, u64, String, f64)> = t
        .pm_samples
        .iter()
        .map(|s| (s.start_ns, s.end_ns, t.str(s.metric).to_string(), s.value))
        .collect();
    rows.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
    // Samples 1, 2, 3 and 7 of 100 µs from 5e9 ns; sample 0 was dropped as the outlier.
    let starts: Vec<u64> = rows.iter().step_by(2).map(|r| r.0).collect();
    assert_eq!(
        starts,
        [5_000_100_000, 5_000_200_000, 5_000_300_000, 5_000_700_000]
    );
    assert!(rows.iter().all(|r| r.1 == r.0 + 100_000));
    let sm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
    assert_eq!(
        (rows[0].2.as_str(), rows[0].3),
        ("pcie__read_bytes.sum", 11.0)
    );
    assert_eq!((rows[1].2.as_str(), rows[1].3), (sm, 10.0));
    // Sample 2's second metric could not be evaluated: NaN, never 0.
    assert!(
        rows[2].2 == "pcie__read_bytes.sum" && rows[2].3.is_nan(),
        "{rows:?}"
    );
    assert_eq!(rows[7].3, 70.0);
    let info = t.meta.pm_sampling.expect("META pm_sampling");
    assert_eq!(info.metrics.join(","), METRICS);
    assert_eq!(info.interval_ns, 100_000);
    assert_eq!(info.devices, [0]);
    assert_eq!(info.samples, 4);
    assert_eq!(info.first_samples_dropped, 1);
    // The decode reported the overflow; samples 4 to 6 are missing from the times.
    assert_eq!((info.overflows, info.samples_lost), (1, 3));
    assert_eq!(info.error, None);
}

#[test]
fn busy_counters_turn_sampling_off_naming_the_holder_and_tracing_carries_on() {
    let Some((o, dir)) = run(
        "busy",
        &[
            ("FAKE_PROFILER_MODE", "1"),
            (
                var::COUNTERS_HOLDERS_HINT,
                "The doctor's counter-holders check (warn): nv-hostengine (pid 812) runs.",
            ),
        ],
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines = util::cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("GPU 0: cuptiPmSamplingEnable returned CUPTI_ERROR_HARDWARE_BUSY"),
        "{err}"
    );
    assert!(lines[0].contains("nv-hostengine (pid 812)"), "{err}");
    assert!(lines[0].ends_with("tracing carries on"), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete);
    assert!(t.pm_samples.is_empty());
    let info = t.meta.pm_sampling.unwrap();
    assert!(info.error.unwrap().contains("HARDWARE_BUSY"));
}

#[test]
fn denied_counters_quote_the_doctor_and_require_counters_stops_the_program() {
    let hint = "The doctor's counter-access check (fail): counters are restricted to admins.";
    let Some((o, dir)) = run(
        "denied",
        &[
            ("FAKE_PROFILER_MODE", "2"),
            (var::COUNTERS_ACCESS_HINT, hint),
            (var::COUNTERS_REQUIRE, "1"),
        ],
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("cuptiPmSamplingGetCounterAvailability (size) returned CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
        "{err}"
    );
    assert!(err.contains(hint), "{err}");
    assert!(
        err.contains("--require-counters: stopping the program"),
        "{err}"
    );
    let t = part(&dir.0);
    let info = t.meta.pm_sampling.unwrap();
    assert!(info.error.unwrap().contains("INSUFFICIENT_PRIVILEGES"));
    assert!(t.pm_samples.is_empty());
}
