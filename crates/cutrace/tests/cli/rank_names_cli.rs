//! A job's rank files that state no rank inside are numbered by their names: `worker5_…` is
//! rank 5, as `rank5` is.

use std::process::Command;

#[test]
fn worker_files_are_numbered_by_the_rank_their_names_state() {
    let dir = cutrace_testkit::Dir::new("rank-names");
    let src = cutrace_testkit::fixture("kineto/two_streams.json.gz");
    for name in [
        "worker5_host-a.1712.pt.trace.json.gz",
        "worker3_host-b.1713.pt.trace.json.gz",
    ] {
        std::fs::copy(&src, dir.join(name)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["report", "--format", "json"])
        .arg(&*dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks: Vec<(u64, String)> = j["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["rank_from"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        ranks,
        [(3, "file_name".to_string()), (5, "file_name".to_string())]
    );
}
