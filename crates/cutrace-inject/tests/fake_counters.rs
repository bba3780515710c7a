//! The injection's counters (`cutrace profile`) against a fake libcupti with a Range Profiler
//! (tests/fake_cupti/fake_profiler.c): sessions opened at context creation, one range per launch
//! joined by correlation id, graph launches counted, NaN kept, selection, and failures that
//! leave tracing on (or stop the program with --require-counters). No GPU needed; skips itself,
//! loudly, where no C compiler is found.

use cutrace_settings::var;
use std::path::{Path, PathBuf};
use std::process::Command;

mod util;

const METRICS: &str = "sm__ctas_launched.sum,sm__warps_active.avg.pct_of_peak_sustained_active";

struct Out(PathBuf);

impl Drop for Out {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `counters_child` in a new process against the fake, with counters asked for.
fn run(tag: &str, env: &[(&str, &str)]) -> Option<(std::process::Output, Out)> {
    let lib = util::programs()?.fake_cupti_profiler.clone();
    let dir = Out(std::env::temp_dir().join(format!(
        "cutrace-fake-counters-{tag}-{}",
        std::process::id()
    )));
    let _ = std::fs::remove_dir_all(&dir.0);
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "counters_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("CUTRACE_INJECT_CHILD", "1")
    .env(var::CUPTI_LIB, &lib)
    .env(var::OUTPUT_DIR, &dir.0)
    .env(var::COUNTERS, METRICS)
    .env(var::COUNTERS_KERNELS, "fake")
    .env_remove(var::COUNTERS_EVERY)
    .env_remove(var::COUNTERS_MAX_KERNELS)
    .env_remove(var::COUNTERS_REQUIRE)
    .env_remove(var::COUNTERS_KEEP_IMAGES)
    .env_remove(var::COUNTERS_TIMING)
    .env_remove("FAKE_PROFILER_MODE")
    .env_remove(var::API);
    for (k, v) in env {
        c.env(k, v);
    }
    Some((c.output().unwrap(), dir))
}

#[test]
fn counters_child() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    let lib = std::ffi::CString::new(std::env::var(var::CUPTI_LIB).unwrap()).unwrap();
    // SAFETY: the fake the injection already loaded; RTLD_NOLOAD returns its handle.
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!h.is_null(), "the injection did not load the fake libcupti");
    type Created = unsafe extern "C" fn();
    type Launch = unsafe extern "C" fn(u32, u32, *const libc::c_char);
    // SAFETY: the fake's hooks, with these signatures (fake_profiler.c).
    let (created, launch) = unsafe {
        let c = libc::dlsym(h, c"fake_context_created".as_ptr());
        let l = libc::dlsym(h, c"fake_launch".as_ptr());
        assert!(!c.is_null() && !l.is_null());
        (
            std::mem::transmute::<*mut libc::c_void, Created>(c),
            std::mem::transmute::<*mut libc::c_void, Launch>(l),
        )
    };
    let fake = c"_Z4fakePf".as_ptr();
    // SAFETY: calling the fake's hooks, which call the injection's subscriber callback.
    unsafe {
        created();
        launch(307, 1, fake); // cuLaunchKernel
        launch(652, 2, fake); // cuLaunchKernelEx
        launch(514, 9, std::ptr::null()); // cuGraphLaunch: no range
        launch(442, 3, fake); // cuLaunchKernel_ptsz
        launch(307, 5, c"_Z5otherv".as_ptr()); // not asked for (--kernels fake)
        launch(495, 0, std::ptr::null()); // cuStreamBeginCapture
        launch(307, 6, fake); // captured into a graph: no range
        launch(497, 0, std::ptr::null()); // cuStreamEndCapture
    }
    // Returning ends the process through exit(): the injection's atexit flush runs.
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

fn values(t: &cutrace_trace::Trace) -> Vec<(u64, String, f64)> {
    let mut v: Vec<(u64, String, f64)> = t
        .kernel_metrics
        .iter()
        .map(|m| (m.correlation_id, t.str(m.metric).to_string(), m.value))
        .collect();
    v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    v
}

#[test]
fn each_launch_gets_its_values_joined_by_correlation_id() {
    let Some((o, dir)) = run("ok", &[]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(util::cutrace_lines(&o.stderr).is_empty(), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    let v = values(&t);
    let ctas = "sm__ctas_launched.sum";
    let warps = "sm__warps_active.avg.pct_of_peak_sustained_active";
    assert_eq!(v.len(), 6, "{v:?}");
    assert_eq!((v[0].0, v[0].1.as_str(), v[0].2), (1, ctas, 10.0));
    assert_eq!((v[1].0, v[1].1.as_str(), v[1].2), (1, warps, 11.0));
    assert_eq!((v[2].0, v[2].1.as_str(), v[2].2), (2, ctas, 20.0));
    // Unavailable stays NaN, never 0.
    assert!(
        v[3].0 == 2 && v[3].1 == warps && v[3].2.is_nan(),
        "{:?}",
        v[3]
    );
    assert_eq!((v[4].0, v[4].2, v[5].0, v[5].2), (3, 30.0, 3, 31.0));
    // Each value joins the kernel record of its launch.
    for (corr, _, _) in &v {
        assert_eq!(
            t.kernels
                .iter()
                .filter(|k| k.correlation_id == *corr)
                .count(),
            1
        );
    }
    let c = t.meta.counters.as_ref().expect("META counters");
    assert_eq!(c.metrics.join(","), METRICS);
    assert_eq!(c.passes, Some(1));
    assert_eq!(c.kernels_profiled, 3);
    assert_eq!(c.kernels_skipped, 0);
    assert_eq!(c.graph_launches, 1);
    assert_eq!(c.launches_captured, 1);
    assert_eq!(c.ranges_dropped, 0);
    assert_eq!(c.error, None);
}

#[test]
fn every_and_max_kernels_leave_kernels_out_and_count_them() {
    let Some((o, dir)) = run("every", &[(var::COUNTERS_EVERY, "2")]) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = part(&dir.0);
    let corr: Vec<u64> = values(&t).iter().map(|v| v.0).collect();
    assert_eq!(corr, [1, 1, 3, 3]);
    let c = t.meta.counters.unwrap();
    assert_eq!((c.kernels_profiled, c.kernels_skipped), (2, 1));

    let Some((o, dir)) = run("max", &[(var::COUNTERS_MAX_KERNELS, "1")]) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = part(&dir.0);
    let c = t.meta.counters.unwrap();
    assert_eq!((c.kernels_profiled, c.kernels_skipped), (1, 2));
}

#[test]
fn counter_data_images_are_kept_beside_the_part_when_asked() {
    let Some((o, dir)) = run("images", &[(var::COUNTERS_KEEP_IMAGES, "2")]) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut bins: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bin"))
        .collect();
    bins.sort();
    assert_eq!(bins.len(), 2, "{bins:?}");
    assert!(
        bins[0].starts_with("counterdata-") && bins[0].ends_with("-1.bin"),
        "{bins:?}"
    );
    // The fake's image of kernel 2: one range, then the correlation id it was recorded for.
    let p = dir.0.join(&bins[1]);
    let image = std::fs::read(p).unwrap();
    assert_eq!(image.len(), 128);
    assert_eq!(
        (
            image[0],
            u32::from_le_bytes(image[4..8].try_into().unwrap())
        ),
        (1, 2)
    );
    // The trace reads as before: the images are not parts.
    assert_eq!(part(&dir.0).kernel_metrics.len(), 6);
}

#[test]
fn a_busy_counter_unit_turns_counters_off_and_tracing_carries_on() {
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
        lines[0].contains("cuptiRangeProfilerEnable returned CUPTI_ERROR_HARDWARE_BUSY"),
        "{err}"
    );
    assert!(lines[0].contains("nv-hostengine (pid 812)"), "{err}");
    assert!(lines[0].ends_with("tracing carries on"), "{err}");
    let t = part(&dir.0);
    assert!(t.meta.complete);
    assert_eq!(t.kernels.len(), 3);
    assert!(t.kernel_metrics.is_empty());
    let c = t.meta.counters.unwrap();
    assert!(c.error.unwrap().contains("HARDWARE_BUSY"));
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
    assert!(err.contains("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), "{err}");
    assert!(err.contains(hint), "{err}");
    assert!(
        err.contains("--require-counters: stopping the program"),
        "{err}"
    );
    // The trace is finished by the exit handler and says why counters are missing.
    let t = part(&dir.0);
    let c = t.meta.counters.unwrap();
    assert!(c.error.unwrap().contains("INSUFFICIENT_PRIVILEGES"));
    assert!(t.kernel_metrics.is_empty());
}

#[test]
fn a_metric_the_chip_lacks_is_named_when_the_context_is_created() {
    let Some((o, dir)) = run(
        "unknown",
        &[(var::COUNTERS, "sm__ctas_launched.sum,launch__grid_size")],
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines = util::cutrace_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("chip GH100 has no Range Profiler metric \"launch__grid_size\""),
        "{err}"
    );
    let t = part(&dir.0);
    assert_eq!(t.kernels.len(), 3);
    assert!(t.kernel_metrics.is_empty());
}
