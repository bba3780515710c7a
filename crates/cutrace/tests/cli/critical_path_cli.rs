//! `cutrace report --critical-path` on a committed torch.profiler trace with steps: every
//! step's path is as long as the step, its composition adds up to that length, and the text
//! fits 120 columns and names the segments to shorten first.

use serde_json::Value;

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

/// torch.profiler names the stream and the `cudaEventRecord` call each event wait waited on;
/// `convert --chrome` writes them back on the `cuda_sync` events, so the export's critical path
/// is the original's, its waits still taken from the records (HTA's own traces: a stream wait
/// whose thread last launched on another stream before recording, and an event synchronize).
#[test]
fn the_chrome_export_keeps_the_event_waits_the_records_name() {
    let dir = cutrace_testkit::Dir::new("critical-path-chrome");
    // (trace, recorded stream waits, event synchronizes, of them waited for nothing, inferred
    // stream waits, stream waits not followed): 14 of alexnet's 34 waits have no synchronization
    // record, and 14 are on events of streams that run nothing; simple_add's records (an older
    // torch) name the event's stream alone, and the export keeps that.
    for (name, stream_waits, event_syncs, nothing, inferred, not_followed) in [
        ("event_sync_multi_stream", 1, 0, 0, 0, 0),
        ("event_sync", 0, 1, 0, 0, 0),
        ("alexnet", 20, 0, 14, 0, 14),
        ("simple_add", 0, 0, 0, 20, 14),
    ] {
        let src = format!("tests/fixtures/hta/critical_path/{name}.json.gz");
        let out = dir.path(&format!("{name}.json"));
        let out = out.to_str().unwrap();
        let o = cutrace(&["convert", &src, "--chrome", out]);
        assert!(o.status.success(), "{name}: {o:?}");
        let paths = [src.as_str(), out].map(|t| {
            let mut cp = cutrace_json(&["report", t, "--critical-path"])["critical_path"].take();
            // Host ops of equal time list in the order their names were first read, which the
            // export changes: `host_ns` holds their sum.
            let drop_ops =
                |p: &mut Value| p["composition"].as_object_mut().unwrap().remove("host_ops");
            cp["steps"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .for_each(|p| {
                    drop_ops(p);
                });
            drop_ops(&mut cp["window"]);
            cp
        });
        let r = &paths[0]["recorded"];
        assert_eq!(
            (
                r["stream_waits"].as_u64(),
                r["event_syncs"].as_u64(),
                r["waited_for_nothing"].as_u64()
            ),
            (Some(stream_waits), Some(event_syncs), Some(nothing)),
            "{name}"
        );
        let i = &paths[0]["inferred"];
        assert_eq!(i["stream_waits"].as_u64(), Some(inferred));
        assert_eq!(i["stream_waits_not_followed"].as_u64(), Some(not_followed));
        assert_eq!(paths[0], paths[1], "{name}");
    }
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

/// tests/tools/gen_job.py's 4-rank job with the stream waits and synchronizes PyTorch makes
/// (`--syncs`): in every step the planted straggler is on the path, with its planted stall (its
/// compute stream standing 50 µs plus the planted delay after the all-gather) as the longest
/// segment, and every rank that reached the all-reduce before it waited for it there.
#[test]
fn the_planted_straggler_is_on_the_path_of_each_step_as_its_longest_segment() {
    use crate::job_cli::{gen, python};
    let Some(py) = python() else {
        cutrace_testkit::loud!(
            "SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job"
        );
        return;
    };
    let dir = cutrace_testkit::Dir::new("critical-path-job");
    let args = [
        "--ranks",
        "4",
        "--steps",
        "4",
        "--kernels",
        "4",
        "--seed",
        "7",
        "--syncs",
    ];
    let (job, answer) = gen(py, &dir, "job", &args);
    let r = crate::job_cli::report(&[&job], &["--critical-path"]);
    let steps = r["critical_path"]["steps"].as_array().unwrap();
    let planted = answer["planted"].as_array().unwrap();
    assert_eq!(steps.len(), planted.len());
    for (s, p) in steps.iter().zip(planted) {
        let straggler = p["straggler"].as_u64().unwrap();
        let longest = &s["longest_segments"][0];
        assert_eq!(longest["place"]["rank"].as_u64(), Some(straggler), "{s}");
        assert_eq!(longest["kind"], "stream_wait");
        assert_eq!(longest["length_ns"], p["stall_ns"]);
        assert!(longest["length_ns"].as_u64() > p["delay_ns"].as_u64());
        // At the all-gather the last to arrive is whoever the jitter made last; at the
        // all-reduce it is the straggler.
        for w in s["rank_waits"].as_array().unwrap() {
            if w["op"] == "allreduce" {
                assert_eq!(w["waited_for_rank"].as_u64(), Some(straggler));
            }
        }
        if s["end_rank"].as_u64() != Some(straggler) {
            let waits = s["rank_waits"].as_array().unwrap();
            assert!(
                waits.iter().any(|w| w["op"] == "allreduce"),
                "the path reaches the straggler through the all-reduce: {s}"
            );
        }
        let c = &s["composition"];
        let parts: u64 = [
            "host_ns",
            "compute_ns",
            "communication_ns",
            "copy_ns",
            "launch_ns",
        ]
        .iter()
        .chain(&["sync_ns", "stream_wait_ns", "unexplained_ns"])
        .map(|k| c[*k].as_u64().unwrap())
        .sum();
        assert_eq!(s["length_ns"].as_u64(), Some(parts));
    }
    // docs/REPORT.md names every field of it.
    let mut seen = std::collections::BTreeSet::new();
    keys(&r["critical_path"], &mut seen);
    let doc = std::fs::read_to_string(cutrace_testkit::repo().join("docs/REPORT.md")).unwrap();
    let missing: Vec<&String> = seen
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/REPORT.md does not name {missing:?}"
    );
    let text = crate::util::bin()
        .arg("report")
        .arg(&job)
        .arg("--critical-path")
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("Critical path across the ranks"));
    for line in text.lines() {
        assert!(line.chars().count() <= 120, "too wide: {line}");
    }
}

fn keys(v: &serde_json::Value, seen: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                seen.insert(k.clone());
                keys(x, seen);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, seen)),
        _ => {}
    }
}

/// `diff --critical-path`: a trace against itself changes nothing, over its steps; against a
/// trace without steps it compares the windows' paths, whose lengths are the reports'. Every
/// field is named on docs/DIFF.md.
#[test]
fn diff_says_how_the_path_changed() {
    let same = cutrace_json(&["diff", TRACE, TRACE, "--critical-path"]);
    let d = &same["critical_path"];
    assert_eq!(d["over"], "steps");
    assert!(d["steps_base"].as_u64() > Some(0));
    assert!(d["parts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["delta_ns"] == 0));
    assert!(d["changed"].as_array().unwrap().is_empty());

    let other = "tests/fixtures/kineto/train_step.json.gz";
    let x = cutrace_json(&["diff", other, TRACE, "--critical-path"]);
    let d = &x["critical_path"];
    assert_eq!(d["over"], "window");
    let len = |t: &str| {
        cutrace_json(&["report", t, "--critical-path"])["critical_path"]["window"]["length_ns"]
            .as_i64()
            .unwrap()
    };
    let length = &d["parts"][0];
    assert_eq!(length["part"], "length");
    assert_eq!(length["delta_ns"].as_i64(), Some(len(TRACE) - len(other)));
    let changed = d["changed"].as_array().unwrap();
    assert!(!changed.is_empty());
    for c in changed {
        let delta = c["new_ns"].as_i64().unwrap() - c["base_ns"].as_i64().unwrap();
        assert_eq!(c["delta_ns"].as_i64(), Some(delta));
    }
    let mut seen = std::collections::BTreeSet::new();
    keys(d, &mut seen);
    let doc = std::fs::read_to_string(cutrace_testkit::repo().join("docs/DIFF.md")).unwrap();
    let missing: Vec<&String> = seen
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("`{k}[]`")))
        .collect();
    assert!(missing.is_empty(), "docs/DIFF.md does not name {missing:?}");
    assert!(doc.contains("`critical_path`"));
}

/// A real torch 2.11.0+cu130 trace with `enable_cuda_sync_events` (an H100,
/// `gpu/torch_sync_events.py`): its 6 stream-wait records name neither the event's stream nor
/// its record call (-1), so the waits are inferred; in each of the 3 steps the thread launched a
/// decoy on a third stream just before the record, and that first wait is called ambiguous.
/// Every step's path is still the step's time.
#[test]
fn torch_211_waits_are_inferred_and_the_decoys_are_called_ambiguous() {
    let trace = "tests/fixtures/kineto/torch211_sync_events.json.gz";
    let r = cutrace_json(&["report", trace, "--critical-path"]);
    let cp = &r["critical_path"];
    let steps = r["steps"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(cp["recorded"]["stream_waits"], 0);
    assert_eq!(cp["inferred"]["stream_waits"], 6);
    assert_eq!(cp["inferred"]["stream_waits_ambiguous"], 3);
    assert_eq!(cp["inferred"]["stream_waits_not_followed"], 0);
    for (s, p) in steps.iter().zip(cp["steps"].as_array().unwrap()) {
        assert_eq!(p["length_ns"], s["duration_ns"]);
    }
    let text = String::from_utf8(cutrace(&["report", trace, "--critical-path"]).stdout).unwrap();
    assert!(text.contains("3 of them are ambiguous"), "{text}");
}

/// Hostile shapes for the critical path, each run by the debug binary (overflow checks on):
/// kernels and steps ~2^64 ns apart, through report, its page and diff (a sum of two such paths
/// and their change would overflow), the same step in five processes on one page (a bucket the
/// paths share counts once, never past full), and a job whose step spans ~2^63 ns diffed with
/// itself. Each ends well, with its output.
#[test]
fn paths_near_two_to_the_64_ns_neither_panic_nor_wrap() {
    let dir = cutrace_testkit::Dir::new("critical-path-hostile");
    let api = |ts: &str, corr: u32| {
        format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": {ts}, "dur": 0.5, "args": {{"correlation": {corr}}}}}"#
        )
    };
    let kern = |name: &str, ts: &str, corr: u32| {
        format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 1, "args": {{"device": 0, "context": 1, "stream": 7, "correlation": {corr}}}}}"#
        )
    };
    let far = "18446744073709549";
    let mut events = vec![
        api("0", 1),
        kern("k0", "0", 1),
        api(far, 2),
        kern("k1", "18446744073709550", 2),
    ];
    let wide = dir.path("wide.json");
    let doc = |evs: &[String]| {
        format!(
            r#"{{"schemaVersion":1,"traceEvents":[{}]}}"#,
            evs.join(",\n")
        )
    };
    std::fs::write(&wide, doc(&events)).unwrap();
    for n in 1..=5 {
        events.push(format!(
            r#"{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{n}", "pid": {p}, "tid": {p}, "ts": 0, "dur": 18446744073709551, "args": {{}}}}"#,
            p = 1000 + n
        ));
    }
    let overlap = dir.path("overlap.json");
    std::fs::write(&overlap, doc(&events)).unwrap();
    let job = dir.path("job");
    std::fs::create_dir(&job).unwrap();
    for rank in 0..2 {
        let evs = [
            api("0", 1),
            kern("k0", "0", 1),
            r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":100,"tid":100,"ts":0,"dur":9223372036854775.809,"args":{}}"#.to_owned(),
        ];
        let text = format!(
            r#"{{"schemaVersion": 1, "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": 2}}, "traceEvents": [{}]}}"#,
            evs.join(",\n")
        );
        std::fs::write(job.join(format!("rank{rank}.json")), text).unwrap();
    }
    let (w, o, j) = (
        wide.to_str().unwrap(),
        overlap.to_str().unwrap(),
        job.to_str().unwrap(),
    );
    let page = dir.path("page.html");
    let p = page.to_str().unwrap();
    for args in [
        vec!["report", w, "--critical-path"],
        vec!["report", w, "--critical-path", "--html", p, "--force"],
        vec!["diff", w, w, "--critical-path"],
        vec!["diff", w, w, "--critical-path", "--html", p, "--force"],
        vec!["report", o, "--critical-path", "--html", p, "--force"],
        vec!["diff", j, j, "--critical-path", "--format", "json"],
    ] {
        let out = cutrace(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    // The last page (five processes' steps over one span) draws the path.
    let html = std::fs::read_to_string(&page).unwrap();
    let from = html.find("\"role\":\"path\"").expect("a path lane");
    assert!(html[from..].contains("\"levels\":[\""));
}
