//! The audit on hand-built ELF files and archives (no C compiler needed), one test per defect a
//! review found: unreadable files passing silently, statically linked CUPTI and `.a` archives
//! not seen, dlsym lookups not seen, auditwheel's `libcupti-<hash>.so.N` not named a bundled
//! copy, link paths reported instead of real ones, /proc walked into.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cutrace_audit::{
    audit, audit_with, AuditOptions, AuditReport, Evidence, Fs, ReadSeek, RealFs, Removal,
};
use cutrace_testkit::loud;
use cutrace_testkit::mini_elf;
use mini_elf::{ar, MiniElf};

/// A temporary directory for one test, removed on drop.
fn tmpdir(name: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("audit-case-{name}"))
}

fn legacy_caller() -> MiniElf {
    MiniElf::shared()
        .import("cuptiEventGroupCreate")
        .import("cuptiMetricGetIdFromName")
}

/// (api, evidence, symbols) of one file.
fn apis_of(r: &AuditReport, path: &Path) -> Vec<(&'static str, Evidence, Vec<String>)> {
    let f = r
        .files
        .iter()
        .find(|f| Path::new(&f.path) == path)
        .unwrap_or_else(|| panic!("{} not reported: {r:#?}", path.display()));
    f.apis
        .iter()
        .map(|a| (a.api, a.evidence, a.symbols.clone()))
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The real filesystem, except that the paths named fail as a permission error would (as root,
/// `chmod 000` cannot make a file unreadable), or fail after the first bytes (an I/O error in
/// the middle of a file).
struct Failing {
    denied: Vec<PathBuf>,
    eio_after_8: Vec<PathBuf>,
}

/// Reads the first 8 bytes of the inner file, then fails.
struct BreaksAfter8(std::fs::File, u64);

impl Read for BreaksAfter8 {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.1 >= 8 {
            return Err(std::io::Error::from_raw_os_error(libc_eio()));
        }
        let n = buf.len().min((8 - self.1) as usize);
        let got = self.0.read(&mut buf[..n])?;
        self.1 += got as u64;
        Ok(got)
    }
}
impl Seek for BreaksAfter8 {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let p = self.0.seek(pos)?;
        // Any position after a seek counts as read past the start.
        self.1 = self.1.max(p);
        Ok(p)
    }
}

fn libc_eio() -> i32 {
    5 // EIO on Linux
}

impl Fs for Failing {
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadSeek>> {
        if self.denied.iter().any(|d| d == path) {
            return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        }
        if self.eio_after_8.iter().any(|d| d == path) {
            return Ok(Box::new(BreaksAfter8(std::fs::File::open(path)?, 0)));
        }
        RealFs.open(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<std::io::Result<PathBuf>>> {
        if self.denied.iter().any(|d| d == path) {
            return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        }
        RealFs.read_dir(path)
    }
}

/// Defect 1: a file or directory that could not be read passed silently with exit 0.
#[test]
fn unreadable_files_and_directories_are_errors_and_exit_3() {
    let dir = tmpdir("unreadable");
    let secret = MiniElf::shared().write(&dir.join("secret.so"));
    let locked = dir.join("locked");
    legacy_caller().write(&locked.join("hidden.so"));
    let broken = legacy_caller().write(&dir.join("broken.so"));
    let fs = Failing {
        denied: vec![secret.clone(), locked.clone()],
        eio_after_8: vec![broken.clone()],
    };
    let r = audit_with(
        std::slice::from_ref(&dir.0),
        &AuditOptions::default(),
        &fs,
        &mut |_| {},
    )
    .expect("audit");
    let mut errs: Vec<&str> = r.errors.iter().map(|e| e.path.as_str()).collect();
    errs.sort();
    assert_eq!(
        errs,
        [
            broken.to_str().unwrap(),
            locked.to_str().unwrap(),
            secret.to_str().unwrap()
        ],
        "{r:#?}"
    );
    assert!(r.files.is_empty(), "nothing was readable: {r:#?}");
    assert!(r.incomplete);
    assert_eq!(r.exit_status, 3, "an incomplete audit must not pass");
    let text = r.render_text();
    assert!(
        text.contains(&format!(
            "error: {}: cannot read: permission denied",
            secret.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "error: {}: cannot list directory",
            locked.display()
        )),
        "{text}"
    );
    assert!(text.contains("3 could not be read"), "{text}");
    assert!(
        text.contains("INCOMPLETE: 3 files or directories"),
        "{text}"
    );

    // A dropped API found elsewhere still exits 1; the errors are still listed.
    legacy_caller().write(&dir.join("readable.so"));
    let r = audit_with(
        std::slice::from_ref(&dir.0),
        &AuditOptions::default(),
        &fs,
        &mut |_| {},
    )
    .expect("audit");
    assert_eq!((r.exit_status, r.errors.len()), (1, 3), "{r:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 2: a program that statically links CUPTI defines the Event/Metric API rather than
/// importing it, and passed.
#[test]
fn a_statically_linked_cupti_with_the_dropped_api_is_reported() {
    let dir = tmpdir("static");
    let app = MiniElf::executable()
        .define_local("main")
        .define_local("cuptiGetVersion")
        .define_local("cuptiEventGroupCreate")
        .define_local("cuptiMetricGetValue")
        .rodata(b"Cuda compilation tools, release 12.8, V12.8.93\0")
        .write(&dir.join("app"));
    let r = audit(std::slice::from_ref(&app)).expect("audit");
    assert_eq!(
        apis_of(&r, &app),
        [
            (
                "Event API",
                Evidence::Defined,
                strs(&["cuptiEventGroupCreate"])
            ),
            (
                "Metric API",
                Evidence::Defined,
                strs(&["cuptiMetricGetValue"])
            ),
        ]
    );
    let copy = r.files[0].cupti_copy.as_ref().expect("a copy");
    assert_eq!(copy.how, "statically linked CUPTI");
    assert_eq!(
        copy.build.as_deref(),
        Some("Cuda compilation tools, release 12.8, V12.8.93")
    );
    assert_eq!(r.exit_status, 1);
    let text = r.render_text();
    assert!(
        text.contains("present in the CUPTI statically linked here (defines cuptiEventGroupCreate); whether it is called cannot be told from symbols"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 2: `libcupti_static.a` was not reported (only loose `.o` files were), and an archive
/// whose member calls the Event API passed.
#[test]
fn ar_archives_are_read_member_by_member() {
    let dir = tmpdir("archive");
    let cupti_obj = MiniElf::object()
        .export("cuptiGetVersion")
        .export("cuptiEventGroupCreate")
        .export("cuptiEventGroupReadEvent")
        // A call from one member into another is inside the archive.
        .import("cuptiEventGroupCreate")
        .build();
    let other = MiniElf::object().export("helper").build();
    let static_cupti = dir.join("libcupti_static.a");
    std::fs::write(
        &static_cupti,
        ar(&[("cupti_events_implementation.o", cupti_obj), ("x.o", other)]),
    )
    .expect("write");
    let caller = dir.join("libkineto.a");
    std::fs::write(
        &caller,
        ar(&[(
            "CuptiEventApi.o",
            MiniElf::object()
                .export("kineto_start")
                .import("cuptiEventGroupCreate")
                .import("cuptiActivityEnable")
                .build(),
        )]),
    )
    .expect("write");

    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    assert_eq!(r.archives, 2, "{r:#?}");
    let f = r
        .files
        .iter()
        .find(|f| Path::new(&f.path) == static_cupti)
        .expect("libcupti_static.a reported");
    let copy = f.cupti_copy.as_ref().expect("a copy");
    assert_eq!(copy.how, "static CUPTI archive");
    assert!(
        f.apis.is_empty(),
        "CUPTI's own archive defines its API, it does not call it: {f:#?}"
    );
    assert_eq!(f.members, ["cupti_events_implementation.o"]);
    assert_eq!(
        apis_of(&r, &caller),
        [(
            "Event API",
            Evidence::Imported,
            strs(&["cuptiEventGroupCreate"])
        )]
    );
    assert_eq!(r.exit_status, 1);
    let text = r.render_text();
    assert!(text.contains("archive members: CuptiEventApi.o"), "{text}");
    assert!(
        text.contains("(2 ELF, 2 ar archives)") || text.contains("2 ar archives"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 3: `dlsym(h, "cuptiEventGroupCreate")` imports nothing and passed.
#[test]
fn names_in_strings_are_reported_at_lower_confidence() {
    let dir = tmpdir("dlsym");
    let dl = MiniElf::shared()
        .import("dlopen")
        .import("dlsym")
        .rodata(
            b"libcupti.so.12\0cuptiEventGroupCreate\0cuptiMetricGetValue2\0cuptiActivityEnable\0",
        )
        .write(&dir.join("_dl.so"));
    // Names that are also its symbols are not counted again as strings.
    let importer = MiniElf::shared()
        .import("cuptiEventGroupCreate")
        .write(&dir.join("importer.so"));
    // libcupti names its own API everywhere: that is not a caller.
    let cupti = MiniElf::shared()
        .soname("libcupti.so.12")
        .export("cuptiGetVersion")
        .export("cuptiEventGroupCreate")
        .rodata(b"cuptiEventGroupCreate\0cuptiMetricGetValue\0")
        .write(&dir.join("libcupti.so.12"));

    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    assert_eq!(
        apis_of(&r, &dl),
        [
            (
                "Event API",
                Evidence::Strings,
                strs(&["cuptiEventGroupCreate"])
            ),
            (
                "Metric API",
                Evidence::Strings,
                strs(&["cuptiMetricGetValue2"])
            ),
        ]
    );
    assert_eq!(
        apis_of(&r, &importer),
        [(
            "Event API",
            Evidence::Imported,
            strs(&["cuptiEventGroupCreate"])
        )]
    );
    assert!(apis_of(&r, &cupti).is_empty(), "{r:#?}");
    assert_eq!(r.exit_status, 1);
    let text = r.render_text();
    assert!(
        text.contains("named in its strings (dlsym?; lower confidence): cuptiEventGroupCreate"),
        "{text}"
    );
    assert!(
        text.contains("(1 only by name in its strings: dlsym?)"),
        "{text}"
    );

    // --no-strings: headers and symbol tables only.
    let r = audit_with(
        std::slice::from_ref(&dl),
        &AuditOptions {
            strings: false,
            ..Default::default()
        },
        &RealFs,
        &mut |_| {},
    )
    .expect("audit");
    assert!(r.files.is_empty(), "{r:#?}");
    assert!(r
        .render_text()
        .contains("strings not scanned: --no-strings"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 4: auditwheel's copy `libcupti-3a4b5c6d.so.12` was called a statically linked CUPTI
/// of unknown version.
#[test]
fn a_wheel_repaired_libcupti_is_a_bundled_copy_with_its_version() {
    let dir = tmpdir("wheel");
    let lib = MiniElf::shared()
        .soname("libcupti-3a4b5c6d.so.12")
        .export("cuptiGetVersion")
        .export("cuptiEventGroupCreate")
        .write(&dir.join("whl.libs/libcupti-3a4b5c6d.so.12"));
    // The same with a SONAME it kept (some repair tools keep it): the file name tells.
    let kept = MiniElf::shared()
        .export("cuptiGetVersion")
        .write(&dir.join("whl.libs/libcupti-0f1e2d3c.so.11.8"));
    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    for (path, major) in [(&lib, 12), (&kept, 11)] {
        let f = r
            .files
            .iter()
            .find(|f| Path::new(&f.path) == path.as_path())
            .expect("reported");
        let copy = f.cupti_copy.as_ref().expect("a copy");
        assert_eq!(copy.how, "bundled libcupti", "{f:#?}");
        assert_eq!(copy.cuda_major, Some(major), "{f:#?}");
        assert!(f.apis.is_empty(), "a bundled copy is not a caller: {f:#?}");
    }
    assert_eq!(r.exit_status, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 5: a file under a linked directory was reported at the link's path.
#[test]
fn files_under_a_directory_link_are_reported_at_their_real_path() {
    let dir = tmpdir("dirlink");
    let real = legacy_caller().write(&dir.join("z_real/lib/_old.so"));
    // Sorted first, so the walk reaches the file through the link.
    std::os::unix::fs::symlink(dir.join("z_real"), dir.join("a_link")).expect("symlink");
    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    assert_eq!(r.files.len(), 1, "{r:#?}");
    assert_eq!(Path::new(&r.files[0].path), real);
    // Given through the link, too.
    let r = audit(&[dir.join("a_link")]).expect("audit");
    assert_eq!(Path::new(&r.files[0].path), real);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 5: `cutrace audit /` went into /proc. /proc, /sys and /dev are skipped (and said to
/// be) unless given as a PATH.
#[test]
fn proc_sys_and_dev_are_not_entered() {
    let dir = tmpdir("pseudo");
    let mut linked = Vec::new();
    for p in ["/proc", "/sys", "/dev"] {
        if Path::new(p).is_dir() {
            std::os::unix::fs::symlink(p, dir.join(&p[1..])).expect("symlink");
            linked.push(p);
        } else {
            loud!("SKIPPED part: no {p} on this machine");
        }
    }
    legacy_caller().write(&dir.join("lib.so"));
    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    let mut skipped: Vec<&str> = r.skipped.iter().map(|s| s.path.as_str()).collect();
    skipped.sort();
    linked.sort();
    assert_eq!(skipped, linked, "{:#?}", r.skipped);
    assert_eq!(r.files_scanned, 1, "only lib.so: {r:#?}");
    assert!(r.errors.is_empty(), "{:#?}", r.errors);
    assert!(r
        .render_text()
        .contains("skipped: /proc (proc filesystem; give it as a PATH"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--one-file-system` does not enter a directory on another filesystem.
#[test]
fn one_file_system_stays_on_each_paths_filesystem() {
    let dir = tmpdir("xdev");
    let here = std::fs::metadata(&dir).expect("stat").dev();
    let Some(other) = ["/dev/shm", "/run", "/boot", "/"]
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir() && m.dev() != here))
    else {
        loud!(
            "SKIPPED: no directory on another filesystem than {}",
            dir.display()
        );
        return;
    };
    std::os::unix::fs::symlink(other, dir.join("elsewhere")).expect("symlink");
    legacy_caller().write(&dir.join("lib.so"));
    let r = audit_with(
        std::slice::from_ref(&dir.0),
        &AuditOptions {
            one_file_system: true,
            ..Default::default()
        },
        &RealFs,
        &mut |_| {},
    )
    .expect("audit");
    assert_eq!(r.files_scanned, 1, "{r:#?}");
    assert_eq!(r.skipped.len(), 1, "{:#?}", r.skipped);
    assert!(r.skipped[0].reason.contains("--one-file-system"));
    assert_eq!(
        Path::new(&r.skipped[0].path),
        Path::new(other).canonicalize().unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn progress_is_called_per_file() {
    let dir = tmpdir("progress");
    for i in 0..3 {
        MiniElf::shared().write(&dir.join(format!("l{i}.so")));
    }
    let mut seen = Vec::new();
    audit_with(
        std::slice::from_ref(&dir.0),
        &AuditOptions::default(),
        &RealFs,
        &mut |p| seen.push((p.files_scanned, p.elf_files)),
    )
    .expect("audit");
    assert_eq!(seen, [(1, 1), (2, 2), (3, 3)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn removal_of_defined_findings_is_dropped() {
    // The Profiling API is deprecated, not dropped: a static copy with only it exits 0.
    let dir = tmpdir("deprecated");
    let lib = MiniElf::shared()
        .export("cuptiProfilerBeginSession")
        .write(&dir.join("libprof.so"));
    let r = audit(std::slice::from_ref(&lib)).expect("audit");
    let f = &r.files[0];
    assert_eq!(f.apis[0].removal, Removal::Deprecated);
    assert_eq!(f.apis[0].evidence, Evidence::Defined);
    assert_eq!(r.exit_status, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
