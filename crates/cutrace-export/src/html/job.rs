//! The job page (`cutrace report JOB --html`): a distributed job's report
//! ([`cutrace_analysis::JobReport`], the numbers of `--format json`) with its verdict first,
//! the ranks side by side, one timeline lane per rank ([`super::job_lod`]), the slowest rank per
//! step and the collectives' arrival skew. Every name from the job (paths, hosts, step and
//! collective names, notes) goes through [`escape`].

use std::fmt::Write as _;

use cutrace_analysis::job_reduce::{JobCollectives, JobRank, JobSteps};
use cutrace_analysis::{fmt_ns, JobReport};
use cutrace_trace::Ns;

use super::job_lod::{job_lod, rank_levels, RankBuckets, RankLanes, MAX_RANK_LANES};
use super::{
    bar_chart, escape, page_end, page_start, pct, timeline_open, Cell, PageData, Table,
    TimelineData,
};
use crate::text::job::{clock_text, dead_text, note_text};
use crate::text::verdict::{job_verdict as verdict, ranks_word, Piece};

/// Ranks listed in the ranks table at most (the lowest); the JSON lists every one.
pub const RANK_ROWS: usize = 1024;
/// Dead ranks, missing ranks and notes listed at most each; the JSON lists every one.
pub const LISTED: usize = 200;

/// The whole page for `report JOB --html`: `title` names the inputs, `lanes` holds the ranks'
/// timeline buckets by their paths.
pub fn page(
    title: &str,
    j: &JobReport,
    lanes: &RankLanes,
    path: Option<&cutrace_analysis::job_path::JobCriticalPath>,
) -> String {
    let mut o = String::with_capacity(64 * 1024);
    page_start(
        &mut o,
        &format!("cutrace report: {title} (distributed job)"),
    );
    let _ = write!(
        o,
        "<h1>cutrace report: {} (distributed job)</h1>",
        escape(title)
    );
    verdict_section(&mut o, j);
    facts(&mut o, j);
    left_out(&mut o, j);
    o.push_str("<h2>Ranks</h2>");
    ranks(&mut o, &j.ranks);
    o.push_str("<h2>Timeline</h2>");
    let lod = timeline(&mut o, &j.ranks, lanes, path);
    if let Some(cp) = path {
        super::path::job_section(&mut o, cp, &lod, "tl");
    }
    steps(&mut o, &j.steps, &j.ranks);
    collectives(&mut o, &j.collectives);
    page_end(
        &mut o,
        &PageData {
            timelines: vec![TimelineData {
                id: "tl".into(),
                lod: &lod,
                gaps: Vec::new(),
            }],
        },
    );
    o
}

fn verdict_section(o: &mut String, j: &JobReport) {
    let lines = verdict(&j.summary);
    let alarm = lines.iter().any(|l| l.alarm);
    let _ = write!(
        o,
        "<section id=\"verdict\" class=\"{}\">",
        if alarm { "box lost" } else { "box" }
    );
    for l in lines {
        o.push_str("<p class=\"verdict\">");
        if l.alarm {
            o.push_str("<strong>");
        }
        for p in &l.pieces {
            match p {
                Piece::Text(t) => o.push_str(&escape(t)),
                Piece::Num { check, value, text } => {
                    let _ = write!(
                        o,
                        "<span class=\"num\" data-check=\"{check}\" data-value=\"{}\">{}</span>",
                        escape(value),
                        escape(text)
                    );
                }
            }
        }
        if l.alarm {
            o.push_str("</strong>");
        }
        o.push_str("</p>");
    }
    o.push_str("</section>\n");
}

fn facts(o: &mut String, j: &JobReport) {
    let world = j.world_size.map_or_else(
        || "world size not stated".into(),
        |w| format!("world size {w}"),
    );
    let _ = write!(
        o,
        "<p class=\"facts\">{} ranks found ({} live, {} dead), {}. Clocks: {}.</p>",
        j.ranks_found,
        j.ranks.len(),
        j.dead_ranks.len(),
        escape(&world),
        escape(&clock_text(&j.clock))
    );
}

/// Missing and dead ranks and the job's notes: red when a rank is left out or lost data.
fn left_out(o: &mut String, j: &JobReport) {
    let lost =
        !j.missing_ranks.is_empty() || !j.dead_ranks.is_empty() || j.summary.ranks_lost_data > 0;
    let class = match (lost, j.notes.is_empty()) {
        (true, _) => "lost",
        (false, false) => "info",
        (false, true) => "ok",
    };
    let _ = write!(
        o,
        "<section id=\"data-loss\" class=\"box {class}\"><h2>Ranks left out, data lost, notes</h2>"
    );
    let mut items: Vec<String> = Vec::new();
    if !j.missing_ranks.is_empty() {
        let shown: Vec<String> = j
            .missing_ranks
            .iter()
            .take(LISTED)
            .map(u32::to_string)
            .collect();
        items.push(format!(
            "MISSING: no trace for {}{}: {}{}",
            j.missing_ranks.len(),
            ranks_word(j.missing_ranks.len() as u64),
            shown.join(", "),
            more(j.missing_ranks.len())
        ));
    }
    for d in j.dead_ranks.iter().take(LISTED) {
        items.push(format!(
            "DEAD: rank {} ({}): {}",
            d.rank,
            d.paths.join(", "),
            dead_text(&d.reason)
        ));
    }
    if j.dead_ranks.len() > LISTED {
        items.push(format!(
            "and {} more dead ranks",
            j.dead_ranks.len() - LISTED
        ));
    }
    items.extend(j.notes.iter().take(LISTED).map(note_text));
    if j.notes.len() > LISTED {
        items.push(format!("and {} more notes", j.notes.len() - LISTED));
    }
    if items.is_empty() {
        o.push_str("<p>Every rank has a trace, and none lost data that it can tell.</p>");
    } else {
        o.push_str("<ul>");
        for i in items {
            let _ = write!(o, "<li>{}</li>", escape(&i));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
}

fn more(n: usize) -> String {
    if n > LISTED {
        format!(" and {} more (the JSON lists every one)", n - LISTED)
    } else {
        String::new()
    }
}

/// A duration cell the tests read: `data-check` names the rank's JSON field.
fn rank_ns(check: &str, rank: u32, ns: Ns) -> Cell {
    Cell::Raw(
        ns as f64,
        format!(
            "<span data-check=\"{check}\" data-rank=\"{rank}\" data-value=\"{ns}\">{}</span>",
            fmt_ns(ns)
        ),
    )
}

fn opt_ns(v: Option<Ns>) -> Cell {
    v.map_or(Cell::Text("-".into()), Cell::Ns)
}

/// The ranks side by side, then busy and wait per rank as charts.
fn ranks(o: &mut String, ranks: &[JobRank]) {
    let _ = write!(
        o,
        "<p class=\"muted\">Sums over each rank's GPUs, each GPU a union: busy = all kernels, \
         compute = compute kernels, communication = communication kernels, exposed = \
         communication with no compute kernel beside it on that GPU, waited = summed time it \
         waited at collectives for the last rank (the rank that waits least arrived last: the \
         straggler).{} Click a column to sort.</p>",
        if ranks.len() > RANK_ROWS {
            format!(
                " The {RANK_ROWS} lowest of {} ranks; the JSON lists every one.",
                ranks.len()
            )
        } else {
            String::new()
        }
    );
    let mut t = Table::new(
        o,
        "ranks",
        &[
            ("rank", true),
            ("host", false),
            ("GPUs", true),
            ("kernels", true),
            ("busy", true),
            ("busy %", true),
            ("compute", true),
            ("communication", true),
            ("exposed", true),
            ("hidden", true),
            ("waited", true),
            ("idle", true),
            ("step median", true),
            ("trace", false),
        ],
    );
    for r in ranks.iter().take(RANK_ROWS) {
        let mut trace = r.paths.join(", ");
        if !r.complete {
            trace.insert_str(0, "(incomplete) ");
        }
        t.row(&[
            Cell::Int(u64::from(r.rank)),
            Cell::Text(r.host.clone().unwrap_or_else(|| "-".into())),
            Cell::Int(r.devices.len() as u64),
            Cell::Int(r.kernels),
            rank_ns("busy_ns", r.rank, r.busy_ns),
            Cell::Pct(r.busy_pct),
            rank_ns("compute_ns", r.rank, r.compute_ns),
            rank_ns("comm_ns", r.rank, r.comm_ns),
            rank_ns("exposed_comm_ns", r.rank, r.exposed_comm_ns),
            r.hidden_comm_pct.map_or(Cell::Text("-".into()), Cell::Pct),
            rank_ns("wait_ns", r.rank, r.wait_ns),
            Cell::Ns(r.idle_ns),
            opt_ns(r.step_median_ns),
            Cell::Name(trace),
        ]);
    }
    t.end();
    let shown = &ranks[..ranks.len().min(RANK_ROWS)];
    let busy: Vec<(String, f64, String)> = shown
        .iter()
        .map(|r| {
            (
                r.rank.to_string(),
                r.busy_pct,
                format!("rank {}: busy {}", r.rank, pct(r.busy_pct)),
            )
        })
        .collect();
    let wait: Vec<(String, f64, String)> = shown
        .iter()
        .map(|r| {
            (
                r.rank.to_string(),
                r.wait_ns as f64,
                format!("rank {}: waited {}", r.rank, fmt_ns(r.wait_ns)),
            )
        })
        .collect();
    o.push_str("<div class=\"charts\"><figure><figcaption>Busy % per rank</figcaption>");
    bar_chart(o, "rank-busy", &busy, "busy %");
    o.push_str("</figure><figure><figcaption>Waited at collectives per rank</figcaption>");
    bar_chart(o, "rank-wait", &wait, "waited");
    o.push_str("</figure></div>\n");
}

/// One lane per rank with buckets (at most [`MAX_RANK_LANES`]); returns the timeline's levels.
fn timeline(
    o: &mut String,
    ranks: &[JobRank],
    lanes: &RankLanes,
    path: Option<&cutrace_analysis::job_path::JobCriticalPath>,
) -> super::TimelineLod {
    let with: Vec<(u32, &RankBuckets)> = ranks
        .iter()
        .filter_map(|r| lanes.get(&r.paths).map(|b| (r.rank, b)))
        .collect();
    let without = ranks.len() - with.len();
    let drawn = &with[..with.len().min(MAX_RANK_LANES)];
    let mut lod = job_lod(drawn, rank_levels(drawn.len()));
    let with_path =
        path.is_some_and(|cp| super::path::add_lane(&mut lod, &super::path::job_runs(cp)));
    let legend = if with_path {
        format!("<br>{}", super::path::legend())
    } else {
        String::new()
    };
    if lod.lanes.is_empty() {
        o.push_str(
            "<p class=\"muted\">No rank has kernel intervals to draw (ranks read from summaries \
             hold none): no timeline.</p>",
        );
        return lod;
    }
    timeline_open(
        o,
        "tl",
        &lod,
        &format!(
            "<span class=\"sw busy\"></span>compute (busy, not communication) \
         <span class=\"sw comm\"></span>communication; the height is the share of the rank's \
         GPU time in each bucket.{legend}"
        ),
    );
    let mut notes = Vec::new();
    if with.len() > drawn.len() {
        notes.push(format!(
            "{} more ranks have no lane (the {} lowest are drawn)",
            with.len() - drawn.len(),
            drawn.len()
        ));
    }
    if without > 0 {
        notes.push(format!(
            "{without} ranks have no lane: read from rank summaries, which hold no intervals"
        ));
    }
    let _ = write!(
        o,
        "<p class=\"muted\">One lane per rank. Times are offsets from the earliest kernel start \
         of any rank (rounded down to a bucket), each rank on its host's clock: between hosts \
         their offset shifts the lanes. Finest detail: {} per bucket{}.</p></div>",
        fmt_ns(lod.gpu_bucket_ns),
        if notes.is_empty() {
            String::new()
        } else {
            format!("; {}", notes.join("; "))
        }
    );
    lod
}

/// Steps matched across ranks: how often each rank was the slowest, then each step's slowest
/// and fastest rank and their spread (the widest [`super::report::STEP_ROWS`], in step order).
fn steps(o: &mut String, st: &JobSteps, ranks: &[JobRank]) {
    if st.steps.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<h2>Steps</h2><p>{} steps of the host ranges \"{}\", matched across ranks by {}.</p>",
        st.steps.len(),
        escape(&st.matched),
        if st.matched_by == "number" {
            "their #N"
        } else {
            "their order on each rank"
        }
    );
    let mut slowest: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for s in &st.steps {
        *slowest.entry(s.slowest_rank).or_default() += 1;
    }
    let bars: Vec<(String, f64, String)> = ranks
        .iter()
        .take(RANK_ROWS)
        .map(|r| {
            let n = slowest.get(&r.rank).copied().unwrap_or(0);
            (
                r.rank.to_string(),
                n as f64,
                format!("rank {}: the slowest in {n} steps", r.rank),
            )
        })
        .collect();
    o.push_str("<figure><figcaption>Steps in which each rank was the slowest</figcaption>");
    bar_chart(o, "slowest", &bars, "steps");
    o.push_str("</figure>");
    let rows = super::report::STEP_ROWS;
    let mut shown: Vec<_> = st.steps.iter().collect();
    if shown.len() > rows {
        shown.sort_by_key(|s| (std::cmp::Reverse(s.spread_ns), s.index));
        shown.truncate(rows);
        shown.sort_by_key(|s| s.index);
        let _ = write!(
            o,
            "<p class=\"muted\">The {rows} steps of widest spread of {}; the JSON lists every \
             one.</p>",
            st.steps.len()
        );
    }
    let mut t = Table::new(
        o,
        "job-steps",
        &[
            ("step", true),
            ("name", false),
            ("ranks", true),
            ("slowest rank", true),
            ("slowest", true),
            ("fastest rank", true),
            ("fastest", true),
            ("spread", true),
        ],
    );
    for s in shown {
        t.row(&[
            Cell::Int(s.index),
            Cell::Name(s.name.clone()),
            Cell::Int(s.ranks),
            Cell::Raw(
                f64::from(s.slowest_rank),
                format!(
                    "<span data-check=\"step_slowest_rank\" data-step=\"{}\" \
                     data-value=\"{1}\">{1}</span>",
                    s.index, s.slowest_rank
                ),
            ),
            Cell::Ns(s.slowest_ns),
            Cell::Int(u64::from(s.fastest_rank)),
            Cell::Ns(s.fastest_ns),
            Cell::Raw(
                s.spread_ns as f64,
                format!(
                    "<span data-check=\"step_spread_ns\" data-step=\"{}\" data-value=\"{}\">{}</span>",
                    s.index,
                    s.spread_ns,
                    fmt_ns(s.spread_ns)
                ),
            ),
        ]);
    }
    t.end();
}

/// The collectives' matching, their arrival skew per group and the largest skews.
fn collectives(o: &mut String, c: &JobCollectives) {
    let _ = write!(
        o,
        "<h2>Collectives</h2><p>{} calls matched across ranks ({} on fewer ranks than their \
         group), {} on one rank only.",
        c.matched, c.partial, c.unmatched
    );
    if let (Some(m), Some(x)) = (c.skew_median_ns, c.skew_max_ns) {
        let _ = write!(
            o,
            " Arrival skew (the last rank's kernel start − the first's): median {}, max {}, \
             total {}.",
            fmt_ns(m),
            fmt_ns(x),
            fmt_ns(c.skew_total_ns)
        );
    }
    o.push_str("</p>");
    if c.matched == 0 {
        return;
    }
    let mut t = Table::new(
        o,
        "groups",
        &[
            ("group", false),
            ("matched by", false),
            ("calls", true),
            ("skew max", true),
            ("skew total", true),
        ],
    );
    for g in &c.groups {
        let name = match (&g.group, &g.desc) {
            (Some(n), Some(d)) => format!("{n} ({d})"),
            (Some(n), None) => n.clone(),
            (None, _) => "NCCL kernels (no annotation)".into(),
        };
        t.row(&[
            Cell::Name(name),
            Cell::Text(g.matched_by.into()),
            Cell::Int(g.calls),
            Cell::Ns(g.skew_max_ns),
            Cell::Ns(g.skew_total_ns),
        ]);
    }
    t.end();
    if c.largest.is_empty() {
        return;
    }
    o.push_str("<h2>Largest arrival skews</h2>");
    let mut t = Table::new(
        o,
        "skews",
        &[
            ("skew", true),
            ("collective", false),
            ("group", false),
            ("call", false),
            ("ranks", true),
            ("first rank", true),
            ("last rank", true),
        ],
    );
    for x in &c.largest {
        t.row(&[
            Cell::Ns(x.skew_ns),
            Cell::Name(x.name.clone()),
            Cell::Name(x.group.clone().unwrap_or_else(|| "NCCL kernels".into())),
            Cell::Text(
                x.seq
                    .map_or(format!("#{}", x.order), |s| format!("seq {s}")),
            ),
            Cell::Int(x.ranks),
            Cell::Int(u64::from(x.first_rank)),
            Cell::Int(u64::from(x.last_rank)),
        ]);
    }
    t.end();
}
