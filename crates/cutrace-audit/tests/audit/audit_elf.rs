//! The audit on real ELF files built with `cc` at test time: one importing Event and Metric API
//! functions, one clean, one "bundled libcupti".

use std::path::{Path, PathBuf};
use std::process::Command;

use cutrace_audit::{audit, Removal};
use cutrace_testkit::loud;

/// A temporary directory for one test, removed on drop.
fn tmpdir(name: &str) -> cutrace_testkit::Dir {
    cutrace_testkit::Dir::new(&format!("audit-{name}"))
}

/// Build a shared object from C source; None (and a loud message) when there is no `cc`.
fn cc_shared(dir: &Path, name: &str, src: &str, extra: &[&str]) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write source");
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&c)
        .args(extra)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc failed ({s}) building {name}"),
        Err(e) => {
            loud!("SKIPPED: no C compiler `cc` to build test ELF files ({e}); install gcc to run this test");
            None
        }
    }
}

const USES_LEGACY: &str = r#"
extern int cuptiEventGroupCreate(void *ctx, void **group, unsigned flags);
extern int cuptiMetricGetIdFromName(int dev, const char *name, unsigned *id);
int legacy(void) { void *g; unsigned id; return cuptiEventGroupCreate(0, &g, 0) + cuptiMetricGetIdFromName(0, "ipc", &id); }
"#;
const CLEAN: &str = r#"
extern int cuptiActivityEnable(int kind);
int clean(void) { return cuptiActivityEnable(10); }
"#;
const FAKE_CUPTI: &str = r#"
int cuptiGetVersion(unsigned *v) { *v = 130001; return 0; }
"#;

#[test]
fn reports_exactly_the_legacy_importer_with_exit_1() {
    let dir = tmpdir("legacy");
    let Some(legacy) = cc_shared(
        &dir,
        "liblegacy.so",
        USES_LEGACY,
        &["-Wl,--unresolved-symbols=ignore-all"],
    ) else {
        return;
    };
    let clean = cc_shared(
        &dir,
        "libclean.so",
        CLEAN,
        &["-Wl,--unresolved-symbols=ignore-all"],
    )
    .expect("cc worked once");
    // Noise the walk must skip: a text file, a symlink loop, a link to an already-seen file.
    std::fs::write(
        dir.join("README.txt"),
        "not an ELF file, long enough to be read past the magic check......",
    )
    .expect("write");
    std::os::unix::fs::symlink(&dir, dir.join("loop")).expect("symlink");
    std::os::unix::fs::symlink(&legacy, dir.join("liblegacy-link.so")).expect("symlink");

    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    assert_eq!(r.files.len(), 1, "{r:#?}");
    let f = &r.files[0];
    assert_eq!(Path::new(&f.path), legacy);
    let apis: Vec<(&str, Vec<&str>)> = f
        .apis
        .iter()
        .map(|a| (a.api, a.symbols.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        apis,
        vec![
            ("Event API", vec!["cuptiEventGroupCreate"]),
            ("Metric API", vec!["cuptiMetricGetIdFromName"])
        ]
    );
    assert!(f.apis.iter().all(|a| a.removal == Removal::Dropped));
    assert!(f.apis[0].replacement.contains("Range Profiling"));
    assert!(r.dropped_found);
    assert_eq!(r.exit_status, 1);
    assert_eq!(
        r.elf_files, 2,
        "the link and the loop must not be counted again: {r:#?}"
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);

    // The clean library alone: nothing found, exit 0.
    let r = audit(&[clean]).expect("audit");
    assert!(r.files.is_empty(), "{r:#?}");
    assert_eq!(r.exit_status, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn finds_a_bundled_libcupti_with_its_soname() {
    let dir = tmpdir("bundled");
    let Some(lib) = cc_shared(
        &dir,
        "libcupti.so.12",
        FAKE_CUPTI,
        &["-Wl,-soname,libcupti.so.12"],
    ) else {
        return;
    };
    let r = audit(std::slice::from_ref(&dir.0)).expect("audit");
    assert_eq!(r.files.len(), 1, "{r:#?}");
    let copy = r.files[0].cupti_copy.as_ref().expect("a CUPTI copy");
    assert_eq!(Path::new(&r.files[0].path), lib);
    assert_eq!(copy.soname.as_deref(), Some("libcupti.so.12"));
    assert_eq!(copy.cuda_major, Some(12));
    assert_eq!(copy.how, "bundled libcupti");
    // A bundled copy is worth knowing about, but it is not a dropped-API caller.
    assert_eq!(r.exit_status, 0);

    // The same file under another name is still libcupti: its SONAME says so.
    let other = dir.join("libtool_with_cupti.so");
    std::fs::copy(&lib, &other).expect("copy");
    std::fs::remove_file(&lib).expect("rm");
    let r = audit(&[other]).expect("audit");
    let copy = r.files[0].cupti_copy.as_ref().expect("a CUPTI copy");
    assert_eq!(copy.how, "bundled libcupti");
    assert_eq!(copy.cuda_major, Some(12));
    // The same code without libcupti's SONAME, under another name: a statically linked CUPTI.
    let stat = cc_shared(&dir, "libtool_with_cupti2.so", FAKE_CUPTI, &[]).expect("cc worked once");
    let r = audit(&[stat]).expect("audit");
    let copy = r.files[0].cupti_copy.as_ref().expect("a CUPTI copy");
    assert!(copy.how.contains("statically linked"), "{}", copy.how);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_path_is_an_error() {
    let err = audit(&[PathBuf::from("/nonexistent/cutrace-audit")]).expect_err("must fail");
    assert!(err.to_string().contains("/nonexistent/cutrace-audit"));
}

#[test]
fn symbol_lists_are_the_headers() {
    use cutrace_audit::symbols::*;
    assert!(EVENT_API.contains(&"cuptiEventGroupCreate"));
    assert!(METRIC_API.contains(&"cuptiMetricGetIdFromName"));
    assert_eq!(
        PC_SAMPLING_ACTIVITY_API,
        &["cuptiActivityConfigurePCSampling"]
    );
    assert!(PROFILING_API.contains(&"cuptiProfilerBeginSession"));
    // Range Profiling still needs these; flagging them would be a false alarm.
    assert!(!PROFILING_API.contains(&"cuptiProfilerInitialize"));
}
