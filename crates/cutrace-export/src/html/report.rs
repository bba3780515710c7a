//! The report page: [`cutrace_analysis::Report`]'s numbers (the same as `--format json`), the
//! timeline of [`super::lod`] (GPUs, their copies and streams, host threads), and charts of
//! gaps (by idle time), steps and copies.

use std::fmt::Write as _;

use cutrace_analysis::counters::{Aggregation, CounterReport};
use cutrace_analysis::timeline::{Gap, GapBucket, NamedSpan};
use cutrace_analysis::{fmt_ns, AnalysisError, DeviceReport, GapReading, Report, Steps, Window};
use cutrace_trace::Trace;

use super::{
    bar_chart, checked, escape, page_end, page_start, pct, timeline_frame, Cell, GapMark, PageData,
    Table, TimelineData, TimelineLod,
};

/// The whole page for `report` of `trace` (its window as the report's): `title` names the trace.
pub fn page(
    title: &str,
    trace: &Trace,
    report: &Report,
    window: Option<&Window>,
) -> Result<String, AnalysisError> {
    let lod = super::path::timeline_with_path(trace, window, report.critical_path.as_ref())?;
    let mut o = String::with_capacity(64 * 1024);
    page_start(&mut o, &format!("cutrace report: {title}"));
    let _ = write!(o, "<h1>cutrace report: {}</h1>", escape(title));
    let memory = super::memory::memory_plots(trace, window);
    let tl = body(&mut o, report, &lod, "tl", Some(&memory));
    page_end(
        &mut o,
        &PageData {
            timelines: vec![tl],
        },
    );
    Ok(o)
}

/// One report's sections (the diff page puts two side by side); returns its timeline's data.
pub(super) fn body<'a>(
    o: &mut String,
    r: &Report,
    lod: &'a TimelineLod,
    id: &str,
    memory: Option<&super::memory::MemoryPlots>,
) -> TimelineData<'a> {
    verdict(o, r);
    trace_line(o, r);
    data_loss(o, r);
    o.push_str("<h2>GPUs</h2>");
    devices(o, r);
    o.push_str("<h2>Timeline</h2>");
    timeline_frame(o, id, lod);
    if let Some(cp) = &r.critical_path {
        super::path::section(o, cp, lod, id, r.trace.first_ns);
    }
    if let Some(plots) = memory {
        super::memory::section(o, r, plots);
    }
    gaps(o, r);
    histograms(o, r);
    if let Some(st) = &r.steps {
        steps(o, st);
    }
    names(o, r);
    if let Some(c) = &r.counters {
        counters(o, c);
    }
    copies(o, r);
    TimelineData {
        id: id.to_owned(),
        lod,
        gaps: gap_marks(r, lod),
    }
}

fn trace_line(o: &mut String, r: &Report) {
    let t = &r.trace;
    let _ = write!(
        o,
        "<p class=\"facts\">A {} trace: {} kernels, {} memcpys, {} memsets, {} API calls, {} \
         annotation ranges",
        escape(t.source),
        t.kernels,
        t.memcpys,
        t.memsets,
        t.api_calls,
        t.ranges
    );
    if let (Some(a), Some(b)) = (t.first_ns, t.last_ns) {
        let _ = write!(o, "; {} from its first record to its last", fmt_ns(b - a));
    }
    if let Some(w) = &r.window {
        let to = w.to_ns.map_or("the end".to_owned(), |t| format!("{t} ns"));
        let _ = write!(
            o,
            "; window {} ns to {to}, intervals clipped to it",
            w.from_ns
        );
    }
    o.push_str(".</p>\n");
}

/// The first answer, as the text report's first lines say it (`summary` in the JSON).
fn verdict(o: &mut String, r: &Report) {
    let loss = crate::text::verdict::launch_loss_line(r);
    let mut lines: Vec<String> = r
        .summary
        .devices
        .iter()
        .map(crate::text::verdict::device_line)
        .collect();
    if let Some(m) = r.summary.step_median_ns {
        lines.push(format!(
            "steps: {}, median {}",
            r.summary.steps,
            crate::text::verdict::short_ns(m)
        ));
    }
    lines.extend(crate::text::verdict::rules_line(&r.summary));
    if lines.is_empty() && loss.is_none() {
        return;
    }
    // A trace that lost its GPU records is not shown as healthy: the box is the loss box's red.
    let class = if loss.is_some() { "box lost" } else { "box" };
    let _ = write!(o, "<section id=\"verdict\" class=\"{class}\">");
    if let Some(l) = loss {
        let _ = write!(
            o,
            "<p class=\"verdict\"><strong>{}</strong></p>",
            escape(&l)
        );
    }
    for l in lines {
        let _ = write!(o, "<p class=\"verdict\">{}</p>", escape(&l));
    }
    o.push_str("</section>");
}

/// Data loss and the recorder's notes: always shown, at the top, red when anything was lost.
fn data_loss(o: &mut String, r: &Report) {
    let d = &r.data_loss;
    // Real loss (red), what the source does not say (information), and what the model leaves
    // out (information): skipped is not lost.
    let mut lost: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    if d.drops_recorded {
        if d.dropped_by_recorder > 0 || d.dropped_by_cupti > 0 {
            lost.push(format!(
                "{} records dropped by the recorder and {} by CUPTI: totals are lower bounds",
                d.dropped_by_recorder, d.dropped_by_cupti
            ));
        }
    } else if !d.source_drops.is_empty() {
        let counts: Vec<String> = d
            .source_drops
            .iter()
            .map(|s| format!("{} = {}", s.name, s.count))
            .collect();
        unknown.push(format!(
            "the profiler's own account (Kineto's record counts): {}",
            counts.join(", ")
        ));
    } else {
        unknown.push(
            "this kind of trace does not record drop counts: drops are unknown, not zero".into(),
        );
    }
    let not_modelled: Vec<String> = d
        .skipped_events
        .iter()
        .map(|s| format!("{} {} events", s.count, s.category))
        .collect();
    if !d.complete {
        lost.push(format!(
            "the trace is incomplete: {}",
            d.incomplete_reason
                .as_deref()
                .unwrap_or("no reason recorded")
        ));
    }
    if d.damaged_bytes > 0 {
        lost.push(format!(
            "{} damaged bytes skipped in {} regions",
            d.damaged_bytes, d.damaged_regions
        ));
    }
    if d.inverted_intervals > 0 {
        lost.push(format!(
            "{} records end before they start (counted as zero-length)",
            d.inverted_intervals
        ));
    }
    lost.extend(crate::text::report::launch_facts(&d.launches));
    let c = &r.correlation;
    if c.orphans > 0 {
        lost.push(format!(
            "{} of {} kernels have no launch call in the trace (orphans)",
            c.orphans, c.kernels
        ));
    }
    if let Some(s) = &r.trace.separate_runs {
        lost.push(format!(
            "the parts may come from separate runs ({} time spans{}): compare with care",
            s.time_spans,
            if s.hosts.is_empty() {
                String::new()
            } else {
                format!(", hosts {}", s.hosts.join(", "))
            }
        ));
    }
    let class = match (
        lost.is_empty(),
        unknown.is_empty() && not_modelled.is_empty(),
    ) {
        (false, _) => "lost",
        (true, false) => "info",
        (true, true) => "ok",
    };
    let _ = write!(
        o,
        "<section id=\"data-loss\" class=\"box {class}\"><h2>Data loss</h2>"
    );
    let list = |o: &mut String, items: &[String]| {
        o.push_str("<ul>");
        for l in items {
            let _ = write!(o, "<li>{}</li>", escape(l));
        }
        o.push_str("</ul>");
    };
    if lost.is_empty() {
        o.push_str("<p>Nothing lost that the trace can tell: no dropped records counted, the trace is complete, no damaged bytes, no orphan kernels.</p>");
    } else {
        list(o, &lost);
    }
    if !unknown.is_empty() {
        o.push_str("<h2>Not recorded</h2>");
        list(o, &unknown);
    }
    if !not_modelled.is_empty() {
        // One line: a Kineto trace skips a dozen kinds, and the timeline should stay in view.
        let _ = write!(
            o,
            "<h2>Not modelled</h2><p class=\"muted\">Read and left out of the figures, not \
             lost: {}.</p>",
            escape(&not_modelled.join(", "))
        );
    }
    // Notes of the recorder (or of the importer, for an imported trace); none, no heading.
    if !r.notes.is_empty() {
        let _ = write!(o, "<h2>Notes ({})</h2>", r.notes.len());
        o.push_str("<ul class=\"notes\">");
        for n in &r.notes {
            let who = match (n.pid, &n.part) {
                (Some(p), _) => format!("pid {p}: "),
                (None, Some(part)) => format!("{part}: "),
                _ => String::new(),
            };
            let _ = write!(o, "<li>{}{}</li>", escape(&who), escape(&n.text));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
}

fn devices(o: &mut String, r: &Report) {
    if r.devices.is_empty() {
        o.push_str("<p class=\"muted\">No kernels or copies on any GPU.</p>");
        return;
    }
    o.push_str(
        "<table class=\"devices\"><thead><tr><th>GPU</th><th>kernels</th><th>busy</th>\
         <th>busy time</th><th>compute</th><th>communication</th><th>kernel span</th>\
         <th>idle</th><th>idle gaps</th>\
         <th>waiting for the host</th><th>launched, not started</th><th>unknown</th>\
         <th>copy busy</th><th>compute ∩ copy</th></tr></thead><tbody>",
    );
    for d in &r.devices {
        let dev = format!(" data-device=\"{}\"", d.device);
        let t = &d.timeline;
        let _ = write!(
            o,
            "<tr><td>GPU {}</td><td class=\"num\">{}</td>",
            d.device, t.kernels
        );
        checked(o, "td", "busy_pct", &dev, d.busy_pct, &pct(d.busy_pct));
        let _ = write!(o, "<td class=\"num\">{}</td>", fmt_ns(t.busy_ns));
        // Compute and communication apart (the verdict's unions; they overlap where both ran).
        let v = r.summary.devices.iter().find(|v| v.device == d.device);
        for (key, ns) in [
            ("compute_ns", v.map(|v| v.compute_ns)),
            ("communication_ns", v.map(|v| v.communication_ns)),
        ] {
            match ns {
                Some(ns) => checked(o, "td", key, &dev, ns, &fmt_ns(ns)),
                None => o.push_str("<td class=\"num\">-</td>"),
            }
        }
        let _ = write!(
            o,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td>",
            fmt_ns(t.window_ns),
            fmt_ns(t.idle_ns)
        );
        checked(o, "td", "gaps", &dev, t.gaps, &t.gaps.to_string());
        idle_split(o, d);
        let _ = write!(
            o,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            fmt_ns(d.copy_busy_ns),
            fmt_ns(d.compute_copy_overlap_ns)
        );
    }
    o.push_str("</tbody></table>\n");
    let l = &r.launch_latency;
    if let (Some(p50), Some(p99)) = (l.p50_ns, l.p99_ns) {
        let _ = write!(
            o,
            "<p>Launch to start (the end of the launch call to its kernel's start), {} kernels: \
             median {}, p99 {}.</p>",
            l.kernels,
            signed_ns(p50),
            signed_ns(p99)
        );
    }
}

/// A signed duration as the text writes it (`-1.769 µs`, `1.309 ms`).
fn signed_ns(v: i64) -> String {
    if v < 0 {
        format!("-{}", fmt_ns(v.unsigned_abs()))
    } else {
        fmt_ns(v.unsigned_abs())
    }
}

fn idle_split(o: &mut String, d: &DeviceReport) {
    let dev = d.device;
    match &d.idle_split {
        Some(s) => {
            for (key, ns, gaps) in [
                ("before_launch", s.before_launch_ns, s.gaps_before_launch),
                ("after_launch", s.after_launch_ns, s.gaps_after_launch),
                ("unknown", s.unknown_ns, s.gaps_unknown),
            ] {
                let _ = write!(
                    o,
                    "<td class=\"num\">{} in <span data-check=\"gaps_{key}\" \
                     data-device=\"{dev}\" data-value=\"{gaps}\">{gaps}</span> gaps</td>",
                    fmt_ns(ns)
                );
            }
        }
        None => o.push_str("<td>-</td><td>-</td><td>-</td>"),
    }
}

/// What a gap reading says, in words.
pub(super) fn reading_words(host: Option<&cutrace_analysis::GapHost>) -> &'static str {
    if host.is_none_or(|h| h.next_launch.is_none()) {
        return "unknown: the next kernel's launch call is not in the trace";
    }
    match host.and_then(|h| h.reading) {
        Some(GapReading::InsideGraph) => "inside one launch (a CUDA graph)",
        Some(GapReading::StreamDispatch) => "the GPU's own dispatch of queued work",
        Some(GapReading::QueuedBehindCopies) => "launched, not started: queued behind copies",
        Some(GapReading::Queued) => "launched, not started: queued behind something else",
        Some(GapReading::WaitedForHost) => "waiting for the host",
        None => "unknown (host and GPU both had a share)",
    }
}

fn gaps(o: &mut String, r: &Report) {
    let any = r
        .devices
        .iter()
        .any(|d| !d.timeline.largest_gaps.is_empty());
    if !any {
        return;
    }
    o.push_str("<h2>Largest idle gaps</h2>");
    let mut t = Table::new(
        o,
        "gaps",
        &[
            ("GPU", true),
            ("at", true),
            ("length", true),
            ("reading", false),
            ("kernel after", false),
            ("host in CUDA calls", true),
            ("what the host was doing", false),
        ],
    );
    let start = r
        .devices
        .iter()
        .filter_map(|d| d.timeline.window_start_ns)
        .min()
        .unwrap_or(0);
    for d in &r.devices {
        for g in &d.timeline.largest_gaps {
            let host = g.host.as_ref();
            let context: Vec<String> = gap_context(g)
                .iter()
                .map(|l| escape(l).into_owned())
                .collect();
            t.row(&[
                Cell::Int(u64::from(d.device)),
                Cell::Ns(g.start_ns - start),
                Cell::Ns(g.length_ns),
                Cell::Text(reading_words(host).into()),
                Cell::Name(g.after.as_ref().map_or("-".into(), |k| k.name.to_string())),
                Cell::Ns(host.map_or(0, |h| h.in_calls_ns)),
                Cell::Context(context.join("<br>")),
            ]);
        }
    }
    t.end();
}

/// What the host was doing in a device gap, one line per fact, as the text report says it: when
/// the next kernel's launch returned, the API calls and annotation ranges that covered it, the
/// CPU ops open in it, and the copies that ran in it. Empty when the trace says nothing of it.
pub(super) fn gap_context(g: &Gap) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(h) = g.host.as_ref() else {
        return lines;
    };
    if let Some(l) = &h.next_launch {
        let r = l.returned_into_gap_ns;
        let when = if r < 0 {
            format!("{} before the gap began", fmt_ns(r.unsigned_abs()))
        } else if r as u64 > g.length_ns {
            format!(
                "{} into the gap, after the kernel had started",
                fmt_ns(r as u64)
            )
        } else {
            format!("{} into the gap", fmt_ns(r as u64))
        };
        lines.push(format!("the next kernel's {} returned {when}", l.name));
    }
    let spans = |v: &[NamedSpan]| {
        v.iter()
            .map(|x| format!("{} {}", x.name, fmt_ns(x.ns)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !h.calls.is_empty() {
        lines.push(format!(
            "recorded API calls covered {} of it: {}",
            fmt_ns(h.in_calls_ns),
            spans(&h.calls)
        ));
    } else if h.next_launch.is_some() {
        lines.push("no recorded API call ran in it".into());
    }
    if !h.ranges.is_empty() {
        lines.push(format!("in ranges: {}", spans(&h.ranges)));
    }
    if !h.cpu_ops.is_empty() {
        let ops: Vec<String> = h
            .cpu_ops
            .iter()
            .map(|x| format!("{} {} of it", x.name, fmt_ns(x.in_gap_ns)))
            .collect();
        lines.push(format!("in CPU ops: {}", ops.join(", ")));
    }
    if let Some(c) = g.copy_ns.filter(|c| *c > 0) {
        lines.push(format!("copies ran {} of it", fmt_ns(c)));
    }
    lines
}

fn gap_marks(r: &Report, lod: &TimelineLod) -> Vec<GapMark> {
    r.devices
        .iter()
        .flat_map(|d| {
            d.timeline.largest_gaps.iter().map(|g| GapMark {
                device: d.device,
                from_ns: g.start_ns.saturating_sub(lod.start_ns),
                to_ns: g.end_ns.saturating_sub(lod.start_ns),
                reading: format!(
                    "{} gap: {}",
                    fmt_ns(g.length_ns),
                    reading_words(g.host.as_ref())
                ),
                context: gap_context(g),
            })
        })
        .collect()
}

fn histograms(o: &mut String, r: &Report) {
    let with: Vec<&DeviceReport> = r.devices.iter().filter(|d| d.timeline.gaps > 0).collect();
    if with.is_empty() {
        return;
    }
    o.push_str(
        "<h2>Idle gap lengths</h2><p class=\"muted\">Bars: the idle time in gaps of each \
         length, so the few long gaps that hold most of it stand out; dots: how many gaps.</p>\
         <div class=\"charts\">",
    );
    for d in with {
        let _ = write!(
            o,
            "<figure><figcaption>GPU {}: idle time by gap length</figcaption>",
            d.device
        );
        gap_histogram(o, d.device, &d.timeline.gap_histogram, d.timeline.idle_ns);
        o.push_str("</figure>");
    }
    o.push_str("</div>\n");
}

/// One GPU's gap histogram: per length bucket (from the first with gaps to the last) a bar of
/// the idle time in it, labelled with its share of `idle_ns`, and a dot of its gap count on a
/// second scale. The bars and dots carry the JSON's `total_ns` and `count` (`data-bucket`: the
/// bucket's index in `gap_histogram`).
fn gap_histogram(o: &mut String, device: u32, buckets: &[GapBucket], idle_ns: u64) {
    let (w, h, left, right, bottom, top) = (640.0, 210.0, 48.0, 48.0, 40.0, 22.0);
    let used: Vec<usize> = (0..buckets.len())
        .filter(|&i| buckets[i].count > 0)
        .collect();
    let (Some(&lo), Some(&hi)) = (used.first(), used.last()) else {
        return;
    };
    let shown = &buckets[lo..=hi];
    let max_ns = shown.iter().map(|b| b.total_ns).max().unwrap_or(0).max(1) as f64;
    let max_n = shown.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64;
    let plot = h - bottom - top;
    let slot = ((w - left - right) / shown.len() as f64).min(90.0);
    let _ = write!(
        o,
        "<svg class=\"chart histogram\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-label=\"idle time and gap count by gap length\">\
         <line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" class=\"axis\"/>\
         <text x=\"2\" y=\"12\" class=\"tick\">idle time (bars), max {2}</text>\
         <text x=\"{3}\" y=\"12\" class=\"tick\" text-anchor=\"end\">gaps (dots), max {4}</text>\
         <text x=\"2\" y=\"{5}\" class=\"tick\">gap length</text>",
        h - bottom,
        w - 2.0,
        escape(&fmt_ns(max_ns as u64)),
        w - 2.0,
        max_n as u64,
        h - 2.0
    );
    let mut dots = String::new();
    for (k, b) in shown.iter().enumerate() {
        let i = lo + k;
        let x = left + k as f64 * slot;
        let share = if idle_ns > 0 {
            b.total_ns as f64 * 100.0 / idle_ns as f64
        } else {
            0.0
        };
        let tip = format!(
            "gaps of {} to {}: {} gaps, {} idle ({:.1} % of the idle time)",
            fmt_ns(b.from_ns),
            b.to_ns.map_or("any length".into(), fmt_ns),
            b.count,
            fmt_ns(b.total_ns),
            share
        );
        if b.total_ns > 0 {
            let bh = (b.total_ns as f64 / max_ns * plot).max(1.0);
            let _ = write!(
                o,
                "<rect class=\"bar\" data-check=\"gap_bucket_total_ns\" data-device=\"{device}\" \
                 data-bucket=\"{i}\" data-value=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" \
                 height=\"{bh:.1}\"><title>{}</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                b.total_ns,
                x + slot * 0.1,
                h - bottom - bh,
                slot * 0.8,
                escape(&tip),
                x + slot * 0.5,
                h - bottom - bh - 3.0,
                if share < 1.0 {
                    "&lt;1 %".into()
                } else {
                    format!("{share:.0} %")
                }
            );
        }
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">≥{}</text>\
             <text x=\"{:.1}\" y=\"{}\" class=\"tick count\" text-anchor=\"middle\">{}</text>",
            x + slot * 0.5,
            h - bottom + 12.0,
            escape(&short_ns(b.from_ns)),
            x + slot * 0.5,
            h - bottom + 23.0,
            count(b.count, "gap", "gaps")
        );
        let cy = h - bottom - b.count as f64 / max_n * plot;
        let _ = write!(
            dots,
            "<circle class=\"dot count\" data-check=\"gap_bucket_count\" data-device=\"{device}\" \
             data-bucket=\"{i}\" data-value=\"{}\" cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"3\">\
             <title>{}</title></circle>",
            b.count,
            x + slot * 0.5,
            escape(&tip)
        );
    }
    o.push_str(&dots);
    o.push_str("</svg>");
}

fn short_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{}µs", ns / 1_000),
        1_000_000..=999_999_999 => format!("{}ms", ns / 1_000_000),
        _ => format!("{}s", ns / 1_000_000_000),
    }
}

/// Steps listed in the table at most (the longest, in step order); the JSON has them all.
pub const STEP_ROWS: usize = 200;
/// Bars of the step chart at most: past it each bar is a run of consecutive steps.
pub const STEP_BARS: usize = 400;

fn steps(o: &mut String, st: &Steps) {
    let _ = write!(
        o,
        "<h2>Steps</h2><p>{} steps of the host ranges \"{}\"",
        st.count,
        escape(&st.matched)
    );
    if let (Some(a), Some(m), Some(b)) = (
        st.duration_min_ns,
        st.duration_median_ns,
        st.duration_max_ns,
    ) {
        o.push_str(": duration");
        for (what, ns) in [("min", a), ("median", m), ("max", b)] {
            let _ = write!(o, " {what} ");
            checked(
                o,
                "span",
                &format!("step_duration_{what}_ns"),
                "",
                ns,
                &fmt_ns(ns),
            );
        }
    }
    o.push_str(".</p>");
    step_chart(o, st);
    let mut shown: Vec<&cutrace_analysis::Step> = st.steps.iter().collect();
    if shown.len() > STEP_ROWS {
        shown.sort_by_key(|s| (std::cmp::Reverse(s.duration_ns), s.index));
        shown.truncate(STEP_ROWS);
        shown.sort_by_key(|s| s.index);
        let _ = write!(
            o,
            "<p class=\"muted\">The {STEP_ROWS} longest of {} steps; the JSON report lists \
             every one.</p>",
            st.steps.len()
        );
    }
    let devs: Vec<u32> = st.devices.iter().map(|d| d.device).collect();
    let mut heads: Vec<(String, bool)> = vec![
        ("step".into(), true),
        ("name".into(), false),
        ("duration".into(), true),
        ("kernels".into(), true),
    ];
    heads.extend(devs.iter().map(|d| (format!("GPU {d} busy"), true)));
    let heads: Vec<(&str, bool)> = heads.iter().map(|(h, n)| (h.as_str(), *n)).collect();
    let mut t = Table::new(o, "steps", &heads);
    for s in shown {
        let mut cells = vec![
            Cell::Int(s.index),
            Cell::Name(s.name.clone()),
            Cell::Raw(
                s.duration_ns as f64,
                format!(
                    "<span data-check=\"step_duration_ns\" data-step=\"{}\" data-value=\"{}\">{}</span>",
                    s.index,
                    s.duration_ns,
                    fmt_ns(s.duration_ns)
                ),
            ),
            Cell::Int(s.kernels),
        ];
        for d in &devs {
            match s.devices.iter().find(|x| x.device == *d) {
                Some(x) => cells.push(Cell::Pct(x.busy_pct)),
                None => cells.push(Cell::Text("-".into())),
            }
        }
        t.row(&cells);
    }
    t.end();
}

/// Duration per step as bars of one scale, each bar filled from below by each GPU's busy share
/// during it (side by side when there are several GPUs). A bar is at most 60 units wide, so one
/// step is one bar, not the whole chart. Past [`STEP_BARS`] steps a bar is a run of consecutive
/// steps: its height the longest of them, its fill their mean busy share. A bar of one step
/// carries the JSON's `duration_ns` and each fill its `busy_pct` (`data-step`: the step's index).
fn step_chart(o: &mut String, st: &Steps) {
    let (w, h, left, right, bottom, top) = (640.0, 200.0, 66.0, 8.0, 30.0, 24.0);
    let per = st.steps.len().div_ceil(STEP_BARS).max(1);
    let bins: Vec<&[cutrace_analysis::Step]> = st.steps.chunks(per).collect();
    let n = bins.len().max(1) as f64;
    let max = st
        .steps
        .iter()
        .map(|s| s.duration_ns)
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = ((w - left - right) / n).min(60.0);
    let plot = h - bottom - top;
    let _ = write!(
        o,
        "<svg class=\"chart steps\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"steps\">\
         <line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" class=\"axis\"/>\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{0}\" class=\"axis\"/>\
         <text x=\"{2}\" y=\"{3}\" class=\"tick\" text-anchor=\"end\">{4}</text>\
         <text x=\"{2}\" y=\"{0}\" class=\"tick\" text-anchor=\"end\">0</text>\
         <text x=\"2\" y=\"10\" class=\"tick\">step duration; filled: GPU busy share of the \
         step</text>",
        h - bottom,
        w - right,
        left - 3.0,
        top + 4.0,
        escape(&fmt_ns(max)),
    );
    if per > 1 {
        let _ = write!(
            o,
            "<text x=\"{left}\" y=\"{}\" class=\"tick\">each bar: {per} consecutive steps \
             (the longest; filled: their mean busy share)</text>",
            h - 4.0
        );
    }
    let devs = st.devices.len().max(1) as f64;
    for (i, bin) in bins.iter().enumerate() {
        let longest = bin.iter().map(|s| s.duration_ns).max().unwrap_or(0);
        let bh = (longest as f64 / max as f64 * plot).max(1.0);
        let x = left + i as f64 * slot + slot * 0.1;
        let bw = (slot * 0.8).max(0.5);
        let (first, last) = (&bin[0], &bin[bin.len() - 1]);
        let (label, mark) = if bin.len() == 1 {
            (
                first.name.clone(),
                format!(
                    " data-check=\"step_bar_ns\" data-step=\"{}\" data-value=\"{}\"",
                    first.index, first.duration_ns
                ),
            )
        } else {
            (format!("{} to {}", first.name, last.name), String::new())
        };
        let mut tip = format!("{}: {}", label, fmt_ns(longest));
        let mut fills = String::new();
        for (k, dev) in st.devices.iter().enumerate() {
            let v: Vec<f64> = bin
                .iter()
                .filter_map(|s| s.devices.iter().find(|d| d.device == dev.device))
                .map(|d| d.busy_pct)
                .collect();
            if v.is_empty() {
                continue;
            }
            let busy = v.iter().sum::<f64>() / v.len() as f64;
            let _ = write!(tip, "; GPU {} busy {}", dev.device, pct(busy));
            let fh = busy / 100.0 * bh;
            let fmark = if bin.len() == 1 {
                format!(
                    " data-check=\"step_busy_pct\" data-step=\"{}\" data-device=\"{}\" \
                     data-value=\"{busy}\"",
                    first.index, dev.device
                )
            } else {
                String::new()
            };
            let _ = write!(
                fills,
                "<rect class=\"fill d{}\"{fmark} x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" \
                 height=\"{fh:.2}\"><title>GPU {} busy {}</title></rect>",
                k % 4,
                x + bw / devs * k as f64,
                h - bottom - fh,
                bw / devs,
                dev.device,
                pct(busy)
            );
        }
        let _ = write!(
            o,
            "<rect class=\"bar step\"{mark} x=\"{x:.2}\" y=\"{:.2}\" width=\"{bw:.2}\" \
             height=\"{bh:.2}\"><title>{}</title></rect>{fills}",
            h - bottom - bh,
            escape(&tip)
        );
        if bins.len() <= 10 {
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                x + bw / 2.0,
                h - bottom - bh - 3.0,
                escape(&fmt_ns(longest))
            );
        }
        if bins.len() <= 24 {
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                x + bw / 2.0,
                h - bottom + 13.0,
                if bin.len() == 1 {
                    first.index.to_string()
                } else {
                    format!("{}–{}", first.index, last.index)
                }
            );
        }
    }
    o.push_str("</svg>\n");
}

fn names(o: &mut String, r: &Report) {
    if !r.kernel_summary.is_empty() {
        let _ = write!(
            o,
            "<h2>Top kernels</h2><p class=\"muted\">{} of {} kernel names, by summed duration. \
             Click a column to sort.</p>",
            r.kernel_summary.len(),
            r.kernel_names
        );
        let mut t = Table::new(
            o,
            "kernels",
            &[
                ("kernel", false),
                ("calls", true),
                ("total", true),
                ("share of kernel time", true),
                ("mean", true),
                ("median", true),
                ("p99", true),
                ("max", true),
            ],
        );
        for k in &r.kernel_summary {
            let s = &k.stats;
            t.row(&[
                Cell::Name(s.name.clone()),
                Cell::Int(s.count),
                Cell::Ns(s.total_ns),
                Cell::Pct(k.share_of_kernel_time_pct),
                Cell::Ns(s.mean_ns),
                Cell::Ns(s.median_ns),
                Cell::Ns(s.p99_ns),
                Cell::Ns(s.max_ns),
            ]);
        }
        t.end();
    }
    if !r.api_summary.is_empty() {
        let _ = write!(
            o,
            "<h2>Top {} API calls</h2><p class=\"muted\">{} of {} API names, by summed \
             duration.</p>",
            crate::text::report::api_label(r),
            r.api_summary.len(),
            r.api_names
        );
        let mut t = Table::new(
            o,
            "api",
            &[
                ("call", false),
                ("calls", true),
                ("total", true),
                ("mean", true),
                ("median", true),
                ("p99", true),
                ("max", true),
            ],
        );
        for s in &r.api_summary {
            t.row(&[
                Cell::Name(s.name.clone()),
                Cell::Int(s.count),
                Cell::Ns(s.total_ns),
                Cell::Ns(s.mean_ns),
                Cell::Ns(s.median_ns),
                Cell::Ns(s.p99_ns),
                Cell::Ns(s.max_ns),
            ]);
        }
        t.end();
    }
}

fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A counter value as the text report prints it: integers without decimals, others with 3.
/// `None` (no kernel of the name had a value, or CUPTI reported it unavailable) is `n/a`, never
/// 0, so that a missing measurement cannot be read as a measured zero.
pub(super) fn counter_value(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The hardware counters of a `cutrace profile` trace: how they were taken (passes, serialized
/// kernels), what has no values (shown like data loss), and a table of kernel names × metrics.
fn counters(o: &mut String, c: &CounterReport) {
    o.push_str("<section id=\"counters\"><h2>Hardware counters</h2>");
    let passes = match c.passes {
        Some(p) => format!(
            "<span class=\"num\" id=\"counter-passes\" data-value=\"{p}\">{p}</span> {}",
            if p == 1 { "pass" } else { "passes" }
        ),
        None => "an unknown number of passes".into(),
    };
    let _ = write!(
        o,
        "<p>Recorded with <code>cutrace profile</code> (CUPTI Range Profiling, one range per \
         kernel): {} kernels profiled, each replayed in {passes}.",
        c.kernels_profiled
    );
    if c.kernels_serialized {
        o.push_str(
            " <strong>Kernels were serialized while profiling</strong> (each profiled kernel ran \
             alone and was replayed once per pass): the times and overlap in this report are not \
             those of an unprofiled run.",
        );
    }
    o.push_str("</p>");
    let mut missing: Vec<String> = Vec::new();
    if c.kernels_without_values > 0 {
        missing.push(format!(
            "{} without counter values",
            count(c.kernels_without_values, "kernel record", "kernel records")
        ));
    }
    if c.kernels_skipped > 0 {
        missing.push(format!(
            "{} skipped on purpose (--kernels, --max-kernels, --every)",
            count(c.kernels_skipped, "kernel", "kernels")
        ));
    }
    if c.graph_launches > 0 || c.launches_captured > 0 {
        missing.push(format!(
            "{} and {} captured into graphs: no counters for their kernels",
            count(c.graph_launches, "graph launch", "graph launches"),
            count(c.launches_captured, "launch", "launches")
        ));
    }
    if c.ranges_dropped > 0 {
        missing.push(format!(
            "{} dropped by CUPTI or unreadable",
            count(c.ranges_dropped, "range", "ranges")
        ));
    }
    if c.values_unavailable > 0 {
        missing.push(format!(
            "{} reported unavailable by CUPTI (shown as n/a, left out of sums and means)",
            count(c.values_unavailable, "value", "values")
        ));
    }
    if c.kernels_without_timestamps > 0 {
        missing.push(format!(
            "{} of the profiled kernels without timestamps (CUPTI writes 0 for kernels it \
             replays): busy time, gaps and latencies cannot place them; their durations come \
             from gpu__time_duration.sum where measured",
            c.kernels_without_timestamps
        ));
    }
    if let Some(e) = &c.error {
        missing.push(format!("counters failed: {e}"));
    }
    if !missing.is_empty() {
        o.push_str("<div class=\"box lost\" id=\"counters-missing\"><ul>");
        for m in &missing {
            let _ = write!(o, "<li>{}</li>", escape(m));
        }
        o.push_str("</ul></div>");
    }
    if !c.by_kernel.is_empty() {
        let _ = write!(
            o,
            "<p class=\"muted\">{} of {} kernel names with counter values, by summed duration. \
             <em>sum</em>: added up over the kernels; <em>duration-weighted mean</em>: mean \
             weighted by kernel duration (ratios, percentages, rates). n/a: no value. Click a \
             column to sort.</p>",
            c.by_kernel.len(),
            c.kernel_names
        );
        let heads: Vec<String> = c
            .metrics
            .iter()
            .map(|m| {
                let how = match m.aggregation {
                    Aggregation::Sum => "sum",
                    Aggregation::DurationWeightedMean => "duration-weighted mean",
                };
                format!("{} ({how})", m.name)
            })
            .collect();
        let mut cols: Vec<(&str, bool)> =
            vec![("kernel", false), ("kernels", true), ("total", true)];
        cols.extend(heads.iter().map(|h| (h.as_str(), true)));
        let mut t = Table::new(o, "counters", &cols);
        for k in &c.by_kernel {
            let mut cells = vec![
                Cell::Name(k.name.clone()),
                Cell::Int(k.kernels),
                Cell::Ns(k.duration_ns),
            ];
            cells.extend(k.values.iter().map(|v| match v {
                // No sort key: the script sorts a cell without one below every number.
                None => Cell::Text(counter_value(None)),
                Some(x) => Cell::Raw(*x, counter_value(Some(*x))),
            }));
            t.row(&cells);
        }
        t.end();
    }
    o.push_str("</section>\n");
}

fn copies(o: &mut String, r: &Report) {
    o.push_str("<h2>Copies by direction</h2>");
    if r.transfers.is_empty() {
        o.push_str("<p class=\"muted\">No memory copies in the trace (or its window).</p>");
        return;
    }
    let bars: Vec<(String, f64, String)> = r
        .transfers
        .iter()
        .map(|x| {
            (
                x.kind.clone(),
                x.total_ns as f64,
                format!(
                    "{}: {} copies, {} bytes, {}",
                    x.kind,
                    x.count,
                    x.bytes,
                    fmt_ns(x.total_ns)
                ),
            )
        })
        .collect();
    bar_chart(o, "copies", &bars, "time copying");
    let mut t = Table::new(
        o,
        "transfers",
        &[
            ("direction", false),
            ("copies", true),
            ("bytes", true),
            ("time", true),
            ("GB/s", true),
        ],
    );
    for x in &r.transfers {
        t.row(&[
            Cell::Text(x.kind.clone()),
            Cell::Int(x.count),
            Cell::Int(x.bytes),
            Cell::Ns(x.total_ns),
            x.bandwidth_gb_s
                .map_or(Cell::Text("-".into()), |b| Cell::Raw(b, format!("{b:.2}"))),
        ]);
    }
    t.end();
}
