//! `cutrace convert --parquet` over a distributed job: hive-style partitions
//! (`TABLE/rank=N/part.parquet`, `meta/rank=N/meta.json`), each file the single-trace export of
//! that rank's trace byte for byte; dead ranks left out and named; refusals that protect an
//! earlier export. DuckDB's reading of the layout is tested by tests/sql_duckdb.py.

use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_testkit::{repo as root, Dir};

fn convert(args: &[&Path]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn each_rank_is_its_own_export_byte_for_byte_in_hive_partitions() {
    let tmp = Dir::new("pq-job");
    let traces = [
        root().join("tests/fixtures/kineto/two_streams.json.gz"),
        root().join("tests/fixtures/native/multiproc"),
        root().join("tests/fixtures/kineto/copy_overlap.json.gz"),
    ];
    let job = tmp.join("job");
    let mut args: Vec<&Path> = traces.iter().map(|p| p.as_path()).collect();
    args.extend([Path::new("--parquet"), &job]);
    let err = ok(&convert(&args));
    assert!(
        err.contains("wrote 3 ranks (rank 0 to 2; 3 ranks numbered in the job")
            && err.contains("TABLE/rank=N/part.parquet"),
        "{err}"
    );
    let mut want = Vec::new();
    for (rank, trace) in traces.iter().enumerate() {
        let one = tmp.join(format!("one{rank}"));
        ok(&convert(&[trace, Path::new("--parquet"), &one]));
        for f in files_under(&one) {
            let name = f.to_str().unwrap();
            let part = match name.strip_suffix(".parquet") {
                Some(table) => PathBuf::from(format!("{table}/rank={rank}/part.parquet")),
                None => PathBuf::from(format!("meta/rank={rank}/{name}")),
            };
            assert_eq!(
                std::fs::read(one.join(&f)).unwrap(),
                std::fs::read(job.join(&part)).unwrap(),
                "{} differs from {name} of {}",
                part.display(),
                trace.display()
            );
            want.push(part);
        }
    }
    want.sort();
    assert_eq!(files_under(&job), want, "nothing else, no staging left");
}

#[test]
fn a_directory_of_traces_is_a_job_and_a_dead_rank_is_named_not_fatal() {
    let tmp = Dir::new("pq-job-dir");
    let dir = tmp.join("traces");
    std::fs::create_dir(&dir).unwrap();
    for (name, from) in [
        ("r0.json.gz", "tests/fixtures/kineto/two_streams.json.gz"),
        ("r2.json.gz", "tests/fixtures/kineto/launch_bound.json.gz"),
    ] {
        std::fs::copy(root().join(from), dir.join(name)).unwrap();
    }
    std::fs::write(dir.join("r1.json"), "").unwrap();
    let out = tmp.join("pq");
    let err = ok(&convert(&[&dir, Path::new("--parquet"), &out]));
    assert!(
        err.contains("rank 1 (")
            && err.contains("r1.json) not written")
            && err.contains("wrote 2 ranks (rank 0 to 2"),
        "{err}"
    );
    // The empty trace keeps its place: the others are ranks 0 and 2.
    let ranks: Vec<PathBuf> = files_under(&out.join("kernels"));
    assert_eq!(
        ranks,
        [
            PathBuf::from("rank=0/part.parquet"),
            PathBuf::from("rank=2/part.parquet")
        ]
    );
}

#[test]
fn ranks_come_from_file_names_and_a_second_trace_of_a_rank_is_left_out() {
    let tmp = Dir::new("pq-job-names");
    let dir = tmp.join("traces");
    std::fs::create_dir(&dir).unwrap();
    for (name, from) in [
        ("dup_rank1.json.gz", "two_streams"),
        ("other.json.gz", "cuda_graph"),
        ("trace_rank1.json.gz", "launch_bound"),
        ("trace_rank3.json.gz", "train_step"),
    ] {
        let from = root().join(format!("tests/fixtures/kineto/{from}.json.gz"));
        std::fs::copy(from, dir.join(name)).unwrap();
    }
    let out = tmp.join("pq");
    let err = ok(&convert(&[&dir, Path::new("--parquet"), &out]));
    assert!(
        err.contains("trace_rank1.json.gz) not written: rank 1 again")
            && err.contains("wrote 3 ranks (rank 0 to 3; 2 ranks from file names, 1 numbered"),
        "{err}"
    );
    // The first trace of rank 1 in name order is rank 1; the one without a rank takes 0.
    for (rank, name) in [
        (0, "other.json.gz"),
        (1, "dup_rank1.json.gz"),
        (3, "trace_rank3.json.gz"),
    ] {
        let one = tmp.join(format!("one-{name}"));
        ok(&convert(&[&dir.join(name), Path::new("--parquet"), &one]));
        assert_eq!(
            std::fs::read(one.join("kernels.parquet")).unwrap(),
            std::fs::read(out.join(format!("kernels/rank={rank}/part.parquet"))).unwrap(),
            "rank {rank}"
        );
    }
    assert_eq!(files_under(&out.join("kernels")).len(), 3);
}

#[test]
fn the_rank_a_trace_states_wins_over_its_name_and_place() {
    // The real two-rank gloo job of the H200, its files named against their ranks.
    let tmp = Dir::new("pq-job-stated");
    let dir = tmp.join("traces");
    std::fs::create_dir(&dir).unwrap();
    for (name, from) in [
        ("a_rank0.json.gz", "gloo_rank1"),
        ("b.json.gz", "gloo_rank0"),
    ] {
        let from = root().join(format!("tests/fixtures/kineto/{from}.json.gz"));
        std::fs::copy(from, dir.join(name)).unwrap();
    }
    let out = tmp.join("pq");
    let err = ok(&convert(&[&dir, Path::new("--parquet"), &out]));
    assert!(err.contains("wrote 2 ranks (rank 0 to 1;"), "{err}");
    for (rank, name) in [(1, "a_rank0.json.gz"), (0, "b.json.gz")] {
        let one = tmp.join(format!("one-{name}"));
        ok(&convert(&[&dir.join(name), Path::new("--parquet"), &one]));
        assert_eq!(
            std::fs::read(one.join("kernels.parquet")).unwrap(),
            std::fs::read(out.join(format!("kernels/rank={rank}/part.parquet"))).unwrap(),
            "rank {rank}"
        );
    }
}

#[test]
fn an_earlier_export_is_kept_without_force_and_replaced_whole_with_it() {
    let tmp = Dir::new("pq-job-force");
    let a = root().join("tests/fixtures/kineto/two_streams.json.gz");
    let b = root().join("tests/fixtures/kineto/copy_overlap.json.gz");
    let out = tmp.join("pq");
    let pq = Path::new("--parquet");
    ok(&convert(&[&a, pq, &out]));
    let refused = convert(&[&a, &b, pq, &out]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("already holds cutrace tables"),
        "{err}"
    );
    assert!(out.join("kernels.parquet").is_file());
    let err = ok(&convert(&[&a, &b, pq, &out, Path::new("--force")]));
    assert!(err.contains("removed"), "{err}");
    assert!(!out.join("kernels.parquet").exists() && !out.join("meta.json").exists());
    assert!(out.join("kernels/rank=1/part.parquet").is_file());
    // And back: one trace's tables replace the partitions.
    let refused = convert(&[&a, pq, &out]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("kernels/"));
    ok(&convert(&[&a, pq, &out, Path::new("--force")]));
    assert!(!out.join("kernels").exists() && !out.join("meta").exists());
    assert!(out.join("kernels.parquet").is_file());
    // A job has no one pprof profile.
    let refused = convert(&[&a, &b, Path::new("--pprof"), &tmp.join("p.pb.gz")]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("no one pprof profile"),
        "{err}"
    );
}
