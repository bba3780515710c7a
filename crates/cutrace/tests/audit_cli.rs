//! `cutrace audit` end to end on ELF files built with `cc` at test time.

/// A SKIPPED line written straight to stderr: the test harness captures `eprintln!` of passing
/// tests, and a skip must be seen in CI's log.
macro_rules! loud {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(format!("{}\n", format_args!($($t)*)).as_bytes());
    }};
}

use std::path::PathBuf;
use std::process::Command;

fn build(dir: &std::path::Path, name: &str, src: &str) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write");
    let out = dir.join(name);
    match Command::new("cc")
        .args([
            "-shared",
            "-fPIC",
            "-Wl,--unresolved-symbols=ignore-all",
            "-o",
        ])
        .arg(&out)
        .arg(&c)
        .status()
    {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc failed: {s}"),
        Err(e) => {
            loud!("SKIPPED: no C compiler `cc` ({e}); install gcc to run the audit CLI test");
            None
        }
    }
}

#[test]
fn audit_reports_the_legacy_library_only_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("cutrace-audit-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let Some(legacy) = build(
        &dir,
        "liblegacy.so",
        "extern int cuptiEventGroupCreate(void*, void**, unsigned);\nextern int cuptiMetricGetIdFromName(int, const char*, unsigned*);\nint f(void){void*g;unsigned i;return cuptiEventGroupCreate(0,&g,0)+cuptiMetricGetIdFromName(0,\"ipc\",&i);}\n",
    ) else {
        return;
    };
    build(&dir, "libclean.so", "int g(void){return 0;}\n").expect("cc");
    let out = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .args(["audit", "--format", "json"])
        .arg(&dir)
        .output()
        .expect("run cutrace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let files = v["files"].as_array().expect("files");
    assert_eq!(files.len(), 1, "{stdout}");
    assert_eq!(files[0]["path"], legacy.to_str().expect("utf-8"));
    let syms: Vec<&str> = files[0]["apis"]
        .as_array()
        .expect("apis")
        .iter()
        .flat_map(|a| {
            a["symbols"]
                .as_array()
                .expect("symbols")
                .iter()
                .filter_map(|s| s.as_str())
        })
        .collect();
    assert_eq!(syms, ["cuptiEventGroupCreate", "cuptiMetricGetIdFromName"]);

    let text = Command::new(env!("CARGO_BIN_EXE_cutrace"))
        .arg("audit")
        .arg(&dir)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Event API (cupti_events.h) DROPPED in CUDA 13.0: cuptiEventGroupCreate"),
        "{text}"
    );
    assert!(text.contains("use instead: Range Profiling API"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
