//! How every file cutrace writes comes to be: created exclusively (`O_CREAT|O_EXCL`, and
//! `O_NOFOLLOW`) under a random name beside its destination, with the mode of the trace it came
//! from, and renamed into place only once complete.
//!
//! Traces are opened on shared login nodes, in directories others can write. A predictable
//! temporary name opened with `File::create` follows a link planted there and truncates
//! whatever it points at; an exclusive create of a name nobody can guess does neither, and
//! `rename(2)` replaces a link at the destination instead of writing through it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Permission bits for exports when the input's cannot be read: what `File::create` would
/// give (the umask still applies).
pub const DEFAULT_MODE: u32 = 0o666;

/// The most restrictive permission bits of `paths` (their intersection), never wider than
/// 0666: a trace readable by its owner only gives exports readable by their owner only. Paths
/// that cannot be read are skipped; [`DEFAULT_MODE`] when none can.
pub fn mode_of_inputs<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> u32 {
    paths
        .into_iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.mode() & 0o666)
        .fold(DEFAULT_MODE, |a, m| a & m)
}

/// Directory permission bits that go with file bits `mode`: search permission wherever read
/// permission is given (0600 → 0700, 0644 → 0755).
pub fn dir_mode(mode: u32) -> u32 {
    let m = mode & 0o666;
    m | ((m & 0o444) >> 2)
}

/// A file being written beside `dest` under a random name; [`OutFile::commit`] renames it to
/// `dest`. Dropped without a commit, the temporary file is removed.
#[derive(Debug)]
pub struct OutFile {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<File>,
}

impl OutFile {
    /// Creates the temporary file for `dest` in `dest`'s directory with permission bits `mode`
    /// (the umask applies), narrowed to those of a regular file already at `dest`, so that a
    /// replacement never opens up what it replaces.
    pub fn create(dest: &Path, mode: u32) -> io::Result<OutFile> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export".into());
        let mut mode = mode & 0o666;
        if let Ok(m) = std::fs::symlink_metadata(dest) {
            if m.file_type().is_file() {
                mode &= m.permissions().mode();
            }
        }
        // A clash with an existing name (someone else's file, or a guess) only costs a retry.
        let mut last = None;
        for _ in 0..64 {
            let tmp = dir.join(format!(".{name}.{:016x}.cutrace-tmp", random_u64()));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(OutFile {
                        tmp,
                        dest: dest.to_owned(),
                        file: Some(file),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
    }

    /// The file, for writing.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("an OutFile holds its file until commit")
    }

    /// Where the file goes.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temporary name it has until then.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Flushes the file to disk and renames it to its destination. With `replace`, whatever is
    /// there (a file, or a link: the link is replaced, not followed) is replaced; without, an
    /// existing destination is an `AlreadyExists` error and the temporary file is removed.
    pub fn commit(mut self, replace: bool) -> io::Result<()> {
        if let Some(f) = self.file.take() {
            f.sync_all()?;
        }
        if replace {
            std::fs::rename(&self.tmp, &self.dest)?;
        } else {
            // link(2) fails on an existing destination, links included: no window in which a
            // name planted after a check is replaced. Filesystems without hard links get the
            // check and a rename.
            match std::fs::hard_link(&self.tmp, &self.dest) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&self.tmp);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
                Err(_) => {
                    if std::fs::symlink_metadata(&self.dest).is_ok() {
                        return Err(io::Error::from(io::ErrorKind::AlreadyExists));
                    }
                    std::fs::rename(&self.tmp, &self.dest)?;
                }
            }
        }
        // Committed: nothing left for Drop to remove.
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl io::Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// 64 random bits from the standard library's per-process random hash keys (seeded by the
/// OS), mixed with a counter and the time so that two calls differ: enough that a temporary
/// name cannot be guessed in advance (exclusivity comes from `O_EXCL`, not from this).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A directory of this process's own inside `parent`, for work that is not yet in place: made
/// with one `mkdir(2)` of a new random name, mode 0700, so a name planted there beforehand (a
/// directory, a link) is never taken over and nobody else can put anything inside it. Dropped,
/// it is removed with everything in it; the removal (`std::fs::remove_dir_all`) never follows a
/// link inside it.
#[derive(Debug)]
pub struct StagingDir(Option<tempfile::TempDir>);

impl StagingDir {
    /// A new staging directory in `parent`, named `.cutrace-<what>.<random>.tmp`. Refused in a
    /// directory whose entries other users can rename (one they can write, without the sticky
    /// bit, or below one): they could swap the staging directory for a link while it is used.
    pub fn new(parent: &Path, what: &str) -> io::Result<StagingDir> {
        if let Some((dir, mode)) = others_can_swap(parent) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} can be written by other users and is not sticky (mode {mode:o}): they \
                     could swap what cutrace stages there for a link; write into a directory of \
                     your own, or one with the sticky bit as /tmp has (nothing was written)",
                    dir.display()
                ),
            ));
        }
        let d = tempfile::Builder::new()
            .prefix(&format!(".cutrace-{what}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?;
        Ok(StagingDir(Some(d)))
    }

    pub fn path(&self) -> &Path {
        self.0.as_ref().expect("held until closed").path()
    }

    /// Removes the directory and what it holds, saying why when that fails.
    pub fn close(mut self) -> io::Result<()> {
        self.0.take().map_or(Ok(()), tempfile::TempDir::close)
    }
}

/// `names` (entries of `dir`) as a person reads them: a directory's with a `/`.
pub fn shown_entries(dir: &Path, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| match std::fs::symlink_metadata(dir.join(n)) {
            Ok(m) if m.is_dir() => format!("{n}/"),
            _ => n.clone(),
        })
        .collect()
}

/// The first directory from `/` down to `dir` (links resolved) that users other than its owner
/// and group can write without the sticky bit, and its mode: in it, anyone can rename entries.
pub fn others_can_swap(dir: &Path) -> Option<(PathBuf, u32)> {
    let canon = std::fs::canonicalize(dir).ok()?;
    let mut chain: Vec<&Path> = canon.ancestors().collect();
    chain.reverse();
    chain.into_iter().find_map(|p| {
        let m = std::fs::symlink_metadata(p).ok()?;
        let mode = m.mode() & 0o7777;
        (mode & 0o002 != 0 && mode & 0o1000 == 0).then(|| (p.to_owned(), mode))
    })
}

/// An output directory locked against every other cutrace export into it (`flock(2)` on the
/// directory itself: no lock file is created) for as long as it is held.
#[derive(Debug)]
pub struct DirLock(#[allow(dead_code)] Option<File>);

impl DirLock {
    /// Waits for the lock on `dir`. A filesystem without `flock` (Lustre mounted without
    /// `-o flock`, NFS mounted `nolock`) gives no lock: exports into one directory there are
    /// not kept apart, as with any tool, but everything else holds.
    /// Anyone who can read a directory can lock it, so the wait is bounded ([`LOCK_WAIT`]); a
    /// cutrace export holds the lock only while it puts its tables in place (renames).
    pub fn acquire(dir: &Path) -> io::Result<DirLock> {
        let f = File::open(dir)?;
        let start = std::time::Instant::now();
        loop {
            match f.try_lock() {
                Ok(()) => return Ok(DirLock(Some(f))),
                Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "another process has held a lock on the directory for {} s (another \
                             cutrace export into it, or anyone who can read it); try again, or \
                             choose another directory",
                            LOCK_WAIT.as_secs()
                        ),
                    ))
                }
                Err(std::fs::TryLockError::Error(e)) if no_flock(&e) => return Ok(DirLock(None)),
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
        }
    }
}

/// How long [`DirLock::acquire`] waits for another holder of the lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether `e` says the filesystem has no `flock` (ENOLCK, ENOSYS, EOPNOTSUPP).
fn no_flock(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::ENOLCK | libc::ENOSYS | libc::EOPNOTSUPP)
        )
}

/// What stopped the placement of an export's outputs. Nothing of the export is then left in
/// place, and an earlier export moved aside is put back.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error(
        "{} already holds cutrace tables ({}); pass --force to replace them (the directory \
         then holds this export alone), or choose another directory (nothing was written)",
        .0.display(), .1.join(", ")
    )]
    Exists(PathBuf, Vec<String>),
    #[error(
        "{} is in the way of the export and is not a cutrace export's; move it away (nothing \
         was written)",
        .0.display()
    )]
    InTheWay(PathBuf),
    #[error("{what} {}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn place_io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PlaceError + 'a {
    move |source| PlaceError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The one way an export's outputs are put into their directory (`convert --csv`/`--parquet`,
/// of one trace or of a job). [`Placement::begin`] locks the directory ([`DirLock`]), so that two
/// exports into it run one after the other and never mix, and then looks at what an earlier
/// export left there: without `replace` (`--force`) any of it is an error; with it, each entry
/// is renamed as the link, file or directory it is (nothing is followed) into a [`StagingDir`]
/// inside the directory, which [`Placement::finish`] removes. New outputs go in place by
/// `link(2)` without `replace` (which fails on a name that appeared meanwhile) and `rename(2)`
/// with it. Dropped before `finish`, the placement takes out what it put in place and puts back
/// what it moved aside.
#[derive(Debug)]
pub struct Placement {
    dir: PathBuf,
    replace: bool,
    _lock: DirLock,
    aside: Option<StagingDir>,
    /// The earlier export's entries moved aside: (name, whether it is a directory).
    moved: Vec<(String, bool)>,
    /// Names put in place.
    placed: Vec<String>,
}

impl Placement {
    /// Locks `dir` and clears the way. `earlier` lists the names (one path component each) of
    /// an earlier export's entries in a directory; it is called once the lock is held.
    pub fn begin(
        dir: &Path,
        replace: bool,
        earlier: impl FnOnce(&Path) -> Vec<String>,
    ) -> Result<Placement, PlaceError> {
        let lock = DirLock::acquire(dir).map_err(place_io("locking", dir))?;
        let found = earlier(dir);
        if !found.is_empty() && !replace {
            let shown = shown_entries(dir, &found);
            return Err(PlaceError::Exists(dir.to_owned(), shown));
        }
        let mut p = Placement {
            dir: dir.to_owned(),
            replace,
            _lock: lock,
            aside: None,
            moved: Vec::new(),
            placed: Vec::new(),
        };
        if found.is_empty() {
            return Ok(p);
        }
        let aside =
            StagingDir::new(dir, "earlier").map_err(place_io("creating a directory in", dir))?;
        let to = aside.path().to_owned();
        p.aside = Some(aside);
        for name in found {
            let from = p
                .dir
                .join(one_component(&name).map_err(place_io("removing", dir))?);
            let Ok(m) = std::fs::symlink_metadata(&from) else {
                continue;
            };
            std::fs::rename(&from, to.join(&name)).map_err(place_io("moving aside", &from))?;
            p.moved.push((name, m.is_dir()));
        }
        Ok(p)
    }

    /// Puts the complete file `f` in place (its destination must be in the directory).
    pub fn put_file(&mut self, f: OutFile) -> Result<(), PlaceError> {
        let dest = f.dest().to_owned();
        let name = self.name_in_dir(&dest)?;
        f.commit(self.replace).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => {
                PlaceError::Exists(self.dir.clone(), vec![name.clone()])
            }
            _ => PlaceError::Io {
                what: "writing",
                path: dest,
                source: e,
            },
        })?;
        self.placed.push(name);
        Ok(())
    }

    /// Puts the complete directory `src` (on the directory's filesystem) in place as `name`.
    pub fn put_dir(&mut self, src: &Path, name: &str) -> Result<(), PlaceError> {
        let dest = self
            .dir
            .join(one_component(name).map_err(place_io("writing", src))?);
        // rename(2) of a directory fails on anything at the destination but an empty directory,
        // which it would replace. With `replace`, an earlier export's entries were moved aside:
        // what is still there is someone's own.
        if std::fs::symlink_metadata(&dest).is_ok() {
            return Err(if self.replace {
                PlaceError::InTheWay(dest)
            } else {
                PlaceError::Exists(self.dir.clone(), vec![format!("{name}/")])
            });
        }
        std::fs::rename(src, &dest).map_err(place_io("writing", &dest))?;
        self.placed.push(name.to_owned());
        Ok(())
    }

    /// Removes what an earlier export left and unlocks the directory; returns the names of its
    /// entries that this export did not write anew (directories with a `/`).
    pub fn finish(mut self) -> Result<Vec<String>, PlaceError> {
        let removed = self
            .moved
            .iter()
            .filter(|(n, _)| !self.placed.contains(n))
            .map(|(n, dir)| if *dir { format!("{n}/") } else { n.clone() })
            .collect();
        self.moved.clear();
        self.placed.clear();
        if let Some(aside) = self.aside.take() {
            let path = aside.path().to_owned();
            aside.close().map_err(|source| PlaceError::Io {
                what: "the export is in place, but an earlier export's tables could not be \
                       removed: remove by hand",
                path,
                source,
            })?;
        }
        Ok(removed)
    }

    fn name_in_dir(&self, dest: &Path) -> Result<String, PlaceError> {
        match (dest.parent(), dest.file_name()) {
            (Some(d), Some(n)) if d == self.dir => Ok(n.to_string_lossy().into_owned()),
            _ => Err(PlaceError::Io {
                what: "writing",
                path: dest.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "an export's file must be in its directory",
                ),
            }),
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        // Not finished: undo, best effort (the lock is still held).
        let Some(aside) = &self.aside else {
            for n in &self.placed {
                remove_entry(&self.dir.join(n));
            }
            return;
        };
        for n in &self.placed {
            let _ = std::fs::rename(self.dir.join(n), aside.path().join(format!("new.{n}")));
        }
        for (n, _) in &self.moved {
            let _ = std::fs::rename(aside.path().join(n), self.dir.join(n));
        }
    }
}

/// Removes `p` as the link, file or directory it is; a link is never followed.
fn remove_entry(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// `name` when it is one plain path component: no `/` (a trailing one would make a lookup
/// follow a link), no `.` or `..`.
fn one_component(name: &str) -> io::Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    Ok(name)
}

/// Creates `dir` and any missing parents with permission bits `mode` (the umask applies);
/// existing directories are left as they are.
pub fn create_dir_all(dir: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
}

/// `p` made absolute, with the longest part of it that exists resolved (links followed, `.` and
/// `..` taken out) and the rest appended: two spellings of one file compare equal, whether or
/// not it exists yet.
pub fn resolve(p: &Path) -> PathBuf {
    use std::path::Component;
    let abs = std::env::current_dir()
        .map(|d| d.join(p))
        .unwrap_or_else(|_| p.to_path_buf());
    let parts: Vec<Component> = abs.components().collect();
    for keep in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..keep].iter().collect();
        if let Ok(mut out) = std::fs::canonicalize(&head) {
            for c in &parts[keep..] {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::CurDir => {}
                    c => out.push(c),
                }
            }
            return out;
        }
    }
    abs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A directory of its own under the system's temporary directory, removed when dropped.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(name: &str) -> Scratch {
            let p = std::env::temp_dir().join(format!(
                "cutrace-files-{name}-{}-{:x}",
                std::process::id(),
                random_u64()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn a_link_at_the_destination_is_replaced_not_followed() {
        let s = Scratch::new("link");
        let victim = s.0.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dest = s.0.join("kernels.csv");
        std::os::unix::fs::symlink(&victim, &dest).unwrap();
        let mut f = OutFile::create(&dest, 0o644).unwrap();
        f.file().write_all(b"new").unwrap();
        f.commit(true).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&dest).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
    }

    #[test]
    fn without_replace_an_existing_destination_is_kept_and_nothing_is_left() {
        let s = Scratch::new("keep");
        let dest = s.0.join("out.json");
        std::fs::write(&dest, "old").unwrap();
        let mut f = OutFile::create(&dest, 0o644).unwrap();
        f.file().write_all(b"new").unwrap();
        let e = f.commit(false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 1);
    }

    #[test]
    fn modes_are_narrowed_by_the_input_and_by_what_is_replaced() {
        let s = Scratch::new("mode");
        let dest = s.0.join("a");
        OutFile::create(&dest, 0o600).unwrap().commit(true).unwrap();
        assert_eq!(mode(&dest), 0o600);
        // Replacing a 0600 file with a 0644 export keeps it 0600.
        OutFile::create(&dest, 0o644).unwrap().commit(true).unwrap();
        assert_eq!(mode(&dest), 0o600);
        let input = s.0.join("in");
        std::fs::write(&input, "").unwrap();
        std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(mode_of_inputs([&input, &dest]), 0o600 & 0o640);
        assert_eq!(mode_of_inputs([s.0.join("missing")]), DEFAULT_MODE);
        assert_eq!(dir_mode(0o600), 0o700);
        assert_eq!(dir_mode(0o644), 0o755);
    }

    #[test]
    fn an_uncommitted_file_is_removed() {
        let s = Scratch::new("drop");
        let mut f = OutFile::create(&s.0.join("x"), 0o644).unwrap();
        f.file().write_all(b"half").unwrap();
        let tmp = f.tmp().to_owned();
        assert!(tmp.exists());
        drop(f);
        assert!(!tmp.exists());
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 0);
    }
}
