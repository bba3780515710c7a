//! What the inputs of `report`, `diff` and `convert` are: one trace, or the ranks of a
//! distributed job ([`classify`]), each rank a trace, a directory's native parts of one rank, or a
//! rank summary (`cutrace report --rank-summary`, told from a trace by [`is_rank_summary`]).
//!
//! What is a job: more than one rank found. The inputs' units are: each torch.profiler file
//! (a rank each); each rank summary; in a directory of native parts, the parts of each rank
//! their headers state (parts of one rank are merged; a directory whose parts state no rank, or
//! one rank, is one unit); in a directory, its trace files, or else its subdirectories (one per
//! host or rank). One unit that is a trace is that trace, reported as before; two or more units,
//! or any summary, are a job.
//!
//! Only what the inputs are is decided here; reading and summarizing them is the caller's
//! (`cutrace-export`'s `input`).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::TraceError;
use crate::limits::Limits;
use crate::native::PART_EXTENSION;

/// What the inputs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {
    /// One trace, to read as one.
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
    /// The files the unit is read from, as text.
    pub fn paths(&self) -> Vec<String> {
        match self {
            Unit::Summary(p) | Unit::Trace(p) => vec![p.display().to_string()],
            Unit::Parts { paths, .. } => paths.iter().map(|p| p.display().to_string()).collect(),
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
    let n = crate::open::read_up_to(&mut f, &mut head).unwrap_or(0);
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
const TRACE_FIRST_KEYS: [&str; 6] = crate::kineto::vocab::top::TRACE_FIRST;

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

/// How much of a native part is read to learn its rank: its header is its first chunk.
const PEEK_BYTES: u64 = 1 << 20;

/// The rank a native part's header states, from a read of its first chunk(s) only.
fn part_rank(path: &Path, limits: &Limits) -> Option<u32> {
    let f = std::fs::File::open(path).ok()?;
    let head = f.take(PEEK_BYTES);
    let t = crate::native::read_stream(path, head, None, limits, &mut |_, _| {}).ok()?;
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
    if let Some(runs) = tensorboard_runs(dir, &entries) {
        return tensorboard_units(dir, runs, limits, notes);
    }
    // A job directory of per-host or per-rank trace directories.
    let mut units = Vec::new();
    for d in entries.iter().filter(|p| p.is_dir()) {
        units.extend(dir_units(d, limits, notes, depth + 1)?);
    }
    Ok(units)
}

/// A TensorBoard log directory (torch.profiler's `tensorboard_trace_handler` writes
/// `LOGDIR/plugins/profile/RUN/HOST_PID.*.pt.trace.json[.gz]`, one RUN per profiling session,
/// named by its time): its run directories, in name order, when `dir` is such a log directory or
/// its `plugins/profile`.
fn tensorboard_runs(dir: &Path, entries: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let named = |p: &Path, n: &str| p.file_name().is_some_and(|f| f == n);
    let profile = if named(dir, "profile") && dir.parent().is_some_and(|p| named(p, "plugins")) {
        dir.to_path_buf()
    } else {
        let p = dir.join("plugins").join("profile");
        if !entries.iter().any(|e| named(e, "plugins")) || !p.is_dir() {
            return None;
        }
        p
    };
    let runs: Vec<PathBuf> = sorted_entries(&profile)
        .ok()?
        .into_iter()
        .filter(|r| r.is_dir())
        .collect();
    (!runs.is_empty()).then_some(runs)
}

/// The traces of a TensorBoard log directory's latest run (its workers are the ranks), with a
/// note naming the run read and the others.
fn tensorboard_units(
    dir: &Path,
    runs: Vec<PathBuf>,
    limits: &Limits,
    notes: &mut Vec<String>,
) -> Result<Vec<Unit>, TraceError> {
    let mut with_traces = Vec::new();
    for r in runs {
        let units = dir_units(&r, limits, notes, 1)?;
        if !units.is_empty() {
            with_traces.push((r, units));
        }
    }
    let Some((run, units)) = with_traces.pop() else {
        return Ok(Vec::new());
    };
    let others: Vec<String> = with_traces
        .iter()
        .map(|(r, _)| r.display().to_string())
        .collect();
    notes.push(format!(
        "{}: a TensorBoard log directory; read its latest profile run, {}{}",
        dir.display(),
        run.display(),
        if others.is_empty() {
            String::new()
        } else {
            format!(
                " (not the {} earlier: {}; name one to read it)",
                others.len(),
                others.join(", ")
            )
        }
    ));
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

impl Inputs {
    /// The inputs as a job's units: one trace is a job of one rank.
    pub fn into_units(self) -> (Vec<Unit>, Vec<String>) {
        match self {
            Inputs::Trace(p) => (vec![Unit::Trace(p)], Vec::new()),
            Inputs::Job { units, notes } => (units, notes),
        }
    }
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
}
