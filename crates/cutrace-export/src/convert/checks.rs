//! The checks [`ConvertPlan::new`](super::ConvertPlan::new) makes before the trace is read, so a
//! command that cannot succeed says so at once, not after a long read.

use std::path::{Path, PathBuf};

use super::{PlanError, Request};
use crate::files::{self, resolve};
use crate::outputs::{is_stdout, table_file_names, tables_in, TableGroup};

/// `--csv` and `--parquet` each name a directory, or a path where one can be made.
pub(super) fn table_dirs(req: &Request) -> Result<(), PlanError> {
    for (flag, dir) in [("--csv", &req.csv), ("--parquet", &req.parquet)] {
        let Some(dir) = dir else { continue };
        if is_stdout(dir) {
            return Err(PlanError::TableDirIsStdout { flag });
        }
        if std::fs::symlink_metadata(dir).is_ok() && std::fs::metadata(dir).is_err() {
            return Err(PlanError::TableDirIsDanglingLink {
                flag,
                dir: dir.clone(),
            });
        }
        // The path itself or the nearest part of it that exists must be a directory.
        if let Some(file) = dir
            .ancestors()
            .find(|a| std::fs::metadata(a).is_ok())
            .filter(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
        {
            return Err(PlanError::TableDirIsFile {
                flag,
                file: file.to_owned(),
            });
        }
    }
    Ok(())
}

/// The export files asked for, by flag.
fn export_flags(req: &Request) -> [(&'static str, &Option<PathBuf>); 3] {
    [
        ("--chrome", &req.chrome),
        ("--perfetto", &req.perfetto),
        ("--pprof", &req.pprof),
    ]
}

/// `--chrome`, `--perfetto` and `--pprof` each name a file that can be created (its folder exists, it is
/// not a directory, nothing is there without `--force`), or `-` with stdout not a terminal.
pub(super) fn export_files(req: &Request) -> Result<(), PlanError> {
    for (flag, out) in export_flags(req) {
        let Some(out) = out else { continue };
        if is_stdout(out) {
            if req.stdout_is_terminal {
                return Err(PlanError::StdoutIsTerminal { flag });
            }
            continue;
        }
        if std::fs::metadata(out).is_ok_and(|m| m.is_dir()) {
            return Err(PlanError::FileIsDirectory {
                flag,
                out: out.clone(),
            });
        }
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parent.is_dir() {
                return Err(PlanError::NoFolder {
                    flag,
                    out: out.clone(),
                    folder: parent.to_owned(),
                });
            }
        }
        if !req.force && std::fs::symlink_metadata(out).is_ok() {
            return Err(PlanError::FileExists {
                flag,
                out: out.clone(),
            });
        }
    }
    Ok(())
}

/// No two outputs name one file: --chrome and --perfetto with one path (or both `-`), a
/// --chrome/--perfetto file that is the trace (or inside it), a table directory, or that has a
/// table file's name inside a table directory. --csv and --parquet may share a directory: their
/// files have different names, and meta.json is the same for both.
pub(super) fn distinct(req: &Request, trace: &Path) -> Result<(), PlanError> {
    let files: Vec<(&'static str, &PathBuf)> = export_flags(req)
        .into_iter()
        .filter_map(|(f, p)| p.as_ref().map(|p| (f, p)))
        .collect();
    let pairs = files
        .iter()
        .enumerate()
        .flat_map(|(i, a)| files[i + 1..].iter().map(move |b| (*a, *b)));
    for ((fa, a), (fb, b)) in pairs {
        if is_stdout(a) && is_stdout(b) {
            return Err(PlanError::BothToStdout {
                flag: fa,
                other: fb,
            });
        }
        if !is_stdout(a) && !is_stdout(b) && resolve(a) == resolve(b) {
            return Err(PlanError::SameFile {
                flag: fa,
                out: a.clone(),
                other: fb,
                other_out: b.clone(),
            });
        }
    }
    // Not even --force replaces the trace being read (an export keeps less than its source).
    let input = resolve(trace);
    for &(ff, f) in files.iter().filter(|(_, f)| !is_stdout(f)) {
        if resolve(f).starts_with(&input) {
            return Err(PlanError::IsTheTrace {
                flag: ff,
                out: f.clone(),
            });
        }
    }
    let dirs = [("--csv", &req.csv), ("--parquet", &req.parquet)];
    for &(ff, f) in files.iter().filter(|(_, f)| !is_stdout(f)) {
        let rf = resolve(f);
        for (fd, d) in dirs
            .iter()
            .filter_map(|&(fd, d)| d.as_ref().map(|d| (fd, d)))
        {
            let rd = resolve(d);
            if rf == rd {
                return Err(PlanError::FileIsTableDir {
                    flag: ff,
                    out: f.clone(),
                    dir_flag: fd,
                });
            }
            let name = rf.file_name().map(|n| n.to_string_lossy().into_owned());
            if rf.parent() == Some(rd.as_path())
                && name.is_some_and(|n| table_file_names().any(|t| t == n))
            {
                return Err(PlanError::TableFileName {
                    flag: ff,
                    out: f.clone(),
                    dir_flag: fd,
                    dir: d.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Without `--force`: no table directory holds an earlier export's tables.
pub(super) fn no_earlier_tables(groups: &[TableGroup]) -> Result<(), PlanError> {
    for g in groups {
        let found = files::shown_entries(&g.dir, &tables_in(&g.dir));
        if !found.is_empty() {
            return Err(PlanError::TablesExist {
                flags: g.flags(),
                dir: g.dir.clone(),
                found,
            });
        }
    }
    Ok(())
}
