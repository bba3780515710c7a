//! The `cutrace` binary on seeded hostile inputs: damaged ELF files and `ar` archives for
//! `audit`, doctor roots with FIFOs, link loops, huge files and non-UTF-8 names for `doctor`.
//! Each run is a child with a deadline and a cap on its address space: it must exit with one of
//! its documented statuses (no panic, no signal, no hang). `CUTRACE_FUZZ_CASES` and
//! `CUTRACE_FUZZ_SEED` widen or move the run; a failure names its seed and arguments.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cutrace_testkit::fuzz_inputs;

/// Address space a run may use (KiB): far above what reading a few KiB needs, far below what
/// reading a "huge" size field or a sparse multi-GiB file whole would take.
const ADDRESS_SPACE_KIB: u64 = 4 << 20;
const DEADLINE: Duration = Duration::from_secs(20);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn audit_and_doctor_survive_hostile_inputs() {
    let cases = env_u64("CUTRACE_FUZZ_CASES", 60);
    let base = env_u64("CUTRACE_FUZZ_SEED", 0x5eed);
    let dir = cutrace_testkit::Dir::new("fuzz-cli");
    for case in 0..cases {
        let seed = base.wrapping_add(case);
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).expect("mkdir");
        let mut rng = fastrand::Rng::with_seed(seed);
        let args = fuzz_inputs::generate(&mut rng, &dir.0).expect("write the input");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_cutrace"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cutrace");
        let t = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if t.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("seed {seed:#x}: cutrace {args:?} did not finish within {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // audit: 0, 1, 3; doctor: 0, 1, 2, 3. 101 is a panic; no code is a signal.
        assert!(
            matches!(status.code(), Some(0..=3)),
            "seed {seed:#x}: cutrace {args:?}: {status}"
        );
    }
}
