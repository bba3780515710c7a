//! `cutrace diff JOB_A JOB_B`: its headline is the two job reports' own figures, and with
//! `--critical-path` the path diff names what tests/tools/gen_job.py planted: two jobs of one
//! seed, the straggler moved from rank 1 (2 ms late) to rank 3 (0.5 ms late), so each step's
//! path waits at the all-reduce for another rank, as long as the planted arrivals say, and the
//! straggler's stall moves from rank 1 to rank 3 on the path, as long as the planted stalls.

use std::path::{Path, PathBuf};

use cutrace_testkit::{loud, repo, Dir, Run};
use serde_json::Value;

use crate::job_cli::{gen, python, report};
use crate::util::bin;

const GEMM: &str = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_\
                    execute_segment_k_off_kernel__5x_cublas";

/// The two jobs and their answers: base's straggler is rank 1, new's rank 3.
fn jobs(py: &str, dir: &Dir) -> ((PathBuf, Value), (PathBuf, Value)) {
    let common = [
        "--ranks",
        "4",
        "--steps",
        "3",
        "--kernels",
        "4",
        "--seed",
        "7",
        "--syncs",
    ];
    let with = |extra: [&'static str; 4]| {
        let mut a: Vec<&str> = common.to_vec();
        a.extend(extra);
        a
    };
    let a = gen(
        py,
        dir,
        "a",
        &with(["--straggler", "1", "--delay", "2000000"]),
    );
    let b = gen(
        py,
        dir,
        "b",
        &with(["--straggler", "3", "--delay", "500000"]),
    );
    (a, b)
}

fn diff(a: &Path, b: &Path, extra: &[&str]) -> std::process::Output {
    bin().arg("diff").arg(a).arg(b).args(extra).run()
}

fn diff_json(a: &Path, b: &Path, extra: &[&str]) -> Value {
    let o = diff(a, b, &[&["--format", "json"], extra].concat());
    assert!(o.status.success(), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

fn diff_text(a: &Path, b: &Path, extra: &[&str]) -> String {
    let o = diff(a, b, extra);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8(o.stdout).unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 120, "too wide: {line}");
    }
    text
}

/// A duration as the text writes it (the traces' resolution is 1 ns): `2.164 ms`, `708.898 µs`.
fn fmt(ns: u64) -> String {
    cutrace_analysis::fmt_ns(ns)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// What a step's path waited for at the all-reduce, from the planted arrivals: the rank whose
/// step ended last waits for the straggler, unless it is the straggler.
fn planted_wait(p: &Value) -> Option<(u64, u64, u64)> {
    let (s, last) = (u(&p["straggler"]), u(&p["last_rank"]));
    let arr = |r: u64| u(&p["allreduce_arrival_ns"][r as usize]);
    (s != last).then(|| (last, s, arr(s) - arr(last)))
}

#[test]
fn the_path_diff_names_the_moved_straggler_and_its_delay() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the jobs");
        return;
    };
    let dir = Dir::new("job-path-diff");
    let ((a, aa), (b, ba)) = jobs(py, &dir);
    let (pa, pb) = (
        aa["planted"].as_array().unwrap(),
        ba["planted"].as_array().unwrap(),
    );
    let d = diff_json(&a, &b, &["--critical-path", "--top", "100"]);
    let cp = &d["critical_path"];
    assert_eq!(cp["steps_matched_by"], "number");
    assert_eq!(u(&cp["steps_matched"]), 3);
    let text = diff_text(&a, &b, &["--critical-path"]);
    // The lines saying where each step's path waited, each on one line again (the text wraps
    // them at 120 columns, continuing 4 columns in).
    let waits_text = text
        .split("Where the path waited for a rank that reached a collective later:\n")
        .nth(1)
        .expect("the waits")
        .split("\n  The ranks the path waited for")
        .next()
        .unwrap()
        .replace("\n        ", " ");
    let steps = cp["steps"].as_array().unwrap();
    assert_eq!(steps.len(), pa.len());
    for ((s, p), q) in steps.iter().zip(pa).zip(pb) {
        assert_eq!(s["end_rank_base"], p["last_rank"]);
        assert_eq!(s["end_rank_new"], q["last_rank"]);
        let allreduce = |side: &str| -> Option<(u64, u64, u64)> {
            let waits = s[&format!("rank_waits_{side}")].as_array().unwrap();
            let w: Vec<&Value> = waits.iter().filter(|w| w["op"] == "allreduce").collect();
            assert!(w.len() <= 1, "{s}");
            w.first()
                .map(|w| (u(&w["rank"]), u(&w["waited_for_rank"]), u(&w["wait_ns"])))
        };
        let (want_base, want_new) = (planted_wait(p), planted_wait(q));
        assert_eq!(allreduce("base"), want_base, "step {}", s["name_base"]);
        assert_eq!(allreduce("new"), want_new, "step {}", s["name_base"]);
        // The text says the same, to the nanosecond the traces hold.
        let name = s["name_base"].as_str().unwrap();
        let joined = waits_text
            .lines()
            .find(|l| l.starts_with(&format!("    {name}: ")))
            .unwrap_or_else(|| panic!("no wait line for {name}:\n{text}"));
        let (before, after) = joined.split_once("; now").unwrap();
        if let Some((_, r, ns)) = want_base {
            let said = format!("{} for rank {r} in allreduce", fmt(ns));
            assert!(before.contains(&said), "{said:?} not in {joined:?}");
        }
        match want_new {
            Some((_, r, ns)) => {
                let said = format!("{} for rank {r} in allreduce", fmt(ns));
                assert!(after.contains(&said), "{said:?} not in {joined:?}");
            }
            None => assert!(!after.contains("in allreduce"), "{joined}"),
        }
    }
    // The straggler's stall (its compute stream standing 50 µs plus the planted delay after the
    // all-gather) leaves rank 1's path and comes onto rank 3's, summed over the steps.
    let stalls = |p: &[Value]| p.iter().map(|x| u(&x["stall_ns"])).sum::<u64>();
    let row = |rank: u64| {
        cp["changed"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "stream_wait" && c["name"] == GEMM && c["rank"] == rank)
            .unwrap_or_else(|| panic!("no stream_wait row of rank {rank}: {cp}"))
            .clone()
    };
    let (r1, r3) = (row(1), row(3));
    assert_eq!((u(&r1["base_ns"]), u(&r1["new_ns"])), (stalls(pa), 0));
    assert_eq!((u(&r3["base_ns"]), u(&r3["new_ns"])), (0, stalls(pb)));
    assert_eq!(r1["delta_ns"].as_i64(), Some(-(stalls(pa) as i64)));
    // The delays planted differ by the change of the stalls (50 µs each on both sides).
    let delays = |p: &[Value]| p.iter().map(|x| u(&x["delay_ns"])).sum::<u64>();
    assert_eq!(
        stalls(pa) as i64 - stalls(pb) as i64,
        delays(pa) as i64 - delays(pb) as i64
    );
    // The ranks waited for: rank 1 at the all-reduce in base only, rank 3 in new only.
    let waited = |rank: u64| {
        cp["waited_for"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["op"] == "allreduce" && w["waited_for_rank"] == rank)
            .cloned()
    };
    let sum = |p: &[Value]| planted_waits(p).iter().map(|w| w.2).sum::<u64>();
    let w1 = waited(1).expect("rank 1 waited for in base");
    assert_eq!((u(&w1["base_ns"]), u(&w1["new_ns"])), (sum(pa), 0));
    let w3 = waited(3).expect("rank 3 waited for in new");
    assert_eq!((u(&w3["base_ns"]), u(&w3["new_ns"])), (0, sum(pb)));
    assert_eq!(u(&w3["steps_new"]), planted_waits(pb).len() as u64);
    // In the text's table of what changed, the stall rows say the same to the µs of its column.
    let ms = |ns: u64| format!("{}.{:03}", (ns + 500) / 1_000_000, (ns + 500) / 1000 % 1000);
    let has_row = |base: u64, new: u64, rank: u64| {
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 6
                && w[0] == ms(base)
                && w[1] == ms(new)
                && w[3] == "stream_wait"
                && w[4] == rank.to_string()
        })
    };
    assert!(has_row(stalls(pa), 0, 1), "{text}");
    assert!(has_row(0, stalls(pb), 3), "{text}");
    // docs/REPORT.md names every field of it.
    let mut seen = std::collections::BTreeSet::new();
    keys(&d, &mut seen);
    let doc = std::fs::read_to_string(repo().join("docs/REPORT.md")).unwrap();
    let missing: Vec<&String> = seen
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/REPORT.md does not name {missing:?}"
    );
}

fn planted_waits(p: &[Value]) -> Vec<(u64, u64, u64)> {
    p.iter().filter_map(planted_wait).collect()
}

fn keys(v: &Value, seen: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                seen.insert(k.clone());
                keys(x, seen);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, seen)),
        _ => {}
    }
}

/// The headline's figures are the job reports': each job's median step time over its steps'
/// slowest ranks, its `summary` shares, slowest rank and least-waiting rank, its skew.
#[test]
fn the_headline_is_the_job_reports_figures() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the jobs");
        return;
    };
    let dir = Dir::new("job-diff-headline");
    let ((a, aa), (b, _)) = jobs(py, &dir);
    let (ra, rb) = (report(&[&a], &[]), report(&[&b], &[]));
    let d = diff_json(&a, &b, &[]);
    let h = &d["headline"];
    let median = |r: &Value| {
        let mut t: Vec<u64> = r["steps"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| u(&s["slowest_ns"]))
            .collect();
        t.sort_unstable();
        t[t.len().div_ceil(2) - 1]
    };
    let (ma, mb) = (median(&ra), median(&rb));
    assert_eq!(u(&h["step_median_ns"]["base"]), ma);
    assert_eq!(u(&h["step_median_ns"]["new"]), mb);
    assert_eq!(
        h["step_median_ns"]["delta"].as_i64(),
        Some(mb as i64 - ma as i64)
    );
    // The answer's own step times: the median of the planted slowest ranks' steps.
    let mut planted: Vec<u64> = aa["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| u(&s["slowest_ns"]))
        .collect();
    planted.sort_unstable();
    assert_eq!(planted[planted.len().div_ceil(2) - 1], ma);
    assert_eq!(u(&h["steps"]["base"]), 3);
    for k in [
        "busy_pct",
        "compute_pct",
        "comm_pct",
        "exposed_comm_pct",
        "idle_pct",
    ] {
        let (x, y) = (&ra["summary"][k], &rb["summary"][k]);
        assert_eq!(&h[k]["base"], x, "{k}");
        assert_eq!(&h[k]["new"], y, "{k}");
        let points = y.as_f64().unwrap() - x.as_f64().unwrap();
        assert!(
            (h[k]["points"].as_f64().unwrap() - points).abs() < 1e-9,
            "{k}"
        );
    }
    assert_eq!(h["slowest_rank_base"], ra["summary"]["slowest_rank"]);
    assert_eq!(h["slowest_rank_new"], rb["summary"]["slowest_rank"]);
    assert_eq!(h["least_waiting_base"], ra["summary"]["least_waiting"]);
    assert_eq!(h["least_waiting_new"], rb["summary"]["least_waiting"]);
    // The planted stragglers arrive last at every all-reduce: they wait least.
    assert_eq!(h["least_waiting_base"]["rank"], 1);
    assert_eq!(h["least_waiting_new"]["rank"], 3);
    for k in ["skew_median_ns", "skew_max_ns"] {
        assert_eq!(d[k]["base"], ra["collectives"][k], "{k}");
        assert_eq!(d[k]["new"], rb["collectives"][k], "{k}");
    }
    // The text opens with the same figures, before the ranks.
    let text = diff_text(&a, &b, &[]);
    let step = text
        .lines()
        .find(|l| l.trim_start().starts_with("step time"))
        .expect("a step time row");
    assert!(step.contains(&fmt(ma)) && step.contains(&fmt(mb)), "{step}");
    let pct = |v: &Value| format!("{:.1} %", v.as_f64().unwrap());
    let busy = text
        .lines()
        .find(|l| l.trim_start().starts_with("busy, share"))
        .expect("a busy share row");
    assert!(busy.contains(&pct(&ra["summary"]["busy_pct"])), "{busy}");
    assert!(busy.contains(&pct(&rb["summary"]["busy_pct"])), "{busy}");
    assert!(
        text.contains("likely straggler (waited least at collectives): rank 1 (waited "),
        "{text}"
    );
    assert!(text.find("step time").unwrap() < text.find("\nrank 0\n").unwrap());
    // Without --critical-path the JSON has no path.
    assert!(d.get("critical_path").is_none());
}

/// `--critical-path` compares a job with a job, or a trace with a trace: a job against one
/// trace is refused, saying so, either way round; without the flag that diff still runs.
#[test]
fn a_job_against_one_trace_is_refused_with_the_critical_path() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the jobs");
        return;
    };
    let dir = Dir::new("job-diff-mixed");
    let ((a, _), _) = jobs(py, &dir);
    let one = a.join("rank0.json");
    for (x, y) in [(&a, &one), (&one, &a)] {
        let o = diff(x, y, &["--critical-path"]);
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--critical-path compares two jobs"), "{err}");
        assert!(err.contains("is a job while"), "{err}");
        assert!(err.contains("one trace on each side"), "{err}");
        assert!(o.stdout.is_empty());
        let plain = diff(x, y, &[]);
        assert!(plain.status.success(), "{plain:?}");
    }
    // Two ranks' traces, one on each side, are two traces: the one-trace path diff.
    let two = diff_json(&one, &a.join("rank1.json"), &["--critical-path"]);
    assert_eq!(two["critical_path"]["over"], "steps");
}
