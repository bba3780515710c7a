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

/// The shapes that once made `audit --no-strings` call a caller of the Event API clean
/// (`elf_edit::unparsable_shapes`: no section headers or `.dynsym` typed SHT_NULL, with a DT_HASH
/// whose `nchain` is anything from 0 to far past the table, or a DT_SYMENT other than 24), seeded
/// over the other symbols around the import. Undamaged further, each is never clean: the import
/// is found (exit 1) or the file is named as not read (exit 3). Damaged further by the mutations
/// of the fuzz above, each still gives a report in time and in bounded memory.
#[test]
fn unreadable_dynamic_symbol_shapes_are_never_clean() {
    use crate::elf_edit;
    let cases = env_u64("CUTRACE_FUZZ_CASES", 300) / 3;
    let base = env_u64("CUTRACE_FUZZ_SEED", 0x00c0_ffee) ^ 0x5bad_d15e;
    let names = [
        "train",
        "cudaMalloc",
        "cuptiGetVersion",
        "cuptiActivityEnable",
    ];
    let dir = cutrace_testkit::Dir::new("audit-fuzz-shapes");
    let p = dir.path("libtrainer.so");
    for case in 0..cases {
        let seed = base.wrapping_add(case);
        let mut rng = fastrand::Rng::with_seed(seed);
        let others: Vec<&str> = (0..rng.usize(0..6))
            .map(|_| names[rng.usize(0..names.len())])
            .collect();
        let good = elf_edit::legacy_caller(&others);
        let symbols = 2 + others.len() as u32;
        let nchain = match rng.u8(0..3) {
            0 => 0,
            1 => rng.u32(0..=symbols),
            _ => rng.u32(symbols..),
        };
        let syment = loop {
            let v = rng.u64(0..64);
            if v != 24 {
                break v;
            }
        };
        let mut shapes = elf_edit::unparsable_shapes(&good, &|b: &mut [u8]| {
            elf_edit::mini_hash_nchain(b, nchain);
            true
        });
        let i = rng.usize(0..shapes.len());
        let mut shape = shapes.swap_remove(i);
        // The shapes are named for an nchain of 0 and DT_SYMENTs of 23 and 0: name these.
        shape.name = shape
            .name
            .replace("DT_HASH nchain 0", &format!("DT_HASH nchain {nchain}"));
        if shape.unreadable {
            elf_edit::set_syment(&mut shape.bytes, syment);
            let base = shape.name.split(", DT_SYMENT").next().unwrap_or_default();
            shape.name = format!("{base}, DT_SYMENT {syment}");
        }
        let mutated = rng.u8(0..3) == 0;
        if mutated {
            cutrace_testkit::fuzz_inputs::mutate_elf(&mut rng, &mut shape.bytes);
        }
        std::fs::write(&p, &shape.bytes).expect("write the input");
        let opts = AuditOptions {
            strings: rng.bool(),
            ..Default::default()
        };
        let strings = opts.strings;
        let path = p.clone();
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            let r = audit_with(&[path], &opts, &RealFs, &mut |_| {});
            let _ = tx.send(r);
        });
        let what = format!(
            "seed {seed:#x}: {} (strings {strings}, mutated {mutated})",
            shape.name
        );
        let r = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => panic!("{what}: {e}"),
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = worker.join();
                panic!("{what}: the audit panicked");
            }
        };
        assert!([0, 1, 3].contains(&r.exit_status), "{what}: {r:?}");
        if !mutated {
            let want = if shape.unreadable { 3 } else { 1 };
            let got = if strings && shape.unreadable {
                // The name is in the bytes: found there, and the file still named as not read.
                assert_eq!(r.errors.len(), 1, "{what}: {}", r.render_text());
                3
            } else {
                r.exit_status
            };
            assert_eq!(got, want, "{what}: {}", r.render_text());
        }
    }
    let peak = peak_rss_kib();
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
}
