//! What the libcupti check reads from an ELF file under the root: its SONAME (through
//! `cutrace_audit::elf`, the audit's reader, which also reads a file whose section headers are
//! damaged as `ld.so` would) and nvcc's build string. Files are opened without blocking and only
//! when regular: a FIFO named like a library must not hang the doctor.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use cutrace_audit::elf::{scan_strings, symbols_of, ElfSymbols, ELF_MAGIC};
use object::ReadCache;

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

/// True when the file starts with the ELF magic; reads 4 bytes.
pub fn has_elf_magic(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    open_regular(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == ELF_MAGIC
}

/// The SONAME and symbols of the ELF file at `path`; `None` when it cannot be read or parsed
/// (the check then names the library by its file name).
pub fn read_symbols(path: &Path) -> Option<ElfSymbols> {
    let cache = ReadCache::new(open_regular(path).ok()?);
    symbols_of(&cache).ok()
}

/// "Cuda compilation tools, release 12.8, V12.8.13": the toolkit a CUDA binary was built with,
/// embedded by nvcc. Streams the whole file (bounded memory), so only used on files already
/// known to be CUPTI.
pub fn cuda_release_string(path: &Path) -> Option<String> {
    let mut f = open_regular(path).ok()?;
    scan_strings(&mut f, &HashSet::new()).ok()?.cuda_release
}
