//! A small, seeded mutation fuzz of the ELF and `ar` readers, in process: every damaged input
//! is audited on a thread with a deadline, and must give a report (no panic, no hang), with the
//! process's peak memory bounded. `CUTRACE_FUZZ_CASES` and `CUTRACE_FUZZ_SEED` widen or move
//! the run; a failure names its seed, which reproduces it.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use cutrace_audit::{audit_with, AuditOptions, RealFs};
use cutrace_testkit::fuzz_inputs;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident memory of this process (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn damaged_elf_files_and_archives_never_panic_hang_or_balloon() {
    let cases = env_u64("CUTRACE_FUZZ_CASES", 300);
    let base = env_u64("CUTRACE_FUZZ_SEED", 0x00c0_ffee);
    let dir = cutrace_testkit::Dir::new("audit-fuzz");
    for case in 0..cases {
        let seed = base.wrapping_add(case);
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).expect("mkdir");
        let mut rng = fastrand::Rng::with_seed(seed);
        let args = if rng.bool() {
            fuzz_inputs::generate_elf(&mut rng, &dir.0)
        } else {
            fuzz_inputs::generate_archive(&mut rng, &dir.0)
        }
        .expect("write the input");
        let opts = AuditOptions {
            strings: !args.iter().any(|a| a == "--no-strings"),
            ..Default::default()
        };
        let path = PathBuf::from(args.last().expect("a path"));
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            let r = audit_with(&[path], &opts, &RealFs, &mut |_| {});
            let _ = tx.send(r.map(|r| r.exit_status));
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(status)) => assert!(
                [0, 1, 3].contains(&status),
                "seed {seed:#x}: exit status {status}"
            ),
            Ok(Err(e)) => panic!("seed {seed:#x}: {e}"),
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("seed {seed:#x}: hung"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = worker.join();
                panic!("seed {seed:#x}: the audit panicked ({args:?})");
            }
        }
    }
    // The inputs are at most a few KiB; reading one never needs more than the chunk buffer and
    // the tables that are really there.
    let peak = peak_rss_kib();
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
}
