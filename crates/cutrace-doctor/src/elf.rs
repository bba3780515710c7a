//! What the libcupti check reads from an ELF file under the root: its SONAME (through
//! `cutrace_audit::elf`, the audit's reader, which also reads a file whose section headers are
//! damaged as `ld.so` would) and nvcc's build string. Files are opened without blocking and only
//! when regular: a FIFO named like a library must not hang the doctor. One file is opened once
//! and read at most [`MAX_READ`] bytes (4 MiB) in all, whatever its size (a sparse 16 GB file
//! costs what 4 MiB does): the headers and symbol tables first, then its bytes from the start
//! for the build string with what is left.

use std::cell::Cell;
use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

use cutrace_audit::elf::{read_head, scan_strings, symbols_of, ELF_MAGIC};
use object::read::ReadCacheOps;
use object::{ReadCache, ReadRef};

pub use crate::root::MAX_READ;

/// Opens `path` for reading without blocking, and only when it is a regular file.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// A [`ReadRef`] over a [`ReadCache`] that hands out at most a budget of bytes in all: a request
/// past what is left fails before anything is allocated or read for it, so headers that claim a
/// huge table cost nothing. A request served from the cache is counted again (the budget
/// bounds what the parser is given, and so what is read).
struct Budgeted<'a, R: ReadCacheOps> {
    cache: &'a ReadCache<R>,
    left: &'a Cell<u64>,
}

// By hand: derived ones would ask R to be Copy.
impl<R: ReadCacheOps> Clone for Budgeted<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: ReadCacheOps> Copy for Budgeted<'_, R> {}

impl<R: ReadCacheOps> Budgeted<'_, R> {
    fn spend(&self, n: u64) -> Result<(), ()> {
        let left = self.left.get().checked_sub(n).ok_or(())?;
        self.left.set(left);
        Ok(())
    }
}

impl<'a, R: ReadCacheOps> ReadRef<'a> for Budgeted<'a, R> {
    fn len(self) -> Result<u64, ()> {
        self.cache.len()
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        self.spend(size)?;
        self.cache.read_bytes_at(offset, size)
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        // The cache reads at most 4 KiB for one string, 256 bytes at a time: what is left must
        // cover the most it may read; what it did read (at most 255 bytes past the string) is
        // what is spent.
        let most = range.end.saturating_sub(range.start).min(4096);
        if self.left.get() < most {
            return Err(());
        }
        let s = self.cache.read_bytes_at_until(range, delimiter)?;
        self.spend((s.len() as u64 + 256).min(most))?;
        Ok(s)
    }
}

/// Whether nvcc's build string was found in what was read of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildString {
    /// "Cuda compilation tools, release 12.8, V12.8.13".
    Found(String),
    /// The whole file was read: there is none.
    Absent,
    /// Not in the `read` bytes read from the start; the file is `len` bytes long, and the rest
    /// was not read ([`MAX_READ`]).
    NotInRead { read: u64, len: u64 },
}

/// What the doctor read of one ELF file.
#[derive(Debug, Clone)]
pub struct Library {
    /// Its SONAME, when its dynamic section could be read within the budget.
    pub soname: Option<String>,
    pub build: BuildString,
}

/// The SONAME and nvcc's build string of the ELF file at `path`, through one open and at most
/// [`MAX_READ`] bytes; `None` when it cannot be opened, is not a regular file or is not ELF.
pub fn inspect(path: &Path) -> Option<Library> {
    inspect_within(path, MAX_READ)
}

fn inspect_within(path: &Path, budget: u64) -> Option<Library> {
    let mut f = open_regular(path).ok()?;
    let len = f.metadata().ok()?.len();
    let (magic, n) = read_head::<4>(&mut f).ok()?;
    if n < 4 || magic != ELF_MAGIC {
        return None;
    }
    let left = Cell::new(budget.saturating_sub(4));
    let cache = ReadCache::new(f);
    let soname = symbols_of(Budgeted {
        cache: &cache,
        left: &left,
    })
    .ok()
    .and_then(|s| s.soname);
    let mut f = cache.into_inner();
    let left = left.get();
    let build = match Seek::seek(&mut f, SeekFrom::Start(0)) {
        Ok(_) => {
            let hits = scan_strings(&mut (&mut f).take(left), &HashSet::new()).ok()?;
            match hits.cuda_release {
                Some(s) => BuildString::Found(s),
                None if len <= left => BuildString::Absent,
                None => BuildString::NotInRead { read: left, len },
            }
        }
        Err(_) => return None,
    };
    Some(Library { soname, build })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory, removed on drop.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!(
                "cutrace-doctor-elf-{name}-{}-{n}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("mkdir");
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A reader that counts the bytes read through it.
    struct Counting<R> {
        inner: R,
        read: std::rc::Rc<Cell<u64>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    /// An ELF64 header whose section header table claims 65535 entries of 64 bytes far out in
    /// the file: parsing it through the budget asks for more than is left and fails before
    /// reading, and never reads more than the budget.
    #[test]
    fn the_budget_bounds_what_the_elf_reader_reads() {
        let s = Scratch::new("budget");
        let p = s.0.join("libcupti.so.13");
        let mut h = vec![0u8; 64];
        h[..8].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
        h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        h[18..20].copy_from_slice(&62u16.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[40..48].copy_from_slice(&(1u64 << 20).to_le_bytes()); // e_shoff
        h[52..54].copy_from_slice(&64u16.to_le_bytes());
        h[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        h[60..62].copy_from_slice(&0xffffu16.to_le_bytes()); // e_shnum
        std::fs::write(&p, &h).expect("write");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .expect("open");
        f.set_len(64 << 20).expect("sparse");
        let read = std::rc::Rc::new(Cell::new(0));
        let cache = ReadCache::new(Counting {
            inner: f,
            read: read.clone(),
        });
        let left = Cell::new(64 << 10);
        let r = symbols_of(Budgeted {
            cache: &cache,
            left: &left,
        });
        assert!(r.is_err(), "{r:?}");
        assert!(read.get() <= 64 << 10, "read {} bytes", read.get());
    }
}
