//! Where kernels stall (`cutrace profile --pc-sampling` traces): CUPTI's PC samples summed per
//! function (a kernel, or a device function it calls that was not inlined), per source line and
//! per stall reason.
//!
//! CUPTI names two counters per reason (CUDA 13.0 on an H200, `gpu/pc_sampling_probe.cu`):
//! `smsp__pcsamp_warps_issue_stalled_<reason>`, every sample that found a warp in that state,
//! and `…_<reason>_not_issued`, those of them taken in a cycle where the scheduler issued no
//! instruction. A sample has exactly one state, so the first kind adds up to the samples taken
//! (Nsight Compute's "all samples"); the second is a subset of it, reported on its own
//! (`samples_not_issued`), never added in. Two more names are counts, not states
//! (`smsp__pcsamp_sample_count`, `smsp__pcsamp_samples_data_dropped`), and are left out of the
//! reasons. `selected` (the warp issued) and `not_selected` (eligible, another warp issued) are
//! not stalls: a kernel mostly in them keeps its schedulers busy.
//!
//! PC records carry no time, so the figures are the whole trace's, whatever window the report
//! has (said in the report).

use std::collections::HashMap;

use cutrace_trace::{PcSamplingInfo, Trace};
use serde::Serialize;

use crate::names::{held, name_pair};
use crate::summary::pct;

/// The prefix of CUPTI's stall-reason counters.
pub const REASON_PREFIX: &str = "smsp__pcsamp_warps_issue_stalled_";
/// The suffix of the not-issued subset of a reason.
pub const NOT_ISSUED_SUFFIX: &str = "_not_issued";

/// Reasons per function, lines per function and lines over the trace that are listed.
const TOP_REASONS: usize = 8;
const TOP_LINES_PER_FUNCTION: usize = 5;
const TOP_LINES: usize = 20;

/// What a CUPTI counter name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonKind<'a> {
    /// A warp state (`long_scoreboard`, `selected`, …): samples add up.
    State(&'a str),
    /// The not-issued subset of a state.
    NotIssued(&'a str),
    /// A count that is not a state (`smsp__pcsamp_sample_count`), or a name of another form.
    Other,
}

/// Tells a counter name's kind, with the reason's short name.
pub fn reason_kind(name: &str) -> ReasonKind<'_> {
    match name.strip_prefix(REASON_PREFIX) {
        Some(r) => match r.strip_suffix(NOT_ISSUED_SUFFIX) {
            Some(base) => ReasonKind::NotIssued(base),
            None => ReasonKind::State(r),
        },
        None => ReasonKind::Other,
    }
}

/// `selected` and `not_selected`: the warp was eligible to issue, not stalled.
pub fn is_eligible(reason: &str) -> bool {
    matches!(reason, "selected" | "not_selected")
}

/// One reason's samples and their share of the samples of what holds them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonShare {
    /// The short name (`long_scoreboard`): CUPTI's counter without `smsp__pcsamp_warps_issue_stalled_`.
    pub reason: String,
    pub samples: u64,
    pub pct: f64,
}

/// One source line's samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineStalls {
    pub file: String,
    pub line: u32,
    /// The function holding the line (display name).
    pub function: String,
    pub samples: u64,
    /// Share of the samples of its function (in a function's list) or of the trace (in the
    /// trace's list).
    pub pct: f64,
    pub reasons: Vec<ReasonShare>,
}

/// One function's samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionStalls {
    /// Demangled when it demangles.
    pub name: String,
    /// The mangled name, when it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_name: Option<String>,
    /// A kernel of the trace has this name; else a device function the kernels call.
    pub is_kernel: bool,
    pub samples: u64,
    /// Share of every sample of the trace.
    pub pct: f64,
    /// Samples taken in a cycle where the warp's scheduler issued nothing (a subset).
    pub samples_not_issued: u64,
    /// Samples in `selected` or `not_selected`: the warp could issue.
    pub samples_eligible: u64,
    /// The largest reasons first, at most [`TOP_REASONS`].
    pub reasons: Vec<ReasonShare>,
    /// The instructions sampled, and how many have a source line.
    pub pcs: u64,
    pub pcs_with_line: u64,
    /// The hottest lines, at most [`TOP_LINES_PER_FUNCTION`].
    pub lines: Vec<LineStalls>,
}

/// The PC samples of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PcReport {
    /// Samples in the trace's rows (every warp state; the not-issued subsets not added).
    pub samples: u64,
    /// Over every function, the largest reasons first (all of them).
    pub reasons: Vec<ReasonShare>,
    /// Distinct functions sampled (the list below is capped by `--top`).
    pub function_count: u64,
    pub functions: Vec<FunctionStalls>,
    /// The hottest source lines of the trace.
    pub lines: Vec<LineStalls>,
    /// How the samples were taken and what CUPTI counted but the trace lacks (META
    /// `pc_sampling`); `None` for a trace whose parts did not say.
    pub collection: Option<PcSamplingInfo>,
}

/// The longest stall-reason name a report holds (CUPTI's own are under
/// `CUPTI_STALL_REASON_STRING_SIZE`, 128 bytes); a longer one from a hostile trace is cut.
const REASON_BYTES: usize = 128;

/// One function's samples, by string ids (names are made only for what is listed).
#[derive(Default)]
struct Acc {
    samples: u64,
    reasons: HashMap<u32, u64>,
    not_issued: u64,
    eligible: u64,
    /// (cubin CRC, PC offset) → has a source line.
    pcs: HashMap<(u64, u64), bool>,
    /// (file id, line) → reasons.
    lines: HashMap<(u32, u32), HashMap<u32, u64>>,
}

fn add(a: &mut u64, n: u64) {
    *a = a.saturating_add(n);
}

/// A reason's short name as a report holds it.
fn reason_name(trace: &Trace, r: u32) -> String {
    let s = short(trace.str(r));
    let mut end = s.len().min(REASON_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn shares(counts: &HashMap<u32, u64>, trace: &Trace, whole: u64, top: usize) -> Vec<ReasonShare> {
    let mut v: Vec<(u64, u32)> = counts
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(&r, &n)| (n, r))
        .collect();
    // Largest first; ties by the name, so the order is the trace's whatever its string ids.
    v.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| short(trace.str(a.1)).cmp(short(trace.str(b.1))))
    });
    v.truncate(top);
    v.into_iter()
        .map(|(n, r)| ReasonShare {
            reason: reason_name(trace, r),
            samples: n,
            pct: pct(n, whole),
        })
        .collect()
}

fn short(name: &str) -> &str {
    match reason_kind(name) {
        ReasonKind::State(r) | ReasonKind::NotIssued(r) => r,
        ReasonKind::Other => name,
    }
}

/// A line's samples, by ids: (samples, function id, file id, line, its reasons).
type LineAcc<'a> = (u64, u32, u32, u32, &'a HashMap<u32, u64>);

fn line_sum(reasons: &HashMap<u32, u64>) -> u64 {
    reasons.values().fold(0u64, |a, &n| a.saturating_add(n))
}

/// The `top` largest lines of `lines`, by samples, then file, line and function.
fn top_lines<'a>(trace: &Trace, mut lines: Vec<LineAcc<'a>>, top: usize) -> Vec<LineAcc<'a>> {
    lines.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| trace.str(a.2).cmp(trace.str(b.2)))
            .then(a.3.cmp(&b.3))
            .then_with(|| trace.str(a.1).cmp(trace.str(b.1)))
    });
    lines.truncate(top);
    lines
}

fn line_stalls(trace: &Trace, l: &LineAcc, whole: u64) -> LineStalls {
    LineStalls {
        file: held(trace.str(l.2)),
        line: l.3,
        function: name_pair(trace.str(l.1)).0,
        samples: l.0,
        pct: pct(l.0, whole),
        reasons: shares(l.4, trace, l.0, 3),
    }
}

/// The PC samples per function, line and reason, with the `top` functions; `None` for a trace
/// without any (and without PC sampling facts).
pub fn pc_report(trace: &Trace, top: usize) -> Option<PcReport> {
    pc_report_with(trace, top, TOP_REASONS, true)
}

/// [`pc_report`] with every function and every reason of each, and no lines (what a diff
/// matches).
pub fn pc_report_all(trace: &Trace) -> Option<PcReport> {
    pc_report_with(trace, usize::MAX, usize::MAX, false)
}

/// What a counter name is, once per distinct name: 0 not a state, 1 a stall, 2 an eligible
/// state (selected, not_selected), 3 a not-issued subset.
fn kind_code(name: &str) -> u8 {
    match reason_kind(name) {
        ReasonKind::State(r) if is_eligible(r) => 2,
        ReasonKind::State(_) => 1,
        ReasonKind::NotIssued(_) => 3,
        ReasonKind::Other => 0,
    }
}

/// Every function's samples, by ids, and the trace's per reason.
fn accumulate(trace: &Trace, with_lines: bool) -> (HashMap<u32, Acc>, HashMap<u32, u64>) {
    let mut kinds: HashMap<u32, u8> = HashMap::new();
    let mut by_function: HashMap<u32, Acc> = HashMap::new();
    let mut total: HashMap<u32, u64> = HashMap::new();
    for s in &trace.pc_samples {
        let kind = *kinds
            .entry(s.stall_reason)
            .or_insert_with(|| kind_code(trace.str(s.stall_reason)));
        let a = by_function.entry(s.function).or_default();
        let has_line = s.source_file.is_some() && s.source_line > 0;
        *a.pcs.entry((s.cubin_crc, s.pc_offset)).or_insert(false) |= has_line;
        match kind {
            1 | 2 => {
                add(&mut a.samples, s.samples);
                add(a.reasons.entry(s.stall_reason).or_default(), s.samples);
                add(total.entry(s.stall_reason).or_default(), s.samples);
                if kind == 2 {
                    add(&mut a.eligible, s.samples);
                }
                if let (true, true, Some(f)) = (with_lines, has_line, s.source_file) {
                    let l = a.lines.entry((f, s.source_line)).or_default();
                    add(l.entry(s.stall_reason).or_default(), s.samples);
                }
            }
            3 => add(&mut a.not_issued, s.samples),
            _ => {}
        }
    }
    (by_function, total)
}

fn pc_report_with(
    trace: &Trace,
    top: usize,
    top_reasons: usize,
    with_lines: bool,
) -> Option<PcReport> {
    let collection = trace.meta.pc_sampling.clone();
    if trace.pc_samples.is_empty() && collection.is_none() {
        return None;
    }
    let kernel_names: std::collections::HashSet<u32> =
        trace.kernels.iter().map(|k| k.name).collect();
    let (by_function, total) = accumulate(trace, with_lines);
    let samples = total.values().fold(0u64, |a, &n| a.saturating_add(n));
    let mut order: Vec<(&u32, &Acc)> = by_function.iter().collect();
    order.sort_by(|a, b| {
        b.1.samples
            .cmp(&a.1.samples)
            .then_with(|| trace.str(*a.0).cmp(trace.str(*b.0)))
    });
    let function_count = order.len() as u64;
    let all_lines: Vec<LineAcc> = order
        .iter()
        .flat_map(|(&f, a)| {
            a.lines
                .iter()
                .map(move |(&(file, line), r)| (line_sum(r), f, file, line, r))
        })
        .collect();
    let all_lines = top_lines(trace, all_lines, TOP_LINES);
    order.truncate(top.max(1));
    let functions = order
        .into_iter()
        .map(|(&f, a)| {
            let (name, raw_name) = name_pair(trace.str(f));
            let own: Vec<LineAcc> = a
                .lines
                .iter()
                .map(|(&(file, line), r)| (line_sum(r), f, file, line, r))
                .collect();
            FunctionStalls {
                lines: top_lines(trace, own, TOP_LINES_PER_FUNCTION)
                    .iter()
                    .map(|l| line_stalls(trace, l, a.samples))
                    .collect(),
                name,
                raw_name,
                is_kernel: kernel_names.contains(&f),
                samples: a.samples,
                pct: pct(a.samples, samples),
                samples_not_issued: a.not_issued,
                samples_eligible: a.eligible,
                reasons: shares(&a.reasons, trace, a.samples, top_reasons),
                pcs: a.pcs.len() as u64,
                pcs_with_line: a.pcs.values().filter(|&&l| l).count() as u64,
            }
        })
        .collect();
    Some(PcReport {
        samples,
        reasons: shares(&total, trace, samples, usize::MAX),
        function_count,
        functions,
        lines: all_lines
            .iter()
            .map(|l| line_stalls(trace, l, samples))
            .collect(),
        collection,
    })
}

/// One reason's share on each side (`None`: that side has no samples where this is read).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonChange {
    pub reason: String,
    pub base_pct: Option<f64>,
    pub new_pct: Option<f64>,
    /// `new_pct - base_pct`, a reason missing on a side with samples counting as 0 %; `None`
    /// when either side has no samples.
    pub pct_points: Option<f64>,
}

/// One function's stall mix on each side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionPcDiff {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_name: Option<String>,
    pub base_samples: Option<u64>,
    pub new_samples: Option<u64>,
    /// The reasons of either side, by the size of their change, largest first (at most 8).
    pub reasons: Vec<ReasonChange>,
    /// The largest change of one reason's share, in points (0 when one side lacks the
    /// function).
    pub largest_change_points: f64,
}

/// Two traces' stall mixes (`cutrace diff`), when either has PC samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PcDiff {
    pub base_samples: u64,
    pub new_samples: u64,
    /// Over every function, each reason of either side, largest change first.
    pub reasons: Vec<ReasonChange>,
    /// Functions of either side (matched by their mangled name, else their name), those whose
    /// mix changed most first, then those of one side only by samples; at most `top`.
    pub function_count: u64,
    pub functions: Vec<FunctionPcDiff>,
}

/// A function's (or the trace's) reasons and samples.
fn side(f: Option<&FunctionStalls>) -> Option<(&[ReasonShare], u64)> {
    f.map(|f| (f.reasons.as_slice(), f.samples))
}

fn changes(
    b: Option<(&[ReasonShare], u64)>,
    n: Option<(&[ReasonShare], u64)>,
) -> Vec<ReasonChange> {
    // reason → (share on the base side, share on the new side), each side's list once.
    let mut by: HashMap<&str, (Option<f64>, Option<f64>)> = HashMap::new();
    for (first, s) in [(true, b), (false, n)] {
        let Some((list, _)) = s else { continue };
        for r in list {
            let e = by.entry(r.reason.as_str()).or_default();
            if first {
                e.0 = Some(r.pct);
            } else {
                e.1 = Some(r.pct);
            }
        }
    }
    // A side with samples and no such reason has it at 0 %; a side without samples has none.
    let has = |s: Option<(&[ReasonShare], u64)>| s.is_some_and(|(_, n)| n > 0);
    let (hb, hn) = (has(b), has(n));
    let mut v: Vec<ReasonChange> = by
        .into_iter()
        .map(|(name, (x, y))| {
            let x = hb.then(|| x.unwrap_or(0.0));
            let y = hn.then(|| y.unwrap_or(0.0));
            ReasonChange {
                reason: name.to_owned(),
                base_pct: x,
                new_pct: y,
                pct_points: x.zip(y).map(|(x, y)| y - x),
            }
        })
        .collect();
    // Largest change first; then the larger share (a self-diff lists the main reasons first).
    let size = |c: &ReasonChange| c.pct_points.map_or(0.0, f64::abs);
    let share = |c: &ReasonChange| c.base_pct.unwrap_or(0.0).max(c.new_pct.unwrap_or(0.0));
    v.sort_by(|a, c| {
        size(c)
            .total_cmp(&size(a))
            .then(share(c).total_cmp(&share(a)))
            .then(a.reason.cmp(&c.reason))
    });
    v
}

/// Compares the stall mixes of two traces' reports (built with [`pc_report_all`]).
pub fn pc_diff_of<'a>(
    b: Option<&'a PcReport>,
    n: Option<&'a PcReport>,
    top: usize,
) -> Option<PcDiff> {
    if b.is_none() && n.is_none() {
        return None;
    }
    let key = |f: &FunctionStalls| f.raw_name.clone().unwrap_or_else(|| f.name.clone());
    let mut by: HashMap<String, (Option<&FunctionStalls>, Option<&FunctionStalls>)> =
        HashMap::new();
    for f in b.iter().flat_map(|r| &r.functions) {
        by.entry(key(f)).or_default().0 = Some(f);
    }
    for f in n.iter().flat_map(|r| &r.functions) {
        by.entry(key(f)).or_default().1 = Some(f);
    }
    let mut functions: Vec<FunctionPcDiff> = by
        .into_values()
        .map(|(x, y)| {
            let f = x.or(y).expect("one side has it");
            let mut reasons = changes(side(x), side(y));
            let largest = reasons
                .iter()
                .filter_map(|r| r.pct_points)
                .map(f64::abs)
                .fold(0.0, f64::max);
            reasons.truncate(TOP_REASONS);
            FunctionPcDiff {
                name: f.name.clone(),
                raw_name: f.raw_name.clone(),
                base_samples: x.map(|f| f.samples),
                new_samples: y.map(|f| f.samples),
                reasons,
                largest_change_points: largest,
            }
        })
        .collect();
    let both = |f: &FunctionPcDiff| f.base_samples.is_some() && f.new_samples.is_some();
    let samples = |f: &FunctionPcDiff| {
        f.base_samples
            .unwrap_or(0)
            .saturating_add(f.new_samples.unwrap_or(0))
    };
    functions.sort_by(|a, c| {
        both(c)
            .cmp(&both(a))
            .then(c.largest_change_points.total_cmp(&a.largest_change_points))
            .then(samples(c).cmp(&samples(a)))
            .then(a.name.cmp(&c.name))
    });
    let function_count = functions.len() as u64;
    functions.truncate(top);
    let whole = |r: Option<&'a PcReport>| r.map(|r| (r.reasons.as_slice(), r.samples));
    Some(PcDiff {
        base_samples: b.map_or(0, |r| r.samples),
        new_samples: n.map_or(0, |r| r.samples),
        reasons: changes(whole(b), whole(n)),
        function_count,
        functions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_trace::PcSample;

    /// (function, reason, samples, source line).
    type Row<'a> = (&'a str, &'a str, u64, Option<(&'a str, u32)>);

    fn trace(rows: &[Row]) -> Trace {
        let mut t = Trace::default();
        let id = |t: &mut Trace, s: &str| -> u32 {
            if let Some(i) = t.strings.iter().position(|x| x == s) {
                return i as u32;
            }
            t.strings.push(s.to_owned());
            (t.strings.len() - 1) as u32
        };
        for (i, &(f, r, n, src)) in rows.iter().enumerate() {
            let function = id(&mut t, f);
            let stall_reason = id(&mut t, r);
            let source_file = src.map(|(file, _)| id(&mut t, file));
            t.pc_samples.push(PcSample {
                device: 0,
                process: 1,
                correlation_id: 0,
                function,
                function_index: 0,
                pc_offset: (i as u64 % 3) * 16,
                cubin_crc: 7,
                stall_reason,
                samples: n,
                source_file,
                source_line: src.map_or(0, |x| x.1),
            });
        }
        t
    }

    #[test]
    fn names_tell_states_from_subsets_and_counts() {
        assert_eq!(
            reason_kind("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
            ReasonKind::State("long_scoreboard")
        );
        assert_eq!(
            reason_kind("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"),
            ReasonKind::NotIssued("long_scoreboard")
        );
        assert_eq!(reason_kind("smsp__pcsamp_sample_count"), ReasonKind::Other);
        assert!(is_eligible("not_selected") && !is_eligible("barrier"));
    }

    #[test]
    fn samples_add_per_function_reason_and_line_without_the_subsets() {
        let ls = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
        let ls_ni = "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued";
        let sel = "smsp__pcsamp_warps_issue_stalled_selected";
        let t = trace(&[
            ("_Z5chainPKjPji", ls, 90, Some(("a.cu", 52))),
            ("_Z5chainPKjPji", ls_ni, 89, Some(("a.cu", 52))),
            ("_Z5chainPKjPji", sel, 10, Some(("a.cu", 53))),
            ("_Z5chainPKjPji", "smsp__pcsamp_sample_count", 1000, None),
            ("helper", sel, 100, None),
        ]);
        let r = pc_report(&t, 10).unwrap();
        assert_eq!(r.samples, 200);
        assert_eq!(r.function_count, 2);
        let chain = r.functions.iter().find(|f| f.raw_name.is_some()).unwrap();
        assert_eq!(chain.name, "chain(unsigned int const*, unsigned int*, int)");
        assert_eq!(chain.samples, 100);
        assert_eq!(chain.samples_not_issued, 89);
        assert_eq!(chain.samples_eligible, 10);
        assert_eq!(chain.reasons[0].reason, "long_scoreboard");
        assert_eq!(chain.reasons[0].pct, 90.0);
        assert_eq!((chain.lines[0].line, chain.lines[0].samples), (52, 90));
        assert!(!chain.is_kernel);
        let helper = r.functions.iter().find(|f| f.name == "helper").unwrap();
        assert_eq!((helper.samples, helper.pcs_with_line), (100, 0));
        assert_eq!(r.reasons[0].reason, "selected");
        assert_eq!(r.reasons[0].samples, 110);
        assert_eq!(r.lines.len(), 2);
        assert_eq!(r.lines[0].pct, 45.0);
    }

    #[test]
    fn a_diff_says_how_each_functions_mix_moved() {
        let ls = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
        let sel = "smsp__pcsamp_warps_issue_stalled_selected";
        let b = trace(&[
            ("k", ls, 90, None),
            ("k", sel, 10, None),
            ("old", sel, 5, None),
        ]);
        let n = trace(&[("k", ls, 30, None), ("k", sel, 70, None)]);
        let d = pc_diff_of(pc_report_all(&b).as_ref(), pc_report_all(&n).as_ref(), 10).unwrap();
        assert_eq!((d.base_samples, d.new_samples), (105, 100));
        assert_eq!(d.function_count, 2);
        let k = &d.functions[0];
        assert_eq!(
            (k.name.as_str(), k.base_samples, k.new_samples),
            ("k", Some(100), Some(100))
        );
        assert_eq!(k.largest_change_points, 60.0);
        // Both moved 60 points; the names break the tie.
        assert_eq!(k.reasons[0].reason, "long_scoreboard");
        assert_eq!(k.reasons[0].pct_points, Some(-60.0));
        assert_eq!(k.reasons[1].pct_points, Some(60.0));
        // A function on one side only comes after, with no change to compare.
        let old = &d.functions[1];
        assert_eq!((old.base_samples, old.new_samples), (Some(5), None));
        assert_eq!(old.reasons[0].new_pct, None);
        assert_eq!(old.reasons[0].pct_points, None);
        assert!(pc_diff_of(None, None, 10).is_none());
    }

    #[test]
    fn no_samples_and_no_facts_is_no_report() {
        assert!(pc_report(&Trace::default(), 10).is_none());
    }
}
