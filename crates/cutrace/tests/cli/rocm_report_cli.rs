//! A ROCm trace reads as ROCm: its API table is "HIP API calls", and its gap count says how many
//! gaps are shorter than 1 µs beside the exact count, in the text and the JSON. Checked against
//! the fixture's own events, read here as an oracle.

use std::io::Read;
use std::process::Command;

fn report(args: &[&str]) -> String {
    let p = cutrace_testkit::fixture("kineto/rocm_hip_calls.json.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("report")
        .arg(&p)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Kineto's microsecond text (`123.456`) as integer nanoseconds.
fn ns(v: &serde_json::Value) -> u64 {
    let t = v.to_string();
    let (whole, frac) = t.split_once('.').unwrap_or((&t, ""));
    let frac = format!("{frac:0<3}");
    whole.parse::<u64>().unwrap() * 1000 + frac[..3].parse::<u64>().unwrap()
}

/// The gaps between the fixture's kernels (one stream, one GPU), and those under 1 µs.
fn oracle_gaps() -> (u64, u64) {
    let mut text = String::new();
    let p = cutrace_testkit::fixture("kineto/rocm_hip_calls.json.gz");
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut spans: Vec<(u64, u64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .map(|e| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])))
        .collect();
    spans.sort_unstable();
    let (mut gaps, mut short, mut end) = (0, 0, spans[0].1);
    for &(s, e) in &spans[1..] {
        if s > end {
            gaps += 1;
            short += u64::from(s - end < 1_000);
        }
        end = end.max(e);
    }
    (gaps, short)
}

#[test]
fn a_rocm_trace_names_hip_calls_and_counts_its_short_gaps() {
    let (gaps, short) = oracle_gaps();
    assert!(short > 0 && short < gaps);
    let t = report(&[]);
    assert!(t.contains("\nHIP API calls by total time"), "{t}");
    assert!(!t.contains("CUDA API calls"), "{t}");
    let said = format!("in {gaps} gaps ({short} shorter than 1 µs)");
    assert!(t.lines().nth(1).unwrap().contains(&said), "verdict: {t}");
    let idle = t.lines().find(|l| l.starts_with("  idle: ")).unwrap();
    assert!(idle.ends_with(&said), "{idle}");
    let j: serde_json::Value = serde_json::from_str(&report(&["--format", "json"])).unwrap();
    assert_eq!(j["trace"]["api_runtime"], "hip");
    let d = &j["summary"]["devices"][0];
    assert_eq!(d["gaps"], gaps);
    assert_eq!(d["gaps_under_1us"], short);
    assert_eq!(j["devices"][0]["gaps"], gaps);
    let page = report(&["--html", "-"]);
    assert!(page.contains("<h2>Top HIP API calls</h2>"));
}

/// A CUDA trace keeps its words.
#[test]
fn a_cuda_trace_keeps_cuda_api_calls() {
    let p = cutrace_testkit::fixture("kineto/launch_bound.json.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["report", "--format", "json"])
        .arg(&p)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["trace"]["api_runtime"], "cuda");
}

/// A diff of two ROCm traces calls their calls HIP's, one of a ROCm trace and a CUDA one names
/// neither runtime, and the JSON says whose each side's are.
#[test]
fn a_diff_names_the_runtime_both_sides_share() {
    let rocm = cutrace_testkit::fixture("kineto/rocm_hip_calls.json.gz");
    let cuda = cutrace_testkit::fixture("kineto/two_streams.json.gz");
    let diff = |a: &std::path::Path, b: &std::path::Path, json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        c.arg("diff").arg(a).arg(b);
        if json {
            c.args(["--format", "json"]);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = diff(&rocm, &rocm, false);
    assert!(text.contains("HIP API calls"), "{text}");
    assert!(!text.contains("CUDA API calls"), "{text}");
    let text = diff(&rocm, &cuda, false);
    assert!(text.contains("\nAPI calls by change"), "{text}");
    assert!(
        !text.contains("HIP API calls") && !text.contains("CUDA API calls"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&diff(&rocm, &cuda, true)).unwrap();
    assert_eq!(j["base"]["api_runtime"], "hip");
    assert_eq!(j["new"]["api_runtime"], "cuda");
}
