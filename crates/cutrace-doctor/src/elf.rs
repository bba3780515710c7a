//! Reading just what the audit and the libcupti check need from an ELF file: its SONAME and its
//! dynamic (and static) symbols, split into imported (undefined) and defined. Reads through
//! `object::ReadCache`, so only the headers and symbol tables are read, not a 500 MB library.

use object::elf;
use object::read::elf::{Dyn, FileHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadCache, ReadRef};
use std::fs::File;
use std::io::Read;
use std::path::Path;

#[derive(Debug, Default, Clone)]
pub struct ElfSymbols {
    pub soname: Option<String>,
    /// Undefined dynamic symbols: what the file imports.
    pub imported: Vec<String>,
    /// Defined symbols (dynamic and, when present, .symtab).
    pub defined: Vec<String>,
    pub is_shared_object: bool,
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

/// True when the file starts with the ELF magic; reads 4 bytes.
pub fn has_elf_magic(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == ELF_MAGIC
}

pub fn read_symbols(path: &Path) -> Result<ElfSymbols, ElfError> {
    let display = path.display().to_string();
    let file = File::open(path).map_err(|source| ElfError::Io {
        path: display.clone(),
        source,
    })?;
    let cache = ReadCache::new(file);
    let malformed = |msg: String| ElfError::Malformed {
        path: display.clone(),
        msg,
    };
    match FileKind::parse(&cache).map_err(|e| malformed(e.to_string()))? {
        FileKind::Elf64 => {
            parse::<elf::FileHeader64<Endianness>, _>(&cache).map_err(|e| malformed(e.to_string()))
        }
        FileKind::Elf32 => {
            parse::<elf::FileHeader32<Endianness>, _>(&cache).map_err(|e| malformed(e.to_string()))
        }
        other => Err(malformed(format!("not an ELF file ({other:?})"))),
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
                if kind == elf::SHT_DYNSYM {
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

/// "Cuda compilation tools, release 12.8, V12.8.13": the toolkit a CUDA binary was built with,
/// embedded by nvcc. Scans the whole file, so only used on files already known to be CUPTI.
pub fn cuda_release_string(path: &Path) -> Option<String> {
    const NEEDLE: &[u8] = b"Cuda compilation tools, release ";
    let data = std::fs::read(path).ok()?;
    let at = data.windows(NEEDLE.len()).position(|w| w == NEEDLE)?;
    let rest = &data[at..];
    let end = rest
        .iter()
        .position(|&b| b == 0 || b == b'\n')
        .unwrap_or(rest.len().min(80));
    Some(String::from_utf8_lossy(&rest[..end.min(80)]).into_owned())
}
