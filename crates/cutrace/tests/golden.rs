//! Golden outputs: every committed fixture through report (text and JSON), diff, convert to every
//! format, doctor on every fixture root and audit on hand-built ELF files, compared byte for byte
//! with `tests/golden/`. A change of output is then a visible diff of those files, never silent.
//! A file convert writes is kept as its size and CRC-32 with a readable dump beneath (`readable`):
//! the first lines of a CSV table, Chrome JSON with sorted keys and the first events of each
//! kind, a Perfetto trace's packets decoded; so a failure says what changed, and the CRC-32
//! covers the rest.
//!
//! Refresh after an intended change with `CUTRACE_BLESS=1 cargo test -p cutrace --test golden`
//! and say in the commit message which outputs changed and why.

use cutrace_settings::var;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_testkit::mini_elf;

mod readable;

fn golden_dir() -> PathBuf {
    cutrace_testkit::repo().join("tests/golden")
}

/// One command's observable result: exit status, stdout, stderr, and for commands that write
/// files, each file's name, size and CRC-32, with what `readable` shows of it (files already shown
/// in `shown` are named, not shown again).
fn observe(args: &[String], cwd: &Path, out_dir: Option<(&Path, &mut readable::Shown)>) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .current_dir(cwd)
        .args(args)
        .env_remove(var::CUPTI_LIB)
        .env_remove("CUDA_HOME")
        .output()
        .expect("run cutrace");
    let mut s = format!(
        "$ cutrace {}\nexit: {:?}\n--- stdout\n{}\n--- stderr\n{}\n",
        args.join(" "),
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        stable_stderr(&String::from_utf8_lossy(&o.stderr))
    );
    if let Some((dir, shown)) = out_dir {
        // Every file below the output directory (a job's Parquet export is partitioned into
        // TABLE/rank=N/ directories), by its path relative to it.
        let mut files = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            let name = f.strip_prefix(dir).unwrap().to_string_lossy();
            let _ = writeln!(
                s,
                "--- file {name} {} bytes crc32 {:08x}",
                bytes.len(),
                crc32fast::hash(&bytes)
            );
            s += &readable::describe(&name, &bytes, shown);
        }
    }
    s
}

/// stderr without the lines that depend on the machine's load: progress and the time a slow read
/// took (`cutrace: reading NAME: 3 MB of 9 MB (33%)`, `cutrace: read NAME in 1.2 s`), printed
/// only when a read takes over a second.
fn stable_stderr(e: &str) -> String {
    e.split_inclusive('\n')
        .filter(|l| {
            let l = l.trim_end();
            !((l.starts_with("cutrace: read ") && l.ends_with(" s"))
                || (l.starts_with("cutrace: reading ") && l.contains(" MB")))
        })
        .collect()
}

fn check(name: &str, got: &str, failures: &mut Vec<String>) {
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("CUTRACE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    match std::fs::read_to_string(&path) {
        Ok(want) if want == got => {}
        Ok(want) => {
            let line = want
                .lines()
                .zip(got.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
            failures.push(format!(
                "{name}: differs from {} from line {}:\n  want: {:?}\n  got:  {:?}",
                path.display(),
                line + 1,
                want.lines().nth(line).unwrap_or("<end>"),
                got.lines().nth(line).unwrap_or("<end>")
            ));
        }
        Err(e) => failures.push(format!("{name}: {}: {e}", path.display())),
    }
}

/// `f` over `items` on a few threads (the binary runs ~400 times here, each run waiting on its
/// own process), results in the order of `items`.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

fn slug(s: &str) -> String {
    s.replace(['/', '.'], "_")
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn traces() -> Vec<String> {
    let mut t: Vec<String> = cutrace_testkit::native_fixtures(&cutrace_testkit::repo())
        .into_iter()
        .map(|r| format!("tests/fixtures/native/{r}"))
        .collect();
    let mut k: Vec<String> =
        std::fs::read_dir(cutrace_testkit::repo().join("tests/fixtures/kineto"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json.gz"))
            .map(|n| format!("tests/fixtures/kineto/{n}"))
            .collect();
    k.sort();
    t.extend(k);
    t.push("examples/two_streams.json.gz".into());
    t
}

#[test]
fn report_outputs_are_unchanged() {
    let repo = cutrace_testkit::repo();
    let mut failures = Vec::new();
    let traces = traces();
    let outs = par_map(&traces, |t| {
        let mut out = observe(&strs(&["report", t]), &repo, None);
        out += &observe(&strs(&["report", t, "--format", "json"]), &repo, None);
        out
    });
    for (t, out) in traces.iter().zip(outs) {
        check(&format!("report/{}", slug(t)), &out, &mut failures);
    }
    let nvtx = "tests/fixtures/native/nvtx";
    let mut out = observe(&strs(&["report", nvtx, "--steps", "step"]), &repo, None);
    out += &observe(
        &strs(&["report", nvtx, "--steps", "s*", "--format", "json"]),
        &repo,
        None,
    );
    out += &observe(
        &strs(&[
            "report",
            "tests/fixtures/native/two_streams",
            "--from",
            "1ms",
            "--to",
            "3ms",
        ]),
        &repo,
        None,
    );
    out += &observe(
        &strs(&[
            "report",
            "tests/fixtures/kineto/profiler_steps.json.gz",
            "--wide",
        ]),
        &repo,
        None,
    );
    check("report/options", &out, &mut failures);
    // Distributed jobs: a directory of ranks, and two rank files named one by one.
    for (name, args) in jobs() {
        let mut a = vec!["report"];
        a.extend(args.iter().copied());
        let mut out = observe(&strs(&a), &repo, None);
        a.extend(["--format", "json"]);
        out += &observe(&strs(&a), &repo, None);
        check(&format!("report/{name}"), &out, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The jobs the golden files hold: a name and the report's arguments.
fn jobs() -> [(&'static str, Vec<&'static str>); 2] {
    [
        ("job_seed1", vec!["tests/fixtures/jobs/seed1"]),
        (
            "job_gloo_ranks",
            vec![
                "tests/fixtures/kineto/gloo_rank0.json.gz",
                "tests/fixtures/kineto/gloo_rank1.json.gz",
            ],
        ),
    ]
}

/// The pairs `diff` is run on.
const DIFF_PAIRS: [(&str, &str); 5] = [
    (
        "tests/fixtures/native/two_streams",
        "tests/fixtures/native/lean/two_streams",
    ),
    (
        "tests/fixtures/kineto/two_streams.json.gz",
        "tests/fixtures/native/two_streams",
    ),
    (
        "tests/fixtures/native/tiny_5000",
        "tests/fixtures/native/threads8",
    ),
    (
        "tests/fixtures/kineto/train_step.json.gz",
        "tests/fixtures/kineto/launch_bound.json.gz",
    ),
    JOB_PAIR,
];

/// The two jobs `diff` is run on, also with `--critical-path`.
const JOB_PAIR: (&str, &str) = ("tests/fixtures/jobs/seed1", "tests/fixtures/jobs/seed2");

/// The lines of `text` longer than 120 characters (not bytes: `µs` and `→` are one each).
fn long_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > 120)
        .map(|l| format!("{} chars: {l}", l.chars().count()))
        .collect()
}

fn stdout_of(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .current_dir(cutrace_testkit::repo())
        .args(args)
        .output()
        .expect("run cutrace");
    assert!(o.status.success(), "cutrace {args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// The text of every report (one trace, a job) and every diff fits a terminal of 120 columns;
/// `--wide` gives the long form, whose lines may be longer.
#[test]
fn text_fits_120_columns_unless_wide() {
    let mut runs: Vec<Vec<String>> = traces()
        .into_iter()
        .map(|t| vec!["report".to_string(), t])
        .collect();
    for (_, args) in jobs() {
        let mut a = vec!["report".to_string()];
        a.extend(args.iter().map(|s| s.to_string()));
        runs.push(a);
    }
    for (a, b) in DIFF_PAIRS {
        runs.push(strs(&["diff", a, b]));
    }
    runs.push(strs(&["diff", JOB_PAIR.0, JOB_PAIR.1, "--critical-path"]));
    let long = par_map(&runs, |a| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let long = long_lines(&stdout_of(&a));
        (!long.is_empty()).then(|| format!("cutrace {}:\n  {}", a.join(" "), long.join("\n  ")))
    });
    let long: Vec<String> = long.into_iter().flatten().collect();
    assert!(
        long.is_empty(),
        "lines over 120 characters:\n{}",
        long.join("\n")
    );
    let wide = stdout_of(&[
        "report",
        "tests/fixtures/kineto/profiler_steps.json.gz",
        "--wide",
    ]);
    assert!(
        !long_lines(&wide).is_empty(),
        "--wide should keep the long lines"
    );
}

#[test]
fn diff_outputs_are_unchanged() {
    let repo = cutrace_testkit::repo();
    let pairs = DIFF_PAIRS;
    let mut failures = Vec::new();
    let outs = par_map(&pairs, |(a, b)| {
        let mut out = observe(&strs(&["diff", a, b]), &repo, None);
        out += &observe(&strs(&["diff", a, b, "--format", "json"]), &repo, None);
        out
    });
    for ((a, b), out) in pairs.iter().zip(outs) {
        check(
            &format!("diff/{}--{}", slug(a), slug(b)),
            &out,
            &mut failures,
        );
    }
    // Two jobs' critical paths across their ranks, step by step.
    let (a, b) = JOB_PAIR;
    let mut out = observe(&strs(&["diff", a, b, "--critical-path"]), &repo, None);
    out += &observe(
        &strs(&["diff", a, b, "--critical-path", "--format", "json"]),
        &repo,
        None,
    );
    check("diff/job_critical_path", &out, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn convert_outputs_are_unchanged() {
    let repo = cutrace_testkit::repo();
    let mut failures = Vec::new();
    let traces = traces();
    let outs = par_map(&traces, |t| {
        let tmp = cutrace_testkit::Dir::new("golden-convert");
        let d = tmp.0.display().to_string();
        let mut out = String::new();
        let mut shown = readable::Shown::default();
        for (flag, target) in [
            ("--csv", format!("{d}/tables")),
            ("--parquet", format!("{d}/parquet")),
            ("--chrome", format!("{d}/files/t.json")),
            ("--perfetto", format!("{d}/files/t.pftrace")),
            ("--chrome", format!("{d}/gz/t.json.gz")),
        ] {
            let dir = Path::new(&target);
            let listed = if flag == "--csv" || flag == "--parquet" {
                dir.to_path_buf()
            } else {
                std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
                dir.parent().unwrap().to_path_buf()
            };
            let args = strs(&["convert", t, flag, &target]);
            out += &observe(&args, &repo, Some((&listed, &mut shown))).replace(&d, "$TMP");
        }
        out
    });
    for (t, out) in traces.iter().zip(outs) {
        check(&format!("convert/{}", slug(t)), &out, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn doctor_outputs_are_unchanged() {
    let repo = cutrace_testkit::repo();
    let roots = repo.join("crates/cutrace-doctor/tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&roots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut failures = Vec::new();
    let outs = par_map(&names, |n| {
        let root = format!("crates/cutrace-doctor/tests/fixtures/{n}");
        let mut out = observe(&strs(&["doctor", "--root", &root]), &repo, None);
        out += &observe(&strs(&["doctor", "--root", &root, "-v"]), &repo, None);
        out += &observe(
            &strs(&["doctor", "--root", &root, "--format", "json"]),
            &repo,
            None,
        );
        out
    });
    for (n, out) in names.iter().zip(outs) {
        check(&format!("doctor/{n}"), &out, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn audit_outputs_are_unchanged() {
    use mini_elf::{ar, MiniElf};
    let tmp = cutrace_testkit::Dir::new("golden-audit");
    let d = &tmp.0;
    std::fs::create_dir_all(d.join("venv/lib")).unwrap();
    MiniElf::shared()
        .soname("liblegacy.so")
        .import("cuptiEventGroupCreate")
        .import("cuptiMetricGetIdFromName")
        .write(&d.join("venv/lib/liblegacy.so"));
    MiniElf::shared()
        .soname("libcupti.so.12")
        .export("cuptiActivityEnable")
        .export("cuptiEventGroupCreate")
        .write(&d.join("venv/lib/libcupti-1a2b3c4d.so.12"));
    MiniElf::shared()
        .import("dlsym")
        .rodata(b"cuptiActivityConfigurePCSampling\0")
        .write(&d.join("venv/lib/libdl_user.so"));
    MiniElf::executable()
        .import("cuptiProfilerInitialize")
        .write(&d.join("venv/app"));
    MiniElf::shared()
        .import("cuptiActivityEnable")
        .write(&d.join("venv/lib/libmodern.so"));
    let obj = MiniElf::object().import("cuptiEventRead").build();
    std::fs::write(d.join("venv/lib/libstatic.a"), ar(&[("user.o", obj)])).unwrap();
    std::fs::write(d.join("venv/readme.txt"), b"not an ELF").unwrap();
    let mut out = observe(&strs(&["audit", "venv"]), d, None);
    out += &observe(&strs(&["audit", "venv", "--format", "json"]), d, None);
    out += &observe(&strs(&["audit", "venv/lib/libmodern.so"]), d, None);
    // The audit names files by their real path.
    let out = out.replace(&d.canonicalize().unwrap().display().to_string(), "$TMP");
    let mut failures = Vec::new();
    check("audit/venv", &out, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
