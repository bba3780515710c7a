//! Options and environments a careless user or an attacker controls: thread counts past any
//! machine's, a metric list that names nothing, job directories holding FIFOs and dangling
//! links, a `CUTRACE_INJECT_LIB` that is no library, and a cache directory someone else
//! prepared for the embedded injection library.

use cutrace_settings::var;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cutrace_testkit::{fixture, loud, repo, Dir};

fn cutrace(bin: &Path, args: &[&std::ffi::OsStr], envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    crate::util::output_of_copied(
        Command::new(bin)
            .args(args)
            .envs(envs.iter().copied())
            .current_dir(repo())
            .stdin(Stdio::null()),
    )
}

fn debug_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cutrace"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn thread_counts_past_the_cap_are_refused_or_capped() {
    let t = fixture("kineto/launch_bound.json.gz");
    for n in ["0", "257", "18446744073709551615", "many"] {
        let o = cutrace(
            &debug_bin(),
            &[
                "report".as_ref(),
                t.as_os_str(),
                "--threads".as_ref(),
                n.as_ref(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(2), "--threads {n}: {}", stderr(&o));
        assert!(stderr(&o).contains("from 1 to 256"), "{}", stderr(&o));
    }
    // The benchmark knob is capped, not trusted: the read finishes as with one thread per core.
    let plain = cutrace(&debug_bin(), &["report".as_ref(), t.as_os_str()], &[]);
    let huge = cutrace(
        &debug_bin(),
        &["report".as_ref(), t.as_os_str()],
        &[(var::IMPORT_THREADS, "18446744073709551615".as_ref())],
    );
    assert!(huge.status.success(), "{}", stderr(&huge));
    assert_eq!(plain.stdout, huge.stdout);
}

#[test]
fn a_metric_list_that_names_no_metric_is_refused() {
    for m in [",,,", "", " , "] {
        let o = cutrace(
            &debug_bin(),
            &[
                "profile".as_ref(),
                "--metrics".as_ref(),
                m.as_ref(),
                "--".as_ref(),
                "/bin/true".as_ref(),
            ],
            &[],
        );
        assert_eq!(
            o.status.code(),
            Some(125),
            "--metrics {m:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("--metrics names no metric"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn a_job_directory_names_what_it_leaves_out() {
    let d = Dir::new("job-left-out");
    let job = d.path("job");
    std::fs::create_dir(&job).unwrap();
    for r in ["gloo_rank0.json.gz", "gloo_rank1.json.gz"] {
        std::fs::copy(fixture(&format!("kineto/{r}")), job.join(r)).unwrap();
    }
    let fifo = job.join("rank2.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink(d.path("nowhere"), job.join("rank3.json.gz")).unwrap();
    let o = cutrace(&debug_bin(), &["report".as_ref(), job.as_os_str()], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The job report's notes, in its text.
    let e = String::from_utf8_lossy(&o.stdout);
    assert!(
        e.contains("rank2.json: a FIFO, not a trace file: left out"),
        "{e}"
    );
    assert!(e.contains("rank3.json.gz: a link to nothing"), "{e}");
}

/// The release binary, which carries the embedded injection library (debug builds carry none):
/// `.ci/run` builds it before the tests.
fn release_bin() -> Option<PathBuf> {
    let p = repo().join("target/release/cutrace");
    p.is_file().then_some(p)
}

#[test]
fn a_named_injection_library_that_is_not_one_is_an_error_never_replaced() {
    let d = Dir::new("inject-lib");
    let cache = d.path("cache");
    let dir = d.path("dir");
    std::fs::create_dir(&dir).unwrap();
    let mut bins = vec![debug_bin()];
    bins.extend(release_bin());
    if bins.len() == 1 {
        loud!("SKIPPED the embedded-library half of a_named_injection_library_that_is_not_one: no target/release/cutrace (build it first)");
    }
    for bin in &bins {
        for lib in [
            "/nonexistent".as_ref(),
            "/dev/zero".as_ref(),
            dir.as_os_str(),
        ] {
            let o = cutrace(
                bin,
                &[
                    "record".as_ref(),
                    "-o".as_ref(),
                    d.path("trace").as_os_str(),
                    "--".as_ref(),
                    "/bin/true".as_ref(),
                ],
                &[
                    (var::INJECT_LIB, lib),
                    ("XDG_CACHE_HOME", cache.as_os_str()),
                ],
            );
            assert_eq!(
                o.status.code(),
                Some(125),
                "{}: {}",
                bin.display(),
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(&format!("CUTRACE_INJECT_LIB={}", lib.to_string_lossy())),
                "{}",
                stderr(&o)
            );
            assert!(
                !cache.exists(),
                "{}: the embedded library was unpacked",
                bin.display()
            );
            assert!(!d.path("trace").exists());
        }
    }
}

#[test]
fn the_embedded_library_is_unpacked_only_into_a_cache_of_the_users_own() {
    let Some(bin) = release_bin() else {
        loud!("SKIPPED the_embedded_library_is_unpacked_only_into_a_cache_of_the_users_own: no target/release/cutrace (build it first)");
        return;
    };
    let d = Dir::new("inject-cache");
    // Alone, with no library installed beside it, as `cargo install` leaves it.
    let bin = {
        let alone = d.path("bin/cutrace");
        std::fs::create_dir(d.path("bin")).unwrap();
        std::fs::copy(&bin, &alone).unwrap();
        alone
    };
    let cache = d.path("cache");
    let record = |trace: &str| {
        cutrace(
            &bin,
            &[
                "record".as_ref(),
                "-q".as_ref(),
                "-o".as_ref(),
                d.path(trace).as_os_str(),
                "--".as_ref(),
                "/bin/true".as_ref(),
            ],
            &[("XDG_CACHE_HOME", cache.as_os_str())],
        )
    };
    let o = record("t1");
    assert!(o.status.success(), "{}", stderr(&o));
    let ids: Vec<PathBuf> = std::fs::read_dir(cache.join("cutrace"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let [id] = &ids[..] else {
        panic!("one id directory: {ids:?}")
    };
    let lib = id.join("libcutrace_inject.so");
    let unpacked = std::fs::read(&lib).unwrap();
    assert!(unpacked.starts_with(b"\x7fELF"));
    // Links planted at the library's name and at every name it was once written under.
    let victim = d.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::remove_file(&lib).unwrap();
    std::os::unix::fs::symlink(&victim, &lib).unwrap();
    for pid in 1..64u32 {
        let _ =
            std::os::unix::fs::symlink(&victim, id.join(format!(".libcutrace_inject.so.{pid}")));
    }
    let o = record("t2");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&lib).unwrap().is_file());
    assert_eq!(std::fs::read(&lib).unwrap(), unpacked);
    // A cache directory others can write is refused, with the fix; nothing is written there.
    std::fs::set_permissions(id, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::remove_file(&lib).unwrap();
    let o = record("t3");
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("can be written by others"),
        "{}",
        stderr(&o)
    );
    assert!(!lib.exists());
    assert!(!d.path("t3").exists());
}
