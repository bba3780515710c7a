//! `cutrace report` and `cutrace convert` on a trace with hardware counters (built by hand in
//! `util::counters_trace`): sums for counters, duration-weighted means for percentages, NaN
//! left out and counted, never 0; the kernel_metrics table in CSV and Parquet.

use cutrace_testkit::Dir;

#[test]
fn report_sums_counters_and_weights_percentages_by_duration() {
    let d = Dir::new("counters-report");
    let part = crate::util::counters_trace(&d.0);
    let v = crate::util::cutrace_json(&["report", part.to_str().unwrap()]);
    let c = &v["counters"];
    assert_eq!(c["passes"], 1);
    assert_eq!(c["kernels_serialized"], true);
    assert_eq!(c["kernels_profiled"], 4);
    assert_eq!(c["graph_launches"], 1);
    assert_eq!(c["kernels_without_values"], 1);
    assert_eq!(c["values_unavailable"], 1);
    assert_eq!(c["metrics"][0]["aggregation"], "sum");
    assert_eq!(c["metrics"][1]["aggregation"], "duration_weighted_mean");
    let by = c["by_kernel"].as_array().unwrap();
    assert_eq!(by.len(), 2);
    // gemm first: 6 µs of kernels with values against copy's 4 µs.
    assert_eq!(by[0]["name"], "gemm(float*)");
    assert_eq!(by[0]["kernels"], 3);
    assert_eq!(by[0]["duration_ns"], 6_000);
    assert_eq!(by[0]["values"][0], 60.0);
    // (50 × 1 µs + 70 × 3 µs) / 4 µs: the NaN kernel is in neither the sum nor the weights.
    assert_eq!(by[0]["values"][1], 65.0);
    assert_eq!(by[1]["name"], "copy(float*)");
    assert_eq!(by[1]["values"][0], 7.0);
    assert_eq!(by[1]["values"][1], 10.0);

    let o = crate::util::cutrace(&["report", part.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "Hardware counters (cutrace profile: Range Profiling, one range per kernel, 1 pass): \
         4 kernels profiled",
        "1 values unavailable (n/a, never 0)",
        "Kernels were serialized while profiling",
        "gemm(float*) (3 kernels, 6.000 µs)",
        "sm__warps_active.avg.pct_of_peak_sustained_active  mean",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("sm__ctas_launched.sum"))
        .unwrap();
    assert!(line.trim_end().ends_with(" 60"), "{line}");
}

#[test]
fn report_of_a_trace_without_counters_has_no_counters_key() {
    let v = crate::util::cutrace_json(&["report", "tests/fixtures/native/two_streams"]);
    assert!(v.get("counters").is_none());
}

#[test]
fn convert_writes_the_kernel_metrics_table_with_nulls_for_unavailable() {
    let d = Dir::new("counters-convert");
    let part = crate::util::counters_trace(&d.0);
    let out = d.path("csv");
    let o = crate::util::cutrace(&[
        "convert",
        part.to_str().unwrap(),
        "--csv",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("kernel_metrics.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "correlation_id,device,process,kernel,metric,value"
    );
    assert_eq!(lines.len(), 9, "{csv}");
    assert!(
        lines.contains(&"1,0,77,_Z4gemmPf,sm__ctas_launched.sum,10.0"),
        "{csv}"
    );
    // Unavailable is an empty field (null), never 0.
    assert!(
        lines.contains(&"2,0,77,_Z4gemmPf,sm__warps_active.avg.pct_of_peak_sustained_active,"),
        "{csv}"
    );
    let pq = d.path("pq");
    let o = crate::util::cutrace(&[
        "convert",
        part.to_str().unwrap(),
        "--parquet",
        pq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(pq.join("kernel_metrics.parquet")).unwrap();
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));

    // A trace without counters gets no kernel_metrics file.
    let plain = d.path("plain");
    let o = crate::util::cutrace(&[
        "convert",
        "tests/fixtures/native/two_streams",
        "--csv",
        plain.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(!plain.join("kernel_metrics.csv").exists());
}

/// `cutrace diff` on a profile trace: per kernel name and metric, base, new and the change; the
/// NaN stays unknown, and a side without counters gives unknown values and changes, never 0.
#[test]
fn diff_compares_counters_per_kernel_name_and_metric() {
    let d = Dir::new("counters-diff");
    let part = crate::util::counters_trace(&d.0);
    let p = part.to_str().unwrap();
    let v = crate::util::cutrace_json(&["diff", p, p]);
    let c = &v["counters"];
    assert_eq!(c["kernel_names_in_both"], 2);
    assert_eq!(c["base"]["values_unavailable"], 1);
    let gemm = &c["kernels"][0];
    assert_eq!(
        (gemm["name"].as_str(), gemm["base_kernels"].as_u64()),
        (Some("gemm(float*)"), Some(3))
    );
    assert_eq!(gemm["metrics"][0]["base"], 60.0);
    assert_eq!(gemm["metrics"][0]["change"], 0.0);
    assert_eq!(gemm["metrics"][1]["new"], 65.0);
    let v = crate::util::cutrace_json(&["diff", p, "tests/fixtures/native/two_streams"]);
    let c = &v["counters"];
    assert!(c["new"].is_null());
    assert_eq!(c["kernel_names_only_in_base"], 2);
    for k in c["kernels"].as_array().unwrap() {
        for m in k["metrics"].as_array().unwrap() {
            assert!(m["new"].is_null() && m["change"].is_null(), "{m}");
        }
    }
    let o = crate::util::cutrace(&["diff", p, "tests/fixtures/native/two_streams"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("  new:  no counters"), "{text}");
    let two = crate::util::cutrace_json(&[
        "diff",
        "tests/fixtures/native/two_streams",
        "tests/fixtures/native/two_streams",
    ]);
    assert!(two.get("counters").is_none());
}

/// Counters per step and GPU: a kernel counts in the step it ran in (these kernels have their
/// timestamps and no launch calls), with the report's rules; the NaN stays out of the mean.
#[test]
fn report_gives_counters_per_step() {
    let d = Dir::new("counters-steps");
    let part = crate::util::counters_trace_with(
        &d.0,
        &[("ProfilerStep#1", 5, 25), ("ProfilerStep#2", 25, 45)],
    );
    let v = crate::util::cutrace_json(&["report", part.to_str().unwrap()]);
    let c = &v["counters"];
    let rows = c["by_step"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Step 1: gemm corr 1 (50 %, 1 µs) and 2 (NaN): 30 CTAs, 50 %.
    assert_eq!(
        (rows[0]["step"].as_u64(), rows[0]["kernels"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(rows[0]["values"][0], 30.0);
    assert_eq!(rows[0]["values"][1], 50.0);
    // Step 2: gemm corr 3 (70 %, 3 µs) and copy corr 4 (10 %, 4 µs).
    assert_eq!(rows[1]["values"][0], 37.0);
    assert_eq!(rows[1]["values"][1], (70.0 * 3.0 + 10.0 * 4.0) / 7.0);
    assert_eq!(rows[1]["name"], "ProfilerStep#2");
    assert_eq!(c["kernels_outside_steps"], 0);
    assert_eq!(c["by_device"][0]["kernels"], 4);
    let o = crate::util::cutrace(&["report", part.to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("Per step and GPU (a kernel counts in the step during which it was launched"),
        "{text}"
    );
}
