//! The audit on hostile or odd input: ELF files whose section headers are damaged but which
//! `ld.so` still loads, a FIFO named as a PATH, and /proc's magic links. Each test is a defect
//! that made the audit say "clean" (exit 0) or walk the whole filesystem.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use cutrace_audit::{audit_with, AuditOptions, AuditReport, Evidence, RealFs, EXIT_CLEAN};
use cutrace_testkit::mini_elf;
use cutrace_testkit::Dir as Scratch;
use mini_elf::MiniElf;

use crate::elf_edit;

/// Run the audit on another thread; a hang fails the test instead of wedging it.
fn audit_within(paths: Vec<PathBuf>, opts: AuditOptions, limit: Duration) -> AuditReport {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(audit_with(&paths, &opts, &RealFs, &mut |_| {}));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the audit did not finish within {limit:?}"))
        .expect("audit")
}

fn legacy_caller() -> Vec<u8> {
    MiniElf::shared()
        .soname("libtrainer.so")
        .import("cuptiEventGroupCreate")
        .build()
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// e_shoff is at byte 40 of an ELF64 header, e_shstrndx at 62, e_phoff at 32.
const E_PHOFF: usize = 32;
const E_SHOFF: usize = 40;
const E_SHSTRNDX: usize = 62;

/// The three ways a section header table is damaged while the loader, which never reads it,
/// still loads the library.
fn damaged_variants() -> Vec<(&'static str, Vec<u8>)> {
    let good = legacy_caller();
    let mut out = Vec::new();
    let mut b = good.clone();
    put_u64(&mut b, E_SHOFF, 1 << 40);
    out.push(("e_shoff out of range", b));
    let mut b = good.clone();
    put_u16(&mut b, E_SHSTRNDX, 0x7fff);
    out.push(("a bad e_shstrndx", b));
    // The section header table is last: cut into it.
    let b = good[..good.len() - 100].to_vec();
    out.push(("the tail cut off", b));
    out
}

/// Defect: audit reported "0 use … 0 could not be read" and exited 0 on a library that calls
/// cuptiEventGroupCreate but whose section header table is damaged. The dynamic segment, which
/// the loader uses, still names the import: it is found there, with or without the strings.
#[test]
fn damaged_section_headers_fall_back_to_the_dynamic_segment() {
    let s = Scratch::new("audit-hardening-dynamic");
    for (how, bytes) in damaged_variants() {
        for strings in [true, false] {
            let p = s.0.join("libtrainer.so");
            std::fs::write(&p, &bytes).expect("write");
            let r = audit_within(
                vec![p.clone()],
                AuditOptions {
                    strings,
                    ..Default::default()
                },
                Duration::from_secs(20),
            );
            let f = r
                .files
                .iter()
                .find(|f| Path::new(&f.path) == p.canonicalize().unwrap())
                .unwrap_or_else(|| panic!("{how}, strings {strings}: not reported: {r:#?}"));
            let a = f
                .apis
                .iter()
                .find(|a| a.symbols.iter().any(|s| s == "cuptiEventGroupCreate"))
                .unwrap_or_else(|| panic!("{how}: cuptiEventGroupCreate not found: {r:#?}"));
            assert_eq!(a.evidence, Evidence::Imported, "{how}: {r:#?}");
            assert_eq!(r.exit_status, 1, "{how}: {}", r.render_text());
        }
    }
}

/// With the program headers damaged too, nothing but the bytes is left: the file is scanned for
/// the names and listed as not read, so the result is never "clean".
#[test]
fn a_file_that_cannot_be_parsed_at_all_is_never_clean() {
    let s = Scratch::new("audit-hardening-unparsable");
    for (how, mut bytes) in damaged_variants() {
        put_u64(&mut bytes, E_PHOFF, 1 << 40);
        let p = s.0.join("libtrainer.so");
        std::fs::write(&p, &bytes).expect("write");
        // With the strings scan: the name is found (dlsym-level evidence), and the file is
        // still said to be unreadable.
        let r = audit_within(
            vec![p.clone()],
            AuditOptions::default(),
            Duration::from_secs(20),
        );
        assert_eq!(r.exit_status, 1, "{how}: {}", r.render_text());
        assert_eq!(r.errors.len(), 1, "{how}: {}", r.render_text());
        assert!(
            r.errors[0].error.contains("malformed ELF"),
            "{how}: {}",
            r.render_text()
        );
        // Without it: incomplete, exit 3.
        let r = audit_within(
            vec![p],
            AuditOptions {
                strings: false,
                ..Default::default()
            },
            Duration::from_secs(20),
        );
        assert_eq!(r.exit_status, 3, "{how}: {}", r.render_text());
        assert!(
            r.render_text().contains("INCOMPLETE"),
            "{}",
            r.render_text()
        );
    }
}

/// A library without any section header table (stripped to what the loader needs: e_shnum 0)
/// is read through its dynamic segment too.
#[test]
fn no_section_headers_at_all_is_read_through_the_dynamic_segment() {
    let s = Scratch::new("audit-hardening-noshdr");
    let mut b = legacy_caller();
    put_u64(&mut b, E_SHOFF, 0);
    b[60..62].copy_from_slice(&0u16.to_le_bytes()); // e_shnum
    put_u16(&mut b, E_SHSTRNDX, 0);
    let p = s.0.join("libtrainer.so");
    std::fs::write(&p, &b).expect("write");
    let r = audit_within(
        vec![p],
        AuditOptions {
            strings: false,
            ..Default::default()
        },
        Duration::from_secs(20),
    );
    assert_eq!(r.exit_status, 1, "{}", r.render_text());
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("mkfifo");
    assert!(st.success());
}

/// Defect: `audit` on a named FIFO said "0 files scanned" and exited 0. It is an error now
/// (exit 3), and it is never opened (opening a FIFO with no writer blocks).
#[test]
fn a_fifo_named_as_a_path_is_reported_not_opened() {
    let s = Scratch::new("audit-hardening-fifo");
    let p = s.0.join("pipe");
    mkfifo(&p);
    let r = audit_within(vec![p], AuditOptions::default(), Duration::from_secs(10));
    assert_eq!(r.exit_status, 3, "{}", r.render_text());
    assert!(
        r.errors[0].error.contains("named pipe"),
        "{}",
        r.render_text()
    );
    // Met inside a directory it is passed over, as before: a FIFO is not a library.
    let r = audit_within(
        vec![s.0.clone()],
        AuditOptions::default(),
        Duration::from_secs(10),
    );
    assert_eq!(r.exit_status, EXIT_CLEAN, "{}", r.render_text());
}

/// Defect: `audit /proc/self` walked the whole filesystem through /proc/self/root (and cwd, exe,
/// fd/N). Links inside /proc are not followed: the walk stays in /proc.
#[test]
fn proc_self_is_audited_without_following_its_magic_links() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut outside = Vec::new();
        let r = audit_with(
            &[PathBuf::from("/proc/self")],
            &AuditOptions {
                strings: false,
                ..Default::default()
            },
            &RealFs,
            &mut |p| {
                if !p.path.starts_with("/proc") && outside.len() < 5 {
                    outside.push(p.path.display().to_string());
                }
            },
        );
        let _ = tx.send((r, outside));
    });
    let (r, outside) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the audit of /proc/self did not finish within 60 s");
    let r = r.expect("audit");
    assert!(outside.is_empty(), "walked out of /proc: {outside:?}");
    for link in ["root", "cwd", "exe"] {
        assert!(
            r.skipped
                .iter()
                .any(|s| s.path == format!("/proc/self/{link}")),
            "/proc/self/{link} not among the skipped: {:#?}",
            r.skipped
        );
    }
}

/// `object`'s archive reader in place of the hand-written one: a BSD archive (`#1/N` names, the
/// name at the start of the member's data) is read member by member as a GNU one is.
#[test]
fn bsd_archive_members_are_read() {
    let s = Scratch::new("audit-hardening-bsd");
    let member = MiniElf::object().import("cuptiEventGroupCreate").build();
    let name = b"legacy_caller.o\0";
    let header = |name: &str, size: usize| {
        let h = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644);
        assert_eq!(h.len(), 60);
        h.into_bytes()
    };
    let mut a = b"!<arch>\n".to_vec();
    a.extend(header(
        &format!("#1/{}", name.len()),
        name.len() + member.len(),
    ));
    a.extend(name);
    a.extend(&member);
    if a.len() % 2 == 1 {
        a.push(b'\n');
    }
    let p = s.0.join("libold.a");
    std::fs::write(&p, &a).expect("write");
    let r = audit_within(
        vec![p],
        AuditOptions {
            strings: false,
            ..Default::default()
        },
        Duration::from_secs(20),
    );
    assert_eq!(r.exit_status, 1, "{}", r.render_text());
    assert_eq!(
        r.files[0].members,
        ["legacy_caller.o"],
        "{}",
        r.render_text()
    );
}

fn report_of(p: &Path, strings: bool) -> AuditReport {
    audit_within(
        vec![p.to_path_buf()],
        AuditOptions {
            strings,
            ..Default::default()
        },
        Duration::from_secs(20),
    )
}

/// Defect: `audit --no-strings` called a library that imports cuptiEventGroupCreate clean
/// (exit 0, "0 could not be read") when its dynamic symbols could be read by neither the section
/// headers nor the dynamic segment: the section headers parsed but held no `.dynsym` (there were
/// none, or `.dynsym` was typed SHT_NULL) and the dynamic segment's error was dropped; or
/// DT_HASH's `nchain` of 0 was taken as the symbol count. Now a DT_SYMENT of 23 or 0 makes the
/// file unreadable (an error, exit 3 without other findings), and a table that DT_HASH calls
/// empty is read as far as it reaches (to the next table the dynamic section points at): the
/// import is found. Never exit 0.
#[test]
fn a_library_whose_dynamic_symbols_cannot_be_read_is_never_clean() {
    let s = Scratch::new("audit-hardening-unreadable-dynsym");
    let p = s.0.join("libtrainer.so");
    let mut wrong = Vec::new();
    let shapes = elf_edit::unparsable_shapes(
        &elf_edit::legacy_caller(&["train", "cudaMalloc"]),
        &elf_edit::mini_zero_nchain,
    );
    assert_eq!(shapes.len(), 8);
    for shape in shapes {
        std::fs::write(&p, &shape.bytes).expect("write");
        for strings in [false, true] {
            let r = report_of(&p, strings);
            let text = r.render_text();
            let how = format!("{}, strings {strings}", shape.name);
            let imported = r.files.iter().any(|f| {
                f.apis.iter().any(|a| {
                    a.evidence == Evidence::Imported
                        && a.symbols.iter().any(|s| s == "cuptiEventGroupCreate")
                })
            });
            let ok = if shape.unreadable {
                // The symbol table cannot be walked: the file is named as not read.
                r.errors.len() == 1
                    && r.errors[0].error.contains("DT_SYMENT")
                    && (strings || (r.exit_status == 3 && text.contains("INCOMPLETE")))
            } else {
                // The table is there to be read, as the loader reads it: the import is found.
                r.exit_status == 1 && imported && r.errors.is_empty()
            };
            if !ok || r.exit_status == EXIT_CLEAN {
                wrong.push(format!("{how}: exit {}: {text}", r.exit_status));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The same shapes made of libraries `cc` links (a real layout: .gnu.hash and/or .hash,
/// .dynsym, .dynstr, versions, relocations), with `--hash-style=sysv` (DT_HASH alone), `gnu`
/// and `both`. Skipped, loudly, without a C compiler.
#[test]
fn cc_built_libraries_damaged_the_same_ways_are_never_clean() {
    let s = Scratch::new("audit-hardening-cc-dynsym");
    let src = s.0.join("caller.c");
    std::fs::write(
        &src,
        "extern int cuptiEventGroupCreate(void *c, void **g, unsigned f);\n\
         int helper(int x) { return x + 1; }\n\
         int legacy(void) { void *g; return cuptiEventGroupCreate(0, &g, 0); }\n",
    )
    .expect("write source");
    let mut wrong = Vec::new();
    for style in ["sysv", "gnu", "both"] {
        let lib = s.0.join(format!("libcaller-{style}.so"));
        let built = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .arg(format!("-Wl,--hash-style={style}"))
            .arg("-Wl,--unresolved-symbols=ignore-all")
            .status();
        match built {
            Ok(st) if st.success() => {}
            Ok(st) => panic!("cc failed ({st})"),
            Err(e) => {
                cutrace_testkit::loud!(
                    "SKIPPED: no C compiler `cc` to build test libraries ({e}); install gcc to run this test"
                );
                return;
            }
        }
        let good = std::fs::read(&lib).expect("read the library");
        for shape in elf_edit::unparsable_shapes(&good, &elf_edit::zero_nchain) {
            let p = s.0.join("libdamaged.so");
            std::fs::write(&p, &shape.bytes).expect("write");
            let r = report_of(&p, false);
            let want = if shape.unreadable { 3 } else { 1 };
            if r.exit_status != want {
                wrong.push(format!(
                    "{style}, {}: exit {} (not {want}): {}",
                    shape.name,
                    r.exit_status,
                    r.render_text()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
