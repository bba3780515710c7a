//! Without a usable CUPTI the injection must leave its host alone: one stderr line naming the
//! cause and the fix, a return value of 1, no panic. Runs anywhere (no GPU needed).

use cutrace_settings::var;
use std::process::Command;

#[test]
fn missing_cupti_means_one_line_and_untraced() {
    if std::env::var("CUTRACE_INJECT_CHILD").is_ok() {
        // Child: behave like the CUDA driver calling the injection.
        assert_eq!(cutrace_inject::InitializeInjection(), 1);
        // A second call (the driver may re-initialize) is a no-op.
        assert_eq!(cutrace_inject::InitializeInjection(), 1);
        println!("HOST PROGRAM OUTPUT");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "missing_cupti_means_one_line_and_untraced",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CUTRACE_INJECT_CHILD", "1")
        .env(var::CUPTI_LIB, "/nonexistent/libcupti.so.13")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(stdout.contains("HOST PROGRAM OUTPUT"), "{stdout}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cutrace:"))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one cutrace line, got: {stderr}");
    assert!(lines[0].contains("runs untraced"), "{}", lines[0]);
    assert!(lines[0].contains("Fix:"), "{}", lines[0]);
    assert!(
        lines[0].contains("/nonexistent/libcupti.so.13"),
        "{}",
        lines[0]
    );
}
