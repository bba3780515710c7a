//! `convert`'s table directories against a hostile neighbour: links planted at a table's or a
//! partition's name are replaced, never followed (a forced export once emptied the directory a
//! link pointed to); two exports into one directory never mix, with or without `--force`, in 100
//! racing rounds; and a job's staging directory cannot be planted by another user of a shared
//! sticky directory (run as two unprivileged users when the tests run as root).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cutrace_testkit::{fixture, loud, repo, Dir};

fn convert(args: &[&std::ffi::OsStr]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
    c.arg("convert")
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null());
    c
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A directory holding one file, `keep`, that no export may touch.
fn victim(d: &Dir, name: &str) -> PathBuf {
    let v = d.path(name);
    std::fs::create_dir(&v).unwrap();
    std::fs::write(v.join("keep"), "precious").unwrap();
    std::fs::write(v.join("meta.json"), "precious").unwrap();
    v
}

fn intact(v: &Path) {
    for f in ["keep", "meta.json"] {
        assert_eq!(
            std::fs::read_to_string(v.join(f)).ok().as_deref(),
            Some("precious"),
            "{} was changed or removed through a link",
            v.join(f).display()
        );
    }
}

/// Every table and partition name, as a forced export may replace it.
const NAMES: [&str; 8] = [
    "kernels",
    "meta",
    "api_calls",
    "kernels.csv",
    "kernels.parquet",
    "meta.json",
    "ranges",
    "syncs",
];

#[test]
fn forced_table_exports_replace_planted_links_and_never_follow_them() {
    let trace = fixture("kineto/two_streams.json.gz");
    let job = [
        fixture("kineto/gloo_rank0.json.gz"),
        fixture("kineto/gloo_rank1.json.gz"),
    ];
    for (flag, input) in [
        ("--csv", vec![trace.clone()]),
        ("--parquet", vec![trace.clone()]),
        ("--parquet", job.to_vec()),
    ] {
        let d = Dir::new("hostile-links");
        let v = victim(&d, "victim");
        let out = d.path("out");
        std::fs::create_dir(&out).unwrap();
        for n in NAMES {
            std::os::unix::fs::symlink(&v, out.join(n)).unwrap();
        }
        let mut args: Vec<&std::ffi::OsStr> = input.iter().map(|p| p.as_os_str()).collect();
        args.extend([flag.as_ref(), out.as_os_str(), "--force".as_ref()]);
        let o = convert(&args).output().unwrap();
        assert!(o.status.success(), "{flag} {input:?}: {}", show(&o));
        intact(&v);
        assert_eq!(std::fs::read_dir(&v).unwrap().count(), 2, "{flag}");
        // The links are gone, replaced by the export's own files and directories.
        for n in NAMES {
            let m = std::fs::symlink_metadata(out.join(n));
            assert!(
                m.as_ref().map_or(true, |m| !m.file_type().is_symlink()),
                "{flag}: {n} is still a link"
            );
        }
        assert!(out.join("meta.json").is_file() || out.join("meta").is_dir());
        // Without --force the links are an earlier export's names: refused, nothing written.
        let d2 = Dir::new("hostile-links-noforce");
        let v2 = victim(&d2, "victim");
        let out2 = d2.path("out");
        std::fs::create_dir(&out2).unwrap();
        std::os::unix::fs::symlink(&v2, out2.join("kernels")).unwrap();
        let mut args: Vec<&std::ffi::OsStr> = input.iter().map(|p| p.as_os_str()).collect();
        args.extend([flag.as_ref(), out2.as_os_str()]);
        let o = convert(&args).output().unwrap();
        assert!(!o.status.success(), "{flag}: {}", show(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--force"),
            "{}",
            show(&o)
        );
        intact(&v2);
        assert_eq!(std::fs::read_dir(&out2).unwrap().count(), 1, "{flag}");
    }
}

/// The names in `dir`, sorted, hidden (staging) names included.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The source a table directory's meta.json names.
fn source_of(dir: &Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    m.to_string()
}

#[test]
fn racing_table_exports_into_one_directory_never_mix() {
    // Two traces whose exports differ in their tables and their meta.json.
    let a = fixture("kineto/two_streams.json.gz");
    let b = fixture("kineto/copy_overlap.json.gz");
    let reference = |t: &Path| {
        let d = Dir::new("race-ref");
        let o = convert(&[t.as_os_str(), "--csv".as_ref(), d.0.as_os_str()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        (listing(&d), source_of(&d))
    };
    let (ra, rb) = (reference(&a), reference(&b));
    assert_ne!(ra, rb);
    for round in 0..100 {
        let force = round % 2 == 1;
        let d = Dir::new("race");
        let out = d.path("out");
        let spawn = |t: &Path| {
            let mut args = vec![t.as_os_str(), "--csv".as_ref(), out.as_os_str()];
            if force {
                args.push("--force".as_ref());
            }
            convert(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (pa, pb) = (spawn(&a), spawn(&b));
        let (oa, ob) = (
            pa.wait_with_output().unwrap(),
            pb.wait_with_output().unwrap(),
        );
        let won = [oa.status.success(), ob.status.success()];
        if force {
            assert_eq!(
                won,
                [true, true],
                "round {round}: {}\n{}",
                show(&oa),
                show(&ob)
            );
        } else {
            assert_eq!(
                won.iter().filter(|w| **w).count(),
                1,
                "round {round}: exactly one export may win without --force\n{}\n{}",
                show(&oa),
                show(&ob)
            );
            let lost = if won[0] { &ob } else { &oa };
            assert!(
                String::from_utf8_lossy(&lost.stderr).contains("already holds cutrace tables"),
                "round {round}: {}",
                show(lost)
            );
        }
        // The directory holds one export, whole: its files and its meta.json are one trace's.
        let got = (listing(&out), source_of(&out));
        assert!(
            got == ra || got == rb,
            "round {round} (force {force}): the directory mixes two exports: {:?}",
            got.0
        );
    }
}

/// Runs `c` as `uid` (its primary group the same number), without root's groups.
fn as_user(c: &mut Command, uid: u32) -> &mut Command {
    use std::os::unix::process::CommandExt;
    c.uid(uid).gid(uid)
}

#[test]
fn a_staging_directory_planted_by_another_user_is_never_written_through() {
    // Two users are needed: the one converting and the one planting. As root, the test acts as
    // two unprivileged ones (uids 65534 and 65533, which need no account); otherwise it skips.
    if std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1)
        != 0
    {
        loud!(
            "SKIPPED a_staging_directory_planted_by_another_user: needs root to act as two users"
        );
        return;
    }
    const CONVERTS: u32 = 65534;
    const PLANTS: u32 = 65533;
    let d = Dir::new("sticky");
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The job, readable by everyone; the binary must be reachable by the converting user.
    let job = d.path("job");
    std::fs::create_dir(&job).unwrap();
    for r in ["gloo_rank0.json.gz", "gloo_rank1.json.gz"] {
        std::fs::copy(fixture(&format!("kineto/{r}")), job.join(r)).unwrap();
    }
    let bin = d.path("cutrace");
    std::fs::copy(env!("CARGO_BIN_EXE_cutrace"), &bin).unwrap();
    // The victim's own directory, which only the converting user can write.
    let v = victim(&d, "victim");
    std::os::unix::fs::chown(&v, Some(CONVERTS), Some(CONVERTS)).unwrap();
    for f in ["keep", "meta.json"] {
        std::os::unix::fs::chown(v.join(f), Some(CONVERTS), Some(CONVERTS)).unwrap();
    }
    std::fs::set_permissions(&v, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The shared output directory, sticky and writable by all, as /tmp is.
    let out = d.path("shared");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Staging names are random now and cannot be guessed; these plants catch a return to
    // predictable names (on the code that used them, the victim's meta.json was replaced).
    // The planting user's guesses at the staging names of the next processes to start: the
    // name a job export once used (`.cutrace-job.<pid>.tmp`), open to all, holding
    // `out/meta/rank=0` and `rank=1`, links to the victim's directory, in a directory (`meta`) the
    // converting user cannot empty.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    for pid in last + 1..last + 400 {
        let stage = out.join(format!(".cutrace-job.{pid}.tmp"));
        let meta = stage.join("out/meta");
        std::fs::create_dir_all(&meta).unwrap();
        for r in ["rank=0", "rank=1"] {
            std::os::unix::fs::symlink(&v, meta.join(r)).unwrap();
            std::os::unix::fs::lchown(meta.join(r), Some(PLANTS), Some(PLANTS)).unwrap();
        }
        for (p, mode) in [(&stage, 0o777), (&stage.join("out"), 0o777), (&meta, 0o755)] {
            std::os::unix::fs::chown(p, Some(PLANTS), Some(PLANTS)).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    let exports = out.join("tables");
    let o = crate::util::output_of_copied(as_user(
        Command::new(&bin)
            .args(["convert".as_ref(), job.as_os_str(), "--parquet".as_ref()])
            .arg(&exports)
            .stdin(Stdio::null()),
        CONVERTS,
    ));
    assert!(o.status.success(), "{}", show(&o));
    intact(&v);
    assert!(
        exports.join("meta/rank=0/meta.json").is_file(),
        "{}",
        show(&o)
    );
    assert!(exports.join("kernels/rank=1/part.parquet").is_file());
    // Nothing of the export's staging is left beside the tables.
    assert!(
        listing(&exports).iter().all(|n| !n.starts_with('.')),
        "{:?}",
        listing(&exports)
    );
    // And the same export straight into the shared directory, where the guesses are.
    let o = crate::util::output_of_copied(as_user(
        Command::new(&bin)
            .args(["convert".as_ref(), job.as_os_str(), "--parquet".as_ref()])
            .arg(&out)
            .stdin(Stdio::null()),
        CONVERTS,
    ));
    intact(&v);
    assert!(o.status.success(), "{}", show(&o));
    assert!(out.join("meta/rank=0/meta.json").is_file(), "{}", show(&o));
}

#[test]
fn force_removes_only_an_earlier_exports_entries() {
    let trace = fixture("kineto/two_streams.json.gz");
    let d = Dir::new("force-own-files");
    let out = d.path("out");
    std::fs::create_dir(&out).unwrap();
    // A user's own files that happen to have a partition's name are not an earlier export's.
    for n in ["kernels", "ranges", "meta"] {
        std::fs::write(out.join(n), "mine").unwrap();
    }
    let args = [
        trace.as_os_str(),
        "--csv".as_ref(),
        out.as_os_str(),
        "--force".as_ref(),
    ];
    let o = convert(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for n in ["kernels", "ranges", "meta"] {
        assert_eq!(std::fs::read_to_string(out.join(n)).unwrap(), "mine", "{n}");
    }
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("removed"),
        "{}",
        show(&o)
    );
    // A directory where a table goes stops the export before anything moves, with or without
    // --force (into an empty directory, and over an earlier export), and says so.
    std::fs::remove_file(out.join("kernels.csv")).unwrap();
    let fresh = d.path("fresh");
    for dir in [&out, &fresh] {
        std::fs::create_dir_all(dir.join("kernels.csv")).unwrap();
        std::fs::write(dir.join("kernels.csv/keep"), "precious").unwrap();
    }
    for (out, force) in [(&fresh, false), (&fresh, true), (&out, true)] {
        let before = listing(out);
        let mut a = vec![trace.as_os_str(), "--csv".as_ref(), out.as_os_str()];
        if force {
            a.push("--force".as_ref());
        }
        let o = convert(&a).output().unwrap();
        assert!(!o.status.success(), "{}", show(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("kernels.csv is a directory; move it away"),
            "force {force}: {}",
            show(&o)
        );
        assert_eq!(listing(out), before, "force {force}");
        assert_eq!(
            std::fs::read_to_string(out.join("kernels.csv/keep")).unwrap(),
            "precious"
        );
    }
}

#[test]
fn no_staging_directory_where_other_users_could_swap_it() {
    // A directory every user can write, without the sticky bit: anyone could rename cutrace's
    // staging directory there and put a link in its place while the export writes into it.
    let d = Dir::new("open-dir");
    let out = d.path("open");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let job = [
        fixture("kineto/gloo_rank0.json.gz"),
        fixture("kineto/gloo_rank1.json.gz"),
    ];
    let export = || {
        convert(&[
            job[0].as_os_str(),
            job[1].as_os_str(),
            "--parquet".as_ref(),
            out.as_os_str(),
        ])
        .output()
        .unwrap()
    };
    let o = export();
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not sticky"),
        "{}",
        show(&o)
    );
    assert_eq!(listing(&out), Vec::<String>::new());
    // With the sticky bit, as /tmp has, only an entry's owner can rename it: the export runs.
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = export();
    assert!(o.status.success(), "{}", show(&o));
}
