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

/// One rank written.
#[derive(Debug, Clone)]
pub struct RankWritten {
    pub rank: u32,
    pub path: PathBuf,
    /// False when the trace was cut off (written as far as recovered).
    pub complete: bool,
    pub kernels: usize,
    /// Rows over all its tables.
    pub rows: usize,
}

/// A trace of the job that could not be read (an empty or broken file: a dead rank); the rest
/// of the job is written without it.
#[derive(Debug, Clone)]
pub struct Unread {
    pub path: PathBuf,
    pub reason: String,
}

/// What [`write_job`] wrote.
#[derive(Debug, Default)]
pub struct JobWritten {
    /// By rank.
    pub ranks: Vec<RankWritten>,
    pub unread: Vec<Unread>,
    /// No trace named its rank, so each was numbered by its place in the job's list (from 0).
    pub ranks_by_order: bool,
    /// The table directories written, and those of an earlier export removed.
    pub tables: Vec<&'static str>,
    pub removed: Vec<String>,
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
    #[error(
        "{first} and {second} both say they are rank {rank}; convert the traces of one job \
         together (nothing written)"
    )]
    DuplicateRank {
        rank: u32,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(
        "{without} of the job's traces say which rank they are and {} do not (first: {}); \
         give the traces of one job, all recorded the same way (nothing written)",
        .missing.len(), .missing[0].display()
    )]
    SomeRanksUnknown {
        without: usize,
        missing: Vec<PathBuf>,
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
    rank: Option<u32>,
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
) -> Result<Result<Staged, Unread>, JobError> {
    let t: Trace = match crate::input::load(path, &opts.read, &mut |_, _| {}) {
        Ok(t) => t,
        Err(e) => {
            return Ok(Err(Unread {
                path: path.to_owned(),
                reason: e.to_string(),
            }))
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
    Ok(Ok(Staged {
        index,
        rank: t.meta.distributed.as_ref().and_then(|d| d.rank),
        written: RankWritten {
            rank: 0,
            path: path.to_owned(),
            complete: t.meta.complete,
            kernels: t.kernels.len(),
            rows,
        },
        tables: names,
    }))
}

/// Writes the tables of the job `traces` (each one rank's trace) under `dir` as hive-style
/// partitions (module docs). A rank is `TraceMeta::distributed.rank`; when no trace names its
/// rank, a trace's place in `traces`. A trace that cannot be read is left out and listed
/// ([`JobWritten::unread`]). `done` is called with the number of traces read so far.
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
    let results: Mutex<Vec<Result<Staged, Unread>>> = Mutex::new(Vec::new());
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
            Err(u) => unread.push(u),
        }
    }
    staged.sort_by_key(|s| s.index);
    unread.sort_by(|a, b| a.path.cmp(&b.path));
    if staged.is_empty() {
        return Err(JobError::NothingRead(unread));
    }
    let ranks_by_order = staged.iter().all(|s| s.rank.is_none());
    let missing: Vec<PathBuf> = staged
        .iter()
        .filter(|s| s.rank.is_none())
        .map(|s| s.written.path.clone())
        .collect();
    if !ranks_by_order && !missing.is_empty() {
        return Err(JobError::SomeRanksUnknown {
            without: staged.len() - missing.len(),
            missing,
        });
    }
    for s in &mut staged {
        s.written.rank = s.rank.unwrap_or(s.index as u32);
    }
    staged.sort_by_key(|s| s.written.rank);
    for w in staged.windows(2) {
        if w[0].written.rank == w[1].written.rank {
            return Err(JobError::DuplicateRank {
                rank: w[0].written.rank,
                first: w[0].written.path.clone(),
                second: w[1].written.path.clone(),
            });
        }
    }

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
        ranks_by_order,
        tables: written,
        removed,
    })
}
