//! The whole injection (load, version check, subscribe, callbacks, writer thread, exit flush,
//! part file) against a fake libcupti built from tests/fake_cupti/fake_cupti.c: no GPU needed.
//! Skips itself, loudly, where no C compiler is found.

use cutrace_settings::var;
use std::path::{Path, PathBuf};
use std::process::Command;

mod util;

fn build_fake() -> Option<PathBuf> {
    util::programs().map(|p| p.fake_cupti.clone())
}

/// Runs this test binary's `child` test in a new process with the given environment.
fn run_child(mode: &str, lib: &Path, out_dir: &Path) -> std::process::Output {
    run_child_env(mode, lib, out_dir, &[])
}

fn run_child_env(
    mode: &str,
    lib: &Path,
    out_dir: &Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_INJECT_CHILD", "1")
        .env("FAKE_CUPTI_MODE", mode)
        .env(var::CUPTI_LIB, lib)
        .env(var::OUTPUT_DIR, out_dir)
        .env_remove(var::API)
        .env_remove(var::RUNTIME_CBIDS)
        .env_remove("FAKE_CUPTI_LOG");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn child() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    // A fork without exec: the child's exit must leave the parent's part alone.
    // SAFETY: the child only exits; this test process runs single-threaded (--test-threads=1).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        std::process::exit(0);
    }
    if pid > 0 {
        // SAFETY: reaping our own child; a null status pointer is allowed.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    println!("HOST OUTPUT");
    // Returning ends the process through exit(): the injection's atexit flush runs.
}

fn cutrace_lines(o: &std::process::Output) -> Vec<String> {
    util::cutrace_lines(&o.stderr)
}

#[test]
fn records_flow_from_cupti_buffers_to_a_complete_part() {
    let Some(lib) = build_fake() else { return };
    let dir = cutrace_testkit::Dir::new("fake-out");
    let _ = std::fs::remove_dir_all(&dir);
    let o = run_child("0", &lib, &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    assert!(cutrace_lines(&o).is_empty(), "{:?}", cutrace_lines(&o));
    let parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&parts[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (t, h) = cutrace_trace::native::read_file(&parts[0], &mut |_, _| {}).unwrap();
    assert!(t.meta.complete, "{:?}", t.meta.incomplete_reason);
    assert_eq!(h.cupti_version, Some(130001));
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(t.api_calls.len(), 3);
    assert!(t
        .kernels
        .iter()
        .all(|k| t.str(k.name) == "_Z4fakePf" && k.stream == 7));
    assert!(t
        .api_calls
        .iter()
        .all(|a| t.str(a.name) == "cudaLaunchKernel"));
    let mut corr: Vec<u64> = t.kernels.iter().map(|k| k.correlation_id).collect();
    corr.sort();
    assert_eq!(corr, vec![1, 2, 3]);
    // Without CUTRACE_API the state queries are left out (`lean`, the default), and said so.
    let note = api_note(&h).expect("an api records note");
    assert!(note.starts_with("api records: lean"), "{note}");
}

#[test]
fn another_subscriber_means_one_line_and_untraced() {
    let Some(lib) = build_fake() else { return };
    let tmp = cutrace_testkit::Dir::new("fake-sub");
    let dir = tmp.path("trace");
    let o = run_child("1", &lib, &dir);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("HOST OUTPUT"));
    let lines = cutrace_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("Fix:"), "{}", lines[0]);
    assert!(!dir.exists(), "no trace is written when untraced");
}

#[test]
fn old_cupti_is_refused_with_both_versions() {
    let Some(lib) = build_fake() else { return };
    let tmp = cutrace_testkit::Dir::new("fake-old");
    let dir = tmp.path("trace");
    let o = run_child("2", &lib, &dir);
    assert!(o.status.success());
    let lines = cutrace_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("older than CUDA 13") && lines[0].contains("24"),
        "{}",
        lines[0]
    );
}

/// What the injection asked the fake CUPTI to record with `--api MODE` (`CUTRACE_API`):
/// the kinds enabled whole, the runtime and driver callback ids enabled one by one, and the
/// one part's trace and header.
struct ApiRun {
    whole_kinds: Vec<u32>,
    runtime_ids: Vec<u32>,
    driver_ids: Vec<u32>,
    trace: cutrace_trace::model::Trace,
    header: cutrace_trace::native::Header,
}

fn api_run(name: &str, lib: &Path, fake_mode: &str, api: &str) -> ApiRun {
    let dir = cutrace_testkit::Dir::new(&format!("fake-api-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cupti.log");
    let out = dir.join("trace");
    let log_s = log.to_str().unwrap();
    let o = run_child_env(
        fake_mode,
        lib,
        &out,
        &[(var::API, api), ("FAKE_CUPTI_LOG", log_s)],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(cutrace_lines(&o).is_empty(), "{:?}", cutrace_lines(&o));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut r = ApiRun {
        whole_kinds: Vec::new(),
        runtime_ids: Vec::new(),
        driver_ids: Vec::new(),
        trace: Default::default(),
        header: Default::default(),
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let n: u32 = f[1].parse().unwrap();
        match f[0] {
            "enable" => r.whole_kinds.push(n),
            "runtime_api" => r.runtime_ids.push(n),
            "driver_api" => r.driver_ids.push(n),
            // Calls that are not enables.
            "register" | "flush" | "disable" => continue,
            other => panic!("unexpected log line {other}"),
        }
        if f.len() > 2 {
            assert_eq!(f[2], "1", "{line}: only enabling is asked for");
        }
    }
    let parts: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    let (t, h) = cutrace_trace::native::read_file(&parts[0], &mut |_, _| {}).unwrap();
    r.trace = t;
    r.header = h;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

const RUNTIME: u32 = cutrace_cupti::activity::kind::RUNTIME;
const DRIVER: u32 = cutrace_cupti::activity::kind::DRIVER;

fn api_note(h: &cutrace_trace::native::Header) -> Option<&String> {
    h.notes.iter().find(|n| n.starts_with("api records"))
}

/// The header's typed account of the API calls kept: (mode, runtime ids left out, driver ids).
fn api_applied(h: &cutrace_trace::native::Header) -> (&str, u64, u64) {
    let a = h
        .api_records
        .as_ref()
        .expect("the header says which API calls it kept");
    let n = |x: Option<u64>| x.expect("a count of the ids left out");
    (a.mode.as_str(), n(a.runtime_left_out), n(a.driver_left_out))
}

/// Kernels still join their launch calls: the correlation a mode must never lose.
fn assert_kernels_joined(r: &ApiRun) {
    assert_eq!(r.trace.kernels.len(), 3);
    assert_eq!(r.trace.api_calls.len(), 3);
    let mut launch: Vec<u64> = r.trace.api_calls.iter().map(|a| a.correlation_id).collect();
    let mut kern: Vec<u64> = r.trace.kernels.iter().map(|k| k.correlation_id).collect();
    launch.sort();
    kern.sort();
    assert_eq!(launch, kern);
}

#[test]
fn api_all_enables_whole_kinds_and_no_callback_ids() {
    let Some(lib) = build_fake() else { return };
    let r = api_run("all", &lib, "0", "all");
    assert!(r.whole_kinds.contains(&RUNTIME) && r.whole_kinds.contains(&DRIVER));
    assert!(r.runtime_ids.is_empty() && r.driver_ids.is_empty());
    assert!(api_note(&r.header).is_none(), "{:?}", r.header.notes);
    assert_eq!(api_applied(&r.header), ("all", 0, 0));
    assert_kernels_joined(&r);
}

#[test]
fn api_lean_enables_every_callback_id_but_the_queries() {
    let Some(lib) = build_fake() else { return };
    let r = api_run("lean", &lib, "0", "lean");
    assert!(!r.whole_kinds.contains(&RUNTIME) && !r.whole_kinds.contains(&DRIVER));
    // The fake names runtime 10, 17 (queries), 41, 131, 211; driver 245, 307, 392, 719 (queries).
    assert_eq!(r.runtime_ids, vec![41, 131, 211]);
    assert_eq!(r.driver_ids, vec![245, 307]);
    // The other kinds are untouched, and the header still lists the API kinds.
    assert!(r
        .whole_kinds
        .contains(&cutrace_cupti::activity::kind::CONCURRENT_KERNEL));
    assert!(
        r.header.kinds.iter().any(|k| k.contains("RUNTIME")),
        "{:?}",
        r.header.kinds
    );
    let note = api_note(&r.header).expect("a note names what lean leaves out");
    assert!(note.starts_with("api records: lean"), "{note}");
    assert!(note.contains("2 runtime and 2 driver"), "{note}");
    assert_eq!(api_applied(&r.header), ("lean", 2, 2));
    for n in [
        "cudaGetLastError",
        "cudaGetDevice",
        "cuDevicePrimaryCtxGetState",
        "cuKernelGetName",
    ] {
        assert!(note.contains(n), "{note}");
    }
    assert_kernels_joined(&r);
}

#[test]
fn api_launches_enables_only_launch_and_copy_callback_ids() {
    let Some(lib) = build_fake() else { return };
    let r = api_run("launches", &lib, "0", "launches");
    assert!(!r.whole_kinds.contains(&RUNTIME) && !r.whole_kinds.contains(&DRIVER));
    assert_eq!(r.runtime_ids, vec![41, 211]);
    assert_eq!(r.driver_ids, vec![307]);
    let note = api_note(&r.header).expect("a note says only launches are recorded");
    assert!(note.starts_with("api records: launches"), "{note}");
    assert!(note.contains("cudaLaunchKernel"), "{note}");
    assert_eq!(api_applied(&r.header), ("launches", 3, 3));
    assert_kernels_joined(&r);
}

#[test]
fn api_filter_falls_back_to_whole_kinds_when_cupti_cannot_filter_launches() {
    let Some(p) = util::programs() else { return };
    // A libcupti without cuptiActivityEnableRuntimeApi/DriverApi.
    let r = api_run("nosym", &p.fake_cupti_no_filter, "0", "lean");
    assert!(r.whole_kinds.contains(&RUNTIME) && r.whole_kinds.contains(&DRIVER));
    assert!(r.runtime_ids.is_empty() && r.driver_ids.is_empty());
    let fallbacks: Vec<&String> = r
        .header
        .notes
        .iter()
        .filter(|n| n.contains("not applied") && n.contains("lacks"))
        .collect();
    assert_eq!(fallbacks.len(), 2, "{:?}", r.header.notes);
    assert!(!r
        .header
        .notes
        .iter()
        .any(|n| n.starts_with("api records: lean")));
    // Not applied: every call was recorded, and the header says so.
    assert_eq!(api_applied(&r.header), ("all", 0, 0));
    assert_kernels_joined(&r);
    // A libcupti that refuses the per-id enables (mode 6).
    let r = api_run("refused", &p.fake_cupti, "6", "launches");
    assert!(r.whole_kinds.contains(&RUNTIME) && r.whole_kinds.contains(&DRIVER));
    assert!(
        r.header
            .notes
            .iter()
            .filter(|n| n.contains("not applied") && n.contains("CUPTI_ERROR_NOT_SUPPORTED"))
            .count()
            == 2,
        "{:?}",
        r.header.notes
    );
    assert_kernels_joined(&r);
    // A libcupti that refuses only ids that launch or copy nothing (mode 7: 131
    // cudaStreamSynchronize, 245 cuMemAlloc_v2): the filter stays, the note names them.
    let r = api_run("some", &p.fake_cupti, "7", "lean");
    assert!(!r.whole_kinds.contains(&RUNTIME) && !r.whole_kinds.contains(&DRIVER));
    assert_eq!(r.runtime_ids, vec![41, 131, 211]);
    assert_eq!(r.driver_ids, vec![245, 307]);
    let note = api_note(&r.header).expect("a lean note");
    assert!(
        note.ends_with(
            "; CUPTI refused to enable 2 more, not recorded either: cudaStreamSynchronize, \
             cuMemAlloc"
        ),
        "{note}"
    );
    assert_kernels_joined(&r);
}

#[test]
fn runtime_cbids_still_choose_the_runtime_ids() {
    let Some(lib) = build_fake() else { return };
    let dir = cutrace_testkit::Dir::new("fake-cbids");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cupti.log");
    let o = run_child_env(
        "0",
        &lib,
        &dir.join("trace"),
        &[
            (var::RUNTIME_CBIDS, "41,211"),
            // Driver records whole, as `--api all` has them (`lean` is the default).
            (var::API, "all"),
            ("FAKE_CUPTI_LOG", log.to_str().unwrap()),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"runtime_api 41 1") && lines.contains(&"runtime_api 211 1"));
    assert!(
        !lines.contains(&format!("enable {RUNTIME}").as_str()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("enable {DRIVER}").as_str()),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("driver_api")),
        "{lines:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The benchmark switch (`cutrace_bench_set`), in a child: prints the fake's log length before
/// each switch and the switch's return code.
#[test]
fn bench_child() {
    if std::env::var("CUTRACE_INJECT_BENCH_CHILD").is_err() {
        return;
    }
    assert_eq!(cutrace_inject::InitializeInjection(), 1);
    let log = std::env::var("FAKE_CUPTI_LOG").unwrap();
    let len = || std::fs::read_to_string(&log).map_or(0, |s| s.len());
    for (kinds, api) in [
        (c"kernel,runtime,driver", c"lean"),
        (c"kernel,runtime,driver", c"all"),
        (c"", c"all"),
        (c"kernel,warp", c"all"),
    ] {
        let at = len();
        let rc =
            // SAFETY: both are NUL-terminated C string literals.
            unsafe { cutrace_inject::bench_hook::cutrace_bench_set(kinds.as_ptr(), api.as_ptr()) };
        println!("SWITCH {at} {rc}");
    }
}

/// Runs `bench_child` (switches: lean, all, nothing, an unknown kind) against the fake libcupti
/// in `mode`, the process started with `api` (None: the default, lean); returns each switch's
/// (offset in the log, return code) and the log.
fn bench_switches(mode: &str, api: Option<&str>, tag: &str) -> Option<(Vec<(usize, i32)>, String)> {
    let lib = build_fake()?;
    let dir = cutrace_testkit::Dir::new(&format!("fake-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cupti.log");
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "bench_child", "--nocapture", "--test-threads=1"])
        .env("CUTRACE_INJECT_BENCH_CHILD", "1")
        .env(var::BENCH_HOOK, "1")
        .env("FAKE_CUPTI_MODE", mode)
        .env("FAKE_CUPTI_LOG", &log)
        .env(var::CUPTI_LIB, &lib)
        .env(var::OUTPUT_DIR, dir.join("trace"))
        .env(var::KINDS, "kernel,runtime,driver")
        .env_remove(var::API)
        .env_remove(var::RUNTIME_CBIDS);
    if let Some(a) = api {
        c.env(var::API, a);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let switches: Vec<(usize, i32)> = out
        .lines()
        // The harness may print "test bench_child ... " before the first line.
        .filter_map(|l| l.split_once("SWITCH ").map(|(_, rest)| rest))
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert_eq!(switches.len(), 4, "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some((switches, text))
}

fn calls_between(text: &str, from: usize, to: usize) -> Vec<String> {
    text[from..to]
        .lines()
        .filter(|l| !l.starts_with("flush"))
        .map(str::to_owned)
        .collect()
}

/// A process that started with `lean`'s allow-list (the default): the first switch turns those
/// ids off before the kinds go on whole, so nothing of the allow-list is left behind.
#[test]
fn the_bench_switch_from_the_default_lean_start_turns_the_allow_list_off() {
    let Some((sw, text)) = bench_switches("0", None, "bench-lean") else {
        return;
    };
    let (k, rt, dr) = (
        cutrace_cupti::activity::kind::CONCURRENT_KERNEL,
        RUNTIME,
        DRIVER,
    );
    assert_eq!(sw[0].1, 0);
    let want: Vec<String> = [
        "runtime_api 41 0".to_string(),
        "runtime_api 131 0".into(),
        "runtime_api 211 0".into(),
        "driver_api 245 0".into(),
        "driver_api 307 0".into(),
        format!("disable {k}"),
        format!("enable {k}"),
        format!("enable {rt}"),
        format!("enable {dr}"),
        "runtime_api 10 0".into(),
        "runtime_api 17 0".into(),
        "driver_api 392 0".into(),
        "driver_api 719 0".into(),
    ]
    .into();
    assert_eq!(calls_between(&text, sw[0].0, sw[1].0), want);
}

/// When CUPTI refuses to turn ids off, the switch says it only approximated the request (1),
/// and the next switch does not turn back on ids that were never turned off.
#[test]
fn the_bench_switch_reports_refused_ids_and_does_not_undo_them() {
    let Some((sw, text)) = bench_switches("6", Some("all"), "bench-refused") else {
        return;
    };
    assert_eq!(sw[0].1, cutrace_inject::bench_hook::APPROXIMATE);
    let second = calls_between(&text, sw[1].0, sw[2].0);
    assert!(
        second
            .iter()
            .all(|l| !l.ends_with(" 1") || l.starts_with("enable")),
        "{second:?}"
    );
    assert!(second[0].starts_with("disable"), "{second:?}");
    assert_eq!(sw[1].1, 0);
}

/// Each switch turns off exactly what was on (whole kinds, or the callback ids a filtered mode
/// turned on) and turns on what is asked for; an unknown kind changes nothing. Checked against
/// the fake libcupti's log of calls.
#[test]
fn the_bench_switch_turns_off_what_was_on_and_on_what_is_asked() {
    // The process starts with every call recorded (`lean` is the default).
    let Some((switches, text)) = bench_switches("0", Some("all"), "bench") else {
        return;
    };
    let calls = |from: usize, to: usize| calls_between(&text, from, to);
    let (k, rt, dr) = (
        cutrace_cupti::activity::kind::CONCURRENT_KERNEL,
        RUNTIME,
        DRIVER,
    );
    // all → lean: the three whole kinds off, on again, then the query ids off (a deny-list:
    // CUPTI 13.0 records nothing for ids enabled one by one after the kind was on whole).
    assert_eq!(switches[0].1, 0);
    let first = calls(switches[0].0, switches[1].0);
    let want: Vec<String> = [
        format!("disable {k}"),
        format!("disable {rt}"),
        format!("disable {dr}"),
        format!("enable {k}"),
        format!("enable {rt}"),
        format!("enable {dr}"),
        "runtime_api 10 0".into(),
        "runtime_api 17 0".into(),
        "driver_api 392 0".into(),
        "driver_api 719 0".into(),
    ]
    .into();
    assert_eq!(first, want);
    // lean → all: exactly those ids back on, the kinds off, then the three kinds on whole.
    assert_eq!(switches[1].1, 0);
    let second = calls(switches[1].0, switches[2].0);
    let want: Vec<String> = [
        "runtime_api 10 1".into(),
        "runtime_api 17 1".into(),
        "driver_api 392 1".into(),
        "driver_api 719 1".into(),
        format!("disable {k}"),
        format!("disable {rt}"),
        format!("disable {dr}"),
        format!("enable {k}"),
        format!("enable {rt}"),
        format!("enable {dr}"),
    ]
    .into();
    assert_eq!(second, want);
    // all → nothing: every kind off, none on.
    assert_eq!(switches[2].1, 0);
    let third = calls(switches[2].0, switches[3].0);
    assert!(third.iter().all(|l| l.starts_with("disable")), "{third:?}");
    assert_eq!(third.len(), 3, "{third:?}");
    // An unknown kind: refused, nothing called.
    assert_eq!(switches[3].1, cutrace_inject::bench_hook::BAD_REQUEST);
    assert!(calls(switches[3].0, text.len())
        .iter()
        .all(|l| !l.starts_with("enable")));
}
