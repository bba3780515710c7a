//! The critical path on the page (`cutrace report --critical-path --html`): a lane of the
//! timeline that shows, bucket by bucket, how much of the time was on the path and what most of
//! it was (host, compute, communication, copies, launch gaps, sync, stream waits, no recorded
//! cause), and a section with each step's path, the segments to shorten first and the slack of
//! the large work off the path. A click on a step or a segment zooms the timeline to it.

use std::fmt::Write as _;

use cutrace_analysis::critical_path::{Composition, CriticalPath, Kind, PathRun, Segment, Slack};
use cutrace_analysis::fmt_ns;
use cutrace_trace::Ns;

use super::lod::{share_char, Grid, Lane, LaneRole, TimelineLod, ZOOM};
use super::{escape, Cell, Table};

/// Most levels of the path's lane, as a stream's lane has: some 43 KB at most beside the
/// timeline's budget ([`super::lod::BUDGET_BYTES`]).
const MAX_LEVELS: u32 = 3;

/// The classes the lane's second character names (1-based), and the page's colours by them.
pub const CLASSES: [&str; 8] = [
    "host",
    "compute",
    "comm",
    "copy",
    "launch",
    "sync",
    "wait",
    "unexplained",
];

/// What each class is, in the legend and the lane's tooltips (by [`CLASSES`]).
pub(super) const CLASS_WORDS: [&str; 8] = [
    "host time in ops and calls",
    "GPU compute",
    "communication",
    "copies and memsets",
    "launch gaps (launch to start, queued behind the stream)",
    "sync returns",
    "stream waits",
    "no recorded cause",
];

/// A segment's kind in the tables' words.
fn kind_words(k: Kind) -> &'static str {
    match k {
        Kind::Host => "host",
        Kind::Kernel => "GPU compute",
        Kind::Communication => "communication",
        Kind::Copy => "copy",
        Kind::Memset => "memset",
        Kind::Launch => "launch gap",
        Kind::Queue => "queued on the stream",
        Kind::Sync => "sync return",
        Kind::StreamWait => "stream wait",
        Kind::Unexplained => "no recorded cause",
    }
}

fn class(k: Kind) -> usize {
    match k {
        Kind::Host => 0,
        Kind::Kernel => 1,
        Kind::Communication => 2,
        Kind::Copy | Kind::Memset => 3,
        Kind::Launch | Kind::Queue => 4,
        Kind::Sync => 5,
        Kind::StreamWait => 6,
        Kind::Unexplained => 7,
    }
}

/// The timeline of `trace` (its window) with the path's lane first: over a span that holds the
/// path, when there is one.
pub fn timeline_with_path(
    trace: &cutrace_trace::Trace,
    window: Option<&cutrace_analysis::Window>,
    cp: Option<&CriticalPath>,
) -> Result<TimelineLod, cutrace_analysis::AnalysisError> {
    let runs = cp.map(drawn_runs).unwrap_or_default();
    let mut lod = super::lod::timeline_lod_covering(trace, window, span_of(&runs))?;
    add_lane(&mut lod, &runs);
    Ok(lod)
}

/// Puts the lane of `runs` first on `lod`, and notes how much of them it holds; false when
/// there is no lane to draw ([`lane`]).
pub fn add_lane(lod: &mut TimelineLod, runs: &[PathRun]) -> bool {
    let Some(l) = lane(lod, runs) else {
        return false;
    };
    lod.path_drawn = Some(drawn_share(lod, runs));
    lod.lanes.insert(0, l);
    true
}

/// What the path's lane draws, in words.
pub fn drawn(cp: &CriticalPath) -> &'static str {
    if cp.steps.is_empty() {
        "the window's path"
    } else {
        "each step's own path"
    }
}

/// The runs the page draws: each step's own path where the steps have one, else the window's.
pub fn drawn_runs(cp: &CriticalPath) -> Vec<PathRun> {
    if cp.steps.is_empty() {
        return cp.window.as_ref().map_or_else(Vec::new, |w| w.runs.clone());
    }
    step_runs(cp.steps.iter().map(|s| &s.path.runs[..]))
}

/// Several steps' runs as one list, by time.
pub fn step_runs<'a>(steps: impl Iterator<Item = &'a [PathRun]>) -> Vec<PathRun> {
    let mut runs: Vec<PathRun> = steps.flat_map(|r| r.iter().copied()).collect();
    runs.sort_by_key(|r| (r.start_ns, r.end_ns));
    runs
}

/// The first start and last end of `runs`, for a timeline that must hold them.
pub fn span_of(runs: &[PathRun]) -> Option<(Ns, Ns)> {
    let s = runs.iter().map(|r| r.start_ns).min()?;
    let e = runs.iter().map(|r| r.end_ns).max()?;
    Some((s, e))
}

/// How much of `runs`' time lies within `lod`'s span, and their whole time.
fn drawn_share(lod: &TimelineLod, runs: &[PathRun]) -> (Ns, Ns) {
    let end = lod.start_ns.saturating_add(lod.span_ns);
    runs.iter().fold((0u64, 0u64), |(inside, all), r| {
        let i = r
            .end_ns
            .min(end)
            .saturating_sub(r.start_ns.max(lod.start_ns));
        (
            inside.saturating_add(i),
            all.saturating_add(r.end_ns - r.start_ns),
        )
    })
}

/// The lane of `runs` (by start) on `lod`'s grid (its GPU lanes' buckets, at most [`MAX_LEVELS`] levels of
/// them), within the span drawn; `None` when the timeline has no GPU lane or the path no time.
pub fn lane(lod: &TimelineLod, runs: &[PathRun]) -> Option<Lane> {
    let gpu_levels = lod
        .lanes
        .iter()
        .find(|l| l.role.is_none())
        .map(|l| l.levels.len() as u32)?;
    if runs.is_empty() || lod.span_ns == 0 || gpu_levels == 0 {
        return None;
    }
    let levels = gpu_levels.min(MAX_LEVELS);
    let width = lod
        .gpu_bucket_ns
        .saturating_mul(ZOOM.pow(gpu_levels - levels))
        .max(1);
    let grid = Grid {
        start: lod.start_ns,
        width,
        n: (lod.base_buckets * ZOOM.pow(levels - 1)) as usize,
    };
    let mut sums: Vec<Vec<Ns>> = vec![vec![0; grid.n]; CLASSES.len()];
    // Within the span drawn, as the host and copies lanes are; where paths overlap (steps of
    // several processes) a moment counts once, for the run that reached it first.
    let end = lod.start_ns.saturating_add(lod.span_ns);
    let mut until: Ns = 0;
    for r in runs {
        let from = r.start_ns.max(until);
        if from >= r.end_ns {
            continue;
        }
        until = r.end_ns;
        let c = &mut sums[class(r.kind)];
        grid.add(from, r.end_ns.min(end), |b, ns| {
            c[b] = c[b].saturating_add(ns)
        });
    }
    let mut out = Vec::with_capacity(levels as usize);
    let mut w = width;
    for _ in 0..levels {
        let n = sums[0].len();
        let mut s = String::with_capacity(2 * n);
        for b in 0..n {
            let total: Ns = sums.iter().fold(0, |t: Ns, c| t.saturating_add(c[b]));
            s.push(share_char(total, w));
            let most = (0..CLASSES.len())
                .filter(|&c| sums[c][b] > 0)
                .max_by_key(|&c| (sums[c][b], std::cmp::Reverse(c)));
            s.push(most.map_or('0', |c| char::from(b'1' + c as u8)));
        }
        out.push(s);
        sums = sums
            .iter()
            .map(|c| {
                c.chunks(ZOOM as usize)
                    .map(|k| k.iter().fold(0, |t: Ns, &v| t.saturating_add(v)))
                    .collect()
            })
            .collect();
        w = w.saturating_mul(ZOOM);
    }
    out.reverse();
    Some(Lane {
        device: 0,
        stream: None,
        pid: None,
        rank: None,
        role: Some(LaneRole::Path),
        bucket_ns: Some(width),
        levels: out,
    })
}

/// The legend of the path's lane (the page's own HTML).
pub fn legend() -> String {
    let mut s = String::from("critical path:");
    for (c, words) in CLASSES.iter().zip(CLASS_WORDS) {
        let _ = write!(s, " <span class=\"sw cp-{c}\"></span>{words}");
    }
    s.push_str(" (the height is the share of the bucket on the path).");
    s
}

/// `ns` as an offset from the timeline's start, for the script (0 before it).
fn rel(lod: &TimelineLod, ns: Ns) -> Ns {
    ns.saturating_sub(lod.start_ns)
}

/// The attributes of a row that a click zooms the timeline `tl` to `[s, e)` (clipped to the
/// span drawn); none when the span drawn holds none of it.
fn zoom_attrs(tl: &str, lod: &TimelineLod, s: Ns, e: Ns) -> String {
    let end = lod.start_ns.saturating_add(lod.span_ns);
    if lod.span_ns == 0 || e <= lod.start_ns || s >= end {
        return " class=\"off\" title=\"not within the timeline's span\"".to_owned();
    }
    let (s, e) = (s.max(lod.start_ns), e.min(end));
    format!(
        " class=\"zoom\" data-timeline=\"{tl}\" data-from=\"{}\" data-to=\"{}\" tabindex=\"0\" \
         title=\"click: show it on the timeline\"",
        rel(lod, s),
        rel(lod, e).max(rel(lod, s) + 1)
    )
}

/// The section of `cp` (a trace's critical path), whose rows zoom the timeline `tl` over `lod`.
pub fn section(o: &mut String, cp: &CriticalPath, lod: &TimelineLod, tl: &str, origin: Option<Ns>) {
    let at = At(origin);
    o.push_str("<h2 class=\"critical-path\">Critical path</h2>");
    o.push_str(
        "<p>The chain of dependent work (host ops, launches, GPU work, waits) whose length is the \
         step's time: shortening work on it shortens the step, shortening work off it does not.",
    );
    where_drawn(o, lod, drawn(cp));
    o.push_str("</p>");
    if !cp.steps.is_empty() {
        let mut t = Table::new(
            o,
            "cp-steps",
            &[
                ("step", true),
                ("name", false),
                ("length", true),
                ("host", true),
                ("compute", true),
                ("communication", true),
                ("copies", true),
                ("launch gaps", true),
                ("sync", true),
                ("stream waits", true),
                ("no recorded cause", true),
            ],
        );
        for s in &cp.steps {
            let p = &s.path;
            let c = &p.composition;
            let mut cells = vec![
                Cell::Int(s.index),
                Cell::Name(s.name.clone()),
                checked_ns(
                    "cp_step_length_ns",
                    &format!(" data-step=\"{}\"", s.index),
                    p.length_ns,
                ),
            ];
            cells.extend(parts(c).map(Cell::Ns));
            t.row_with(&zoom_attrs(tl, lod, p.start_ns, p.end_ns), &cells);
        }
        t.end();
    }
    let slowest = cp.slowest_step();
    let (what, path) = match (slowest, &cp.window) {
        (Some(s), _) => (
            format!(
                "the slowest step, {} ({})",
                s.name,
                fmt_ns(s.path.length_ns)
            ),
            &s.path,
        ),
        (None, Some(w)) => (format!("the window ({})", fmt_ns(w.length_ns)), w),
        (None, None) => {
            o.push_str("<p class=\"muted\">No record in the window: no path.</p>");
            return;
        }
    };
    let _ = write!(o, "<h3>In {}</h3>", escape(&what));
    composition(o, &path.composition, path.length_ns);
    segments(o, &path.longest_segments, lod, tl, &at);
    slack(o, &path.slack, lod, tl, &at);
    for line in crate::text::critical_path::provenance(cp) {
        let _ = write!(o, "<p class=\"muted\">{}</p>", escape(&line));
    }
}

/// Says what the timeline's path lane draws and how much of the path lies within its span.
fn where_drawn(o: &mut String, lod: &TimelineLod, drawn: &str) {
    let Some((inside, all)) = lod.path_drawn else {
        o.push_str(" There is no timeline to draw it on (no kernel in the span).");
        return;
    };
    let _ = write!(
        o,
        " The timeline's top lane draws {drawn}; a click on a row below shows it there."
    );
    if inside < all {
        let _ = write!(
            o,
            " {} of its {} lies within the timeline's span (the rest is before the first kernel \
             or after the last: such rows are not links).",
            fmt_ns(inside),
            fmt_ns(all)
        );
    }
}

/// Points in time as the text writes them: `+12.345 ms` from the trace's (or the job's) start.
struct At(Option<Ns>);

impl At {
    fn cell(&self, t: Ns) -> Cell {
        let st = crate::text::Style {
            origin_ns: self.0,
            ..crate::text::Style::default()
        };
        Cell::Raw(t.saturating_sub(self.0.unwrap_or(0)) as f64, st.at(t))
    }
}

/// A duration cell with the marks the browser test reads.
fn checked_ns(check: &str, extra: &str, ns: Ns) -> Cell {
    Cell::Raw(
        ns as f64,
        format!(
            "<span data-check=\"{check}\"{extra} data-value=\"{ns}\">{}</span>",
            fmt_ns(ns)
        ),
    )
}

/// Host, compute, communication, copies, launch, sync, stream waits, no recorded cause: they
/// add up to the path's length (a job's rank waits are inside them).
fn parts(c: &Composition) -> [Ns; 8] {
    [
        c.host_ns,
        c.compute_ns,
        c.communication_ns,
        c.copy_ns,
        c.launch_ns,
        c.sync_ns,
        c.stream_wait_ns,
        c.unexplained_ns,
    ]
}

/// What the path was made of, largest first, then its host time by op.
pub fn composition(o: &mut String, c: &Composition, length_ns: Ns) {
    let mut items: Vec<(Ns, usize)> = parts(c)
        .into_iter()
        .enumerate()
        .filter(|&(_, ns)| ns > 0)
        .map(|(i, ns)| (ns, i))
        .collect();
    items.sort_by_key(|&(ns, i)| (std::cmp::Reverse(ns), i));
    o.push_str("<p class=\"cp-made\">Made of: ");
    for (n, (ns, i)) in items.iter().enumerate() {
        let words = CLASS_WORDS[*i];
        let _ = write!(
            o,
            "{}<span class=\"sw cp-{}\"></span>{words} {} ({:.1} %)",
            if n > 0 { ", " } else { "" },
            CLASSES[*i],
            fmt_ns(*ns),
            *ns as f64 * 100.0 / length_ns.max(1) as f64
        );
    }
    if let Some(w) = c.rank_wait_ns.filter(|&w| w > 0) {
        let _ = write!(
            o,
            "; of all that, {} ({:.1} %) was ranks on the path waiting at collectives for a rank \
             that arrived later (that rank's work fills it)",
            fmt_ns(w),
            w as f64 * 100.0 / length_ns.max(1) as f64
        );
    }
    o.push_str(".</p>");
    if !c.host_ops.is_empty() {
        o.push_str("<p class=\"cp-made\">Host time by op: ");
        for (n, op) in c.host_ops.iter().enumerate() {
            let _ = write!(
                o,
                "{}<code>{}</code> {}",
                if n > 0 { ", " } else { "" },
                escape(&op.name),
                fmt_ns(op.ns)
            );
        }
        o.push_str(".</p>");
    }
}

/// The longest segments, each a row that zooms the timeline to it.
fn segments(o: &mut String, segs: &[Segment], lod: &TimelineLod, tl: &str, at: &At) {
    if segs.is_empty() {
        return;
    }
    o.push_str("<p>The segments to shorten first:</p>");
    let mut t = Table::new(
        o,
        "cp-segments",
        &[
            ("length", true),
            ("kind", false),
            ("what", false),
            ("where", false),
            ("at (from the start)", true),
        ],
    );
    for s in segs {
        t.row_with(
            &zoom_attrs(tl, lod, s.start_ns, s.end_ns),
            &[
                checked_ns("cp_segment_length_ns", "", s.length_ns),
                Cell::Text(kind_words(s.kind).to_owned()),
                Cell::Name(s.name.clone()),
                Cell::Text(crate::text::critical_path::place(&s.place)),
                at.cell(s.start_ns),
            ],
        );
    }
    t.end();
}

fn slack(o: &mut String, slack: &[Slack], lod: &TimelineLod, tl: &str, at: &At) {
    if slack.is_empty() {
        return;
    }
    o.push_str(
        "<p>Large work off the path, and how much longer each could run before the path would \
         lengthen:</p>",
    );
    let mut t = Table::new(
        o,
        "cp-slack",
        &[
            ("duration", true),
            ("slack", true),
            ("kind", false),
            ("name", false),
            ("where", false),
            ("at (from the start)", true),
        ],
    );
    for s in slack {
        t.row_with(
            &zoom_attrs(tl, lod, s.start_ns, s.end_ns),
            &[
                Cell::Ns(s.duration_ns),
                Cell::Ns(s.slack_ns),
                Cell::Text(kind_words(s.kind).to_owned()),
                Cell::Name(s.name.clone()),
                Cell::Text(crate::text::critical_path::place(&s.place)),
                at.cell(s.start_ns),
            ],
        );
    }
    t.end();
}

/// Every step's path of a job, by time.
pub fn job_runs(cp: &cutrace_analysis::job_path::JobCriticalPath) -> Vec<PathRun> {
    step_runs(cp.steps.iter().map(|s| &s.runs[..]))
}

/// The section of a job's critical path `cp`, whose rows zoom the timeline `tl` over `lod`.
pub fn job_section(
    o: &mut String,
    cp: &cutrace_analysis::job_path::JobCriticalPath,
    lod: &TimelineLod,
    tl: &str,
) {
    // Points in time from the earliest step's start, as the text counts them.
    let at = At(cp.steps.iter().map(|s| s.start_ns).min());
    o.push_str("<h2 class=\"critical-path\">Critical path</h2>");
    o.push_str(
        "<p>Per step, the chain of dependent work across the ranks whose length is the step's \
         time: where a rank on it waited at a collective for a later rank, the path goes on \
         along the later rank's work. Each rank's times are on its host's clock (times below \
         count from the earliest step's start).",
    );
    where_drawn(o, lod, "each step's path");
    o.push_str("</p>");
    if !cp.ranks_left_out.is_empty() {
        let _ = write!(
            o,
            "<p class=\"muted\">Left out of every path (read from rank summaries, which hold no \
             dependencies): ranks {}.</p>",
            cp.ranks_left_out
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if cp.steps.is_empty() {
        o.push_str("<p class=\"muted\">No step is on every rank: no path.</p>");
        return;
    }
    let mut t = Table::new(
        o,
        "cp-steps",
        &[
            ("step", true),
            ("name", false),
            ("length", true),
            ("waited for other ranks", true),
            ("ranks on the path", false),
            ("host", true),
            ("compute", true),
            ("communication", true),
            ("copies", true),
            ("launch, sync, stream waits", true),
            ("no recorded cause", true),
        ],
    );
    for s in &cp.steps {
        let c = &s.composition;
        // From the step's end back: the rank it ended on, then the rank each wait (latest
        // first) went on along.
        let mut on = vec![s.end_rank];
        on.extend(s.rank_waits.iter().rev().map(|w| w.waited_for_rank));
        on.dedup();
        let on: Vec<String> = on.iter().map(|r| format!("rank {r}")).collect();
        t.row_with(
            &zoom_attrs(tl, lod, s.start_ns, s.end_ns),
            &[
                Cell::Int(s.index),
                Cell::Name(s.name.clone()),
                checked_ns(
                    "cp_step_length_ns",
                    &format!(" data-step=\"{}\"", s.index),
                    s.length_ns,
                ),
                checked_ns(
                    "cp_step_rank_wait_ns",
                    &format!(" data-step=\"{}\"", s.index),
                    c.rank_wait_ns.unwrap_or(0),
                ),
                Cell::Text(on.join(" ← ")),
                Cell::Ns(c.host_ns),
                Cell::Ns(c.compute_ns),
                Cell::Ns(c.communication_ns),
                Cell::Ns(c.copy_ns),
                Cell::Ns(c.launch_ns + c.sync_ns + c.stream_wait_ns),
                Cell::Ns(c.unexplained_ns),
            ],
        );
    }
    t.end();
    let Some(slow) = cp.slowest_step() else {
        return;
    };
    let _ = write!(
        o,
        "<h3>In the slowest step, {} ({})</h3>",
        escape(&slow.name),
        fmt_ns(slow.length_ns)
    );
    composition(o, &slow.composition, slow.length_ns);
    if !slow.rank_waits.is_empty() {
        o.push_str("<p>Where the path left a rank for the one it waited for:</p>");
        let mut t = Table::new(
            o,
            "cp-waits",
            &[
                ("rank", true),
                ("waited", true),
                ("for rank", true),
                ("in", false),
                ("at (from the start)", true),
            ],
        );
        for w in &slow.rank_waits {
            t.row_with(
                &zoom_attrs(tl, lod, w.at_ns, w.at_ns + w.wait_ns),
                &[
                    Cell::Int(u64::from(w.rank)),
                    checked_ns(
                        "cp_rank_wait_ns",
                        &format!(" data-rank=\"{}\"", w.rank),
                        w.wait_ns,
                    ),
                    Cell::Int(u64::from(w.waited_for_rank)),
                    Cell::Name(w.op.clone()),
                    at.cell(w.at_ns),
                ],
            );
        }
        t.end();
    }
    segments(o, &slow.longest_segments, lod, tl, &at);
    for line in crate::text::critical_path::job_provenance(cp) {
        let _ = write!(o, "<p class=\"muted\">{}</p>", escape(&line));
    }
}

/// How the critical path changed (`cutrace diff --critical-path --html`): its length and parts
/// on each side, then the work on it whose time changed most. Each side's path is drawn on its
/// own timeline below.
pub fn diff_section(o: &mut String, d: &cutrace_analysis::critical_path::PathDiff) {
    o.push_str("<h2 class=\"critical-path\">Critical path</h2>");
    let over = match d.over {
        "steps" => format!(
            "Summed over the steps' paths ({} steps → {}).",
            d.steps_base, d.steps_new
        ),
        _ => "Over the window.".to_owned(),
    };
    let length = d.parts.iter().find(|p| p.part == "length");
    let over = match length {
        Some(l) if d.over == "steps" && d.steps_base != d.steps_new => format!(
            "{over} The step counts differ: per step the path is {} in the base and {} in the \
             new trace (means).",
            fmt_ns(l.base_ns / d.steps_base.max(1)),
            fmt_ns(l.new_ns / d.steps_new.max(1))
        ),
        _ => over,
    };
    let _ = write!(
        o,
        "<p>{over} Each side's path is drawn on its timeline below, and listed under it.</p>"
    );
    let mut t = Table::new(
        o,
        "cp-parts",
        &[
            ("part", false),
            ("base", true),
            ("new", true),
            ("change", true),
        ],
    );
    for p in d
        .parts
        .iter()
        .filter(|p| p.part == "length" || p.base_ns > 0 || p.new_ns > 0)
    {
        let extra = format!(" data-part=\"{}\"", p.part);
        t.row(&[
            Cell::Text(p.part.replace('_', " ")),
            checked_ns("cp_part_base_ns", &extra, p.base_ns),
            checked_ns("cp_part_new_ns", &extra, p.new_ns),
            Cell::Raw(p.delta_ns as f64, super::signed_change(p.delta_ns)),
        ]);
    }
    t.end();
    if d.changed.is_empty() {
        return;
    }
    o.push_str("<p>The work on the path whose time changed most:</p>");
    let mut t = Table::new(
        o,
        "cp-changed",
        &[
            ("kind", false),
            ("what", false),
            ("base", true),
            ("new", true),
            ("change", true),
        ],
    );
    for c in &d.changed {
        t.row(&[
            Cell::Text(c.kind.label().to_owned()),
            Cell::Name(c.name.clone()),
            Cell::Ns(c.base_ns),
            Cell::Ns(c.new_ns),
            Cell::Raw(c.delta_ns as f64, super::signed_change(c.delta_ns)),
        ]);
    }
    t.end();
}
