//! Inputs people give by mistake are answered with what they are and what to give instead (exit
//! 2, nothing written): an Nsight Systems report or its SQLite export, an Nsight Compute report,
//! a torch.save file, a Perfetto trace, a zip; and a TensorBoard log directory is read where
//! torch.profiler's `tensorboard_trace_handler` put the trace; a plain `--from` number before the
//! trace is said to be an absolute time, with the unit to add for an offset.

use cutrace_testkit::Dir;

fn refused(d: &Dir, name: &str, bytes: &[u8], says: &[&str]) {
    let p = d.path(name);
    std::fs::write(&p, bytes).unwrap();
    let o = crate::util::cutrace(&["report", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{name}: {err}");
    assert!(o.stdout.is_empty(), "{name}");
    for s in says {
        assert!(err.contains(s), "{name}: wanted {s:?} in {err}");
    }
}

#[test]
fn files_that_are_not_traces_are_named_with_the_fix() {
    let d = Dir::new("mistakes");
    let record = "cutrace record -o DIR -- CMD";
    refused(
        &d,
        "run.nsys-rep",
        b"\x00\x01nsys",
        &["an Nsight Systems report", record],
    );
    refused(&d, "old.qdrep", b"\x00\x01", &["an Nsight Systems report"]);
    refused(
        &d,
        "run.sqlite",
        b"SQLite format 3\x00\x10\x00",
        &["an SQLite database", "nsys export --type sqlite", record],
    );
    refused(
        &d,
        "k.ncu-rep",
        b"\x00\x01",
        &["an Nsight Compute report", "cutrace profile"],
    );
    refused(
        &d,
        "model.pt",
        b"PK\x03\x04\x14\x00\x00\x00",
        &["torch.save", "export_chrome_trace"],
    );
    refused(&d, "old.pth", b"\x80\x02}q\x00", &["torch.save"]);
    refused(
        &d,
        "t.pftrace",
        b"\x0a\x05",
        &["a Perfetto protobuf trace", "ui.perfetto.dev"],
    );
    refused(
        &d,
        "logs.zip",
        b"PK\x03\x04\x14\x00",
        &["a zip archive", "unpack it"],
    );
    // Anything else keeps the general answer.
    refused(
        &d,
        "notes.txt",
        b"hello",
        &["not a cutrace trace nor a JSON trace"],
    );
}

#[test]
fn a_tensorboard_log_directory_is_read_at_its_latest_profile_run() {
    let d = Dir::new("tensorboard");
    let trace = cutrace_testkit::repo().join("tests/fixtures/kineto/two_streams.json.gz");
    for run in ["2026_01_01_10_00_00", "2026_01_02_10_00_00"] {
        let r = d.path("plugins/profile").join(run);
        std::fs::create_dir_all(&r).unwrap();
        std::fs::copy(&trace, r.join("host_123.1.pt.trace.json.gz")).unwrap();
    }
    for given in [d.0.clone(), d.path("plugins/profile")] {
        let o = crate::util::cutrace(&["report", given.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains("2026_01_02_10_00_00/host_123.1.pt.trace.json.gz"),
            "{err}"
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("records: 10 kernels"), "{out}");
    }
}

#[test]
fn a_plain_number_before_the_trace_is_said_to_be_absolute_with_the_unit_to_add() {
    let ex = "examples/two_streams.json.gz";
    let o = crate::util::cutrace(&["report", "--from", "2", ex]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("WARNING: --from 2 was read as 2 ns on the trace's clock, before the trace")
            && text.contains("give a unit (--from 2s, --from 2ms)"),
        "{text}"
    );
    let o = crate::util::cutrace(&["report", "--from", "2", "--format", "json", ex]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cutrace: warning: --from 2 was read as 2 ns"),
        "{err}"
    );
    // An offset with its unit is taken as meant, without a word.
    let o = crate::util::cutrace(&["report", "--from", "1ms", ex]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("WARNING"));
}

/// Two profiles of separate runs saved in one folder are not a job: none states a rank, so the
/// folder is refused with what to do instead; the same files named one by one are taken as a
/// job in their order, and each note says the rank was assumed from that order. Rank files in
/// a folder (the file names state the ranks) stay a job.
#[test]
fn a_folder_of_unrelated_traces_is_not_taken_for_a_job() {
    let d = Dir::new("unrelated");
    let kineto = cutrace_testkit::repo().join("tests/fixtures/kineto");
    for f in ["train_step.json.gz", "launch_bound.json.gz"] {
        std::fs::copy(kineto.join(f), d.path(f)).unwrap();
    }
    let o = crate::util::cutrace(&["report", d.0.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty());
    for want in [
        "its 2 traces state no rank",
        "separate runs",
        "`cutrace diff A B`",
        "name them in rank order",
    ] {
        assert!(err.contains(want), "wanted {want:?} in {err}");
    }
    let a = d.path("launch_bound.json.gz");
    let b = d.path("train_step.json.gz");
    let j = crate::util::cutrace_json(&["report", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(j["kind"], "job", "{j}");
    let notes = j["notes"].to_string();
    assert_eq!(notes.matches("numbered_by_order").count(), 2, "{notes}");
    // One folder up (a TensorBoard log directory holding a run's captures), and as either side
    // of a diff: refused the same way.
    let top = Dir::new("unrelated-up");
    let run = top.path("run1");
    std::fs::create_dir(&run).unwrap();
    for (f, to) in [
        (
            "train_step.json.gz",
            "host_42.1700000000000.pt.trace.json.gz",
        ),
        (
            "launch_bound.json.gz",
            "host_42.1700000005000.pt.trace.json.gz",
        ),
    ] {
        std::fs::copy(kineto.join(f), run.join(to)).unwrap();
    }
    let one = kineto.join("two_streams.json.gz");
    for args in [
        vec!["report", top.0.to_str().unwrap()],
        vec!["diff", run.to_str().unwrap(), one.to_str().unwrap()],
    ] {
        let o = crate::util::cutrace(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("its 2 traces state no rank"),
            "{args:?}: {err}"
        );
    }
    let jobs = cutrace_testkit::repo().join("tests/fixtures/jobs/seed1");
    let j = crate::util::cutrace_json(&["report", jobs.to_str().unwrap()]);
    assert_eq!(j["ranks"].as_array().map(Vec::len), Some(4), "{j}");
}
