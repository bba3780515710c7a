//! The page against the JSON report: every number the page marks (`data-check`) shows the JSON
//! report's value, and the page marks each GPU's busy %, gap counts and every step's duration;
//! names from the trace are escaped; the timeline's levels agree with the report's gaps; the
//! file stays small for a large trace.

use std::path::{Path, PathBuf};

use cutrace_analysis::{analyze, fmt_ns, Options, StepMatch, Window};
use cutrace_trace::{
    ApiCall, ApiKind, Kernel, NvtxRange, RangeDomain, ReadOptions, Trace, TraceNote,
};
use serde_json::Value;

use super::lod::{timeline_lod, BUDGET_BYTES};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel)
}

fn load(rel: &str) -> Trace {
    crate::input::load(&fixture(rel), &ReadOptions::default(), &mut |_, _| {}).unwrap()
}

fn report_and_page(trace: &Trace) -> (Value, String) {
    let opts = Options {
        steps: Some(StepMatch::profiler_steps()),
        ..Options::default()
    };
    let r = analyze(trace, &opts).unwrap();
    let page = super::report::page("t", trace, &r, None).unwrap();
    (serde_json::to_value(&r).unwrap(), page)
}

/// Each element with `data-check`: its attributes and its text.
struct Check {
    what: String,
    attrs: String,
    value: String,
    text: String,
}

fn attr(attrs: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let from = attrs.find(&key)? + key.len();
    Some(attrs[from..from + attrs[from..].find('"')?].to_owned())
}

fn checks(page: &str) -> Vec<Check> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("data-check=\"") {
        let open = rest[..i].rfind('<').unwrap();
        let end = i + rest[i..].find('>').unwrap();
        let attrs = &rest[open..end];
        let text_end = end + 1 + rest[end + 1..].find('<').unwrap();
        out.push(Check {
            what: attr(attrs, "data-check").unwrap(),
            attrs: attrs.to_owned(),
            value: attr(attrs, "data-value").unwrap(),
            text: rest[end + 1..text_end].to_owned(),
        });
        rest = &rest[text_end..];
    }
    out
}

fn find<'a>(cs: &'a [Check], what: &str, key: &str, id: u64) -> &'a Check {
    let hits: Vec<&Check> = cs
        .iter()
        .filter(|c| c.what == what && attr(&c.attrs, key).as_deref() == Some(&id.to_string()))
        .collect();
    assert_eq!(hits.len(), 1, "{what} {key}={id}: {} marks", hits.len());
    hits[0]
}

#[test]
fn numbers_equal_the_json_report() {
    for rel in [
        "kineto/profiler_steps.json.gz",
        "kineto/two_streams.json.gz",
        "kineto/copy_overlap.json.gz",
        "native/multiproc",
        "native/steps_lean",
        "kineto/hta_memory.json.gz",
    ] {
        let (json, page) = report_and_page(&load(rel));
        let cs = checks(&page);
        let mut expected = 0;
        let no_pools = Vec::new();
        let pools = json["memory"]["pools"].as_array().unwrap_or(&no_pools);
        for (i, p) in pools.iter().enumerate() {
            if let Some(peak) = p["peak"]["bytes"].as_u64() {
                let c = find(&cs, "memory_peak_bytes", "data-pool", i as u64);
                assert_eq!(c.value, peak.to_string(), "{rel}");
                assert_eq!(c.text, crate::text::memory::fmt_bytes(peak));
                expected += 1;
            }
        }
        for d in json["devices"].as_array().unwrap() {
            let dev = d["device"].as_u64().unwrap();
            let busy = d["busy_pct"].as_f64().unwrap();
            let c = find(&cs, "busy_pct", "data-device", dev);
            assert_eq!(c.value.parse::<f64>().unwrap(), busy, "{rel}");
            assert_eq!(c.text, format!("{busy:.2} %"), "{rel}");
            let gaps = d["gaps"].as_u64().unwrap();
            let c = find(&cs, "gaps", "data-device", dev);
            assert_eq!(
                (c.value.as_str(), c.text.as_str()),
                (&*gaps.to_string(), &*gaps.to_string())
            );
            expected += 2;
            // Compute and communication apart: the JSON summary's.
            let v = json["summary"]["devices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["device"] == d["device"])
                .unwrap();
            for k in ["compute_ns", "communication_ns"] {
                let ns = v[k].as_u64().unwrap();
                let c = find(&cs, k, "data-device", dev);
                assert_eq!(
                    (c.value.as_str(), c.text.as_str()),
                    (&*ns.to_string(), &*fmt_ns(ns)),
                    "{rel} {k}"
                );
                expected += 1;
            }
            if let Some(split) = d.get("idle_split") {
                for k in ["before_launch", "after_launch", "unknown"] {
                    let n = split[format!("gaps_{k}")].as_u64().unwrap().to_string();
                    let c = find(&cs, &format!("gaps_{k}"), "data-device", dev);
                    assert_eq!((&c.value, &c.text), (&n, &n), "{rel} {k}");
                    expected += 1;
                }
            }
        }
        for d in json["devices"].as_array().unwrap() {
            expected += histogram_marks_equal_the_json(&cs, d, rel);
        }
        if let Some(st) = json.get("steps") {
            for s in st["steps"].as_array().unwrap() {
                let index = s["index"].as_u64().unwrap();
                let bar = find(&cs, "step_bar_ns", "data-step", index);
                assert_eq!(bar.value, s["duration_ns"].to_string(), "{rel}");
                for d in s["devices"].as_array().unwrap() {
                    let fill: Vec<&Check> = cs
                        .iter()
                        .filter(|c| {
                            c.what == "step_busy_pct"
                                && attr(&c.attrs, "data-step") == Some(index.to_string())
                                && attr(&c.attrs, "data-device") == Some(d["device"].to_string())
                        })
                        .collect();
                    assert_eq!(fill.len(), 1, "{rel} step {index}");
                    let v: f64 = fill[0].value.parse().unwrap();
                    assert_eq!(v, d["busy_pct"].as_f64().unwrap(), "{rel} step {index}");
                    expected += 1;
                }
                expected += 1;
                let ns = s["duration_ns"].as_u64().unwrap();
                let c = find(
                    &cs,
                    "step_duration_ns",
                    "data-step",
                    s["index"].as_u64().unwrap(),
                );
                assert_eq!(
                    (c.value.clone(), c.text.clone()),
                    (ns.to_string(), fmt_ns(ns))
                );
                expected += 1;
            }
            for what in ["min", "median", "max"] {
                let ns = st[format!("duration_{what}_ns")].as_u64().unwrap();
                let hits: Vec<&Check> = cs
                    .iter()
                    .filter(|c| c.what == format!("step_duration_{what}_ns"))
                    .collect();
                assert_eq!(hits.len(), 1);
                let shown = (hits[0].value.clone(), hits[0].text.clone());
                assert_eq!(shown, (ns.to_string(), fmt_ns(ns)));
                expected += 1;
            }
        }
        assert!(expected > 0, "{rel}: nothing checked");
        assert_eq!(cs.len(), expected, "{rel}: marks the test does not know");
    }
}

/// The gap histogram of one GPU of the JSON report `d`: from its first bucket with gaps to its
/// last, a dot of each bucket's count, and a bar of its idle time where it has gaps; nothing
/// outside that range. Returns the marks checked.
fn histogram_marks_equal_the_json(cs: &[Check], d: &Value, rel: &str) -> usize {
    let dev = d["device"].to_string();
    let buckets = d["gap_histogram"].as_array().unwrap();
    let used: Vec<usize> = (0..buckets.len())
        .filter(|&i| buckets[i]["count"].as_u64().unwrap() > 0)
        .collect();
    let mut n = 0;
    for (what, field) in [
        ("gap_bucket_count", "count"),
        ("gap_bucket_total_ns", "total_ns"),
    ] {
        let marks: Vec<(usize, u64)> = cs
            .iter()
            .filter(|c| c.what == what && attr(&c.attrs, "data-device") == Some(dev.clone()))
            .map(|c| {
                let i: usize = attr(&c.attrs, "data-bucket").unwrap().parse().unwrap();
                (i, c.value.parse().unwrap())
            })
            .collect();
        let want: Vec<(usize, u64)> = match (used.first(), used.last()) {
            (Some(&lo), Some(&hi)) => (lo..=hi)
                .filter(|&i| what == "gap_bucket_count" || buckets[i]["total_ns"] != 0)
                .map(|i| (i, buckets[i][field].as_u64().unwrap()))
                .collect(),
            _ => Vec::new(),
        };
        assert_eq!(marks, want, "{rel} GPU {dev} {what}");
        n += marks.len();
    }
    n
}

/// The gap histogram's bars are idle time, not counts: on the 2021 ResNet-50 trace the tallest
/// bar is the bucket holding the most idle time (10 ms to 100 ms: 4 gaps), not the one with the
/// most gaps (1 µs to 10 µs: 8 gaps), and the axis says so.
#[test]
fn the_gap_histogram_weighs_buckets_by_idle_time() {
    let (json, page) = report_and_page(&load("kineto/tb_resnet50_2021_operators.json.gz"));
    let hist = &json["devices"][0]["gap_histogram"];
    let start = page.find("class=\"chart histogram\"").unwrap();
    let svg = &page[start..start + page[start..].find("</svg>").unwrap()];
    assert!(svg.contains("idle time (bars)") && svg.contains("gaps (dots)"));
    let tallest = checks(svg)
        .into_iter()
        .filter(|c| c.what == "gap_bucket_total_ns")
        .map(|c| {
            let h: f64 = attr(&c.attrs, "height").unwrap().parse().unwrap();
            (h, attr(&c.attrs, "data-bucket").unwrap())
        })
        .fold((0.0, String::new()), |a, b| if b.0 > a.0 { b } else { a });
    assert_eq!(tallest.1, "7");
    assert_eq!(hist[7]["count"], 4);
    assert_eq!(hist[3]["count"], 8);
    // The bucket's share of the idle time is written on its bar.
    let share = hist[7]["total_ns"].as_f64().unwrap() * 100.0
        / json["devices"][0]["idle_ns"].as_f64().unwrap();
    assert!(svg.contains(&format!(">{share:.0} %<")), "{share}");
}

/// One step is one bar of a bounded width, with the GPU's busy share drawn inside it.
#[test]
fn a_single_step_is_one_narrow_bar_holding_its_busy_share() {
    let mut t = load("kineto/profiler_steps.json.gz");
    let keep = t
        .strings
        .iter()
        .position(|s| s == "ProfilerStep#2")
        .unwrap() as u32;
    t.ranges
        .retain(|r| !t.strings[r.name as usize].starts_with("ProfilerStep#") || r.name == keep);
    t.host_ops
        .retain(|o| !t.strings[o.name as usize].starts_with("ProfilerStep#") || o.name == keep);
    let (json, page) = report_and_page(&t);
    assert_eq!(json["steps"]["count"], 1, "{}", json["steps"]);
    let cs = checks(&page);
    let bar = cs.iter().find(|c| c.what == "step_bar_ns").unwrap();
    let width: f64 = attr(&bar.attrs, "width").unwrap().parse().unwrap();
    assert!(width <= 60.0, "{width}");
    let fill = cs.iter().find(|c| c.what == "step_busy_pct").unwrap();
    let (bh, fh): (f64, f64) = (
        attr(&bar.attrs, "height").unwrap().parse().unwrap(),
        attr(&fill.attrs, "height").unwrap().parse().unwrap(),
    );
    let busy = json["steps"]["steps"][0]["devices"][0]["busy_pct"]
        .as_f64()
        .unwrap();
    assert!((fh / bh * 100.0 - busy).abs() < 0.1, "{fh} of {bh}, {busy}");
}

/// The host lanes: one per thread with host ops or CUDA calls, whose first share is the union of
/// its host ops and second that of its calls, both clipped to the span drawn; the copies lane's
/// first share is the report's copy busy time.
#[test]
fn host_and_copies_lanes_hold_the_threads_ops_and_calls_and_the_copies() {
    use super::lod::{b64_value, LaneRole};
    let sum = |level: &str, at: usize, width: u64| -> f64 {
        level
            .as_bytes()
            .chunks(2)
            .map(|c| b64_value(c[at]) as f64 / 63.0 * width as f64)
            .sum()
    };
    for rel in [
        "kineto/tb_resnet50_2021_operators.json.gz",
        "kineto/profiler_steps.json.gz",
        "native/two_streams",
    ] {
        let t = load(rel);
        let lod = timeline_lod(&t, None).unwrap();
        let (from, to) = (lod.start_ns, lod.start_ns + lod.span_ns);
        let hosts: Vec<_> = lod
            .lanes
            .iter()
            .filter_map(|l| match l.role {
                Some(LaneRole::Host { thread }) => Some((l, (l.pid.unwrap(), thread))),
                _ => None,
            })
            .collect();
        assert!(!hosts.is_empty(), "{rel}: no host lane");
        for (lane, (pid, thread)) in hosts {
            let clip = |s: u64, e: u64| (s.max(from), e.min(to));
            let mut ops: Vec<(u64, u64)> = t
                .host_ops
                .iter()
                .filter(|o| (o.process, o.thread) == (pid, thread))
                .map(|o| clip(o.start_ns, o.end_ns))
                .collect();
            let mut calls: Vec<(u64, u64)> = t
                .api_calls
                .iter()
                .filter(|c| (c.process, c.thread) == (pid, thread))
                .map(|c| clip(c.start_ns, c.end_ns))
                .collect();
            let level = &lane.levels[0];
            let width = lod.stream_bucket_ns * lod.zoom.pow(lane.levels.len() as u32 - 1);
            let n = level.len() as f64 / 2.0;
            for (at, runs) in [(0, &mut ops), (1, &mut calls)] {
                let union: u64 = cutrace_analysis::merged_runs(runs)
                    .iter()
                    .map(|r| r.1 - r.0)
                    .sum();
                let drawn = sum(level, at, width);
                assert!(
                    (drawn - union as f64).abs() <= n * width as f64 / 63.0,
                    "{rel} thread {thread} share {at}: drawn {drawn}, union {union}"
                );
            }
        }
    }
    let t = load("kineto/copy_overlap.json.gz");
    let (json, _) = report_and_page(&t);
    let lod = timeline_lod(&t, None).unwrap();
    for d in json["devices"].as_array().unwrap() {
        let dev = d["device"].as_u64().unwrap() as u32;
        let lane = lod
            .lanes
            .iter()
            .find(|l| l.device == dev && l.role == Some(LaneRole::Copies))
            .unwrap();
        let width = lod.stream_bucket_ns * lod.zoom.pow(lane.levels.len() as u32 - 1);
        let drawn = sum(&lane.levels[0], 0, width);
        let copy = d["copy_busy_ns"].as_f64().unwrap();
        let n = lane.levels[0].len() as f64 / 2.0;
        assert!(copy > 0.0);
        // Copies outside the kernels' span are not drawn: never more than the report's.
        assert!(drawn <= copy + n * width as f64 / 63.0, "{drawn} vs {copy}");
        assert!(drawn > 0.5 * copy, "{drawn} vs {copy}");
    }
}

/// Host lanes stay within the byte budget however many ops and threads: the busiest 16 threads
/// are drawn and the page says how many more there are.
#[test]
fn many_host_ops_and_threads_keep_the_timeline_in_budget() {
    use cutrace_trace::{HostOp, HostOpKind};
    let mut t = Trace {
        strings: vec!["k".into(), "aten::op".into()],
        ..Trace::default()
    };
    for i in 0..20_000u64 {
        t.kernels.push(Kernel {
            device: (i % 4) as u32,
            context: 1,
            stream: 7,
            correlation_id: i + 1,
            start_ns: 1_000_000 + i * 5_000,
            end_ns: 1_000_000 + i * 5_000 + 3_000,
            name: 0,
            launch: 0,
        });
    }
    for i in 0..200_000u64 {
        let at = 1_000_000 + i * 500;
        t.host_ops.push(HostOp {
            kind: HostOpKind::CpuOp,
            name: 1,
            process: 1,
            thread: i % 40,
            start_ns: at,
            end_ns: at + 400 + (i % 40) * 10,
            external_id: 0,
        });
    }
    let lod = timeline_lod(&t, None).unwrap();
    let bytes: usize = lod
        .lanes
        .iter()
        .flat_map(|l| &l.levels)
        .map(String::len)
        .sum();
    assert!(bytes as u64 <= BUDGET_BYTES, "{bytes}");
    let hosts = lod.lanes.iter().filter(|l| l.role.is_some()).count() as u64;
    assert_eq!(hosts, 16);
    assert_eq!(lod.host_threads_not_drawn, 40 - 16);
    // The busiest: the threads with the longest ops (the highest thread ids here).
    assert!(lod.lanes.iter().all(|l| match l.role {
        Some(super::lod::LaneRole::Host { thread }) => thread >= 24,
        _ => true,
    }));
    let (_, page) = report_and_page(&t);
    assert!(page.contains("24 host threads have no lane"));
}

/// Each largest gap says what the host was doing, in the table and in the timeline's tooltip
/// alike: when the next launch returned, the calls and ranges covering it and the CPU ops (the
/// JSON's `host.cpu_ops`), with the JSON's durations.
#[test]
fn each_largest_gap_says_what_the_host_was_doing() {
    let t = load("kineto/tb_resnet50_2021_operators.json.gz");
    let (json, page) = report_and_page(&t);
    let data = &page[page.find("id=\"cutrace-data\">").unwrap()..];
    let data: Value =
        serde_json::from_str(&data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()])
            .unwrap();
    let marks = data["timelines"][0]["gaps"].as_array().unwrap();
    let gaps = json["devices"][0]["largest_gaps"].as_array().unwrap();
    assert_eq!(marks.len(), gaps.len());
    let mut ops = 0;
    for (m, g) in marks.iter().zip(gaps) {
        let context: Vec<&str> = m["context"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        let text = context.join("\n");
        let host = &g["host"];
        if let Some(l) = host.get("next_launch") {
            let r = l["returned_into_gap_ns"].as_i64().unwrap();
            assert!(text.contains(&fmt_ns(r.unsigned_abs())), "{text}");
            assert!(text.contains(l["name"].as_str().unwrap()));
        }
        for c in host["calls"].as_array().unwrap() {
            let n = c["ns"].as_u64().unwrap();
            assert!(text.contains(&format!("{} {}", c["name"].as_str().unwrap(), fmt_ns(n))));
        }
        for r in host["ranges"].as_array().unwrap() {
            let n = r["ns"].as_u64().unwrap();
            assert!(text.contains(&format!("{} {}", r["name"].as_str().unwrap(), fmt_ns(n))));
        }
        for o in host["cpu_ops"].as_array().into_iter().flatten() {
            let n = o["in_gap_ns"].as_u64().unwrap();
            let line = format!("{} {} of it", o["name"].as_str().unwrap(), fmt_ns(n));
            assert!(text.contains(&line), "{text}");
            // The table shows the same lines, escaped.
            assert!(page.contains(&*super::escape(&line)), "{line}");
            ops += 1;
        }
    }
    assert!(ops > 0, "no CPU op named in any gap");
}

/// The diff page opens with each GPU's wall time, busy and idle split of both traces and their
/// change, the diff JSON's numbers.
#[test]
fn the_diff_page_opens_with_wall_time_busy_and_the_idle_split() {
    let (base, new) = (
        load("kineto/two_streams.json.gz"),
        load("kineto/profiler_steps.json.gz"),
    );
    let opts = cutrace_analysis::DiffOptions {
        page: true,
        ..Default::default()
    };
    let (b, n) = (
        cutrace_analysis::diff_side(&base, None, &opts).unwrap(),
        cutrace_analysis::diff_side(&new, None, &opts).unwrap(),
    );
    let d = cutrace_analysis::diff_sides(&b, &n, &opts);
    let (lb, ln) = (
        super::timeline_lod(&base, None).unwrap(),
        super::timeline_lod(&new, None).unwrap(),
    );
    let side = |title, side, timeline| super::diff::PageSide {
        title,
        side,
        timeline,
    };
    let page = super::diff::page(&side("base", &b, &lb), &side("new", &n, &ln), &d, None);
    let head = page.find("id=\"headline\"").unwrap();
    assert!(head < page.find("id=\"caveats\"").unwrap());
    assert!(
        page[..head].find("<h2").is_none(),
        "something comes before the headline"
    );
    let json = serde_json::to_value(&d).unwrap();
    let cs = checks(&page[head..page.find("id=\"caveats\"").unwrap()]);
    let mut n = 0;
    for g in json["devices"].as_array().unwrap() {
        let dev = g["device"].as_u64().unwrap();
        for key in [
            "window_ns",
            "busy_ns",
            "idle_ns",
            "idle_before_launch_ns",
            "idle_after_launch_ns",
            "idle_unknown_ns",
        ] {
            let (bv, nv) = (g["base"][key].as_u64(), g["new"][key].as_u64());
            for (side, v) in [("base", bv), ("new", nv)] {
                let Some(v) = v else { continue };
                let c = find(&cs, &format!("{side}_{key}"), "data-device", dev);
                assert_eq!(
                    (c.value.clone(), c.text.clone()),
                    (v.to_string(), fmt_ns(v))
                );
                n += 1;
            }
            if let (Some(x), Some(y)) = (bv, nv) {
                let c = find(&cs, &format!("change_{key}"), "data-device", dev);
                assert_eq!(c.value, (y as i64 - x as i64).to_string(), "{key}");
                assert!(c.text.contains(&fmt_ns(y.abs_diff(x))), "{}", c.text);
                n += 1;
            }
        }
        for side in ["base", "new"] {
            let c = find(&cs, &format!("{side}_busy_pct"), "data-device", dev);
            assert_eq!(
                c.value.parse::<f64>().unwrap(),
                g[side]["busy_pct"].as_f64().unwrap()
            );
            let c = find(&cs, &format!("{side}_gaps"), "data-device", dev);
            assert_eq!(c.value, g[side]["gaps"].to_string());
            n += 2;
        }
    }
    assert!(n >= 16, "{n}");
    assert_eq!(cs.len(), n, "marks the test does not know");
}

/// The memory plot's highest point is the JSON's peak (the plot keeps each bucket's highest
/// value), whole trace and windowed.
#[test]
fn the_memory_plot_peaks_at_the_reports_peak() {
    let t = load("kineto/hta_memory.json.gz");
    let (lo, hi) = t.bounds_ns().unwrap();
    for window in [
        None,
        Some(Window {
            from_ns: lo + (hi - lo) / 3,
            to_ns: lo + (hi - lo) / 2,
        }),
    ] {
        let opts = Options {
            window,
            ..Options::default()
        };
        let r = analyze(&t, &opts).unwrap();
        let plots = super::memory::memory_plots(&t, window.as_ref());
        let pools = &r.memory.as_ref().unwrap().pools;
        assert_eq!(pools.len(), plots.pools.len());
        let mut peaks = 0;
        for (p, plot) in pools.iter().zip(&plots.pools) {
            let top = plot.live.iter().map(|x| x.1).max().filter(|&b| b > 0);
            assert_eq!(top, p.peak.as_ref().map(|k| k.bytes), "{window:?}");
            assert!(plot.live.len() <= super::memory::BUCKETS + 1);
            peaks += usize::from(top.is_some());
        }
        assert!(peaks > 0);
    }
}

#[test]
fn the_step_fixture_has_steps_and_gaps() {
    // The test above must check steps somewhere.
    let (json, page) = report_and_page(&load("kineto/profiler_steps.json.gz"));
    assert_eq!(json["steps"]["count"], 4);
    assert_eq!(
        checks(&page)
            .iter()
            .filter(|c| c.what == "step_duration_ns")
            .count(),
        4
    );
}

#[test]
fn names_and_notes_from_the_trace_are_escaped() {
    let mut t = load("kineto/profiler_steps.json.gz");
    let evil = "</script><img src=x onerror=alert(1)>&\"'";
    for s in t.strings.iter_mut() {
        *s = format!("{s}{evil}");
    }
    t.meta.notes.push(TraceNote {
        pid: None,
        part: Some(evil.into()),
        text: format!("note {evil}"),
    });
    let (_, page) = report_and_page(&t);
    assert!(!page.contains("<img"), "a name became markup");
    assert!(page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#39;"));
    // Exactly the page's own two script elements end.
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(page.contains("note &lt;/script&gt;"), "the note is shown");
}

#[test]
fn the_timeline_shows_the_largest_gap_as_waiting_for_the_host() {
    let t = load("kineto/profiler_steps.json.gz");
    let (json, _) = report_and_page(&t);
    let lod = timeline_lod(&t, None).unwrap();
    let g = &json["devices"][0]["largest_gaps"][0];
    assert_eq!(g["host"]["reading"], "waited_for_host");
    let (s, e) = (
        g["start_ns"].as_u64().unwrap(),
        g["end_ns"].as_u64().unwrap(),
    );
    let gpu = lod
        .lanes
        .iter()
        .find(|l| l.stream.is_none() && l.role.is_none())
        .unwrap();
    let depth = gpu.levels.len() as u32;
    let width = |k: usize| lod.gpu_bucket_ns * lod.zoom.pow(depth - 1 - k as u32);
    for (k, level) in gpu.levels.iter().enumerate() {
        let n = level.len() as u64 / 2;
        let w = width(k);
        let inside: Vec<&str> = (0..n)
            .filter(|b| lod.start_ns + b * w >= s && lod.start_ns + (b + 1) * w <= e)
            .map(|b| &level[2 * b as usize..2 * b as usize + 2])
            .collect();
        assert!(!inside.is_empty() || n < 4096, "level of {n} buckets");
        // Idle (busy share 0) and read as before the launch returned: waiting for the host.
        assert!(inside.iter().all(|c| *c == "01"), "{inside:?}");
    }
    // The busy share of the whole coarsest level matches the report's busy time within the
    // quantisation (1/63 of a bucket each).
    let lvl = &gpu.levels[0];
    let n = lvl.len() as u64 / 2;
    let w = width(0) as f64;
    let sum: f64 = lvl
        .as_bytes()
        .chunks(2)
        .map(|c| super::lod::b64_value(c[0]) as f64 / 63.0 * w)
        .sum();
    let busy = json["devices"][0]["busy_ns"].as_u64().unwrap() as f64;
    assert!((sum - busy).abs() <= n as f64 * w / 63.0, "{sum} vs {busy}");
}

/// Many GPUs and streams over a long span: the page stays far below 3 MB.
#[test]
fn a_large_trace_gives_a_small_page() {
    let mut t = Trace {
        strings: vec!["k".into(), "cudaLaunchKernel".into()],
        ..Trace::default()
    };
    let mut at = 1_000_000u64;
    for i in 0..200_000u64 {
        let (device, stream) = ((i % 8) as u32, i % 97);
        at += 700;
        t.kernels.push(Kernel {
            device,
            context: 1,
            stream,
            correlation_id: i + 1,
            start_ns: at,
            end_ns: at + 5_000,
            name: 0,
            launch: 0,
        });
        t.api_calls.push(ApiCall {
            kind: ApiKind::Runtime,
            name: 1,
            cbid: 0,
            process: 1,
            thread: 1,
            correlation_id: i + 1,
            start_ns: at - 600,
            end_ns: at - 100,
            return_value: 0,
        });
    }
    // 1,000 steps: the table lists the longest 200 of them, the chart bins them.
    for i in 0..1_000u64 {
        t.strings.push(format!("ProfilerStep#{i}"));
        t.ranges.push(NvtxRange {
            domain: RangeDomain::Host,
            name: t.strings.len() as u32 - 1,
            process: 1,
            thread: 1,
            device: None,
            stream: None,
            start_ns: 1_000_000 + i * 140_000,
            end_ns: 1_000_000 + (i + 1) * 140_000 - i % 7,
            nvtx_domain: None,
        });
    }
    let lod = timeline_lod(&t, None).unwrap();
    let bytes: usize = lod
        .lanes
        .iter()
        .flat_map(|l| &l.levels)
        .map(String::len)
        .sum();
    assert!(bytes as u64 <= BUDGET_BYTES, "{bytes}");
    assert_eq!(
        lod.lanes
            .iter()
            .filter(|l| l.stream.is_none() && l.role.is_none())
            .count(),
        8
    );
    assert!(lod.streams_not_drawn > 0);
    let (json, page) = report_and_page(&t);
    assert!(page.len() < 3_000_000, "{}", page.len());
    assert_eq!(json["steps"]["count"], 1000);
    let cs = checks(&page);
    let listed: Vec<&Check> = cs.iter().filter(|c| c.what == "step_duration_ns").collect();
    assert_eq!(listed.len(), super::report::STEP_ROWS);
    // The longest: every listed step is at least as long as every one left out.
    let shortest_listed = listed.iter().map(|c| c.value.parse::<u64>().unwrap()).min();
    let steps = json["steps"]["steps"].as_array().unwrap();
    let longer_left_out = steps.iter().filter(|s| {
        let listed_here = listed
            .iter()
            .any(|c| attr(&c.attrs, "data-step") == Some(s["index"].to_string()));
        !listed_here && Some(s["duration_ns"].as_u64().unwrap()) > shortest_listed
    });
    assert_eq!(longer_left_out.count(), 0);
}

/// The page goes to a new file; an existing one is left as it is, unless --force.
#[test]
fn write_file_does_not_replace_a_file() {
    let dir = std::env::temp_dir().join(format!("cutrace-html-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join("r.html");
    super::write_file(&dest, "<p>one</p>", 0o644, false).unwrap();
    let again = super::write_file(&dest, "<p>two</p>", 0o644, false);
    let kept = std::fs::read_to_string(&dest).unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    // --force replaces a regular file, never a link.
    super::write_file(&dest, "<p>three</p>", 0o644, true).unwrap();
    let forced = std::fs::read_to_string(&dest).unwrap();
    let link = dir.join("l.html");
    std::os::unix::fs::symlink(&dest, &link).unwrap();
    let through_link = super::write_file(&link, "<p>four</p>", 0o644, true);
    let after = std::fs::read_to_string(&dest).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = again.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("--force to replace it"), "{e}");
    assert_eq!(kept, "<p>one</p>");
    assert_eq!(left.len(), 1, "a temporary file was left beside it");
    assert_eq!(forced, "<p>three</p>");
    assert!(through_link
        .unwrap_err()
        .to_string()
        .contains("not a regular file"));
    assert_eq!(after, "<p>three</p>");
}

/// The `<tr>` rows of the counters table: each row's cell texts.
fn counter_rows(page: &str) -> Vec<Vec<String>> {
    let from = page.find("<table class=\"sortable counters\">").unwrap();
    let table = &page[from..from + page[from..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..];
                    text[..text.find("</td>").unwrap()].to_owned()
                })
                .collect()
        })
        .collect()
}

#[test]
fn counters_equal_the_json_report() {
    let trace = load("native/counters_basic");
    let (json, page) = report_and_page(&trace);
    let c = &json["counters"];
    assert!(page.contains("<h2>Hardware counters</h2>"));
    assert!(page.contains("Kernels were serialized while profiling"));
    let passes = c["passes"].as_u64().unwrap();
    assert!(
        page.contains(&format!(
            "id=\"counter-passes\" data-value=\"{passes}\">{passes}<"
        )),
        "pass count {passes} not shown"
    );
    // Each metric's header names its aggregation.
    for m in c["metrics"].as_array().unwrap() {
        let how = match m["aggregation"].as_str().unwrap() {
            "sum" => "sum",
            "duration_weighted_mean" => "duration-weighted mean",
            other => panic!("aggregation {other}"),
        };
        let head = format!("{} ({how})", m["name"].as_str().unwrap());
        assert!(
            page.contains(&format!(">{}</th>", super::escape(&head))),
            "{head}"
        );
    }
    let rows = counter_rows(&page);
    let by_kernel = c["by_kernel"].as_array().unwrap();
    assert!(!by_kernel.is_empty());
    assert_eq!(rows.len(), by_kernel.len());
    for (row, k) in rows.iter().zip(by_kernel) {
        assert_eq!(
            row[0],
            format!("{}", super::escape(k["name"].as_str().unwrap()))
        );
        assert_eq!(row[1], k["kernels"].as_u64().unwrap().to_string());
        assert_eq!(row[2], fmt_ns(k["duration_ns"].as_u64().unwrap()));
        let values: Vec<String> = k["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| super::report::counter_value(v.as_f64()))
            .collect();
        assert_eq!(row[3..], values[..], "{}", row[0]);
    }
}

#[test]
fn an_unavailable_counter_is_na_and_the_missing_ones_are_shown() {
    let trace = load("native/counters_basic");
    let mut r = analyze(&trace, &Options::default()).unwrap();
    let c = r.counters.as_mut().unwrap();
    let measured = c.by_kernel[0].values[0].unwrap();
    assert!(measured.is_finite());
    c.by_kernel[0].values[0] = None;
    c.kernels_without_values = 3;
    c.graph_launches = 2;
    c.launches_captured = 4;
    let page = super::report::page("t", &trace, &r, None).unwrap();
    let rows = counter_rows(&page);
    assert_eq!(rows[0][3], "n/a");
    assert!(page.contains("<div class=\"box lost\" id=\"counters-missing\">"));
    assert!(page.contains("3 kernel records without counter values"));
    assert!(page.contains("2 graph launches and 4 launches captured into graphs"));
}

#[test]
fn a_trace_without_counters_has_no_counter_section() {
    let (json, page) = report_and_page(&load("kineto/two_streams.json.gz"));
    assert!(json.get("counters").is_none());
    assert!(!page.contains("Hardware counters"));
    assert!(!page.contains("sortable counters"));
}

/// A stream whose only kernel is an inverted record (a point, whatever its numbers) is drawn
/// with no busy time, and records with absurd times neither panic nor overflow the buckets.
#[test]
fn inverted_and_absurd_records_add_no_busy_time_to_a_lane() {
    use cutrace_testkit::records::kernel;
    let mut i = cutrace_trace::Interner::new();
    let kernels = vec![
        kernel(&mut i, "busy", 0, 7, 1, 1_000, 900_000),
        kernel(&mut i, "busy", 0, 7, 2, 1_000_000, 1_900_000),
        kernel(&mut i, "inverted", 0, 9, 3, u64::MAX - 1, 5),
        kernel(&mut i, "absurd", 0, 11, 4, 2_000_000, u64::MAX),
        kernel(&mut i, "absurd", 0, 11, 5, 3_000_000, u64::MAX),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        ..Trace::default()
    };
    let lod = timeline_lod(&t, None).unwrap();
    let streams: Vec<Option<u64>> = lod.lanes.iter().map(|l| l.stream).collect();
    assert_eq!(streams, [None, Some(7), Some(9), Some(11)]);
    assert_eq!(lod.span_ns, u64::MAX - 1_000);
    let busy_chars = |stream: u64| -> Vec<u8> {
        let lane = lod.lanes.iter().find(|l| l.stream == Some(stream)).unwrap();
        lane.levels
            .iter()
            .flat_map(|l| l.bytes().step_by(2))
            .collect()
    };
    assert!(
        busy_chars(9).iter().all(|&c| c == b'0'),
        "a point is never busy"
    );
    assert!(busy_chars(7).iter().any(|&c| c != b'0'));
    assert!(busy_chars(11).contains(&b'/'), "full buckets");
}

/// The text of each element `<tag …>…</tag>` of `page` whose opening tag satisfies `keep`.
fn element_texts<'a>(page: &'a str, tag: &str, keep: impl Fn(&str) -> bool) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find(&open) {
        let head_end = i + rest[i..].find('>').unwrap();
        let body_end = head_end + rest[head_end..].find(&close).unwrap();
        if keep(&rest[i..head_end]) {
            out.push(&rest[head_end + 1..body_end]);
        }
        rest = &rest[body_end + close.len()..];
    }
    out
}

/// The sources of each directive of the page's Content-Security-Policy.
fn csp_of(page: &str) -> Vec<(String, Vec<String>)> {
    let key = "<meta http-equiv=\"Content-Security-Policy\" content=\"";
    assert_eq!(page.matches(key).count(), 1, "one policy");
    let from = page.find(key).unwrap() + key.len();
    let policy = &page[from..from + page[from..].find('"').unwrap()];
    policy
        .split(';')
        .map(|d| {
            let mut words = d.split_whitespace().map(str::to_owned);
            (words.next().unwrap(), words.collect())
        })
        .collect()
}

/// `'sha256-…'` of `text`, computed here from the digest's bytes.
fn sha256_source(text: &str) -> String {
    use sha2::{Digest as _, Sha256};
    format!(
        "'sha256-{}'",
        super::base64(&Sha256::digest(text.as_bytes()))
    )
}

/// Every attribute name of every tag of the page's markup (scripts' and styles' text left out).
fn attribute_names(page: &str) -> Vec<String> {
    let mut markup = page.to_owned();
    for (tag, close) in [("<script", "</script>"), ("<style", "</style>")] {
        let mut out = String::new();
        let mut rest = markup.as_str();
        while let Some(i) = rest.find(tag) {
            let head_end = i + rest[i..].find('>').unwrap();
            out.push_str(&rest[..=head_end]);
            rest = &rest[head_end + rest[head_end..].find(close).unwrap()..];
        }
        out.push_str(rest);
        markup = out;
    }
    let mut names = Vec::new();
    for tag in markup.split('<').skip(1) {
        if tag.starts_with(['/', '!']) {
            continue;
        }
        let inside = &tag[..tag.find('>').unwrap()];
        // Attribute values are escaped: no quote inside one, so the quotes pair up.
        let mut rest = inside.split_once(char::is_whitespace).map_or("", |x| x.1);
        while let Some(eq) = rest.find('=') {
            names.push(rest[..eq].trim().to_ascii_lowercase());
            let value = &rest[eq + 2..];
            rest = &value[value.find('"').unwrap() + 1..];
        }
    }
    names
}

/// Each page's policy allows exactly its own script and style sheet, by the hash of their text,
/// and nothing inline besides: no 'unsafe-inline', no event handler or style attributes the
/// policy would block.
fn assert_policy_allows_only_its_own(what: &str, page: &str) {
    let scripts = element_texts(page, "script", |head| !head.contains("type="));
    let data = element_texts(page, "script", |head| head.contains("type="));
    let styles = element_texts(page, "style", |_| true);
    assert_eq!(
        (scripts.len(), data.len(), styles.len()),
        (1, 1, 1),
        "{what}"
    );
    assert!(data[0].starts_with('{'), "{what}: the data block is JSON");
    let csp = csp_of(page);
    let sources = |name: &str| -> Vec<String> {
        let d: Vec<_> = csp.iter().filter(|(n, _)| n == name).collect();
        assert_eq!(d.len(), 1, "{what}: one {name}");
        d[0].1.clone()
    };
    assert_eq!(sources("default-src"), ["'none'"], "{what}");
    assert_eq!(
        sources("script-src"),
        [sha256_source(scripts[0])],
        "{what}: script-src"
    );
    assert_eq!(
        sources("style-src"),
        [sha256_source(styles[0])],
        "{what}: style-src"
    );
    assert!(
        !page[..page.find("</head>").unwrap()].contains("unsafe-"),
        "{what}"
    );
    assert_eq!(scripts[0], super::JS, "{what}");
    let names = attribute_names(page);
    assert!(
        names.iter().any(|n| n == "class"),
        "{what}: attributes read"
    );
    let inline: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("on") || *n == "style")
        .collect();
    assert!(inline.is_empty(), "{what}: inline attributes {inline:?}");
    // The script sets no inline style attribute and no handler property either.
    for blocked in [
        "setAttribute('style'",
        ".onclick",
        "innerHTML",
        "eval(",
        "Function(",
    ] {
        assert!(
            !super::JS.contains(blocked),
            "{what}: the script uses {blocked}"
        );
    }
}

#[test]
fn each_page_allows_only_its_own_script_and_style_by_hash() {
    for rel in [
        "kineto/profiler_steps.json.gz",
        "kineto/two_streams.json.gz",
        "native/counters_basic",
    ] {
        let (_, page) = report_and_page(&load(rel));
        assert_policy_allows_only_its_own(rel, &page);
    }
    let mut evil = load("kineto/profiler_steps.json.gz");
    for s in evil.strings.iter_mut() {
        *s = format!("{s}<script>alert(1)</script><b onclick=\"x\" style=\"y\">");
    }
    let (_, page) = report_and_page(&evil);
    assert_policy_allows_only_its_own("hostile names", &page);
    let (base, new) = (
        load("kineto/two_streams.json.gz"),
        load("kineto/profiler_steps.json.gz"),
    );
    let opts = cutrace_analysis::DiffOptions {
        page: true,
        ..Default::default()
    };
    let (b, n) = (
        cutrace_analysis::diff_side(&base, None, &opts).unwrap(),
        cutrace_analysis::diff_side(&new, None, &opts).unwrap(),
    );
    let d = cutrace_analysis::diff_sides(&b, &n, &opts);
    let (lb, ln) = (
        super::timeline_lod(&base, None).unwrap(),
        super::timeline_lod(&new, None).unwrap(),
    );
    let side = |title, side, timeline| super::diff::PageSide {
        title,
        side,
        timeline,
    };
    let page = super::diff::page(&side("base", &b, &lb), &side("new", &n, &ln), &d, None);
    assert_policy_allows_only_its_own("diff", &page);
}

#[test]
fn csp_hashes_are_base64_of_sha256() {
    // RFC 4648 §10's vectors, then SHA-256 of "" and "abc" as browsers write them in CSP.
    for (bytes, b64) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(super::base64(bytes.as_bytes()), b64);
    }
    assert_eq!(
        super::csp_hash(""),
        "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
    );
    assert_eq!(
        super::csp_hash("abc"),
        "'sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0='"
    );
}

/// The verdict is the page's first content after its title, and says the JSON summary's
/// numbers.
#[test]
fn the_verdict_comes_first_and_says_the_summary() {
    let t = load("kineto/two_streams.json.gz");
    let (json, page) = report_and_page(&t);
    let body = &page[page.find("</h1>").expect("a title") + 5..];
    assert!(
        body.starts_with("<section id=\"verdict\""),
        "{}",
        &body[..200]
    );
    let d = &json["summary"]["devices"][0];
    let line = format!(
        "GPU {}: busy {:.1} % of",
        d["device"],
        d["busy_pct"].as_f64().unwrap()
    );
    let first_box = &body[..body.find("</section>").unwrap()];
    assert!(first_box.contains(&line), "{first_box}");
    assert!(first_box.contains(&format!("idle {:.1} %", d["idle_pct"].as_f64().unwrap())));
}

/// The data-loss box of a page: its class and its text.
fn data_loss_box(page: &str) -> (String, String) {
    let from = page.find("<section id=\"data-loss\"").unwrap();
    let end = from + page[from..].find("</section>").unwrap();
    let sec = &page[from..end];
    let class = attr(&sec[..sec.find('>').unwrap()], "class").unwrap();
    (class, sec.to_string())
}

#[test]
fn skipped_events_and_unknown_drops_are_information_and_only_real_loss_is_red() {
    // A torch.profiler trace: no drop counts, and events the model skips; nothing lost.
    let t = load("kineto/profiler_steps.json.gz");
    assert!(!t.meta.skipped_events.is_empty());
    let (_, page) = report_and_page(&t);
    let (class, text) = data_loss_box(&page);
    assert_eq!(class, "box info", "{text}");
    assert!(text.contains("<h2>Not modelled</h2>"), "{text}");
    assert!(text.contains("<h2>Not recorded</h2>"), "{text}");
    assert!(
        text.contains("Nothing lost that the trace can tell"),
        "{text}"
    );
    // The same trace cut short: that is loss, in red, and the skipped events stay apart.
    let mut t = t;
    t.meta.complete = false;
    t.meta.incomplete_reason = Some("cut at byte 10".into());
    let (_, page) = report_and_page(&t);
    let (class, text) = data_loss_box(&page);
    assert_eq!(class, "box lost", "{text}");
    let lost = &text[..text.find("<h2>Not recorded</h2>").unwrap()];
    assert!(
        lost.contains("the trace is incomplete: cut at byte 10"),
        "{text}"
    );
    assert!(!lost.contains("events"), "{lost}");
}

/// A GPU-bound step (the analysis' planted one: three kernels back to back behind a launch, a
/// stream synchronize at the end) with its critical path, and its page.
fn gpu_bound_page() -> (cutrace_analysis::Report, String) {
    use cutrace_testkit::records::{complete_trace, host_range, kernel, launch};
    let mut i = cutrace_trace::Interner::default();
    let api = vec![
        launch(&mut i, 1, 100, 200),
        launch(&mut i, 2, 300, 400),
        launch(&mut i, 3, 500, 600),
        cutrace_testkit::records::call(&mut i, "cudaStreamSynchronize", 1, 1, 700, 9_100),
    ];
    let kernels = vec![
        kernel(&mut i, "k1", 0, 7, 1, 250, 3_000),
        kernel(&mut i, "k2", 0, 7, 2, 3_000, 6_000),
        kernel(&mut i, "k3", 0, 7, 3, 6_050, 9_000),
    ];
    let range = host_range(&mut i, "ProfilerStep#1", 0, 10_000);
    let mut t = complete_trace(i, kernels, api);
    t.ranges = vec![range];
    let opts = Options {
        steps: Some(StepMatch::profiler_steps()),
        ..Options::default()
    };
    let mut r = analyze(&t, &opts).unwrap();
    r.critical_path = Some(cutrace_analysis::critical_path::critical_path(
        &t,
        None,
        r.steps.as_ref(),
        10,
    ));
    let page = super::report::page("t", &t, &r, None).unwrap();
    (r, page)
}

/// The page's data block, parsed.
fn page_data(page: &str) -> Value {
    let open = "id=\"cutrace-data\">";
    let from = page.find(open).unwrap() + open.len();
    let to = from + page[from..].find("</script>").unwrap();
    serde_json::from_str(&page[from..to]).unwrap()
}

#[test]
fn the_path_lane_draws_the_planted_path_bucket_by_bucket() {
    let (_, page) = gpu_bound_page();
    let d = page_data(&page);
    let lod = &d["timelines"][0]["lod"];
    let lane = &lod["lanes"][0];
    assert_eq!(lane["role"], "path", "the path's lane comes first: {lane}");
    // The timeline spans the path, 0–10,000 ns (the kernels alone span 250–9,000): host time
    // in the step, k1's launch, k1, k2, 50 ns queued behind k2, k3, the synchronize's return,
    // host time again.
    let planted: [(u64, u64, char); 8] = [
        (0, 100, '1'),
        (100, 250, '5'),
        (250, 3_000, '2'),
        (3_000, 6_000, '2'),
        (6_000, 6_050, '5'),
        (6_050, 9_000, '2'),
        (9_000, 9_100, '6'),
        (9_100, 10_000, '1'),
    ];
    assert_eq!(lod["span_ns"], 10_000);
    let width = lane["bucket_ns"].as_u64().unwrap();
    let finest = lane["levels"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_str()
        .unwrap();
    let b64 = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/";
    let mut kinds_seen = std::collections::BTreeSet::new();
    for (b, pair) in finest.as_bytes().chunks(2).enumerate() {
        let (s, e) = (b as u64 * width, (b as u64 + 1) * width);
        let mut by: std::collections::BTreeMap<char, u64> = Default::default();
        for &(ps, pe, c) in &planted {
            let o = pe.min(e).saturating_sub(ps.max(s));
            if o > 0 {
                *by.entry(c).or_default() += o;
            }
        }
        let total: u64 = by.values().sum();
        let share = b64.iter().position(|&x| x == pair[0]).unwrap() as u64;
        let want_share = if total == 0 {
            0
        } else if total >= width {
            63
        } else {
            (total * 63 / width).clamp(1, 62)
        };
        assert_eq!(share, want_share, "bucket {b} ({s}–{e} ns): share");
        let most = by
            .iter()
            .max_by_key(|(c, ns)| (**ns, std::cmp::Reverse(**c)));
        let want = most.map_or('0', |(c, _)| *c);
        assert_eq!(pair[1] as char, want, "bucket {b} ({s}–{e} ns): class");
        kinds_seen.insert(want);
    }
    let want: std::collections::BTreeSet<char> = ['1', '2', '5', '6'].into();
    assert!(kinds_seen.is_superset(&want), "{kinds_seen:?}");
}

#[test]
fn the_path_section_marks_the_step_and_zooms_to_each_segment() {
    let (r, page) = gpu_bound_page();
    let cp = r.critical_path.as_ref().unwrap();
    let cs = checks(&page);
    let step = find(&cs, "cp_step_length_ns", "data-step", 1);
    assert_eq!(step.value, cp.steps[0].path.length_ns.to_string());
    assert_eq!(step.value, "10000");
    assert_eq!(step.text, fmt_ns(10_000));
    // Each longest segment is a row that zooms the timeline (which spans the path, from 0 ns)
    // to the segment, and says when it began as the text does.
    let segs = &cp.steps[0].path.longest_segments;
    assert_eq!(segs[0].name, "k2", "{segs:?}");
    assert_eq!(segs.len(), 8);
    for s in segs {
        let row = format!(
            "<tr class=\"zoom\" data-timeline=\"tl\" data-from=\"{}\" data-to=\"{}\"",
            s.start_ns, s.end_ns
        );
        assert!(page.contains(&row), "no row for {s:?}: {row}");
    }
    assert!(page.contains(&format!("data-sort=\"3000\">+{}</td>", fmt_ns(3_000))));
    assert!(!page.contains("of its"), "the whole path is drawn");
    let marked = cs
        .iter()
        .filter(|c| c.what == "cp_segment_length_ns")
        .count();
    assert_eq!(marked, segs.len());
    // Without --critical-path the page has neither.
    let (_, plain) = report_and_page(&load("kineto/train_step.json.gz"));
    assert!(!plain.contains("class=\"critical-path\""));
    assert!(!plain.contains("\"role\":\"path\""));
}

#[test]
fn the_scripts_words_for_the_path_are_the_legends() {
    let js = include_str!("page.js");
    for w in super::path::CLASS_WORDS {
        assert!(js.contains(&format!("'{w}'")), "page.js lacks {w:?}");
    }
    for c in super::path::CLASSES {
        assert!(
            js.contains(&format!("'{c}'")),
            "page.js lacks the class {c:?}"
        );
        assert!(
            include_str!("page.css").contains(&format!(".cp-{c}{{")),
            "no colour for {c}"
        );
    }
}
