//! `cutrace report` end to end: tiny Kineto JSON traces written into a temp dir (the worked
//! example of five kernels on two streams among them), the JSON contract, the text labels, the time window, and errors
//! that name the file and exit non-zero.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A temp dir per test, removed on drop.
struct Dir(cutrace_testkit::Dir);

impl Dir {
    fn new(name: &str) -> Dir {
        Dir(cutrace_testkit::Dir::new(&format!("report-cli-{name}")))
    }
    fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }
}

fn report(args: &[&str], trace: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("report")
        .args(args)
        .arg(trace)
        .output()
        .expect("run cutrace")
}

/// Runs and explains a failure with the command's stdout and stderr.
fn ok(args: &[&str], trace: &Path) -> String {
    let out = report(args, trace);
    assert!(
        out.status.success(),
        "cutrace report {args:?} {} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        trace.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Trace-clock origin of the test traces, in ns: large, like a real Kineto `ts`.
const BASE_NS: u64 = 5_153_875_767_895_669;

/// ns → Kineto's µs text with three decimals, exactly.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn kernel_event(corr: u64, stream: u64, start: u64, end: u64) -> String {
    format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": {stream}, "ts": {}, "dur": {},
  "args": {{"device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, "grid": [1, 1, 1], "block": [128, 1, 1]}}}}"#,
        if stream == 7 { "gemm" } else { "allreduce" },
        us(BASE_NS + start),
        us(end - start)
    )
}

fn launch_event(corr: u64, start: u64, end: u64) -> String {
    format!(
        r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": {},
  "args": {{"cbid": 211, "correlation": {corr}}}}}"#,
        us(BASE_NS + start),
        us(end - start)
    )
}

/// The worked example (`SEED_KERNELS`) as a Kineto trace, with the launches whose ids are in `keep`.
fn seed_json(keep: &[u64]) -> String {
    let kernels = [
        (11, 7, 1_000, 5_000),
        (12, 7, 5_200, 9_000),
        (13, 13, 3_000, 4_000),
        (14, 13, 4_000, 6_000),
        (15, 7, 9_000, 9_000),
    ];
    let runtime = [
        (11, 900, 950),
        (12, 5_050, 5_100),
        (13, 2_900, 2_950),
        (14, 3_950, 3_990),
        (15, 8_900, 8_950),
    ];
    let mut events: Vec<String> = kernels
        .iter()
        .map(|&(c, s, a, b)| kernel_event(c, s, a, b))
        .collect();
    events.extend(
        runtime
            .iter()
            .filter(|r| keep.contains(&r.0))
            .map(|&(c, a, b)| launch_event(c, a, b)),
    );
    format!(
        "{{\"schemaVersion\": 1, \"traceEvents\": [\n{}\n]}}\n",
        events.join(",\n")
    )
}

#[test]
fn json_report_of_the_seed_example_is_exact() {
    let dir = Dir::new("seed-json");
    let trace = dir.file("seed.json", &seed_json(&[11, 12, 13, 14, 15]));
    let v: Value =
        serde_json::from_str(&ok(&["--format", "json"], &trace)).expect("one JSON object");
    let d = &v["devices"][0];
    assert_eq!(d["device"], 0);
    assert_eq!(d["kernels"], 5);
    assert_eq!(d["busy_ns"], 8_000);
    assert_eq!(d["summed_kernel_ns"], 10_800);
    assert_eq!(d["window_ns"], 8_000);
    assert_eq!(d["idle_ns"], 0);
    assert_eq!(d["gaps"], 0);
    let s7 = &d["streams"][0];
    assert_eq!(
        (
            s7["stream"].as_u64(),
            s7["kernels"].as_u64(),
            s7["busy_ns"].as_u64()
        ),
        (Some(7), Some(3), Some(7_800))
    );
    assert_eq!(
        (s7["idle_ns"].as_u64(), s7["gaps"].as_u64()),
        (Some(200), Some(1))
    );
    assert_eq!(d["streams"][1]["busy_ns"], 3_000);
    assert_eq!(v["correlation"]["kernels"], 5);
    assert_eq!(v["correlation"]["attributed"], 5);
    assert_eq!(v["correlation"]["orphans"], 0);
    let l = &v["launch_latency"];
    assert_eq!(
        (
            l["min_ns"].as_i64(),
            l["p50_ns"].as_i64(),
            l["max_ns"].as_i64()
        ),
        (Some(10), Some(50), Some(100))
    );
    assert_eq!(v["data_loss"]["complete"], true);
}

#[test]
fn missing_launch_records_are_orphans_in_json_and_text() {
    let dir = Dir::new("seed-orphans");
    let trace = dir.file("partial.json", &seed_json(&[11, 13, 15]));
    let v: Value = serde_json::from_str(&ok(&["--format", "json"], &trace)).unwrap();
    assert_eq!(v["correlation"]["attributed"], 3);
    assert_eq!(v["correlation"]["orphans"], 2);
    assert_eq!(
        v["correlation"]["orphan_correlation_ids"],
        serde_json::json!([12, 14])
    );
    let text = ok(&[], &trace);
    assert!(text.contains("orphans 2 (ids 12, 14)"), "{text}");
    // The list is capped; the count stays exact.
    let v: Value =
        serde_json::from_str(&ok(&["--format", "json", "--orphans", "1"], &trace)).unwrap();
    assert_eq!(v["correlation"]["orphans"], 2);
    assert_eq!(
        v["correlation"]["orphan_correlation_ids"],
        serde_json::json!([12])
    );
    let text = ok(&["--orphans", "1"], &trace);
    assert!(text.contains("orphans 2 (ids 12, …)"), "{text}");
}

#[test]
fn text_report_shows_the_union_and_labels_the_sum() {
    let dir = Dir::new("seed-text");
    let trace = dir.file("seed.json", &seed_json(&[11, 12, 13, 14, 15]));
    // The long form: each sentence on one line (the 120-column form wraps them).
    let text = ok(&["--wide"], &trace);
    assert!(
        text.contains("busy (union of kernel intervals): 8.000 µs = 100.0 % of the window"),
        "{text}"
    );
    assert!(
        text.contains("sum of kernel durations (double-counts overlap): 10.800 µs"),
        "{text}"
    );
    // A torch.profiler trace does not record drops: unknown, not "none".
    assert!(
        text.contains("data loss: none seen (a torch.profiler trace does not record whether CUPTI or the profiler dropped records: drop counts unknown)"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&["--format", "json"], &trace)).unwrap();
    assert_eq!(json["data_loss"]["drops_recorded"], false);
    // Stream 7 alone: 200 ns idle, 2.5 % of its window.
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("7 "))
        .expect("a row for stream 7");
    // One unit per column, in its heading: stream 7's idle is 200 of the column's ns.
    let row: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        row,
        ["7", "3", "7.800", "97.5", "%", "200", "2.5", "%", "1", "7.800"],
        "{text}"
    );
    assert!(
        text.contains(
            "stream  kernels  busy (µs)    busy%  idle (ns)  idle%  gaps  sum of durs (µs)"
        ),
        "{text}"
    );
    assert!(
        text.contains("stream 7 largest gap: 200 ns at ")
            && text.contains("after gemm (corr 11, stream 7) → before gemm (corr 12, stream 7)"),
        "{text}"
    );
    // No busy percentage above 100.
    for pct in text
        .split(" %")
        .filter_map(|s| s.rsplit(' ').next()?.parse::<f64>().ok())
    {
        assert!(pct <= 100.0, "{pct} % in\n{text}");
    }
}

#[test]
fn time_window_clips_intervals() {
    let dir = Dir::new("window");
    let trace = dir.file("seed.json", &seed_json(&[11, 12, 13, 14, 15]));
    // Absolute bounds on the trace clock: [4500, 5600) relative to BASE.
    let from = (BASE_NS + 4_500).to_string();
    let to = (BASE_NS + 5_600).to_string();
    let v: Value = serde_json::from_str(&ok(
        &["--format", "json", "--from", &from, "--to", &to],
        &trace,
    ))
    .unwrap();
    let d = &v["devices"][0];
    // Kernels 11 (→5000), 12 (5200→), 14 (→6000) overlap the window; 13 and 15 do not.
    assert_eq!(d["kernels"], 3);
    assert_eq!(
        d["busy_ns"], 1_100,
        "[4500, 5600) is covered by 11 ∪ 14 ∪ 12"
    );
    assert_eq!(d["window_ns"], 1_100);
    assert_eq!(v["window"]["from_ns"], BASE_NS + 4_500);
    // Relative bounds: the trace starts at the first launch (BASE + 900), so 4.1us..4.4us is
    // [5000, 5300): kernel 11 ends exactly at 5000 (outside), 12 starts at 5200, 14 covers it.
    let v: Value = serde_json::from_str(&ok(
        &["--format", "json", "--from", "4.1us", "--to", "4.4us"],
        &trace,
    ))
    .unwrap();
    let d = &v["devices"][0];
    assert_eq!(
        (d["kernels"].as_u64(), d["busy_ns"].as_u64()),
        (Some(2), Some(300)),
        "{v}"
    );
    let streams: Vec<(u64, u64, u64)> = d["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stream"].as_u64().unwrap(),
                s["busy_ns"].as_u64().unwrap(),
                s["window_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(streams, vec![(7, 100, 100), (13, 300, 300)]);
}

#[test]
fn the_example_trace_in_the_repo_reports() {
    let example = cutrace_testkit::repo().join("examples/two_streams.json.gz");
    let text = ok(&[], &example);
    assert!(text.contains("GPU 0"), "{text}");
    let v: Value =
        serde_json::from_str(&ok(&["--format", "json", "--top", "3"], &example)).unwrap();
    let d = &v["devices"][0];
    assert!(d["busy_ns"].as_u64().unwrap() <= d["window_ns"].as_u64().unwrap());
    assert!(v["kernel_summary"].as_array().unwrap().len() <= 3);
}

fn assert_fails(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout on error");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn errors_name_the_problem_and_exit_non_zero() {
    let dir = Dir::new("errors");
    let missing = dir.0.join("no-such-trace.json");
    assert_fails(&report(&[], &missing), &["no-such-trace.json"]);

    let full = seed_json(&[11]);
    let truncated = dir.file("truncated.json", &full[..full.len() / 2]);
    assert_fails(
        &report(&["--format", "json"], &truncated),
        &["truncated.json"],
    );

    let not_a_trace = dir.file("notes.txt", "hello");
    assert_fails(&report(&[], &not_a_trace), &["notes.txt"]);

    let trace = dir.file("seed.json", &full);
    assert_fails(&report(&["--from", "soon"], &trace), &["--from", "soon"]);
    assert_fails(
        &report(&["--from", "5us", "--to", "1us"], &trace),
        &["empty"],
    );
}
