//! The diff page: what [`cutrace_analysis::diff`] says (caveats, per-GPU changes, steps, the
//! kernel and API names that changed most), then the two traces' reports side by side.

use std::fmt::Write as _;

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
pub fn page(base: &PageSide<'_>, new: &PageSide<'_>, d: &Diff) -> String {
    let (base_title, new_title) = (base.title, new.title);
    let mut o = String::with_capacity(128 * 1024);
    page_start(&mut o, &format!("cutrace diff: {base_title} → {new_title}"));
    let _ = write!(
        o,
        "<h1>cutrace diff</h1><p class=\"facts\">base: {} · new: {}</p>",
        escape(base_title),
        escape(new_title)
    );
    caveats(&mut o, d);
    devices(&mut o, d);
    steps(&mut o, d);
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

fn devices(o: &mut String, d: &Diff) {
    o.push_str(
        "<h2>GPUs</h2><table class=\"devices\"><thead><tr><th>GPU</th><th>busy (base)</th>\
         <th>busy (new)</th><th>Δ points</th><th>idle gaps (base)</th><th>idle gaps (new)</th>\
         <th>busy time (base)</th><th>busy time (new)</th></tr></thead><tbody>",
    );
    for g in &d.devices {
        let _ = write!(o, "<tr><td>GPU {}</td>", g.device);
        for (side, s) in [("base", &g.base), ("new", &g.new)] {
            match s {
                Some(s) => super::checked(
                    o,
                    "td",
                    &format!("{side}_busy_pct"),
                    &format!(" data-device=\"{}\"", g.device),
                    s.busy_pct,
                    &pct(s.busy_pct),
                ),
                None => o.push_str("<td>-</td>"),
            }
        }
        let _ = write!(
            o,
            "<td class=\"num\">{}</td>",
            g.busy_pct_points.map_or("-".into(), |p| format!("{p:+.2}"))
        );
        for (side, s) in [("base", &g.base), ("new", &g.new)] {
            match s {
                Some(s) => super::checked(
                    o,
                    "td",
                    &format!("{side}_gaps"),
                    &format!(" data-device=\"{}\"", g.device),
                    s.gaps,
                    &s.gaps.to_string(),
                ),
                None => o.push_str("<td>-</td>"),
            }
        }
        for s in [&g.base, &g.new] {
            let _ = write!(
                o,
                "<td class=\"num\">{}</td>",
                s.as_ref().map_or("-".into(), |s| fmt_ns(s.busy_ns))
            );
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>\n");
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
        let sign = if change < 0 { "−" } else { "+" };
        t.row(&[
            Cell::Name(n.name.clone()),
            side(n.base.as_ref(), |s| s.count, false),
            side(n.new.as_ref(), |s| s.count, false),
            side(n.base.as_ref(), |s| s.total_ns, true),
            side(n.new.as_ref(), |s| s.total_ns, true),
            Cell::Raw(
                change as f64,
                format!("{sign}{}", fmt_ns(change.unsigned_abs())),
            ),
            n.mean_change_pct.map_or(Cell::Text("-".into()), |p| {
                Cell::Raw(p, format!("{p:+.1} %"))
            }),
        ]);
    }
    t.end();
}
