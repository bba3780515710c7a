//! The filesystem root every check reads through: `/` on a real machine, a fixture tree in tests
//! (so every failure mode has a fixture tree under tests/fixtures). Nothing in the checks touches an absolute path directly.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A filesystem root. Paths given to it are written as absolute (`/proc/driver/nvidia/params`)
/// and resolved beneath the root, so evidence can name the file the way an admin would type it.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
    /// Files that were not read because they are not regular files (a FIFO would block the
    /// doctor for ever, a device could do anything): (path as written, what it is).
    not_read: Arc<Mutex<Vec<(String, String)>>>,
}

/// Files under /proc report a size of 0; never read more than this from one file (4 MiB).
pub const MAX_READ: u64 = 4 << 20;

impl Root {
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root {
            base: base.into(),
            not_read: Arc::default(),
        }
    }

    /// The machine itself.
    pub fn system() -> Self {
        Root::new("/")
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// `abs` ("/proc/x") resolved under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }

    /// The text of a file, or `None` when it is absent or unreadable (both are findings the
    /// caller reports as "(absent)" evidence, never errors).
    pub fn read(&self, abs: &str) -> Option<String> {
        self.read_bytes(abs)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    pub fn read_bytes(&self, abs: &str) -> Option<Vec<u8>> {
        self.try_read_bytes(abs).ok()
    }

    /// The first `cap` bytes of a file (never more than [`MAX_READ`]), as text; `None` as
    /// [`Root::read`].
    pub fn read_at_most(&self, abs: &str, cap: u64) -> Option<String> {
        self.read_bytes_at_most(abs, cap)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The first `cap` bytes of a file (never more than [`MAX_READ`]); `None` as
    /// [`Root::read_bytes`].
    pub fn read_bytes_at_most(&self, abs: &str, cap: u64) -> Option<Vec<u8>> {
        self.try_read_bytes_at_most(abs, cap).ok()
    }

    /// The bytes of a file (at most 4 MiB), or why not. Opened with O_NONBLOCK, so that a FIFO
    /// or a device in its place cannot block, then checked with fstat: only a regular file is
    /// read; anything else is refused and remembered ([`Root::not_read`]).
    pub fn try_read_bytes(&self, abs: &str) -> io::Result<Vec<u8>> {
        self.try_read_bytes_at_most(abs, MAX_READ)
    }

    /// [`Root::try_read_bytes`], reading at most `cap` bytes (and never more than [`MAX_READ`]).
    pub fn try_read_bytes_at_most(&self, abs: &str, cap: u64) -> io::Result<Vec<u8>> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(self.path(abs))?;
        let kind = f.metadata()?.file_type();
        if !kind.is_file() {
            let what = describe(kind);
            if let Ok(mut v) = self.not_read.lock() {
                if !v.iter().any(|(p, _)| p == abs) {
                    v.push((abs.to_string(), what.to_string()));
                }
            }
            return Err(io::Error::other(format!("{what}, not read")));
        }
        let mut buf = Vec::new();
        f.take(cap.min(MAX_READ)).read_to_end(&mut buf)?;
        Ok(buf)
    }

    /// The files met that were not regular files and so were not read, in the order met:
    /// (path under the root as written, what it is).
    pub fn not_read(&self) -> Vec<(String, String)> {
        self.not_read.lock().map(|v| v.clone()).unwrap_or_default()
    }

    pub fn exists(&self, abs: &str) -> bool {
        // symlink_metadata: a dangling link (e.g. /proc/self in a fixture) still "exists".
        fs::symlink_metadata(self.path(abs)).is_ok()
    }

    /// Names of the entries of a directory, sorted; empty when it is absent.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.path(abs)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    pub fn metadata(&self, abs: &str) -> io::Result<fs::Metadata> {
        fs::metadata(self.path(abs))
    }
}

/// What a file that is not a regular file is, in words.
fn describe(kind: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}
