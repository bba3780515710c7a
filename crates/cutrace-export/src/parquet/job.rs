//! A distributed job's tables as hive-style partitions: `DIR/TABLE/rank=N/part.parquet` for every
//! table of every rank, and `DIR/meta/rank=N/meta.json`, the layout DuckDB
//! (`read_parquet('DIR/kernels/*/*.parquet', hive_partitioning = true)`), pyarrow
//! (`pyarrow.dataset.dataset('DIR/kernels', partitioning = 'hive')`), Spark and Trino read with
//! `rank` as a column taken from the path. The files are the single-trace export's, byte for
//! byte, one per rank and table.
//!
//! Ranks are read in parallel, one whole trace per worker at a time (a trace is dropped once its
//! tables are written), into a staging directory inside `DIR`; each table's directory is put in
//! place only when every rank is written, so a failed export leaves no half-written job.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use cutrace_trace::classify::Unit;
use cutrace_trace::{Limits, ReadOptions, Trace};

use crate::files::{self, OutFile, PlaceError, Placement, StagingDir};
use crate::{meta, outputs, parquet, tables};

pub use crate::outputs::{partition_names, META_DIR};
/// The file name inside a partition (`TABLE/rank=N/part.parquet`).
pub const PART_FILE: &str = "part.parquet";

/// Where rank `rank`'s `table` goes, relative to the export directory.
pub fn partition_path(table: &str, rank: u32) -> PathBuf {
    Path::new(table)
        .join(format!("rank={rank}"))
        .join(PART_FILE)
}

/// Where a unit of the job comes from, for a person: its file or directory (a rank's native
/// parts: their directory).
pub fn unit_path(u: &Unit) -> PathBuf {
    match u {
        Unit::Trace(p) | Unit::Summary(p) => p.clone(),
        Unit::Parts { paths, .. } => match paths.as_slice() {
            [one] => one.clone(),
            _ => paths
                .first()
                .and_then(|p| p.parent())
                .map_or_else(PathBuf::new, Path::to_path_buf),
        },
    }
}

/// The rank a unit's name states (a file's, a rank directory's), for a trace that states none.
fn name_rank(u: &Unit) -> Option<u32> {
    let p = match u {
        Unit::Parts { paths, .. } => paths.first().and_then(|p| p.parent())?.to_path_buf(),
        u => unit_path(u),
    };
    cutrace_analysis::job::rank_from_file_name(p.file_name()?.to_str()?)
}

/// How [`write_job`] reads and writes.
pub struct JobOptions {
    pub limits: Limits,
    /// Convert traces with damaged chunks; without it one refuses the whole job.
    pub allow_damaged: bool,
    /// Copy each part's recorded command line into meta.json and the files (`--with-cmdline`).
    pub with_cmdline: bool,
    /// Replace the tables an earlier export left in the directory (a job's or one trace's).
    pub replace: bool,
    /// Traces read at once (each worker holds one whole trace).
    pub workers: usize,
}

/// Where a rank's number came from (as the job report says: `docs/REPORT.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankFrom {
    /// The trace states it (torch.profiler's `distributedInfo`, a native part's `RANK`).
    Trace,
    /// Its file name does (`rank3`, `rank_3`, `rank-3`).
    FileName,
    /// Neither: the lowest number no other trace of the job has, in the job's order.
    InputOrder,
}

/// One rank written.
#[derive(Debug, Clone)]
pub struct RankWritten {
    pub rank: u32,
    pub rank_from: RankFrom,
    pub path: PathBuf,
    /// False when the trace was cut off (written as far as recovered).
    pub complete: bool,
    pub kernels: usize,
    /// Rows over all its tables.
    pub rows: usize,
}

/// A trace of the job that is not written: one that could not be read (an empty or broken file:
/// a dead rank), or a second trace of a rank already written.
#[derive(Debug, Clone)]
pub struct Unread {
    /// The rank it was numbered, where it has one.
    pub rank: Option<u32>,
    pub path: PathBuf,
    pub reason: String,
}

/// What [`write_job`] wrote.
#[derive(Debug, Default)]
pub struct JobWritten {
    /// By rank.
    pub ranks: Vec<RankWritten>,
    /// In the job's order.
    pub unread: Vec<Unread>,
    /// The tables written.
    pub tables: Vec<&'static str>,
    /// What of an earlier export was removed (`kernels/`, `kernels.parquet`, `meta.json`, …).
    pub removed: Vec<String>,
}

impl JobWritten {
    /// What was written to `dir`, for a person: a warning per trace left out, then one line.
    pub fn lines(&self, dir: &Path) -> Vec<String> {
        let removed = &self.removed;
        use crate::text::count;
        let mut out: Vec<String> = self
            .unread
            .iter()
            .map(|u| match u.rank {
                Some(r) => format!(
                    "warning: rank {r} ({}) not written: {}",
                    u.path.display(),
                    u.reason
                ),
                None => format!("warning: {} not written: {}", u.path.display(), u.reason),
            })
            .collect();
        let by = |f: RankFrom| self.ranks.iter().filter(|r| r.rank_from == f).count();
        let from = match (by(RankFrom::FileName), by(RankFrom::InputOrder)) {
            (0, 0) => String::new(),
            (n, 0) => format!("; {} from file names", count(n, "rank", "ranks")),
            (0, m) => format!(
                "; {} numbered in the job's order (no rank in trace or file name)",
                count(m, "rank", "ranks")
            ),
            (n, m) => format!(
                "; {} from file names, {} numbered in the job's order",
                count(n, "rank", "ranks"),
                m
            ),
        };
        let cut = self.ranks.iter().filter(|r| !r.complete).count();
        let (first, last) = match (self.ranks.first(), self.ranks.last()) {
            (Some(a), Some(b)) => (a.rank, b.rank),
            _ => (0, 0),
        };
        out.push(format!(
            "wrote {} (rank {first} to {last}{from}; {}, {} in {}) to {} as hive-style partitions \
             (TABLE/rank=N/part.parquet){}{}",
            count(self.ranks.len(), "rank", "ranks"),
            count(
                self.ranks.iter().map(|r| r.kernels).sum(),
                "kernel",
                "kernels"
            ),
            count(self.ranks.iter().map(|r| r.rows).sum(), "row", "rows"),
            count(self.tables.len(), "table", "tables"),
            dir.display(),
            match cut {
                0 => String::new(),
                n => format!("; {} INCOMPLETE (see meta/)", count(n, "trace", "traces")),
            },
            match removed.len() {
                0 => String::new(),
                n => format!(
                    "; removed {} of an earlier export ({})",
                    count(n, "file or directory", "files and directories"),
                    removed.join(", ")
                ),
            },
        ));
        out
    }
}

/// What stopped a job export; nothing of it is left in the directory.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("writing {0}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error("writing meta.json for {0}")]
    Meta(PathBuf, #[source] serde_json::Error),
    #[error(
        "{path}: the trace is damaged ({bytes} bytes in {regions} stretches skipped); nothing \
         written. `--allow-damaged` converts what was recovered"
    )]
    Damaged {
        path: PathBuf,
        bytes: u64,
        regions: u64,
    },
    #[error("none of the job's {} traces could be read (first: {}: {}); nothing written",
        .0.len(), .0[0].path.display(), .0[0].reason)]
    NothingRead(Vec<Unread>),
    #[error("no traces in the job (torch.profiler .json/.json.gz files or directories of .cutrace parts)")]
    Empty,
    #[error(
        "{0} is a rank summary, which holds no tables: convert the rank's trace (nothing written)"
    )]
    Summary(PathBuf),
    #[error(
        "a job ({0} ranks) has no one pprof profile: convert each rank's trace with --pprof on \
         its own (nothing was written)"
    )]
    NoPprof(usize),
    #[error(
        "a job's --csv and --parquet each write a meta/ directory: give them two directories \
         (nothing was written)"
    )]
    CsvParquetOneDir,
}

/// One trace's staged result.
struct Staged {
    index: usize,
    written: RankWritten,
    tables: Vec<&'static str>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JobError + '_ {
    move |e| JobError::Io(path.to_owned(), e)
}

/// Writes `bytes` to `dest` through an [`OutFile`] (exclusive create, mode `mode`).
fn write_file(
    dest: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::io::BufWriter<&mut std::fs::File>) -> std::io::Result<()>,
) -> Result<(), JobError> {
    let mut f = OutFile::create(dest, mode).map_err(io(dest))?;
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f.file());
        fill(&mut w)
            .and_then(|()| std::io::Write::flush(&mut w))
            .map_err(io(dest))?;
    }
    f.commit(false).map_err(io(dest))
}

/// Reads unit `index` of the job and stages its tables under `stage/index/`.
fn stage_one(
    index: usize,
    unit: &Unit,
    stage: &Path,
    (opts, read, mode): (&JobOptions, &ReadOptions, u32),
) -> Result<Result<Staged, (usize, Unread)>, JobError> {
    let path = unit_path(unit);
    let path = path.as_path();
    let read = match unit {
        Unit::Trace(p) => crate::input::load(p, read, &mut |_, _| {}),
        Unit::Parts { paths, .. } => {
            cutrace_trace::native::read_parts_with(paths, &read.limits, &mut |_, _| {})
        }
        Unit::Summary(_) => return Err(JobError::Summary(path.to_owned())),
    };
    let t: Trace = match read {
        Ok(t) => t,
        Err(e) => {
            // The Unread names its path: the reason need not repeat it.
            let reason = e.to_string();
            let prefix = format!("{}: ", path.display());
            let reason = reason
                .strip_prefix(&prefix)
                .map_or(reason.clone(), str::to_owned);
            let path = path.to_owned();
            return Ok(Err((
                index,
                Unread {
                    rank: None,
                    path,
                    reason,
                },
            )));
        }
    };
    if t.meta.damaged_regions > 0 && !opts.allow_damaged {
        return Err(JobError::Damaged {
            path: path.to_owned(),
            bytes: t.meta.damaged_bytes,
            regions: t.meta.damaged_regions,
        });
    }
    let dir = stage.join(index.to_string());
    files::create_dir_all(&dir, 0o700).map_err(io(&dir))?;
    let meta_text =
        meta::meta_json_text(&t, opts.with_cmdline).map_err(|e| JobError::Meta(path.into(), e))?;
    let names = tables::names_for(&t);
    let mut rows = 0;
    for &name in &names {
        let table = tables::build(&t, name);
        rows += table.rows();
        let dest = dir.join(format!("{name}.parquet"));
        write_file(&dest, mode, |w| parquet::write(w, &table, &meta_text))?;
    }
    let dest = dir.join("meta.json");
    write_file(&dest, mode, |w| {
        std::io::Write::write_all(w, meta_text.as_bytes())
    })?;
    let stated = match unit {
        Unit::Parts { rank: Some(r), .. } => Some(*r),
        _ => t.meta.distributed.as_ref().and_then(|d| d.rank),
    };
    let (rank, rank_from) = match (stated, name_rank(unit)) {
        (Some(r), _) => (r, RankFrom::Trace),
        (None, Some(r)) => (r, RankFrom::FileName),
        (None, None) => (u32::MAX, RankFrom::InputOrder),
    };
    Ok(Ok(Staged {
        index,
        written: RankWritten {
            rank,
            rank_from,
            path: path.to_owned(),
            complete: t.meta.complete,
            kernels: t.kernels.len(),
            rows,
        },
        tables: names,
    }))
}

/// Numbers the ranks as the job report does (`cutrace_analysis::job_reduce`): a trace's own rank,
/// else its file name's; the first trace of a rank in the job's order keeps it, a later one is
/// left out (returned among the unread); the traces with neither, the unreadable ones included,
/// then get the lowest numbers no other trace has, in the job's order. `staged` ends sorted by
/// rank; the unread come back in the job's order, the left-out ones last.
fn number_ranks(
    staged: &mut Vec<Staged>,
    unread: Vec<(usize, Unread)>,
    units: &[Unit],
) -> Vec<Unread> {
    let mut all: Vec<(usize, Result<Staged, Unread>)> =
        staged.drain(..).map(|s| (s.index, Ok(s))).collect();
    all.extend(unread.into_iter().map(|(i, u)| (i, Err(u))));
    all.sort_by_key(|a| a.0);
    let mut taken = std::collections::BTreeSet::new();
    let mut numbered: Vec<(u32, Result<Staged, Unread>)> = Vec::new();
    let mut unknown = Vec::new();
    let mut left_out = Vec::new();
    for (i, r) in all {
        let known = match &r {
            Ok(s) if s.written.rank_from == RankFrom::InputOrder => None,
            Ok(s) => Some(s.written.rank),
            Err(_) => match &units[i] {
                Unit::Parts { rank: Some(r), .. } => Some(*r),
                u => name_rank(u),
            },
        };
        match (known, r) {
            (Some(k), r) if taken.insert(k) => numbered.push((k, r)),
            (Some(k), Ok(s)) => left_out.push(Unread {
                rank: Some(k),
                path: s.written.path,
                reason: format!("rank {k} again: the job's first trace of it is written"),
            }),
            (Some(k), Err(u)) => numbered.push((k, Err(u))),
            (None, r) => unknown.push(r),
        }
    }
    let mut next = 0u32;
    for r in unknown {
        while !taken.insert(next) {
            next += 1;
        }
        numbered.push((next, r));
    }
    let mut out = Vec::new();
    for (rank, r) in numbered {
        match r {
            Ok(mut s) => {
                s.written.rank = rank;
                staged.push(s);
            }
            Err(mut u) => {
                u.rank = Some(rank);
                out.push(u);
            }
        }
    }
    staged.sort_by_key(|s| s.written.rank);
    out.sort_by_key(|u| u.rank);
    out.extend(left_out);
    out
}

/// What [`write_job`] refuses before it reads a trace: a job of no traces, and (without
/// `replace`) a directory that holds an earlier export. Said before the (long) read; checked
/// again, under the directory's lock, when the export is put in place.
pub fn check_job(dir: &Path, units: &[Unit], replace: bool) -> Result<(), JobError> {
    if units.is_empty() {
        return Err(JobError::Empty);
    }
    let earlier = files::shown_entries(dir, &outputs::tables_in(dir));
    if !earlier.is_empty() && !replace {
        return Err(PlaceError::Exists(dir.to_owned(), earlier).into());
    }
    Ok(())
}

/// Writes the tables of the job `units` (each one rank's trace: `cutrace_trace::classify::classify`) under `dir` as hive-style
/// partitions (module docs), ranks numbered as [`number_ranks`] says. A trace that cannot be read
/// is left out and listed ([`JobWritten::unread`]). `done` is called with the number of traces
/// read so far.
pub fn write_job(
    dir: &Path,
    units: &[Unit],
    opts: &JobOptions,
    done: &(dyn Fn(usize) + Sync),
) -> Result<JobWritten, JobError> {
    check_job(dir, units, opts.replace)?;
    // Exports are as private as the traces: the most restrictive mode of the files read.
    let mode = files::mode_of_inputs(units.iter().map(unit_path));
    files::create_dir_all(dir, files::dir_mode(mode)).map_err(io(dir))?;
    let stage = StagingDir::new(dir, "job").map_err(io(dir))?;

    // Several traces at once: each read on one thread, so the workers share the cores.
    let workers = opts
        .workers
        .clamp(1, units.len().clamp(1, cutrace_trace::limits::MAX_THREADS));
    let read = ReadOptions {
        import_threads: (workers > 1).then_some(1),
        limits: opts.limits,
    };
    let finished = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut results: Vec<Option<Result<Staged, (usize, Unread)>>> =
        (0..units.len()).map(|_| None).collect();
    let error: Mutex<Option<JobError>> = Mutex::new(None);
    cutrace_trace::parallel::for_each(&mut results, workers, |i, result| {
        if failed.load(Ordering::Relaxed) {
            return;
        }
        match stage_one(i, &units[i], stage.path(), (opts, &read, mode)) {
            Ok(r) => *result = Some(r),
            Err(e) => {
                failed.store(true, Ordering::Relaxed);
                error.lock().expect("no worker panics").get_or_insert(e);
            }
        }
        done(finished.fetch_add(1, Ordering::Relaxed) + 1);
    });
    if let Some(e) = error.into_inner().expect("no worker panics") {
        return Err(e);
    }
    let mut staged = Vec::new();
    let mut unread = Vec::new();
    for r in results.into_iter().flatten() {
        match r {
            Ok(s) => staged.push(s),
            Err((i, u)) => unread.push((i, u)),
        }
    }
    if staged.is_empty() {
        return Err(JobError::NothingRead(
            unread.into_iter().map(|(_, u)| u).collect(),
        ));
    }
    let unread = number_ranks(&mut staged, unread, units);

    // Into the partition layout, inside the staging directory.
    let out = stage.path().join("out");
    let mut written: Vec<&'static str> = Vec::new();
    for s in &staged {
        let from = stage.path().join(s.index.to_string());
        let moves = s
            .tables
            .iter()
            .map(|&n| (format!("{n}.parquet"), partition_path(n, s.written.rank)))
            .chain([(
                "meta.json".to_string(),
                Path::new(META_DIR)
                    .join(format!("rank={}", s.written.rank))
                    .join("meta.json"),
            )]);
        for (name, to) in moves {
            let to = out.join(to);
            let parent = to.parent().expect("a partition path has a directory");
            files::create_dir_all(parent, files::dir_mode(mode)).map_err(io(parent))?;
            std::fs::rename(from.join(&name), &to).map_err(io(&to))?;
        }
        for &n in &s.tables {
            if !written.contains(&n) {
                written.push(n);
            }
        }
    }
    written.sort_by_key(|n| tables::ALL_NAMES.iter().position(|a| a == n));

    // Each directory put in place together, and what an earlier export left removed.
    let mut place = Placement::begin(dir, opts.replace, outputs::tables_in)?;
    for name in partition_names() {
        let new = out.join(name);
        if new.is_dir() {
            place.put_dir(&new, name)?;
        }
    }
    let removed = place.finish()?;
    stage.close().map_err(io(dir))?;
    Ok(JobWritten {
        ranks: staged.into_iter().map(|s| s.written).collect(),
        unread,
        tables: written,
        removed,
    })
}
