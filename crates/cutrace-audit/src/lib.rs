//! `cutrace audit`: find the ELF files and `ar` archives that use CUPTI APIs which CUDA 13.0
//! dropped (Event, Metric, PC Sampling Activity) or deprecated (Profiling), and the copies of
//! libcupti in a tree, with their versions. "Audit for the dropped APIs before a CUDA 13 rollout.
//! Anything still calling the Event or Metric API returns
//! CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED and collects nothing." (CUPTI release notes,
//! https://docs.nvidia.com/cupti/release-notes/release-notes.html)
//!
//! Three kinds of evidence, strongest first: the file imports the API (a dynamic call); the file
//! defines it (a statically linked CUPTI: the API is inside, whether it is called cannot be told
//! from symbols); the file's bytes name it (a `dlsym(h, "cuptiEventGroupCreate")` lookup,
//! or just a string: lower confidence). A file or directory that cannot be read is an error of
//! the audit, counted, and makes the result incomplete (exit 3 when nothing else was found); so
//! is an ELF file whose symbols could be read neither through its section headers nor through
//! its dynamic segment, and a special file (FIFO, device) named as a PATH.
#![forbid(unsafe_code)]

pub mod elf;
pub mod symbols;

use object::{ReadCache, ReadRef};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Removal {
    /// Gone in CUDA 13.0: calls fail.
    Dropped,
    /// Deprecated in CUDA 13.0: still works, will go.
    Deprecated,
}

/// How a file was seen to use an API family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    /// Undefined symbols: the file calls the API in a libcupti loaded beside it.
    Imported,
    /// Defined symbols in a program or shared object that is not libcupti itself: a statically
    /// linked CUPTI that carries the API. Whether the program calls it cannot be told from
    /// symbols.
    Defined,
    /// The names occur in the file's bytes but not among its symbols: looked up at run time
    /// (`dlsym`) most likely, or a mere string. Lower confidence.
    Strings,
}

/// One CUPTI API family and what replaces it.
pub struct ApiFamily {
    pub name: &'static str,
    pub header: &'static str,
    pub removal: Removal,
    pub replacement: &'static str,
    pub symbols: &'static [&'static str],
}

pub const FAMILIES: [ApiFamily; 4] = [
    ApiFamily {
        name: "Event API",
        header: "cupti_events.h",
        removal: Removal::Dropped,
        replacement: "Range Profiling API (cupti_range_profiler.h) with the Host API (cupti_profiler_host.h); calls now return CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
        symbols: symbols::EVENT_API,
    },
    ApiFamily {
        name: "Metric API",
        header: "cupti_metrics.h",
        removal: Removal::Dropped,
        replacement: "Range Profiling API (cupti_range_profiler.h) with the Host API (cupti_profiler_host.h); calls now return CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
        symbols: symbols::METRIC_API,
    },
    ApiFamily {
        name: "PC Sampling Activity API",
        header: "cupti_activity.h",
        removal: Removal::Dropped,
        replacement: "PC Sampling API (cupti_pcsampling.h)",
        symbols: symbols::PC_SAMPLING_ACTIVITY_API,
    },
    ApiFamily {
        name: "Profiling API",
        header: "cupti_profiler_target.h",
        removal: Removal::Deprecated,
        replacement: "Range Profiling API (cupti_range_profiler.h)",
        symbols: symbols::PROFILING_API,
    },
];

#[derive(Debug, Clone, Serialize)]
pub struct ApiFinding {
    pub api: &'static str,
    pub header: &'static str,
    pub removal: Removal,
    pub evidence: Evidence,
    pub symbols: Vec<String>,
    pub replacement: &'static str,
}

/// A copy of libcupti inside the scanned tree: a bundled .so (also as renamed by auditwheel,
/// `libcupti-3a4b5c6d.so.12`), a program or library that defines CUPTI's entry points itself
/// (statically linked), a static CUPTI archive, or an object file of one.
#[derive(Debug, Clone, Serialize)]
pub struct CuptiCopy {
    pub how: &'static str,
    pub soname: Option<String>,
    /// CUDA major from the SONAME or file name (libcupti.so.12, libcupti-<hash>.so.12).
    pub cuda_major: Option<u32>,
    /// nvcc's "Cuda compilation tools, release X.Y" embedded in the file.
    pub build: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The file's real path (symbolic links resolved).
    pub path: String,
    pub apis: Vec<ApiFinding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cupti_copy: Option<CuptiCopy>,
    /// For an `ar` archive: the members the findings come from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

/// A file or directory the audit could not read: the result does not cover it.
#[derive(Debug, Clone, Serialize)]
pub struct AuditError {
    pub path: String,
    pub error: String,
}

/// A directory the walk did not enter, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    pub paths: Vec<String>,
    pub files_scanned: u64,
    pub elf_files: u64,
    /// `ar` archives (`.a`) whose members were read.
    pub archives: u64,
    /// Only files with something to say.
    pub files: Vec<FileReport>,
    /// Files and directories that could not be read; any makes the audit incomplete.
    pub errors: Vec<AuditError>,
    pub skipped: Vec<Skipped>,
    /// Whether file contents were scanned for API names (dlsym lookups).
    pub strings_scanned: bool,
    pub dropped_found: bool,
    pub incomplete: bool,
    /// 0 nothing dropped found and everything read; 1 a dropped API found; 3 nothing dropped
    /// found but something could not be read.
    pub exit_status: i32,
}

pub const EXIT_CLEAN: i32 = 0;
pub const EXIT_DROPPED: i32 = 1;
pub const EXIT_INCOMPLETE: i32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum AuditPathError {
    /// The OS error is the source (shown beneath by the CLI, not pasted into this line).
    #[error("cannot read {path}")]
    Missing {
        path: String,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Scan every ELF file's bytes for the API names (finds `dlsym` lookups; reads whole files).
    pub strings: bool,
    /// Do not leave the filesystem each PATH is on (like `find -xdev`).
    pub one_file_system: bool,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            strings: true,
            one_file_system: false,
        }
    }
}

/// Where the walk is, for a progress line.
pub struct Progress<'a> {
    pub files_scanned: u64,
    pub elf_files: u64,
    pub errors: usize,
    pub path: &'a Path,
}

pub trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

/// The seam through which the audit opens files and lists directories, so that a test can make
/// one fail (running as root, `chmod 000` does not).
pub trait Fs {
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadSeek>>;
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<std::io::Result<PathBuf>>>;
}

/// The real filesystem.
pub struct RealFs;

impl Fs for RealFs {
    /// Opens without blocking (a FIFO or a device put in place of a file after the walk looked
    /// at it must not hang the audit), and reads only what is still a regular file once open.
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn ReadSeek>> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(Box::new(f))
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<std::io::Result<PathBuf>>> {
        Ok(std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect())
    }
}

/// `libcupti.so*`, or the name auditwheel gives its copy: `libcupti-<hash>.so*`.
fn is_libcupti_name(name: &str) -> bool {
    if name.starts_with("libcupti.so") {
        return true;
    }
    name.strip_prefix("libcupti-")
        .and_then(|r| r.split_once(".so"))
        .is_some_and(|(hash, _)| {
            !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// The CUDA major in `libcupti.so.12` or `libcupti-3a4b5c6d.so.12`; none in the
/// year-numbered file names (`libcupti.so.2025.1.0`).
fn major_from_soname(name: &str) -> Option<u32> {
    if !is_libcupti_name(name) {
        return None;
    }
    name.split_once(".so.")?
        .1
        .split('.')
        .next()?
        .parse()
        .ok()
        .filter(|m| *m < 100)
}

/// A reader that remembers its first I/O error, so that a parse that failed because the file
/// could not be read is told apart from a malformed file.
struct Tracked {
    inner: Box<dyn ReadSeek>,
    error: Rc<RefCell<Option<std::io::Error>>>,
}

impl Tracked {
    fn note<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            let mut slot = self.error.borrow_mut();
            if slot.is_none() && e.kind() != std::io::ErrorKind::UnexpectedEof {
                *slot = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        }
        r
    }
}

impl Read for Tracked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let r = self.inner.read(buf);
        self.note(r)
    }
}

impl Seek for Tracked {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let r = self.inner.seek(pos);
        self.note(r)
    }
}

/// All API names the audit looks for.
fn all_names() -> HashSet<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|f| f.symbols.iter().copied())
        .chain(["cuptiGetVersion"])
        .collect()
}

/// Group the names in `set` by family, as findings with `evidence`.
fn findings(set: &BTreeSet<&str>, evidence: Evidence) -> Vec<ApiFinding> {
    FAMILIES
        .iter()
        .filter_map(|fam| {
            let found: Vec<String> = fam
                .symbols
                .iter()
                .filter(|s| set.contains(**s))
                .map(|s| s.to_string())
                .collect();
            if found.is_empty() {
                return None;
            }
            Some(ApiFinding {
                api: fam.name,
                header: fam.header,
                removal: fam.removal,
                evidence,
                symbols: found,
                replacement: fam.replacement,
            })
        })
        .collect()
}

/// What one file turned out to be.
#[derive(Debug, Default)]
pub struct FileScan {
    pub is_elf: bool,
    pub is_archive: bool,
    pub report: Option<FileReport>,
    /// The file could not be read (wholly or in part).
    pub error: Option<String>,
}

/// What the symbols of a file (or of all an archive's members) say, before classification.
#[derive(Default)]
struct Seen {
    imported: BTreeSet<String>,
    defined: BTreeSet<String>,
    soname: Option<String>,
    relocatable: bool,
    /// Archive members with CUPTI symbols.
    members: Vec<String>,
}

const AR_MAGIC: &[u8; 8] = b"!<arch>\n";

/// One member of an `ar` archive: its name and where its bytes are.
struct Member {
    name: String,
    offset: u64,
    size: u64,
}

/// The members of the archive in `data` (symbol index and long-name table left out), through
/// `object`'s reader: GNU/System V long names, BSD `#1/N` names, AIX big archives. A thin
/// archive's members are files of their own, audited where they lie: none are listed.
fn archive_members<'d, R: object::ReadRef<'d>>(data: R) -> Result<Vec<Member>, String> {
    let archive = object::read::archive::ArchiveFile::parse(data).map_err(|e| e.to_string())?;
    if archive.is_thin() {
        return Ok(Vec::new());
    }
    archive
        .members()
        .map(|m| {
            let m = m.map_err(|e| e.to_string())?;
            let (offset, size) = m.file_range();
            Ok(Member {
                name: String::from_utf8_lossy(m.name()).into_owned(),
                offset,
                size,
            })
        })
        .collect()
}

/// Audit one file: ELF, `ar` archive, or neither.
pub fn scan_file(fs: &dyn Fs, path: &Path, opts: &AuditOptions) -> FileScan {
    let mut out = FileScan::default();
    let mut reader = match fs.open(path) {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(format!("cannot read: {e}"));
            return out;
        }
    };
    let (head, n) = match elf::read_head::<8>(&mut reader) {
        Ok(h) => h,
        Err(e) => {
            out.error = Some(format!("cannot read: {e}"));
            return out;
        }
    };
    out.is_elf = n >= 4 && head[..4] == elf::ELF_MAGIC;
    out.is_archive = n == 8 && &head == AR_MAGIC;
    if !out.is_elf && !out.is_archive {
        return out;
    }
    let error = Rc::new(RefCell::new(None));
    let tracked = Tracked {
        inner: reader,
        error: error.clone(),
    };
    let io_failed = |what: &str| {
        error
            .borrow()
            .as_ref()
            .map(|e: &std::io::Error| format!("cannot read {what}: {e}"))
    };
    let interesting = all_names();
    let mut cache = ReadCache::new(tracked);
    let mut seen = Seen::default();
    if out.is_elf {
        match elf::symbols_of(&cache) {
            Ok(s) => {
                seen.relocatable = s.is_relocatable;
                seen.soname = s.soname;
                seen.imported.extend(s.imported);
                seen.defined.extend(s.defined);
            }
            Err(msg) => {
                if let Some(e) = io_failed("its ELF headers") {
                    out.error = Some(e);
                    return out;
                }
                // Never a silent "clean": a file `ld.so` may well load (it reads no section
                // headers) is still scanned for the names, and counted as not fully read.
                // (A file named like libcupti has its strings read for its build string.)
                let named = path
                    .file_name()
                    .is_some_and(|n| is_libcupti_name(&n.to_string_lossy()));
                let strings = if opts.strings || named {
                    "only its strings were scanned"
                } else {
                    "its strings were not scanned either (--no-strings)"
                };
                out.error = Some(format!(
                    "malformed ELF, its symbols cannot be read ({msg}); {strings}"
                ));
            }
        }
    } else {
        let list = match archive_members(&cache) {
            Ok(l) => l,
            Err(msg) => {
                out.error = Some(io_failed("the archive").unwrap_or_else(|| {
                    format!("malformed ar archive, its members cannot be listed ({msg})")
                }));
                return out;
            }
        };
        cache.clear();
        let mut defined_anywhere: BTreeSet<String> = BTreeSet::new();
        for m in &list {
            let member = cache.range(m.offset, m.size);
            let parsed = elf::symbols_of(member);
            let is_elf_member = member
                .read_bytes_at(0, 4)
                .is_ok_and(|b| b == elf::ELF_MAGIC);
            // Only the symbols are kept: free the member's cached blocks.
            cache.clear();
            let s = match parsed {
                Ok(s) => s,
                Err(msg) => {
                    if let Some(e) = io_failed(&format!("member {}", m.name)) {
                        out.error = Some(e);
                        return out;
                    }
                    if is_elf_member && out.error.is_none() {
                        out.error = Some(format!(
                            "member {}: malformed ELF, its symbols cannot be read ({msg})",
                            m.name
                        ));
                    }
                    continue; // not an ELF member (a text file, LLVM bitcode), or damaged
                }
            };
            let relevant = s
                .imported
                .iter()
                .chain(&s.defined)
                .any(|n| interesting.contains(n.as_str()));
            if relevant {
                seen.members.push(m.name.clone());
            }
            seen.imported.extend(s.imported);
            defined_anywhere.extend(s.defined);
        }
        // A member's call into another member is inside the archive, not an import.
        seen.imported.retain(|n| !defined_anywhere.contains(n));
        seen.defined = defined_anywhere;
        seen.relocatable = true;
    }
    finish(path, opts, seen, cache.into_inner(), &interesting, out)
}

fn finish(
    path: &Path,
    opts: &AuditOptions,
    seen: Seen,
    mut reader: Tracked,
    interesting: &HashSet<&'static str>,
    mut out: FileScan,
) -> FileScan {
    let is_archive = out.is_archive;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let of = |set: &BTreeSet<String>| -> BTreeSet<&'static str> {
        interesting
            .iter()
            .copied()
            .filter(|n| set.contains(*n))
            .collect()
    };
    let imported = of(&seen.imported);
    let defined = of(&seen.defined);
    let named =
        is_libcupti_name(&file_name) || seen.soname.as_deref().is_some_and(is_libcupti_name);
    let defines_cupti = !defined.is_empty();
    let how = if named {
        Some("bundled libcupti")
    } else if is_archive && (defines_cupti || file_name.starts_with("libcupti")) {
        Some("static CUPTI archive")
    } else if seen.relocatable && defines_cupti {
        Some("object file of a static CUPTI")
    } else if defines_cupti {
        Some("statically linked CUPTI")
    } else {
        None
    };
    let mut apis = findings(&imported, Evidence::Imported);
    // A linked program or library that is not libcupti itself carries a static CUPTI: the
    // dropped API is inside it. (libcupti, its archive and its objects define it by nature.)
    if how.is_some() && !named && !seen.relocatable {
        apis.extend(findings(&defined, Evidence::Defined));
    }
    let mut hits = elf::StringHits::default();
    if how.is_some() || opts.strings {
        let scanned = reader
            .seek(SeekFrom::Start(0))
            .and_then(|_| elf::scan_strings(&mut reader, interesting));
        match scanned {
            Ok(h) => hits = h,
            Err(e) => out.error = Some(format!("cannot read all of it: {e}")),
        }
    }
    if how.is_none() && opts.strings {
        let only_named: BTreeSet<&str> = hits
            .names
            .iter()
            .map(String::as_str)
            .filter(|n| !seen.imported.contains(*n) && !seen.defined.contains(*n))
            .collect();
        apis.extend(findings(&only_named, Evidence::Strings));
    }
    let cupti_copy = how.map(|how| CuptiCopy {
        how,
        cuda_major: seen
            .soname
            .as_deref()
            .and_then(major_from_soname)
            .or_else(|| major_from_soname(&file_name)),
        soname: seen.soname.clone(),
        build: hits.cuda_release.clone(),
    });
    if !apis.is_empty() || cupti_copy.is_some() {
        out.report = Some(FileReport {
            path: real_path(path),
            apis,
            cupti_copy,
            members: seen.members,
        });
    }
    out
}

fn real_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

const PROC_FS: &str = "proc filesystem";

/// What a file that is neither a directory nor a regular file is.
fn special_kind(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_fifo() {
        "a named pipe (FIFO), not a regular file"
    } else if t.is_socket() {
        "a socket, not a regular file"
    } else if t.is_char_device() {
        "a character device, not a regular file"
    } else if t.is_block_device() {
        "a block device, not a regular file"
    } else {
        "not a regular file"
    }
}

/// Filesystems with nothing to audit and, in /proc's case, endless or blocking files.
fn pseudo_fs(path: &Path) -> Option<&'static str> {
    let st = rustix::fs::statfs(path).ok()?;
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as u64 & 0xffff_ffff;
    Some(match magic {
        0x9fa0 => PROC_FS,
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb | 0x6367_7270 => "cgroup filesystem",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpf filesystem",
        0x6265_6570 => "configfs",
        0x6165_676c => "pstore",
        0xde5e_81e4 => "efivarfs",
        0x4249_4e4d => "binfmt_misc",
        0x6573_5543 => "fusectl",
        0x6e73_6673 => "nsfs",
        _ => return None,
    })
}

/// Walk `paths` (files or directories) with the default options on the real filesystem.
pub fn audit(paths: &[PathBuf]) -> Result<AuditReport, AuditPathError> {
    audit_with(paths, &AuditOptions::default(), &RealFs, &mut |_| {})
}

struct Entry {
    path: PathBuf,
    /// The device of the directory it was listed in; None for a PATH given.
    parent_dev: Option<u64>,
    root_dev: u64,
    /// It was listed in a directory of the proc filesystem, whose links (`/proc/PID/root`,
    /// `cwd`, `exe`, `fd/N`) are magic: they lead anywhere, `root` to the whole filesystem.
    in_proc: bool,
}

/// Walk `paths` (files or directories), following symbolic links but never visiting a file or
/// directory twice (by device and inode), so link loops end and linked copies count once.
/// /proc, /sys, /dev and other pseudo filesystems are not entered unless given as a PATH.
/// `progress` is called after each regular file.
pub fn audit_with(
    paths: &[PathBuf],
    opts: &AuditOptions,
    fs: &dyn Fs,
    progress: &mut dyn FnMut(&Progress),
) -> Result<AuditReport, AuditPathError> {
    let report = AuditReport {
        paths: paths.iter().map(|p| p.display().to_string()).collect(),
        strings_scanned: opts.strings,
        ..Default::default()
    };
    let mut walk = Walk {
        opts,
        fs,
        report,
        seen: HashSet::new(),
        stack: given_entries(paths)?,
        myself: std::env::current_exe()
            .and_then(std::fs::metadata)
            .ok()
            .map(|m| (m.dev(), m.ino())),
        special: special_dirs(),
    };
    while let Some(entry) = walk.stack.pop() {
        walk.visit(entry, progress);
    }
    let mut report = walk.report;
    conclude(&mut report);
    Ok(report)
}

/// How a skipped entry can be audited after all.
const GIVE_AS_PATH: &str = "give it as a PATH to scan it";

/// The walk's first entries, one per PATH given, in the order they are popped: depth-first, in
/// a stable order (each directory's sorted entries are reversed onto the stack).
fn given_entries(paths: &[PathBuf]) -> Result<Vec<Entry>, AuditPathError> {
    let mut stack: Vec<Entry> = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).map_err(|source| AuditPathError::Missing {
            path: p.display().to_string(),
            source,
        })?;
        stack.push(Entry {
            path: p.clone(),
            parent_dev: None,
            root_dev: md.dev(),
            in_proc: false,
        });
    }
    stack.reverse();
    Ok(stack)
}

/// /proc, /sys and /dev by identity, wherever a link leads to them from, with why they are not
/// entered.
fn special_dirs() -> Vec<((u64, u64), &'static str)> {
    [
        ("/proc", "proc filesystem"),
        ("/sys", "sysfs"),
        ("/dev", "device files"),
    ]
    .into_iter()
    .filter_map(|(p, why)| std::fs::metadata(p).ok().map(|m| ((m.dev(), m.ino()), why)))
    .collect()
}

/// Sets what the whole walk found: whether a dropped API was met, whether the audit is
/// incomplete, and the exit status they give.
fn conclude(report: &mut AuditReport) {
    report.dropped_found = report
        .files
        .iter()
        .any(|f| f.apis.iter().any(|a| a.removal == Removal::Dropped));
    report.incomplete = !report.errors.is_empty();
    report.exit_status = if report.dropped_found {
        EXIT_DROPPED
    } else if report.incomplete {
        EXIT_INCOMPLETE
    } else {
        EXIT_CLEAN
    };
}

/// One audit walk under way: the report so far, the files and directories met, and the entries
/// still to visit.
struct Walk<'a> {
    opts: &'a AuditOptions,
    fs: &'a dyn Fs,
    report: AuditReport,
    /// Files and directories visited (or skipped as on another filesystem), by (device, inode).
    seen: HashSet<(u64, u64)>,
    stack: Vec<Entry>,
    /// This program's own file, by (device, inode).
    myself: Option<(u64, u64)>,
    special: Vec<((u64, u64), &'static str)>,
}

impl Walk<'_> {
    /// Visits one entry: skips it, lists it (a directory) or scans it (a regular file).
    fn visit(&mut self, entry: Entry, progress: &mut dyn FnMut(&Progress)) {
        let Entry {
            path,
            parent_dev,
            root_dev,
            in_proc,
        } = entry;
        if in_proc && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            self.report.skipped.push(Skipped {
                path: path.display().to_string(),
                reason: format!("a link in the proc filesystem, not followed; {GIVE_AS_PATH}"),
            });
            return;
        }
        let md = match std::fs::metadata(&path) {
            Ok(md) => md,
            Err(e) => {
                // A dangling symlink is not worth reporting; anything else is.
                if std::fs::symlink_metadata(&path)
                    .map(|m| !m.file_type().is_symlink())
                    .unwrap_or(true)
                {
                    self.report.errors.push(AuditError {
                        path: real_path(&path),
                        error: e.to_string(),
                    });
                }
                return;
            }
        };
        let given = parent_dev.is_none();
        if self.opts.one_file_system && !given && md.dev() != root_dev {
            if md.is_dir() && self.seen.insert((md.dev(), md.ino())) {
                self.report.skipped.push(Skipped {
                    path: real_path(&path),
                    reason: format!("another filesystem (--one-file-system); {GIVE_AS_PATH}"),
                });
            }
            return;
        }
        if !self.seen.insert((md.dev(), md.ino())) {
            return;
        }
        if md.is_dir() {
            self.visit_dir(&path, &md, parent_dev, root_dev);
            return;
        }
        if !md.is_file() {
            // Sockets, FIFOs and devices met in a tree are not libraries; one named as a PATH
            // was meant to be audited and cannot be: say so (it is never opened).
            if given {
                self.report.errors.push(AuditError {
                    path: real_path(&path),
                    error: format!("{}: not audited", special_kind(&md)),
                });
            }
            return;
        }
        self.scan_regular(&path, &md, progress);
    }

    /// A directory met in a tree (not given as a PATH) is skipped when it is /proc, /sys or
    /// /dev, or a pseudo filesystem mounted there; otherwise its entries go on the stack, sorted.
    fn visit_dir(
        &mut self,
        path: &Path,
        md: &std::fs::Metadata,
        parent_dev: Option<u64>,
        root_dev: u64,
    ) {
        if parent_dev.is_some() {
            let why = self
                .special
                .iter()
                .find(|(id, _)| *id == (md.dev(), md.ino()))
                .map(|(_, why)| *why)
                .or_else(|| {
                    (parent_dev != Some(md.dev()))
                        .then(|| pseudo_fs(path))
                        .flatten()
                });
            if let Some(why) = why {
                self.report.skipped.push(Skipped {
                    path: real_path(path),
                    reason: format!("{why}; {GIVE_AS_PATH}"),
                });
                return;
            }
        }
        let listing_proc = pseudo_fs(path) == Some(PROC_FS);
        match self.fs.read_dir(path) {
            Ok(entries) => {
                let mut children = Vec::new();
                for e in entries {
                    match e {
                        Ok(p) => children.push(p),
                        Err(e) => self.report.errors.push(AuditError {
                            path: real_path(path),
                            error: format!("cannot list directory entry: {e}"),
                        }),
                    }
                }
                children.sort();
                self.stack.extend(children.into_iter().rev().map(|p| Entry {
                    path: p,
                    parent_dev: Some(md.dev()),
                    root_dev,
                    in_proc: listing_proc,
                }));
            }
            Err(e) => self.report.errors.push(AuditError {
                path: real_path(path),
                error: format!("cannot list directory: {e}"),
            }),
        }
    }

    /// Scans one regular file (this program's own without its strings) into the report, then
    /// reports progress.
    fn scan_regular(
        &mut self,
        path: &Path,
        md: &std::fs::Metadata,
        progress: &mut dyn FnMut(&Progress),
    ) {
        let report = &mut self.report;
        report.files_scanned += 1;
        // Shorter than an ELF header (or an archive header with a member): nothing to read.
        if md.len() >= 64 {
            // cutrace names every API it looks for: its own strings are no finding.
            let scan = if Some((md.dev(), md.ino())) == self.myself {
                let own = AuditOptions {
                    strings: false,
                    ..self.opts.clone()
                };
                scan_file(self.fs, path, &own)
            } else {
                scan_file(self.fs, path, self.opts)
            };
            report.elf_files += u64::from(scan.is_elf);
            report.archives += u64::from(scan.is_archive);
            if let Some(f) = scan.report {
                report.files.push(f);
            }
            if let Some(error) = scan.error {
                report.errors.push(AuditError {
                    path: real_path(path),
                    error,
                });
            }
        }
        progress(&Progress {
            files_scanned: report.files_scanned,
            elf_files: report.elf_files,
            errors: report.errors.len(),
            path,
        });
    }
}

impl AuditReport {
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for f in &self.files {
            let _ = writeln!(out, "{}", f.path);
            if !f.members.is_empty() {
                let _ = writeln!(out, "    archive members: {}", f.members.join(", "));
            }
            for a in &f.apis {
                let verdict = match a.removal {
                    Removal::Dropped => "DROPPED in CUDA 13.0",
                    Removal::Deprecated => "deprecated in CUDA 13.0",
                };
                let syms = a.symbols.join(", ");
                let _ = match a.evidence {
                    Evidence::Imported => {
                        writeln!(out, "    {} ({}) {verdict}: {syms}", a.api, a.header)
                    }
                    Evidence::Defined => writeln!(
                        out,
                        "    {} ({}) {verdict}, present in the CUPTI statically linked here (defines {syms}); whether it is called cannot be told from symbols",
                        a.api, a.header
                    ),
                    Evidence::Strings => writeln!(
                        out,
                        "    {} ({}) {verdict}, named in its strings (dlsym?; lower confidence): {syms}",
                        a.api, a.header
                    ),
                };
                let _ = writeln!(out, "        use instead: {}", a.replacement);
            }
            if let Some(c) = &f.cupti_copy {
                let ver = match (c.cuda_major, &c.build) {
                    (Some(m), Some(b)) => format!("CUDA {m}.x; {b}"),
                    (Some(m), None) => format!("CUDA {m}.x"),
                    (None, Some(b)) => b.clone(),
                    (None, None) => "version unknown".into(),
                };
                let so = c
                    .soname
                    .as_deref()
                    .map(|s| format!(" SONAME {s};"))
                    .unwrap_or_default();
                let _ = writeln!(out, "    CUPTI copy ({}):{so} {ver}", c.how);
            }
        }
        for e in &self.errors {
            let _ = writeln!(out, "error: {}: {}", e.path, e.error);
        }
        for s in &self.skipped {
            let _ = writeln!(out, "skipped: {} ({})", s.path, s.reason);
        }
        let callers = self.files.iter().filter(|f| !f.apis.is_empty()).count();
        let by_name_only = self
            .files
            .iter()
            .filter(|f| {
                !f.apis.is_empty() && f.apis.iter().all(|a| a.evidence == Evidence::Strings)
            })
            .count();
        let copies = self.files.iter().filter(|f| f.cupti_copy.is_some()).count();
        let mut kinds = format!("{} ELF", self.elf_files);
        if self.archives > 0 {
            let _ = write!(kinds, ", {} ar archives", self.archives);
        }
        let strings = if !self.strings_scanned {
            " (strings not scanned: --no-strings)".into()
        } else if by_name_only > 0 {
            format!(" ({by_name_only} only by name in its strings: dlsym?)")
        } else {
            " (strings checked for dlsym names too)".into()
        };
        let _ = writeln!(
            out,
            "{} files scanned ({kinds}); {callers} use a dropped or deprecated CUPTI API{strings}; {copies} CUPTI copies; {} could not be read{}",
            self.files_scanned,
            self.errors.len(),
            if self.skipped.is_empty() {
                String::new()
            } else {
                format!("; {} directories skipped", self.skipped.len())
            }
        );
        if self.dropped_found {
            let _ = writeln!(
                out,
                "APIs dropped in CUDA 13.0 found: those calls return CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED there"
            );
        }
        if self.incomplete {
            let _ = writeln!(
                out,
                "INCOMPLETE: {} files or directories could not be read (the error: lines); what they hold was not audited",
                self.errors.len()
            );
        }
        out
    }
}
