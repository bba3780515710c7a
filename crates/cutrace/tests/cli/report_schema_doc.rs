//! `docs/REPORT.md` documents every field of `cutrace report --format json`: the report is run on
//! committed fixtures that together produce every field (a merged multi-process trace, an
//! incomplete one, a torch.profiler one, one with copies and memsets, one with recorder notes, a
//! `--from`/`--to` window, two runs' parts in one directory, `--steps`, a `cutrace profile`
//! trace with counters, a `cutrace sample` trace with steps, a torch.profiler trace with
//! memory events, and `--critical-path`), and every object key seen anywhere in the output must appear in the page as
//! a backticked name (`` `idle_split` ``).

use std::collections::BTreeMap;
use std::path::Path;

use cutrace_testkit::Run;
use cutrace_testkit::{fixture, repo as root};
use serde_json::Value;

/// The JSON report of `path`, with extra arguments.
fn report(path: &Path, extra: &[&str]) -> Value {
    let out = crate::util::bin()
        .arg("report")
        .arg(path)
        .args(["--format", "json"])
        .args(extra)
        .run_ok();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("cutrace report {}: not JSON: {e}", path.display());
    })
}

/// Every object key under `v`, each with the first path it was seen at (`.devices[].busy_ns`).
fn collect_keys(v: &Value, at: &str, keys: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let path = format!("{at}.{k}");
                collect_keys(x, &path, keys);
                keys.entry(k.clone()).or_insert(path);
            }
        }
        Value::Array(items) => {
            let path = format!("{at}[]");
            for x in items {
                collect_keys(x, &path, keys);
            }
        }
        _ => {}
    }
}

/// Two unrelated runs' parts in one directory (removed on drop), so `trace.separate_runs` and
/// its `first_gap` are filled.
struct TwoRuns(cutrace_testkit::Dir);

impl TwoRuns {
    fn new() -> TwoRuns {
        let d = cutrace_testkit::Dir::new("report-schema-doc");
        for rel in [
            "native/two_streams/vm-466.cutrace",
            "native/copy_overlap/vm-478.cutrace",
        ] {
            let src = fixture(rel);
            std::fs::copy(&src, d.join(src.file_name().unwrap())).unwrap();
        }
        TwoRuns(d)
    }
}

#[test]
fn every_report_field_is_documented_in_docs_report_md() {
    let two_runs = TwoRuns::new();
    let steps_dir = cutrace_testkit::Dir::new("report-schema-doc-counters");
    let counter_steps =
        crate::util::counters_trace_with(&steps_dir.0, &[("ProfilerStep#1", 5, 45)]);
    let runs: Vec<(&str, Value)> = vec![
        ("multiproc", report(&fixture("native/multiproc"), &[])),
        ("sigkill", report(&fixture("native/sigkill"), &[])),
        ("conflict", report(&fixture("native/conflict"), &[])),
        ("copy_overlap", report(&fixture("native/copy_overlap"), &[])),
        (
            "copy_overlap windowed",
            report(
                &fixture("native/copy_overlap"),
                &["--from", "350ms", "--to", "370ms"],
            ),
        ),
        (
            "kineto train_step",
            report(&fixture("kineto/train_step.json.gz"), &[]),
        ),
        ("two runs", report(&two_runs.0, &[])),
        (
            "nvtx steps",
            report(&fixture("native/nvtx"), &["--steps", "step"]),
        ),
        ("counters", report(&fixture("native/counters_basic"), &[])),
        ("counters with steps", report(&counter_steps, &[])),
        (
            "pm samples",
            report(&fixture("native/sample_pm"), &["--steps", "cycle*"]),
        ),
        ("pc samples", report(&fixture("native/pc_kernels"), &[])),
        (
            "kineto memory",
            report(&fixture("kineto/hta_memory.json.gz"), &[]),
        ),
        (
            "critical path",
            report(
                &fixture("kineto/profiler_steps.json.gz"),
                &["--critical-path"],
            ),
        ),
    ];

    // Each fixture still shows what it is here for, so the key set stays complete.
    let by = |name: &str| &runs.iter().find(|r| r.0 == name).unwrap().1;
    assert!(by("multiproc")["trace"]["id_parts"].is_array());
    assert!(by("multiproc")["devices"][0]["streams"][0]["pid"].is_u64());
    assert_eq!(by("sigkill")["data_loss"]["complete"], false);
    assert!(by("sigkill")["data_loss"]["incomplete_reason"].is_string());
    assert!(by("conflict")["notes"][0]["text"].is_string());
    assert!(by("copy_overlap")["transfers"][0]["bandwidth_gb_s"].is_f64());
    assert!(by("copy_overlap windowed")["window"]["to_ns"].is_u64());
    assert!(by("copy_overlap windowed")["devices"][0]["kernels"].as_u64() > Some(0));
    assert_eq!(by("kineto train_step")["trace"]["source"], "kineto");
    assert!(by("kineto train_step")["ranges"][0]["name"].is_string());
    assert!(by("two runs")["trace"]["separate_runs"]["first_gap"]["gap_ns"].is_u64());
    assert!(by("nvtx steps")["steps"]["steps"][0]["devices"][0]["busy_pct"].is_f64());
    assert!(by("counters")["counters"]["by_kernel"][0]["values"][0].is_f64());
    assert!(by("counters")["counters"]["replay"]["launch_ns"].is_u64());
    assert!(by("counters with steps")["counters"]["by_step"][0]["values"][0].is_f64());
    assert!(
        by("pm samples")["pm_samples"]["devices"][0]["steps"][0]["layers"]["sm_active_pct"]
            .is_f64()
    );

    assert!(
        by("pc samples")["pc_samples"]["functions"][0]["lines"][0]["reasons"][0]["pct"].is_f64()
    );
    assert!(by("pc samples")["pc_samples"]["collection"]["samples_total"].is_u64());
    let pool = &by("kineto memory")["memory"]["pools"][0];
    assert!(pool["peak"]["live"]["by_site"][0]["site"].is_string());
    assert!(pool["reported_peak"]["reserved_minus_allocated_bytes"].is_u64());
    assert!(pool["steps"][0]["peak_bytes"].is_u64());

    let cp = &by("critical path")["critical_path"];
    assert!(cp["steps"][0]["composition"]["host_ops"][0]["ns"].is_u64());
    assert!(cp["window"]["longest_segments"][0]["place"]["thread"].is_u64());
    assert!(cp["window"]["slack"][0]["slack_ns"].is_u64());
    assert!(cp["inferred"]["inverted_edges"].is_u64());

    let mut keys = BTreeMap::new();
    for (_, v) in &runs {
        collect_keys(v, "", &mut keys);
    }
    assert!(keys.len() > 50, "only {} keys: {keys:?}", keys.len());

    let doc_path = root().join("docs/REPORT.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("{}: {e}", doc_path.display()));
    let missing: Vec<String> = keys
        .iter()
        .filter(|(k, _)| !doc.contains(&format!("`{k}`")))
        .map(|(k, at)| format!("`{k}` (at {at})"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/REPORT.md does not document {} field(s) of `cutrace report --format json` \
         (each must appear as a backticked name):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}
