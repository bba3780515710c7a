//! `cutrace report` and `cutrace diff` over a distributed job: tests/tools/gen_job.py writes
//! multi-rank torch.profiler jobs with planted stragglers, exposed communication, collective
//! skew and dead ranks, and the answer beside them (computed there from the planted
//! intervals); cutrace's numbers must equal it exactly, from the traces and from per-rank
//! summaries (`--rank-summary`) alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_testkit::{loud, repo, Dir, Run};
use serde_json::Value;

use crate::util::bin;

pub(crate) fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs gen_job.py into `dir/name` with `args`; returns the job directory and its answer.
pub(crate) fn gen(py: &str, dir: &Dir, name: &str, args: &[&str]) -> (PathBuf, Value) {
    let job = dir.path(name);
    Command::new(py)
        .arg(repo().join("tests/tools/gen_job.py"))
        .arg(&job)
        .args(args)
        .run_ok();
    let answer = std::fs::read(dir.path(&format!("{name}.answer.json"))).unwrap();
    (job, serde_json::from_slice(&answer).unwrap())
}

pub(crate) fn report(inputs: &[&Path], extra: &[&str]) -> Value {
    let out = bin()
        .arg("report")
        .args(inputs)
        .args(["--format", "json", "--top", "100000"])
        .args(extra)
        .run_ok();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every figure the answer holds, compared with the report's.
fn check(r: &Value, a: &Value) {
    assert_eq!(r["kind"], "job");
    let live: Vec<String> = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["rank"].to_string())
        .collect();
    let want_live: Vec<String> = a["ranks"].as_object().unwrap().keys().cloned().collect();
    let mut sorted = want_live.clone();
    sorted.sort_by_key(|k| k.parse::<u32>().unwrap());
    assert_eq!(live, sorted);
    for x in r["ranks"].as_array().unwrap() {
        let want = &a["ranks"][x["rank"].to_string()];
        for k in [
            "busy_ns",
            "comm_ns",
            "exposed_comm_ns",
            "idle_ns",
            "wait_ns",
        ] {
            assert_eq!(x[k], want[k], "rank {} {k}", x["rank"]);
        }
    }
    let dead: Vec<Value> = r["dead_ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rank"].clone())
        .collect();
    assert_eq!(Value::Array(dead), a["dead_ranks"]);
    // torch.profiler's `distributedInfo.world_size` is what tells a missing rank; a reader that
    // does not yet take it from the trace reports none, and then nothing is missing.
    if !r["world_size"].is_null() {
        assert_eq!(r["world_size"], a["world_size"]);
        assert_eq!(r["missing_ranks"], a["missing_ranks"]);
    }
    let steps = r["steps"]["steps"].as_array().unwrap();
    let want_steps = a["steps"].as_array().unwrap();
    assert_eq!(steps.len(), want_steps.len());
    for (s, w) in steps.iter().zip(want_steps) {
        for k in [
            "index",
            "slowest_rank",
            "slowest_ns",
            "fastest_rank",
            "spread_ns",
        ] {
            assert_eq!(s[k], w[k], "step {} {k}", w["index"]);
        }
    }
    let skews: Vec<Value> = r["collectives"]["largest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["skew_ns"].clone())
        .collect();
    assert_eq!(Value::Array(skews), a["collectives"]);
    assert_eq!(r["collectives"]["unmatched"], 0);
}

#[test]
fn job_numbers_are_exact_from_traces_and_from_summaries() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job");
    let (job, answer) = gen(
        py,
        &dir,
        "job",
        &[
            "--ranks",
            "6",
            "--steps",
            "4",
            "--dead-empty",
            "4",
            "--dead-truncated",
            "5",
            "--seed",
            "3",
        ],
    );
    let r = report(&[&job], &[]);
    check(&r, &answer);
    // Each step's planted straggler starts its all-reduce over 1.5 ms after the others.
    assert!(r["collectives"]["skew_max_ns"].as_u64().unwrap() > 1_000_000);
    // One thread, or four: the same report.
    assert_eq!(report(&[&job], &["--threads", "1"]), r);
    // The map on each rank alone, then the reduce over the summaries: the same report, but for
    // the paths the ranks were read from.
    let mut sums = Vec::new();
    for i in 0..6 {
        let s = dir.path(&format!("s{i}.json"));
        bin()
            .args(["report", "--rank-summary", "-o"])
            .arg(&s)
            .arg(job.join(format!("rank{i}.json")))
            .run_ok();
        sums.push(s);
    }
    let refs: Vec<&Path> = sums.iter().map(PathBuf::as_path).collect();
    let from_sums = report(&refs, &[]);
    assert_eq!(from_sums["ranks"], r["ranks"]);
    assert_eq!(from_sums["collectives"], r["collectives"]);
    assert_eq!(from_sums["steps"], r["steps"]);
    assert_eq!(from_sums["dead_ranks"], r["dead_ranks"]);
}

#[test]
fn gzip_traces_a_missing_rank_and_the_text_report() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-gz");
    let (job, answer) = gen(
        py,
        &dir,
        "gz",
        &["--ranks", "5", "--missing", "2", "--gzip", "--kernels", "3"],
    );
    check(&report(&[&job], &[]), &answer);
    // The files given one by one are the same job.
    let files: Vec<PathBuf> = [0, 1, 3, 4]
        .iter()
        .map(|r| job.join(format!("rank{r}.json.gz")))
        .collect();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    check(&report(&refs, &[]), &answer);
    let text = bin().arg("report").arg(&job).run_ok();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("(distributed job)"), "{text}");
    // The verdict first: the missing rank, then who waited least at collectives (the straggler).
    let second = text.lines().nth(1).unwrap_or_default();
    assert!(
        second.starts_with("RANKS LEFT OUT: 0 dead (no usable trace), 1 missing"),
        "{text}"
    );
    assert!(
        text.contains("the least (") && text.contains("it arrived last, the likely straggler"),
        "{text}"
    );
    assert!(text.contains("clocks: "), "{text}");
}

#[test]
fn job_diff_pairs_ranks_and_job_only_options_are_refused() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-diff");
    let (a, aa) = gen(py, &dir, "a", &["--ranks", "3", "--seed", "1"]);
    let (b, ba) = gen(py, &dir, "b", &["--ranks", "3", "--seed", "2"]);
    let out = bin()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .args(["--format", "json"])
        .run_ok();
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["kind"], "job");
    for row in d["ranks"].as_array().unwrap() {
        let r = row["rank"].to_string();
        let (x, y) = (&aa["ranks"][&r]["wait_ns"], &ba["ranks"][&r]["wait_ns"]);
        assert_eq!(&row["wait_ns"]["base"], x);
        assert_eq!(&row["wait_ns"]["new"], y);
        let delta = y.as_i64().unwrap() - x.as_i64().unwrap();
        assert_eq!(row["wait_ns"]["delta"], delta);
    }
    // A job has its page (job_html_cli.rs), not a time window.
    let o = bin().arg("report").arg(&a).args(["--from", "1ms"]).run();
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--from applies to one trace"), "{err}");
    assert!(err.contains("job of 3 ranks"), "{err}");
    let o = bin()
        .args(["report", "--rank-summary", "-o", "-"])
        .arg(a.join("rank0.json"))
        .arg(a.join("rank1.json"))
        .run();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("run it once per rank"));
}

/// Every object key under `v`.
fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                keys(x, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

/// docs/REPORT.md names every field of the job report, the rank summary and the job diff.
#[test]
fn job_json_fields_are_documented() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-doc");
    let (a, _) = gen(py, &dir, "a", &["--ranks", "3", "--dead-truncated", "2"]);
    let (b, _) = gen(py, &dir, "b", &["--ranks", "2"]);
    let mut seen = std::collections::BTreeSet::new();
    keys(&report(&[&a], &[]), &mut seen);
    let s = dir.path("s.json");
    bin()
        .args(["report", "--rank-summary", "-o"])
        .arg(&s)
        .arg(a.join("rank0.json"))
        .run_ok();
    keys(
        &serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap(),
        &mut seen,
    );
    let d = bin()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .args(["--format", "json"])
        .run_ok();
    keys(&serde_json::from_slice(&d.stdout).unwrap(), &mut seen);
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

/// A job directory of per-rank `cutrace record` directories: each rank is its directory's trace
/// (ranked by the directory's name), with the busy time `cutrace report` gives that trace alone.
#[test]
fn per_rank_native_directories_are_a_job() {
    let dir = Dir::new("job-native");
    let fixtures = [
        ("rank0", "native/two_streams/vm-466.cutrace"),
        ("rank1", "native/copy_overlap/vm-478.cutrace"),
    ];
    let job = dir.path("job");
    for (rank, rel) in fixtures {
        let d = job.join(rank);
        std::fs::create_dir_all(&d).unwrap();
        let src = cutrace_testkit::fixture(rel);
        std::fs::copy(&src, d.join(src.file_name().unwrap())).unwrap();
    }
    let r = report(&[&job], &[]);
    assert_eq!(r["ranks"].as_array().unwrap().len(), 2);
    for (i, (rank, _)) in fixtures.iter().enumerate() {
        let alone = report(&[&job.join(rank)], &[]);
        let busy: u64 = alone["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["busy_ns"].as_u64().unwrap())
            .sum();
        let x = &r["ranks"][i];
        assert_eq!(x["rank"], i);
        assert_eq!(x["rank_from"], "file_name");
        assert_eq!(x["busy_ns"], busy);
        assert_eq!(x["comm_ns"], 0);
        assert_eq!(r["clock"]["alignment"], "one_host");
    }
    // A rank killed mid-run (SIGKILL) reports what its trace holds, marked incomplete.
    let d = job.join("rank2");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(
        cutrace_testkit::fixture("native/sigkill/vm-569.cutrace"),
        d.join("vm-569.cutrace"),
    )
    .unwrap();
    let r = report(&[&job], &[]);
    let x = &r["ranks"][2];
    assert_eq!(
        (x["rank"].as_u64(), x["complete"].as_bool()),
        (Some(2), Some(false))
    );
    assert!(x["busy_ns"].as_u64().unwrap() > 0);
    let notes = r["notes"].to_string();
    assert!(notes.contains("rank 2: its trace is incomplete"), "{notes}");
}

/// One native part of process `pid`, its header stating `rank` (none for a launcher), with an
/// NCCL kernel over [t + 400, t + 1000) and a gemm over [t, t + 500 + late) on GPU 0.
fn native_part(dir: &Path, pid: u32, rank: Option<u32>, late: u64) {
    use cutrace_trace::native::{Header, Tail, Writer};
    use cutrace_trace::{Distributed, Kernel, Launch};
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(pid),
        distributed: rank.map(|r| Distributed {
            rank: Some(r),
            world_size: Some(3),
            ..Distributed::default()
        }),
        ..Header::default()
    };
    let mut w = Writer::new(std::io::Cursor::new(Vec::new()), &header).unwrap();
    let t = 1_000_000;
    let kernels = [
        (
            "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            20,
            t + 400 + late,
            t + 1_000 + late,
        ),
        ("_Z4gemmPf", 7, t, t + 500 + late),
    ];
    for (i, (name, stream, start_ns, end_ns)) in kernels.into_iter().enumerate() {
        let name = w.intern(name);
        w.push_kernel(
            &Kernel {
                device: 0,
                context: 1,
                stream,
                correlation_id: i as u64 + 1,
                start_ns,
                end_ns,
                name,
                launch: 0,
            },
            &Launch {
                grid: [1, 1, 1],
                block: [32, 1, 1],
                registers_per_thread: 8,
                static_shared_bytes: 0,
                dynamic_shared_bytes: 0,
                graph_id: 0,
            },
        );
    }
    let tail = Tail {
        records: 2,
        dropped_by_cupti: 0,
        dropped_by_recorder: 0,
        buffers_refused: 0,
        buffers_completed: 1,
        incomplete_reason: None,
    };
    let bytes = w.finish(&tail).unwrap().into_inner();
    std::fs::write(dir.join(format!("h-{pid}.cutrace")), bytes).unwrap();
}

/// A `cutrace record` directory of a torchrun job: the launcher's part states no rank and is
/// left out; each worker's part states its RANK and is that rank.
#[test]
fn native_parts_stating_ranks_are_a_job() {
    let dir = Dir::new("job-parts");
    let job = dir.path("run");
    std::fs::create_dir_all(&job).unwrap();
    native_part(&job, 10, None, 0);
    native_part(&job, 11, Some(0), 0);
    native_part(&job, 12, Some(1), 300);
    let r = report(&[&job], &[]);
    assert_eq!(r["world_size"], 3);
    assert_eq!(r["missing_ranks"], serde_json::json!([2]));
    let ranks = r["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    // Rank 0: busy [t, t+1000), NCCL [t+400, t+1000) of which [t+400, t+500) under the gemm.
    assert_eq!(
        (
            ranks[0]["busy_ns"].as_u64(),
            ranks[0]["exposed_comm_ns"].as_u64()
        ),
        (Some(1_000), Some(500))
    );
    assert_eq!(ranks[0]["rank_from"], "trace");
    // Rank 1 arrives 300 ns later at the one all-reduce: rank 0 waited 300 ns.
    assert_eq!(ranks[0]["wait_ns"], 300);
    assert_eq!(ranks[1]["wait_ns"], 0);
    assert_eq!(r["collectives"]["skew_max_ns"], 300);
    assert_eq!(r["clock"]["alignment"], "one_host");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("h-10.cutrace: the part states no rank"),
        "{notes}"
    );
    // The parts as one trace, still, when they state no rank or one.
    let one = dir.path("one");
    std::fs::create_dir_all(&one).unwrap();
    native_part(&one, 10, None, 0);
    native_part(&one, 11, Some(0), 0);
    let r = report(&[&one], &[]);
    assert!(r.get("kind").is_none() && r["devices"].is_array(), "{r}");
}

/// A real job: `torchrun --nproc_per_node 2` (gloo, one H200) under `cutrace record`
/// (`gpu/capture_dist.sh`, run 29). Each worker's part states its RANK and the run's id, the
/// launcher's states no rank: the directory is a job of ranks 0 and 1, the launcher left out.
#[test]
fn a_recorded_torchrun_job_is_read_by_the_ranks_its_parts_state() {
    let dir = repo().join("tests/fixtures/native/torchrun_gloo");
    let r = report(&[&dir], &[]);
    assert_eq!(r["kind"], "job");
    assert_eq!(r["world_size"], 2);
    let ranks: Vec<(u64, &str)> = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["rank"].as_u64().unwrap(),
                x["rank_from"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranks, [(0, "trace"), (1, "trace")]);
    for x in r["ranks"].as_array().unwrap() {
        assert!(x["busy_ns"].as_u64().unwrap() > 0, "{x}");
        assert_eq!(x["comm_ns"], 0, "gloo launches no NCCL kernel: {x}");
    }
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("vm-595.cutrace: the part states no rank"),
        "{notes}"
    );
}

/// What a user gets wrong: a path that is not there (a typo) is an error naming it, not a dead
/// rank; a rank summary of another version, or one whose figures disagree, is refused with the
/// command that writes it again; JSON files beside `cutrace record` parts are not read, and the
/// report says so.
#[test]
fn job_input_mistakes_are_named() {
    let Some(py) = python() else {
        loud!("SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job");
        return;
    };
    let dir = Dir::new("job-mistakes");
    let (a, _) = gen(py, &dir, "a", &["--ranks", "2"]);
    let typo = a.join("rank7.json");
    let o = bin()
        .arg("report")
        .arg(a.join("rank0.json"))
        .arg(&typo)
        .run();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rank7.json") && err.contains("No such file"),
        "{err}"
    );
    // The map step too: no summary of a dead rank is written for a trace that is not there.
    let o = bin()
        .args(["report", "--rank-summary", "-o"])
        .arg(dir.path("s7.json"))
        .arg(&typo)
        .run();
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.path("s7.json").exists());

    let s = dir.path("s.json");
    bin()
        .args(["report", "--rank-summary", "-o"])
        .arg(&s)
        .arg(a.join("rank0.json"))
        .run_ok();
    // Edited as text: the summary's first member must stay first (that is how it is told from a
    // trace), and serde_json's Value would sort the members.
    let text = std::fs::read_to_string(&s).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let refused = |text: &str, want: &str| {
        let p = dir.path("bad.json");
        std::fs::write(&p, text).unwrap();
        let o = bin().arg("report").arg(&p).arg(a.join("rank1.json")).run();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(want) && err.contains("--rank-summary"),
            "{err}"
        );
    };
    let comm = v["comm_ns"].as_u64().unwrap();
    let exposed = format!("\"exposed_comm_ns\":{}", v["exposed_comm_ns"]);
    assert!(text.contains(&exposed));
    refused(
        &text.replace(&exposed, &format!("\"exposed_comm_ns\":{}", comm + 1)),
        "exposed_comm_ns above comm_ns",
    );
    let version = format!(
        "\"cutrace_rank_summary\":{}",
        cutrace_analysis::RANK_SUMMARY_VERSION
    );
    assert!(text.starts_with(&format!("{{{version},")));
    let other = text
        .replacen(&version, "\"cutrace_rank_summary\":99", 1)
        .replace("\"busy_ns\":", "\"busy_ns_renamed\":");
    refused(&other, "version 99");

    // A job whose every rank is dead has nothing to report: an error naming why, not an empty
    // table with exit status 0.
    let (dead, _) = gen(
        py,
        &dir,
        "dead",
        &["--ranks", "2", "--dead-empty", "0", "--dead-truncated", "1"],
    );
    let o = bin()
        .arg("report")
        .arg(&dead)
        .args(["--format", "json"])
        .run();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("none of the job's 2 ranks could be used") && err.contains("truncated"),
        "{err}"
    );

    let mixed = dir.path("mixed");
    for (sub, part) in [("r0", "vm-466"), ("r1", "vm-466")] {
        let d = mixed.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let src = cutrace_testkit::fixture(&format!("native/two_streams/{part}.cutrace"));
        std::fs::copy(&src, d.join(src.file_name().unwrap())).unwrap();
    }
    std::fs::copy(a.join("rank1.json"), mixed.join("r1/rank1.json")).unwrap();
    let r = report(&[&mixed], &[]);
    assert_eq!(r["kind"], "job");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("1 *.json file(s) beside its cutrace parts"),
        "{notes}"
    );
}

/// A rank summary whose keys were reordered on the way (`jq -S`, or a JSON library that sorts
/// them, as serde_json's `Value` does) is still read as a summary, and gives the same job report.
#[test]
fn reordered_rank_summaries_are_still_summaries() {
    let dir = Dir::new("job-sorted");
    let mut plain = Vec::new();
    let mut sorted = Vec::new();
    for r in 0..2 {
        let s = dir.path(&format!("s{r}.json"));
        let trace = repo().join(format!("tests/fixtures/kineto/gloo_rank{r}.json.gz"));
        bin()
            .arg("report")
            .arg("--rank-summary")
            .arg(&trace)
            .arg("-o")
            .arg(&s)
            .run_ok();
        let v: Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
        let re = dir.path(&format!("sorted{r}.json"));
        std::fs::write(&re, serde_json::to_string(&v).unwrap()).unwrap();
        assert!(!std::fs::read_to_string(&re)
            .unwrap()
            .starts_with("{\"cutrace_rank_summary\""));
        plain.push(s);
        sorted.push(re);
    }
    let a = report(&[&plain[0], &plain[1]], &[]);
    let b = report(&[&sorted[0], &sorted[1]], &[]);
    assert_eq!(a["kind"], "job");
    assert_eq!(a["ranks"], b["ranks"]);
    assert_eq!(a["ranks_found"], 2);
}

/// A rank whose host clock reads 1.5 ms later, another's 40 µs earlier (gen_job.py
/// `--clock-offset`): `clock.offsets` finds both shifts exactly from when the matched
/// collectives ended (they end together on every rank), the others 0, and the text says how far
/// the clocks disagree; without a shift the clocks are said to agree.
#[test]
fn clock_offsets_are_read_from_when_collectives_end() {
    let Some(py) = python() else {
        cutrace_testkit::loud!(
            "SKIPPED: no python3 on PATH; tests/tools/gen_job.py writes the job"
        );
        return;
    };
    let dir = Dir::new("job-clock-offsets");
    let args = [
        "--ranks",
        "4",
        "--steps",
        "3",
        "--seed",
        "7",
        "--clock-offset",
        "2:1500000",
        "--clock-offset",
        "3:-40000",
    ];
    let (job, answer) = gen(py, &dir, "job", &args);
    let r = report(&[&job], &[]);
    let offsets: Vec<(u64, i64, u64)> = r["clock"]["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["rank"].as_u64().unwrap(),
                o["offset_ns"].as_i64().unwrap(),
                o["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(answer["clock_offsets"]["2"], 1_500_000);
    assert_eq!(
        offsets,
        [(0, 0, 6), (1, 0, 6), (2, 1_500_000, 6), (3, -40_000, 6)]
    );
    assert_eq!(r["clock"]["offset_max_ns"], 1_500_000);
    let note = r["clock"]["note"].as_str().unwrap();
    assert!(
        note.contains("up to 1.500 ms apart on their clocks (rank 2's 1.500 ms later"),
        "{note}"
    );
    let (plain, _) = gen(py, &dir, "plain", &args[..6]);
    let r = report(&[&plain], &[]);
    assert_eq!(r["clock"]["offset_max_ns"], 0);
    let note = r["clock"]["note"].as_str().unwrap();
    assert!(note.contains("end within 0 ns of each other"), "{note}");
}
