//! `cutrace report --format json` on real torch.profiler traces (captured on the H200, committed
//! under tests/fixtures/kineto) and on a synthetic one must agree exactly with an independent
//! computation: tests/oracle/kineto_oracle.py (Python, decimal.Decimal, event sweep), busy,
//! idle, gaps, the join, and the idle time split at each gap's next launch.

use std::path::Path;
use std::process::Command;

use cutrace_testkit::loud;
use cutrace_testkit::repo;
use serde_json::{json, Value};

fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The contract fields only, in a canonical order.
fn contract(v: &Value) -> Value {
    let pick = |o: &Value, keys: &[&str]| -> Value {
        Value::Object(
            keys.iter()
                .map(|k| (k.to_string(), o[*k].clone()))
                .collect(),
        )
    };
    let devices: Vec<Value> = v["devices"]
        .as_array()
        .expect("devices[]")
        .iter()
        .map(|d| {
            let mut o = pick(
                d,
                &[
                    "device",
                    "kernels",
                    "window_ns",
                    "busy_ns",
                    "summed_kernel_ns",
                    "idle_ns",
                    "gaps",
                ],
            );
            let streams: Vec<Value> = d["streams"]
                .as_array()
                .expect("streams[]")
                .iter()
                .map(|s| pick(s, &["stream", "kernels", "busy_ns"]))
                .collect();
            o["streams"] = Value::Array(streams);
            o["idle_split"] = pick(
                &d["idle_split"],
                &["before_launch_ns", "after_launch_ns", "unknown_ns"],
            );
            o
        })
        .collect();
    json!({
        "devices": devices,
        "correlation": pick(&v["correlation"], &["kernels", "attributed", "orphans"]),
    })
}

fn compare(py: &str, trace: &Path) {
    let oracle = Command::new(py)
        .arg(repo().join("tests/oracle/kineto_oracle.py"))
        .arg(trace)
        .output()
        .expect("run the oracle");
    assert!(
        oracle.status.success(),
        "oracle failed on {}: {}",
        trace.display(),
        String::from_utf8_lossy(&oracle.stderr)
    );
    let ours = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["report", "--format", "json"])
        .arg(trace)
        .output()
        .expect("run cutrace");
    assert!(
        ours.status.success(),
        "cutrace report failed on {}: {}",
        trace.display(),
        String::from_utf8_lossy(&ours.stderr)
    );
    let expected: Value = serde_json::from_slice(&oracle.stdout).unwrap();
    let got: Value = serde_json::from_slice(&ours.stdout).unwrap();
    assert_eq!(
        contract(&got),
        contract(&expected),
        "{}: cutrace and the oracle disagree",
        trace.display()
    );
    // Every fixture has GPU records but `no_gpu_records`, whose launches are all said lost.
    if expected["devices"].as_array().is_some_and(Vec::is_empty) {
        assert!(got["data_loss"]["launches_without_gpu_records"].as_u64() > Some(0));
        return;
    }
    // Kernel shares are of summed kernel time: each at most 100 %, all rows together 100 %.
    let rows = got["kernel_summary"].as_array().unwrap();
    let shares: Vec<f64> = rows
        .iter()
        .map(|r| r["share_of_kernel_time_pct"].as_f64().unwrap())
        .collect();
    assert!(
        shares.iter().all(|s| (0.0..=100.0).contains(s)),
        "{shares:?}"
    );
    if got["kernel_names"].as_u64() == Some(rows.len() as u64) {
        let total: f64 = shares.iter().sum();
        assert!(
            (total - 100.0).abs() < 1e-6,
            "{}: shares add to {total}",
            trace.display()
        );
    }
}

#[test]
fn real_h200_traces_agree_exactly_with_the_oracle() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; the oracle comparison needs it");
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("tests/fixtures/kineto")).unwrap() {
        let p = entry.unwrap().path();
        if p.to_string_lossy().ends_with(".json.gz") {
            compare(py, &p);
            n += 1;
        }
    }
    assert!(n >= 5, "expected the five captured traces, found {n}");
}

#[test]
fn synthetic_overlapping_trace_agrees_exactly_with_the_oracle() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; the oracle comparison needs it");
        return;
    };
    let dir = cutrace_testkit::Dir::new("oracle");
    std::fs::create_dir_all(&dir).unwrap();
    for (kernels, streams, seed) in [(3000, 4, 1), (500, 1, 2), (2000, 8, 3)] {
        let trace = dir.join(format!("syn-{kernels}-{streams}-{seed}.json"));
        let st = Command::new(py)
            .arg(repo().join("bench/gen_kineto.py"))
            .arg(&trace)
            .args([kernels.to_string(), streams.to_string(), seed.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        compare(py, &trace);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
