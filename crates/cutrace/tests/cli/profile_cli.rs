//! `cutrace profile`: option checks with no CUPTI, and `--list-metrics` against CUPTI's own host
//! library for chip GH100.
//!
//! The tests marked ignored need libcupti.so.13 and libnvperf_host.so from the
//! `nvidia-cuda-cupti==13.0.*` wheel, named by CUTRACE_CUPTI_LIB; `.ci/run` installs the wheel
//! and runs them with `-- --ignored`. Without the wheel they stay ignored, never passed.

use cutrace_settings::var;
use std::process::{Command, Output};

fn profile(args: &[&str], cupti: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
    c.current_dir(cutrace_testkit::repo())
        .arg("profile")
        .args(args);
    match cupti {
        Some(lib) => c.env(var::CUPTI_LIB, lib),
        None => c.env_remove(var::CUPTI_LIB),
    };
    c.output().unwrap()
}

fn wheel() -> String {
    let lib = std::env::var(var::CUPTI_LIB)
        .expect("CUTRACE_CUPTI_LIB must name the nvidia-cuda-cupti wheel's libcupti.so.13");
    assert!(
        std::path::Path::new(&lib).is_file(),
        "CUTRACE_CUPTI_LIB={lib} is not a file"
    );
    lib
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_options_are_refused_before_anything_runs() {
    let o = profile(&["--set", "full", "--", "true"], None);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("unknown metric set 'full'; known sets: basic, sol"),
        "{}",
        stderr(&o)
    );
    let o = profile(&["--kernels", "gemm(", "--", "true"], None);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("--kernels \"gemm(\" is not a regex"),
        "{}",
        stderr(&o)
    );
    let o = profile(
        &["--set", "basic", "--metrics", "a.sum", "--", "true"],
        None,
    );
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let o = profile(&["--metrics", "a.sum,a.sum", "--", "true"], None);
    assert!(
        stderr(&o).contains("--metrics names a.sum twice"),
        "{}",
        stderr(&o)
    );
    // No program and no --list-metrics.
    let o = profile(&[], None);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
}

#[test]
fn list_metrics_without_libcupti_says_what_it_needs() {
    let o = profile(
        &["--list-metrics", "--chip", "GH100"],
        Some("/nonexistent/libcupti.so.13"),
    );
    assert_eq!(o.status.code(), Some(125));
    let e = stderr(&o);
    assert!(e.contains("libnvperf_host.so"), "{e}");
    assert!(e.contains("/nonexistent/libcupti.so.13"), "{e}");
}

#[test]
#[ignore = "needs the nvidia-cuda-cupti wheel's libcupti.so.13 (CUTRACE_CUPTI_LIB); .ci/run sets it"]
fn wheel_basic_set_is_one_pass_on_gh100() {
    let lib = wheel();
    let o = profile(
        &[
            "--list-metrics",
            "--chip",
            "GH100",
            "--set",
            "basic",
            "--format",
            "json",
        ],
        Some(&lib),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["chip"], "GH100");
    assert_eq!(v["set"], "basic");
    assert_eq!(v["passes"], 1, "{v}");
    let m = v["metrics"].as_array().unwrap();
    assert_eq!(m.len(), 10);
    assert_eq!(m[1]["name"], "sm__ctas_launched.sum");
    assert_eq!(m[1]["type"], "counter");
    assert_eq!(m[1]["dim_unit"], "cta");
    assert_eq!(m[1]["description"], "# of CTAs launched");
    for row in m {
        assert!(!row["description"].as_str().unwrap().is_empty(), "{row}");
    }
}

#[test]
#[ignore = "needs the nvidia-cuda-cupti wheel's libcupti.so.13 (CUTRACE_CUPTI_LIB); .ci/run sets it"]
fn wheel_sol_set_needs_nine_passes_on_gh100() {
    let lib = wheel();
    let o = profile(
        &[
            "--list-metrics",
            "--chip",
            "GH100",
            "--set",
            "sol",
            "--format",
            "json",
        ],
        Some(&lib),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["passes"], 9, "{v}");
    let o = profile(
        &["--list-metrics", "--chip", "GH100", "--set", "sol"],
        Some(&lib),
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with("metric set sol on GH100: 10 metrics\n"),
        "{text}"
    );
    assert!(
        text.contains("passes: 9 (each profiled kernel is replayed 9 times)"),
        "{text}"
    );
}

#[test]
#[ignore = "needs the nvidia-cuda-cupti wheel's libcupti.so.13 (CUTRACE_CUPTI_LIB); .ci/run sets it"]
fn wheel_metric_lists_count_passes_and_name_what_the_chip_refuses() {
    let lib = wheel();
    let o = profile(
        &[
            "--list-metrics",
            "--chip",
            "GH100",
            "--metrics",
            "sm__ctas_launched.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "--format",
            "json",
        ],
        Some(&lib),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["set"], serde_json::Value::Null);
    // sm__throughput alone needs 8 passes on GH100 (COUNTERS.md); the CTA count rides along.
    assert_eq!(v["passes"], 8, "{v}");

    let o = profile(
        &[
            "--list-metrics",
            "--chip",
            "GH100",
            "--metrics",
            "sm__ctas_launched.sum,launch__grid_size",
        ],
        Some(&lib),
    );
    assert_eq!(o.status.code(), Some(125));
    let e = stderr(&o);
    assert!(
        e.contains("chip GH100 has no Range Profiler metric \"launch__grid_size\""),
        "{e}"
    );
    assert!(!e.contains("sm__ctas_launched"), "{e}");

    let o = profile(&["--list-metrics", "--chip", "NOPE1"], Some(&lib));
    assert_eq!(o.status.code(), Some(125));
    assert!(
        stderr(&o).contains("unknown chip 'NOPE1'; this CUPTI knows: "),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("GH100"));
}

#[test]
#[ignore = "needs the nvidia-cuda-cupti wheel's libcupti.so.13 (CUTRACE_CUPTI_LIB); .ci/run sets it"]
fn wheel_every_metric_of_gh100_is_listed_with_a_type() {
    let lib = wheel();
    let o = profile(
        &["--list-metrics", "--chip", "GH100", "--format", "json"],
        Some(&lib),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("passes").is_none(), "no passes without a list");
    let m = v["metrics"].as_array().unwrap();
    assert!(m.len() > 1000, "{}", m.len());
    for base in [
        "sm__ctas_launched",
        "dram__bytes_read",
        "smsp__inst_executed",
    ] {
        assert!(m.iter().any(|r| r["name"] == base), "{base} missing");
    }
    assert!(m.iter().any(|r| r["type"] == "ratio"));
    assert!(m.iter().any(|r| r["type"] == "throughput"));
    assert!(m.iter().all(|r| r["type"] != "?"));
}

/// A directory with a stand-in injection library (an ELF magic only: `sh` never loads CUDA).
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("cutrace-profile-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("libcutrace_inject.so"),
        b"\x7fELF, not really a library",
    )
    .unwrap();
    Scratch(d)
}

const SHOW: &str = "echo \"[$CUTRACE_COUNTERS|$CUTRACE_COUNTERS_KERNELS|$CUTRACE_COUNTERS_EVERY|$CUTRACE_COUNTERS_MAX_KERNELS|$CUTRACE_COUNTERS_REQUIRE]\"";

#[test]
fn profile_runs_the_program_as_record_does_with_the_counter_settings() {
    let d = scratch("env");
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, d.0.join("libcutrace_inject.so"))
        .env_remove("CUDA_INJECTION64_PATH")
        .args([
            "profile",
            "-q",
            "--set",
            "sol",
            "--kernels",
            "gemm",
            "--every",
            "2",
        ])
        .args(["--require-counters", "-o"])
        .arg(d.0.join("trace"))
        .args(["--", "sh", "-c", SHOW])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let sol = "sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,gpc__cycles_elapsed.max,sm__cycles_active.avg,dram__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.avg.per_second";
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("[{sol}|gemm|2||1]")
    );
    // The default is the basic set; the program's exit status is its own.
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, d.0.join("libcutrace_inject.so"))
        .args(["profile", "-q", "--max-kernels", "5", "-o"])
        .arg(d.0.join("trace"))
        .args(["--", "sh", "-c", &format!("{SHOW}; exit 3")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("[gpu__time_duration.sum,sm__ctas_launched.sum,"),
        "{out}"
    );
    assert!(out.trim().ends_with("|||5|]"), "{out}");
}

#[test]
fn record_does_not_inherit_counter_settings_left_in_the_environment() {
    let d = scratch("record");
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, d.0.join("libcutrace_inject.so"))
        .env(var::COUNTERS, "sm__ctas_launched.sum")
        .env(var::COUNTERS_REQUIRE, "1")
        .args(["record", "-q", "-o"])
        .arg(d.0.join("trace"))
        .args(["--", "sh", "-c", SHOW])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "[||||]");
}

/// `--pause-dcgm`: the profile runs inside DCGM's guard (a stand-in `dcgmi` on PATH logs its
/// arguments): paused before the program, resumed after it, with the program's exit status and
/// the counter settings passed through; without dcgmi nothing runs and the error says why.
#[test]
fn pause_dcgm_pauses_runs_and_resumes() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("pause-dcgm");
    let bin = d.0.join("bin");
    let run = d.0.join("run");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        bin.join("dcgmi"),
        "#!/bin/sh\necho \"$*\" >> \"$DCGMI_LOG\"\n",
    )
    .unwrap();
    std::fs::set_permissions(bin.join("dcgmi"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = d.0.join("dcgmi.log");
    let cmd = |path: String| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        c.env(var::INJECT_LIB, d.0.join("libcutrace_inject.so"))
            .env("PATH", path)
            .env("DCGMI_LOG", &log)
            .env("TMPDIR", &d.0)
            .env("XDG_RUNTIME_DIR", &run)
            .args(["profile", "-q", "--pause-dcgm", "--kernels=-gemm", "-o"])
            .arg(d.0.join("trace"))
            .args([
                "--",
                "/bin/sh",
                "-c",
                &format!("{SHOW}; cat \"$DCGMI_LOG\"; exit 3"),
            ]);
        c
    };
    let o = cmd(format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    ))
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    // The program saw the counter settings (a regex starting with '-' too) and a paused DCGM.
    assert!(
        lines[0].starts_with("[gpu__time_duration.sum,") && lines[0].contains("|-gemm|"),
        "{out}"
    );
    assert_eq!(lines[1..], ["profile --pause"], "{out}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged.lines().collect::<Vec<_>>(),
        ["profile --pause", "profile --resume"]
    );
    assert!(
        stderr(&o).contains("DCGM profiling metrics resumed."),
        "{}",
        stderr(&o)
    );

    std::fs::remove_file(&log).unwrap();
    let o = cmd("/nonexistent".into()).output().unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("dcgmi not found on PATH"),
        "{}",
        stderr(&o)
    );
    assert!(!log.exists(), "nothing ran");
}

/// Under MPS (here: a control pipe in CUDA_MPS_PIPE_DIRECTORY, as a running daemon leaves),
/// `cutrace sample` refuses before anything runs, saying what PM Sampling did through MPS on the
/// H200 and how to run without it (exit 125, the program never started).
#[test]
fn sample_refuses_to_run_through_mps() {
    let dir = cutrace_testkit::Dir::new("sample-mps");
    std::fs::write(dir.path("control"), b"").unwrap();
    let marker = dir.path("ran");
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .current_dir(cutrace_testkit::repo())
        .env("CUDA_MPS_PIPE_DIRECTORY", dir.path(""))
        .args(["sample", "-o"])
        .arg(dir.path("t"))
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("MPS is active here"), "{err}");
    assert!(err.contains("nvidia-cuda-mps-control"), "{err}");
    assert!(!marker.exists(), "the program ran: {err}");
}
