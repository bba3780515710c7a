//! The `cutrace sample` trace of gpu/sample.cu recorded on the H200
//! (tests/fixtures/native/sample_pm: three 40 ms FMA kernels filling every SM, between 40 ms host
//! sleeps, sampled every 2 ms): the report's layered answer checked against a brute-force
//! reading of the same samples at every microsecond, and against what the program did (SMs
//! active while its kernels run, idle in the sleeps); the text carries the same numbers and the
//! PM data-loss line.

use cutrace_trace::Trace;

const FIXTURE: &str = "tests/fixtures/native/sample_pm";
const SM: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";

fn trace() -> Trace {
    cutrace_trace::open(&cutrace_testkit::repo().join(FIXTURE), &mut |_, _| {}).unwrap()
}

/// Brute force over the span [a, b) at 1 µs steps: the share of points inside a kernel, and
/// the mean SM-active value of the sample holding each point (points no sample holds are left
/// out). `keep` chooses the points (all, or only those outside kernels).
fn brute(t: &Trace, a: u64, b: u64, keep: &dyn Fn(bool) -> bool) -> (f64, f64) {
    let sm: Vec<(u64, u64, f64)> = t
        .pm_samples
        .iter()
        .filter(|s| t.strings[s.metric as usize] == SM && !s.value.is_nan())
        .map(|s| (s.start_ns, s.end_ns, s.value))
        .collect();
    let (mut points, mut running, mut sum, mut held) = (0u64, 0u64, 0.0, 0u64);
    let mut p = a + 500;
    while p < b {
        let in_kernel = t.kernels.iter().any(|k| k.start_ns <= p && p < k.end_ns);
        if keep(in_kernel) {
            points += 1;
            running += u64::from(in_kernel);
            if let Some(s) = sm.iter().find(|s| s.0 <= p && p < s.1) {
                sum += s.2;
                held += 1;
            }
        }
        p += 1000;
    }
    (running as f64 * 100.0 / points as f64, sum / held as f64)
}

#[test]
fn the_layered_answer_matches_a_brute_force_reading_of_the_samples() {
    let t = trace();
    let v = crate::util::cutrace_json(&["report", FIXTURE]);
    let pm = &v["pm_samples"];
    let info = t.meta.pm_sampling.as_ref().unwrap();
    assert_eq!(pm["samples"], info.samples);
    assert_eq!(pm["first_samples_dropped"], 1);
    assert_eq!(pm["interval_ns"], 2_000_000);
    let d = &pm["devices"][0];
    let w = &d["window"];
    let (a, b) = (
        w["start_ns"].as_u64().unwrap(),
        w["end_ns"].as_u64().unwrap(),
    );
    let first = t.kernels.iter().map(|k| k.start_ns).min().unwrap();
    let last = t.kernels.iter().map(|k| k.end_ns).max().unwrap();
    assert_eq!((a, b), (first, last));
    let f = |x: &serde_json::Value| x.as_f64().unwrap();
    // The report's kernel share is the device's busy %.
    assert!((f(&w["kernels_running_pct"]) - f(&v["devices"][0]["busy_pct"])).abs() < 1e-9);

    let (running, sm) = brute(&t, a, b, &|_| true);
    assert!((f(&w["kernels_running_pct"]) - running).abs() < 0.05, "{w}");
    assert!((f(&w["sm_active_pct"]) - sm).abs() < 0.1, "{w} vs {sm}");
    let g = &d["idle_gaps"];
    let (_, sm_idle) = brute(&t, a, b, &|in_kernel| !in_kernel);
    assert_eq!(f(&g["kernels_running_pct"]), 0.0);
    assert!(
        (f(&g["sm_active_pct"]) - sm_idle).abs() < 0.1,
        "{g} vs {sm_idle}"
    );

    // What the program did: the kernels fill every SM, the sleeps leave them idle; no tensor
    // work. (Samples straddling a kernel's edge bleed a little into the gaps.)
    assert!(
        (f(&w["sm_active_pct"]) - f(&w["kernels_running_pct"])).abs() < 3.0,
        "{w}"
    );
    assert!(f(&g["sm_active_pct"]) < 3.0, "{g}");
    assert_eq!(f(&w["tensor_active_pct"]), 0.0);
    // This GPU had no NVLink counters: left out, not reported as 0.
    assert_eq!(pm["left_out"][0], "nvlrx__bytes.sum");
    assert!(pm["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| !m["name"].as_str().unwrap().starts_with("nvl")));
}

#[test]
fn the_text_report_gives_the_same_layers_and_the_pm_loss_line() {
    let v = crate::util::cutrace_json(&["report", FIXTURE]);
    let w = &v["pm_samples"]["devices"][0]["window"];
    let out = crate::util::cutrace(&["report", FIXTURE]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = format!(
        "GPU 0: kernels running {:.1} % of the window, GPU active {:.1} %, SMs active {:.1} %, \
         tensor pipes {:.1} %, DRAM {:.1} %",
        w["kernels_running_pct"].as_f64().unwrap(),
        w["gpu_active_pct"].as_f64().unwrap(),
        w["sm_active_pct"].as_f64().unwrap(),
        w["tensor_active_pct"].as_f64().unwrap(),
        w["dram_throughput_pct"].as_f64().unwrap(),
    );
    assert!(text.contains(&line), "{line}\nnot in\n{text}");
    assert!(
        text.contains(&format!(
            "PM samples: {} kept; 1 first sample(s) dropped as outliers",
            v["pm_samples"]["samples"]
        )),
        "{text}"
    );
    assert!(text.contains("  idle gaps ("), "{text}");
}

#[test]
fn each_step_has_its_layers() {
    let t = trace();
    let v = crate::util::cutrace_json(&["report", FIXTURE, "--steps", "cycle*"]);
    let steps = v["steps"]["steps"].as_array().unwrap();
    let layers = v["pm_samples"]["devices"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(layers.len(), steps.len());
    for (s, l) in steps.iter().zip(layers) {
        assert_eq!(l["index"], s["index"]);
        assert_eq!(l["name"], s["name"]);
        let l = &l["layers"];
        assert_eq!(l["start_ns"], s["start_ns"]);
        assert_eq!(l["span_ns"], s["duration_ns"]);
        // The step's kernel share is the steps section's busy %, and a brute-force reading.
        let f = |x: &serde_json::Value| x.as_f64().unwrap();
        assert!((f(&l["kernels_running_pct"]) - f(&s["devices"][0]["busy_pct"])).abs() < 1e-6);
        let (a, b) = (
            l["start_ns"].as_u64().unwrap(),
            l["end_ns"].as_u64().unwrap(),
        );
        let (running, sm) = brute(&t, a, b, &|_| true);
        assert!((f(&l["kernels_running_pct"]) - running).abs() < 0.05, "{l}");
        assert!((f(&l["sm_active_pct"]) - sm).abs() < 0.1, "{l} vs {sm}");
        // Half sleep, half kernel: SMs active about as long as the kernel ran.
        assert!(
            (f(&l["sm_active_pct"]) - f(&l["kernels_running_pct"])).abs() < 3.0,
            "{l}"
        );
    }
}

/// `cutrace diff` of the fixture against itself gives each side the report's own layers (the
/// whole trace, and a window the two commands cut alike) and no change; against its Chrome
/// export (which carries no PM samples) the new side and every change are unknown, never 0.
#[test]
fn diff_puts_the_layers_of_both_sides_beside_the_reports() {
    let f = |x: &serde_json::Value| x.as_f64();
    for window in [&[][..], &["--from", "600ms", "--to", "760ms"][..]] {
        let mut args = vec!["diff", FIXTURE, FIXTURE];
        args.extend_from_slice(window);
        let d = crate::util::cutrace_json(&args);
        let mut args = vec!["report", FIXTURE];
        args.extend_from_slice(window);
        let r = crate::util::cutrace_json(&args);
        let pm = &d["pm_samples"];
        assert_eq!(pm["base"]["samples"], r["pm_samples"]["samples"]);
        assert_eq!(pm["new"]["interval_ns"], 2_000_000);
        let rd = &r["pm_samples"]["devices"][0];
        let dd = &pm["devices"][0];
        assert_eq!(dd["device"], 0);
        for span in ["window", "idle_gaps"] {
            for layer in [
                "kernels_running_pct",
                "gpu_active_pct",
                "sm_active_pct",
                "tensor_active_pct",
                "dram_throughput_pct",
                "sampled_pct",
            ] {
                let c = &dd[span][layer];
                assert_eq!(
                    f(&c["base"]),
                    f(&rd[span][layer]),
                    "{span} {layer} {window:?}"
                );
                assert_eq!(c["base"], c["new"]);
                assert_eq!(f(&c["change_points"]), Some(0.0), "{span} {layer}");
            }
        }
        assert!(f(&dd["window"]["sm_active_pct"]["base"]).unwrap() > 20.0);
    }

    let dir = cutrace_testkit::Dir::new("sample-diff");
    let chrome = dir.path("t.json");
    let chrome = chrome.to_str().unwrap();
    crate::util::cutrace(&["convert", FIXTURE, "--chrome", chrome]);
    let d = crate::util::cutrace_json(&["diff", FIXTURE, chrome]);
    let pm = &d["pm_samples"];
    assert!(pm["new"].is_null() && pm["base"]["samples"].as_u64() > Some(100));
    let sm = &pm["devices"][0]["window"]["sm_active_pct"];
    assert!(f(&sm["base"]).is_some());
    assert!(sm["new"].is_null() && sm["change_points"].is_null(), "{sm}");
    let o = crate::util::cutrace(&["diff", FIXTURE, chrome]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("  new:  no PM samples"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("SMs active"))
        .unwrap();
    assert!(row.trim_end().ends_with('-'), "{row}");
}
