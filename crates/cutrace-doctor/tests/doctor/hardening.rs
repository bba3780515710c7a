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
