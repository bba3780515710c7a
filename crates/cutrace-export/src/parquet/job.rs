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

use cutrace_trace::{ReadOptions, Trace};

use crate::files::{self, OutFile};
use crate::{meta, parquet, tables};

/// The directory beside the tables' that holds each rank's `meta.json`.
pub const META_DIR: &str = "meta";
/// The file name inside a partition (`TABLE/rank=N/part.parquet`).
pub const PART_FILE: &str = "part.parquet";

/// Where rank `rank`'s `table` goes, relative to the export directory.
pub fn partition_path(table: &str, rank: u32) -> PathBuf {
    Path::new(table)
        .join(format!("rank={rank}"))
        .join(PART_FILE)
}

/// The names of the job-export directories (each table's, and [`META_DIR`]) that `dir` holds.
pub fn partitions_in(dir: &Path) -> Vec<String> {
    tables::ALL_NAMES
        .iter()
        .chain([&META_DIR])
        .filter(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
        .map(|n| n.to_string())
        .collect()
}

/// The traces of a job given as `paths`, in rank-candidate order; `None` when the paths name a
/// single trace (one file, or one directory of native parts), which keeps the one-trace layout.
/// A job is several paths, or a directory holding traces rather than parts: torch.profiler
/// files (`*.json`, `*.json.gz`) and directories of native parts, each one rank, by name.
pub fn job_traces(paths: &[PathBuf]) -> std::io::Result<Option<Vec<PathBuf>>> {
    let has_parts = |d: &Path| -> std::io::Result<bool> {
        Ok(std::fs::read_dir(d)?.filter_map(Result::ok).any(|e| {
            e.path().extension().and_then(|x| x.to_str())
                == Some(cutrace_trace::native::PART_EXTENSION)
        }))
    };
    if let [one] = paths {
        if !one.is_dir() || has_parts(one)? {
            return Ok(None);
        }
    }
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() || has_parts(p)? {
            out.push(p.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(p)? {
            let e = e?.path();
            let name = e.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            let kineto = name.ends_with(".json") || name.ends_with(".json.gz");
            if (e.is_file() && kineto && !name.starts_with('.')) || (e.is_dir() && has_parts(&e)?) {
                found.push(e);
            }
        }
        found.sort();
        out.extend(found);
    }
    Ok(Some(out))
}

/// How [`write_job`] reads and writes.
pub struct JobOptions {
    pub read: ReadOptions,
    /// Convert traces with damaged chunks; without it one refuses the whole job.
    pub allow_damaged: bool,
    /// Copy each part's recorded command line into meta.json and the files (`--with-cmdline`).
    pub with_cmdline: bool,
    /// Permission bits of the files written.
    pub mode: u32,
    /// Replace the table directories an earlier export left in the directory.
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
    /// The table directories written, and those of an earlier export removed.
    pub tables: Vec<&'static str>,
    pub removed: Vec<String>,
}

impl JobWritten {
    /// What was written to `dir`, for a person: a warning per trace left out, then one line
    /// (`removed`: the names of an earlier export's files removed).
    pub fn lines(&self, dir: &Path, removed: &[String]) -> Vec<String> {
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
                    count(n, "table", "tables"),
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
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    #[error("writing meta.json for {0}: {1}")]
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
    #[error("{0} already holds an export's table directory; pass --force to replace it")]
    Exists(PathBuf),
}

/// One trace's staged result.
struct Staged {
    index: usize,
    written: RankWritten,
    tables: &'static [&'static str],
}

/// A staging directory removed with everything in it when dropped.
struct StagingDir(PathBuf);

impl Drop for StagingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

/// Reads trace `index` of the job and stages its tables under `stage/index/`.
fn stage_one(
    index: usize,
    path: &Path,
    stage: &Path,
    opts: &JobOptions,
) -> Result<Result<Staged, (usize, Unread)>, JobError> {
    let t: Trace = match crate::input::load(path, &opts.read, &mut |_, _| {}) {
        Ok(t) => t,
        Err(e) => {
            return Ok(Err((
                index,
                Unread {
                    rank: None,
                    path: path.to_owned(),
                    reason: e.to_string(),
                },
            )))
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
    for &name in names {
        let table = tables::build(&t, name);
        rows += table.rows();
        let dest = dir.join(format!("{name}.parquet"));
        write_file(&dest, opts.mode, |w| parquet::write(w, &table, &meta_text))?;
    }
    let dest = dir.join("meta.json");
    write_file(&dest, opts.mode, |w| {
        std::io::Write::write_all(w, meta_text.as_bytes())
    })?;
    let (rank, rank_from) = match t.meta.distributed.as_ref().and_then(|d| d.rank) {
        Some(r) => (r, RankFrom::Trace),
        None => (u32::MAX, RankFrom::InputOrder),
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
fn number_ranks(staged: &mut Vec<Staged>, unread: Vec<(usize, Unread)>) -> Vec<Unread> {
    use cutrace_analysis::job::rank_from_file_name;
    let from_name = |p: &Path| {
        p.file_name()
            .and_then(|n| rank_from_file_name(&n.to_string_lossy()))
    };
    let mut all: Vec<(usize, Result<Staged, Unread>)> =
        staged.drain(..).map(|s| (s.index, Ok(s))).collect();
    all.extend(unread.into_iter().map(|(i, u)| (i, Err(u))));
    all.sort_by_key(|a| a.0);
    let mut taken = std::collections::BTreeSet::new();
    let mut numbered: Vec<(u32, Result<Staged, Unread>)> = Vec::new();
    let mut unknown = Vec::new();
    let mut left_out = Vec::new();
    for (_, mut r) in all {
        let known = match &mut r {
            Ok(s) if s.written.rank_from == RankFrom::Trace => Some(s.written.rank),
            Ok(s) => {
                from_name(&s.written.path).inspect(|_| s.written.rank_from = RankFrom::FileName)
            }
            Err(u) => from_name(&u.path),
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

/// Writes the tables of the job `traces` (each one rank's trace) under `dir` as hive-style
/// partitions (module docs), ranks numbered as [`number_ranks`] says. A trace that cannot be read
/// is left out and listed ([`JobWritten::unread`]). `done` is called with the number of traces
/// read so far.
pub fn write_job(
    dir: &Path,
    traces: &[PathBuf],
    opts: &JobOptions,
    done: &(dyn Fn(usize) + Sync),
) -> Result<JobWritten, JobError> {
    if traces.is_empty() {
        return Err(JobError::Empty);
    }
    if !opts.replace {
        if let Some(n) = partitions_in(dir).first() {
            return Err(JobError::Exists(dir.join(n)));
        }
    }
    files::create_dir_all(dir, files::dir_mode(opts.mode)).map_err(io(dir))?;
    let stage = StagingDir(dir.join(format!(".cutrace-job.{}.tmp", std::process::id())));
    let _ = std::fs::remove_dir_all(&stage.0);
    files::create_dir_all(&stage.0, 0o700).map_err(io(&stage.0))?;

    // Several traces at once: each read on one thread, so the workers share the cores.
    let workers = opts.workers.clamp(1, traces.len());
    let mut read = opts.read;
    if workers > 1 {
        read.import_threads = Some(1);
    }
    let opts = &JobOptions { read, ..*opts };
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Result<Staged, (usize, Unread)>>> = Mutex::new(Vec::new());
    let error: Mutex<Option<JobError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= traces.len() || failed.load(Ordering::Relaxed) {
                    break;
                }
                match stage_one(i, &traces[i], &stage.0, opts) {
                    Ok(r) => results.lock().expect("no worker panics").push(r),
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        error.lock().expect("no worker panics").get_or_insert(e);
                    }
                }
                done(finished.fetch_add(1, Ordering::Relaxed) + 1);
            });
        }
    });
    if let Some(e) = error.into_inner().expect("no worker panics") {
        return Err(e);
    }
    let mut staged = Vec::new();
    let mut unread = Vec::new();
    for r in results.into_inner().expect("no worker panics") {
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
    let unread = number_ranks(&mut staged, unread);

    // Into the partition layout, inside the staging directory.
    let out = stage.0.join("out");
    let mut written: Vec<&'static str> = Vec::new();
    for s in &staged {
        let from = stage.0.join(s.index.to_string());
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
            files::create_dir_all(parent, files::dir_mode(opts.mode)).map_err(io(parent))?;
            std::fs::rename(from.join(&name), &to).map_err(io(&to))?;
        }
        for &n in s.tables {
            if !written.contains(&n) {
                written.push(n);
            }
        }
    }
    written.sort_by_key(|n| tables::ALL_NAMES.iter().position(|a| a == n));

    // Each directory put in place; one of an earlier export moved aside first, then removed.
    let mut removed = Vec::new();
    let old = stage.0.join("old");
    files::create_dir_all(&old, 0o700).map_err(io(&old))?;
    for name in tables::ALL_NAMES.iter().chain([&META_DIR]) {
        let dest = dir.join(name);
        let exists = std::fs::symlink_metadata(&dest).is_ok();
        if exists && !opts.replace {
            return Err(JobError::Exists(dest));
        }
        let new = out.join(name);
        let have = new.is_dir();
        if exists {
            std::fs::rename(&dest, old.join(name)).map_err(io(&dest))?;
            if !have {
                removed.push(name.to_string());
            }
        }
        if have {
            std::fs::rename(&new, &dest).map_err(io(&dest))?;
        }
    }
    Ok(JobWritten {
        ranks: staged.into_iter().map(|s| s.written).collect(),
        unread,
        tables: written,
        removed,
    })
}
