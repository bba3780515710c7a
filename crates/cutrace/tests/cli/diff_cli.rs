//! `cutrace diff` on the committed real traces: the same H200 workload recorded with every API
//! call and with the default `--api lean` (what changed is only what the recorder left out, and
//! the diff says so), a trace against itself, and bad input.

use crate::util::{cutrace, cutrace_json as json};
use cutrace_testkit::repo;
use serde_json::Value;

const ALL: &str = "tests/fixtures/native/two_streams";
const LEAN: &str = "tests/fixtures/native/lean/two_streams";

#[test]
fn all_against_lean_shows_the_left_out_queries_and_says_why() {
    let d = json(&["diff", ALL, LEAN, "--top", "100"]);
    assert_eq!(d["schema_version"], 1);
    // The same program: 47 kernels on each side, every one joined.
    for side in ["base", "new"] {
        assert_eq!(d[side]["kernels"], 47, "{side}");
        assert_eq!(d[side]["orphans"], 0, "{side}");
        assert_eq!(d[side]["complete"], true, "{side}");
    }
    let kinds: Vec<&str> = d["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["api_records"], "{}", d["caveats"]);
    assert_eq!(d["kernel_names"]["only_base"], 0);
    assert_eq!(d["kernel_names"]["only_new"], 0);
    // cudart's cuKernelGetName, one per launch: only in the `all` trace.
    let api = d["api"].as_array().unwrap();
    let row = |name: &str| api.iter().find(|r| r["name"] == name).cloned();
    let k = row("cuKernelGetName").expect("cuKernelGetName row");
    assert_eq!(k["base"]["count"], 47);
    assert!(k["new"].is_null());
    assert!(k["total_change_ns"].as_i64().unwrap() < 0);
    // The launches themselves are in both.
    let l = row("cudaLaunchKernel").expect("cudaLaunchKernel row");
    assert_eq!(
        (l["base"]["count"].clone(), l["new"]["count"].clone()),
        (47.into(), 47.into())
    );
    assert_eq!(d["api_names"]["only_new"], 0);
    assert!(d["api_names"]["only_base"].as_u64().unwrap() >= 5);
    // GPU 0 in both, busy within 0.1 point (two runs of one program).
    let dev = &d["devices"][0];
    assert_eq!(dev["base"]["kernels"], 47);
    assert!(dev["busy_pct_points"].as_f64().unwrap().abs() < 0.1);

    let o = cutrace(&["diff", ALL, LEAN]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "Not like for like (1):",
        "base: all, new: lean",
        "busy, share of the kernel span",
        "before the next launch returned",
        "Kernels by change in summed duration (top 2 of 2 names; 0 only in base, 0 only in new)",
        "cuKernelGetName",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn a_trace_against_itself_changes_nothing() {
    let t = "tests/fixtures/kineto/train_step.json.gz";
    let d = json(&["diff", t, t]);
    assert_eq!(d["caveats"], Value::Array(vec![]));
    assert_eq!(d["devices"][0]["busy_pct_points"], 0.0);
    assert_eq!(d["kernels"].as_array().unwrap().len(), 10);
    for r in d["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .chain(d["api"].as_array().unwrap())
    {
        assert_eq!(r["total_change_ns"], 0, "{r}");
        assert_eq!(r["base"], r["new"], "{r}");
    }
    assert_eq!(d["launch_latency"]["base"], d["launch_latency"]["new"]);
}

#[test]
fn a_bad_trace_names_itself_and_fails() {
    let o = cutrace(&["diff", ALL, "no/such/trace.json"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no/such/trace.json"), "{err}");
    assert!(o.stdout.is_empty());
    let o = cutrace(&["diff", ALL]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<NEW>"));
}

/// Every object key of the JSON diff, from a run that fills every field (a caveat included), is
/// named on docs/DIFF.md as a backticked word (a list as `name[]`).
#[test]
fn every_json_field_is_documented() {
    fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    out.insert(k.clone());
                    keys(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    keys(&json(&["diff", ALL, LEAN]), &mut seen);
    // A window fills `window`'s own keys.
    keys(
        &json(&["diff", ALL, LEAN, "--from", "150ms", "--to", "200ms"]),
        &mut seen,
    );
    assert!(seen.contains("from_ns") && seen.contains("to_ns"));
    // Steps fill theirs.
    keys(
        &json(&[
            "diff",
            "tests/fixtures/native/nvtx",
            "tests/fixtures/native/lean/nvtx",
            "--steps",
            "step",
        ]),
        &mut seen,
    );
    assert!(seen.contains("median_change_ns"));
    // Hardware counters fill theirs.
    keys(
        &json(&[
            "diff",
            "tests/fixtures/native/counters_basic",
            "tests/fixtures/native/counters_basic",
        ]),
        &mut seen,
    );
    assert!(seen.contains("change_pct"));
    // PM samples fill theirs.
    keys(
        &json(&[
            "diff",
            "tests/fixtures/native/sample_pm",
            "tests/fixtures/native/sample_pm",
        ]),
        &mut seen,
    );
    assert!(seen.contains("change_points"));
    // PC samples fill theirs: the H200's three kernels against a PyTorch step.
    keys(
        &json(&[
            "diff",
            "tests/fixtures/native/pc_kernels",
            "tests/fixtures/native/pc_torch",
        ]),
        &mut seen,
    );
    assert!(seen.contains("largest_change_points"));
    // Memory fills its own: a trace with [memory] events against itself.
    let memory = "tests/fixtures/kineto/hta_memory.json.gz";
    let m = json(&["diff", memory, memory]);
    assert_eq!(m["memory"]["pools"][1]["peak_change_bytes"], 0);
    keys(&m, &mut seen);
    assert!(seen.contains("reported_peak_change_bytes"));
    let doc = std::fs::read_to_string(repo().join("docs/DIFF.md")).unwrap();
    let missing: Vec<&String> = seen
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("`{k}[]`")))
        .collect();
    assert!(missing.is_empty(), "docs/DIFF.md does not name {missing:?}");
    assert!(seen.len() > 30, "{seen:?}");
}

#[test]
fn a_window_is_an_offset_into_each_trace() {
    let whole = json(&["diff", ALL, LEAN]);
    let d = json(&["diff", ALL, LEAN, "--from", "160ms", "--to", "200ms"]);
    for side in ["base", "new"] {
        let w = &d[side]["window"];
        let (from, to) = (w["from_ns"].as_u64().unwrap(), w["to_ns"].as_u64().unwrap());
        assert_eq!(to - from, 40_000_000, "{side}");
        let k = d[side]["kernels"].as_u64().unwrap();
        assert!(k > 0 && k < 47, "{side}: {k}");
        assert!(whole[side]["window"].is_null());
    }
    // Each window starts 160 ms after its own trace's first record: the clocks differ.
    assert_ne!(
        d["base"]["window"]["from_ns"],
        d["new"]["window"]["from_ns"]
    );
    // Past both ends: said for each, and still a diff (exit 0).
    let d = json(&["diff", ALL, LEAN, "--from", "10s"]);
    let empty = d["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "empty_window")
        .count();
    assert_eq!(empty, 2, "{}", d["caveats"]);
    // An absolute time cannot serve two clocks.
    let o = cutrace(&["diff", ALL, LEAN, "--from", "1796014516832801301"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("clocks differ") && err.contains("--from 2s"),
        "{err}"
    );
    // Nor can a window that ends before it starts.
    let o = cutrace(&["diff", ALL, LEAN, "--from", "2s", "--to", "1s"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A cutrace trace against a torch.profiler one: kernels whose names the two demanglers spell
/// differently are still one row, and the API caveat names torch.profiler's own selection.
#[test]
fn native_against_kineto_matches_names_across_demanglers() {
    let d = json(&[
        "diff",
        "tests/fixtures/native/conflict",
        "tests/fixtures/kineto/train_step.json.gz",
        "--top",
        "100",
    ]);
    let fill: Vec<&Value> = d["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["name"]
                .as_str()
                .unwrap()
                .contains("FillFunctor<float>, std::array<char*,")
        })
        .collect();
    assert_eq!(fill.len(), 1, "{fill:?}");
    assert_eq!(
        (
            fill[0]["base"]["count"].as_u64(),
            fill[0]["new"]["count"].as_u64()
        ),
        (Some(1), Some(4))
    );
    let api = d["caveats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "api_records")
        .expect("api_records caveat");
    assert!(api["text"]
        .as_str()
        .unwrap()
        .contains("base: all, new: torch.profiler"));
}

#[test]
fn top_zero_keeps_the_name_counts_and_one_sided_gpus_are_said() {
    let o = cutrace(&[
        "diff",
        "tests/fixtures/native/sigkill",
        "tests/fixtures/native/tiny_5000",
        "--top",
        "0",
    ]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("Kernels by change in summed duration (top 0 of 3 names; 0 only in base, 2 only in new)"),
        "{text}"
    );
    // A GPU in one trace only: a one-kernel torch.profiler trace on GPU 1, against GPU 0 work.
    let dir = cutrace_testkit::Dir::new("diff-gpu1");
    std::fs::create_dir_all(&dir).unwrap();
    let gpu1 = dir.join("gpu1.json");
    std::fs::write(
        &gpu1,
        r#"{"traceEvents":[
{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":7,"ts":1000.0,"dur":5.0,"args":{"device":1,"stream":7,"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":999.0,"dur":0.5,"args":{"correlation":1}}
]}"#,
    )
    .unwrap();
    let o = cutrace(&[
        "diff",
        gpu1.to_str().unwrap(),
        "tests/fixtures/kineto/train_step.json.gz",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "GPU 0 only in the new trace, GPU 1 only in the base trace",
        "GPU 1\n  only in the base trace: 1 kernels, busy 5.000 µs = 100.0 % of a 5.000 µs kernel span",
        "GPU 0\n  only in the new trace: 58 kernels",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// One directory holding two runs' parts (one recorded with every API call, one with `lean`):
/// both the separate runs and the mixed API modes are said.
#[test]
fn a_directory_of_two_runs_is_said() {
    let dir = cutrace_testkit::Dir::new("diff-mixed");
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in [
        (
            "tests/fixtures/native/two_streams/vm-466.cutrace",
            "vm-466.cutrace",
        ),
        (
            "tests/fixtures/native/lean/two_streams/vm-4320.cutrace",
            "vm-4320.cutrace",
        ),
    ] {
        std::fs::copy(repo().join(from), dir.join(to)).unwrap();
    }
    let d = json(&["diff", ALL, dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    let caveats = d["caveats"].as_array().unwrap();
    let text = |kind: &str| -> String {
        caveats
            .iter()
            .find(|c| c["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} caveat in {caveats:?}"))["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(text("separate_runs").contains("the new trace may hold several runs"));
    assert!(text("api_records").contains("base: all, new: mixed"));
}

/// Steps side by side: the same figures `cutrace report --steps` gives for each trace (the NVTX
/// workload recorded twice on the H200), and their change.
#[test]
fn steps_side_by_side_agree_with_each_report() {
    let (a, b) = (
        "tests/fixtures/native/nvtx",
        "tests/fixtures/native/lean/nvtx",
    );
    let d = json(&["diff", a, b, "--steps", "step"]);
    let st = &d["steps"];
    assert_eq!(st["matched"], "step");
    for (side, path) in [("base", a), ("new", b)] {
        let r = json(&["report", path, "--steps", "step"]);
        let want = &r["steps"];
        let got = &st[side];
        assert_eq!(got["count"], 10);
        for k in [
            "count",
            "duration_min_ns",
            "duration_median_ns",
            "duration_max_ns",
        ] {
            assert_eq!(got[k], want[k], "{side} {k}");
        }
        assert_eq!(
            got["devices"][0]["busy_pct_median"],
            want["devices"][0]["busy_pct_median"]
        );
    }
    assert_eq!(
        st["median_change_ns"].as_i64().unwrap(),
        st["new"]["duration_median_ns"].as_i64().unwrap()
            - st["base"]["duration_median_ns"].as_i64().unwrap()
    );
    // Not asked for and no ProfilerStep ranges: no steps key.
    assert!(json(&["diff", a, b]).get("steps").is_none());
    // Asked for and in neither trace: an error, no output.
    let o = cutrace(&["diff", ALL, LEAN, "--steps", "step"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--steps step: no host range in either trace")
    );
    // In one trace only: said in the text.
    let o = cutrace(&["diff", a, LEAN, "--steps", "step"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("only the base trace has them (10 steps"));
}
