//! The filesystem root every check reads through: `/` on a real machine, a fixture tree in tests
//! (DESIGN.md decision 9). Nothing in the checks touches an absolute path directly.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A filesystem root. Paths given to it are written as absolute (`/proc/driver/nvidia/params`)
/// and resolved beneath the root, so evidence can name the file the way an admin would type it.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
}

/// Files under /proc report a size of 0; never read more than this from one file.
const MAX_READ: u64 = 4 << 20;

impl Root {
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root { base: base.into() }
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
        use std::io::Read;
        let f = fs::File::open(self.path(abs)).ok()?;
        let mut buf = Vec::new();
        f.take(MAX_READ).read_to_end(&mut buf).ok()?;
        Some(buf)
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
