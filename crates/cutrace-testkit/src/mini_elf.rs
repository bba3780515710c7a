//! Minimal ELF64 files and `ar` archives built byte by byte, so the audit tests need no C
//! compiler (CI has none guaranteed). Just what `object` reads for the audit: section headers, a
//! .dynsym/.dynstr pair, a .symtab/.strtab pair, .dynamic with a DT_SONAME, and a .rodata with
//! chosen bytes; a linked file (not an object file) also has the program headers the loader
//! reads: one PT_LOAD mapping the file at address 0 and a PT_DYNAMIC whose DT_SYMTAB, DT_STRTAB,
//! DT_STRSZ and DT_SYMENT point at .dynsym and .dynstr. Used by cutrace-audit's and cutrace's
//! tests.

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

#[derive(Default, Clone)]
pub struct MiniElf {
    e_type: u16,
    soname: Option<String>,
    /// (name, defined)
    dynsyms: Vec<(String, bool)>,
    symtab: Vec<(String, bool)>,
    rodata: Vec<u8>,
}

impl MiniElf {
    /// A shared object (`cc -shared`).
    pub fn shared() -> Self {
        MiniElf {
            e_type: ET_DYN,
            ..Default::default()
        }
    }
    /// A linked executable.
    pub fn executable() -> Self {
        MiniElf {
            e_type: ET_EXEC,
            ..Default::default()
        }
    }
    /// A relocatable object (`cc -c`): its symbols are in .symtab only.
    pub fn object() -> Self {
        MiniElf {
            e_type: ET_REL,
            ..Default::default()
        }
    }
    pub fn soname(mut self, s: &str) -> Self {
        self.soname = Some(s.into());
        self
    }
    /// An undefined symbol: in .dynsym, or .symtab for an object file.
    pub fn import(mut self, name: &str) -> Self {
        if self.e_type == ET_REL {
            self.symtab.push((name.into(), false));
        } else {
            self.dynsyms.push((name.into(), false));
        }
        self
    }
    /// An exported function (.dynsym; .symtab for an object file).
    pub fn export(mut self, name: &str) -> Self {
        if self.e_type == ET_REL {
            self.symtab.push((name.into(), true));
        } else {
            self.dynsyms.push((name.into(), true));
        }
        self
    }
    /// A function defined but only in .symtab (statically linked, not exported).
    pub fn define_local(mut self, name: &str) -> Self {
        self.symtab.push((name.into(), true));
        self
    }
    /// Bytes in .rodata: string literals such as a dlsym name or nvcc's build string.
    pub fn rodata(mut self, bytes: &[u8]) -> Self {
        self.rodata.extend_from_slice(bytes);
        self
    }

    /// The file's bytes: the ELF header, the program headers of a linked file, the sections'
    /// data and the section headers.
    pub fn build(&self) -> Vec<u8> {
        let (shstr, names) = section_names();
        let (dynstr, dynsym, soname_off) = sym_table(&self.dynsyms, self.soname.as_deref());
        let (strtab, symtab, _) = sym_table(&self.symtab, None);
        let linked = self.e_type != ET_REL;
        let phnum: u16 = if linked { 2 } else { 0 };
        let text = vec![0xc3u8; 16];
        let mut tags = dynamic_tags(soname_off, linked, dynstr.len());
        let dyn_len = tags.len() * 16;
        let offs = section_offsets(
            [
                text.len(),
                self.rodata.len(),
                dynstr.len(),
                dynsym.len(),
                dyn_len,
                strtab.len(),
                symtab.len(),
                shstr.len(),
            ],
            phnum,
        );
        let dynamic = dynamic_bytes(&mut tags, &offs);

        // (name, type, flags, data, link, info, entsize)
        let secs: Vec<Section> = vec![
            (names[0], 1, 0x6, &text, 0, 0, 0),        // PROGBITS AX
            (names[1], 1, 0x2, &self.rodata, 0, 0, 0), // PROGBITS A
            (names[2], 3, 0x2, &dynstr, 0, 0, 0),      // STRTAB
            (names[3], 11, 0x2, &dynsym, 3, 1, 24),    // DYNSYM
            (names[4], 6, 0x3, &dynamic, 3, 0, 16),    // DYNAMIC
            (names[5], 3, 0, &strtab, 0, 0, 0),        // STRTAB
            (names[6], 2, 0, &symtab, 6, 1, 24),       // SYMTAB
            (names[7], 3, 0, &shstr, 0, 0, 0),         // STRTAB
        ];
        let mut out = vec![0u8; 64 + 56 * phnum as usize];
        let headers = write_sections(&mut out, secs, &offs, linked);
        while out.len() & 7 != 0 {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out.extend(headers);
        if linked {
            let phdrs = program_headers(out.len() as u64, offs[4], dyn_len as u64);
            out[64..64 + 112].copy_from_slice(&phdrs);
        }
        out[..64].copy_from_slice(&elf_header(self.e_type, linked, shoff, phnum));
        out
    }

    pub fn write(&self, path: &std::path::Path) -> std::path::PathBuf {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(path, self.build()).expect("write ELF");
        path.to_path_buf()
    }
}

/// (name, type, flags, data, link, info, entsize) of one section.
type Section<'a> = (u32, u32, u64, &'a [u8], u32, u32, u64);

/// The section header string table and each section's name offset in it. Sections: 0 null,
/// 1 .text, 2 .rodata, 3 .dynstr, 4 .dynsym, 5 .dynamic, 6 .strtab, 7 .symtab, 8 .shstrtab.
fn section_names() -> (Vec<u8>, Vec<u32>) {
    let mut shstr = vec![0u8];
    let mut name_of = |n: &str| {
        let off = shstr.len() as u32;
        shstr.extend_from_slice(n.as_bytes());
        shstr.push(0);
        off
    };
    let names: Vec<u32> = [
        ".text",
        ".rodata",
        ".dynstr",
        ".dynsym",
        ".dynamic",
        ".strtab",
        ".symtab",
        ".shstrtab",
    ]
    .iter()
    .map(|n| name_of(n))
    .collect();
    (shstr, names)
}

/// .dynamic's tags: DT_SONAME?, and for a linked file DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT
/// (their values are filled in once the layout is known), then DT_NULL.
fn dynamic_tags(soname_off: Option<u32>, linked: bool, dynstr_len: usize) -> Vec<(u64, u64)> {
    let mut tags: Vec<(u64, u64)> = Vec::new();
    if let Some(off) = soname_off {
        tags.push((14, off as u64)); // DT_SONAME
    }
    if linked {
        tags.extend([(5, 0), (6, 0), (10, dynstr_len as u64), (11, 24)]);
    }
    tags.push((0, 0)); // DT_NULL
    tags
}

/// Where each section's data goes (8-aligned, in order): after the ELF header and the program
/// headers.
fn section_offsets(lens: [usize; 8], phnum: u16) -> Vec<u64> {
    let mut offs = Vec::new();
    let mut at = 64 + 56 * phnum as usize;
    for len in lens {
        at = (at + 7) & !7;
        offs.push(at as u64);
        at += len;
    }
    offs
}

/// .dynamic's bytes, once DT_STRTAB and DT_SYMTAB are set to .dynstr's and .dynsym's offsets.
fn dynamic_bytes(tags: &mut [(u64, u64)], offs: &[u64]) -> Vec<u8> {
    for t in tags.iter_mut() {
        match t.0 {
            5 => t.1 = offs[2],
            6 => t.1 = offs[3],
            _ => {}
        }
    }
    tags.iter()
        .flat_map(|(t, v)| t.to_le_bytes().into_iter().chain(v.to_le_bytes()))
        .collect()
}

/// Appends each section's data to `out` at its offset in `offs`; returns the section headers,
/// the null one first.
fn write_sections(out: &mut Vec<u8>, secs: Vec<Section>, offs: &[u64], linked: bool) -> Vec<u8> {
    let mut headers = vec![0u8; 64]; // the null section header
    for (i, (name, ty, flags, data, link, info, entsize)) in secs.into_iter().enumerate() {
        while out.len() & 7 != 0 {
            out.push(0);
        }
        let off = out.len() as u64;
        assert_eq!(off, offs[i]);
        out.extend_from_slice(data);
        // Allocated sections of a linked file sit at their file offset (the one PT_LOAD
        // maps the file at address 0).
        let addr = if linked && flags & 0x2 != 0 { off } else { 0 };
        let mut h = Vec::with_capacity(64);
        h.extend(name.to_le_bytes());
        h.extend(ty.to_le_bytes());
        h.extend(flags.to_le_bytes());
        h.extend(addr.to_le_bytes());
        h.extend(off.to_le_bytes());
        h.extend((data.len() as u64).to_le_bytes());
        h.extend(link.to_le_bytes());
        h.extend(info.to_le_bytes());
        h.extend(8u64.to_le_bytes()); // addralign
        h.extend(entsize.to_le_bytes());
        headers.extend(h);
    }
    headers
}

/// A linked file's two program headers: PT_LOAD, the whole file at address 0; PT_DYNAMIC,
/// .dynamic.
fn program_headers(file_len: u64, dyn_off: u64, dyn_len: u64) -> Vec<u8> {
    let ph = |ty: u32, flags: u32, off: u64, len: u64| {
        let mut h = Vec::with_capacity(56);
        h.extend(ty.to_le_bytes());
        h.extend(flags.to_le_bytes());
        h.extend(off.to_le_bytes()); // p_offset
        h.extend(off.to_le_bytes()); // p_vaddr
        h.extend(off.to_le_bytes()); // p_paddr
        h.extend(len.to_le_bytes()); // p_filesz
        h.extend(len.to_le_bytes()); // p_memsz
        h.extend(8u64.to_le_bytes()); // p_align
        h
    };
    let mut phdrs = ph(1, 0x5, 0, file_len);
    phdrs.extend(ph(2, 0x6, dyn_off, dyn_len));
    phdrs
}

/// The 64-byte ELF header of an x86-64, little-endian file.
fn elf_header(e_type: u16, linked: bool, shoff: u64, phnum: u16) -> Vec<u8> {
    let mut eh = Vec::with_capacity(64);
    eh.extend([0x7f, b'E', b'L', b'F', 2, 1, 1, 0]); // 64-bit, little-endian, version 1
    eh.extend([0u8; 8]);
    eh.extend(e_type.to_le_bytes());
    eh.extend(62u16.to_le_bytes()); // x86-64
    eh.extend(1u32.to_le_bytes());
    eh.extend(0u64.to_le_bytes()); // entry
    eh.extend((if linked { 64u64 } else { 0 }).to_le_bytes()); // phoff
    eh.extend(shoff.to_le_bytes());
    eh.extend(0u32.to_le_bytes()); // flags
    eh.extend(64u16.to_le_bytes()); // ehsize
    eh.extend(56u16.to_le_bytes()); // phentsize
    eh.extend(phnum.to_le_bytes()); // phnum
    eh.extend(64u16.to_le_bytes()); // shentsize
    eh.extend(9u16.to_le_bytes()); // shnum
    eh.extend(8u16.to_le_bytes()); // shstrndx
    eh
}

/// A string table and a symbol table (first entry null) for `syms`; also the offset of `extra`
/// in the string table.
fn sym_table(syms: &[(String, bool)], extra: Option<&str>) -> (Vec<u8>, Vec<u8>, Option<u32>) {
    let mut strs = vec![0u8];
    let mut table = vec![0u8; 24];
    for (name, defined) in syms {
        let off = strs.len() as u32;
        strs.extend_from_slice(name.as_bytes());
        strs.push(0);
        table.extend(off.to_le_bytes());
        table.push(0x12); // GLOBAL FUNC
        table.push(0);
        table.extend((if *defined { 1u16 } else { 0u16 }).to_le_bytes()); // .text or UNDEF
        table.extend(0u64.to_le_bytes());
        table.extend(0u64.to_le_bytes());
    }
    let extra_off = extra.map(|e| {
        let off = strs.len() as u32;
        strs.extend_from_slice(e.as_bytes());
        strs.push(0);
        off
    });
    (strs, table, extra_off)
}

/// A GNU `ar` archive of `members` (long names through a `//` table, as GNU ar writes them).
pub fn ar(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let header = |name: &str, size: usize| {
        let h = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644);
        assert_eq!(h.len(), 60);
        h.into_bytes()
    };
    let mut long = Vec::new();
    let mut names = Vec::new();
    for (n, _) in members {
        if n.len() > 15 {
            names.push(format!("/{}", long.len()));
            long.extend_from_slice(n.as_bytes());
            long.extend_from_slice(b"/\n");
        } else {
            names.push(format!("{n}/"));
        }
    }
    let mut out = b"!<arch>\n".to_vec();
    // An empty symbol index, as `ar` writes one first.
    out.extend(header("/", 4));
    out.extend([0u8; 4]);
    if !long.is_empty() {
        out.extend(header("//", long.len()));
        out.extend(&long);
        if long.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    for ((_, data), name) in members.iter().zip(names) {
        out.extend(header(&name, data.len()));
        out.extend(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}
