//! Reading a trace for `report`, `diff` and `convert`: a directory of native parts, or one input
//! (a file, a pipe, a FIFO, `-` for stdin) whose first bytes say what it is (a native part, a
//! torch.profiler JSON, gzip-compressed or not), read once.
//!
//! And reading a distributed job: [`classify`] decides whether the inputs are one trace or the
//! ranks of a job, and [`summarize`] runs the map step ([`RankSummary::from_trace`]) over the
//! ranks on several threads, each holding one rank's trace at a time and keeping only its
//! summary.
//!
//! What is a job: more than one rank found. The inputs' units are: each torch.profiler file
//! (a rank each); each rank summary (`cutrace report --rank-summary`); in a directory of native
//! parts, the parts of each rank their headers state (parts of one rank are merged; a directory
//! whose parts state no rank, or one rank, is one unit); in a directory, its trace files, or else
//! its subdirectories (one per host or rank). One unit that is a trace is that trace, reported
//! as before; two or more units, or any summary, are a job.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cutrace_analysis::job::rank_from_file_name;
use cutrace_analysis::{RankFrom, RankSummary, StepMatch};
use cutrace_trace::native::PART_EXTENSION;
use cutrace_trace::{Limits, Progress, ReadOptions, Trace, TraceError};

/// Reads the trace at `path`, reporting bytes read to `progress`.
pub fn load(path: &Path, opts: &ReadOptions, progress: Progress<'_>) -> Result<Trace, TraceError> {
    cutrace_trace::open_with(path, opts, progress)
}

/// What the inputs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {
    /// One trace, read with [`load`].
    Trace(PathBuf),
    /// The ranks of a job, each to summarize; and what was left out, in words.
    Job {
        units: Vec<Unit>,
        notes: Vec<String>,
    },
}

/// One rank's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// A summary written by `cutrace report --rank-summary`.
    Summary(PathBuf),
    /// A trace: one file, or a directory of native parts merged (one rank).
    Trace(PathBuf),
    /// Native parts of one rank, merged.
    Parts {
        rank: Option<u32>,
        paths: Vec<PathBuf>,
    },
}

impl Unit {
    fn paths(&self) -> Vec<String> {
        match self {
            Unit::Summary(p) | Unit::Trace(p) => vec![p.display().to_string()],
            Unit::Parts { paths, .. } => paths.iter().map(|p| p.display().to_string()).collect(),
        }
    }

    /// The rank the file (or directory) name states, for a trace that does not state one.
    fn name_rank(&self) -> (Option<u32>, RankFrom) {
        let from_name = |p: &Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(rank_from_file_name)
        };
        let r = match self {
            Unit::Summary(_) => None,
            Unit::Trace(p) => from_name(p),
            // The parts' headers state it.
            Unit::Parts { rank: Some(r), .. } => return (Some(*r), RankFrom::Trace),
            Unit::Parts { paths, .. } => paths.first().and_then(|p| p.parent()).and_then(from_name),
        };
        match r {
            Some(r) => (Some(r), RankFrom::FileName),
            None => (None, RankFrom::Unknown),
        }
    }
}

/// Whether the file at `path` is a rank summary: its first member is `cutrace_rank_summary`, as
/// cutrace writes it, or (a summary re-serialized with its keys reordered, by `jq -S` say) a
/// JSON object of at most 16 MiB with a `cutrace_rank_summary` member at its top level. Only a
/// regular file is sniffed: a pipe or FIFO is read once, by the trace reader. A trace that
/// starts as torch.profiler and cutrace write one (`schemaVersion` first, or another of
/// [`TRACE_FIRST_KEYS`]) is told by that first member alone, without reading it whole: a job of
/// 1,000 ranks was read twice over, the first time only to look for the summary's key. Any other
/// object is read member by member, each value skipped as it is read (no value is kept: a 10 MB
/// trace once took 853 MB here, parsed whole), until a summary's or a trace's member decides.
pub fn is_rank_summary(path: &Path) -> bool {
    use std::io::Seek;
    use std::os::unix::fs::OpenOptionsExt;
    // Not opened unless it is a regular file: opening a FIFO, even without blocking, would
    // release its writer into a pipe this sniff then closes, and the trace reader after it
    // would wait for a writer forever.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    // Opened once, without blocking (a FIFO put in its place meanwhile must not hang the
    // sniff), and judged by what was opened.
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = f.metadata() else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut head = [0u8; 256];
    let n = read_up_to(&mut f, &mut head).unwrap_or(0);
    let head = &head[..n];
    if !head.trim_ascii_start().starts_with(b"{") {
        return false;
    }
    match first_key(head) {
        Some(k) if k == SUMMARY_KEY => return true,
        Some(k) if TRACE_FIRST_KEYS.contains(&k) => return false,
        // Another first member, an escaped one, or one past the head: its members decide.
        _ => {}
    }
    if meta.len() > 16 << 20 {
        return false;
    }
    f.rewind().is_ok() && top_level_says_summary(std::io::BufReader::new(f))
}

const SUMMARY_KEY: &str = "cutrace_rank_summary";

/// Whether the JSON object `r` holds has a [`SUMMARY_KEY`] member before any member of
/// [`TRACE_FIRST_KEYS`]: read in one pass, member by member, skipping values without keeping
/// them (memory stays constant, whatever the object holds).
fn top_level_says_summary(r: impl Read) -> bool {
    use serde::de::{Deserializer, Error, IgnoredAny, MapAccess, Visitor};
    use std::cell::Cell;
    /// A top-level member's name: the summary's key, a trace's, or another.
    enum Key {
        Summary,
        Trace,
        Other,
    }
    impl<'de> serde::Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Key;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a member name")
                }
                fn visit_str<E: Error>(self, k: &str) -> Result<Key, E> {
                    Ok(if k == SUMMARY_KEY {
                        Key::Summary
                    } else if TRACE_FIRST_KEYS.contains(&k) {
                        Key::Trace
                    } else {
                        Key::Other
                    })
                }
            }
            d.deserialize_str(V)
        }
    }
    /// Walks the members, stopping (with an error that ends the parse) once one decides.
    struct Members<'a>(&'a Cell<Option<bool>>);
    impl<'de> Visitor<'de> for Members<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while let Some(k) = m.next_key::<Key>()? {
                match k {
                    Key::Summary | Key::Trace => {
                        self.0.set(Some(matches!(k, Key::Summary)));
                        return Err(A::Error::custom("decided"));
                    }
                    Key::Other => {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    let verdict = Cell::new(None);
    let _ = serde_json::Deserializer::from_reader(r).deserialize_map(Members(&verdict));
    verdict.get() == Some(true)
}

/// First members that mark a Chrome/Kineto trace: torch.profiler and cutrace's `--chrome` write
/// `schemaVersion` first; the others are the top-level members of such traces.
const TRACE_FIRST_KEYS: [&str; 6] = [
    "schemaVersion",
    "traceEvents",
    "deviceProperties",
    "distributedInfo",
    "displayTimeUnit",
    "baseTimeNanoseconds",
];

/// The first member's name of the JSON object that `head` starts, where it is a plain string
/// (no escapes) within `head`.
fn first_key(head: &[u8]) -> Option<&str> {
    let text = head
        .trim_ascii_start()
        .strip_prefix(b"{")?
        .trim_ascii_start();
    let rest = text.strip_prefix(b"\"")?;
    let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
    (rest[end] == b'"')
        .then(|| std::str::from_utf8(&rest[..end]).ok())
        .flatten()
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// How much of a native part is read to learn its rank: its header is its first chunk.
const PEEK_BYTES: u64 = 1 << 20;

/// The rank a native part's header states, from a read of its first chunk(s) only.
fn part_rank(path: &Path, limits: &Limits) -> Option<u32> {
    let f = std::fs::File::open(path).ok()?;
    let head = f.take(PEEK_BYTES);
    let t = cutrace_trace::native::read_stream(path, head, None, limits, &mut |_, _| {}).ok()?;
    t.meta.distributed.and_then(|d| d.rank)
}

fn is_trace_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    p.is_file() && (name.ends_with(".json") || name.ends_with(".json.gz"))
}

/// What a directory entry named as a trace or a part is when it is no regular file.
fn not_a_file(p: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let named = name.ends_with(".json")
        || name.ends_with(".json.gz")
        || p.extension().and_then(|x| x.to_str()) == Some(PART_EXTENSION);
    if !named {
        return None;
    }
    let Ok(m) = std::fs::metadata(p) else {
        return Some("a link to nothing (or unreadable)");
    };
    let t = m.file_type();
    Some(if t.is_file() || t.is_dir() {
        return None;
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    })
}

/// Names, in `notes`, the entries of a job directory that are named as traces or parts but are
/// no regular files (FIFOs, devices, sockets, dangling links): left out, never opened. At most
/// [`NOT_FILES_NAMED`] are named, then counted.
fn note_not_files(entries: &[PathBuf], notes: &mut Vec<String>) {
    let mut n = 0usize;
    for (p, what) in entries.iter().filter_map(|p| not_a_file(p).map(|w| (p, w))) {
        if n < NOT_FILES_NAMED {
            notes.push(format!(
                "{}: {what}, not a trace file: left out of the job",
                p.display()
            ));
        }
        n += 1;
    }
    if n > NOT_FILES_NAMED {
        notes.push(format!(
            "{} more entries named as traces that are no regular files: left out of the job",
            n - NOT_FILES_NAMED
        ));
    }
}

/// How many left-out entries of one directory are named one by one.
const NOT_FILES_NAMED: usize = 10;

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| TraceError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    v.sort();
    Ok(v)
}

/// The units of one directory (see the module's rules); empty when it holds none.
fn dir_units(
    dir: &Path,
    limits: &Limits,
    notes: &mut Vec<String>,
    depth: u32,
) -> Result<Vec<Unit>, TraceError> {
    let entries = sorted_entries(dir)?;
    note_not_files(&entries, notes);
    let parts: Vec<&PathBuf> = entries
        .iter()
        .filter(|p| p.is_file() && p.extension().and_then(|x| x.to_str()) == Some(PART_EXTENSION))
        .collect();
    let files: Vec<Unit> = entries
        .iter()
        .filter(|p| is_trace_file(p))
        .map(|p| {
            if is_rank_summary(p) {
                Unit::Summary(p.clone())
            } else {
                Unit::Trace(p.clone())
            }
        })
        .collect();
    if !parts.is_empty() {
        // A run directory may hold other JSON (an export, a script's output): the parts are
        // the trace, and what else is there is said, not read.
        if !files.is_empty() {
            notes.push(format!(
                "{}: {} *.json file(s) beside its cutrace parts not read as ranks (a directory \
                 of parts is read as its parts); name torch.profiler traces as inputs of their own",
                dir.display(),
                files.len()
            ));
        }
        return Ok(part_units(dir, &parts, limits, notes));
    }
    if !files.is_empty() || depth > 0 {
        return Ok(files);
    }
    // A job directory of per-host or per-rank trace directories.
    let mut units = Vec::new();
    for d in entries.iter().filter(|p| p.is_dir()) {
        units.extend(dir_units(d, limits, notes, depth + 1)?);
    }
    Ok(units)
}

/// The units of a directory's native parts: one per rank their headers state, or the whole
/// directory as one trace when they state fewer than two ranks.
fn part_units(
    dir: &Path,
    parts: &[&PathBuf],
    limits: &Limits,
    notes: &mut Vec<String>,
) -> Vec<Unit> {
    let ranks: Vec<Option<u32>> = if parts.len() > 1 {
        parts.iter().map(|p| part_rank(p, limits)).collect()
    } else {
        vec![None]
    };
    let mut distinct: Vec<u32> = ranks.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 {
        return vec![Unit::Trace(dir.to_path_buf())];
    }
    let mut units = Vec::new();
    for r in distinct {
        let paths = parts
            .iter()
            .zip(&ranks)
            .filter(|(_, pr)| **pr == Some(r))
            .map(|(p, _)| (*p).clone())
            .collect();
        units.push(Unit::Parts {
            rank: Some(r),
            paths,
        });
    }
    for (p, _) in parts.iter().zip(&ranks).filter(|(_, r)| r.is_none()) {
        notes.push(format!(
            "{}: the part states no rank (a launcher or helper process): left out of the job",
            p.display()
        ));
    }
    units
}

/// Decides whether `paths` are one trace or a job's ranks (see the module's rules).
pub fn classify(paths: &[PathBuf], limits: &Limits) -> Result<Inputs, TraceError> {
    let mut units = Vec::new();
    let mut notes = Vec::new();
    for p in paths {
        // A path that is not there is a mistake in the command, not a dead rank.
        if p.as_os_str() != "-" {
            if let Err(e) = std::fs::metadata(p) {
                return Err(TraceError::io(p, e));
            }
        }
        if p.as_os_str() != "-" && p.is_dir() {
            units.extend(dir_units(p, limits, &mut notes, 0)?);
        } else if p.as_os_str() != "-" && is_rank_summary(p) {
            units.push(Unit::Summary(p.clone()));
        } else {
            units.push(Unit::Trace(p.clone()));
        }
    }
    match units.as_slice() {
        // One trace given as is, or a directory that is one trace (or holds nothing: the
        // trace reader says why).
        [] if paths.len() == 1 => Ok(Inputs::Trace(paths[0].clone())),
        [Unit::Trace(t)] if paths.len() == 1 => Ok(Inputs::Trace(t.clone())),
        [] => Err(TraceError::Unsupported {
            path: paths[0].clone(),
            what: "no trace found in these inputs: expected torch.profiler traces (*.json, \
                   *.json.gz), directories of `cutrace record` parts, or rank summaries"
                .into(),
        }),
        _ => Ok(Inputs::Job { units, notes }),
    }
}

/// Reads a rank summary written by `cutrace report --rank-summary`.
pub fn read_summary(path: &Path) -> Result<RankSummary, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
    let again = "write it again with `cutrace report --rank-summary TRACE -o SUMMARY.json` of \
                 this cutrace version";
    let malformed = |what: String| TraceError::Malformed {
        path: path.into(),
        offset: 0,
        what,
        hint: again.into(),
    };
    // The version first: another version's summary may not parse as this one's.
    #[derive(serde::Deserialize)]
    struct Version {
        cutrace_rank_summary: u32,
    }
    let v: Version = serde_json::from_slice(&bytes)
        .map_err(|e| malformed(format!("not a rank summary cutrace can read ({e})")))?;
    if v.cutrace_rank_summary != cutrace_analysis::RANK_SUMMARY_VERSION {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: format!(
                "a rank summary of version {}, this cutrace reads version {}: write it again \
                 with this cutrace's `report --rank-summary`",
                v.cutrace_rank_summary,
                cutrace_analysis::RANK_SUMMARY_VERSION
            ),
        });
    }
    let s: RankSummary = serde_json::from_slice(&bytes)
        .map_err(|e| malformed(format!("not a rank summary cutrace can read ({e})")))?;
    // A summary is input a user controls: figures that contradict each other are refused.
    s.check()
        .map_err(|why| malformed(format!("a rank summary whose figures disagree: {why}")))?;
    Ok(s)
}

/// One unit's summary: read (a summary), or its trace read and reduced, then dropped. A trace
/// that cannot be read, or cannot be analysed, is a dead rank with the reason.
pub fn summarize_unit(
    unit: &Unit,
    which: &StepMatch,
    opts: &ReadOptions,
) -> Result<RankSummary, TraceError> {
    let fallback = unit.name_rank();
    let read = match unit {
        Unit::Summary(p) => return read_summary(p),
        Unit::Trace(p) => load(p, opts, &mut |_, _| {}),
        Unit::Parts { paths, .. } => {
            cutrace_trace::native::read_parts_with(paths, &opts.limits, &mut |_, _| {})
        }
    };
    let dead = |why: String| RankSummary::dead(fallback.0, fallback.1, unit.paths(), why);
    Ok(match read {
        Ok(trace) => {
            let mut s = match RankSummary::from_trace(&trace, fallback, which) {
                Ok(s) => s,
                Err(e) => dead(e.to_string()),
            };
            if s.paths.is_empty() {
                s.paths = unit.paths();
            }
            s
        }
        Err(e) => {
            // The dead rank lists its paths: the reason need not repeat the first.
            let why = error_chain(&e);
            let first = unit.paths().first().map(|p| format!("{p}: "));
            let why = first
                .and_then(|p| why.strip_prefix(&p).map(str::to_owned))
                .unwrap_or(why);
            dead(why)
        }
    })
}

/// One trace (a file, or a directory of one rank's parts) summarized as one rank, with the import
/// free to use every core: the map step of `cutrace report --rank-summary`.
pub fn summarize_trace(
    path: &Path,
    which: &StepMatch,
    limits: &Limits,
) -> Result<RankSummary, TraceError> {
    // A trace that is not there is a mistake in the command (or a worker without the shared
    // filesystem), not a dead rank.
    if path.as_os_str() != "-" {
        std::fs::metadata(path).map_err(|e| TraceError::io(path, e))?;
    }
    let opts = ReadOptions {
        import_threads: None,
        limits: *limits,
    };
    summarize_unit(&Unit::Trace(path.to_path_buf()), which, &opts)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s += &format!(": {x}");
        src = x.source();
    }
    s
}

/// The map step over a job's units on `threads` threads (at least one). Summaries come back in
/// unit order. Each thread holds one trace at a time; only summaries are kept. `done` is called
/// after each unit with the count finished.
pub fn summarize(
    units: &[Unit],
    which: &StepMatch,
    limits: &Limits,
    threads: usize,
    done: &(dyn Fn(usize) + Sync),
) -> Result<Vec<RankSummary>, TraceError> {
    // Ranks are read in parallel; each import gets its share of the threads (one each when
    // there are more ranks than threads), so the cores are used and not oversubscribed.
    let opts = ReadOptions {
        import_threads: Some((threads / units.len().max(1)).max(1)),
        limits: *limits,
    };
    let finished = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<RankSummary, TraceError>>> =
        (0..units.len()).map(|_| None).collect();
    cutrace_trace::parallel::for_each(&mut slots, threads, |i, slot| {
        *slot = Some(summarize_unit(&units[i], which, &opts));
        done(finished.fetch_add(1, Ordering::Relaxed) + 1);
    });
    slots
        .into_iter()
        .map(|s| {
            s.unwrap_or_else(|| {
                Err(TraceError::Unsupported {
                    path: PathBuf::from("?"),
                    what: "a rank's analysis stopped unexpectedly".into(),
                })
            })
        })
        .collect()
}

impl Inputs {
    /// The inputs as a job's units: one trace is a job of one rank.
    pub fn into_units(self) -> (Vec<Unit>, Vec<String>) {
        match self {
            Inputs::Trace(p) => (vec![Unit::Trace(p)], Vec::new()),
            Inputs::Job { units, notes } => (units, notes),
        }
    }
}

/// The job report of `units`: the map ([`summarize`], calling `done` after each unit) on
/// `threads` threads, then the reduce; `notes` (what classifying the inputs left out) come first
/// in its notes.
pub fn job_report(
    units: &[Unit],
    notes: Vec<String>,
    which: &StepMatch,
    limits: &Limits,
    (threads, top): (usize, usize),
    done: &(dyn Fn(usize) + Sync),
) -> Result<cutrace_analysis::JobReport, TraceError> {
    let summaries = summarize(units, which, limits, threads, done)?;
    let mut report = cutrace_analysis::JobReport::from_summaries(&summaries, top);
    report.notes.splice(
        0..0,
        notes
            .into_iter()
            .map(|note| cutrace_analysis::JobNote::Input { note }),
    );
    Ok(report)
}

/// One thread per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_members_decide_in_one_pass_without_keeping_values() {
        let says = |j: &str| top_level_says_summary(j.as_bytes());
        // A summary with its members sorted (`jq -S`) or one added in front.
        assert!(says(
            r#"{"a": [1, {"b": 2}], "cutrace_rank_summary": 1, "z": 0}"#
        ));
        // A trace's member first decides against, whatever comes later.
        assert!(!says(
            r#"{"trace_id": "x", "traceEvents": [{"name": "cutrace_rank_summary"}], "cutrace_rank_summary": 1}"#
        ));
        // The key inside a value is no summary; nor is broken or non-object JSON.
        assert!(!says(r#"{"x": {"cutrace_rank_summary": 1}}"#));
        assert!(!says(r#"{"x": "cutrace_rank_summary"}"#));
        assert!(!says(r#"["cutrace_rank_summary"]"#));
        assert!(!says(r#"{"x": [1, 2"#));
        // A deeply nested value is skipped without a stack overflow, and the member after it
        // still counts.
        let deep = format!(
            "{{\"x\": {}{}, \"cutrace_rank_summary\": 1}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(says(&deep));
    }

    #[test]
    fn the_first_member_is_read_from_the_head_alone() {
        assert_eq!(
            first_key(b" \n{ \"schemaVersion\": 1"),
            Some("schemaVersion")
        );
        assert_eq!(first_key(b"{\"busy_ns\":"), Some("busy_ns"));
        // Cut off, escaped, not an object, or no member: no name.
        assert_eq!(first_key(b"{\"cutrace_rank_sum"), None);
        assert_eq!(first_key(b"{\"a\\u0062\": 1}"), None);
        assert_eq!(first_key(b"[{\"a\": 1}]"), None);
        assert_eq!(first_key(b"{}"), None);
    }

    #[test]
    fn a_trace_is_told_by_its_first_member_and_a_summary_by_its_key() {
        let dir = cutrace_testkit::Dir::new("sniff");
        let write = |name: &str, text: &[u8]| {
            let p = dir.path(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        // A trace that starts as torch.profiler writes one: a trace, whatever it holds further
        // on (here the summary's key at the top level, which a summary would have).
        let trace = write(
            "rank0.json",
            br#"{"schemaVersion": 1, "cutrace_rank_summary": 1, "traceEvents": []}"#,
        );
        assert!(!is_rank_summary(&trace));
        // A summary as cutrace writes it, and with its keys sorted (`jq -S`): another member
        // comes first.
        let mut v = serde_json::to_value(cutrace_analysis::RankSummary::dead(
            Some(3),
            cutrace_analysis::RankFrom::Trace,
            vec!["r3.json".into()],
            "empty".into(),
        ))
        .unwrap();
        let as_written = write("r3.json", &serde_json::to_vec(&v).unwrap());
        assert!(is_rank_summary(&as_written));
        let sorted: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_value(v.take()).unwrap();
        let sorted = write("r3.sorted.json", &serde_json::to_vec(&sorted).unwrap());
        assert!(is_rank_summary(&sorted));
        // A member someone added, sorted first: still a summary.
        let added = write(
            "r3.added.json",
            br#"{"a_note": "x", "cutrace_rank_summary": 1, "rank": 3}"#,
        );
        assert!(is_rank_summary(&added));
        // The key only inside another member: not a summary.
        let nested = write(
            "fake.json",
            br#"{"busy_ns": 1, "x": {"cutrace_rank_summary": 1}}"#,
        );
        assert!(!is_rank_summary(&nested));
        // Not an object (a native part starts with its magic): not a summary.
        let part = write("p.cutrace", b"CUTRACE\0{\"cutrace_rank_summary\": 1}");
        assert!(!is_rank_summary(&part));
    }
}
