//! `cutrace profile --pc-sampling` traces recorded on the H200 (CUDA 13.0, driver 580,
//! 2026-12-02, `gpu/run.sh` phase pc_sampling): `tests/fixtures/native/pc_kernels` holds
//! gpu/pc_kernels.cu's three kernels, built with `-lineinfo`, each made to stall one way;
//! `pc_torch` 100 PyTorch training steps (gpu/bench_torch.py), whose library kernels have no line
//! information. The report must name each kernel's stall as the kernel was built to show it (and
//! as Nsight Compute's warp-state counters named it on the same run: long_scoreboard, barrier,
//! not_selected), map the loads to their source line, and account for every sample CUPTI counted.

use serde_json::Value;

fn report(fixture: &str) -> Value {
    crate::util::cutrace_json(&["report", fixture])
}

fn function<'a>(pc: &'a Value, name: &str) -> &'a Value {
    pc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no function {name} in {pc}"))
}

#[test]
fn each_kernel_stalls_as_it_was_built_to_at_its_source_line() {
    let v = report("tests/fixtures/native/pc_kernels");
    let pc = &v["pc_samples"];
    assert_eq!(pc["function_count"], 3);
    let chain = function(pc, "load_chain(");
    assert_eq!(chain["raw_name"], "_Z10load_chainPKjPji");
    assert_eq!(chain["is_kernel"], true);
    assert_eq!(chain["reasons"][0]["reason"], "long_scoreboard");
    assert!(chain["reasons"][0]["pct"].as_f64().unwrap() > 95.0);
    // `i = next[i];` is line 22 of gpu/pc_kernels.cu.
    assert_eq!(chain["lines"][0]["line"], 22);
    assert!(chain["lines"][0]["file"]
        .as_str()
        .unwrap()
        .ends_with("pc_kernels.cu"));
    assert_eq!(chain["pcs_with_line"], chain["pcs"]);
    let barrier = function(pc, "barrier_wait(");
    assert_eq!(barrier["reasons"][0]["reason"], "barrier");
    // The cubin's line table puts the barrier instruction on line 29, the loop's `for`, not on
    // line 33's `__syncthreads()` (nvcc -O2 placed it at the loop head); Nsight Compute's
    // source view reads the same table.
    assert_eq!(barrier["lines"][0]["line"], 29);
    assert_eq!(barrier["lines"][0]["reasons"][0]["reason"], "barrier");
    let fma = function(pc, "fma_dense(");
    let eligible = fma["samples_eligible"].as_u64().unwrap() as f64;
    assert!(eligible / fma["samples"].as_u64().unwrap() as f64 > 0.8);
    assert_eq!(fma["reasons"][0]["reason"], "not_selected");
}

#[test]
fn every_sample_cupti_counted_is_in_the_rows_or_accounted_for() {
    for fixture in [
        "tests/fixtures/native/pc_kernels",
        "tests/fixtures/native/pc_torch",
    ] {
        let v = report(fixture);
        let pc = &v["pc_samples"];
        let c = &pc["collection"];
        let n = |k: &str| c[k].as_u64().unwrap();
        assert_eq!(c["collection_mode"], "continuous", "{fixture}");
        assert_eq!(
            n("samples_dropped") + n("pcs_lost") + n("rows_dropped_queue"),
            0
        );
        assert_eq!(
            pc["samples"].as_u64().unwrap(),
            n("samples_total") - n("samples_non_user"),
            "{fixture}"
        );
        // The states' samples add up to the functions'.
        let by_fn: u64 = pc["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["samples"].as_u64().unwrap())
            .sum();
        assert!(by_fn <= pc["samples"].as_u64().unwrap());
    }
}

#[test]
fn a_library_without_line_information_says_so_and_still_has_reasons() {
    let v = report("tests/fixtures/native/pc_torch");
    let pc = &v["pc_samples"];
    assert!(pc["function_count"].as_u64().unwrap() > 10);
    for f in pc["functions"].as_array().unwrap() {
        assert!(!f["reasons"].as_array().unwrap().is_empty(), "{f}");
        assert_eq!(f["pcs_with_line"], 0);
    }
    let text = crate::util::cutrace(&["report", "tests/fixtures/native/pc_torch"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("Where kernels stall (PC sampling"), "{text}");
    assert!(text.contains("source lines: unavailable"), "{text}");
}

#[test]
fn pc_samples_convert_to_a_table_and_a_pprof_profile() {
    let d = cutrace_testkit::Dir::new("pc-convert");
    let prof = d.path("stalls.pb.gz");
    let csv = d.path("tables");
    let o = crate::util::cutrace(&[
        "convert",
        "tests/fixtures/native/pc_kernels",
        "--pprof",
        prof.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("pprof samples"), "{err}");
    // gzip, as pprof's tools read it.
    let bytes = std::fs::read(&prof).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    let table = std::fs::read_to_string(csv.join("pc_samples.csv")).unwrap();
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap(),
        "device,process,correlation_id,function,function_index,pc_offset,cubin_crc,\
         stall_reason,samples,source_file,source_line"
    );
    let v = report("tests/fixtures/native/pc_kernels");
    let total: u64 = lines
        .filter(|l| !l.contains("_not_issued,") && l.contains(",smsp__pcsamp_warps_issue_stalled_"))
        .map(|l| l.split(',').nth(8).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, v["pc_samples"]["samples"].as_u64().unwrap());
}

#[test]
fn pprof_of_a_trace_without_pc_samples_is_refused_and_nothing_is_written() {
    let d = cutrace_testkit::Dir::new("pc-convert-none");
    let prof = d.path("p.pb.gz");
    let csv = d.path("tables");
    let o = crate::util::cutrace(&[
        "convert",
        "tests/fixtures/native/two_streams",
        "--csv",
        csv.to_str().unwrap(),
        "--pprof",
        prof.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("has no PC samples"), "{err}");
    assert!(err.contains("cutrace profile --pc-sampling"), "{err}");
    assert!(!prof.exists() && !csv.join("kernels.csv").exists());
}

#[test]
fn pc_sampling_options_that_cannot_go_together_are_refused() {
    for args in [
        &["profile", "--pc-sampling", "--set", "basic", "--", "true"][..],
        &[
            "profile",
            "--pc-sampling",
            "--kernels",
            "gemm",
            "--",
            "true",
        ],
        &["profile", "--pc-interval", "8", "--", "true"],
        &[
            "profile",
            "--pc-sampling",
            "--pc-interval",
            "4",
            "--",
            "true",
        ],
        &[
            "profile",
            "--pc-sampling",
            "--pc-interval",
            "32",
            "--",
            "true",
        ],
    ] {
        let o = crate::util::cutrace(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("cannot be used with")
                || err.contains("required")
                || err.contains("not in 5..=31"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn diff_compares_stall_mixes_per_function() {
    // The same kernels against themselves: every change is 0; against a PyTorch step, no
    // function is shared and each side's stand alone.
    let same = crate::util::cutrace_json(&[
        "diff",
        "tests/fixtures/native/pc_kernels",
        "tests/fixtures/native/pc_kernels",
    ]);
    let pc = &same["pc_samples"];
    assert_eq!(pc["base_samples"], pc["new_samples"]);
    assert_eq!(pc["function_count"], 3);
    for f in pc["functions"].as_array().unwrap() {
        assert_eq!(f["largest_change_points"], 0.0, "{f}");
    }
    let other = crate::util::cutrace_json(&[
        "diff",
        "tests/fixtures/native/pc_kernels",
        "tests/fixtures/native/pc_torch",
    ]);
    let pc = &other["pc_samples"];
    let chain = pc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["raw_name"] == "_Z10load_chainPKjPji")
        .unwrap();
    assert!(chain["new_samples"].is_null());
    let ls = pc["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reason"] == "long_scoreboard")
        .unwrap();
    let (b, n) = (
        ls["base_pct"].as_f64().unwrap(),
        ls["new_pct"].as_f64().unwrap(),
    );
    assert!((ls["pct_points"].as_f64().unwrap() - (n - b)).abs() < 1e-9);
    let text = crate::util::cutrace(&[
        "diff",
        "tests/fixtures/native/pc_kernels",
        "tests/fixtures/native/pc_torch",
    ]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("Stall reasons (PC sampling"), "{text}");
}
