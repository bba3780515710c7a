//! Builds the C stand-ins in tests/fake_cupti/ with the system C compiler, once per test binary:
//! a fake libcupti.so.13, a CUPTI tool library linked against it, and a host program. Tests skip
//! themselves, loudly, where no C compiler is found.
#![allow(dead_code)]
use cutrace_testkit::loud;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub struct Programs {
    pub fake_cupti: PathBuf,
    /// The same fake without cuptiActivityEnableRuntimeApi/DriverApi (`-DFAKE_NO_API_FILTER`).
    pub fake_cupti_no_filter: PathBuf,
    /// The fake with the profiler half (`fake_profiler.c`, `fake_pm.c`, `fake_pc.c`): callbacks,
    /// Range Profiler, PM Sampling and PC Sampling.
    pub fake_cupti_profiler: PathBuf,
    pub tool: PathBuf,
    pub host: PathBuf,
}

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cutrace-inject/tests/fake_cupti")
        .join(name)
}

fn cc(args: &[&std::ffi::OsStr]) -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).args(args).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            loud!(
                "SKIPPED: {cc} failed on the C stand-ins: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            false
        }
        Err(e) => {
            loud!("SKIPPED: no C compiler ({cc}: {e}) to build the fake libcupti");
            false
        }
    }
}

fn build_once() -> Option<Programs> {
    // Under cargo's per-target scratch directory, not /tmp: the programs outlive every test of
    // the binary, so nothing would remove them from /tmp. One directory per test binary.
    let exe = std::env::current_exe().ok()?;
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fake-cupti")
        .join(exe.file_stem()?);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("nofilter")).ok()?;
    std::fs::create_dir_all(out.join("profiler")).ok()?;
    let p = Programs {
        fake_cupti: out.join("libcupti.so.13"),
        fake_cupti_no_filter: out.join("nofilter/libcupti.so.13"),
        fake_cupti_profiler: out.join("profiler/libcupti.so.13"),
        tool: out.join("libfaketool.so"),
        host: out.join("host"),
    };
    let rpath = format!("-Wl,-rpath,{}", out.display());
    let ok = cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-O1".as_ref(),
        "-Wl,-soname,libcupti.so.13".as_ref(),
        "-o".as_ref(),
        p.fake_cupti.as_os_str(),
        src("fake_cupti.c").as_os_str(),
    ]) && cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-O1".as_ref(),
        "-Wl,-soname,libcupti.so.13".as_ref(),
        "-o".as_ref(),
        p.fake_cupti_profiler.as_os_str(),
        src("fake_cupti.c").as_os_str(),
        src("fake_profiler.c").as_os_str(),
        src("fake_pm.c").as_os_str(),
        src("fake_pc.c").as_os_str(),
        "-lm".as_ref(),
    ]) && cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-O1".as_ref(),
        "-DFAKE_NO_API_FILTER".as_ref(),
        "-Wl,-soname,libcupti.so.13".as_ref(),
        "-o".as_ref(),
        p.fake_cupti_no_filter.as_os_str(),
        src("fake_cupti.c").as_os_str(),
    ]) && cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-O1".as_ref(),
        "-o".as_ref(),
        p.tool.as_os_str(),
        src("tool.c").as_os_str(),
        p.fake_cupti.as_os_str(),
        rpath.as_ref(),
    ]) && cc(&[
        "-O1".as_ref(),
        "-o".as_ref(),
        p.host.as_os_str(),
        src("host.c").as_os_str(),
        "-ldl".as_ref(),
    ]);
    ok.then_some(p)
}

/// The stand-ins, built on first use; `None` (after a SKIPPED line) without a C compiler.
pub fn programs() -> Option<&'static Programs> {
    // Tests run in parallel threads: build once.
    static BUILT: OnceLock<Option<Programs>> = OnceLock::new();
    let p = BUILT.get_or_init(build_once).as_ref();
    if p.is_none() {
        loud!("SKIPPED: the C stand-ins could not be built (see above)");
    }
    p
}

/// The injection library cargo built beside this test binary (`target/<profile>/deps/`).
pub fn inject_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.with_file_name("libcutrace_inject.so");
    assert!(
        lib.is_file(),
        "{} is missing: cargo builds the cdylib with the tests",
        lib.display()
    );
    lib
}

/// The stderr lines cutrace wrote.
pub fn cutrace_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.starts_with("cutrace:"))
        .map(str::to_owned)
        .collect()
}
