//! The H200 run of `cutrace doctor --probe --format json` (gpu/doctor_probe.sh, committed under
//! tests/fixtures/doctor-h200) against a snapshot of the files it read there
//! (crates/cutrace-doctor/tests/fixtures/h200-snapshot): reading the snapshot through `--root`
//! must give the same static verdicts the real machine gave, and the recorded probe must show the
//! live Range Profiler session that succeeded there.

use std::process::Command;

use cutrace_testkit::repo;
use serde_json::Value;

#[test]
fn snapshot_root_gives_the_verdicts_the_h200_gave() {
    let real: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/doctor-h200/doctor-probe.json"))
            .unwrap(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["doctor", "--format", "json", "--root"])
        .arg(repo().join("crates/cutrace-doctor/tests/fixtures/h200-snapshot"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts = |v: &Value| -> Vec<(String, String, String)> {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["status"].as_str().unwrap().to_owned(),
                    c["summary"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(verdicts(&snap), verdicts(&real));
    assert_eq!(real["exit_status"], 0);
    assert_eq!(real["counters_available"], true);

    // What the live probe saw on the H200: driver CUDA 13.0, CUPTI 13.0 (130001), a session that
    // went through Enable → Start → Push/Pop → Stop → Disable with CUPTI_SUCCESS at every step.
    let probe = &real["probe"];
    assert_eq!(probe["driver_cuda_version"], 13000);
    assert_eq!(probe["cupti_api_version"], 130001);
    let gpu = &probe["devices"][0];
    assert_eq!(gpu["name"], "NVIDIA H200");
    assert_eq!(gpu["verdict"], "available");
    let calls: Vec<&str> = gpu["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(s["result"], "CUPTI_SUCCESS", "{s}");
            s["call"].as_str().unwrap()
        })
        .collect();
    for needed in [
        "cuptiRangeProfilerEnable",
        "cuptiRangeProfilerStart",
        "cuptiRangeProfilerStop",
        "cuptiRangeProfilerDisable",
    ] {
        assert!(calls.contains(&needed), "{needed} missing from {calls:?}");
    }
}
