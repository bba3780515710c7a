//! `cutrace audit`: find the ELF files that import CUPTI APIs which CUDA 13.0 dropped (Event,
//! Metric, PC Sampling Activity) or deprecated (Profiling), and the copies of libcupti bundled in
//! a tree, with their versions. "Audit for the dropped APIs before a CUDA 13 rollout. Anything
//! still calling the Event or Metric API returns CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED and
//! collects nothing." (seed, "How to maintain it"; CUPTI release notes, seed ref 3)

pub mod symbols;

use crate::elf;
use serde::Serialize;
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Removal {
    /// Gone in CUDA 13.0: calls fail.
    Dropped,
    /// Deprecated in CUDA 13.0: still works, will go.
    Deprecated,
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
    pub symbols: Vec<String>,
    pub replacement: &'static str,
}

/// A copy of libcupti inside the scanned tree (a bundled .so, or an ELF that defines CUPTI's
/// entry points itself: statically linked).
#[derive(Debug, Clone, Serialize)]
pub struct CuptiCopy {
    pub how: &'static str,
    pub soname: Option<String>,
    /// CUDA major from the SONAME or file name (libcupti.so.12).
    pub cuda_major: Option<u32>,
    /// nvcc's "Cuda compilation tools, release X.Y" embedded in the file.
    pub build: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub path: String,
    pub apis: Vec<ApiFinding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cupti_copy: Option<CuptiCopy>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditError {
    pub path: String,
    pub error: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    pub paths: Vec<String>,
    pub files_scanned: u64,
    pub elf_files: u64,
    /// Only files with something to say.
    pub files: Vec<FileReport>,
    pub errors: Vec<AuditError>,
    pub dropped_found: bool,
    pub exit_status: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditPathError {
    #[error("{path}: {source}")]
    Missing {
        path: String,
        source: std::io::Error,
    },
}

fn major_from_soname(name: &str) -> Option<u32> {
    name.strip_prefix("libcupti.so.")?
        .split('.')
        .next()?
        .parse()
        .ok()
        .filter(|m| *m < 100)
}

/// Audit one ELF file already known to start with the ELF magic.
pub fn audit_file(path: &Path) -> Result<Option<FileReport>, elf::ElfError> {
    let syms = elf::read_symbols(path)?;
    let imported: HashSet<&str> = syms.imported.iter().map(String::as_str).collect();
    let mut apis = Vec::new();
    for fam in &FAMILIES {
        let found: Vec<String> = fam
            .symbols
            .iter()
            .filter(|s| imported.contains(**s))
            .map(|s| s.to_string())
            .collect();
        if !found.is_empty() {
            apis.push(ApiFinding {
                api: fam.name,
                header: fam.header,
                removal: fam.removal,
                symbols: found,
                replacement: fam.replacement,
            });
        }
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let named = file_name.starts_with("libcupti.so");
    let defines = syms.defined.iter().any(|s| s == "cuptiGetVersion");
    let cupti_copy = (named || defines).then(|| CuptiCopy {
        how: if named {
            "bundled libcupti"
        } else {
            "defines cuptiGetVersion (statically linked CUPTI)"
        },
        cuda_major: syms
            .soname
            .as_deref()
            .and_then(major_from_soname)
            .or_else(|| major_from_soname(&file_name)),
        soname: syms.soname.clone(),
        build: elf::cuda_release_string(path),
    });
    if apis.is_empty() && cupti_copy.is_none() {
        return Ok(None);
    }
    Ok(Some(FileReport {
        path: path.display().to_string(),
        apis,
        cupti_copy,
    }))
}

/// Walk `paths` (files or directories), following symbolic links but never visiting a file or
/// directory twice (by device and inode), so link loops end and linked copies count once.
pub fn audit(paths: &[PathBuf]) -> Result<AuditReport, AuditPathError> {
    let mut report = AuditReport {
        paths: paths.iter().map(|p| p.display().to_string()).collect(),
        ..Default::default()
    };
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut stack: Vec<PathBuf> = Vec::new();
    for p in paths {
        std::fs::metadata(p).map_err(|source| AuditPathError::Missing {
            path: p.display().to_string(),
            source,
        })?;
        stack.push(p.clone());
    }
    // Depth-first, in a stable order: reverse each directory's sorted entries onto the stack.
    stack.reverse();
    while let Some(path) = stack.pop() {
        let md = match std::fs::metadata(&path) {
            Ok(md) => md,
            Err(e) => {
                // A dangling symlink is not worth reporting; anything else is.
                if std::fs::symlink_metadata(&path)
                    .map(|m| !m.file_type().is_symlink())
                    .unwrap_or(true)
                {
                    report.errors.push(AuditError {
                        path: path.display().to_string(),
                        error: e.to_string(),
                    });
                }
                continue;
            }
        };
        if !seen.insert((md.dev(), md.ino())) {
            continue;
        }
        if md.is_dir() {
            match std::fs::read_dir(&path) {
                Ok(rd) => {
                    let mut children: Vec<PathBuf> =
                        rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
                    children.sort();
                    stack.extend(children.into_iter().rev());
                }
                Err(e) => report.errors.push(AuditError {
                    path: path.display().to_string(),
                    error: e.to_string(),
                }),
            }
            continue;
        }
        if !md.is_file() {
            continue;
        }
        report.files_scanned += 1;
        // A file reached through a link is reported where it really is.
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        let path = if is_link {
            std::fs::canonicalize(&path).unwrap_or(path)
        } else {
            path
        };
        if md.len() < 64 || !elf::has_elf_magic(&path) {
            continue;
        }
        report.elf_files += 1;
        match audit_file(&path) {
            Ok(Some(f)) => report.files.push(f),
            Ok(None) => {}
            // Object files, core dumps and truncated ELF are noise, not errors of the audit.
            Err(elf::ElfError::Malformed { .. }) => {}
            Err(e) => report.errors.push(AuditError {
                path: path.display().to_string(),
                error: e.to_string(),
            }),
        }
    }
    report.dropped_found = report
        .files
        .iter()
        .any(|f| f.apis.iter().any(|a| a.removal == Removal::Dropped));
    report.exit_status = i32::from(report.dropped_found);
    Ok(report)
}

impl AuditReport {
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for f in &self.files {
            let _ = writeln!(out, "{}", f.path);
            for a in &f.apis {
                let verdict = match a.removal {
                    Removal::Dropped => "DROPPED in CUDA 13.0",
                    Removal::Deprecated => "deprecated in CUDA 13.0",
                };
                let _ = writeln!(
                    out,
                    "    {} ({}) {verdict}: {}",
                    a.api,
                    a.header,
                    a.symbols.join(", ")
                );
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
        let callers = self.files.iter().filter(|f| !f.apis.is_empty()).count();
        let copies = self.files.iter().filter(|f| f.cupti_copy.is_some()).count();
        let _ = writeln!(
            out,
            "{} files scanned, {} ELF; {} use a dropped or deprecated CUPTI API; {} CUPTI copies{}",
            self.files_scanned,
            self.elf_files,
            callers,
            copies,
            if self.dropped_found {
                " -- APIs dropped in CUDA 13.0 found: those calls return CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED there"
            } else {
                ""
            }
        );
        out
    }
}
