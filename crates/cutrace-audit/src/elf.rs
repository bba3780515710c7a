//! Reading just what the audit needs from an ELF file: its SONAME and its dynamic (and static)
//! symbols, split into imported (undefined) and defined. Reads through `object::ReadCache`, so
//! only the headers and symbol tables are read, not a 500 MB library. When the section header
//! table is damaged or absent (the loader never reads it: `ld.so` still loads such a library),
//! the dynamic segment (PT_DYNAMIC → DT_SYMTAB/DT_STRTAB) is read instead, as `ld.so` does.
//! The byte scan (`scan_strings`) streams the file through a fixed-size buffer.

use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadRef};
use std::collections::{BTreeSet, HashSet};
use std::io::Read;

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
    /// The section headers could not be read (why); the symbols come from the dynamic segment.
    pub sections_damaged: Option<String>,
}

pub const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

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

/// The symbols of the ELF image in `data` (a whole file, or an archive member's range of one).
/// A linked file whose section headers cannot be read is read through its dynamic segment; the
/// error is the section headers' when that fails too.
pub fn symbols_of<'d, R: ReadRef<'d>>(data: R) -> Result<ElfSymbols, String> {
    match FileKind::parse(data).map_err(|e| e.to_string())? {
        FileKind::Elf64 => with_fallback::<elf::FileHeader64<Endianness>, _>(data),
        FileKind::Elf32 => with_fallback::<elf::FileHeader32<Endianness>, _>(data),
        other => Err(format!("not an ELF file ({other:?})")),
    }
}

fn with_fallback<'d, H, R>(data: R) -> Result<ElfSymbols, String>
where
    H: FileHeader<Endian = Endianness>,
    R: ReadRef<'d>,
{
    let damaged = match parse::<H, R>(data) {
        // A linked file with no .dynsym section but a dynamic segment (section headers
        // stripped, `e_shnum` 0): what the loader sees is in the segment.
        Ok(s) if s.has_dynsym || s.symbols.is_relocatable => return Ok(s.symbols),
        Ok(s) => match dynamic_segment::<H, R>(data) {
            Ok(Some(mut d)) => {
                d.defined.extend(s.symbols.defined);
                d.defined.sort();
                d.defined.dedup();
                d.sections_damaged = Some("no .dynsym section".into());
                return Ok(d);
            }
            // No dynamic segment either: nothing is linked dynamically (a static program), so
            // its .symtab, if any, is all there is.
            Ok(None) => return Ok(s.symbols),
            // The loader reads the symbols through the dynamic segment: one that cannot be read
            // leaves the imports unknown, which is never "none".
            Err(e) => {
                return Err(format!(
                "its section headers name no .dynsym and its dynamic segment cannot be read ({e})"
            ))
            }
        },
        Err(e) => e.to_string(),
    };
    match dynamic_segment::<H, R>(data) {
        Ok(Some(mut d)) => {
            d.sections_damaged = Some(damaged);
            Ok(d)
        }
        Ok(None) => Err(format!("{damaged}; no dynamic segment to fall back on")),
        Err(e) => Err(format!(
            "{damaged}; its dynamic segment cannot be read either ({e})"
        )),
    }
}

struct Parsed {
    symbols: ElfSymbols,
    has_dynsym: bool,
}

fn parse<'d, H, R>(data: R) -> object::read::Result<Parsed>
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
    let mut has_dynsym = false;
    for kind in [elf::SHT_DYNSYM, elf::SHT_SYMTAB] {
        let table = sections.symbols(endian, data, kind)?;
        has_dynsym |= kind == elf::SHT_DYNSYM && !table.is_empty();
        for sym in table.iter() {
            let Ok(name) = table.symbol_name(endian, sym) else {
                continue;
            };
            add_symbol::<H>(&mut out, endian, sym, name, kind == elf::SHT_DYNSYM);
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
    Ok(Parsed {
        symbols: out,
        has_dynsym,
    })
}

fn add_symbol<H: FileHeader<Endian = Endianness>>(
    out: &mut ElfSymbols,
    endian: Endianness,
    sym: &H::Sym,
    name: &[u8],
    dynamic: bool,
) {
    if name.is_empty() {
        return;
    }
    let name = String::from_utf8_lossy(name).into_owned();
    if sym.st_shndx(endian) == elf::SHN_UNDEF {
        // A linked file's imports are its dynamic ones; an object file's are in .symtab.
        if dynamic || out.is_relocatable {
            out.imported.push(name);
        }
    } else if sym.st_type() == elf::STT_FUNC
        || sym.st_type() == elf::STT_NOTYPE
        || sym.st_type() == elf::STT_GNU_IFUNC
    {
        out.defined.push(name);
    }
}

/// DT_RELR (packed relative relocations), newer than the `object` release in use.
const DT_RELR: u32 = 36;

/// More dynamic symbols than any real library has: a count past it is damage.
const MAX_DYN_SYMBOLS: u64 = 1 << 22;

/// The dynamic symbols and SONAME as the loader finds them: PT_DYNAMIC's DT_SYMTAB, DT_STRTAB
/// and DT_STRSZ, addresses mapped to file offsets through the PT_LOAD segments. `Ok(None)`: there
/// is no dynamic segment.
///
/// How many symbols the table holds is stated nowhere the loader must believe: DT_HASH's
/// `nchain` and DT_GNU_HASH's chains count those that can be looked up by name, while
/// relocations name symbols by index, whatever the hash tables say. So the table is read as far
/// as it reaches, to the next table the dynamic section points at (in the layouts linkers
/// write, one starts where `.dynsym` ends: `.dynstr`, `.gnu.version`, a hash table), or as far
/// as a hash table counts when that is further and still inside the segment; with no table
/// after it, to the end of its segment. A hash table that
/// counts fewer (an `nchain` of 0 over a table that holds symbols) is not believed. A DT_SYMENT
/// other than the size of a symbol makes the table unreadable: an error, not an empty table.
fn dynamic_segment<'d, H, R>(data: R) -> Result<Option<ElfSymbols>, String>
where
    H: FileHeader<Endian = Endianness>,
    R: ReadRef<'d>,
{
    let header = H::parse(data).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let phdrs = header
        .program_headers(endian, data)
        .map_err(|e| format!("program headers: {e}"))?;
    let Some(dyn_phdr) = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC) else {
        return Ok(None);
    };
    let dyns = dyn_phdr
        .dynamic(endian, data)
        .map_err(|e| format!("dynamic segment: {e}"))?
        .ok_or("dynamic segment: empty")?;
    let loads: Vec<(u64, u64, u64)> = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .map(|p| {
            (
                p.p_vaddr(endian).into(),
                p.p_offset(endian).into(),
                p.p_filesz(endian).into(),
            )
        })
        .collect();
    // A virtual address to a file offset, and how many bytes of the file follow it there.
    let to_file = |addr: u64| {
        loads.iter().find_map(|&(vaddr, off, size)| {
            let k = addr.checked_sub(vaddr).filter(|k| *k < size)?;
            Some((off.checked_add(k)?, size - k))
        })
    };
    let mut tag = std::collections::BTreeMap::new();
    // Where the tables the dynamic section points at start: the symbol table ends at the next.
    let mut tables: Vec<u64> = vec![dyn_phdr.p_vaddr(endian).into()];
    for d in dyns {
        let (Some(t), Some(v)) = (d.tag32(endian), Some(d.d_val(endian).into())) else {
            continue;
        };
        let v: u64 = v;
        if t == elf::DT_NULL {
            break;
        }
        if matches!(
            t,
            elf::DT_STRTAB
                | elf::DT_HASH
                | elf::DT_GNU_HASH
                | elf::DT_RELA
                | elf::DT_REL
                | elf::DT_JMPREL
                | DT_RELR
                | elf::DT_VERSYM
                | elf::DT_VERNEED
                | elf::DT_VERDEF
                | elf::DT_INIT_ARRAY
                | elf::DT_FINI_ARRAY
                | elf::DT_PREINIT_ARRAY
        ) {
            tables.push(v);
        }
        tag.entry(t).or_insert(v);
    }
    let get = |t: u32| tag.get(&t).copied();
    let (Some(symtab), Some(strtab)) = (get(elf::DT_SYMTAB), get(elf::DT_STRTAB)) else {
        return Err("no DT_SYMTAB or DT_STRTAB".into());
    };
    let sym_size = std::mem::size_of::<H::Sym>() as u64;
    let syment = get(elf::DT_SYMENT).unwrap_or(sym_size);
    if syment != sym_size {
        return Err(format!(
            "DT_SYMENT is {syment}, not the {sym_size} bytes of a symbol: the symbol table cannot be walked"
        ));
    }
    let (sym_off, sym_room) = to_file(symtab).ok_or("DT_SYMTAB is outside every segment")?;
    // A cut file is shorter than its segments say.
    let file_len = data.len().map_err(|()| "cannot tell the file's length")?;
    let room = sym_room.min(file_len.saturating_sub(sym_off)) / syment;
    let (str_off, str_room) = to_file(strtab).ok_or("DT_STRTAB is outside every segment")?;
    let str_room = str_room.min(file_len.saturating_sub(str_off));
    let strsz = get(elf::DT_STRSZ).unwrap_or(str_room).min(str_room);
    let strings = data
        .read_bytes_at(str_off, strsz)
        .map_err(|()| "DT_STRTAB runs past the end of the file")?;
    // As far as the table reaches: to the next table, else to the end of its segment.
    let reach = tables
        .iter()
        .filter(|&&a| a > symtab)
        .min()
        .map_or(room, |&a| ((a - symtab) / syment).min(room));
    // What the hash tables count; one that counts past the segment is not believed at all.
    let sysv = get(elf::DT_HASH)
        .and_then(to_file)
        .and_then(|(off, _)| data.read_at::<object::U32<Endianness>>(off + 4).ok())
        .map(|n| u64::from(n.get(endian)));
    let gnu = get(elf::DT_GNU_HASH)
        .and_then(to_file)
        .and_then(|(off, _)| {
            gnu_hash_count(
                data,
                endian,
                off,
                std::mem::size_of::<H::Word>() as u64,
                room,
            )
        });
    let stated = sysv.into_iter().chain(gnu).filter(|&n| n <= room).max();
    let count = stated.map_or(reach, |n| n.max(reach));
    if count > MAX_DYN_SYMBOLS {
        return Err(format!("{count} dynamic symbols"));
    }
    let syms: &[H::Sym] = data
        .read_slice_at(sym_off, count as usize)
        .map_err(|()| "DT_SYMTAB runs past the end of the file")?;
    let name_at = |off: u64| {
        let rest = strings.get(usize::try_from(off).ok()?..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(&rest[..end])
    };
    let mut out = ElfSymbols {
        is_shared_object: header.e_type(endian) == elf::ET_DYN,
        is_relocatable: false,
        ..Default::default()
    };
    for sym in syms.iter().skip(1) {
        if let Some(name) = name_at(sym.st_name(endian).into()) {
            add_symbol::<H>(&mut out, endian, sym, name, true);
        }
    }
    out.soname = get(elf::DT_SONAME)
        .and_then(name_at)
        .map(|s| String::from_utf8_lossy(s).into_owned());
    out.imported.sort();
    out.imported.dedup();
    out.defined.sort();
    out.defined.dedup();
    Ok(Some(out))
}

/// Words of a GNU hash table read at once: its buckets and chains are read in blocks, never a
/// word at a time (each read is a cached block of its own).
const HASH_BLOCK: u64 = 4096;

/// The number of dynamic symbols by DT_GNU_HASH at file offset `off`: one past the last symbol
/// any chain reaches. `None` when the table is cut or counts more than `limit` symbols.
fn gnu_hash_count<'d, R: ReadRef<'d>>(
    data: R,
    endian: Endianness,
    off: u64,
    word_size: u64,
    limit: u64,
) -> Option<u64> {
    use object::U32;
    let words = |at: u64, n: u64| -> Option<&'d [U32<Endianness>]> {
        data.read_slice_at(at, usize::try_from(n).ok()?).ok()
    };
    let head = words(off, 4)?;
    let (nbuckets, symoffset, bloom_size) = (
        u64::from(head[0].get(endian)),
        u64::from(head[1].get(endian)),
        u64::from(head[2].get(endian)),
    );
    if nbuckets > limit.max(1) || symoffset > limit {
        return None;
    }
    // Bloom words are the class's word: 8 bytes in ELF64, 4 in ELF32.
    let buckets = off
        .checked_add(16)?
        .checked_add(bloom_size.checked_mul(word_size)?)?;
    let mut last = 0u64;
    let mut i = 0;
    while i < nbuckets {
        let n = HASH_BLOCK.min(nbuckets - i);
        let block = words(buckets.checked_add(4 * i)?, n)?;
        last = last.max(block.iter().map(|w| u64::from(w.get(endian))).max()?);
        i += n;
    }
    if last < symoffset {
        return Some(symoffset);
    }
    if last >= limit {
        return None;
    }
    // The chain of the last bucket's first symbol runs on to a word with its low bit set.
    let chains = buckets.checked_add(4 * nbuckets)?;
    let file_len = data.len().ok()?;
    let mut i = last;
    while i < limit {
        let at = chains.checked_add(4 * (i - symoffset))?;
        // A block never runs past the end of the file (the table may end close to it).
        let n = HASH_BLOCK
            .min(limit - i)
            .min(file_len.saturating_sub(at) / 4);
        if n == 0 {
            return None;
        }
        let block = words(at, n)?;
        if let Some(k) = block.iter().position(|w| w.get(endian) & 1 == 1) {
            return Some(i + k as u64 + 1);
        }
        i += n;
    }
    None
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
