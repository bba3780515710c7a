//! Reading a trace for `report`, `diff` and `convert`: a directory of native parts, or one input
//! (a file, a pipe, a FIFO, `-` for stdin) whose first bytes say what it is (a native part, a
//! torch.profiler JSON, gzip-compressed or not), read once.
//!
//! And reading a distributed job, once [`cutrace_trace::classify`] has said what its units are:
//! [`summarize`] runs the map step ([`RankSummary::from_trace`]) over the ranks on several
//! threads, each holding one rank's trace at a time and keeping only its summary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cutrace_analysis::job::rank_from_file_name;
use cutrace_analysis::{
    DeadReason, RankFrom, RankSummary, StepMatch, RANK_SUMMARY_OLDEST_READ, RANK_SUMMARY_VERSION,
};
use cutrace_trace::classify::Unit;
use cutrace_trace::{Limits, Progress, ReadOptions, Trace, TraceError};

/// Reads the trace at `path`, reporting bytes read to `progress`.
pub fn load(path: &Path, opts: &ReadOptions, progress: Progress<'_>) -> Result<Trace, TraceError> {
    cutrace_trace::open_with(path, opts, progress)
}

/// The rank a unit's file (or directory) name states, for a trace that does not state one.
fn name_rank(unit: &Unit) -> (Option<u32>, RankFrom) {
    let from_name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(rank_from_file_name)
    };
    let r = match unit {
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
    let (oldest, newest) = (RANK_SUMMARY_OLDEST_READ, RANK_SUMMARY_VERSION);
    if !(oldest..=newest).contains(&v.cutrace_rank_summary) {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: format!(
                "a rank summary of version {}, this cutrace reads versions {oldest} to {newest}: \
                 write it again with this cutrace's `report --rank-summary`",
                v.cutrace_rank_summary,
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
    summarize_unit_with::<()>(unit, which, opts, None).map(|s| s.0)
}

/// [`summarize_unit`], and with `lane` what it makes of the trace (the job page's timeline
/// buckets; nothing from a summary, which holds no intervals).
fn summarize_unit_with<B>(
    unit: &Unit,
    which: &StepMatch,
    opts: &ReadOptions,
    lane: Option<&Lane<'_, B>>,
) -> Result<(RankSummary, Option<B>), TraceError> {
    let look = |trace: &Trace| lane.and_then(|f| f(trace));
    summarize_unit_and(unit, which, opts, look).map(|(s, b)| (s, b.flatten()))
}

/// [`summarize_unit`], and what `look` makes of the trace while it is held (`None` when there is
/// no trace: a summary, or a trace that could not be read).
pub fn summarize_unit_and<T>(
    unit: &Unit,
    which: &StepMatch,
    opts: &ReadOptions,
    look: impl FnOnce(&Trace) -> T,
) -> Result<(RankSummary, Option<T>), TraceError> {
    let fallback = name_rank(unit);
    let read = match unit {
        Unit::Summary(p) => return read_summary(p).map(|s| (s, None)),
        Unit::Trace(p) => load(p, opts, &mut |_, _| {}),
        Unit::Parts { paths, .. } => {
            cutrace_trace::native::read_parts_with(paths, &opts.limits, &mut |_, _| {})
        }
    };
    let dead = |why: DeadReason| RankSummary::dead(fallback.0, fallback.1, unit.paths(), why);
    Ok(match read {
        Ok(trace) => {
            let buckets = Some(look(&trace));
            let mut s = match RankSummary::from_trace(&trace, fallback, which) {
                Ok(s) => s,
                Err(e) => dead(DeadReason::AnalysisFailed {
                    error: e.to_string(),
                }),
            };
            if s.paths.is_empty() {
                s.paths = unit.paths();
            }
            (s, buckets)
        }
        Err(e) => {
            // The dead rank lists its paths: the reason need not repeat the first.
            let why = error_chain(&e);
            let first = unit.paths().first().map(|p| format!("{p}: "));
            let error = first
                .and_then(|p| why.strip_prefix(&p).map(str::to_owned))
                .unwrap_or(why);
            (dead(DeadReason::Unreadable { error }), None)
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
    let all = summarize_with::<()>(units, which, limits, (threads, None), done)?;
    Ok(all.into_iter().map(|s| s.0).collect())
}

/// What a job's reader makes of each rank's trace while it holds it, beside the summary (the
/// job page's timeline buckets); `None` for nothing.
pub type Lane<'a, B> = dyn Fn(&Trace) -> Option<B> + Sync + 'a;

/// [`summarize`], and with `lane` what it makes of each rank's trace, kept beside its summary.
fn summarize_with<B: Send>(
    units: &[Unit],
    which: &StepMatch,
    limits: &Limits,
    (threads, lane): (usize, Option<&Lane<'_, B>>),
    done: &(dyn Fn(usize) + Sync),
) -> Result<Vec<(RankSummary, Option<B>)>, TraceError> {
    // Ranks are read in parallel; each import gets its share of the threads (one each when
    // there are more ranks than threads), so the cores are used and not oversubscribed, and no
    // more than one import takes on its own.
    let share =
        (threads / units.len().max(1)).clamp(1, cutrace_trace::limits::import_threads(None));
    let opts = ReadOptions {
        import_threads: Some(share),
        limits: *limits,
    };
    let finished = AtomicUsize::new(0);
    type Slot<B> = Option<Result<(RankSummary, Option<B>), TraceError>>;
    let mut slots: Vec<Slot<B>> = (0..units.len()).map(|_| None).collect();
    cutrace_trace::parallel::for_each(&mut slots, threads, |i, slot| {
        *slot = Some(summarize_unit_with(&units[i], which, &opts, lane));
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
    let t = (threads, top, None);
    job_report_with::<()>(units, notes, which, limits, t, done).map(|r| r.0)
}

/// [`job_report`], and with `lane` (the third of the tuple) what it makes of each rank's trace
/// (the job page's timeline buckets), by the paths of its summary (its `JobRank::paths`).
pub fn job_report_with<B: Send>(
    units: &[Unit],
    notes: Vec<String>,
    which: &StepMatch,
    limits: &Limits,
    (threads, top, lane): (usize, usize, Option<&Lane<'_, B>>),
    done: &(dyn Fn(usize) + Sync),
) -> Result<(cutrace_analysis::JobReport, HashMap<Vec<String>, B>), TraceError> {
    let all = summarize_with(units, which, limits, (threads, lane), done)?;
    let mut summaries = Vec::with_capacity(all.len());
    let mut lanes = HashMap::new();
    for (s, b) in all {
        if let Some(b) = b {
            lanes.insert(s.paths.clone(), b);
        }
        summaries.push(s);
    }
    let mut report = cutrace_analysis::JobReport::from_summaries(&summaries, top);
    report.notes.splice(
        0..0,
        notes
            .into_iter()
            .map(|note| cutrace_analysis::JobNote::Input { note }),
    );
    Ok((report, lanes))
}

#[cfg(test)]
mod tests {
    use cutrace_trace::classify::is_rank_summary;

    /// The trace crate's sniff against the summaries this crate writes.
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
            cutrace_analysis::DeadReason::Unreadable {
                error: "empty".into(),
            },
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

    /// A version-2 summary, whose `dead` was a string, still reads; versions outside those read
    /// are refused with the command that writes them again.
    #[test]
    fn a_version_2_summary_reads_with_its_reason() {
        use super::{read_summary, DeadReason, RankFrom, RankSummary};
        let dir = cutrace_testkit::Dir::new("summary-v2");
        let write = |name: &str, version: u32, dead: serde_json::Value| {
            let why = DeadReason::NoTimedKernel;
            let s = RankSummary::dead(Some(1), RankFrom::FileName, vec!["r1.json".into()], why);
            let mut v = serde_json::to_value(s).unwrap();
            v["cutrace_rank_summary"] = version.into();
            v["dead"] = dead;
            let p = dir.path(name);
            std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
            p
        };
        let read = |p: &std::path::Path| read_summary(p).unwrap().dead;
        let empty = write("empty.json", 2, "the file is empty".into());
        assert_eq!(
            read(&empty),
            Some(DeadReason::Unreadable {
                error: "the file is empty".into()
            })
        );
        let no_kernel = write("k.json", 2, "the trace holds no timed GPU kernel".into());
        assert_eq!(read(&no_kernel), Some(DeadReason::NoTimedKernel));
        let live = write("live.json", 2, serde_json::Value::Null);
        assert_eq!(read(&live), None);
        let typed = write(
            "typed.json",
            super::RANK_SUMMARY_VERSION,
            serde_json::json!({"kind": "analysis_failed", "error": "too many"}),
        );
        assert_eq!(
            read(&typed),
            Some(DeadReason::AnalysisFailed {
                error: "too many".into()
            })
        );
        let (oldest, newest) = (super::RANK_SUMMARY_OLDEST_READ, super::RANK_SUMMARY_VERSION);
        for v in [oldest - 1, newest + 1] {
            let p = write(&format!("v{v}.json"), v, serde_json::Value::Null);
            let e = read_summary(&p).unwrap_err().to_string();
            let want = format!("version {v}, this cutrace reads versions {oldest} to {newest}");
            assert!(e.contains(&want), "{e}");
        }
        let tired = serde_json::json!({"kind": "tired"});
        let bad = write("bad.json", super::RANK_SUMMARY_VERSION, tired);
        let e = read_summary(&bad).unwrap_err().to_string();
        assert!(e.contains("not a rank summary cutrace can read"), "{e}");
    }
}
