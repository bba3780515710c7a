//! Minimal ELF64 files and `ar` archives built byte by byte, so the audit tests need no C
//! compiler (CI has none guaranteed). Just what `object` reads for the audit: section headers, a
//! .dynsym/.dynstr pair, a .symtab/.strtab pair, .dynamic with a DT_SONAME, and a .rodata with
//! chosen bytes. Shared by cutrace-audit's and cutrace's tests (`#[path]`).
#![allow(dead_code)]

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

    pub fn build(&self) -> Vec<u8> {
        // Sections: 0 null, 1 .text, 2 .rodata, 3 .dynstr, 4 .dynsym, 5 .dynamic, 6 .strtab,
        // 7 .symtab, 8 .shstrtab.
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

        let (dynstr, dynsym, soname_off) = sym_table(&self.dynsyms, self.soname.as_deref());
        let (strtab, symtab, _) = sym_table(&self.symtab, None);
        let mut dynamic = Vec::new();
        if let Some(off) = soname_off {
            dynamic.extend(14u64.to_le_bytes()); // DT_SONAME
            dynamic.extend((off as u64).to_le_bytes());
        }
        dynamic.extend([0u8; 16]); // DT_NULL
        let text = vec![0xc3u8; 16];

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
        let mut out = vec![0u8; 64];
        let mut headers = vec![0u8; 64]; // the null section header
        for (name, ty, flags, data, link, info, entsize) in secs {
            while out.len() & 7 != 0 {
                out.push(0);
            }
            let off = out.len() as u64;
            out.extend_from_slice(data);
            let mut h = Vec::with_capacity(64);
            h.extend(name.to_le_bytes());
            h.extend(ty.to_le_bytes());
            h.extend(flags.to_le_bytes());
            h.extend(0u64.to_le_bytes()); // addr
            h.extend(off.to_le_bytes());
            h.extend((data.len() as u64).to_le_bytes());
            h.extend(link.to_le_bytes());
            h.extend(info.to_le_bytes());
            h.extend(8u64.to_le_bytes()); // addralign
            h.extend(entsize.to_le_bytes());
            headers.extend(h);
        }
        while out.len() & 7 != 0 {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out.extend(headers);

        let mut eh = Vec::with_capacity(64);
        eh.extend([0x7f, b'E', b'L', b'F', 2, 1, 1, 0]); // 64-bit, little-endian, version 1
        eh.extend([0u8; 8]);
        eh.extend(self.e_type.to_le_bytes());
        eh.extend(62u16.to_le_bytes()); // x86-64
        eh.extend(1u32.to_le_bytes());
        eh.extend(0u64.to_le_bytes()); // entry
        eh.extend(0u64.to_le_bytes()); // phoff
        eh.extend(shoff.to_le_bytes());
        eh.extend(0u32.to_le_bytes()); // flags
        eh.extend(64u16.to_le_bytes()); // ehsize
        eh.extend(56u16.to_le_bytes()); // phentsize
        eh.extend(0u16.to_le_bytes()); // phnum
        eh.extend(64u16.to_le_bytes()); // shentsize
        eh.extend(9u16.to_le_bytes()); // shnum
        eh.extend(8u16.to_le_bytes()); // shstrndx
        out[..64].copy_from_slice(&eh);
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
