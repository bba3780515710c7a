//! Byte-level edits of a little-endian ELF64 file (a `MiniElf` or one `cc` built): the shapes of
//! damage that leave a library loadable by `ld.so`, which reads only the program headers and the
//! dynamic section, while defeating a reader that trusts the section headers or the symbol count
//! a hash table states.

use cutrace_testkit::mini_elf::MiniElf;

const E_PHOFF: usize = 32;
const E_SHOFF: usize = 40;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
const E_SHENTSIZE: usize = 58;
const E_SHNUM: usize = 60;
const E_SHSTRNDX: usize = 62;

pub const PT_LOAD: u32 = 1;
pub const PT_DYNAMIC: u32 = 2;
pub const DT_HASH: u64 = 4;
pub const DT_SYMENT: u64 = 11;
pub const DT_GNU_HASH: u64 = 0x6fff_fef5;
pub const SHT_NULL: u32 = 0;

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// (p_type, p_offset, p_vaddr, p_filesz) of every program header.
fn program_headers(b: &[u8]) -> Vec<(u32, u64, u64, u64)> {
    let (off, size, n) = (
        u64_at(b, E_PHOFF) as usize,
        u16_at(b, E_PHENTSIZE) as usize,
        u16_at(b, E_PHNUM) as usize,
    );
    (0..n)
        .map(|i| {
            let h = off + i * size;
            (
                u32_at(b, h),
                u64_at(b, h + 8),
                u64_at(b, h + 16),
                u64_at(b, h + 32),
            )
        })
        .collect()
}

/// The file offset of a virtual address, through the PT_LOAD segments.
pub fn file_offset(b: &[u8], vaddr: u64) -> Option<usize> {
    program_headers(b)
        .into_iter()
        .filter(|p| p.0 == PT_LOAD)
        .find_map(|(_, off, va, size)| {
            let k = vaddr.checked_sub(va).filter(|k| *k < size)?;
            Some((off + k) as usize)
        })
}

/// (file offset of the entry, tag, value) of each entry of PT_DYNAMIC, DT_NULL excluded.
pub fn dynamic_entries(b: &[u8]) -> Vec<(usize, u64, u64)> {
    let (_, off, _, size) = program_headers(b)
        .into_iter()
        .find(|p| p.0 == PT_DYNAMIC)
        .expect("a PT_DYNAMIC");
    (0..size as usize / 16)
        .map(|i| off as usize + 16 * i)
        .map(|at| (at, u64_at(b, at), u64_at(b, at + 8)))
        .take_while(|e| e.1 != 0)
        .collect()
}

/// The value of a dynamic tag.
pub fn dyn_value(b: &[u8], tag: u64) -> Option<u64> {
    dynamic_entries(b)
        .into_iter()
        .find(|e| e.1 == tag)
        .map(|e| e.2)
}

/// Sets the value of an existing dynamic tag; false when the tag is absent.
pub fn set_dyn(b: &mut [u8], tag: u64, value: u64) -> bool {
    let Some((at, _, _)) = dynamic_entries(b).into_iter().find(|e| e.1 == tag) else {
        return false;
    };
    put_u64(b, at + 8, value);
    true
}

/// Turns the entry of dynamic tag `old` into `(new, value)`.
pub fn retag(b: &mut [u8], old: u64, new: u64, value: u64) {
    let (at, _, _) = dynamic_entries(b)
        .into_iter()
        .find(|e| e.1 == old)
        .expect("the tag");
    put_u64(b, at, new);
    put_u64(b, at + 8, value);
}

/// No section header table at all (`e_shoff`, `e_shnum`, `e_shstrndx` 0), as a tool that strips
/// what the loader does not read leaves it.
pub fn drop_section_headers(b: &mut [u8]) {
    put_u64(b, E_SHOFF, 0);
    put_u16(b, E_SHNUM, 0);
    put_u16(b, E_SHSTRNDX, 0);
}

/// The file offset of the section header named `name`.
pub fn section_header(b: &[u8], name: &str) -> Option<usize> {
    let (off, size, n) = (
        u64_at(b, E_SHOFF) as usize,
        u16_at(b, E_SHENTSIZE) as usize,
        u16_at(b, E_SHNUM) as usize,
    );
    let strtab = off + u16_at(b, E_SHSTRNDX) as usize * size;
    let names = u64_at(b, strtab + 24) as usize;
    (0..n).map(|i| off + i * size).find(|&h| {
        let at = names + u32_at(b, h) as usize;
        b[at..].split(|&c| c == 0).next() == Some(name.as_bytes())
    })
}

/// Sets the `sh_type` of the section named `name`.
pub fn set_section_type(b: &mut [u8], name: &str, ty: u32) {
    let h = section_header(b, name).expect("the section");
    put_u32(b, h + 4, ty);
}

/// Sets DT_HASH's `nchain` (its second word) to `n`.
pub fn set_hash_nchain(b: &mut [u8], n: u32) {
    let at = dyn_value(b, DT_HASH)
        .and_then(|v| file_offset(b, v))
        .expect("a DT_HASH inside a segment");
    put_u32(b, at + 4, n);
}

/// A shared library importing `cuptiEventGroupCreate` (with `others` more imports and exports
/// around it), for the damaged shapes below.
pub fn legacy_caller(others: &[&str]) -> Vec<u8> {
    let mut e = MiniElf::shared().soname("libtrainer.so");
    let (before, after) = others.split_at(others.len() / 2);
    for n in before {
        e = e.export(n);
    }
    e = e.import("cuptiEventGroupCreate");
    for n in after {
        e = e.import(n);
    }
    e.build()
}

/// A DT_HASH whose `nchain` is `n` in a `MiniElf`, which has no hash table of its own: put where
/// DT_SYMENT was, over the padding bytes of `e_ident` (`nbucket` 0 at byte 8, `nchain` at 12).
pub fn mini_hash_nchain(b: &mut [u8], n: u32) {
    retag(b, DT_SYMENT, DT_HASH, 8);
    put_u32(b, 12, n);
}

/// [`mini_hash_nchain`] with an `nchain` of 0.
pub fn mini_zero_nchain(b: &mut [u8]) -> bool {
    mini_hash_nchain(b, 0);
    true
}

/// A `cc`-built library's own DT_HASH, its `nchain` set to 0; false when it has no DT_HASH.
pub fn zero_nchain(b: &mut [u8]) -> bool {
    if dyn_value(b, DT_HASH).is_none() {
        return false;
    }
    set_hash_nchain(b, 0);
    true
}

/// Sets DT_SYMENT, or adds it in place of DT_GNU_HASH or DT_HASH should the file have none.
pub fn set_syment(b: &mut [u8], syment: u64) {
    if !set_dyn(b, DT_SYMENT, syment) {
        let tag = [DT_GNU_HASH, DT_HASH]
            .into_iter()
            .find(|&t| dyn_value(b, t).is_some())
            .expect("a tag to replace");
        retag(b, tag, DT_SYMENT, syment);
    }
}

/// An edit of a file's bytes in place.
type Damage = fn(&mut [u8]);

/// One damaged shape: its name, its bytes, and whether its dynamic symbols are unreadable (an
/// error) rather than still found where the loader finds them.
pub struct Shape {
    pub name: String,
    pub bytes: Vec<u8>,
    pub unreadable: bool,
}

/// The damaged shapes of a library that name its imports where the loader finds them, or make
/// its dynamic symbols unreadable, while a trusting reader sees none: the section headers gone
/// or with `.dynsym` typed SHT_NULL, each alone and with a DT_HASH whose `nchain` is 0
/// (`zero_nchain`; skipped when it returns false) or a DT_SYMENT of 23 or 0.
pub fn unparsable_shapes(b: &[u8], zero_nchain: &dyn Fn(&mut [u8]) -> bool) -> Vec<Shape> {
    let mut out = Vec::new();
    let bases: [(&str, Damage); 2] = [
        ("no section headers", drop_section_headers),
        (".dynsym typed SHT_NULL", |v| {
            set_section_type(v, ".dynsym", SHT_NULL)
        }),
    ];
    for (base, damage) in bases {
        let mut v = b.to_vec();
        damage(&mut v);
        out.push(Shape {
            name: base.to_string(),
            bytes: v.clone(),
            unreadable: false,
        });
        let mut w = v.clone();
        if zero_nchain(&mut w) {
            out.push(Shape {
                name: format!("{base}, DT_HASH nchain 0"),
                bytes: w,
                unreadable: false,
            });
        }
        for syment in [23, 0] {
            let mut w = v.clone();
            set_syment(&mut w, syment);
            out.push(Shape {
                name: format!("{base}, DT_SYMENT {syment}"),
                bytes: w,
                unreadable: true,
            });
        }
    }
    out
}
