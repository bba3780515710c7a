//! The doctor on hostile roots: a FIFO where a file should be (opening it blocks for ever), a
//! symbolic-link loop, an unreadable driver version file. Each ran into a hang or a false
//! verdict.

use cutrace_doctor::{doctor, Report, Root};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// A copy of a fixture root, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn copy_of(fixture: &str, name: &str) -> Tree {
        let from = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fixture);
        let to = std::env::temp_dir().join(format!(
            "cutrace-doctor-hardening-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&to);
        copy_dir(&from, &to);
        Tree(to)
    }

    fn path(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture") {
        let e = e.expect("entry");
        let t = e.file_type().expect("type");
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_dir(&e.path(), &dest);
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).expect("link"), &dest)
                .expect("symlink");
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

fn mkfifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

/// The doctor on another thread: a hang fails the test instead of wedging it.
fn doctor_within(root: Root, limit: Duration) -> (Report, Root) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = doctor(&root);
        let _ = tx.send((r, root));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the doctor did not finish within {limit:?}"))
}

fn driver_summary(r: &Report) -> String {
    r.check("driver").expect("driver check").summary.clone()
}

/// Defect: `doctor --root R` where a file it reads is a FIFO blocked for ever. It is skipped and
/// named now.
#[test]
fn a_fifo_in_the_root_is_skipped_and_named_not_waited_on() {
    let t = Tree::copy_of("h200-root-open", "fifo");
    for f in [
        "/proc/driver/nvidia/params",
        "/etc/os-release",
        "/proc/self/status",
    ] {
        mkfifo(&t.path(f));
    }
    let (r, root) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let not_read: Vec<String> = root.not_read().into_iter().map(|(p, _)| p).collect();
    for f in [
        "/proc/driver/nvidia/params",
        "/etc/os-release",
        "/proc/self/status",
    ] {
        assert!(
            not_read.iter().any(|p| p == f),
            "{f} not named: {not_read:?}"
        );
    }
    assert!(
        root.not_read()[0].1.contains("FIFO"),
        "{:?}",
        root.not_read()
    );
    // The rest of the tree is still read: the driver is there.
    assert!(
        driver_summary(&r).starts_with("driver "),
        "{}",
        driver_summary(&r)
    );
}

/// A FIFO, or a link loop, in place of /proc/driver/nvidia/version says nothing about the
/// driver: never "no NVIDIA kernel driver is loaded".
#[test]
fn an_unreadable_driver_version_file_is_not_a_missing_driver() {
    let t = Tree::copy_of("h200-root-open", "version");
    let version = t.path("/proc/driver/nvidia/version");
    mkfifo(&version);
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let s = driver_summary(&r);
    assert!(!s.contains("no NVIDIA kernel driver"), "{s}");
    assert!(s.contains("cannot be told"), "{s}");

    std::fs::remove_file(&version).expect("rm");
    std::os::unix::fs::symlink("version", &version).expect("symlink loop");
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let s = driver_summary(&r);
    assert!(!s.contains("no NVIDIA kernel driver"), "{s}");
    assert!(s.contains("cannot be told"), "{s}");

    // Permission denied itself can only be made when not root (root reads a mode-000 file).
    // Who we are: the effective uid on /proc/self/status's Uid line.
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_default();
    if uid != "0" {
        use std::os::unix::fs::PermissionsExt;
        std::fs::remove_file(&version).expect("rm");
        std::fs::write(&version, "NVRM version: x  580.65.06  Release Build\n").expect("write");
        std::fs::set_permissions(&version, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
        assert!(
            driver_summary(&r).contains("permission denied"),
            "{}",
            driver_summary(&r)
        );
    }
}

/// The version file absent is still "no driver".
#[test]
fn an_absent_driver_version_file_is_still_no_driver() {
    let t = Tree::copy_of("h200-root-open", "absent");
    std::fs::remove_file(t.path("/proc/driver/nvidia/version")).expect("rm");
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    assert!(
        driver_summary(&r).contains("no NVIDIA kernel driver"),
        "{}",
        driver_summary(&r)
    );
}

/// The evidence of check `id` as (file, value) pairs.
fn evidence_of<'a>(r: &'a Report, id: &str) -> Vec<(&'a str, &'a str)> {
    r.check(id)
        .unwrap_or_else(|| panic!("no {id} check"))
        .evidence
        .iter()
        .map(|e| (e.file.as_str(), e.value.as_str()))
        .collect()
}

/// Writes `text` at `abs` under the tree, making its directories.
fn put(t: &Tree, abs: &str, text: &[u8]) {
    let p = t.path(abs);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// Defect: `doctor --root R` whose `R/proc/PID/cmdline` files (100 of them, links to one 1.9 MB
/// file of `a\0`) aborted at 3.8 GB after 7.8 s: every argument became a `String`, kept for
/// every process, and quoted whole in the evidence. Now 64 KiB of a command line is read, 32
/// arguments and 2 KiB of it are kept and quoted, and the cut is marked.
#[test]
fn a_huge_command_line_is_read_and_kept_bounded() {
    let t = Tree::copy_of("dcgm-hostengine", "cmdline");
    let mut big = b"/usr/bin/nv-hostengine\0".to_vec();
    while big.len() < 1_900_000 {
        big.extend_from_slice(b"a\0");
    }
    put(&t, "/big-cmdline", &big);
    std::fs::remove_file(t.path("/proc/4242/cmdline")).expect("rm");
    std::os::unix::fs::symlink("../../big-cmdline", t.path("/proc/4242/cmdline")).expect("symlink");
    for pid in 5000..5100 {
        put(&t, &format!("/proc/{pid}/comm"), b"python3\n");
        std::os::unix::fs::symlink("../../big-cmdline", t.path(&format!("/proc/{pid}/cmdline")))
            .expect("symlink");
    }
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let ev = evidence_of(&r, "counter-holders");
    let (_, quoted) = ev
        .iter()
        .find(|(f, _)| *f == "/proc/4242/cmdline")
        .unwrap_or_else(|| panic!("nv-hostengine not found: {ev:?}"));
    assert!(
        quoted.len() <= 2048 + 200,
        "the evidence quotes {} bytes of the command line",
        quoted.len()
    );
    assert!(
        quoted.starts_with("/usr/bin/nv-hostengine a a") && quoted.contains("[…]"),
        "{:?}",
        &quoted[..quoted.len().min(200)]
    );
}

/// Defect: `doctor --root R` with one 1.9 MB file of 246,238 distinct lines in
/// `R/etc/ld.so.conf.d/` was still running after 120 s: the loader's directories were
/// de-duplicated in quadratic time, once per candidate. Now they are read once, in linear time,
/// at most 1024 of them (said in the evidence), and the search still finds a libcupti in one.
#[test]
fn a_loader_cache_file_of_many_lines_is_read_once_and_bounded() {
    let t = Tree::copy_of("h200-root-open", "ldconf");
    let mut conf = String::new();
    for i in 0..246_238 {
        conf.push_str(&format!("/opt/l/{i}\n"));
        if i % 3 == 0 {
            // Repeats are taken once.
            conf.push_str("/opt/l/0\n");
        }
    }
    put(&t, "/etc/ld.so.conf.d/big.conf", conf.as_bytes());
    std::fs::remove_file(t.path("/usr/local/cuda/lib64/libcupti.so.13")).expect("rm");
    put(&t, "/opt/l/700/libcupti.so.13", b"");
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let c = r.check("cupti-library").expect("cupti-library");
    assert!(
        c.summary.starts_with("/opt/l/700/libcupti.so.13"),
        "{}",
        c.summary
    );
    let ev = evidence_of(&r, "cupti-library");
    assert!(
        ev.iter()
            .any(|(f, v)| *f == "/etc/ld.so.conf.d" && v.contains("more than 1024 directories")),
        "{ev:?}"
    );
}

/// A 64-byte ELF64 header (a shared object, x86-64) and nothing else.
fn elf_header() -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..8].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    h[16..18].copy_from_slice(&3u16.to_le_bytes());
    h[18..20].copy_from_slice(&62u16.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes());
    h
}

/// A sparse file of `len` bytes at `p`: `head`, and `tail` at `at`.
fn sparse(p: &Path, head: &[u8], tail: &[u8], at: u64, len: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::File::create(p).expect("create");
    f.write_all(head).expect("write");
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.write_all(tail).expect("write");
    f.set_len(len).expect("set_len");
}

/// Defect: `doctor --root R` with a sparse 16 GB `libcupti.so.13` (a 64-byte ELF header, 4 KB on
/// disk) took 109 s: the nvcc build string was looked for in the whole file, despite the
/// doctor's promise to read at most 4 MiB of a file. The first 4 MiB are read; a build string
/// past them is not looked for, and the evidence says so.
#[test]
fn a_huge_sparse_libcupti_is_read_at_most_4_mib() {
    let t = Tree::copy_of("h200-root-open", "sparse");
    let lib = t.path("/usr/local/cuda/lib64/libcupti.so.13");
    let release = b"Cuda compilation tools, release 13.0, V13.0.88\0";
    sparse(&lib, &elf_header(), release, 16 << 30, (16 << 30) + 4096);
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let ev = evidence_of(&r, "cupti-library");
    assert!(
        ev.iter()
            .any(|(f, v)| *f == "/usr/local/cuda/lib64/libcupti.so.13"
                && v.contains("no nvcc build string in the first")
                && v.contains("at most 4 MiB")),
        "{ev:?}"
    );
    assert!(
        !ev.iter().any(|(_, v)| v.contains("release 13.0")),
        "{ev:?}"
    );
    // Within the first 4 MiB it is found, however long the file.
    sparse(&lib, &elf_header(), release, 3 << 20, 16 << 30);
    let (r, _) = doctor_within(Root::new(&t.0), Duration::from_secs(20));
    let ev = evidence_of(&r, "cupti-library");
    assert!(
        ev.iter()
            .any(|(_, v)| v.starts_with("Cuda compilation tools, release 13.0, V13.0.88")),
        "{ev:?}"
    );
}
