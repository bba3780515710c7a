//! The diff page: what [`cutrace_analysis::diff`] says (per GPU the wall time, busy and the idle
//! split of both traces first, then caveats, steps, the kernel and API names that changed most),
//! then the two traces' reports side by side.

use std::fmt::Write as _;

use cutrace_analysis::diff::DeviceSide;
use cutrace_analysis::{fmt_ns, Diff, DiffSide};

use super::{escape, page_end, page_start, pct, report, Cell, PageData, Table, TimelineLod};

/// One side of the diff page: its title (the path given), what the diff took of its trace
/// (`cutrace_analysis::diff_side`, whose report the page shows) and its timeline
/// (`timeline_lod` over the same window).
pub struct PageSide<'a> {
    pub title: &'a str,
    pub side: &'a DiffSide,
    pub timeline: &'a TimelineLod,
}

/// The whole diff page: `d` is `cutrace_analysis::diff_sides` of the two sides, whose reports
/// and timelines follow it side by side.
pub fn page(
    base: &PageSide<'_>,
    new: &PageSide<'_>,
    d: &Diff,
    path: Option<&cutrace_analysis::critical_path::PathDiff>,
) -> String {
    let (base_title, new_title) = (base.title, new.title);
    let mut o = String::with_capacity(128 * 1024);
    page_start(&mut o, &format!("cutrace diff: {base_title} → {new_title}"));
    let _ = write!(
        o,
        "<h1>cutrace diff</h1><p class=\"facts\">base: {} · new: {}</p>",
        escape(base_title),
        escape(new_title)
    );
    headline(&mut o, d);
    caveats(&mut o, d);
    steps(&mut o, d);
    if let Some(pd) = path {
        super::path::diff_section(&mut o, pd);
    }
    names(&mut o, "Kernels", &d.kernels);
    names(&mut o, crate::text::diff::api_calls_label(d), &d.api);
    o.push_str("<div class=\"sides\"><div class=\"side\">");
    let _ = write!(
        o,
        "<h2 class=\"sidehead\">base: {}</h2>",
        escape(base_title)
    );
    let tb = report::body(&mut o, &base.side.report, base.timeline, "tl-base", None);
    o.push_str("</div><div class=\"side\">");
    let _ = write!(o, "<h2 class=\"sidehead\">new: {}</h2>", escape(new_title));
    let tn = report::body(&mut o, &new.side.report, new.timeline, "tl-new", None);
    o.push_str("</div></div>\n");
    page_end(
        &mut o,
        &PageData {
            timelines: vec![tb, tn],
        },
    );
    o
}

fn caveats(o: &mut String, d: &Diff) {
    let class = if d.caveats.is_empty() { "ok" } else { "lost" };
    let _ = write!(
        o,
        "<section id=\"caveats\" class=\"box {class}\"><h2>Caveats</h2>"
    );
    if d.caveats.is_empty() {
        o.push_str("<p>None: both traces are complete, and the comparison is like for like.</p>");
    } else {
        o.push_str("<ul>");
        for c in &d.caveats {
            let _ = write!(o, "<li>{}</li>", escape(&crate::text::diff::caveat_text(c)));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>\n");
}

/// The answer first: per GPU, the wall time (its kernel span), busy and the idle split (waiting
/// for the host, launched and not started, no launch call) of both traces and their change, as
/// stacked bars on one scale and as a table whose numbers carry the diff JSON's values.
fn headline(o: &mut String, d: &Diff) {
    o.push_str(
        "<section id=\"headline\"><h2>Wall time, busy and idle</h2><p class=\"muted\">Per GPU, \
         its kernel span (first kernel start to last kernel end) split into busy time and idle \
         time, the idle time by what it waited on.</p>",
    );
    headline_bars(o, d);
    for g in &d.devices {
        let dev = format!(" data-device=\"{}\"", g.device);
        let _ = write!(
            o,
            "<table class=\"headline\"{dev}><thead><tr><th>GPU {}</th><th>base</th><th>new</th>\
             <th>change</th></tr></thead><tbody>",
            g.device
        );
        type Get = fn(&DeviceSide) -> Option<u64>;
        let rows: [(&str, &str, Get); 6] = [
            ("wall time (kernel span)", "window_ns", |s| {
                Some(s.window_ns)
            }),
            ("busy", "busy_ns", |s| Some(s.busy_ns)),
            ("idle", "idle_ns", |s| Some(s.idle_ns)),
            ("  waiting for the host", "idle_before_launch_ns", |s| {
                s.idle_before_launch_ns
            }),
            ("  launched, not started", "idle_after_launch_ns", |s| {
                s.idle_after_launch_ns
            }),
            ("  unknown (no launch call)", "idle_unknown_ns", |s| {
                s.idle_unknown_ns
            }),
        ];
        for (label, key, get) in rows {
            let (b, n) = (g.base.as_ref().and_then(get), g.new.as_ref().and_then(get));
            let _ = write!(
                o,
                "<tr><td{}>{}</td>",
                if label.starts_with(' ') {
                    " class=\"sub\""
                } else {
                    ""
                },
                escape(label.trim_start())
            );
            for (side, v) in [("base", b), ("new", n)] {
                match v {
                    Some(v) => {
                        super::checked(o, "td", &format!("{side}_{key}"), &dev, v, &fmt_ns(v))
                    }
                    None => o.push_str("<td>-</td>"),
                }
            }
            match (b, n) {
                (Some(b), Some(n)) => {
                    let change = n as i128 - b as i128;
                    let text = format!(
                        "{}{}{}",
                        if change < 0 { "−" } else { "+" },
                        fmt_ns(change.unsigned_abs() as u64),
                        if b > 0 {
                            format!(" ({:+.1} %)", change as f64 * 100.0 / b as f64)
                        } else {
                            String::new()
                        }
                    );
                    super::checked(o, "td", &format!("change_{key}"), &dev, change, &text);
                }
                _ => o.push_str("<td>-</td>"),
            }
            o.push_str("</tr>");
        }
        o.push_str("<tr><td>busy, share of the wall time</td>");
        for (side, s) in [("base", &g.base), ("new", &g.new)] {
            match s {
                Some(s) => super::checked(
                    o,
                    "td",
                    &format!("{side}_busy_pct"),
                    &dev,
                    s.busy_pct,
                    &pct(s.busy_pct),
                ),
                None => o.push_str("<td>-</td>"),
            }
        }
        let _ = write!(
            o,
            "<td class=\"num\">{}</td></tr><tr><td>idle gaps</td>",
            g.busy_pct_points
                .map_or("-".into(), |p| format!("{p:+.2} points"))
        );
        for (side, s) in [("base", &g.base), ("new", &g.new)] {
            match s {
                Some(s) => super::checked(
                    o,
                    "td",
                    &format!("{side}_gaps"),
                    &dev,
                    s.gaps,
                    &s.gaps.to_string(),
                ),
                None => o.push_str("<td>-</td>"),
            }
        }
        let gaps = match (&g.base, &g.new) {
            (Some(b), Some(n)) => format!("{:+}", n.gaps as i64 - b.gaps as i64),
            _ => "-".into(),
        };
        let _ = write!(o, "<td class=\"num\">{gaps}</td></tr></tbody></table>");
    }
    o.push_str("</section>\n");
}

/// Per GPU and side a bar as long as its wall time (one scale for all): busy, then the idle
/// time waiting for the host, launched and not started, and unknown.
fn headline_bars(o: &mut String, d: &Diff) {
    let sides: Vec<(u32, &str, &DeviceSide)> = d
        .devices
        .iter()
        .flat_map(|g| {
            [("base", &g.base), ("new", &g.new)]
                .into_iter()
                .filter_map(move |(which, s)| s.as_ref().map(|s| (g.device, which, s)))
        })
        .collect();
    let max = sides.iter().map(|s| s.2.window_ns).max().unwrap_or(0);
    if sides.is_empty() || max == 0 {
        return;
    }
    let (w, left, row) = (640.0, 90.0, 18.0);
    let h = sides.len() as f64 * (row + 4.0) + 16.0;
    let _ = write!(
        o,
        "<svg class=\"chart headline-bars\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-label=\"wall time, busy and idle of both traces\">\
         <text x=\"{left}\" y=\"{}\" class=\"tick\">0</text>\
         <text x=\"{w}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{}</text>",
        h - 2.0,
        h - 2.0,
        escape(&fmt_ns(max))
    );
    let scale = (w - left) / max as f64;
    for (i, (dev, which, s)) in sides.iter().enumerate() {
        let y = i as f64 * (row + 4.0);
        let _ = write!(
            o,
            "<text x=\"2\" y=\"{:.1}\" class=\"tick\">GPU {dev} {which}</text>",
            y + row - 5.0
        );
        let parts = [
            ("busy", s.busy_ns, "busy"),
            (
                "host",
                s.idle_before_launch_ns.unwrap_or(0),
                "waiting for the host",
            ),
            (
                "queued",
                s.idle_after_launch_ns.unwrap_or(0),
                "launched, not started",
            ),
            // Without a split (no launch calls at all) the idle time is all unknown.
            (
                "unknown",
                s.idle_unknown_ns
                    .unwrap_or(if s.idle_before_launch_ns.is_none() {
                        s.idle_ns
                    } else {
                        0
                    }),
                "unknown",
            ),
        ];
        let mut x = left;
        for (class, ns, words) in parts {
            if ns == 0 {
                continue;
            }
            let bw = ns as f64 * scale;
            let _ = write!(
                o,
                "<rect class=\"{class}\" x=\"{x:.2}\" y=\"{y:.1}\" width=\"{bw:.2}\" \
                 height=\"{row}\"><title>GPU {dev} {which}: {words} {}</title></rect>",
                fmt_ns(ns)
            );
            x += bw;
        }
    }
    o.push_str(
        "</svg><p class=\"legend\"><span class=\"sw busy\"></span>busy \
         <span class=\"sw host\"></span>idle: waiting for the host \
         <span class=\"sw queued\"></span>idle: launched, not started \
         <span class=\"sw unknown\"></span>idle: unknown (no launch call)</p>",
    );
}

fn steps(o: &mut String, d: &Diff) {
    let Some(st) = &d.steps else { return };
    let _ = write!(o, "<h2>Steps (\"{}\")</h2>", escape(&st.matched));
    let mut t = Table::new(
        o,
        "stepdiff",
        &[
            ("", false),
            ("steps", true),
            ("min", true),
            ("median", true),
            ("max", true),
        ],
    );
    for (label, s) in [("base", &st.base), ("new", &st.new)] {
        match s {
            Some(s) => t.row(&[
                Cell::Text(label.into()),
                Cell::Int(s.count),
                s.duration_min_ns.map_or(Cell::Text("-".into()), Cell::Ns),
                s.duration_median_ns
                    .map_or(Cell::Text("-".into()), Cell::Ns),
                s.duration_max_ns.map_or(Cell::Text("-".into()), Cell::Ns),
            ]),
            None => t.row(&[Cell::Text(label.into()), Cell::Text("no steps".into())]),
        }
    }
    t.end();
}

fn names(o: &mut String, what: &str, rows: &[cutrace_analysis::diff::NameDiff]) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<h2>{} whose summed duration changed most</h2>",
        escape(what)
    );
    let mut t = Table::new(
        o,
        "namediff",
        &[
            ("name", false),
            ("calls (base)", true),
            ("calls (new)", true),
            ("total (base)", true),
            ("total (new)", true),
            ("Δ total", true),
            ("Δ mean", true),
        ],
    );
    for n in rows {
        let side = |s: Option<&cutrace_analysis::diff::NameSide>,
                    f: fn(&cutrace_analysis::diff::NameSide) -> u64,
                    ns: bool| {
            match s {
                Some(s) if ns => Cell::Ns(f(s)),
                Some(s) => Cell::Int(f(s)),
                None => Cell::Text("-".into()),
            }
        };
        let change = n.total_change_ns;
        t.row(&[
            Cell::Name(n.name.clone()),
            side(n.base.as_ref(), |s| s.count, false),
            side(n.new.as_ref(), |s| s.count, false),
            side(n.base.as_ref(), |s| s.total_ns, true),
            side(n.new.as_ref(), |s| s.total_ns, true),
            Cell::Raw(change as f64, super::signed_change(change)),
            n.mean_change_pct.map_or(Cell::Text("-".into()), |p| {
                Cell::Raw(p, format!("{p:+.1} %"))
            }),
        ]);
    }
    t.end();
}
