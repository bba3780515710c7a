//! The text of `cutrace diff JOB_A JOB_B --critical-path`: how the critical path across the
//! ranks changed, summed over the paired steps and step by step, which ranks it waited for,
//! and the work on it (by kind, name and rank) whose time changed most.

use std::fmt::Write as _;

use cutrace_analysis::critical_path::PartChange;
use cutrace_analysis::job_path::RankWait;
use cutrace_analysis::job_path_diff::{JobPathDiff, StepPathChange};

use super::{escape_from, label, num, table, Changes, Style};

/// How a part is named in the text.
fn part_label(part: &str) -> &str {
    match part {
        "stream_wait" => "stream wait",
        "rank_wait" => "rank wait",
        p => p,
    }
}

/// Writes the section; `top` bounds the steps listed (twice it) and the tables.
pub fn render(o: &mut String, d: &JobPathDiff, top: usize, wide: bool) {
    let from = o.len();
    let st = Style {
        wide,
        ..Style::default()
    };
    let by = if d.steps_matched_by == "number" {
        "paired by their #N"
    } else {
        "paired by order"
    };
    let _ = writeln!(
        o,
        "\nCritical path across the ranks: {} {by} ({} in base, {} in new)",
        super::count(d.steps_matched as usize, "step", "steps"),
        d.steps_base,
        d.steps_new
    );
    for (side, left) in [
        ("base", &d.ranks_left_out_base),
        ("new", &d.ranks_left_out_new),
    ] {
        if !left.is_empty() {
            let ranks: Vec<String> = left.iter().map(u32::to_string).collect();
            let _ = writeln!(
                o,
                "  Left out of the {side} job's paths: rank {} (read from a rank summary, which \
                 carries no path)",
                ranks.join(", ")
            );
        }
    }
    if d.steps.is_empty() {
        let _ = writeln!(
            o,
            "  (no step to pair: the path is per step, and a job without steps has none)"
        );
        escape_from(o, from);
        return;
    }
    parts(o, d, &st);
    steps(o, d, top, &st);
    waited_for(o, d, &st);
    changed(o, d, &st);
    escape_from(o, from);
}

fn parts(o: &mut String, d: &JobPathDiff, st: &Style) {
    let ch = Changes::new(
        st,
        d.parts.iter().map(|p| (p.base_ns, p.new_ns, p.delta_ns)),
        true,
    );
    let mut cols = vec![label("summed over the paired steps")];
    cols.extend(ch.columns());
    let rows: Vec<Vec<String>> = d
        .parts
        .iter()
        .filter(|p| p.part == "length" || p.base_ns > 0 || p.new_ns > 0)
        .map(|p| {
            let name = match p.part {
                "length" => "path length".to_owned(),
                "rank_wait" => "rank wait (within the parts above)".to_owned(),
                part => format!("  {}", part_label(part)),
            };
            let mut r = vec![name];
            r.extend(ch.cells(p.base_ns, p.new_ns, p.delta_ns));
            r
        })
        .collect();
    table(o, st, &cols, &rows, None);
}

/// The two parts (not the length) whose time changed most in a step: `stream wait -1.234`.
fn most_changed(parts: &[PartChange], ch: &Changes) -> String {
    let mut p: Vec<&PartChange> = parts
        .iter()
        .filter(|p| p.part != "length" && p.delta_ns != 0)
        .collect();
    p.sort_by_key(|p| std::cmp::Reverse(p.delta_ns.unsigned_abs()));
    let said: Vec<String> = p
        .iter()
        .take(2)
        .map(|p| format!("{} {}", part_label(p.part), ch.change(p.delta_ns)))
        .collect();
    if said.is_empty() {
        "-".to_owned()
    } else {
        said.join(", ")
    }
}

fn step_name(s: &StepPathChange) -> String {
    if s.name_base == s.name_new {
        s.name_base.clone()
    } else {
        format!("{} / {}", s.name_base, s.name_new)
    }
}

/// The steps shown: every one up to twice `top`, else those whose path length changed most,
/// in step order.
fn shown(d: &JobPathDiff, top: usize) -> Vec<&StepPathChange> {
    let mut shown: Vec<(usize, &StepPathChange)> = d.steps.iter().enumerate().collect();
    let keep = top.max(1) * 2;
    if shown.len() > keep {
        shown.sort_by_key(|(i, s)| (std::cmp::Reverse(s.parts[0].delta_ns.unsigned_abs()), *i));
        shown.truncate(keep);
        shown.sort_by_key(|(i, _)| *i);
    }
    shown.into_iter().map(|(_, s)| s).collect()
}

fn steps(o: &mut String, d: &JobPathDiff, top: usize, st: &Style) {
    let shown = shown(d, top);
    let lengths = shown.iter().map(|s| &s.parts[0]);
    let ch = Changes::new(st, lengths.map(|l| (l.base_ns, l.new_ns, l.delta_ns)), true);
    let mut cols = Vec::from(ch.columns());
    cols.extend([label("ends on rank"), label("most changed")]);
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|s| {
            let l = &s.parts[0];
            let mut r = Vec::from(ch.cells(l.base_ns, l.new_ns, l.delta_ns));
            r.push(format!("{} → {}", s.end_rank_base, s.end_rank_new));
            r.push(most_changed(&s.parts, &ch));
            r
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|s| step_name(s)).collect();
    let _ = writeln!(o, "  Per step, the path's length:");
    table(o, st, &cols, &rows, Some(("step", &names)));
    if d.steps.len() > shown.len() {
        let _ = writeln!(
            o,
            "  … and {} more steps (the JSON has every one)",
            d.steps.len() - shown.len()
        );
    }
    let lines: Vec<String> = shown
        .iter()
        .filter(|s| !s.rank_waits_base.is_empty() || !s.rank_waits_new.is_empty())
        .map(|s| {
            let new = if s.rank_waits_new.is_empty() {
                "now for none".to_owned()
            } else {
                format!("now {}", waits(&s.rank_waits_new, st))
            };
            let base = if s.rank_waits_base.is_empty() {
                "the path waited for no other rank".to_owned()
            } else {
                format!("the path waited {}", waits(&s.rank_waits_base, st))
            };
            format!("    {}: {base}; {new}", step_name(s))
        })
        .collect();
    if !lines.is_empty() {
        let _ = writeln!(
            o,
            "  Where the path waited for a rank that reached a collective later:"
        );
        for l in lines {
            let _ = writeln!(o, "{l}");
        }
    }
}

/// One side's waits in a step, longest first: `1.604 ms for rank 0 in allreduce, …` (at most
/// three; the JSON has every one).
fn waits(w: &[RankWait], st: &Style) -> String {
    let mut w: Vec<&RankWait> = w.iter().collect();
    w.sort_by_key(|x| (std::cmp::Reverse(x.wait_ns), x.at_ns));
    let mut said: Vec<String> = w
        .iter()
        .take(3)
        .map(|x| {
            format!(
                "{} for rank {} in {}",
                st.ns(x.wait_ns),
                x.waited_for_rank,
                x.op
            )
        })
        .collect();
    if w.len() > 3 {
        said.push(format!("and {} more", w.len() - 3));
    }
    said.join(", ")
}

fn waited_for(o: &mut String, d: &JobPathDiff, st: &Style) {
    if d.waited_for.is_empty() {
        return;
    }
    let ch = Changes::new(
        st,
        d.waited_for
            .iter()
            .map(|w| (w.base_ns, w.new_ns, w.delta_ns)),
        true,
    );
    let mut cols = Vec::from(ch.columns());
    cols.extend([num("steps"), num("for rank")]);
    let rows: Vec<Vec<String>> = d
        .waited_for
        .iter()
        .map(|w| {
            let mut r = Vec::from(ch.cells(w.base_ns, w.new_ns, w.delta_ns));
            r.push(format!("{} → {}", w.steps_base, w.steps_new));
            r.push(w.waited_for_rank.to_string());
            r
        })
        .collect();
    let names: Vec<String> = d.waited_for.iter().map(|w| w.op.clone()).collect();
    let _ = writeln!(
        o,
        "  The ranks the path waited for, summed over the paired steps, largest change first:"
    );
    table(o, st, &cols, &rows, Some(("at", &names)));
}

fn changed(o: &mut String, d: &JobPathDiff, st: &Style) {
    if d.changed.is_empty() {
        return;
    }
    let ch = Changes::new(
        st,
        d.changed.iter().map(|c| (c.base_ns, c.new_ns, c.delta_ns)),
        true,
    );
    let mut cols = Vec::from(ch.columns());
    cols.extend([label("kind"), num("rank")]);
    let rows: Vec<Vec<String>> = d
        .changed
        .iter()
        .map(|c| {
            let mut r = Vec::from(ch.cells(c.base_ns, c.new_ns, c.delta_ns));
            r.push(c.kind.label().to_owned());
            r.push(c.rank.map_or_else(|| "-".to_owned(), |r| r.to_string()));
            r
        })
        .collect();
    let names: Vec<String> = d.changed.iter().map(|c| c.name.clone()).collect();
    let _ = writeln!(
        o,
        "  What changed most on the path, summed over the paired steps (by kind, name and rank):"
    );
    table(o, st, &cols, &rows, Some(("what", &names)));
}
