//! `cutrace report --critical-path` on a committed torch.profiler trace with steps: every
//! step's path is as long as the step, its composition adds up to that length, and the text
//! fits 120 columns and names the segments to shorten first.

use crate::util::{cutrace, cutrace_json};

const TRACE: &str = "tests/fixtures/kineto/profiler_steps.json.gz";

#[test]
fn each_steps_path_is_the_steps_time_and_its_parts_add_up() {
    let r = cutrace_json(&["report", TRACE, "--critical-path"]);
    let steps = r["steps"]["steps"].as_array().unwrap();
    let paths = r["critical_path"]["steps"].as_array().unwrap();
    assert_eq!(paths.len(), steps.len());
    assert!(!paths.is_empty());
    for (s, p) in steps.iter().zip(paths) {
        assert_eq!(p["index"], s["index"]);
        assert_eq!(p["length_ns"], s["duration_ns"], "step {}", s["name"]);
        let c = &p["composition"];
        let parts: u64 = [
            "host_ns",
            "compute_ns",
            "communication_ns",
            "copy_ns",
            "launch_ns",
            "sync_ns",
            "stream_wait_ns",
            "unexplained_ns",
        ]
        .iter()
        .map(|k| c[k].as_u64().unwrap())
        .sum();
        assert_eq!(Some(parts), p["length_ns"].as_u64());
        let ops: u64 = c["host_ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["ns"].as_u64().unwrap())
            .sum();
        assert!(ops <= c["host_ns"].as_u64().unwrap());
    }
    // Without the flag the report has no such key.
    let plain = cutrace_json(&["report", TRACE]);
    assert!(plain.get("critical_path").is_none());
}

#[test]
fn the_text_names_the_segments_to_shorten_first_in_120_columns() {
    let out = cutrace(&["report", TRACE, "--critical-path"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let at = text
        .find("\nCritical path:")
        .expect("a critical path section");
    let section = &text[at..];
    assert!(section.contains("In the slowest step, ProfilerStep#"));
    assert!(section.contains("The segments to shorten first:"));
    for line in text.lines() {
        assert!(line.chars().count() <= 120, "too wide: {line}");
    }
}
