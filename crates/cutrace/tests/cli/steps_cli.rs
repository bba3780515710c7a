//! `cutrace report --steps`: on the real H200 NVTX trace (10 "step" ranges, each launching two
//! kernels and synchronizing before it ends), every step is found with its two kernels and its
//! busy time equals the union of those kernels, computed here from the records themselves.

use crate::util::{cutrace, cutrace_json as json};
use cutrace_testkit::repo;

const NVTX: &str = "tests/fixtures/native/nvtx";

#[test]
fn nvtx_steps_hold_their_kernels_and_busy_time() {
    let r = json(&["report", NVTX, "--steps", "step"]);
    let st = &r["steps"];
    assert_eq!(st["matched"], "step");
    assert_eq!(
        (st["count"].as_u64(), st["processes"].as_u64()),
        (Some(10), Some(1))
    );
    let trace = cutrace_trace::native::read(&repo().join(NVTX), &mut |_, _| {}).unwrap();
    let steps = st["steps"].as_array().unwrap();
    let mut ranges: Vec<(u64, u64)> = trace
        .ranges
        .iter()
        .filter(|x| trace.str(x.name) == "step")
        .map(|x| (x.start_ns, x.end_ns))
        .collect();
    ranges.sort();
    assert_eq!(ranges.len(), steps.len());
    for (s, &(a, b)) in steps.iter().zip(&ranges) {
        assert_eq!(
            (s["start_ns"].as_u64(), s["end_ns"].as_u64()),
            (Some(a), Some(b))
        );
        assert_eq!(s["duration_ns"].as_u64(), Some(b - a));
        // The program synchronizes before popping the range: both kernels lie inside it.
        let mut inside: Vec<(u64, u64)> = trace
            .kernels
            .iter()
            .filter(|k| k.start_ns >= a && k.end_ns <= b)
            .map(|k| (k.start_ns, k.end_ns))
            .collect();
        assert_eq!(inside.len(), 2);
        assert_eq!(s["kernels"], 2);
        inside.sort();
        let union = if inside[0].1 <= inside[1].0 {
            (inside[0].1 - inside[0].0) + (inside[1].1 - inside[1].0)
        } else {
            inside[1].1.max(inside[0].1) - inside[0].0
        };
        let dev = &s["devices"][0];
        assert_eq!(dev["busy_ns"].as_u64(), Some(union), "{s}");
        let pct = dev["busy_pct"].as_f64().unwrap();
        assert!((pct - union as f64 * 100.0 / (b - a) as f64).abs() < 1e-9);
    }
    let g0 = &st["devices"][0];
    assert_eq!(g0["steps"], 10);
    let busy: u64 = steps
        .iter()
        .map(|s| s["devices"][0]["busy_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(g0["busy_ns"].as_u64(), Some(busy));

    let o = cutrace(&["report", NVTX, "--steps", "step", "--top", "3"]);
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "Steps (host ranges \"step\": 10 in 1 process)",
        "step time: median",
        "GPU 0 busy during a step",
        "longest steps (top 3 of 10; # = place in time order",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn steps_are_shown_only_when_asked_for_or_present() {
    // No ProfilerStep# ranges in this trace: no steps key, no section.
    let r = json(&["report", NVTX]);
    assert!(r.get("steps").is_none());
    // A prefix; and a torch.profiler trace.
    let r = json(&["report", NVTX, "--steps", "s*"]);
    assert_eq!(r["steps"]["count"], 10);
    let r = json(&[
        "report",
        "tests/fixtures/kineto/train_step.json.gz",
        "--steps",
        "forward",
    ]);
    assert_eq!(r["steps"]["count"], 2);
    // A name that matches nothing fails, and lists what the trace has.
    let o = cutrace(&["report", NVTX, "--steps", "stpe"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--steps stpe") && err.contains("step (10)") && err.contains("forward (10)"),
        "{err}"
    );
    // Nothing in the window: the same error, naming the window.
    let o = cutrace(&["report", NVTX, "--steps", "step", "--from", "100s"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the window of tests/fixtures/native/nvtx"));
}

/// A torch.profiler trace with `ProfilerStep#N` annotations (written here: no committed trace
/// has them), read through the Kineto importer with the default matcher: a step in which the GPU
/// idles counts at 0 %, and a window that cuts steps leaves them out and says so.
#[test]
fn profiler_steps_are_found_by_default_and_idle_steps_count() {
    // Steps of 100 µs at 1000, 1100, 1200, 1300 µs; one 60 µs kernel in each but the third.
    let mut ev = Vec::new();
    let mut corr = 0;
    for step in 0..4u64 {
        let t0 = 1000 + step * 100;
        ev.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":100,"tid":100,"ts":{t0}.0,"dur":100.0}}"#
        ));
        if step != 2 {
            corr += 1;
            ev.push(format!(
                r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":{}.0,"dur":1.0,"args":{{"correlation":{corr}}}}}"#,
                t0 + 5
            ));
            ev.push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{}.0,"dur":60.0,"args":{{"device":0,"stream":7,"correlation":{corr}}}}}"#,
                t0 + 20
            ));
        }
    }
    let dir = cutrace_testkit::Dir::new("steps");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("steps.json");
    std::fs::write(&path, format!(r#"{{"traceEvents":[{}]}}"#, ev.join(","))).unwrap();
    let p = path.to_str().unwrap();
    let r = json(&["report", p]);
    let st = &r["steps"];
    assert_eq!(st["matched"], "ProfilerStep#*");
    assert_eq!(st["count"], 4);
    assert_eq!(st["duration_median_ns"], 100_000);
    let g0 = &st["devices"][0];
    // 60 %, 60 %, 0 %, 60 %: nearest-rank median 60 %, lowest 0 %, one idle step.
    assert_eq!(
        (g0["steps"].as_u64(), g0["idle_steps"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(g0["busy_pct_median"], 60.0);
    assert_eq!(g0["busy_pct_min"], 0.0);
    assert_eq!(st["steps"][2]["devices"][0]["busy_ns"], 0);
    assert_eq!(st["steps"][2]["kernels"], 0);
    // From 50 µs to 350 µs after the trace start (1000 µs): steps 0 and 3 are cut.
    let r = json(&["report", p, "--from", "50us", "--to", "350us"]);
    assert_eq!(r["steps"]["count"], 2);
    assert_eq!(r["steps"]["cut_by_window_left_out"], 2);
    assert_eq!(r["steps"]["duration_min_ns"], 100_000);
    let o = cutrace(&["report", p, "--from", "50us", "--to", "350us"]);
    let text = String::from_utf8(o.stdout).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        text.contains("left out: 2 cut by the window's edges"),
        "{text}"
    );
    assert!(
        text.contains("it ran none of their kernels in 1)"),
        "{text}"
    );
}

/// A 2021 torch.profiler trace (torch 1.8: a bare array, every CPU op and the steps filed as
/// `Operator`): `--steps 'ProfilerStep*'` finds its two steps, each with the time its process
/// spent in `enumerate(DataLoader)` (the op's whole length: one fetch per step), and the GPU's
/// gap during a fetch names the data loader op that covered it.
#[test]
fn a_2021_trace_has_steps_loader_time_and_the_ops_around_its_gaps() {
    let fixture = "tests/fixtures/kineto/tb_resnet50_2021_operators.json.gz";
    let r = json(&["report", fixture, "--steps", "ProfilerStep*"]);
    let steps = r["steps"]["steps"].as_array().unwrap();
    let got: Vec<_> = steps
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["duration_ns"].as_u64().unwrap(),
                s["dataloader_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("ProfilerStep#6", 150_790_000, 43_830_000),
            ("ProfilerStep#7", 141_346_000, 42_919_000)
        ]
    );
    // The gap from the last kernel before the fetch to the first after it.
    let gaps = r["devices"][0]["largest_gaps"].as_array().unwrap();
    let g = gaps
        .iter()
        .find(|g| g["start_ns"] == 1_610_366_662_420_765_000u64)
        .expect("the gap during step 6's fetch");
    let ops = g["host"]["cpu_ops"].as_array().unwrap();
    assert!(ops[0]["name"]
        .as_str()
        .unwrap()
        .starts_with("enumerate(DataLoader)"));
    // The op ends at 457,534 µs; the gap starts at 420,765 µs.
    assert_eq!(ops[0]["in_gap_ns"], 36_769_000u64);
    assert_eq!(ops[0]["category"], "cpu_op");
    let out = cutrace(&["report", fixture, "--steps", "ProfilerStep*"]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("host ranges: none"));
}
