//! Seeded hostile inputs for `cutrace audit` and `cutrace doctor`: mini ELF files and `ar`
//! archives with damaged headers (section header offsets and counts, string table indexes,
//! program headers, member sizes and names), truncated, bit-flipped or claiming huge sizes; and
//! doctor roots with FIFOs, symbolic-link loops, huge sparse files and non-UTF-8 names and text.
//!
//! Each generator writes one input under `dir` and returns the `cutrace` arguments that run it,
//! so a fuzz driver can run the binary on them. Depends on std, fastrand and the mini ELF writer
//! only. Used by cutrace-audit's and cutrace's fuzz tests.

use crate::mini_elf::{ar, MiniElf};
use std::io;
use std::path::Path;

/// Names the audit looks for, and a few it does not.
const NAMES: [&str; 6] = [
    "cuptiEventGroupCreate",
    "cuptiMetricGetIdFromName",
    "cuptiActivityConfigurePCSampling",
    "cuptiProfilerBeginSession",
    "cuptiGetVersion",
    "cudaMalloc",
];

/// One input of any kind: an ELF file, an archive or a doctor root.
pub fn generate(rng: &mut fastrand::Rng, dir: &Path) -> io::Result<Vec<String>> {
    match rng.u8(0..3) {
        0 => generate_elf(rng, dir),
        1 => generate_archive(rng, dir),
        _ => generate_doctor_root(rng, dir),
    }
}

fn arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn audit_args(rng: &mut fastrand::Rng, p: &Path) -> Vec<String> {
    let mut a = vec!["audit".to_string()];
    if rng.bool() {
        a.push("--no-strings".into());
    }
    a.push(arg(p));
    a
}

fn random_elf(rng: &mut fastrand::Rng) -> MiniElf {
    let mut e = match rng.u8(0..3) {
        0 => MiniElf::shared(),
        1 => MiniElf::executable(),
        _ => MiniElf::object(),
    };
    if rng.bool() {
        e = e.soname(if rng.bool() {
            "libcupti.so.12"
        } else {
            "libx.so.1"
        });
    }
    for _ in 0..rng.usize(0..4) {
        let n = NAMES[rng.usize(0..NAMES.len())];
        e = match rng.u8(0..3) {
            0 => e.import(n),
            1 => e.export(n),
            _ => e.define_local(n),
        };
    }
    if rng.bool() {
        e = e.rodata(b"cuptiEventGroupCreate\0Cuda compilation tools, release 12.8, V12.8.93\0");
    }
    e
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if at + v.len() <= b.len() {
        b[at..at + v.len()].copy_from_slice(v);
    }
}

/// A value for a size or offset field: small, near a boundary, or huge.
fn wild(rng: &mut fastrand::Rng, len: usize) -> u64 {
    match rng.u8(0..5) {
        0 => 0,
        1 => rng.u64(0..len as u64 + 64),
        2 => len as u64 + rng.u64(0..4096),
        3 => u64::MAX - rng.u64(0..4096),
        _ => 1u64 << rng.u32(16..63),
    }
}

/// Damage an ELF64 image in one to three ways.
pub fn mutate_elf(rng: &mut fastrand::Rng, b: &mut Vec<u8>) {
    for _ in 0..rng.usize(1..4) {
        let len = b.len();
        match rng.u8(0..9) {
            // e_phoff, e_shoff
            0 => put(b, 32, &wild(rng, len).to_le_bytes()),
            1 => put(b, 40, &wild(rng, len).to_le_bytes()),
            // e_phnum, e_shnum, e_shstrndx
            2 => put(b, 56, &(rng.u16(..)).to_le_bytes()),
            3 => put(b, 60, &(rng.u16(..)).to_le_bytes()),
            4 => put(b, 62, &(rng.u16(..)).to_le_bytes()),
            // truncation
            5 => {
                let keep = rng.usize(0..=len);
                b.truncate(keep);
            }
            // bit flips
            6 => {
                for _ in 0..rng.usize(1..16) {
                    if !b.is_empty() {
                        let i = rng.usize(0..b.len());
                        b[i] ^= 1 << rng.u8(0..8);
                    }
                }
            }
            // a huge size or offset in some section header (sh_offset at +24, sh_size at +32)
            // or program header (p_offset at +8, p_filesz at +32): wherever the table is.
            7 => {
                if len >= 64 {
                    let at = rng.usize(64..len.max(65));
                    let field = rng.usize(0..8) * 8;
                    put(b, (at & !7) + field, &wild(rng, len).to_le_bytes());
                }
            }
            // a word of the dynamic table, or anywhere, set to a string-table index far away
            _ => {
                if len >= 8 {
                    let at = rng.usize(0..len - 4) & !3;
                    put(b, at, &(rng.u32(..)).to_le_bytes());
                }
            }
        }
    }
}

/// An ELF file, damaged, and `["audit", path]`.
pub fn generate_elf(rng: &mut fastrand::Rng, dir: &Path) -> io::Result<Vec<String>> {
    let mut b = random_elf(rng).build();
    if rng.u8(0..8) != 0 {
        mutate_elf(rng, &mut b);
    }
    let p = dir.join(format!("lib{}.so", rng.u32(..)));
    std::fs::write(&p, &b)?;
    Ok(audit_args(rng, &p))
}

/// Damage an `ar` archive: member sizes, names, long-name offsets, BSD name lengths,
/// truncation, bit flips.
pub fn mutate_archive(rng: &mut fastrand::Rng, b: &mut Vec<u8>) {
    // Member headers start after the 8-byte magic; find them by their "`\n" terminators.
    let headers: Vec<usize> = (8..b.len().saturating_sub(1))
        .filter(|&i| i >= 58 && b[i] == b'`' && b[i + 1] == b'\n')
        .map(|i| i - 58)
        .collect();
    for _ in 0..rng.usize(1..4) {
        let pick = (!headers.is_empty()).then(|| headers[rng.usize(0..headers.len())]);
        match (rng.u8(0..6), pick) {
            (0, Some(h)) => {
                let size = format!("{:<10}", wild(rng, b.len()) % 10_000_000_000);
                put(b, h + 48, size.as_bytes());
            }
            (1, Some(h)) => put(b, h + 48, b"12x4      "),
            (2, Some(h)) => {
                let name = format!("/{:<15}", rng.u32(..));
                put(b, h, &name.as_bytes()[..16]);
            }
            (3, Some(h)) => {
                let name = format!("#1/{:<13}", rng.u64(0..1 << 40));
                put(b, h, &name.as_bytes()[..16]);
            }
            (4, _) => {
                let keep = rng.usize(0..=b.len());
                b.truncate(keep);
            }
            _ => {
                for _ in 0..rng.usize(1..16) {
                    if !b.is_empty() {
                        let i = rng.usize(0..b.len());
                        b[i] ^= 1 << rng.u8(0..8);
                    }
                }
            }
        }
    }
}

/// An `ar` archive of mini ELF objects (some damaged) and other bytes, damaged, and
/// `["audit", path]`.
pub fn generate_archive(rng: &mut fastrand::Rng, dir: &Path) -> io::Result<Vec<String>> {
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..rng.usize(0..5) {
        let mut data = if rng.u8(0..4) == 0 {
            (0..rng.usize(0..200)).map(|_| rng.u8(..)).collect()
        } else {
            random_elf(rng).build()
        };
        if rng.u8(0..3) == 0 {
            mutate_elf(rng, &mut data);
        }
        let name = if rng.bool() {
            format!("m{i}.o")
        } else {
            format!("a_member_with_a_long_name_{i}.o")
        };
        members.push((name, data));
    }
    let refs: Vec<(&str, Vec<u8>)> = members
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect();
    let mut b = ar(&refs);
    if rng.u8(0..8) != 0 {
        mutate_archive(rng, &mut b);
    }
    let p = dir.join(format!("lib{}.a", rng.u32(..)));
    std::fs::write(&p, &b)?;
    Ok(audit_args(rng, &p))
}

/// Files the doctor reads, with plausible contents.
const ROOT_FILES: [(&str, &str); 6] = [
    (
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n",
    ),
    (
        "proc/driver/nvidia/params",
        "RmProfilingAdminOnly: 1\nDeviceFileMode: 438\n",
    ),
    (
        "proc/self/status",
        "Name:\tcutrace\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n",
    ),
    ("etc/os-release", "ID=ubuntu\nVERSION_ID=\"24.04\"\n"),
    (
        "proc/driver/nvidia/gpus/0000:18:00.0/information",
        "Model: \t NVIDIA H200\n",
    ),
    (
        "usr/local/cuda/version.json",
        "{\"cuda\": {\"version\": \"12.8.1\"}}\n",
    ),
];

/// A doctor root with hostile files, and `["doctor", "--root", path]`.
pub fn generate_doctor_root(rng: &mut fastrand::Rng, dir: &Path) -> io::Result<Vec<String>> {
    use std::os::unix::ffi::OsStrExt;
    let root = dir.join(format!("root{}", rng.u32(..)));
    std::fs::create_dir_all(&root)?;
    for (rel, text) in ROOT_FILES {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("has a parent"))?;
        match rng.u8(0..8) {
            0 => continue, // absent
            1 => mkfifo(&p)?,
            2 => std::os::unix::fs::symlink(p.file_name().expect("name"), &p)?, // loops to itself
            3 => {
                // Huge and sparse: the doctor must read at most its cap.
                let f = std::fs::File::create(&p)?;
                f.set_len(rng.u64(1 << 20..1 << 32))?;
            }
            4 => {
                let junk: Vec<u8> = (0..rng.usize(0..512)).map(|_| rng.u8(..)).collect();
                std::fs::write(&p, junk)?;
            }
            5 => std::fs::create_dir_all(&p)?, // a directory where a file should be
            _ => std::fs::write(&p, text)?,
        }
    }
    // A directory-link loop and a non-UTF-8 name where the doctor lists directories.
    let gpus = root.join("proc/driver/nvidia/gpus");
    std::fs::create_dir_all(&gpus)?;
    if rng.bool() {
        std::os::unix::fs::symlink(".", gpus.join("loop"))?;
    }
    if rng.bool() {
        let name = std::ffi::OsStr::from_bytes(b"0000:\xff\xfe:00.0");
        std::fs::create_dir_all(gpus.join(name))?;
        std::fs::write(gpus.join(name).join("information"), b"Model: \xff\xfe\n")?;
    }
    if rng.bool() {
        let procs = root.join("proc/4242");
        std::fs::create_dir_all(&procs)?;
        mkfifo(&procs.join("comm"))?;
        std::os::unix::fs::symlink("cmdline", procs.join("cmdline"))?;
    }
    Ok(vec!["doctor".into(), "--root".into(), arg(&root)])
}

fn mkfifo(p: &Path) -> io::Result<()> {
    let st = std::process::Command::new("mkfifo").arg(p).status()?;
    if st.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("mkfifo {} failed", p.display())))
    }
}
