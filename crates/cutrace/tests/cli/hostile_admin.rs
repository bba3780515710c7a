//! `cutrace doctor --root` and `cutrace audit`, which admins run as root, on roots and files made
//! hostile: each run is a child with a deadline and a cap on its address space, and must finish
//! with its documented status and say what it left out. Each test is a defect that aborted,
//! hung for minutes, or called a caller of a dropped API clean.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The damaged ELF shapes of the audit's own tests, so that both test the same bytes.
#[allow(dead_code)]
#[path = "../../../cutrace-audit/tests/audit/elf_edit.rs"]
mod elf_edit;

/// Address space a run may use (KiB): far above what the bounded reads need, far below what
/// holding the inputs below whole would take.
const ADDRESS_SPACE_KIB: u64 = 1 << 20;
const DEADLINE: Duration = Duration::from_secs(30);

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// `cutrace ARGS…` under the address-space cap, killed past the deadline (which fails the test).
fn cutrace_capped(args: &[&str]) -> Ran {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {ADDRESS_SPACE_KIB}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_cutrace"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cutrace");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cutrace {args:?} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        took: t.elapsed(),
    }
}

fn put(root: &Path, abs: &str, bytes: &[u8]) {
    let p = root.join(abs.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    std::fs::write(p, bytes).expect("write");
}

/// `doctor --root R -v`: one of its verdicts (0, 1, 2), never a signal or a panic.
fn doctor(root: &Path) -> Ran {
    let r = cutrace_capped(&["doctor", "--root", &root.to_string_lossy(), "--verbose"]);
    assert!(
        matches!(r.code, Some(0..=2)),
        "doctor exit {:?} after {:?}\n{}\n{}",
        r.code,
        r.took,
        r.stdout,
        r.stderr
    );
    r
}

/// Finding: 100 fake `R/proc/PID/cmdline` linked to one 1.9 MB file of `a\0` made the doctor
/// abort at 3.8 GB after 7.8 s. Now it finishes under a 1 GiB address space, quoting a cut
/// command line.
#[test]
fn doctor_on_100_huge_command_lines_is_bounded() {
    let d = cutrace_testkit::Dir::new("hostile-admin-cmdline");
    let mut big = b"nv-hostengine\0".to_vec();
    while big.len() < 1_900_000 {
        big.extend_from_slice(b"a\0");
    }
    put(&d, "/big", &big);
    for pid in 100..200 {
        put(&d, &format!("/proc/{pid}/comm"), b"nv-hostengine\n");
        std::os::unix::fs::symlink("../../big", d.join(format!("proc/{pid}/cmdline")))
            .expect("symlink");
    }
    let r = doctor(&d);
    assert!(r.stdout.contains("nv-hostengine a a a"), "{}", r.stdout);
    assert!(r.stdout.contains("[…]"), "{}", r.stdout);
    // 100 quoted command lines of at most 2 KiB each, not 100 of 1.9 MB.
    assert!(
        r.stdout.len() < 1 << 20,
        "{} bytes of output",
        r.stdout.len()
    );
}

/// Finding: one 1.9 MB file of 246,238 distinct lines in `R/etc/ld.so.conf.d/` kept the doctor
/// busy past 120 s. Now it finishes at once and says that it searched only 1024 directories.
#[test]
fn doctor_on_a_loader_cache_of_246k_lines_is_linear_and_bounded() {
    let d = cutrace_testkit::Dir::new("hostile-admin-ldconf");
    let mut conf = String::new();
    for i in 0..246_238u32 {
        conf.push_str(&format!("/x/{i:06x}\n"));
    }
    put(&d, "/etc/ld.so.conf.d/many.conf", conf.as_bytes());
    let r = doctor(&d);
    assert!(
        r.stdout.contains("more than 1024 directories"),
        "{}",
        r.stdout
    );
}

/// Finding: a sparse 16 GB `R/usr/local/cuda/lib64/libcupti.so.13` (a 64-byte ELF header, 4 KB
/// on disk) took 109 s: the build string was looked for in all of it. Now 4 MiB are read and
/// the evidence says the string is not in them.
#[test]
fn doctor_on_a_sparse_16_gb_libcupti_reads_4_mib() {
    let d = cutrace_testkit::Dir::new("hostile-admin-sparse");
    let mut h = vec![0u8; 64];
    h[..8].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    h[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes());
    put(&d, "/usr/local/cuda/lib64/libcupti.so.13", &h);
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("usr/local/cuda/lib64/libcupti.so.13"))
        .expect("open")
        .set_len(16 << 30)
        .expect("set_len");
    let r = doctor(&d);
    assert!(
        r.stdout.contains("no nvcc build string in the first")
            && r.stdout.contains("at most 4 MiB of a file"),
        "{}",
        r.stdout
    );
}

/// Finding: `audit --no-strings` exited 0 ("0 could not be read") on libraries calling
/// cuptiEventGroupCreate whose dynamic symbols the section headers do not hold (none, or
/// `.dynsym` typed SHT_NULL) and whose dynamic segment has a DT_HASH `nchain` of 0 or a DT_SYMENT
/// of 23 or 0. Now the import is found (exit 1) or the file is an error (exit 3).
#[test]
fn audit_no_strings_never_calls_an_unreadable_caller_clean() {
    let d = cutrace_testkit::Dir::new("hostile-admin-audit");
    let p = d.join("libtrainer.so");
    let shapes = elf_edit::unparsable_shapes(
        &elf_edit::legacy_caller(&["train"]),
        &elf_edit::mini_zero_nchain,
    );
    let mut wrong = Vec::new();
    for shape in shapes {
        std::fs::write(&p, &shape.bytes).expect("write");
        let r = cutrace_capped(&["audit", "--no-strings", &p.to_string_lossy()]);
        let (want, says) = if shape.unreadable {
            (3, "1 could not be read")
        } else {
            (1, "cuptiEventGroupCreate")
        };
        if r.code != Some(want) || !r.stdout.contains(says) {
            wrong.push(format!(
                "{}: exit {:?} (want {want}):\n{}{}",
                shape.name, r.code, r.stdout, r.stderr
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
