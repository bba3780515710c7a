//! `cutrace report` and `cutrace diff` over a distributed job, and `report --rank-summary`: what
//! the command line does with a job, short of parsing its arguments and writing its output, so
//! the binary stays thin. Each function returns the bytes to print (text or JSON) or what to
//! tell the user, as a typed error.

use std::path::{Path, PathBuf};

use cutrace_analysis::{RankSummary, StepMatch};
use cutrace_trace::classify::{self, Inputs};
use cutrace_trace::{Limits, TraceError};

use crate::input;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The request cannot be served as asked; the message says what to do instead.
    #[error("{0}")]
    Refused(String),
    #[error("writing {0}")]
    Write(PathBuf, #[source] std::io::Error),
    #[error("serializing the {what}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// What the command line asked for, as far as a job is concerned.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub which: &'a StepMatch,
    /// `--steps` was given (so matching nothing is an error).
    pub steps_given: bool,
    pub limits: Limits,
    /// `--threads`; one per core when `None`.
    pub threads: Option<usize>,
    pub top: usize,
    pub json: bool,
    /// `--html`: the job's page ([`crate::html::job`]) instead of text or JSON.
    pub html: bool,
    /// Options that apply to one trace only, given (`--from`, `--to`; `--html` for a diff).
    pub one_trace_options: Vec<&'static str>,
    /// `--wide`: the text's long form, not fitted to [`crate::text::WIDTH`] columns.
    pub wide: bool,
    /// `--critical-path`: each step's critical path across the ranks (not on the page).
    pub critical_path: bool,
}

impl<'a> Request<'a> {
    /// A request with one thread per core, `--steps` not given and no one-trace option.
    pub fn new(which: &'a StepMatch, limits: Limits, top: usize, json: bool) -> Request<'a> {
        Request {
            which,
            steps_given: false,
            limits,
            threads: None,
            top,
            json,
            html: false,
            one_trace_options: Vec::new(),
            wide: false,
            critical_path: false,
        }
    }

    fn threads(&self) -> usize {
        self.threads.unwrap_or_else(cutrace_trace::limits::cores)
    }

    fn refuse_one_trace_options(&self, what: &str) -> Result<(), JobError> {
        match self.one_trace_options.as_slice() {
            [] => Ok(()),
            given => {
                let (verb, them) = if given.len() == 1 {
                    ("applies", "it")
                } else {
                    ("apply", "them")
                };
                Err(JobError::Refused(format!(
                    "{} {verb} to one trace, and {what}: report one rank's trace with {them}, or \
                     drop {them}",
                    given.join(" and ")
                )))
            }
        }
    }
}

/// The one-trace options given, by name, from whether `--html`, `--from`, `--to` were.
pub fn given(html: bool, from: bool, to: bool) -> Vec<&'static str> {
    let flags = [("--html", html), ("--from", from), ("--to", to)];
    flags.iter().filter(|f| f.1).map(|f| f.0).collect()
}

/// What `cutrace report FILES…` is.
pub enum Report {
    /// One trace: the one-trace report reads it.
    OneTrace(PathBuf),
    /// A job: its report, to print.
    Job(Vec<u8>),
    /// A job's page (`--html`), to write where `--html` says.
    JobPage(String),
}

/// `cutrace report FILES…`: one trace, or the job report of several ranks. `progress` is called
/// with (ranks read, ranks) as the map runs.
pub fn report(
    files: &[PathBuf],
    req: &Request<'_>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Report, JobError> {
    let (units, notes) = match classify::classify(files, &req.limits)? {
        Inputs::Trace(p) => return Ok(Report::OneTrace(p)),
        Inputs::Job { units, notes } => (units, notes),
    };
    req.refuse_one_trace_options(&format!("these inputs are a job of {} ranks", units.len()))?;
    let n = units.len();
    // The page's timeline keeps each rank's buckets, as few as its lanes' levels need.
    let buckets = crate::html::job_lod::fine_buckets(crate::html::job_lod::rank_levels(n));
    let look = |trace: &cutrace_trace::Trace| crate::html::job_lod::rank_buckets(trace, buckets);
    let lane: Option<&input::Lane<'_, crate::html::job_lod::RankBuckets>> =
        if req.html { Some(&look) } else { None };
    let (report, lanes, critical_path) = if req.critical_path {
        let with = req.html.then_some(buckets);
        let (report, cp, lanes) = job_critical_path(&units, notes, req, with, &|k| progress(k, n))?;
        (report, lanes, Some(cp))
    } else {
        let (report, lanes) = input::job_report_with(
            &units,
            notes,
            req.which,
            &req.limits,
            (req.threads(), req.top, lane),
            &|k| progress(k, n),
        )?;
        (report, lanes, None)
    };
    require_live(&report)?;
    refuse_unrelated(files, &report)?;
    if req.steps_given && report.steps.steps.is_empty() {
        return Err(JobError::Refused(format!(
            "--steps {}: no host range of any rank matches it",
            req.which.text()
        )));
    }
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    if req.html {
        let page =
            crate::html::job::page(&names.join(" "), &report, &lanes, critical_path.as_ref());
        return Ok(Report::JobPage(page));
    }
    if req.json {
        let mut j = report_json(&report);
        j.critical_path = critical_path.as_ref();
        return json(&j, "report").map(Report::Job);
    }
    let mut text = String::new();
    crate::text::job::render(&mut text, &names.join(" "), &report, req.top);
    if let Some(cp) = &critical_path {
        crate::text::critical_path::render_job(&mut text, cp, req.top, req.wide);
    }
    if !req.wide {
        text = crate::text::fit(&text);
    }
    Ok(Report::Job(text.into_bytes()))
}

/// What the critical path keeps of one rank's trace: its chains, and with a page its timeline's
/// buckets.
struct RankPath {
    chains: Option<cutrace_analysis::job_path::RankChains>,
    buckets: Option<crate::html::job_lod::RankBuckets>,
}

/// The job's report, and its critical path: each rank's chains made while its trace is held
/// ([`cutrace_analysis::job_path::rank_chains`]), joined at the collectives; with `buckets`
/// (a page's), each rank's timeline buckets too.
fn job_critical_path(
    units: &[cutrace_trace::classify::Unit],
    notes: Vec<String>,
    req: &Request<'_>,
    buckets: Option<u64>,
    done: &(dyn Fn(usize) + Sync),
) -> Result<
    (
        cutrace_analysis::JobReport,
        cutrace_analysis::job_path::JobCriticalPath,
        crate::html::job_lod::RankLanes,
    ),
    JobError,
> {
    use cutrace_analysis::job_path::{join, rank_chains, RankChains};
    let which = req.which;
    let look = |trace: &cutrace_trace::Trace| -> Option<RankPath> {
        let fallback = (None, cutrace_analysis::RankFrom::Unknown);
        let chains = RankSummary::from_trace(trace, fallback, which)
            .ok()
            .map(|s| rank_chains(trace, &s, which));
        let buckets = buckets.and_then(|b| crate::html::job_lod::rank_buckets(trace, b));
        Some(RankPath { chains, buckets })
    };
    let (report, looked) = input::job_report_with(
        units,
        notes,
        which,
        &req.limits,
        (req.threads(), req.top, Some(&look)),
        done,
    )?;
    let mut chains: std::collections::HashMap<Vec<String>, RankChains> = Default::default();
    let mut lanes = crate::html::job_lod::RankLanes::default();
    for (paths, r) in looked {
        if let Some(b) = r.buckets {
            lanes.insert(paths.clone(), b);
        }
        if let Some(c) = r.chains {
            chains.insert(paths, c);
        }
    }
    let ranks: Vec<(u32, &RankChains)> = report
        .ranks
        .iter()
        .filter_map(|r| chains.get(&r.paths).map(|c| (r.rank, c)))
        .collect();
    let left_out: Vec<u32> = report
        .ranks
        .iter()
        .filter(|r| !chains.contains_key(&r.paths))
        .map(|r| r.rank)
        .collect();
    let cp = join(&ranks, left_out, req.top);
    Ok((report, cp, lanes))
}

/// A directory of traces none of which states its rank (no `distributedInfo`, no `RANK` in a
/// native part, no rank in the file name), all files of one folder, is not taken for a job: two profiles of separate runs
/// saved side by side look the same, and their "skew" and "wait" would be fiction. Traces named
/// one by one on the command line are: their order is then the ranks' (each note says so).
fn refuse_unrelated(
    files: &[PathBuf],
    report: &cutrace_analysis::JobReport,
) -> Result<(), JobError> {
    let [dir] = files else { return Ok(()) };
    let stated = report.ranks.iter().any(|r| r.rank_from != "input_order");
    // Ranks in subdirectories of their own (job/r0/, job/r1/) were laid out as a job; files
    // side by side in one folder (the folder given, or one below it: a TensorBoard log
    // directory's run) were not.
    let mut parents = report
        .ranks
        .iter()
        .flat_map(|r| &r.paths)
        .map(|p| Path::new(p).parent());
    let first = parents.next().flatten();
    let side_by_side = first.is_some() && parents.all(|p| p == first);
    if !dir.is_dir() || report.ranks.len() < 2 || stated || !side_by_side {
        return Ok(());
    }
    Err(JobError::Refused(format!(
        "{}: its {} traces state no rank (no distributedInfo in them, no rank in their file \
         names), so they look like separate runs, not the ranks of one job. Report each with \
         `cutrace report FILE`, or compare two with `cutrace diff A B`; if they are one job's \
         ranks, name them in rank order (`cutrace report A B …`) or put the rank in their file \
         names (rank0.json, rank1.json, …)",
        dir.display(),
        report.ranks.len()
    )))
}

/// A job without one live rank has no figures: an error (as `convert --parquet` says), not an
/// empty table a script would take for a report. Its dead ranks say why.
fn require_live(report: &cutrace_analysis::JobReport) -> Result<(), JobError> {
    if !report.ranks.is_empty() {
        return Ok(());
    }
    let why: Vec<String> = report
        .dead_ranks
        .iter()
        .take(3)
        .map(|d| {
            let why = crate::text::job::dead_text(&d.reason);
            format!("rank {} ({}): {why}", d.rank, d.paths.join(", "))
        })
        .collect();
    let more = report.dead_ranks.len().saturating_sub(why.len());
    Err(JobError::Refused(format!(
        "none of the job's {} ranks could be used, so there is nothing to report: {}{}",
        report.dead_ranks.len(),
        why.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    )))
}

/// The job report as `cutrace report JOB --format json` prints it (docs/REPORT.md): the text
/// crate's [`crate::text::job::ReportJson`] and, after it, the verdict's figures (`summary`).
#[derive(serde::Serialize)]
pub struct JobJson<'a> {
    #[serde(flatten)]
    report: crate::text::job::ReportJson<'a>,
    summary: &'a cutrace_analysis::job_verdict::JobSummary,
    /// `--critical-path`: each step's path across the ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    critical_path: Option<&'a cutrace_analysis::job_path::JobCriticalPath>,
}

/// See [`JobJson`].
pub fn report_json(j: &cutrace_analysis::JobReport) -> JobJson<'_> {
    JobJson {
        report: crate::text::job::report_json(j),
        summary: &j.summary,
        critical_path: None,
    }
}

fn json<T: serde::Serialize>(v: &T, what: &'static str) -> Result<Vec<u8>, JobError> {
    let mut bytes = serde_json::to_vec(v).map_err(|source| JobError::Json { what, source })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// `cutrace report --rank-summary FILE`: the one rank's summary as JSON, and a warning when the
/// rank is dead.
pub fn rank_summary(
    files: &[PathBuf],
    which: &StepMatch,
    limits: &Limits,
) -> Result<(Vec<u8>, Option<String>), JobError> {
    let [file] = files else {
        return Err(JobError::Refused(format!(
            "--rank-summary reads one rank's trace, and {} were given: run it once per rank",
            files.len()
        )));
    };
    let s: RankSummary = input::summarize_trace(file, which, limits)?;
    let warning = s.dead.as_ref().map(|why| {
        format!(
            "{}: no figures for this rank: {}",
            crate::text::escape_controls(&file.display().to_string()),
            crate::text::job::dead_text(why)
        )
    });
    Ok((json(&s, "summary")?, warning))
}

/// `cutrace report --rank-summary FILE -o DEST`: the summary written to `dest` as every cutrace
/// output is (a new file; `-` is `stdout`); a warning for the user when the rank is dead.
pub fn write_rank_summary(
    files: &[PathBuf],
    which: &StepMatch,
    limits: &Limits,
    dest: &Path,
    stdout: &mut dyn std::io::Write,
) -> Result<Option<String>, JobError> {
    let (json, warning) = rank_summary(files, which, limits)?;
    let mode = crate::files::mode_of_inputs(files);
    crate::html::write_to(dest, &String::from_utf8_lossy(&json), stdout, mode, false)
        .map_err(|e| JobError::Write(dest.to_path_buf(), e))?;
    Ok(warning)
}

/// `cutrace diff BASE NEW` when either is a job (one trace counts as a job of one rank):
/// `None` when both are one trace each, for the one-trace diff. `progress` is called with the
/// side (`base`, `new`), the ranks read and the ranks, as each side's map runs.
pub fn diff(
    base: &Path,
    new: &Path,
    req: &Request<'_>,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Option<Vec<u8>>, JobError> {
    let b = classify::classify(&[base.to_path_buf()], &req.limits)?;
    let n = classify::classify(&[new.to_path_buf()], &req.limits)?;
    let (b_job, n_job) = (
        matches!(b, Inputs::Job { .. }),
        matches!(n, Inputs::Job { .. }),
    );
    if !b_job && !n_job {
        return Ok(None);
    }
    req.refuse_one_trace_options("these inputs are jobs")?;
    if req.critical_path && b_job != n_job {
        let (job, trace) = if b_job { (base, new) } else { (new, base) };
        return Err(JobError::Refused(format!(
            "--critical-path compares two jobs' paths across their ranks, or two traces' paths, \
             and {} is a job while {} is one trace: give a job on each side, or one trace on \
             each side (one rank's trace of the job)",
            job.display(),
            trace.display()
        )));
    }
    // The paths keep every segment: their diff sums them by kind, name and rank.
    let uncapped = Request {
        top: usize::MAX,
        ..req.clone()
    };
    let job = |i: Inputs, given: &Path, side: &str| {
        let (units, notes) = i.into_units();
        let ranks = units.len();
        let done = |k: usize| progress(side, k, ranks);
        let (r, cp) = if req.critical_path {
            let (r, cp, _) = job_critical_path(&units, notes, &uncapped, None, &done)?;
            (r, Some(cp))
        } else {
            let t = (req.threads(), req.top);
            let r = input::job_report(&units, notes, req.which, &req.limits, t, &done)?;
            (r, None)
        };
        require_live(&r)?;
        refuse_unrelated(&[given.to_path_buf()], &r)?;
        Ok::<_, JobError>((r, cp))
    };
    let (rb, pb) = job(b, base, "base")?;
    let (rn, pn) = job(n, new, "new")?;
    let d = cutrace_analysis::diff_jobs(&rb, &rn);
    drop((rb, rn));
    let path_diff = match (&pb, &pn) {
        (Some(pb), Some(pn)) => Some(cutrace_analysis::job_path_diff::job_path_diff(
            pb, pn, req.top,
        )),
        _ => None,
    };
    drop((pb, pn));
    if req.json {
        let mut j = crate::text::job::diff_json(&d);
        j.critical_path = path_diff.as_ref();
        return json(&j, "diff").map(Some);
    }
    let mut text = String::new();
    let (b, n) = (base.display().to_string(), new.display().to_string());
    crate::text::job::render_diff(&mut text, &b, &n, &d);
    if let Some(pd) = &path_diff {
        crate::text::job_path_diff::render(&mut text, pd, req.top, req.wide);
    }
    if !req.wide {
        text = crate::text::fit(&text);
    }
    Ok(Some(text.into_bytes()))
}
