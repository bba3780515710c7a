//! cutrace against Holistic Trace Analysis on the same real traces. HTA's outputs were recorded
//! by bench/hta_breakdown.py (HTA 0.5.0) into tests/fixtures/hta/temporal_breakdown.json; see
//! docs/HTA.md. With HTA_DISABLE_NS_ROUNDING=1, HTA's idle time and window must agree with
//! cutrace's exact integers up to HTA's float error; with its defaults they must not.

use std::path::Path;

use cutrace_testkit::repo;
use cutrace_testkit::Run;
use serde_json::Value;

fn report(trace: &Path) -> Value {
    let out = crate::util::bin()
        .args(["report", "--format", "json"])
        .arg(trace)
        .run_ok();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn hta_without_rounding_agrees_to_float_error_and_with_rounding_does_not() {
    let hta: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/hta/temporal_breakdown.json"))
            .unwrap(),
    )
    .unwrap();
    let mut compared = 0;
    let mut rounding_off_by = Vec::new();
    for (name, runs) in hta["traces"].as_object().unwrap() {
        let ours = report(&repo().join("tests/fixtures/kineto").join(name));
        // HTA unions copies and memsets into its "kernel" intervals; compare kernel-only traces.
        let dev = &ours["devices"][0];
        let records = |kind: &str| ours["correlation"][kind]["records"].as_u64().unwrap();
        let has_copies = records("memcpys") > 0 || records("memsets") > 0;
        if has_copies {
            continue;
        }
        let exact = runs["ns_rounding_disabled"].clone();
        let idle_ns = dev["idle_ns"].as_i64().unwrap() as f64;
        let window_ns = dev["window_ns"].as_i64().unwrap() as f64;
        let hta_idle = exact["idle_us"].as_f64().unwrap() * 1000.0;
        let hta_window = exact["kernel_time_us"].as_f64().unwrap() * 1000.0;
        assert!(
            (hta_idle - idle_ns).abs() < 2.0,
            "{name}: HTA idle {hta_idle} ns vs exact {idle_ns} ns"
        );
        assert!(
            (hta_window - window_ns).abs() < 2.0,
            "{name}: window {hta_window} vs {window_ns}"
        );
        match runs["default"].get("idle_us").and_then(Value::as_f64) {
            Some(us) => rounding_off_by.push((us * 1000.0 - idle_ns).abs()),
            None => assert!(
                runs["default"]["error"]
                    .as_str()
                    .unwrap()
                    .contains("AssertionError"),
                "{name}: HTA's default run neither produced a result nor failed its assertion"
            ),
        }
        compared += 1;
    }
    assert!(compared >= 3, "compared {compared} kernel-only traces");
    // Rounding every timestamp to whole microseconds moves idle time by far more than a µs.
    assert!(
        rounding_off_by.iter().any(|d| *d > 10_000.0),
        "expected HTA's default rounding to be visibly off: {rounding_off_by:?}"
    );
}
