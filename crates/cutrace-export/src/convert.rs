//! `cutrace convert` as a plan: which outputs were asked for, every check that can refuse them
//! before the trace is read ([`ConvertPlan::new`]), then the writing itself, returned as values
//! ([`Written`]). Tables are staged and put in place together by one [`Placement`]
//! (`staged.rs`, `parquet/job.rs`), export files are created exclusively and renamed into place
//! ([`OutFile`]): the rules of docs/SECURITY.md, "Files cutrace creates". The command line only
//! parses flags, loads the trace and prints what was written.
//!
//! [`Placement`]: crate::files::Placement
//! [`OutFile`]: crate::files::OutFile

mod checks;
mod job_outputs;
mod written;

use std::path::{Path, PathBuf};

use cutrace_trace::classify::{self, Inputs, Unit};
use cutrace_trace::{Limits, Trace, TraceError};

use crate::counter_tracks::counter_timeline;
use crate::files;
use crate::outputs::{shown, table_groups, Output, TableGroup};
use crate::parquet::job::{self, JobError, JobOptions};
use crate::staged::{StageError, Staged};
use crate::{chrome, meta, perfetto};

pub use job_outputs::{clock_statement, JobFiles, JobRankWritten};
pub use written::{Counts, JobConverted, TraceSummary, Written};

/// What `cutrace convert` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// One trace (a directory of native parts, a part, a torch.profiler JSON) or a job's traces
    /// (as [`classify::classify`] reads them).
    pub traces: Vec<PathBuf>,
    /// `--csv DIR`: the tables as CSV, and meta.json.
    pub csv: Option<PathBuf>,
    /// `--parquet DIR`: the tables as Parquet, and meta.json; a job's hive-style partitions.
    pub parquet: Option<PathBuf>,
    /// `--chrome FILE`: Chrome Trace Event JSON (`-`: stdout).
    pub chrome: Option<PathBuf>,
    /// `--perfetto FILE`: Perfetto's protobuf (`-`: stdout).
    pub perfetto: Option<PathBuf>,
    /// `--pprof FILE`: the PC samples as a pprof profile (`-`: stdout).
    pub pprof: Option<PathBuf>,
    /// `--force`: replace an export file, and the tables an earlier export left in a directory.
    pub force: bool,
    /// `--allow-damaged`: convert a trace with damaged chunks.
    pub allow_damaged: bool,
    /// `--with-cmdline`: copy each part's recorded command line into meta.json and Parquet.
    pub with_cmdline: bool,
    /// The readers' limits (`--limit`).
    pub limits: Limits,
    /// Whether the process's stdout is a terminal, where `--chrome -` and `--perfetto -` are
    /// refused (binary output on a terminal). The caller knows; this crate reads no handle.
    pub stdout_is_terminal: bool,
}

/// A conversion checked and ready to write: of one trace, or of a job's traces.
#[derive(Debug)]
pub enum ConvertPlan {
    Trace(TracePlan),
    Job(JobPlan),
}

/// A refusal before anything is read or written; each says what is wrong and how to fix it.
/// `flag` is the option that named the path (`--csv`, `--chrome`, …).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{flag} takes a directory (it writes one file per table there); `-` (stdout) is for \
         --chrome and --perfetto; write ./- for a directory named `-`"
    )]
    TableDirIsStdout { flag: &'static str },
    #[error("{flag} {} is a link to nothing; give a directory", .dir.display())]
    TableDirIsDanglingLink { flag: &'static str, dir: PathBuf },
    #[error(
        "{flag} takes a directory (it writes one file per table there), but {} is a file; \
         choose a new or existing directory",
        .file.display()
    )]
    TableDirIsFile { flag: &'static str, file: PathBuf },
    #[error(
        "{flag} - writes the export to stdout, which is a terminal here; redirect it to a file \
         or a pipe (`{flag} - | gzip > out.gz`), or give a file name"
    )]
    StdoutIsTerminal { flag: &'static str },
    #[error("{flag} takes a file name, but {} is a directory", .out.display())]
    FileIsDirectory { flag: &'static str, out: PathBuf },
    #[error("{flag} {}: the folder {} does not exist", .out.display(), .folder.display())]
    NoFolder {
        flag: &'static str,
        out: PathBuf,
        folder: PathBuf,
    },
    #[error(
        "{} already exists; pass --force to overwrite it, or choose another {flag} path",
        .out.display()
    )]
    FileExists { flag: &'static str, out: PathBuf },
    #[error(
        "{flag} - and {other} - would both write to stdout; give one of them a file name \
         (nothing was written)"
    )]
    BothToStdout {
        flag: &'static str,
        other: &'static str,
    },
    #[error(
        "{flag} {} and {other} {} name the same file; give each its own file (nothing was \
         written)",
        .out.display(), .other_out.display()
    )]
    SameFile {
        flag: &'static str,
        out: PathBuf,
        other: &'static str,
        other_out: PathBuf,
    },
    #[error(
        "{flag} {} is the trace being converted (or inside it); give the export another name \
         (nothing was written)",
        .out.display()
    )]
    IsTheTrace { flag: &'static str, out: PathBuf },
    #[error(
        "{flag} {} is also the {dir_flag} directory; give the file another name (nothing was \
         written)",
        .out.display()
    )]
    FileIsTableDir {
        flag: &'static str,
        out: PathBuf,
        dir_flag: &'static str,
    },
    #[error(
        "{flag} {} has the name of a table file in the {dir_flag} directory {}; give it another \
         name (nothing was written)",
        .out.display(), .dir.display()
    )]
    TableFileName {
        flag: &'static str,
        out: PathBuf,
        dir_flag: &'static str,
        dir: PathBuf,
    },
    #[error(
        "{flags} {} already holds cutrace tables ({}); pass --force to replace them (the tables \
         of a format not written this time are removed, so the directory holds one export), or \
         choose another directory",
        .dir.display(), crate::text::name_some(.found)
    )]
    TablesExist {
        /// `--csv`, `--parquet` or `--csv/--parquet`.
        flags: &'static str,
        dir: PathBuf,
        /// What the directory holds, as [`files::shown_entries`] names it.
        found: Vec<String>,
    },
    /// The inputs could not be listed or told apart.
    #[error(transparent)]
    Input(#[from] TraceError),
    /// A job asked for outputs it cannot have, or its directory holds an earlier export.
    #[error(transparent)]
    Job(#[from] JobError),
}

/// What stopped a conversion once it was under way. What an output had written is removed;
/// outputs written before it stay (each was reported as [`Written`]).
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(
        "{}: the trace is damaged ({bytes} bytes in {regions} stretches skipped; every good \
         chunk around them was read: {reason}); nothing written. `--allow-damaged` converts \
         what was recovered",
        .path.display()
    )]
    Damaged {
        path: PathBuf,
        bytes: u64,
        regions: u64,
        /// The trace's own account of its damage (may be empty).
        reason: String,
    },
    #[error(
        "{}: the trace has no PC samples, so --pprof has nothing to write (nothing written for \
         it); record them with `cutrace profile --pc-sampling -o DIR -- CMD`",
        .path.display()
    )]
    NoPcSamples { path: PathBuf },
    #[error("creating {}", .path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Writing the output named (`stdout` for `-`).
    #[error("writing {shown}")]
    Write {
        shown: String,
        source: std::io::Error,
    },
    #[error(
        "{} exists and is not a regular file (a link, a directory or a device); --force \
         replaces only regular files: remove it or choose another {flag} path",
        .out.display()
    )]
    NotRegularFile { flag: &'static str, out: PathBuf },
    /// A name that appeared after the checks ([`PlanError::FileExists`]).
    #[error(transparent)]
    Refused(#[from] PlanError),
    #[error(transparent)]
    Meta(#[from] serde_json::Error),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Job(#[from] JobError),
    /// A job's trace that could not be read again (it changed while being converted).
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl ConvertPlan {
    /// Checks `req` before the (possibly long) read: each output path can be what its flag
    /// writes, no two outputs (or an output and the trace) name one file, an export file is not
    /// there already and a table directory holds no earlier export (both unless `--force`), a
    /// job asks for no `--pprof` and its `--csv` and `--parquet` (which both write `meta/`)
    /// name two directories. The inputs are listed ([`classify::classify`]), not read.
    pub fn new(req: Request) -> Result<ConvertPlan, PlanError> {
        checks::table_dirs(&req)?;
        checks::export_files(&req)?;
        match classify::classify(&req.traces, &req.limits)? {
            Inputs::Trace(trace) => {
                checks::distinct(&req, &trace)?;
                let groups = table_groups(req.csv.as_ref(), req.parquet.as_ref());
                // A directory never ends up with tables of two traces (as --chrome never
                // overwrites a file); checked again under the directory's lock.
                if !req.force {
                    checks::no_earlier_tables(&groups)?;
                }
                Ok(ConvertPlan::Trace(TracePlan { req, trace, groups }))
            }
            Inputs::Job { units, notes } => {
                if req.pprof.is_some() {
                    return Err(JobError::NoPprof(units.len()).into());
                }
                let groups = table_groups(req.csv.as_ref(), req.parquet.as_ref());
                if groups.iter().any(|g| g.csv && g.parquet) {
                    return Err(JobError::CsvParquetOneDir.into());
                }
                for dir in [&req.parquet, &req.csv].into_iter().flatten() {
                    job::check_job(dir, &units, req.force)?;
                }
                Ok(ConvertPlan::Job(JobPlan { req, units, notes }))
            }
        }
    }
}

/// One trace to convert: the caller reads it ([`TracePlan::trace`], [`TracePlan::limits`]) and
/// hands it to [`TracePlan::run`].
#[derive(Debug)]
pub struct TracePlan {
    req: Request,
    trace: PathBuf,
    groups: Vec<TableGroup>,
}

impl TracePlan {
    /// The trace to read.
    pub fn trace(&self) -> &Path {
        &self.trace
    }

    /// The limits to read it with.
    pub fn limits(&self) -> &Limits {
        &self.req.limits
    }

    /// Writes every output of the plan from `t`, the trace read: the table directories (both
    /// formats of one directory staged and put in place together), then --perfetto, then
    /// --chrome. `on_written` hears of each output once it is in place, before the next is
    /// written; the same values are returned.
    pub fn run(
        self,
        mut t: Trace,
        on_written: &mut dyn FnMut(&Written),
    ) -> Result<Vec<Written>, ConvertError> {
        if t.meta.damaged_regions > 0 && !self.req.allow_damaged {
            return Err(ConvertError::Damaged {
                path: self.trace.clone(),
                bytes: t.meta.damaged_bytes,
                regions: t.meta.damaged_regions,
                reason: t.meta.incomplete_reason.clone().unwrap_or_default(),
            });
        }
        // Checked before anything is written: a refused conversion writes nothing.
        if self.req.pprof.is_some() && t.pc_samples.is_empty() && t.meta.pc_sampling.is_none() {
            return Err(ConvertError::NoPcSamples {
                path: self.trace.clone(),
            });
        }
        // Exports are as private as the trace: the most restrictive mode of the files read.
        let mode = files::mode_of_inputs(
            std::iter::once(self.trace.as_path()).chain(t.meta.paths.iter().map(Path::new)),
        );
        let mut all = Vec::new();
        let mut done = |w: Written| {
            on_written(&w);
            all.push(w);
        };
        for g in &self.groups {
            done(self.write_tables(g, &t, mode)?);
        }
        if let Some(out) = &self.req.perfetto {
            let file = export_file(out, "--perfetto", self.req.force, mode, |w| {
                perfetto::write_perfetto(w, &t)
            })?;
            done(Written::Perfetto {
                out: out.clone(),
                file,
                trace: TraceSummary::of(&t),
                counter_lines: counter_timeline(&t).summary(".pftrace"),
            });
        }
        if let Some(out) = &self.req.pprof {
            let file = export_file(out, "--pprof", self.req.force, mode, |w| {
                crate::pprof::write_pprof(w, &t)
            })?;
            done(Written::Pprof {
                out: out.clone(),
                file,
                error: t.meta.pc_sampling.as_ref().and_then(|c| c.error.clone()),
            });
        }
        if let Some(out) = &self.req.chrome {
            // Last: the trace's times are moved to the file's time base (see write_trace).
            let file = export_file(out, "--chrome", self.req.force, mode, |w| {
                chrome::write_trace(w, &mut t)
            })?;
            done(Written::Chrome {
                out: out.clone(),
                file,
                trace: TraceSummary::of(&t),
                counter_lines: counter_timeline(&t).summary("JSON (\"ph\":\"C\" events)"),
            });
        }
        Ok(all)
    }

    /// One table directory: created (with the directory bits of `mode`), its tables and
    /// meta.json staged, then put in place together (without `--force`, refused if an earlier
    /// export appeared meanwhile).
    fn write_tables(&self, g: &TableGroup, t: &Trace, mode: u32) -> Result<Written, ConvertError> {
        files::create_dir_all(&g.dir, files::dir_mode(mode)).map_err(|source| {
            ConvertError::Create {
                path: g.dir.clone(),
                source,
            }
        })?;
        let meta = meta::meta_json_text(t, self.req.with_cmdline)?;
        let mut st = Staged::new(&g.dir, mode);
        if g.csv {
            st.csv_tables(t)?;
        }
        if g.parquet {
            st.parquet_tables(t, &meta)?;
        }
        st.write("meta.json", meta.as_bytes())?;
        let removed = st.commit(self.req.force)?;
        Ok(Written::Tables {
            dir: g.dir.clone(),
            csv: g.csv,
            parquet: g.parquet,
            trace: TraceSummary::of(t),
            removed,
        })
    }
}

/// A job to convert: to hive-style Parquet partitions, and/or to one Chrome file, one Perfetto
/// trace and CSV tables with a rank column (`job_outputs`); [`JobPlan::run`] reads its ranks.
#[derive(Debug)]
pub struct JobPlan {
    req: Request,
    units: Vec<Unit>,
    notes: Vec<String>,
}

impl JobPlan {
    /// How many traces the job has (one per rank, before any is read).
    pub fn traces(&self) -> usize {
        self.units.len()
    }

    /// Writes `--parquet`'s partitions ([`job::write_job`], its traces read in parallel), then
    /// the other outputs (`job_outputs`: each trace read once to number the ranks as the job
    /// report does, and once more, one at a time, to write it). `done` hears what is under way
    /// (`read`, `converted`) and how many traces are done.
    pub fn run(
        self,
        done: &(dyn Fn(&'static str, usize) + Sync),
    ) -> Result<JobConverted, ConvertError> {
        let req = &self.req;
        let parquet = match &req.parquet {
            Some(dir) => {
                let opts = JobOptions {
                    limits: req.limits,
                    allow_damaged: req.allow_damaged,
                    with_cmdline: req.with_cmdline,
                    replace: req.force,
                    workers: cutrace_trace::limits::cores(),
                };
                let written = job::write_job(dir, &self.units, &opts, &|n| done("converted", n))?;
                Some((dir.clone(), written))
            }
            None => None,
        };
        let files = if req.csv.is_some() || req.chrome.is_some() || req.perfetto.is_some() {
            let o = job_outputs::JobOutputs {
                chrome: req.chrome.as_deref(),
                perfetto: req.perfetto.as_deref(),
                csv: req.csv.as_deref(),
                force: req.force,
                allow_damaged: req.allow_damaged,
                with_cmdline: req.with_cmdline,
                limits: req.limits,
            };
            Some(job_outputs::write(&self.units, &o, done)?)
        } else {
            None
        };
        Ok(JobConverted {
            notes: self.notes,
            parquet,
            files,
        })
    }
}

/// Writes one export file through `write`: gzip-compressed when the name ends in `.gz`; to
/// stdout, as is, for `-`. The export goes to a new file beside `out` (exclusive create,
/// random name, permission bits `mode`), put in place only once complete: without `force` it
/// never replaces a name that appeared meanwhile; with it, it replaces a regular file (a link
/// there is replaced, not written through) and refuses anything else. A failed export leaves
/// `out` untouched.
fn export_file<T>(
    out: &Path,
    flag: &'static str,
    force: bool,
    mode: u32,
    write: impl FnOnce(&mut Output) -> std::io::Result<T>,
) -> Result<T, ConvertError> {
    let mut w = open_export(out, flag, force, mode)?;
    // On an error the OutFile is dropped, which removes the temporary file.
    let n = write(&mut w).map_err(writing(out))?;
    finish_export(w, out, flag, force)?;
    Ok(n)
}

/// The export file for `out` ([`export_file`]), to write into.
fn open_export(
    out: &Path,
    flag: &'static str,
    force: bool,
    mode: u32,
) -> Result<Output, ConvertError> {
    if force {
        if let Ok(m) = std::fs::symlink_metadata(out) {
            if !m.file_type().is_file() {
                let out = out.to_owned();
                return Err(ConvertError::NotRegularFile { flag, out });
            }
        }
    }
    Output::open(out, mode).map_err(|source| ConvertError::Create {
        path: out.to_owned(),
        source,
    })
}

/// An error writing `out`.
fn writing(out: &Path) -> impl Fn(std::io::Error) -> ConvertError + '_ {
    move |source| ConvertError::Write {
        shown: shown(out),
        source,
    }
}

/// Completes `w` and puts it in place at `out` ([`export_file`]).
fn finish_export(
    w: Output,
    out: &Path,
    flag: &'static str,
    force: bool,
) -> Result<(), ConvertError> {
    let file = w.finish().map_err(writing(out))?;
    match file.map(|f| f.commit(force)) {
        Some(Err(e)) if e.kind() == std::io::ErrorKind::AlreadyExists && !force => {
            let out = out.to_owned();
            Err(PlanError::FileExists { flag, out }.into())
        }
        Some(Err(e)) => Err(writing(out)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
