//! The plan's checks: each bad request is refused by `ConvertPlan::new`, with the message the
//! command prints, before any trace is read and with nothing written. Where a check comes before
//! the inputs are listed, the trace named does not exist: without the check the refusal would be
//! the missing trace instead. Where it needs the trace, the trace is a real fixture: without the
//! check the plan would be made.

use std::path::{Path, PathBuf};

use cutrace_testkit::{fixture, Dir};

use super::{ConvertPlan, PlanError, Request, Written};

fn trace() -> PathBuf {
    fixture("kineto/two_streams.json.gz")
}

fn request(traces: &[&Path]) -> Request {
    Request {
        traces: traces.iter().map(|p| p.to_path_buf()).collect(),
        ..Request::default()
    }
}

/// The message `new` refuses `req` with.
fn refusal(req: Request) -> String {
    match ConvertPlan::new(req) {
        Ok(p) => panic!("planned, not refused: {p:?}"),
        Err(e) => e.to_string(),
    }
}

/// Every entry under `d`, so a refusal can be shown to leave it as it was.
fn entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_table_directory_that_cannot_be_one_is_refused_before_the_inputs_are_listed() {
    let d = Dir::new("plan-dirs");
    let missing = d.path("no-such-trace");
    let mut req = request(&[&missing]);
    req.csv = Some("-".into());
    assert_eq!(
        refusal(req),
        "--csv takes a directory (it writes one file per table there); `-` (stdout) is for \
         --chrome and --perfetto; write ./- for a directory named `-`"
    );

    std::fs::write(d.path("file"), "").unwrap();
    let mut req = request(&[&missing]);
    req.parquet = Some(d.path("file").join("tables"));
    assert_eq!(
        refusal(req),
        format!(
            "--parquet takes a directory (it writes one file per table there), but {} is a \
             file; choose a new or existing directory",
            d.path("file").display()
        )
    );

    std::os::unix::fs::symlink(d.path("nowhere"), d.path("dangling")).unwrap();
    let mut req = request(&[&missing]);
    req.csv = Some(d.path("dangling"));
    assert_eq!(
        refusal(req),
        format!(
            "--csv {} is a link to nothing; give a directory",
            d.path("dangling").display()
        )
    );
    assert_eq!(entries(&d), ["dangling", "file"]);
}

#[test]
fn an_export_file_that_cannot_be_written_is_refused_before_the_inputs_are_listed() {
    let d = Dir::new("plan-files");
    let missing = d.path("no-such-trace");
    let mut req = request(&[&missing]);
    req.chrome = Some("-".into());
    req.stdout_is_terminal = true;
    assert_eq!(
        refusal(req),
        "--chrome - writes the export to stdout, which is a terminal here; redirect it to a file \
         or a pipe (`--chrome - | gzip > out.gz`), or give a file name"
    );

    let mut req = request(&[&missing]);
    req.perfetto = Some(d.0.clone());
    assert_eq!(
        refusal(req),
        format!(
            "--perfetto takes a file name, but {} is a directory",
            d.0.display()
        )
    );

    let out = d.path("no-folder").join("t.pftrace");
    let mut req = request(&[&missing]);
    req.perfetto = Some(out.clone());
    assert_eq!(
        refusal(req),
        format!(
            "--perfetto {}: the folder {} does not exist",
            out.display(),
            d.path("no-folder").display()
        )
    );

    let taken = d.path("taken.json");
    std::fs::write(&taken, "mine").unwrap();
    let mut req = request(&[&missing]);
    req.chrome = Some(taken.clone());
    assert_eq!(
        refusal(req),
        format!(
            "{} already exists; pass --force to overwrite it, or choose another --chrome path",
            taken.display()
        )
    );
    // --force lets it through to the inputs (here: the missing trace).
    let mut req = request(&[&missing]);
    req.chrome = Some(taken.clone());
    req.force = true;
    assert!(matches!(ConvertPlan::new(req), Err(PlanError::Input(_))));
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "mine");
    assert_eq!(entries(&d), ["taken.json"]);
}

#[test]
fn two_outputs_that_name_one_file_are_refused() {
    let d = Dir::new("plan-distinct");
    let t = trace();
    let mut req = request(&[&t]);
    req.chrome = Some("-".into());
    req.perfetto = Some("-".into());
    assert_eq!(
        refusal(req),
        "--chrome - and --perfetto - would both write to stdout; give one of them a file name \
         (nothing was written)"
    );

    let mut req = request(&[&t]);
    req.chrome = Some(d.path("t"));
    req.perfetto = Some(d.path("./t"));
    assert_eq!(
        refusal(req),
        format!(
            "--chrome {} and --perfetto {} name the same file; give each its own file (nothing \
             was written)",
            d.path("t").display(),
            d.path("./t").display()
        )
    );

    let mut req = request(&[&t]);
    req.csv = Some(d.path("new"));
    req.chrome = Some(d.path("new"));
    assert_eq!(
        refusal(req),
        format!(
            "--chrome {} is also the --csv directory; give the file another name (nothing was \
             written)",
            d.path("new").display()
        )
    );

    std::fs::create_dir(d.path("tables")).unwrap();
    let mut req = request(&[&t]);
    req.parquet = Some(d.path("tables"));
    req.perfetto = Some(d.path("tables").join("meta.json"));
    assert_eq!(
        refusal(req),
        format!(
            "--perfetto {} has the name of a table file in the --parquet directory {}; give it \
             another name (nothing was written)",
            d.path("tables").join("meta.json").display(),
            d.path("tables").display()
        )
    );
    assert_eq!(entries(&d), ["tables"]);
    assert!(entries(&d.path("tables")).is_empty());
}

#[test]
fn the_trace_being_converted_is_never_an_output_even_with_force() {
    let d = Dir::new("plan-trace");
    let file = d.path("k.json.gz");
    std::fs::copy(trace(), &file).unwrap();
    // A native trace's directory: an export there would be a stray file among its parts.
    let native = d.path("native");
    std::fs::create_dir(&native).unwrap();
    for e in std::fs::read_dir(fixture("native/two_streams")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), native.join(e.file_name())).unwrap();
    }
    for (traces, out) in [
        (&file, d.path("./k.json.gz")),
        (&native, native.join("x.json")),
    ] {
        let mut req = request(&[traces]);
        req.chrome = Some(out.clone());
        req.force = true;
        assert_eq!(
            refusal(req),
            format!(
                "--chrome {} is the trace being converted (or inside it); give the export \
                 another name (nothing was written)",
                out.display()
            )
        );
    }
    assert_eq!(entries(&d), ["k.json.gz", "native"]);
    assert_eq!(entries(&native).len(), 2);
}

#[test]
fn a_directory_with_an_earlier_export_is_refused_without_force() {
    let d = Dir::new("plan-earlier");
    std::fs::create_dir(d.path("t")).unwrap();
    std::fs::write(d.path("t").join("kernels.parquet"), "earlier").unwrap();
    std::fs::create_dir(d.path("t").join("meta.json")).unwrap(); // a directory: not a table
    let t = trace();
    let mut req = request(&[&t]);
    req.csv = Some(d.path("t"));
    req.parquet = Some(d.path("t"));
    assert_eq!(
        refusal(req.clone()),
        format!(
            "--csv/--parquet {} already holds cutrace tables (kernels.parquet); pass --force to \
             replace them (the tables of a format not written this time are removed, so the \
             directory holds one export), or choose another directory",
            d.path("t").display()
        )
    );
    req.force = true;
    assert!(matches!(ConvertPlan::new(req), Ok(ConvertPlan::Trace(_))));
    assert_eq!(entries(&d.path("t")), ["kernels.parquet", "meta.json"]);
}

#[test]
fn a_job_converts_to_every_format_but_pprof_into_a_directory_without_an_earlier_export() {
    let d = Dir::new("plan-job");
    let ranks = [
        fixture("kineto/gloo_rank0.json.gz"),
        fixture("kineto/gloo_rank1.json.gz"),
    ];
    let ranks: Vec<&Path> = ranks.iter().map(PathBuf::as_path).collect();
    for flag in ["--csv", "--chrome", "--perfetto", "--parquet and --csv"] {
        let mut req = request(&ranks);
        req.parquet = flag.contains("parquet").then(|| d.path("pq"));
        match flag {
            "--chrome" => req.chrome = Some(d.path("t.json")),
            "--perfetto" => req.perfetto = Some(d.path("t.pftrace")),
            _ => req.csv = Some(d.path("csv")),
        }
        assert!(
            matches!(ConvertPlan::new(req), Ok(ConvertPlan::Job(_))),
            "{flag}"
        );
    }
    let mut req = request(&ranks);
    req.pprof = Some(d.path("p.pb.gz"));
    assert_eq!(
        refusal(req),
        "a job (2 ranks) has no one pprof profile: convert each rank's trace with --pprof on its \
         own (nothing was written)"
    );
    // --csv and --parquet of a job both write meta/: one directory is refused.
    let mut req = request(&ranks);
    req.parquet = Some(d.path("both"));
    req.csv = Some(d.path("both"));
    assert!(refusal(req).contains("two directories"));
    std::fs::create_dir(d.path("pq")).unwrap();
    std::fs::write(d.path("pq").join("meta.json"), "earlier").unwrap();
    let mut req = request(&ranks);
    req.parquet = Some(d.path("pq"));
    assert_eq!(
        refusal(req.clone()),
        format!(
            "{} already holds cutrace tables (meta.json); pass --force to replace them (the \
             directory then holds this export alone), or choose another directory (nothing was \
             written)",
            d.path("pq").display()
        )
    );
    req.force = true;
    match ConvertPlan::new(req) {
        Ok(ConvertPlan::Job(job)) => assert_eq!(job.traces(), 2),
        other => panic!("not a job's plan: {other:?}"),
    }
    assert_eq!(entries(&d), ["pq"]);
    assert_eq!(entries(&d.path("pq")), ["meta.json"]);
}

#[test]
fn a_plan_writes_each_output_and_says_so_in_order() {
    let d = Dir::new("plan-run");
    let t = trace();
    let mut req = request(&[&t]);
    req.csv = Some(d.path("tables"));
    req.parquet = Some(d.path("tables"));
    req.perfetto = Some(d.path("t.pftrace"));
    req.chrome = Some(d.path("t.json"));
    let Ok(ConvertPlan::Trace(plan)) = ConvertPlan::new(req) else {
        panic!("not a trace's plan");
    };
    let read = crate::input::load(plan.trace(), &Default::default(), &mut |_, _| {}).unwrap();
    let kernels = read.kernels.len();
    let mut heard = Vec::new();
    let written = plan.run(read, &mut |w| heard.push(w.clone())).unwrap();
    assert_eq!(heard, written);
    let kinds: Vec<&str> = written
        .iter()
        .map(|w| match w {
            Written::Tables { .. } => "tables",
            Written::Perfetto { .. } => "perfetto",
            Written::Chrome { .. } => "chrome",
            Written::Pprof { .. } => "pprof",
        })
        .collect();
    assert_eq!(kinds, ["tables", "perfetto", "chrome"]);
    let lines = written[0].lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].starts_with(&format!("wrote {kernels} kernels, ")),
        "{lines:?}"
    );
    assert!(lines[1].contains(" as Parquet"), "{lines:?}");
    assert_eq!(entries(&d), ["t.json", "t.pftrace", "tables"]);
    assert!(entries(&d.path("tables")).contains(&"kernels.parquet".to_string()));
}
