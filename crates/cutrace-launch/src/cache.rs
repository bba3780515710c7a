//! The one way cutrace unpacks a file it carries (the injection library built into a release
//! binary) into the user's cache: `BASE/cutrace/ID/NAME`, content-addressed by `ID`.
//!
//! The cache is a directory others may have prepared: a shared `$HOME`, an `XDG_CACHE_HOME` on
//! a scratch filesystem. So each directory cutrace relies on (`BASE/cutrace` and `BASE/cutrace/ID`)
//! must be a real directory (not a link) owned by the user, writable by nobody else; an
//! existing file is used only if it is a regular file of the user's with exactly the carried
//! bytes; and a new one is written under a random name created exclusively (`O_EXCL`, no link
//! followed), mode 0600, then renamed into place, so that a name planted beside it is never
//! written through and a concurrent `record` never loads half a file.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the carried file could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("neither XDG_CACHE_HOME (an absolute path) nor HOME is set")]
    NoBase,
    #[error("cannot tell which user this is (/proc/self cannot be read), so the cache's owner cannot be checked")]
    NoUser,
    #[error(
        "{} {why}, so a file unpacked there could be replaced by someone else; make it a \
         directory of your own that only you can write (chmod 700), or set XDG_CACHE_HOME to one",
        .dir.display()
    )]
    Unsafe { dir: PathBuf, why: String },
    #[error("{what} {}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> CacheError + 'a {
    move |source| CacheError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The cache base the environment names: `$XDG_CACHE_HOME` when it is absolute, else
/// `$HOME/.cache` (the caller reads the environment).
pub fn cache_base(
    xdg_cache_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    xdg_cache_home
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .map(Path::to_path_buf)
        .or_else(|| home.map(|h| Path::new(h).join(".cache")))
}

/// The user cutrace runs as: the owner of its own `/proc/self` (the effective uid).
pub fn euid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Why someone other than `uid` and root could replace what `path` names: the first directory
/// from `/` down to `path` (itself included; links resolved first) that belongs to another user,
/// or that others can write without the sticky bit (in a sticky one, such as `/tmp`, only an
/// entry's owner can rename it). `None` when nobody else can. The rule of `sshd`'s StrictModes.
pub fn others_can_replace(path: &Path, uid: u32) -> Option<(PathBuf, String)> {
    let canon = match std::fs::canonicalize(path) {
        Ok(c) => c,
        Err(e) => return Some((path.to_owned(), format!("cannot be resolved ({e})"))),
    };
    let mut chain: Vec<&Path> = canon.ancestors().collect();
    chain.reverse();
    for p in chain {
        let m = match std::fs::symlink_metadata(p) {
            Ok(m) => m,
            Err(e) => return Some((p.to_owned(), format!("cannot be read ({e})"))),
        };
        if m.uid() != uid && m.uid() != 0 {
            return Some((
                p.to_owned(),
                format!("belongs to uid {}, not to you (uid {uid}) or root", m.uid()),
            ));
        }
        let writable = m.mode() & 0o022 != 0;
        let sticky = m.is_dir() && m.mode() & 0o1000 != 0;
        if writable && !sticky {
            return Some((
                p.to_owned(),
                format!("can be written by others (mode {:o})", m.mode() & 0o7777),
            ));
        }
    }
    None
}

/// `dir`, created with mode 0700 if missing, then checked: a directory, not a link, owned by
/// `uid`, writable by nobody else.
fn private_dir(dir: &Path, uid: u32) -> Result<(), CacheError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("creating", dir)(e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(io_err("reading", dir))?;
    let unsafe_because = |why: String| CacheError::Unsafe {
        dir: dir.to_owned(),
        why,
    };
    if m.file_type().is_symlink() {
        return Err(unsafe_because("is a symbolic link".into()));
    }
    if !m.is_dir() {
        return Err(unsafe_because("is not a directory".into()));
    }
    if m.uid() != uid {
        return Err(unsafe_because(format!(
            "belongs to uid {}, not to you (uid {uid})",
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(unsafe_because(format!(
            "can be written by others (mode {:o})",
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Whether `path` is a regular file of `uid`'s holding exactly `bytes` (opened without
/// following a link, and without blocking on a FIFO planted there; read at most one byte past
/// `bytes`).
fn holds(path: &Path, uid: u32, bytes: &[u8]) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let Ok(m) = f.metadata() else { return false };
    // A library others could change after this check is not used: it is written anew.
    if !m.is_file() || m.uid() != uid || m.mode() & 0o022 != 0 || m.len() != bytes.len() as u64 {
        return false;
    }
    let mut got = Vec::with_capacity(bytes.len());
    f.take(bytes.len() as u64 + 1).read_to_end(&mut got).is_ok() && got == bytes
}

/// Unpacks `bytes` as `base/cutrace/id/name` (module docs) and returns its path.
pub fn unpack(base: &Path, id: &str, name: &str, bytes: &[u8]) -> Result<PathBuf, CacheError> {
    let uid = euid().ok_or(CacheError::NoUser)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)
        .map_err(io_err("creating", base))?;
    // Resolved once: the path checked is the path used (a link on the way, swapped between two
    // resolutions, could otherwise point the checks at one directory and the cache at another).
    let base = std::fs::canonicalize(base).map_err(io_err("resolving", base))?;
    // Every directory above the cache too: one that someone else can rename entries in lets
    // them swap the whole cache after the checks, while the program runs (the library's path
    // is in its environment for its whole life).
    if let Some((dir, why)) = others_can_replace(&base, uid) {
        return Err(CacheError::Unsafe { dir, why });
    }
    let top = base.join("cutrace");
    private_dir(&top, uid)?;
    let dir = top.join(id);
    private_dir(&dir, uid)?;
    let path = dir.join(name);
    if holds(&path, uid, bytes) {
        return Ok(path);
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(&dir)
        .map_err(io_err("creating a file in", &dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io_err("writing", tmp.path()))?;
    tmp.persist(&path)
        .map_err(|e| io_err("writing", &path)(e.error))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("cutrace-cache-")
            .tempdir()
            .unwrap()
    }

    #[test]
    fn unpacks_once_and_reuses_only_the_exact_bytes() {
        let s = scratch();
        let p = unpack(s.path(), "abc", "lib.so", b"ELF-one").unwrap();
        assert_eq!(p, s.path().join("cutrace/abc/lib.so"));
        assert_eq!(std::fs::read(&p).unwrap(), b"ELF-one");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        for d in ["cutrace", "cutrace/abc"] {
            assert_eq!(
                std::fs::metadata(s.path().join(d)).unwrap().mode() & 0o777,
                0o700
            );
        }
        // A copy others could write is replaced, as are other bytes under the same id.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        unpack(s.path(), "abc", "lib.so", b"ELF-one").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        std::fs::write(&p, b"damaged").unwrap();
        unpack(s.path(), "abc", "lib.so", b"ELF-one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"ELF-one");
        // Nothing but the file is left in its directory.
        assert_eq!(
            std::fs::read_dir(s.path().join("cutrace/abc"))
                .unwrap()
                .count(),
            1
        );
    }

    #[test]
    fn a_fifo_at_the_librarys_name_is_replaced_without_waiting_on_it() {
        let s = scratch();
        let dir = s.path().join("base/cutrace/id");
        std::fs::create_dir_all(&dir).unwrap();
        for d in ["base/cutrace", "base/cutrace/id"] {
            std::fs::set_permissions(s.path().join(d), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("lib.so"))
            .status()
            .unwrap();
        assert!(made.success());
        // Opening the FIFO for reading would wait for a writer for ever.
        let (tx, rx) = std::sync::mpsc::channel();
        let base = s.path().join("base");
        std::thread::spawn(move || {
            let _ = tx.send(unpack(&base, "id", "lib.so", b"ELF"));
        });
        let p = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("unpack returned")
            .unwrap();
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert_eq!(std::fs::read(&p).unwrap(), b"ELF");
    }

    #[test]
    fn links_planted_in_the_cache_are_never_written_through() {
        let s = scratch();
        let victim = s.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dir = s.path().join("base/cutrace/id");
        std::fs::create_dir_all(&dir).unwrap();
        for d in ["base/cutrace", "base/cutrace/id"] {
            std::fs::set_permissions(s.path().join(d), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
        // At the final name, and at the temporary name an earlier version used.
        std::os::unix::fs::symlink(&victim, dir.join("lib.so")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(format!(".lib.so.{}", std::process::id())))
            .unwrap();
        let p = unpack(&s.path().join("base"), "id", "lib.so", b"ELF").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert_eq!(std::fs::read(&p).unwrap(), b"ELF");
    }

    #[test]
    fn a_base_others_can_swap_is_refused() {
        let s = scratch();
        let shared = s.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = unpack(&shared.join("base"), "id", "lib.so", b"ELF").unwrap_err();
        assert!(e.to_string().contains("can be written by others"), "{e}");
        assert!(!shared.join("base/cutrace").exists());
        // Sticky, as /tmp is: only an entry's owner can rename it.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        unpack(&shared.join("base"), "id", "lib.so", b"ELF").unwrap();
    }

    #[test]
    fn a_cache_directory_others_can_write_or_a_link_is_refused() {
        let s = scratch();
        let base = s.path().join("base");
        std::fs::create_dir_all(base.join("cutrace/id")).unwrap();
        std::fs::set_permissions(base.join("cutrace"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(
            base.join("cutrace/id"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let e = unpack(&base, "id", "lib.so", b"ELF").unwrap_err();
        assert!(e.to_string().contains("can be written by others"), "{e}");
        assert!(!base.join("cutrace/id/lib.so").exists());
        // A link in place of cutrace's directory, to a directory of someone else's choosing.
        let elsewhere = s.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        let base2 = s.path().join("base2");
        std::fs::create_dir(&base2).unwrap();
        std::os::unix::fs::symlink(&elsewhere, base2.join("cutrace")).unwrap();
        let e = unpack(&base2, "id", "lib.so", b"ELF").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
