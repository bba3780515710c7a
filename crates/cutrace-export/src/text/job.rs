//! The text of `cutrace report` and `cutrace diff` over a distributed job: a
//! `cutrace_analysis::JobReport` (and `JobDiff`) as a person reads them.

use std::fmt::Write as _;

use cutrace_analysis::job_diff::{JobHeadline, Pair, PctPair};
use cutrace_analysis::job_path_diff::JobPathDiff;
use cutrace_analysis::job_reduce::{ClockInfo, DeadRank, JobCollectives, JobRank, JobSteps};
use cutrace_analysis::{DeadReason, JobCaveat, JobDiff, JobNote, JobReport, RankLosses};

use super::{count, escape_from, fmt_ns, short_name};

/// Why a rank has no figures, in words: the reader's or the analysis's error as it said it.
pub fn dead_text(why: &DeadReason) -> &str {
    match why {
        DeadReason::Unreadable { error } | DeadReason::AnalysisFailed { error } => error,
        DeadReason::NoTimedKernel => "the trace holds no timed GPU kernel",
    }
}

/// What a rank's trace says it lost, one phrase per kind of loss.
pub fn losses_text(l: &RankLosses) -> Vec<String> {
    let mut out = Vec::new();
    if l.dropped_by_recorder > 0 {
        out.push(format!(
            "{} records dropped by the recorder",
            l.dropped_by_recorder
        ));
    }
    if l.dropped_by_cupti > 0 {
        out.push(format!("{} records dropped by CUPTI", l.dropped_by_cupti));
    }
    if l.damaged_bytes > 0 {
        out.push(format!(
            "{} damaged bytes skipped in {} stretches",
            l.damaged_bytes, l.damaged_regions
        ));
    }
    if l.inverted_intervals > 0 {
        out.push(format!(
            "{} records end before they start (read as zero-length)",
            l.inverted_intervals
        ));
    }
    if !l.profiler_own.is_empty() {
        let own: Vec<String> = l
            .profiler_own
            .iter()
            .map(|(name, n)| format!("{name} = {n}"))
            .collect();
        out.push(format!("the profiler's own account: {}", own.join(", ")));
    }
    out
}

/// What the ranks' clocks mean for skew and wait.
pub fn clock_text(c: &ClockInfo) -> String {
    let base: String = match c.alignment {
        "one_host" => format!(
            "every rank ran on {}: their timestamps share that host's clock, so arrival skew and \
             wait are exact to the clock",
            c.hosts.first().map_or("one host", String::as_str)
        ),
        "several_hosts" => format!(
            "ranks ran on {} hosts; each host's timestamps are its own clock (CUPTI and Kineto do \
             not align clocks across machines), so the offset between two hosts' clocks adds \
             directly to the arrival skew and wait between their ranks. Within a host they are \
             exact",
            c.hosts.len()
        ),
        _ => "the traces do not name their hosts (torch.profiler's do not): ranks on one host \
              share its clock and their skew and wait are exact; between hosts, the offset of \
              their clocks adds directly to skew and wait"
            .into(),
    };
    match (
        c.offset_max_ns,
        c.offsets.iter().max_by_key(|o| o.offset_ns.unsigned_abs()),
    ) {
        (Some(max), Some(o)) if max >= CLOCK_OFFSET_SHOWN_NS => format!(
            "{base}. The ranks' matched collectives end up to {} apart on their clocks (rank {}'s \
             {} {}, the median of {} calls): NCCL's kernels of one call end together, so that is \
             how far their clocks disagree, and skew, wait and the critical path between them \
             carry it",
            fmt_ns(max),
            o.rank,
            fmt_ns(o.offset_ns.unsigned_abs()),
            if o.offset_ns > 0 { "later" } else { "earlier" },
            o.calls
        ),
        (Some(max), Some(_)) => format!(
            "{base}. The ranks' matched collectives end within {} of each other on their clocks: \
             the clocks agree to about that",
            fmt_ns(max)
        ),
        _ => base,
    }
}

/// Clock offsets (`clock.offset_max_ns`) from this size on are told as the clocks disagreeing:
/// the ends of one NCCL call lie within a few microseconds of each other on one host.
const CLOCK_OFFSET_SHOWN_NS: u64 = 20_000;

/// A job note in words.
pub fn note_text(n: &JobNote) -> String {
    match n {
        JobNote::Input { note } => note.clone(),
        JobNote::WorldTooLarge { world_size } => format!(
            "a trace states a world size of {world_size}: no job is that large, so missing \
             ranks are not listed"
        ),
        JobNote::DuplicateRank {
            rank,
            left_out,
            kept,
        } => format!(
            "rank {rank} appears twice: {} left out, {} kept",
            left_out.join(", "),
            kept.join(", ")
        ),
        JobNote::NumberedByOrder { paths, rank } => format!(
            "{}: neither the trace nor its file name states a rank; numbered {rank} by input \
             order",
            paths.join(", ")
        ),
        JobNote::RankLostData { rank, losses } => format!(
            "rank {rank} lost data: {}; its figures cover what was recorded",
            losses_text(losses).join("; ")
        ),
        JobNote::RankIncomplete { rank, reason } => format!(
            "rank {rank}: its trace is incomplete ({}); its figures cover what was read",
            reason.as_deref().unwrap_or("reason unknown")
        ),
        JobNote::NoNcclKernels => "no rank's trace holds an NCCL kernel: communication, its \
                                   exposure, skew and wait are 0 (a gloo job communicates on the \
                                   CPU; NCCL launches no kernel for a group of one rank)"
            .into(),
        JobNote::MatchedByOrder { calls } => format!(
            "{calls} call(s) were matched by the order of the ranks' NCCL kernels (their traces \
             carry no record_param_comms annotation, as cutrace's own do not): right when every \
             rank ran the same NCCL calls in the same order; with several process groups \
             (tensor and data parallel, pipeline send/recv) kernels of different groups pair \
             up, and their skew and wait mean nothing"
        ),
        JobNote::NamesDiffer { collectives } => format!(
            "{collectives} matched collective(s) have different names on different ranks: the \
             ranks did not call the same collectives in the same order in a group, so matching \
             by order paired different calls"
        ),
        JobNote::SharedSequence { numbers } => format!(
            "{numbers} sequence number(s) were given to several calls of one rank's group \
             (coalesced or point-to-point operations): such calls are matched across ranks by \
             their order among the calls with that number"
        ),
        JobNote::Unmatched { calls } => format!(
            "{calls} collective call(s) were found on one rank only (a rank cut short, or ranks \
             whose traces differ in what they annotate): left out of skew and wait"
        ),
    }
}

/// A job diff's caveat in words.
pub fn caveat_text(c: &JobCaveat) -> String {
    match c {
        JobCaveat::RankCounts { base, new } => format!(
            "the jobs have {base} and {new} live ranks: ranks present in one job only show - on \
             the other side"
        ),
        JobCaveat::DeadOrMissing {
            side,
            dead,
            missing,
        } => format!(
            "the {side} job has {dead} dead and {missing} missing rank(s): its skew and wait \
             cover the others only"
        ),
        JobCaveat::ClocksNotShared { side } => format!(
            "the {side} job's ranks are not known to share one clock: skew and wait include any \
             offset between hosts' clocks"
        ),
    }
}

/// A fact with its words beside it, as the JSON gives notes and caveats.
#[derive(serde::Serialize)]
struct Said<'a, T: serde::Serialize> {
    #[serde(flatten)]
    facts: &'a T,
    text: String,
}

/// The job report as `cutrace report JOB --format json` prints it (docs/REPORT.md): the
/// `JobReport`'s fields in their order, the clock with its `note`, each note with its `text`.
#[derive(serde::Serialize)]
pub struct ReportJson<'a> {
    schema_version: u32,
    kind: &'static str,
    world_size: Option<u32>,
    ranks_found: u64,
    missing_ranks: &'a [u32],
    dead_ranks: Vec<DeadJson<'a>>,
    clock: ClockJson<'a>,
    ranks: &'a [JobRank],
    steps: &'a JobSteps,
    collectives: &'a JobCollectives,
    notes: Vec<Said<'a, JobNote>>,
}

/// A dead rank: its `rank` and `paths`, the reason's `kind` and facts, and `reason` in words.
#[derive(serde::Serialize)]
struct DeadJson<'a> {
    rank: u32,
    paths: &'a [String],
    #[serde(flatten)]
    kind: &'a DeadReason,
    reason: &'a str,
}

#[derive(serde::Serialize)]
struct ClockJson<'a> {
    #[serde(flatten)]
    facts: &'a ClockInfo,
    note: String,
}

fn dead_json(d: &DeadRank) -> DeadJson<'_> {
    DeadJson {
        rank: d.rank,
        paths: &d.paths,
        kind: &d.reason,
        reason: dead_text(&d.reason),
    }
}

/// See [`ReportJson`].
pub fn report_json(j: &JobReport) -> ReportJson<'_> {
    ReportJson {
        schema_version: j.schema_version,
        kind: j.kind,
        world_size: j.world_size,
        ranks_found: j.ranks_found,
        missing_ranks: &j.missing_ranks,
        dead_ranks: j.dead_ranks.iter().map(dead_json).collect(),
        clock: ClockJson {
            facts: &j.clock,
            note: clock_text(&j.clock),
        },
        ranks: &j.ranks,
        steps: &j.steps,
        collectives: &j.collectives,
        notes: j
            .notes
            .iter()
            .map(|n| Said {
                facts: n,
                text: note_text(n),
            })
            .collect(),
    }
}

/// The job diff as `cutrace diff JOB_A JOB_B --format json` prints it: the `JobDiff`'s fields,
/// each caveat with its `text`.
#[derive(serde::Serialize)]
pub struct DiffJson<'a> {
    schema_version: u32,
    kind: &'static str,
    headline: &'a JobHeadline,
    ranks: &'a [cutrace_analysis::job_diff::RankDiff],
    skew_max_ns: &'a Pair,
    skew_median_ns: &'a Pair,
    skew_total_ns: &'a Pair,
    slowest_step_ns: &'a Pair,
    caveats: Vec<Said<'a, JobCaveat>>,
    /// `--critical-path`: how the path across the ranks changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<&'a JobPathDiff>,
}

/// See [`DiffJson`].
pub fn diff_json(d: &JobDiff) -> DiffJson<'_> {
    DiffJson {
        schema_version: d.schema_version,
        kind: d.kind,
        headline: &d.headline,
        ranks: &d.ranks,
        skew_max_ns: &d.skew_max_ns,
        skew_median_ns: &d.skew_median_ns,
        skew_total_ns: &d.skew_total_ns,
        slowest_step_ns: &d.slowest_step_ns,
        caveats: d
            .caveats
            .iter()
            .map(|c| Said {
                facts: c,
                text: caveat_text(c),
            })
            .collect(),
        critical_path: None,
    }
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), fmt_ns)
}

/// Writes the job report; `top` bounds the steps and collectives listed.
pub fn render(o: &mut String, inputs: &str, j: &JobReport, top: usize) {
    let from = o.len();
    render_header(o, inputs, j);
    render_ranks(o, &j.ranks);
    render_steps(o, &j.steps, top);
    render_collectives(o, &j.collectives);
    escape_from(o, from);
}

/// Writes the report's opening lines: the inputs, the rank counts, the missing and dead ranks,
/// the clocks and the job's notes.
fn render_header(o: &mut String, inputs: &str, j: &JobReport) {
    let inputs = super::escape_controls(inputs);
    let _ = writeln!(o, "cutrace report: {inputs} (distributed job)");
    // The verdict first, as on the job's page: the same lines from the JSON's `summary`.
    for l in super::verdict::job_verdict(&j.summary) {
        let _ = writeln!(o, "{}", l.text());
    }
    let world = j.world_size.map_or_else(
        || "world size not stated".into(),
        |w| format!("world size {w}"),
    );
    let _ = writeln!(
        o,
        "ranks: {} found ({} live, {} dead), {world}",
        j.ranks_found,
        j.ranks.len(),
        j.dead_ranks.len()
    );
    if !j.missing_ranks.is_empty() {
        let _ = writeln!(
            o,
            "MISSING: no trace for {}: {}",
            count(j.missing_ranks.len(), "rank", "ranks"),
            rank_ranges(&j.missing_ranks)
        );
    }
    for d in &j.dead_ranks {
        let _ = writeln!(
            o,
            "DEAD: rank {} ({}): {}",
            d.rank,
            d.paths.join(", "),
            dead_text(&d.reason)
        );
    }
    let _ = writeln!(o, "clocks: {}", clock_text(&j.clock));
    for n in &j.notes {
        let _ = writeln!(o, "note: {}", note_text(n));
    }
}

/// Writes the per-rank table (who waited most and least at collectives is the verdict's).
fn render_ranks(o: &mut String, ranks: &[JobRank]) {
    let _ = writeln!(
        o,
        "\nPer rank (sums over each rank's GPUs; busy = union of all kernels, comm = union of its \
         communication kernels,\nexposed = comm with no compute kernel on that GPU, wait = summed \
         time it waited at collectives for the last rank)"
    );
    let st = super::Style::default();
    let col = |f: &dyn Fn(&JobRank) -> u64| st.col(ranks.iter().map(f));
    let cols = [
        col(&|r| r.busy_ns),
        col(&|r| r.comm_ns),
        col(&|r| r.exposed_comm_ns),
        col(&|r| r.wait_ns),
        col(&|r| r.idle_ns),
        col(&|r| r.step_median_ns.unwrap_or(0)),
    ];
    let heads: Vec<String> = ["busy", "comm", "exposed", "wait", "idle", "step p50"]
        .iter()
        .zip(&cols)
        .map(|(h, c)| format!("{h} ({})", c.unit))
        .collect();
    let columns = [
        super::label("rank"),
        super::num(&heads[0]),
        super::num("busy%"),
        super::num(&heads[1]),
        super::num(&heads[2]),
        super::num("hidden"),
        super::num(&heads[3]),
        super::num(&heads[4]),
        super::num(&heads[5]),
    ];
    let rows: Vec<Vec<String>> = ranks
        .iter()
        .map(|r| {
            vec![
                if r.complete {
                    r.rank.to_string()
                } else {
                    format!("{} (incomplete)", r.rank)
                },
                cols[0].num(r.busy_ns),
                format!("{:.1}%", r.busy_pct),
                cols[1].num(r.comm_ns),
                cols[2].num(r.exposed_comm_ns),
                r.hidden_comm_pct
                    .map_or_else(|| "-".into(), |p| format!("{p:.1}%")),
                cols[3].num(r.wait_ns),
                cols[4].num(r.idle_ns),
                r.step_median_ns
                    .map_or_else(|| "-".into(), |v| cols[5].num(v)),
            ]
        })
        .collect();
    super::table(o, &st, &columns, &rows, None);
}

/// Writes the steps matched across ranks, the `top` with the widest spread in step order;
/// nothing when no step matched.
fn render_steps(o: &mut String, steps: &JobSteps, top: usize) {
    if steps.steps.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nSteps ({}, matched by {} on each rank; {} shown of {})",
        steps.matched,
        if steps.matched_by == "number" {
            "their #N"
        } else {
            "order"
        },
        steps.steps.len().min(top),
        steps.steps.len()
    );
    let mut by_spread: Vec<_> = steps.steps.iter().collect();
    by_spread.sort_by_key(|s| (std::cmp::Reverse(s.spread_ns), s.index));
    by_spread.truncate(top);
    by_spread.sort_by_key(|s| s.index);
    let st = super::Style::default();
    let time = st.col(by_spread.iter().map(|s| s.slowest_ns));
    let spread = st.col(by_spread.iter().map(|s| s.spread_ns));
    let heads = [
        format!("slowest ({})", time.unit),
        format!("fastest ({})", time.unit),
        format!("spread ({})", spread.unit),
    ];
    let columns = [
        super::num("step"),
        super::num("ranks"),
        super::num(&heads[0]),
        super::num("rank"),
        super::num(&heads[1]),
        super::num(&heads[2]),
    ];
    let rows: Vec<Vec<String>> = by_spread
        .iter()
        .map(|s| {
            vec![
                s.index.to_string(),
                s.ranks.to_string(),
                time.num(s.slowest_ns),
                s.slowest_rank.to_string(),
                time.num(s.fastest_ns),
                spread.num(s.spread_ns),
            ]
        })
        .collect();
    let names: Vec<String> = by_spread.iter().map(|s| s.name.clone()).collect();
    super::table(o, &st, &columns, &rows, Some(("name", &names)));
}

/// Writes the collectives' match counts and, when any matched, their arrival skew overall, per
/// group and the largest ones.
fn render_collectives(o: &mut String, c: &JobCollectives) {
    let _ = writeln!(
        o,
        "\nCollectives: {} matched across ranks ({} on fewer ranks than their group), {} on one \
         rank only",
        c.matched, c.partial, c.unmatched
    );
    if c.matched == 0 {
        return;
    }
    let _ = writeln!(
        o,
        "  arrival skew (last rank's kernel start − first's): median {}, max {}, total {}",
        opt_ns(c.skew_median_ns),
        opt_ns(c.skew_max_ns),
        fmt_ns(c.skew_total_ns)
    );
    render_group_skews(o, c);
    render_largest_skews(o, c);
}

/// Writes one line per collective group: its calls, how they were matched and their skew.
fn render_group_skews(o: &mut String, c: &JobCollectives) {
    for g in &c.groups {
        let name = match (&g.group, &g.desc) {
            (Some(n), Some(d)) => format!("group {n} ({d})"),
            (Some(n), None) => format!("group {n}"),
            (None, _) => "NCCL kernels (no annotation)".into(),
        };
        let _ = writeln!(
            o,
            "  {name}: {} matched by {}, skew max {}, total {}",
            count(g.calls as usize, "call", "calls"),
            g.matched_by,
            fmt_ns(g.skew_max_ns),
            fmt_ns(g.skew_total_ns)
        );
    }
}

/// Writes the largest single-collective skews: which call, its group and its first and last
/// ranks.
fn render_largest_skews(o: &mut String, c: &JobCollectives) {
    let _ = writeln!(o, "  largest skews:");
    for x in &c.largest {
        let at = match x.seq {
            Some(s) => format!("seq {s}"),
            None => format!("#{}", x.order),
        };
        let _ = writeln!(
            o,
            "    {:>14}  {} {at} in {}: first rank {}, last rank {} ({} ranks)",
            fmt_ns(x.skew_ns),
            short_name(&x.name, 40),
            x.group
                .as_deref()
                .map_or_else(|| "NCCL kernels".into(), |g| format!("group {g}")),
            x.first_rank,
            x.last_rank,
            x.ranks
        );
    }
}

/// The width of a job diff row's label.
const LABEL: usize = 40;

/// A row of durations: base, new, and the change with its percent of the base.
fn pair_row(o: &mut String, label: &str, p: &Pair) {
    let delta = match (p.base, p.delta) {
        (Some(b), Some(d)) => {
            let abs = match d {
                0 => "0 ns".to_owned(),
                d if d < 0 => format!("-{}", fmt_ns(d.unsigned_abs())),
                d => format!("+{}", fmt_ns(d as u64)),
            };
            if b == 0 {
                abs
            } else {
                // Rounded first, so a change below 0.05 % reads +0.0 %, never -0.0 %.
                let pct = (d as f64 * 1000.0 / b as f64).round() / 10.0 + 0.0;
                format!("{abs} ({pct:+.1} %)")
            }
        }
        _ => "-".into(),
    };
    let _ = writeln!(
        o,
        "  {label:<LABEL$} {:>14} {:>14}  {delta}",
        opt_ns(p.base),
        opt_ns(p.new)
    );
}

/// A row of shares: base, new (percent) and the change in percentage points, rounded first so
/// that a change below 0.05 reads +0.0, never -0.0.
fn pct_row(o: &mut String, label: &str, p: &PctPair) {
    let points = (p.points * 10.0).round() / 10.0 + 0.0;
    let _ = writeln!(
        o,
        "  {label:<LABEL$} {:>14} {:>14}  {points:+.1} points",
        format!("{:.1} %", p.base),
        format!("{:.1} %", p.new)
    );
}

/// The job diff's first lines: step time, the ranks' shares, skew, the slowest rank and the
/// likely straggler of each job.
fn render_headline(o: &mut String, d: &JobDiff) {
    let h = &d.headline;
    let _ = writeln!(o, "\n  {:<LABEL$} {:>14} {:>14}  Δ", "", "base", "new");
    pair_row(
        o,
        "step time (median; a step's slowest rank)",
        &h.step_median_ns,
    );
    pair_row(o, "slowest step", &d.slowest_step_ns);
    if let (Some(b), Some(n)) = (h.steps.base, h.steps.new) {
        let _ = writeln!(
            o,
            "  {:<LABEL$} {b:>14} {n:>14}  {:+}",
            "steps (matched across ranks)",
            i128::from(n) - i128::from(b)
        );
    }
    pct_row(o, "busy, share of the ranks' kernel spans", &h.busy_pct);
    pct_row(o, "  compute", &h.compute_pct);
    pct_row(o, "  communication", &h.comm_pct);
    pct_row(o, "  exposed communication", &h.exposed_comm_pct);
    pct_row(o, "idle", &h.idle_pct);
    pair_row(o, "collective skew median", &d.skew_median_ns);
    pair_row(o, "collective skew max", &d.skew_max_ns);
    pair_row(o, "collective skew total", &d.skew_total_ns);
    let slowest = |r: Option<cutrace_analysis::job_verdict::RankSteps>, of: Option<u64>| {
        r.map_or_else(
            || "-".to_owned(),
            |r| format!("rank {} ({} of {} steps)", r.rank, r.steps, of.unwrap_or(0)),
        )
    };
    let _ = writeln!(
        o,
        "  slowest rank in most steps: {} → {}",
        slowest(h.slowest_rank_base, h.steps.base),
        slowest(h.slowest_rank_new, h.steps.new)
    );
    let least = |r: Option<cutrace_analysis::job_verdict::RankNs>| {
        r.map_or_else(
            || "- (every rank waited alike)".to_owned(),
            |r| format!("rank {} (waited {})", r.rank, fmt_ns(r.ns)),
        )
    };
    let _ = writeln!(
        o,
        "  likely straggler (waited least at collectives): {} → {}",
        least(h.least_waiting_base),
        least(h.least_waiting_new)
    );
}

/// Writes the job diff: the headline, then rank by rank.
pub fn render_diff(o: &mut String, base: &str, new: &str, d: &JobDiff) {
    let from = o.len();
    let (base, new) = (super::escape_controls(base), super::escape_controls(new));
    let _ = writeln!(
        o,
        "cutrace diff (distributed jobs)\nbase: {base}\nnew:  {new}"
    );
    for c in &d.caveats {
        let _ = writeln!(o, "caveat: {}", caveat_text(c));
    }
    render_headline(o, d);
    let _ = writeln!(
        o,
        "\nPer rank (sums over each rank's GPUs, as in `cutrace report`)"
    );
    for r in &d.ranks {
        let _ = writeln!(o, "rank {}", r.rank);
        pair_row(o, "busy", &r.busy_ns);
        pair_row(o, "comm", &r.comm_ns);
        pair_row(o, "exposed comm", &r.exposed_comm_ns);
        pair_row(o, "wait", &r.wait_ns);
        pair_row(o, "idle", &r.idle_ns);
        pair_row(o, "step median", &r.step_median_ns);
    }
    escape_from(o, from);
}

/// Sorted ranks as runs: `1, 3–7, 9` (a job of thousands of ranks may miss most of them).
fn rank_ranges(ranks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j].saturating_add(1) {
            j += 1;
        }
        out.push(match j - i {
            0 => ranks[i].to_string(),
            1 => format!("{}, {}", ranks[i], ranks[j]),
            _ => format!("{}–{}", ranks[i], ranks[j]),
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn missing_ranks_are_written_as_runs() {
        assert_eq!(super::rank_ranges(&[]), "");
        assert_eq!(super::rank_ranges(&[2]), "2");
        assert_eq!(super::rank_ranges(&[2, 3]), "2, 3");
        assert_eq!(super::rank_ranges(&[1, 3, 4, 5, 6, 7, 9]), "1, 3–7, 9");
    }
}

#[cfg(test)]
mod said {
    use super::*;

    #[test]
    fn a_ranks_losses_and_the_notes_are_said_from_their_facts() {
        let lost = RankLosses {
            dropped_by_cupti: 7,
            damaged_bytes: 300,
            damaged_regions: 2,
            profiler_own: vec![("Out-of-range".into(), 4181)],
            ..RankLosses::default()
        };
        assert_eq!(
            losses_text(&lost),
            [
                "7 records dropped by CUPTI",
                "300 damaged bytes skipped in 2 stretches",
                "the profiler's own account: Out-of-range = 4181"
            ]
        );
        assert!(losses_text(&RankLosses::default()).is_empty());
        assert_eq!(
            note_text(&JobNote::RankLostData {
                rank: 0,
                losses: lost
            }),
            "rank 0 lost data: 7 records dropped by CUPTI; 300 damaged bytes skipped in 2 \
             stretches; the profiler's own account: Out-of-range = 4181; its figures cover what \
             was recorded"
        );
        assert_eq!(
            note_text(&JobNote::DuplicateRank {
                rank: 5,
                left_out: vec!["rank5.json".into()],
                kept: vec!["rank5.json".into()]
            }),
            "rank 5 appears twice: rank5.json left out, rank5.json kept"
        );
        assert!(note_text(&JobNote::WorldTooLarge {
            world_size: u32::MAX
        })
        .contains("world size of 4294967295"));
        assert_eq!(
            note_text(&JobNote::Input {
                note: "a.json: not a trace".into()
            }),
            "a.json: not a trace"
        );
        assert!(caveat_text(&JobCaveat::DeadOrMissing {
            side: "new",
            dead: 1,
            missing: 2
        })
        .starts_with("the new job has 1 dead and 2 missing rank(s)"));
    }

    /// A note's facts and its words are separate members: an input note's own words are its
    /// `note`, beside the `text` every note has (the JSON once had `text` twice).
    #[test]
    fn a_note_in_json_has_each_member_once() {
        let n = JobNote::Input {
            note: "a.json: not a trace".into(),
        };
        let json = serde_json::to_string(&Said {
            facts: &n,
            text: note_text(&n),
        })
        .unwrap();
        assert_eq!(
            json,
            r#"{"kind":"input","note":"a.json: not a trace","text":"a.json: not a trace"}"#
        );
    }

    #[test]
    fn the_clock_note_follows_the_alignment() {
        let clock = |alignment, hosts: &[&str]| ClockInfo {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            ranks_without_host: 0,
            alignment,
            offsets: Vec::new(),
            offset_max_ns: None,
        };
        assert!(clock_text(&clock("one_host", &["vm"])).starts_with("every rank ran on vm:"));
        assert!(
            clock_text(&clock("several_hosts", &["a", "b"])).starts_with("ranks ran on 2 hosts;")
        );
        assert!(clock_text(&clock("unknown", &[])).starts_with("the traces do not name"));
    }
}
