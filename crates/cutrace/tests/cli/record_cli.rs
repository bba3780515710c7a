//! `cutrace record` passes the program's stdin, stdout, stderr, exit status and signals through
//! unchanged and hands it the injection environment. No GPU needed: the program here is `sh`.

use cutrace_settings::var;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cutrace_testkit::loud;

/// (a temporary directory, removed on drop; a stand-in injection library in it)
fn setup(name: &str) -> (cutrace_testkit::Dir, PathBuf) {
    let dir = cutrace_testkit::Dir::new(&format!("record-cli-{name}"));
    let lib = dir.join("libcutrace_inject.so");
    // An ELF header and nothing else: cutrace checks the magic; `sh` never loads CUDA.
    std::fs::write(&lib, b"\x7fELF, not really a library").unwrap();
    (dir, lib)
}

fn record(dir: &Path, lib: &Path, script: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
    c.env(var::INJECT_LIB, lib)
        .env_remove("CUDA_INJECTION64_PATH")
        .args(["record", "-o"])
        .arg(dir.join("trace"))
        .args(["--", "sh", "-c", script]);
    c
}

#[test]
fn io_and_exit_status_pass_through() {
    let (dir, lib) = setup("io");
    let mut child = record(&dir, &lib, "echo out; echo err >&2; cat; exit 7")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"in\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\nin\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("err\n"), "{err}");
    assert!(err.contains("cutrace: recording into"), "{err}");
}

#[test]
fn program_gets_absolute_injection_env() {
    let (dir, lib) = setup("env");
    let out = record(
        &dir,
        &lib,
        "echo \"$CUDA_INJECTION64_PATH|$CUTRACE_OUTPUT_DIR|$CUTRACE_KINDS|$CUTRACE_BUFFER_BYTES\"",
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = s.trim().split('|').collect();
    assert_eq!(PathBuf::from(f[0]), std::fs::canonicalize(&lib).unwrap());
    assert!(f[1].starts_with('/') && f[1].ends_with("trace"), "{s}");
    assert_eq!(
        f[2],
        "kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead"
    );
    assert_eq!(f[3], (8u64 << 20).to_string());
    assert!(dir.join("trace").is_dir());
}

/// The injection library goes first in LD_PRELOAD (absolute), the program's own entries stay
/// after it; `--no-preload` leaves LD_PRELOAD as it was.
#[test]
fn program_gets_the_injection_library_first_in_ld_preload() {
    let (dir, lib) = setup("preload");
    let lib_abs = std::fs::canonicalize(&lib).unwrap();
    let show = "echo \"[$LD_PRELOAD]\"";
    for (existing, no_preload, want) in [
        (None, false, format!("[{}]", lib_abs.display())),
        (
            Some("libc.so.6 libm.so.6"),
            false,
            format!("[{}:libc.so.6:libm.so.6]", lib_abs.display()),
        ),
        (None, true, "[]".to_string()),
        (Some("libc.so.6"), true, "[libc.so.6]".to_string()),
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        c.env(var::INJECT_LIB, &lib)
            .env_remove("CUDA_INJECTION64_PATH")
            .env_remove("LD_PRELOAD")
            .args(["record", "-o"])
            .arg(dir.join("trace"));
        if no_preload {
            c.arg("--no-preload");
        }
        if let Some(e) = existing {
            c.env("LD_PRELOAD", e);
        }
        let out = c.args(["--", "sh", "-c", show]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "LD_PRELOAD={existing:?} --no-preload={no_preload}"
        );
    }
    let help = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["record", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).to_lowercase();
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "--no-preload do not interpose cupti entry points; a profiler started inside the \
             program then fails silently"
        ),
        "{help}"
    );
    for s in [
        "every child process loads the injection library",
        "it needs libgcc_s.so.1",
        "32-bit program, or child in another root or mount namespace, prints one ld.so \
         \"cannot be preloaded\" line: use --no-preload for those",
    ] {
        assert!(words.contains(s), "{s}: {help}");
    }
}

/// `--api` reaches the injection as CUTRACE_API, always set (default `lean`) so a value left in
/// the environment does not choose; an unknown mode is refused; `--help` says what each does.
#[test]
fn api_mode_reaches_the_program_and_is_explained() {
    let (dir, lib) = setup("api");
    for (flag, want) in [
        (None, "lean"),
        (Some("all"), "all"),
        (Some("lean"), "lean"),
        (Some("launches"), "launches"),
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cutrace"));
        c.env(var::INJECT_LIB, &lib)
            .env(var::API, "launches-left-over")
            .env_remove("CUDA_INJECTION64_PATH")
            .args(["record", "-o"])
            .arg(dir.join("trace"));
        if let Some(m) = flag {
            c.args(["--api", m]);
        }
        let out = c
            .args(["--", "sh", "-c", "echo \"[$CUTRACE_API]\""])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("[{want}]")
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, &lib)
        .args(["record", "--api", "few", "--", "true"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lean"));
    let help = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["record", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for s in [
        "In every mode kernels, memcpys and memsets keep their launching call",
        "in `launches` mode synchronization records have no API call",
        "- all: Every API call",
        "- lean: Every call except",
        "cudaGetDevice, cudaGetLastError, cuDevicePrimaryCtxGetState, cuKernelGetName",
        "- launches: Only calls that launch work",
    ] {
        assert!(words.contains(s), "{s}: {help}");
    }
}

#[test]
fn death_by_signal_passes_through() {
    let (dir, lib) = setup("sig");
    let out = record(&dir, &lib, "kill -TERM $$").output().unwrap();
    assert_eq!(out.status.signal(), Some(15));
}

#[test]
fn bad_kind_and_missing_program_are_explained() {
    let (dir, lib) = setup("bad");
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, &lib)
        .args(["record", "--kinds", "kernel,warp", "--", "true"])
        .current_dir(&dir)
        .output()
        .unwrap();
    // cutrace's own failures exit 125, never a status the program could have given.
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown activity kind 'warp'"));
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, &lib)
        .args(["record", "-o"])
        .arg(dir.join("t2"))
        .args(["--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run /nonexistent/program"));
    assert!(
        !dir.join("t2").exists(),
        "a program that cannot start leaves no trace directory"
    );
}

/// Runs `cutrace record ARGS` in `dir`; (status, stderr).
fn record_args(dir: &Path, lib: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, lib)
        .env_remove("CUDA_INJECTION64_PATH")
        .arg("record")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_program_that_cannot_start_is_named_with_the_reason_and_leaves_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, lib) = setup("cannot-start");
    std::fs::write(dir.join("bad.py"), "#!/nonexistent/python9\nprint(1)\n").unwrap();
    std::fs::set_permissions(dir.join("bad.py"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("plain.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(dir.join("plain.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(dir.join("train.py"), "print(1)\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let cases: &[(&str, i32, &str)] = &[
        ("nosuchprog_cutrace_test", 127, "command not found in PATH"),
        ("./sub", 126, "a directory, not a program"),
        ("./plain.sh", 126, "not executable; `chmod +x ./plain.sh`"),
        (
            "./bad.py",
            126,
            "its interpreter /nonexistent/python9 (the #! line) does not exist",
        ),
        (
            "train.py",
            127,
            "run it as ./train.py, or through its interpreter",
        ),
    ];
    for (i, (prog, code, why)) in cases.iter().enumerate() {
        let out = format!("t{i}");
        let (status, err) = record_args(&dir, &lib, &["-o", &out, "--", prog]);
        assert_eq!(status, Some(*code), "{prog}: {err}");
        assert!(err.contains(why), "{prog}: {err}");
        assert!(!err.contains("recording into"), "{prog}: {err}");
        assert!(
            !dir.join(&out).exists(),
            "{prog}: a trace directory was left"
        );
    }
}

#[test]
fn mistyped_options_and_bad_output_directories_are_refused_before_the_program_runs() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, lib) = setup("refuse");
    // A mistyped option is not taken for the program's name.
    let (status, err) = record_args(&dir, &lib, &["--ouput", "r", "--", "touch", "ran"]);
    assert_eq!(status, Some(125), "{err}");
    assert!(
        err.contains("a similar argument exists: '--output'"),
        "{err}"
    );
    // An option of cutrace's after the program's name is the program's.
    let (status, err) = record_args(&dir, &lib, &["-o", "r0", "sh", "-c", "exit 4", "-o"]);
    assert_eq!(status, Some(4), "{err}");
    std::fs::write(dir.join("afile"), "x").unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
    for (out, why) in [
        ("afile", "exists and is not a directory"),
        ("dangling", "exists and is a link to nothing"),
    ] {
        let (status, err) = record_args(&dir, &lib, &["-o", out, "--", "touch", "ran"]);
        assert_eq!(status, Some(125), "{out}: {err}");
        assert!(err.contains(why), "{out}: {err}");
    }
    assert!(!dir.join("ran").exists(), "the program ran after a refusal");
    // A directory parts cannot be created in is found now, not when the program starts CUDA.
    // (root writes anywhere: the check is only observable as another user.)
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = ro.join("probe");
    let root = std::fs::write(&probe, "x").is_ok();
    let _ = std::fs::remove_file(&probe);
    if root {
        loud!("SKIPPED (part): the read-only directory check needs a non-root user");
    } else {
        let (status, err) = record_args(&dir, &lib, &["-o", "ro", "--", "touch", "ran"]);
        assert_eq!(status, Some(125), "{err}");
        assert!(err.contains("cannot create trace parts in"), "{err}");
        assert!(!dir.join("ran").exists());
    }
    // A file that is not a shared library is refused as the injection library.
    std::fs::write(dir.join("fake.so"), "text").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .env(var::INJECT_LIB, dir.join("fake.so"))
        .args(["record", "-o"])
        .arg(dir.join("r1"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a shared library"));
}

#[test]
fn warnings_fit_the_kinds_and_quiet_keeps_only_them() {
    let (dir, lib) = setup("warn");
    let (status, err) = record_args(
        &dir,
        &lib,
        &["--kinds", "kernel, runtime", "-o", "a", "--", "true"],
    );
    assert_eq!(
        status,
        Some(0),
        "spaces after commas are not part of the names: {err}"
    );
    let (_, err) = record_args(&dir, &lib, &["--kinds", "sync", "-o", "b", "--", "true"]);
    assert!(
        !err.contains("orphan"),
        "no kernels, copies or memsets: {err}"
    );
    let (_, err) = record_args(&dir, &lib, &["--kinds", "memcpy", "-o", "c", "--", "true"]);
    assert!(
        err.contains("copies and memsets recorded cannot be joined"),
        "{err}"
    );
    let (_, err) = record_args(
        &dir,
        &lib,
        &[
            "--serialize-kernels",
            "--kinds",
            "runtime",
            "-o",
            "d",
            "--",
            "true",
        ],
    );
    assert!(err.contains("--serialize-kernels has no effect"), "{err}");
    let (_, err) = record_args(
        &dir,
        &lib,
        &[
            "--api", "lean", "--kinds", "kernel", "-o", "e", "--", "true",
        ],
    );
    assert!(err.contains("--api lean has no effect"), "{err}");
    // lean is the default: not asking for it is no mistake, whatever the kinds.
    let (_, err) = record_args(&dir, &lib, &["--kinds", "kernel", "-o", "e2", "--", "true"]);
    assert!(!err.contains("--api"), "{err}");
    let (_, err) = record_args(&dir, &lib, &["-o", "my run", "--", "true"]);
    assert!(
        err.contains("`cutrace report '"),
        "a path with a space is quoted: {err}"
    );
    let (status, err) = record_args(
        &dir,
        &lib,
        &["-q", "--no-preload", "-o", "f", "--", "sh", "-c", "exit 3"],
    );
    assert_eq!(status, Some(3));
    assert!(!err.contains("cutrace"), "--quiet: {err}");
}

#[test]
fn convert_writes_csv_tables_of_a_real_trace() {
    let fixture = cutrace_testkit::fixture("native/nvtx");
    let out = cutrace_testkit::Dir::new("convert");
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("convert")
        .arg(&fixture)
        .arg("--csv")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kernels = std::fs::read_to_string(out.join("kernels.csv")).unwrap();
    assert_eq!(kernels.lines().count(), 1 + 22);
    assert!(kernels
        .lines()
        .next()
        .unwrap()
        .starts_with("device,context,stream"));
    let ranges = std::fs::read_to_string(out.join("ranges.csv")).unwrap();
    assert_eq!(ranges.lines().filter(|l| l.contains(",step,")).count(), 10);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["complete"], true);
    assert_eq!(meta["parts"][0]["cupti_version"], 130001);
}

/// SIGINT and SIGTERM sent to `cutrace record` reach the program's own handlers, and its exit
/// status is the program's: `record` execs the program, so the pid the user signals is its pid.
#[test]
fn sigint_and_sigterm_reach_the_programs_handlers() {
    use std::io::{BufRead, BufReader};
    for sig in ["INT", "TERM"] {
        let (dir, lib) = setup(&format!("handler-{sig}"));
        let mut child = record(
            &dir,
            &lib,
            "trap 'echo caught; exit 42' INT TERM; echo ready; while :; do sleep 0.05; done",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(
            line, "caught\n",
            "SIG{sig}: the program's handler did not run"
        );
        assert_eq!(child.wait().unwrap().code(), Some(42), "SIG{sig}");
    }
}

/// The program's injection settings are exactly record's: counter and sampling settings left in
/// the environment are removed (a plain trace must not become a profile: a PM metric list once
/// passed through), benchmark knobs are passed on as the library reads them, and the library
/// reads back what record meant.
#[test]
fn the_program_gets_records_settings_and_no_others() {
    let (dir, lib) = setup("settings");
    let out = record(&dir, &lib, "env")
        .env(var::PM_METRICS, "sm__cycles_active.avg")
        .env(var::COUNTERS, "sm__ctas_launched.sum")
        .env(var::COUNTERS_REQUIRE, "1")
        .env(var::DISCARD, "1")
        .env(var::FLUSH_PERIOD_MS, " 250")
        .env(var::SUBSCRIBE, "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let env: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| var::INJECTION.contains(k))
        .collect();
    let (s, problems) = cutrace_settings::Settings::from_env(&|k| {
        env.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).into())
    });
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(s.counters, None);
    assert_eq!(s.pm_sampling, None);
    assert!(!s.counter_access.require);
    assert!(!s.discard);
    assert_eq!(s.knobs.flush_period_ms, Some(250));
    assert!(!s.knobs.subscribe);
    assert_eq!(s.kinds, Some(cutrace_settings::default_kinds()));
    assert_eq!(s.api, Some(cutrace_settings::ApiMode::Lean));
    assert_eq!(s.buffer_bytes, Some(8 << 20));
    assert_eq!(
        s.output_dir,
        Some(std::fs::canonicalize(dir.join("trace")).unwrap())
    );
    assert!(s.run_id.is_some());
}

/// `--kinds ""` once recorded every kind (an empty list reads as unset): it is refused. A
/// benchmark knob inherited from the environment is said, not passed on silently.
#[test]
fn no_kinds_is_refused_and_inherited_knobs_are_said() {
    let (dir, lib) = setup("kinds-empty");
    for kinds in ["", " , "] {
        let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
            .env(var::INJECT_LIB, &lib)
            .args(["record", "--kinds", kinds, "-o"])
            .arg(dir.join("trace"))
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{kinds:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--kinds names no activity kind"), "{err}");
    }
    let out = record(&dir, &lib, "true")
        .env(var::FLUSH_PERIOD_MS, "250")
        .env(var::MAX_BUFFERS, "many")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("benchmark settings passed on from the environment")
            && err.contains(&format!("{}=250", var::FLUSH_PERIOD_MS)),
        "{err}"
    );
    // One that does not parse is named, not dropped without a word.
    assert!(
        err.contains(&format!(
            "{}=\"many\" is not a number: not passed on",
            var::MAX_BUFFERS
        )),
        "{err}"
    );
}

/// A run in which no process initialized CUDA says so when the program exits, with
/// `cutrace doctor`'s hint, and removes the empty directory it made; a directory that was there
/// before stays. `true` exits through exit(3), which runs the library's exit handler.
#[test]
fn a_run_that_traced_nothing_says_so_at_exit() {
    let lib = std::env::current_exe()
        .unwrap()
        .with_file_name("libcutrace_inject.so");
    if !lib.is_file() {
        loud!(
            "SKIPPED: {} is missing (`cargo test --workspace` builds it)",
            lib.display()
        );
        return;
    }
    let dir = cutrace_testkit::Dir::new("record-cli-nothing");
    let run = |out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cutrace"))
            .env(var::INJECT_LIB, &lib)
            .env_remove("CUDA_INJECTION64_PATH")
            .args(["record", "-q", "-o"])
            .arg(out)
            .args(["--", "true"])
            .output()
            .unwrap()
    };
    let fresh = dir.join("fresh");
    let o = run(&fresh);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("cutrace: nothing was traced")
            && err.contains(&format!("{} held no part and was removed", fresh.display()))
            && err.contains("`cutrace doctor`"),
        "{err}"
    );
    assert!(
        !fresh.exists(),
        "the empty directory record made is removed"
    );
    // A directory the user made is kept; said once, by the one process record became.
    let mine = dir.join("mine");
    std::fs::create_dir(&mine).unwrap();
    let o = run(&mine);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("nothing was traced").count(), 1, "{err}");
    assert!(err.contains("holds no new part"), "{err}");
    assert!(mine.is_dir());
}
