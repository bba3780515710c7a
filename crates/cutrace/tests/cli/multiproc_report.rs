//! A trace recorded from four processes on one GPU (the H200 fixture `multiproc`): every process
//! counts its CUDA streams and correlation ids from 1, so the report must keep each process's
//! streams apart and name them as the process knows them, with its pid.

use std::collections::BTreeSet;
use std::process::Command;

fn report(args: &[&str]) -> std::process::Output {
    let dir = cutrace_testkit::fixture("native/multiproc");
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("report")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn each_process_keeps_its_own_streams_named_with_its_pid() {
    let out = report(&["--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pids: Vec<u64> = r["trace"]["id_parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert_eq!(pids, [491, 492, 493, 494]);
    // cutrace's own parts record their drops (none here).
    assert_eq!(r["data_loss"]["drops_recorded"], true);
    assert_eq!(r["data_loss"]["dropped_by_cupti"], 0);
    let devs = r["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 1, "one GPU");
    let streams: BTreeSet<(u64, u64, u64)> = devs[0]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["pid"].as_u64().unwrap(),
                s["stream"].as_u64().unwrap(),
                s["kernels"].as_u64().unwrap(),
            )
        })
        .collect();
    // Each child made one stream of its own (1,001 kernels) beside the default stream's 2.
    let want: BTreeSet<(u64, u64, u64)> = pids
        .iter()
        .flat_map(|&p| [(p, 7, 2), (p, 13, 1001)])
        .collect();
    assert_eq!(streams, want);
    // Gap ends are named as their process knows them.
    for g in devs[0]["largest_gaps"].as_array().unwrap() {
        for side in ["before", "after"] {
            let k = &g[side];
            assert!(k["correlation_id"].as_u64().unwrap() < 1 << 32, "{k}");
            assert!(pids.contains(&k["pid"].as_u64().unwrap()), "{k}");
        }
    }
    let text = String::from_utf8(report(&[]).stdout).unwrap();
    assert!(text.contains("  13 (pid 492) "), "{text}");
    assert!(text.contains(", stream 13, pid 492)"), "{text}");
    assert!(
        !text.contains("4294967"),
        "an id with its part offset leaked: {text}"
    );
}
