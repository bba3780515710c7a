//! The text of `cutrace report --critical-path`: per step, the path's length and what it was
//! made of; for the slowest step (or the window without steps), the segments to shorten first
//! and the slack of the large work off the path.

use std::fmt::Write as _;

use cutrace_analysis::critical_path::{CriticalPath, Kind, PathReport, Place};
use cutrace_analysis::Report;

use super::{label, num, table, Changes, Style};

/// Writes the critical-path section of `r`, if it has one.
pub fn render(o: &mut String, r: &Report, top: usize, st: &Style) {
    let Some(cp) = &r.critical_path else {
        return;
    };
    let _ = writeln!(
        o,
        "\nCritical path: the chain of dependent work (host ops, launches, GPU work, waits) whose \
         length is the step's time"
    );
    if !cp.steps.is_empty() {
        steps_table(o, cp, top, st);
    }
    let slowest = cp.slowest_step();
    let (what, path) = match (slowest, &cp.window) {
        (Some(s), _) => (
            format!("the slowest step, {} ({})", s.name, st.ns(s.path.length_ns)),
            &s.path,
        ),
        (None, Some(w)) => (format!("the window ({})", st.ns(w.length_ns)), w),
        (None, None) => {
            let _ = writeln!(o, "  (no record in the window)");
            return;
        }
    };
    let _ = writeln!(o, "\n  In {what}:");
    composition(o, path, st);
    segments(o, path, top, st);
    slack(o, path, top, st);
    inferred(o, cp);
}

fn steps_table(o: &mut String, cp: &CriticalPath, top: usize, st: &Style) {
    let shown: Vec<_> = cp.steps.iter().take(top.max(1) * 2).collect();
    let col = st.col(shown.iter().map(|s| s.path.length_ns));
    let heads = [
        format!("length ({})", col.unit),
        "host".to_owned(),
        "compute".to_owned(),
        "comm".to_owned(),
        "copy".to_owned(),
        "launch".to_owned(),
        "sync".to_owned(),
        "wait".to_owned(),
        "unexplained".to_owned(),
    ];
    let mut cols = vec![label("step")];
    cols.extend(heads.iter().map(|h| num(h)));
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|s| {
            let p = &s.path;
            let c = &p.composition;
            let mut r = vec![s.index.to_string(), col.num(p.length_ns)];
            r.extend(
                [
                    c.host_ns,
                    c.compute_ns,
                    c.communication_ns,
                    c.copy_ns,
                    c.launch_ns,
                    c.sync_ns,
                    c.stream_wait_ns + c.rank_wait_ns.unwrap_or(0),
                    c.unexplained_ns,
                ]
                .map(|v| pct(v, p.length_ns)),
            );
            r
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|s| s.name.clone()).collect();
    let _ = writeln!(o, "  Per step (shares of the path, %):");
    table(o, st, &cols, &rows, Some(("name", &names)));
    if cp.steps.len() > shown.len() {
        let _ = writeln!(
            o,
            "  … and {} more steps (the JSON has every one)",
            cp.steps.len() - shown.len()
        );
    }
}

fn pct(v: u64, of: u64) -> String {
    if of == 0 {
        return "-".to_owned();
    }
    format!("{:.1}", v as f64 * 100.0 / of as f64)
}

fn composition(o: &mut String, p: &PathReport, st: &Style) {
    let c = &p.composition;
    let mut parts: Vec<(u64, String)> = vec![
        (c.host_ns, "host".to_owned()),
        (c.compute_ns, "GPU compute".to_owned()),
        (c.communication_ns, "communication".to_owned()),
        (c.copy_ns, "copies".to_owned()),
        (c.launch_ns, "launch gaps".to_owned()),
        (c.sync_ns, "sync returns".to_owned()),
        (c.stream_wait_ns, "stream waits".to_owned()),
        (c.unexplained_ns, "no recorded cause".to_owned()),
    ];
    parts.retain(|p| p.0 > 0);
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let text: Vec<String> = parts
        .iter()
        .map(|(v, what)| format!("{what} {} ({} %)", st.ns(*v), pct(*v, p.length_ns)))
        .collect();
    // A job's rank waits are inside the parts (the later rank's work fills them).
    let waited = match c.rank_wait_ns.filter(|&w| w > 0) {
        Some(w) => format!(
            "; of all that, {} ({} %) was ranks on the path waiting at collectives for a later rank",
            st.ns(w),
            pct(w, p.length_ns)
        ),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "{}",
        super::fit(&format!("    made of: {}{waited}", text.join(", ")))
    );
    if !c.host_ops.is_empty() {
        let ops: Vec<String> = c
            .host_ops
            .iter()
            .take(5)
            .map(|op| format!("{} {}", st.name(&op.name), st.ns(op.ns)))
            .collect();
        let _ = writeln!(
            o,
            "{}",
            super::fit(&format!("    host time by op: {}", ops.join(", ")))
        );
    }
}

/// Where a segment ran, in words: `GPU 0 stream 7`, `thread 12 (pid 4)`, `rank 3 GPU 0 stream 7`.
pub(crate) fn place(p: &Place) -> String {
    let mut s = String::new();
    if let Some(r) = p.rank {
        let _ = write!(s, "rank {r} ");
    }
    match (p.device, p.stream, p.thread) {
        (Some(d), Some(x), _) => {
            let _ = write!(s, "GPU {d} stream {x}");
        }
        (_, _, Some(t)) => {
            let _ = write!(s, "thread {t}");
        }
        _ => {}
    }
    if let (Some(pid), None) = (p.pid, p.rank) {
        let _ = write!(s, " (pid {pid})");
    }
    s.trim().to_owned()
}

fn kind(k: Kind) -> &'static str {
    k.label()
}

fn segments(o: &mut String, p: &PathReport, top: usize, st: &Style) {
    if p.longest_segments.is_empty() {
        return;
    }
    let shown = &p.longest_segments[..p.longest_segments.len().min(top)];
    let col = st.col(shown.iter().map(|s| s.length_ns));
    let head = format!("length ({})", col.unit);
    let cols = [num(&head), label("kind"), label("at"), label("where")];
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|s| {
            vec![
                col.num(s.length_ns),
                kind(s.kind).to_owned(),
                st.at(s.start_ns),
                place(&s.place),
            ]
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|s| s.name.clone()).collect();
    let _ = writeln!(o, "  The segments to shorten first:");
    table(o, st, &cols, &rows, Some(("what", &names)));
}

fn slack(o: &mut String, p: &PathReport, top: usize, st: &Style) {
    if p.slack.is_empty() {
        return;
    }
    let shown = &p.slack[..p.slack.len().min(top)];
    let col = st.col(shown.iter().flat_map(|s| [s.duration_ns, s.slack_ns]));
    let (h1, h2) = (
        format!("duration ({})", col.unit),
        format!("slack ({})", col.unit),
    );
    let cols = [num(&h1), num(&h2), label("at"), label("where")];
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|s| {
            vec![
                col.num(s.duration_ns),
                col.num(s.slack_ns),
                st.at(s.start_ns),
                place(&s.place),
            ]
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|s| s.name.clone()).collect();
    let _ = writeln!(
        o,
        "  Large work off the path, and how much longer each could run before the path would lengthen:"
    );
    table(o, st, &cols, &rows, Some(("name", &names)));
}

fn inferred(o: &mut String, cp: &CriticalPath) {
    for line in provenance(cp) {
        let _ = writeln!(o, "{}", super::fit(&format!("  {line}")));
    }
}

/// What the graph inferred and what it took from the trace's records, a sentence each (none
/// when nothing was inferred or recorded; parts that count nothing left out): the text and the
/// page say the same.
pub(crate) fn provenance(cp: &CriticalPath) -> Vec<String> {
    provenance_of(&cp.inferred, &cp.recorded)
}

/// [`provenance`] of a job's path (summed over its ranks' step graphs).
pub(crate) fn job_provenance(cp: &cutrace_analysis::job_path::JobCriticalPath) -> Vec<String> {
    provenance_of(&cp.inferred, &cp.recorded)
}

fn provenance_of(
    i: &cutrace_analysis::critical_path::Inferred,
    r: &cutrace_analysis::critical_path::Recorded,
) -> Vec<String> {
    let mut said: Vec<String> = Vec::new();
    if i.stream_waits > 0 {
        let n = i.stream_waits;
        let mut part = format!(
            "{} tied to inferred work, as the trace does not name the cudaEventRecord call (the \
             work launched last on the event's stream before the wait where the record names \
             that stream, else the work {} thread launched last on another stream before its \
             last cudaEventRecord)",
            count(n, "stream wait", "stream waits"),
            pl(n, "its", "their"),
        );
        let k = i.waited_for_nothing;
        if k > 0 {
            let who = of_them(k, n, "waits", "wait");
            let _ = write!(
                part,
                ", and {who} for nothing: nothing had been launched on the event's stream before \
                 the wait"
            );
        }
        let k = i.stream_waits_ambiguous;
        if k > 0 {
            let who = of_them(k, n, "is", "are");
            let _ = write!(
                part,
                "; {who} ambiguous: the thread had also launched on a third stream since its \
                 previous cudaEventRecord, where the event may have been recorded instead"
            );
        }
        said.push(part);
    }
    if i.stream_waits_not_followed > 0 {
        said.push(format!(
            "{} not followed: the trace does not say which stream waited, or which work the \
             event stood for",
            count(i.stream_waits_not_followed, "stream wait", "stream waits")
        ));
    }
    if i.event_syncs > 0 {
        said.push(format!(
            "{} taken to wait for the last work on the event's stream to end before {} returned \
             (the trace does not name the cudaEventRecord call)",
            count(
                i.event_syncs,
                "event synchronization",
                "event synchronizations"
            ),
            pl(i.event_syncs, "it", "they")
        ));
    }
    if i.syncs_without_stream > 0 {
        said.push(format!(
            "{} with no stream recorded, taken to wait for {} process's last GPU work",
            count(
                i.syncs_without_stream,
                "synchronization",
                "synchronizations"
            ),
            pl(i.syncs_without_stream, "its", "their")
        ));
    }
    if i.gpu_ops_without_launch > 0 {
        let n = i.gpu_ops_without_launch;
        said.push(format!(
            "{} without {} launch call ({} start has no recorded cause)",
            count(n, "GPU operation", "GPU operations"),
            pl(n, "its", "their"),
            pl(n, "its", "their")
        ));
    }
    if i.inverted_edges > 0 {
        let n = i.inverted_edges;
        said.push(format!(
            "{} not followed: {} cause ends after {} effect starts (host and GPU clocks disagree)",
            count(n, "dependency", "dependencies"),
            pl(n, "its", "their"),
            pl(n, "its", "their")
        ));
    }
    let mut out = Vec::new();
    if !said.is_empty() {
        out.push(format!("Inferred: {}.", said.join("; ")));
    }

    let n = r.stream_waits + r.event_syncs;
    if n > 0 {
        let mut what = Vec::new();
        if r.stream_waits > 0 {
            what.push(count(r.stream_waits, "stream wait", "stream waits"));
        }
        if r.event_syncs > 0 {
            what.push(count(
                r.event_syncs,
                "event synchronization",
                "event synchronizations",
            ));
        }
        let mut line = format!(
            "From the trace's records: {} {} for the work {} record names (the event's stream and \
             its cudaEventRecord call)",
            what.join(" and "),
            pl(n, "waits", "wait"),
            pl(n, "its", "their")
        );
        let k = r.waited_for_nothing;
        if k > 0 {
            let who = of_them(k, n, "waits", "wait");
            let _ = write!(
                line,
                "; {who} for nothing: nothing had been launched on the event's stream before the \
                 event was recorded"
            );
        }
        line.push('.');
        out.push(line);
    }
    out
}

/// `n` and the noun, singular for one.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", pl(n, one, many))
}

/// `one` for 1, else `many`.
/// `k` of `n` things, with its verb: `it waits` (one of one), `all of them wait` (all of
/// several), `2 of them wait`.
fn of_them(k: u64, n: u64, one: &str, many: &str) -> String {
    match (k == n, n) {
        (true, 1) => format!("it {one}"),
        (true, _) => format!("all of them {many}"),
        _ => format!("{k} of them {}", pl(k, one, many)),
    }
}

fn pl<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// The job's critical path: per step its length and the ranks it waited for; for the slowest
/// step, what it was made of and the segments to shorten first.
pub fn render_job(
    o: &mut String,
    cp: &cutrace_analysis::job_path::JobCriticalPath,
    top: usize,
    wide: bool,
) {
    // Points in time from the earliest step's start (each rank's own clock).
    let st = Style {
        wide,
        origin_ns: cp.steps.iter().map(|s| s.start_ns).min(),
        ..Style::default()
    };
    let _ = writeln!(
        o,
        "\nCritical path across the ranks: each step's chain of dependent work, from the rank whose \
         step ended last; at a collective another rank reached later, it goes on along that rank"
    );
    if !cp.ranks_left_out.is_empty() {
        let ranks: Vec<String> = cp.ranks_left_out.iter().map(u32::to_string).collect();
        let _ = writeln!(
            o,
            "  Left out: rank {} (read from a rank summary, which carries no path: report its trace \
             to include it).",
            ranks.join(", ")
        );
    }
    if cp.steps.is_empty() {
        let _ = writeln!(o, "  (no step found on the ranks)");
        return;
    }
    let col = st.col(cp.steps.iter().map(|s| s.length_ns));
    let head = format!("length ({})", col.unit);
    let cols = [
        label("step"),
        num(&head),
        num("ends on rank"),
        label("waited for"),
    ];
    let rows: Vec<Vec<String>> = cp
        .steps
        .iter()
        .map(|s| {
            let waits: Vec<String> = s
                .rank_waits
                .iter()
                .map(|w| {
                    format!(
                        "rank {} ({}, {})",
                        w.waited_for_rank,
                        w.op,
                        st.ns(w.wait_ns)
                    )
                })
                .collect();
            vec![
                s.index.to_string(),
                col.num(s.length_ns),
                s.end_rank.to_string(),
                if waits.is_empty() {
                    "-".to_owned()
                } else {
                    waits.join(", ")
                },
            ]
        })
        .collect();
    let names: Vec<String> = cp.steps.iter().map(|s| s.name.clone()).collect();
    table(o, &st, &cols, &rows, Some(("name", &names)));
    let Some(slow) = cp.slowest_step() else {
        return;
    };
    let _ = writeln!(
        o,
        "\n  In the slowest step, {} ({}):",
        slow.name,
        st.ns(slow.length_ns)
    );
    for w in &slow.rank_waits {
        let _ = writeln!(
            o,
            "    rank {} waited {} in {} for rank {}",
            w.rank,
            st.ns(w.wait_ns),
            w.op,
            w.waited_for_rank
        );
    }
    let path = cutrace_analysis::critical_path::PathReport {
        start_ns: slow.start_ns,
        end_ns: slow.end_ns,
        length_ns: slow.length_ns,
        segments: slow.segments,
        composition: slow.composition.clone(),
        longest_segments: slow.longest_segments.clone(),
        slack: Vec::new(),
        thread_handoffs: 0,
        by_what: Vec::new(),
        runs: Vec::new(),
    };
    composition(o, &path, &st);
    segments(o, &path, top, &st);
    for line in job_provenance(cp) {
        let _ = writeln!(o, "{}", super::fit(&format!("  {line}")));
    }
}

/// `cutrace diff --critical-path`: how the path's length and composition changed, and the work
/// on it whose time changed most.
pub fn render_diff(o: &mut String, d: &cutrace_analysis::critical_path::PathDiff, wide: bool) {
    let st = Style {
        wide,
        ..Style::default()
    };
    let over = match d.over {
        "steps" => format!(
            "summed over the steps' paths ({} steps → {})",
            d.steps_base, d.steps_new
        ),
        _ => "over the window".to_owned(),
    };
    let _ = writeln!(o, "\nCritical path, {over}:");
    if let Some(l) = d.parts.iter().find(|p| p.part == "length") {
        if d.over == "steps" && d.steps_base != d.steps_new {
            let _ = writeln!(
                o,
                "  The step counts differ: per step the path is {} in the base and {} in the new \
                 trace (means); the sums below add every step.",
                st.ns(l.base_ns / d.steps_base.max(1)),
                st.ns(l.new_ns / d.steps_new.max(1))
            );
        }
    }
    let ch = Changes::new(
        &st,
        d.parts.iter().map(|p| (p.base_ns, p.new_ns, p.delta_ns)),
        false,
    );
    let mut cols = vec![label("part")];
    cols.extend(ch.columns());
    let rows: Vec<Vec<String>> = d
        .parts
        .iter()
        .filter(|p| p.part == "length" || p.base_ns > 0 || p.new_ns > 0)
        .map(|p| {
            let mut r = vec![p.part.replace('_', " ")];
            r.extend(ch.cells(p.base_ns, p.new_ns, p.delta_ns));
            r
        })
        .collect();
    table(o, &st, &cols, &rows, None);
    if d.changed.is_empty() {
        return;
    }
    let ch = Changes::new(
        &st,
        d.changed.iter().map(|c| (c.base_ns, c.new_ns, c.delta_ns)),
        false,
    );
    let mut cols = Vec::from(ch.columns());
    cols.push(label("kind"));
    let rows: Vec<Vec<String>> = d
        .changed
        .iter()
        .map(|c| {
            let mut r = Vec::from(ch.cells(c.base_ns, c.new_ns, c.delta_ns));
            r.push(c.kind.label().to_owned());
            r
        })
        .collect();
    let names: Vec<String> = d.changed.iter().map(|c| c.name.clone()).collect();
    let _ = writeln!(o, "  What changed most on the path:");
    table(o, &st, &cols, &rows, Some(("what", &names)));
}

#[cfg(test)]
mod tests {
    use cutrace_analysis::critical_path::{CriticalPath, Inferred, Recorded};

    use super::provenance;

    fn said(inferred: Inferred, recorded: Recorded) -> Vec<String> {
        provenance(&CriticalPath {
            inferred,
            recorded,
            window: None,
            steps: Vec::new(),
        })
    }

    #[test]
    fn provenance_says_one_in_the_singular_and_leaves_out_what_counts_nothing() {
        assert!(said(Inferred::default(), Recorded::default()).is_empty());
        let one = said(
            Inferred {
                stream_waits: 1,
                waited_for_nothing: 1,
                stream_waits_not_followed: 1,
                stream_waits_ambiguous: 1,
                event_syncs: 1,
                syncs_without_stream: 1,
                gpu_ops_without_launch: 1,
                inverted_edges: 1,
            },
            Recorded {
                stream_waits: 1,
                event_syncs: 0,
                waited_for_nothing: 1,
            },
        );
        assert_eq!(one.len(), 2);
        for part in [
            "Inferred: 1 stream wait tied to inferred work",
            "else the work its thread launched last",
            "and it waits for nothing: nothing had been launched on the event's stream before the \
             wait; it is ambiguous: the thread had also launched on a third stream",
            "; 1 stream wait not followed: ",
            "; 1 event synchronization taken to wait for the last work on the event's stream to end \
             before it returned",
            "; 1 synchronization with no stream recorded, taken to wait for its process's",
            "; 1 GPU operation without its launch call (its start",
            "; 1 dependency not followed: its cause ends after its effect starts",
        ] {
            assert!(one[0].contains(part), "{part:?} in {:?}", one[0]);
        }
        assert_eq!(
            one[1],
            "From the trace's records: 1 stream wait waits for the work its record names (the \
             event's stream and its cudaEventRecord call); it waits for nothing: nothing had been \
             launched on the event's stream before the event was recorded."
        );
        let many = said(
            Inferred {
                stream_waits_not_followed: 14,
                ..Inferred::default()
            },
            Recorded {
                stream_waits: 20,
                event_syncs: 1,
                waited_for_nothing: 14,
            },
        );
        assert_eq!(
            many,
            [
                "Inferred: 14 stream waits not followed: the trace does not say which stream \
                 waited, or which work the event stood for.",
                "From the trace's records: 20 stream waits and 1 event synchronization wait for \
                 the work their record names (the event's stream and its cudaEventRecord call); \
                 14 of them wait for nothing: nothing had been launched on the event's stream \
                 before the event was recorded.",
            ]
        );
        // Zero parts are left out; every one waited for nothing.
        let all = said(
            Inferred::default(),
            Recorded {
                stream_waits: 0,
                event_syncs: 2,
                waited_for_nothing: 2,
            },
        );
        assert_eq!(
            all,
            ["From the trace's records: 2 event synchronizations wait for the work their record \
              names (the event's stream and its cudaEventRecord call); all of them wait for \
              nothing: nothing had been launched on the event's stream before the event was \
              recorded."]
        );
    }
}
