//! Reading just what the audit and the libcupti check need from an ELF file: its SONAME and its
//! dynamic (and static) symbols, split into imported (undefined) and defined. Reads through
//! `object::ReadCache`, so only the headers and symbol tables are read, not a 500 MB library.
//! The byte scans (`scan_strings`) stream the file through a fixed-size buffer.

use object::elf;
use object::read::elf::{Dyn, FileHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadCache, ReadRef};
use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::Path;

#[derive(Debug, Default, Clone)]
pub struct ElfSymbols {
    pub soname: Option<String>,
    /// Undefined symbols: what the file imports (the dynamic table; for a relocatable object,
    /// which has none, its .symtab).
    pub imported: Vec<String>,
    /// Defined symbols (dynamic and, when present, .symtab).
    pub defined: Vec<String>,
    pub is_shared_object: bool,
    /// A relocatable object (`.o`, or a member of a `.a` archive).
    pub is_relocatable: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: malformed ELF: {msg}")]
    Malformed { path: String, msg: String },
}

pub const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

/// Opens `path` for reading without blocking (a FIFO named like a library must not hang the
/// doctor), and only when it is a regular file.
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

/// The first `N` bytes of a stream, or fewer when it is shorter.
pub fn read_head<const N: usize>(r: &mut dyn Read) -> std::io::Result<([u8; N], usize)> {
    let mut buf = [0u8; N];
    let mut got = 0;
    while got < N {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((buf, got))
}

pub fn read_symbols(path: &Path) -> Result<ElfSymbols, ElfError> {
    let display = path.display().to_string();
    let file = open_regular(path).map_err(|source| ElfError::Io {
        path: display.clone(),
        source,
    })?;
    let cache = ReadCache::new(file);
    symbols_of(&cache).map_err(|msg| ElfError::Malformed { path: display, msg })
}

/// The symbols of the ELF image in `data` (a whole file, or an archive member's range of one).
pub fn symbols_of<'d, R: ReadRef<'d>>(data: R) -> Result<ElfSymbols, String> {
    match FileKind::parse(data).map_err(|e| e.to_string())? {
        FileKind::Elf64 => {
            parse::<elf::FileHeader64<Endianness>, _>(data).map_err(|e| e.to_string())
        }
        FileKind::Elf32 => {
            parse::<elf::FileHeader32<Endianness>, _>(data).map_err(|e| e.to_string())
        }
        other => Err(format!("not an ELF file ({other:?})")),
    }
}

fn parse<'d, H, R>(data: R) -> object::read::Result<ElfSymbols>
where
    H: FileHeader<Endian = Endianness>,
    R: ReadRef<'d>,
{
    let header = H::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let mut out = ElfSymbols {
        is_shared_object: header.e_type(endian) == elf::ET_DYN,
        is_relocatable: header.e_type(endian) == elf::ET_REL,
        ..Default::default()
    };
    for kind in [elf::SHT_DYNSYM, elf::SHT_SYMTAB] {
        let table = sections.symbols(endian, data, kind)?;
        for sym in table.iter() {
            let Ok(name) = table.symbol_name(endian, sym) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(name).into_owned();
            if sym.st_shndx(endian) == elf::SHN_UNDEF {
                // A linked file's imports are its dynamic ones; an object file's are in .symtab.
                if kind == elf::SHT_DYNSYM || out.is_relocatable {
                    out.imported.push(name);
                }
            } else if sym.st_type() == elf::STT_FUNC
                || sym.st_type() == elf::STT_NOTYPE
                || sym.st_type() == elf::STT_GNU_IFUNC
            {
                out.defined.push(name);
            }
        }
    }
    if let Some((dyns, link)) = sections.dynamic(endian, data)? {
        let strings = sections.strings(endian, data, link)?;
        for d in dyns {
            if d.tag32(endian) == Some(elf::DT_SONAME) {
                if let Some(off) = d.val32(endian) {
                    if let Ok(s) = strings.get(off) {
                        out.soname = Some(String::from_utf8_lossy(s).into_owned());
                    }
                }
            }
        }
    }
    // SectionHeader is used through the table's methods; keep the import for trait resolution.
    let _ = sections.iter().next().map(|s| s.sh_type(endian));
    out.imported.sort();
    out.imported.dedup();
    out.defined.sort();
    out.defined.dedup();
    Ok(out)
}

const RELEASE_NEEDLE: &[u8] = b"Cuda compilation tools, release ";
/// How much of the build string is kept after the needle's start.
const RELEASE_MAX: usize = 80;
/// Bytes a match may need after its first byte: the longest identifier looked for, or the build
/// string. Identifiers longer than this are not any of ours.
const CONTEXT: usize = 128;
const CHUNK: usize = 1 << 20;

/// What `scan_strings` found in a file's bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StringHits {
    /// The names asked for that occur as whole identifiers (not inside a longer one).
    pub names: BTreeSet<String>,
    /// "Cuda compilation tools, release 12.8, V12.8.93": nvcc's build string, the first one.
    pub cuda_release: Option<String>,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Streams `r` once through a 1 MiB buffer (memory stays bounded whatever the file's size) and
/// finds which of `names` (identifiers starting with "cupti") occur as whole words, and nvcc's
/// build string.
pub fn scan_strings(r: &mut dyn Read, names: &HashSet<&str>) -> std::io::Result<StringHits> {
    let mut hits = StringHits::default();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + CONTEXT + 1);
    // buf[..start] was examined already (kept as the byte before the next candidate).
    let mut start = 0usize;
    let mut eof = false;
    while !eof {
        // Fill the buffer up to a chunk beyond what is kept (short reads are read on).
        let mut filled = buf.len();
        buf.resize(filled + CHUNK, 0);
        while filled < buf.len() {
            match r.read(&mut buf[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        let end = if eof { buf.len() } else { buf.len() - CONTEXT };
        scan_window(&buf, start, end, names, &mut hits);
        if eof {
            break;
        }
        // Keep the unexamined tail and the one byte before it.
        buf.drain(..end - 1);
        start = 1;
    }
    Ok(hits)
}

fn scan_window(buf: &[u8], start: usize, end: usize, names: &HashSet<&str>, hits: &mut StringHits) {
    let mut i = start;
    while i < end {
        // Jump to the next byte that can start a match.
        let Some(k) = buf[i..end].iter().position(|&b| b == b'c' || b == b'C') else {
            break;
        };
        i += k;
        let b = buf[i];
        if b == b'c' && buf[i..].starts_with(b"cupti") && (i == 0 || !is_ident(buf[i - 1])) {
            let len = buf[i..]
                .iter()
                .take(CONTEXT)
                .position(|&c| !is_ident(c))
                .unwrap_or(buf.len() - i);
            if let Ok(word) = std::str::from_utf8(&buf[i..i + len]) {
                if names.contains(word) {
                    hits.names.insert(word.to_owned());
                }
            }
            i += len.max(1);
            continue;
        }
        if b == b'C' && hits.cuda_release.is_none() && buf[i..].starts_with(RELEASE_NEEDLE) {
            let rest = &buf[i..buf.len().min(i + RELEASE_MAX)];
            let stop = rest
                .iter()
                .position(|&c| c == 0 || c == b'\n')
                .unwrap_or(rest.len());
            hits.cuda_release = Some(String::from_utf8_lossy(&rest[..stop]).into_owned());
        }
        i += 1;
    }
}

/// "Cuda compilation tools, release 12.8, V12.8.13": the toolkit a CUDA binary was built with,
/// embedded by nvcc. Streams the whole file (bounded memory), so only used on files already
/// known to be CUPTI.
pub fn cuda_release_string(path: &Path) -> Option<String> {
    let mut f = open_regular(path).ok()?;
    scan_strings(&mut f, &HashSet::new()).ok()?.cuda_release
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes a call, to put matches across chunk edges.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// A reader as long as `len` bytes of zeros with `needle` written at `at`, never held whole.
    struct Sparse {
        len: u64,
        pos: u64,
        at: u64,
        needle: &'static [u8],
    }
    impl Read for Sparse {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = (out.len() as u64).min(self.len - self.pos) as usize;
            for (k, b) in out[..n].iter_mut().enumerate() {
                let p = self.pos + k as u64;
                *b = if p >= self.at && p < self.at + self.needle.len() as u64 {
                    self.needle[(p - self.at) as usize]
                } else {
                    0
                };
            }
            self.pos += n as u64;
            Ok(n)
        }
    }

    fn names() -> HashSet<&'static str> {
        ["cuptiMetricGetValue", "cuptiEventGroupCreate"]
            .into_iter()
            .collect()
    }

    #[test]
    fn whole_words_only_and_across_chunk_edges() {
        let mut data = vec![0u8; CHUNK - 10];
        data.extend_from_slice(
            b"cuptiEventGroupCreate\0xcuptiMetricGetValue\0cuptiMetricGetValue2\0",
        );
        data.extend_from_slice(b"Cuda compilation tools, release 12.8, V12.8.93\nrest");
        for step in [1, 7, 4096, usize::MAX] {
            let hits = scan_strings(&mut Trickle { data: &data, step }, &names()).unwrap();
            assert_eq!(
                hits.names.iter().map(String::as_str).collect::<Vec<_>>(),
                ["cuptiEventGroupCreate"],
                "step {step}: xcupti… and …Value2 are other words"
            );
            assert_eq!(
                hits.cuda_release.as_deref(),
                Some("Cuda compilation tools, release 12.8, V12.8.93")
            );
        }
    }

    #[test]
    fn a_name_at_the_very_start_and_end() {
        let data = b"cuptiMetricGetValue\0\0cuptiEventGroupCreate";
        let hits = scan_strings(&mut &data[..], &names()).unwrap();
        assert_eq!(hits.names.len(), 2, "{hits:?}");
    }

    /// Defect: the build-string scan read the whole file into memory (1.5 GB RSS on a 1.5 GB
    /// libcupti). The scan now streams: a 16 MiB input whose match sits at its end is scanned
    /// while the buffer never grows past one chunk and its context.
    #[test]
    fn memory_stays_bounded_on_a_large_input() {
        struct Watch<R> {
            inner: R,
            largest_ask: usize,
        }
        impl<R: Read> Read for Watch<R> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                self.largest_ask = self.largest_ask.max(out.len());
                self.inner.read(out)
            }
        }
        let len = 16 << 20;
        let mut r = Watch {
            inner: Sparse {
                len,
                pos: 0,
                at: len - 100,
                needle: b"Cuda compilation tools, release 13.0, V13.0.48\0",
            },
            largest_ask: 0,
        };
        let hits = scan_strings(&mut r, &names()).unwrap();
        assert_eq!(
            hits.cuda_release.as_deref(),
            Some("Cuda compilation tools, release 13.0, V13.0.48")
        );
        assert!(
            r.largest_ask <= CHUNK,
            "asked for {} bytes at once",
            r.largest_ask
        );
    }
}
