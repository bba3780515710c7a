//! `cutrace report --format json`'s memory pools on real torch.profiler traces with
//! `profile_memory=True` (committed under tests/fixtures/kineto; each one's source beside it)
//! must agree exactly with an independent replay of their `[memory]` events:
//! tests/oracle/memory_oracle.py (Python, decimal times, its own replay).

use std::path::Path;
use std::process::Command;

use cutrace_testkit::{loud, repo, Run};
use serde_json::{json, Value};

/// The figures the oracle computes, from cutrace's report, pools keyed as the oracle keys them.
fn ours(report: &Value) -> Vec<Value> {
    let mut pools: Vec<Value> = report["memory"]["pools"]
        .as_array()
        .expect("memory.pools[]")
        .iter()
        .map(|p| {
            json!({
                "pid": p["pid"],
                "place": p["place"],
                "device": p["device"],
                "allocs": p["allocs"],
                "frees": p["frees"],
                "frees_without_alloc": p["frees_without_alloc"],
                "peak_bytes": p["peak"]["bytes"],
                "peak_at_ns": p["peak"]["at_ns"],
                "reported_allocated_bytes": p["reported_peak"]["allocated_bytes"],
                "reported_at_ns": p["reported_peak"]["at_ns"],
                "reported_reserved_bytes": p["reported_peak"]["reserved_bytes"],
                "live_at_end_allocations": p["live_at_end"]["allocations"],
                "live_at_end_bytes": p["live_at_end"]["bytes"],
            })
        })
        .collect();
    pools.sort_by_key(key);
    pools
}

fn key(p: &Value) -> (u64, String, u64) {
    (
        p["pid"].as_u64().unwrap_or(0),
        p["place"].as_str().unwrap_or("").to_owned(),
        p["device"].as_u64().unwrap_or(0),
    )
}

fn compare(py: &str, trace: &Path) -> u64 {
    let oracle = Command::new(py)
        .arg(repo().join("tests/oracle/memory_oracle.py"))
        .arg(trace)
        .run_ok();
    let expected: Value = serde_json::from_slice(&oracle.stdout).unwrap();
    let mut want = expected["pools"].as_array().unwrap().clone();
    want.sort_by_key(key);
    let out = crate::util::bin()
        .args(["report", "--format", "json"])
        .arg(trace)
        .run_ok();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        ours(&report),
        want,
        "{}: cutrace and the replay disagree",
        trace.display()
    );
    want.iter()
        .filter_map(|p| p["peak_bytes"].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn real_memory_traces_agree_exactly_with_the_replay() {
    let Some(py) = ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        loud!("SKIPPED: no python3 on PATH; the replay comparison needs it");
        return;
    };
    let mut compared = 0;
    for entry in std::fs::read_dir(repo().join("tests/fixtures/kineto")).unwrap() {
        let p = entry.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        let mut text = Vec::new();
        if p.to_string_lossy().ends_with(".gz") {
            let mut d = flate2::read::GzDecoder::new(&bytes[..]);
            std::io::Read::read_to_end(&mut d, &mut text).unwrap();
        } else {
            text = bytes;
        }
        if !contains(&text, b"\"[memory]\"") {
            continue;
        }
        let peak = compare(py, &p);
        assert!(peak > 0, "{}: no peak", p.display());
        compared += 1;
    }
    assert!(compared >= 1, "no fixture with [memory] events");
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// What the H200 recorded (tests/fixtures/memory_h200/README.md): the framework peak of a
/// profile_memory trace is torch's max_memory_allocated(); the driver peak of `record --memory`
/// is torch's max_memory_reserved() plus two 64 MiB allocations outside torch's allocator and
/// 951 small ones of CUDA's own.
#[test]
fn the_h200_memory_peaks_read_as_torch_and_the_driver_saw_them() {
    let torch: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/memory_h200/torch.json")).unwrap(),
    )
    .unwrap();
    let report = |p: &Path| -> Value {
        let o = crate::util::bin()
            .args(["report", "--format", "json"])
            .arg(p)
            .run_ok();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let pool = |r: &Value, level: &str| -> Value {
        let pools = r["memory"]["pools"].as_array().expect("memory.pools[]");
        let mine: Vec<&Value> = pools
            .iter()
            .filter(|p| p["level"] == level && p["place"] == "gpu")
            .collect();
        assert_eq!(mine.len(), 1, "{level}: {pools:?}");
        mine[0].clone()
    };
    let r = report(&repo().join("tests/fixtures/kineto/h200_profile_memory.json.gz"));
    let fw = pool(&r, "framework");
    assert_eq!(
        fw["reported_peak"]["allocated_bytes"],
        torch["h200_profile_memory"]["max_memory_allocated"]
    );
    let r = report(&repo().join("tests/fixtures/memory_h200/record_memory.cutrace"));
    let drv = pool(&r, "driver");
    let peak = drv["peak"]["bytes"].as_u64().unwrap();
    assert_eq!(
        peak,
        torch["record_memory"]["driver_peak_bytes"]
            .as_u64()
            .unwrap()
    );
    assert_eq!(drv["peak"]["live"]["allocations"], 967);
    let largest = drv["peak"]["live"]["largest"].as_array().unwrap();
    assert_eq!(largest[0]["bytes"], 64 << 20);
    assert_eq!(largest[1]["bytes"], 64 << 20);
    let reserved = torch["record_memory"]["max_memory_reserved"]
        .as_u64()
        .unwrap();
    assert_eq!(peak - reserved - (128 << 20), 493_597);
}
