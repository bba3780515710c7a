//! The text of `cutrace report` and `cutrace diff` over a distributed job: a
//! `cutrace_analysis::JobReport` (and `JobDiff`) as a person reads them.

use std::fmt::Write as _;

use cutrace_analysis::job_diff::Pair;
use cutrace_analysis::{JobDiff, JobReport};

use super::{count, escape_from, fmt_ns, short_name};

fn opt_ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), fmt_ns)
}

/// Writes the job report; `top` bounds the steps and collectives listed.
pub fn render(o: &mut String, inputs: &str, j: &JobReport, top: usize) {
    let from = o.len();
    let _ = writeln!(o, "cutrace report: {inputs} (distributed job)");
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
            d.reason
        );
    }
    let _ = writeln!(o, "clocks: {}", j.clock.note);
    for n in &j.notes {
        let _ = writeln!(o, "note: {n}");
    }
    let _ = writeln!(
        o,
        "\nPer rank (sums over each rank's GPUs; busy = union of all kernels, comm = union of NCCL \
         kernels,\nexposed = NCCL time with no compute kernel on that GPU, wait = summed time it \
         waited at collectives for the last rank)"
    );
    let _ = writeln!(
        o,
        "  {:>5} {:>14} {:>6} {:>14} {:>14} {:>7} {:>14} {:>14} {:>14}",
        "rank", "busy", "busy%", "comm", "exposed", "hidden", "wait", "idle", "step p50"
    );
    for r in &j.ranks {
        let hidden = r
            .hidden_comm_pct
            .map_or_else(|| "-".into(), |p| format!("{p:.1}%"));
        let _ = writeln!(
            o,
            "  {:>5} {:>14} {:>5.1}% {:>14} {:>14} {:>7} {:>14} {:>14} {:>14}{}",
            r.rank,
            fmt_ns(r.busy_ns),
            r.busy_pct,
            fmt_ns(r.comm_ns),
            fmt_ns(r.exposed_comm_ns),
            hidden,
            fmt_ns(r.wait_ns),
            fmt_ns(r.idle_ns),
            opt_ns(r.step_median_ns),
            if r.complete { "" } else { "  (incomplete)" }
        );
    }
    if let Some(r) = j
        .ranks
        .iter()
        .max_by_key(|r| (r.wait_ns, std::cmp::Reverse(r.rank)))
    {
        let least = j.ranks.iter().min_by_key(|r| (r.wait_ns, r.rank));
        if let Some(l) = least.filter(|l| l.rank != r.rank) {
            let _ = writeln!(
                o,
                "  most waiting: rank {} ({}); least: rank {} ({}), the likely straggler at \
                 collectives",
                r.rank,
                fmt_ns(r.wait_ns),
                l.rank,
                fmt_ns(l.wait_ns)
            );
        }
    }
    if !j.steps.steps.is_empty() {
        let _ = writeln!(
            o,
            "\nSteps ({}, matched by {} on each rank; {} shown of {})",
            j.steps.matched,
            if j.steps.matched_by == "number" {
                "their #N"
            } else {
                "order"
            },
            j.steps.steps.len().min(top),
            j.steps.steps.len()
        );
        let _ = writeln!(
            o,
            "  {:>5} {:<24} {:>5} {:>14} {:>8} {:>14} {:>14}",
            "step", "name", "ranks", "slowest", "rank", "fastest", "spread"
        );
        let mut by_spread: Vec<_> = j.steps.steps.iter().collect();
        by_spread.sort_by_key(|s| (std::cmp::Reverse(s.spread_ns), s.index));
        by_spread.truncate(top);
        by_spread.sort_by_key(|s| s.index);
        for s in by_spread {
            let _ = writeln!(
                o,
                "  {:>5} {:<24} {:>5} {:>14} {:>8} {:>14} {:>14}",
                s.index,
                short_name(&s.name, 24),
                s.ranks,
                fmt_ns(s.slowest_ns),
                s.slowest_rank,
                fmt_ns(s.fastest_ns),
                fmt_ns(s.spread_ns)
            );
        }
    }
    let c = &j.collectives;
    let _ = writeln!(
        o,
        "\nCollectives: {} matched across ranks ({} on fewer ranks than their group), {} on one \
         rank only",
        c.matched, c.partial, c.unmatched
    );
    if c.matched > 0 {
        let _ = writeln!(
            o,
            "  arrival skew (last rank's kernel start − first's): median {}, max {}, total {}",
            opt_ns(c.skew_median_ns),
            opt_ns(c.skew_max_ns),
            fmt_ns(c.skew_total_ns)
        );
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
    escape_from(o, from);
}

fn pair_row(o: &mut String, label: &str, p: &Pair) {
    let delta = p.delta.map_or_else(
        || "-".into(),
        |d| match d {
            d if d < 0 => format!("-{}", fmt_ns(d.unsigned_abs())),
            d => format!("+{}", fmt_ns(d as u64)),
        },
    );
    let _ = writeln!(
        o,
        "  {label:<22} {:>14} {:>14}  {delta}",
        opt_ns(p.base),
        opt_ns(p.new)
    );
}

/// Writes the job diff.
pub fn render_diff(o: &mut String, base: &str, new: &str, d: &JobDiff) {
    let from = o.len();
    let _ = writeln!(
        o,
        "cutrace diff (distributed jobs)\nbase: {base}\nnew:  {new}"
    );
    for c in &d.caveats {
        let _ = writeln!(o, "caveat: {c}");
    }
    let _ = writeln!(o, "\n  {:<22} {:>14} {:>14}  Δ", "", "base", "new");
    pair_row(o, "skew max", &d.skew_max_ns);
    pair_row(o, "skew median", &d.skew_median_ns);
    pair_row(o, "skew total", &d.skew_total_ns);
    pair_row(o, "slowest step", &d.slowest_step_ns);
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
