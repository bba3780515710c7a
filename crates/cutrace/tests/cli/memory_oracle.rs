//! `cutrace report --format json`'s memory pools on real torch.profiler traces with
//! `profile_memory=True` (committed under tests/fixtures/kineto; each one's source beside it)
//! must agree exactly with an independent replay of their `[memory]` events:
//! tests/oracle/memory_oracle.py (Python, decimal times, its own replay), what is live at the
//! end included, in bytes per site (the innermost CPU op holding each allocation).

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
                "live_at_end_by_site": p["live_at_end"]["by_site"],
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
    // The report lists the top sites only (--top, 10): the replay's first as many.
    for p in &mut want {
        if let Some(sites) = p["live_at_end_by_site"].as_array_mut() {
            sites.truncate(10);
        }
    }
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

/// The H100 recording (tests/fixtures/memory_h100/README.md): the driver allocations that are
/// torch's own segments (by address and size, from torch's memory snapshot in the same process)
/// peak at exactly torch.cuda.max_memory_reserved(); the others make up the rest of the driver
/// peak.
#[test]
fn the_driver_allocations_at_torchs_segments_peak_at_its_max_memory_reserved() {
    let dir = repo().join("tests/fixtures/memory_h100");
    let torch: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("torch_record.json")).unwrap())
            .unwrap();
    let segments: std::collections::BTreeSet<(u64, u64)> = torch["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["address"].as_u64().unwrap(), s["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(segments.len(), 14);
    let d = cutrace_testkit::Dir::new("memory-h100");
    let csv = d.path("csv");
    crate::util::bin()
        .arg("convert")
        .arg(dir.join("record_memory.cutrace"))
        .arg("--csv")
        .arg(&csv)
        .run_ok();
    let table = std::fs::read_to_string(csv.join("memory.csv")).unwrap();
    let mut rows = table.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (ts, level, place, op, addr, bytes) = (
        col("ts_ns"),
        col("level"),
        col("place"),
        col("op"),
        col("address"),
        col("bytes"),
    );
    let mut events: Vec<(u64, bool, u64)> = Vec::new();
    let mut found = std::collections::BTreeSet::new();
    for row in rows {
        let f: Vec<&str> = row.split(',').collect();
        if f[level] != "driver" || f[place] != "gpu" {
            continue;
        }
        assert_eq!(f[op], "alloc", "this loop frees nothing: {row}");
        let key = (f[addr].parse().unwrap(), f[bytes].parse().unwrap());
        let torchs = segments.contains(&key);
        if torchs {
            found.insert(key);
        }
        events.push((f[ts].parse().unwrap(), torchs, key.1));
    }
    events.sort_unstable();
    let (mut torch_live, mut other_live) = (0u64, 0u64);
    for (_, torchs, b) in &events {
        if *torchs {
            torch_live += b;
        } else {
            other_live += b;
        }
    }
    assert_eq!(
        found, segments,
        "every segment torch held is a driver allocation"
    );
    assert_eq!(torch_live, torch["max_reserved"].as_u64().unwrap());
    assert_eq!(torch_live, 367_001_600);
    assert_eq!(other_live, 134_711_325);
    let o = crate::util::bin()
        .args(["report", "--format", "json"])
        .arg(dir.join("record_memory.cutrace"))
        .run_ok();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let drv: Vec<&Value> = r["memory"]["pools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["level"] == "driver" && p["place"] == "gpu")
        .collect();
    assert_eq!(drv[0]["peak"]["bytes"], torch_live + other_live);
}
