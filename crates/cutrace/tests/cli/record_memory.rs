//! `cutrace record --memory` → `cutrace report`, through the fake libcupti: scripted
//! CUpti_ActivityMemory4 records (MEMORY2) of the CUDA driver's allocations and frees become
//! the report's driver-level memory pool, with the planted peak, live set and leak exact; the
//! kind is enabled with `--memory` and only then (the fake's call log says which kinds were).
//! With it come CUDA's memory pools (MEMORY_POOL records, and the pool side of MEMORY2's for
//! `cudaMallocAsync`): each pool's reserved and used bytes at the driver's peak, exact.

use crate::monitor_cli::setup;
use cutrace_testkit::Run;
use serde_json::Value;

/// Two allocations live at once (4,000 B at 3,000 ns), one freed, one more allocated and never
/// freed (500 B), and a free of memory allocated before the trace (64 B), across two buffers.
const SCRIPT: &str = "device 0 00112233445566778899aabbccddeeff
api 1 1500 1900
kernel 0 7 2000 2500 1 0
memory 2 36864 64 1800 0
memory 1 4096 1000 2000 11
memory 1 8192 3000 3000 12
flush
memory 2 4096 1000 4000 13
memory 1 12288 500 5000 14
memory 2 8192 3000 6000 15
";

/// A pool created at 1,000 ns (at 65,536); a plain allocation (1,000 B) and two blocks from the
/// pool (3,000 B, 1,000 B): the driver's peak is 5,000 B at 4,000 ns, when the pool held 2 MiB
/// and its blocks used 4,000 B. One block freed, the pool trimmed to 1 MiB (1,000 B used).
const POOL_SCRIPT: &str = "device 0 00112233445566778899aabbccddeeff
api 1 1500 1900
kernel 0 7 2000 2500 1 0
pool 1 65536 0 0 1000 20
memory 1 4096 1000 2000 11
poolmemory 1 131072 3000 3000 12 65536 2097152 3000
flush
poolmemory 1 135168 1000 4000 13 65536 2097152 4000
poolmemory 2 131072 3000 5000 14 65536 2097152 1000
pool 3 65536 1048576 1000 6000 15
memory 2 4096 1000 7000 16
";

/// The report of a recording with `args`, and the kinds the injection enabled (the fake's log).
fn record(args: &[&str], name: &str) -> (Value, Vec<String>) {
    record_script(args, name, SCRIPT)
}

fn record_script(args: &[&str], name: &str, script: &str) -> (Value, Vec<String>) {
    let (v, enabled, _) = record_script_text(args, name, script);
    (v, enabled)
}

/// As [`record_script`], with the text report of the recording too.
fn record_script_text(args: &[&str], name: &str, script: &str) -> (Value, Vec<String>, String) {
    let s = setup(name).expect("fake libcupti");
    let sc = s.write("script", script);
    let done = s.write("go", "");
    let log = s.dir.join("calls.log");
    let trace = s.dir.join("trace");
    let mut all = vec!["record", "-q"];
    all.extend_from_slice(args);
    all.push("-o");
    let mut rec = s.cutrace(&all, &done);
    rec.arg(&trace)
        .args(["--", "host", "-", "local", "iw"])
        .env("FAKE_CUPTI_SCRIPT", &sc)
        .env("FAKE_CUPTI_LOG", &log)
        .run_code(3);
    let o = crate::util::bin()
        .args(["report", "--format", "json"])
        .arg(&trace)
        .run_ok();
    let text = crate::util::bin().arg("report").arg(&trace).run_ok();
    let enabled = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("enable ").map(str::to_owned))
        .collect();
    (
        serde_json::from_slice(&o.stdout).unwrap(),
        enabled,
        String::from_utf8(text.stdout).unwrap(),
    )
}

#[test]
fn recorded_allocations_reach_the_report_exactly() {
    if setup("record-memory-probe").is_none() {
        return;
    }
    let (r, enabled) = record(&["--memory"], "record-memory");
    assert!(enabled.iter().any(|k| k == "49"), "{enabled:?}");
    let pools = r["memory"]["pools"].as_array().expect("memory pools");
    assert_eq!(pools.len(), 1, "{pools:?}");
    let p = &pools[0];
    assert_eq!(
        (p["level"].as_str(), p["place"].as_str()),
        (Some("driver"), Some("gpu"))
    );
    assert_eq!(
        (p["allocs"].as_u64(), p["frees"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(p["frees_without_alloc"], 1);
    assert_eq!(p["frees_without_alloc_bytes"], 64);
    assert_eq!(p["peak"]["bytes"], 4_000);
    assert_eq!(p["peak"]["at_ns"], 3_000);
    assert_eq!(p["peak"]["live"]["allocations"], 2);
    assert_eq!(p["live_at_end"]["bytes"], 500);
    assert_eq!(p["live_at_end"]["largest"][0]["address"], 12_288);
    assert!(p["reported_peak"].is_null());
}

#[test]
fn without_the_flag_the_kind_is_not_enabled() {
    if setup("record-memory-off-probe").is_none() {
        return;
    }
    let (r, enabled) = record(&[], "record-memory-off");
    assert!(
        !enabled.is_empty() && !enabled.iter().any(|k| k == "49" || k == "50"),
        "{enabled:?}"
    );
    assert_eq!(r["trace"]["kernels"], 1);
    // Named as a kind, it is enabled too.
    let (_, enabled) = record(&["--kinds", "kernel,runtime,memory"], "record-memory-kind");
    assert!(enabled.iter().any(|k| k == "49"), "{enabled:?}");
}

#[test]
fn recorded_pools_show_reserved_and_used_at_the_peak() {
    if setup("record-pools-probe").is_none() {
        return;
    }
    let (r, enabled, text) = record_script_text(&["--memory"], "record-pools", POOL_SCRIPT);
    // The text says the same, per pool.
    for want in [
        "CUDA memory pools (cudaMallocAsync;",
        "pool 0x10000 (local): 2 allocations, 1 free, 4,000 B",
        "trimmed once",
        "at the driver's peak (+3.000 µs): reserved 2,097,152 B",
        "used 4,000 B",
        "at the end (+5.000 µs): reserved 1,048,576 B",
    ] {
        assert!(text.contains(want), "wanted {want:?} in\n{text}");
    }
    assert!(
        enabled.iter().any(|k| k == "49") && enabled.iter().any(|k| k == "50"),
        "{enabled:?}"
    );
    let drv = &r["memory"]["pools"][0];
    assert_eq!(drv["level"], "driver");
    assert_eq!(drv["peak"]["bytes"], 5_000);
    assert_eq!(drv["peak"]["at_ns"], 4_000);
    assert_eq!(drv["live_at_end"]["bytes"], 1_000);
    let pools = r["memory"]["cuda_pools"].as_array().expect("cuda_pools");
    assert_eq!(pools.len(), 1, "{pools:?}");
    let p = &pools[0];
    assert_eq!(p["address"], 65_536);
    assert_eq!(
        (p["pool_type"].as_str(), p["managed"].as_bool()),
        (Some("local"), Some(false))
    );
    assert_eq!(p["release_threshold_bytes"], 1 << 20);
    assert_eq!(p["created_at_ns"], 1_000);
    assert!(p["destroyed_at_ns"].is_null());
    assert_eq!(
        (
            p["allocs"].as_u64(),
            p["frees"].as_u64(),
            p["trims"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(p["alloc_bytes"], 4_000);
    assert_eq!(p["reserved_peak_bytes"], 2 << 20);
    assert_eq!(p["used_peak_bytes"], 4_000);
    let at = &p["at_driver_peak"];
    assert_eq!(at["at_ns"], 4_000);
    assert_eq!(at["reserved_bytes"], 2 << 20);
    assert_eq!(at["used_bytes"], 4_000);
    assert_eq!(at["unused_bytes"], (2 << 20) - 4_000);
    let end = &p["at_end"];
    assert_eq!(
        (end["at_ns"].as_u64(), end["reserved_bytes"].as_u64()),
        (Some(6_000), Some(1 << 20))
    );
    assert_eq!(end["used_bytes"], 1_000);
}

/// Recorded on an H100 (tests/fixtures/native/pools_h100, gpu/pools.cu): each CUDA memory
/// pool's reserved and used peaks in the report equal the program's own high-water marks
/// (cudaMemPoolGetAttribute's ReservedMemHigh and UsedMemHigh), for an explicit pool and the
/// default pool of cudaMallocAsync.
#[test]
fn real_pools_peak_where_the_program_says() {
    let dir = cutrace_testkit::fixture("native/pools_h100");
    let own: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("program.json")).unwrap()).unwrap();
    let o = crate::util::bin()
        .args(["report", "--format", "json"])
        .arg(&dir)
        .run_ok();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pools = r["memory"]["cuda_pools"].as_array().expect("cuda_pools");
    assert_eq!(pools.len(), 2, "{pools:?}");
    let by_threshold = |t: u64| {
        pools
            .iter()
            .find(|p| p["release_threshold_bytes"] == t)
            .unwrap_or_else(|| panic!("no pool with threshold {t}: {pools:?}"))
    };
    for (p, mine) in [
        (by_threshold(64 << 20), &own["pool"]),
        (by_threshold(0), &own["default"]),
    ] {
        assert_eq!(p["reserved_peak_bytes"], mine["reserved_high"], "{p}");
        assert_eq!(p["used_peak_bytes"], mine["used_high"], "{p}");
        assert_eq!(p["allocs"], p["frees"], "every block freed: {p}");
        assert_eq!(
            p["at_end"]["reserved_bytes"], 0,
            "trimmed or destroyed: {p}"
        );
    }
    assert_eq!(own["pool"]["reserved_high"], 100_663_296);
    assert_eq!(own["default"]["used_high"], 8_388_608);
}
