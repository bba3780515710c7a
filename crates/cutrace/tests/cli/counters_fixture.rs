//! The `cutrace profile --set basic` trace of gpu/counters.cu recorded on the H200
//! (tests/fixtures/native/counters_basic, with the program's own account in manifest.json):
//! every launch API's kernel has its values, joined by correlation id, with the counts the
//! launch fixes exactly; the graph kernel has none; the report and the CSV export carry them.

fn report() -> serde_json::Value {
    crate::util::cutrace_json(&["report", "tests/fixtures/native/counters_basic"])
}

#[test]
fn known_launches_have_exact_counts_in_the_report() {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            cutrace_testkit::repo().join("tests/fixtures/native/counters_basic/manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let v = report();
    let c = &v["counters"];
    assert_eq!(c["passes"], 1);
    assert_eq!(c["error"], serde_json::Value::Null);
    assert_eq!(c["kernels_profiled"], 7);
    assert_eq!(c["graph_launches"], 1);
    assert_eq!(c["launches_captured"], 1);
    assert_eq!(c["kernels_without_values"], 1);
    assert_eq!(c["values_unavailable"], 0);
    // CUPTI wrote 0 timestamps for every profiled kernel.
    assert_eq!(c["kernels_without_timestamps"], 7);
    let metric = |name: &str| {
        c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .position(|m| m["name"] == name)
            .unwrap()
    };
    let row = |kernel: &str| {
        c["by_kernel"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"].as_str().unwrap().starts_with(kernel))
            .unwrap()
            .clone()
    };
    // ctas: five launches through <<<>>> (twice), cudaLaunchKernelEx, the cooperative launch and
    // cuLaunchKernel; the graph's sixth has no values.
    let profiled: Vec<&serde_json::Value> = manifest
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kernel"] == "ctas" && l["api"] != "cudaGraphLaunch")
        .collect();
    assert_eq!(profiled.len(), 5);
    let sum = |key: &str| {
        profiled
            .iter()
            .map(|l| l[key].as_f64().unwrap())
            .sum::<f64>()
    };
    let ctas = row("ctas");
    assert_eq!(ctas["kernels"], 5);
    assert_eq!(ctas["values"][metric("sm__ctas_launched.sum")], sum("ctas"));
    assert_eq!(
        ctas["values"][metric("smsp__warps_launched.sum")],
        sum("warps")
    );
    // The 1 GiB copy: DRAM bytes within 3 % of the bytes moved.
    let stream = row("stream");
    let gib = (1u64 << 30) as f64;
    for m in ["dram__bytes_read.sum", "dram__bytes_write.sum"] {
        let got = stream["values"][metric(m)].as_f64().unwrap();
        assert!((got - gib).abs() / gib < 0.03, "{m}: {got}");
    }
    // The FMA loop: the instruction count Nsight Compute read for the same kernel on the same
    // machine (gpu/results/run_profile1.jsonl).
    assert_eq!(
        row("fma")["values"][metric("smsp__inst_executed.sum")],
        167_927_808.0
    );
    // Durations come from gpu__time_duration.sum when the records have no timestamps.
    let fma = row("fma");
    assert_eq!(
        fma["duration_ns"].as_f64().unwrap(),
        fma["values"][metric("gpu__time_duration.sum")]
            .as_f64()
            .unwrap()
    );
}

#[test]
fn csv_export_has_one_row_per_kernel_and_metric() {
    let d = cutrace_testkit::Dir::new("counters-fixture-csv");
    let out = d.path("csv");
    let o = crate::util::cutrace(&[
        "convert",
        "tests/fixtures/native/counters_basic",
        "--csv",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("kernel_metrics.csv")).unwrap();
    // 7 profiled kernels × 10 metrics of the basic set, and the header.
    assert_eq!(csv.lines().count(), 71);
    assert!(csv
        .lines()
        .any(|l| l.ends_with(",_Z4ctasPi,sm__ctas_launched.sum,1000.0")));
}
