//! `cutrace doctor` end to end on the doctor crate's fixture trees: exit status and output.

use std::path::PathBuf;
use std::process::{Command, Output};

use cutrace_testkit::loud;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cutrace-doctor/tests/fixtures")
        .join(name)
}

fn cutrace(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .output()
        .expect("run cutrace");
    eprintln!(
        "cutrace {}\n--- stdout\n{}\n--- stderr\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn exit_status_follows_the_verdict() {
    for (name, want) in [
        ("h200-root-open", 0),
        ("admin-only-unprivileged", 1),
        ("cupti13-driver12", 2),
        ("no-driver", 2),
    ] {
        let root = fixture(name);
        let out = cutrace(&["doctor", "--root", root.to_str().expect("utf-8 path")]);
        assert_eq!(out.status.code(), Some(want), "{name}");
    }
}

#[test]
fn json_output_parses_and_names_the_failure() {
    let root = fixture("conf-drift-redhat");
    let out = cutrace(&[
        "doctor",
        "--root",
        root.to_str().expect("utf-8 path"),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let drift = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "config-drift")
        .expect("config-drift check");
    assert_eq!(drift["status"], "fail");
    assert_eq!(drift["fix"][0], "sudo dracut --regenerate-all -f");
    assert_eq!(v["counters_available"], false);
}

#[test]
fn text_output_shows_evidence_and_fix_for_failures() {
    let root = fixture("admin-only-unprivileged");
    let out = cutrace(&["doctor", "--root", root.to_str().expect("utf-8 path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" FAIL counter-access"), "{text}");
    assert!(
        text.contains("evidence: /proc/driver/nvidia/params: RmProfilingAdminOnly: 1"),
        "{text}"
    );
    assert!(
        text.contains("NVreg_RestrictProfilingToAdminUsers=0"),
        "{text}"
    );
    assert!(
        text.contains("tracing: available; counter profiling: NOT available"),
        "{text}"
    );
}

/// A bad --root is not a verdict: exit 3 (2 means "even tracing is not available"), a message
/// that says what is wrong with the path, and with --format json an `{"error"}` object on stdout.
#[test]
fn a_bad_root_exits_3_and_says_what_is_wrong() {
    let tmp = cutrace_testkit::Dir::new("doctor-root");
    let file = tmp.path("root");
    std::fs::write(&file, b"x").unwrap();
    let file_s = file.to_str().expect("utf-8 path");
    for (root, want) in [
        ("/nonexistent/cutrace-root", "does not exist"),
        (file_s, "is not a directory"),
    ] {
        let out = cutrace(&["doctor", "--root", root]);
        assert_eq!(out.status.code(), Some(3), "{root}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want) && err.contains(root), "{root}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{root}: text output has nothing on stdout"
        );

        let out = cutrace(&["doctor", "--root", root, "--format", "json"]);
        assert_eq!(out.status.code(), Some(3), "{root}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{root}: stdout is not JSON ({e}): {out:?}"));
        let msg = v["error"].as_str().expect("an error string");
        assert!(msg.contains(want) && msg.contains(root), "{msg}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(want));
    }
    let _ = std::fs::remove_file(&file);
    // The code is documented where the verdict codes are.
    let help = cutrace(&["doctor", "--help"]);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("3 when there was nothing to check"),
        "{help:?}"
    );
}

/// `--probe` where there is no libcuda (this development machine, CI): a clean report, no crash.
#[test]
fn probe_without_libcuda_reports_it() {
    if std::path::Path::new("/proc/driver/nvidia/version").exists() {
        loud!(
            "SKIPPED: this machine has an NVIDIA driver; the no-libcuda path cannot be shown here"
        );
        return;
    }
    let out = cutrace(&["doctor", "--probe", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let err = v["probe"]["error"].as_str().expect("probe error");
    assert!(err.starts_with("libcuda not found"), "{err}");
    assert_eq!(v["probe"]["devices"].as_array().map(Vec::len), Some(0));
    let text = cutrace(&["doctor", "--probe"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("could not probe: libcuda not found"));
}

const FAKE_CUDA: &str = r#"
#include <string.h>
int cuInit(unsigned f){ (void)f; return 0; }
int cuDriverGetVersion(int *v){ *v = 13000; return 0; }
int cuDeviceGetCount(int *n){ *n = 1; return 0; }
int cuDeviceGet(int *d, int o){ *d = o; return 0; }
int cuDeviceGetName(char *b, int n, int d){ (void)d; strncpy(b, "Fake H200", n); return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d){ (void)d; *c = (void*)0x1; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d){ (void)d; return 0; }
int cuCtxPushCurrent_v2(void *c){ (void)c; return 0; }
int cuCtxPopCurrent_v2(void **c){ *c = (void*)0x1; return 0; }
int cuGetErrorName(int r, const char **s){ *s = r ? "CUDA_ERROR_FAKE" : "CUDA_SUCCESS"; return 0; }
"#;

/// A stand-in libcupti: checks every params struct's size against the header's
/// CUPTI_PROFILER_STRUCT_SIZE and fills the outputs; Start returns $FAKE_CUPTI_START.
const FAKE_CUPTI: &str = r#"
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
typedef struct { size_t size; void *priv; } H;
#define CHECK(p, n) if (((H*)(p))->size != (n)) return 1;
static char obj;
int cuptiGetVersion(uint32_t *v){ *v = 130001; return 0; }
/* The activity API every libcupti has; the loader requires it, the probe never calls it. */
int cuptiActivityRegisterCallbacks(void *a, void *b){ (void)a; (void)b; return 0; }
int cuptiActivityEnable(int k){ (void)k; return 0; }
int cuptiActivityDisable(int k){ (void)k; return 0; }
int cuptiActivityGetNextRecord(void *b, size_t n, void **r){ (void)b; (void)n; (void)r; return 12; }
int cuptiActivityFlushAll(int f){ (void)f; return 0; }
int cuptiGetResultString(int r, const char **s){
  *s = r == 0 ? "CUPTI_SUCCESS" : r == 26 ? "CUPTI_ERROR_HARDWARE_BUSY" : r == 35 ? "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" : "CUPTI_ERROR_INVALID_PARAMETER";
  return 0; }
int cuptiProfilerInitialize(void *p){ CHECK(p, 16) return 0; }
int cuptiProfilerDeInitialize(void *p){ CHECK(p, 16) return 0; }
int cuptiProfilerDeviceSupported(void *p){ CHECK(p, 52) int *f = (int*)((char*)p + 20); for (int i = 0; i < 7; i++) f[i] = 3; return 0; }
int cuptiProfilerGetCounterAvailability(void *p){ CHECK(p, 40) size_t *sz = (size_t*)((char*)p + 24); if (!*(void**)((char*)p + 32)) *sz = 16; return 0; }
int cuptiDeviceGetChipName(void *p){ CHECK(p, 32) *(const char**)((char*)p + 24) = "GH100"; return 0; }
int cuptiProfilerHostInitialize(void *p){ CHECK(p, 48) *(void**)((char*)p + 40) = &obj; return 0; }
int cuptiProfilerHostDeinitialize(void *p){ CHECK(p, 24) return 0; }
int cuptiProfilerHostConfigAddMetrics(void *p){ CHECK(p, 40) return *(size_t*)((char*)p + 32) == 1 ? 0 : 1; }
int cuptiProfilerHostGetConfigImageSize(void *p){ CHECK(p, 32) *(size_t*)((char*)p + 24) = 8; return 0; }
int cuptiProfilerHostGetConfigImage(void *p){ CHECK(p, 40) return 0; }
int cuptiRangeProfilerEnable(void *p){ CHECK(p, 32) *(void**)((char*)p + 24) = &obj; return 0; }
int cuptiRangeProfilerDisable(void *p){ CHECK(p, 24) return 0; }
int cuptiRangeProfilerGetCounterDataSize(void *p){ CHECK(p, 64) *(size_t*)((char*)p + 56) = 8; return 0; }
int cuptiRangeProfilerCounterDataImageInitialize(void *p){ CHECK(p, 40) return 0; }
int cuptiRangeProfilerSetConfig(void *p){ CHECK(p, 90) return *(int*)((char*)p + 56) == 2 && *(int*)((char*)p + 60) == 3 ? 0 : 1; }
int cuptiRangeProfilerStart(void *p){ CHECK(p, 24) const char *e = getenv("FAKE_CUPTI_START"); return e ? atoi(e) : 0; }
int cuptiRangeProfilerStop(void *p){ CHECK(p, 41) return 0; }
int cuptiRangeProfilerPushRange(void *p){ CHECK(p, 32) return 0; }
int cuptiRangeProfilerPopRange(void *p){ CHECK(p, 24) return 0; }
"#;

fn build_fakes(dir: &std::path::Path) -> bool {
    for (name, src) in [("libcuda.so.1", FAKE_CUDA), ("libcupti.so.13", FAKE_CUPTI)] {
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, src).expect("write");
        match Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.join(name))
            .arg(&c)
            .status()
        {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("cc failed: {s}"),
            Err(e) => {
                loud!("SKIPPED: no C compiler `cc` to build the stand-in libcuda/libcupti ({e})");
                return false;
            }
        }
    }
    true
}

/// The whole probe sequence against stand-in libraries: every struct size checked, the
/// session completes, and CUPTI_ERROR_HARDWARE_BUSY at Start becomes a "busy" verdict, exit 1.
#[test]
fn probe_runs_the_session_and_reports_cupti_results() {
    let dir = cutrace_testkit::Dir::new("probe-fakes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    if !build_fakes(&dir) {
        return;
    }
    let root = fixture("h200-root-open");
    let run = |start: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        c.args(["doctor", "--probe", "--format", "json", "--root"])
            .arg(&root)
            .env("LD_LIBRARY_PATH", &dir);
        match start {
            Some(s) => c.env("FAKE_CUPTI_START", s),
            None => c.env_remove("FAKE_CUPTI_START"),
        };
        let out = c.output().expect("run");
        eprintln!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        (out.status.code(), v)
    };
    let (code, v) = run(None);
    let dev = &v["probe"]["devices"][0];
    assert_eq!(dev["verdict"], "available", "{v:#}");
    assert_eq!(dev["name"], "Fake H200");
    assert_eq!(dev["chip"], "GH100");
    let calls: Vec<&str> = dev["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["call"].as_str())
        .collect();
    assert_eq!(calls.last(), Some(&"cuptiRangeProfilerDisable"));
    assert!(calls.contains(&"cuptiRangeProfilerStop"));
    assert!(
        dev["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .all(|s| s["result"] == "CUPTI_SUCCESS"),
        "{dev:#}"
    );
    assert_eq!(v["probe"]["cupti_api_version"], 130001);
    assert_eq!(code, Some(0));

    let (code, v) = run(Some("26"));
    let dev = &v["probe"]["devices"][0];
    assert_eq!(dev["verdict"], "busy", "{v:#}");
    assert!(dev["explanation"]
        .as_str()
        .expect("text")
        .contains("CUPTI_ERROR_HARDWARE_BUSY"));
    // The session is still ended cleanly after the failure.
    let calls: Vec<&str> = dev["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["call"].as_str())
        .collect();
    assert_eq!(calls.last(), Some(&"cuptiRangeProfilerDisable"));
    assert_eq!(v["counters_available"], false);
    assert_eq!(code, Some(1));

    let (code, v) = run(Some("35"));
    assert_eq!(v["probe"]["devices"][0]["verdict"], "denied");
    assert_eq!(code, Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_command_line_exits_3_not_a_verdict() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["doctor", "--formatt", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "2 would read as \"tracing not available\""
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
}
