//! The first lines of `cutrace report`'s text: the verdict per GPU ([`cutrace_analysis::verdict`]),
//! in words and with one unit per figure chosen from its size.

use std::fmt::Write;

use cutrace_analysis::job_verdict::JobSummary;
use cutrace_analysis::verdict::{DeviceVerdict, Summary};
use cutrace_analysis::Report;
use cutrace_trace::Ns;

/// A duration for a sentence: ns below 1 µs, then µs, ms or s with three significant digits at
/// most (`648 µs`, `3.51 ms`, `12.3 s`).
pub fn short_ns(ns: Ns) -> String {
    let (v, unit) = match ns {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => (ns as f64 / 1e3, "µs"),
        1_000_000..=999_999_999 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// `2358 gaps (1658 shorter than 1 µs)`: the exact count, and how many are too short to be a
/// sign of fragmentation (said only when there are some).
pub fn gap_count(gaps: u64, under_1us: u64) -> String {
    let n = super::count(gaps as usize, "gap", "gaps");
    if under_1us == 0 {
        n
    } else {
        format!("{n} ({under_1us} shorter than 1 µs)")
    }
}

/// One GPU's verdict: "GPU 0: busy 77.7 % of 3.51 ms (compute 77.7 %, communication 0.0 %);
/// idle 22.3 % in 3 gaps, 99.2 % of it waiting for the host: 2 gaps of 124 µs–648 µs hold 99.0 % of it".
pub fn device_line(d: &DeviceVerdict) -> String {
    let mut s = format!(
        "GPU {}: busy {:.1} % of {} (compute {:.1} %, communication {:.1} %",
        d.device,
        d.busy_pct,
        short_ns(d.window_ns),
        d.compute_pct,
        d.communication_pct
    );
    if d.communication_ns > 0 {
        let _ = write!(
            s,
            ", {} of it exposed",
            short_ns(d.exposed_communication_ns)
        );
    }
    s.push(')');
    if d.copy_ns > 0 {
        // Copies run on the copy engines, beside the kernels: apart from busy, not in it.
        let _ = write!(s, "; copies {}", short_ns(d.copy_ns));
    }
    if d.idle_ns == 0 {
        s.push_str("; no idle time");
        return s;
    }
    let _ = write!(
        s,
        "; idle {:.1} % in {}",
        d.idle_pct,
        gap_count(d.gaps, d.gaps_under_1us)
    );
    if let Some(p) = d.idle_waiting_for_host_pct {
        let _ = write!(s, ", {p:.1} % of it waiting for the host");
    }
    if let Some(p) = d.idle_launch_unknown_pct {
        let _ = write!(
            s,
            ", {p:.1} % before kernels whose launch is not in the trace"
        );
    }
    match d.largest_gaps {
        0 => {}
        1 => {
            let _ = write!(
                s,
                ": 1 gap of {} holds {:.1} % of it",
                short_ns(d.largest_gaps_max_ns),
                d.largest_gaps_idle_pct
            );
        }
        n => {
            let (lo, hi) = (
                short_ns(d.largest_gaps_min_ns),
                short_ns(d.largest_gaps_max_ns),
            );
            let of = if lo == hi { lo } else { format!("{lo}–{hi}") };
            let _ = write!(
                s,
                ": {n} gaps of {of} hold {:.1} % of it",
                d.largest_gaps_idle_pct
            );
        }
    }
    s
}

/// The verdict lines: one per GPU, then the steps' median when there are steps.
pub fn render(o: &mut String, s: &Summary) {
    for d in &s.devices {
        let _ = writeln!(o, "{}", device_line(d));
    }
    if let Some(m) = s.step_median_ns {
        let loader = s.steps_dataloader_pct.map_or(String::new(), |p| {
            format!(", {p:.1} % of their time in enumerate(DataLoader) (fetching batches)")
        });
        let _ = writeln!(o, "steps: {}, median {}{loader}", s.steps, short_ns(m));
    }
    if let Some(l) = rules_line(s) {
        let _ = writeln!(o, "{l}");
    }
}

/// `communication kernels by rule: deepep (DeepEP) 12, nccl_dev_kernel (NCCL / RCCL) 3`: which
/// rule of the table made each kernel communication; `None` without communication kernels.
pub fn rules_line(s: &Summary) -> Option<String> {
    if s.communication_rules.is_empty() {
        return None;
    }
    let parts: Vec<String> = s
        .communication_rules
        .iter()
        .map(|r| format!("{} ({}) {}", r.rule, r.library, r.kernels))
        .collect();
    Some(format!(
        "communication kernels by rule (docs/REPORT.md, \"Communication kernels\"): {}",
        parts.join(", ")
    ))
}

/// The verdict's line on lost GPU records, before the GPUs' lines: a trace of launch calls whose
/// kernels are missing is not healthy, however its GPUs read. `None` when no launch lost them.
pub fn launch_loss_line(r: &Report) -> Option<String> {
    let l = &r.data_loss.launches;
    let lost = l.launches_without_gpu_records;
    if lost == 0 {
        return None;
    }
    let t = &r.trace;
    Some(if t.kernels + t.memcpys + t.memsets == 0 {
        format!(
            "NO GPU RECORDS: {} kernel launches and not one kernel or copy record; the \
             trace lost its GPU side (kernel activity not recorded, or dropped), so its GPU \
             time is unknown, not zero",
            l.kernel_launches
        )
    } else {
        format!(
            "GPU RECORDS LOST: {lost} of {} kernel launches have no kernel or copy record; \
             busy time and gaps leave their work out",
            l.kernel_launches
        )
    })
}

/// A part of a verdict line: words, or a number the tests read (`data-check` names the JSON
/// field, `data-value` holds its exact value).
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Num {
        check: &'static str,
        value: String,
        text: String,
    },
}

/// One line of the verdict; `alarm` lines say the job's figures leave something out.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictLine {
    pub alarm: bool,
    pub pieces: Vec<Piece>,
}

impl VerdictLine {
    /// The line as words.
    pub fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) | Piece::Num { text: t, .. } => t.as_str(),
            })
            .collect()
    }
}

/// Builds a verdict line piece by piece.
struct Line(Vec<Piece>);

impl Line {
    fn t(mut self, s: impl Into<String>) -> Self {
        self.0.push(Piece::Text(s.into()));
        self
    }
    fn pct(mut self, check: &'static str, v: f64) -> Self {
        self.0.push(Piece::Num {
            check,
            value: v.to_string(),
            text: format!("{v:.1} %"),
        });
        self
    }
    fn ns(mut self, check: &'static str, v: Ns) -> Self {
        self.0.push(Piece::Num {
            check,
            value: v.to_string(),
            text: short_ns(v),
        });
        self
    }
    fn int(mut self, check: &'static str, v: u64) -> Self {
        self.0.push(Piece::Num {
            check,
            value: v.to_string(),
            text: v.to_string(),
        });
        self
    }
    fn done(self, alarm: bool) -> VerdictLine {
        VerdictLine {
            alarm,
            pieces: self.0,
        }
    }
}

/// ` rank` or ` ranks` after a count.
pub fn ranks_word(n: u64) -> &'static str {
    if n == 1 {
        " rank"
    } else {
        " ranks"
    }
}

/// The job's first answer, from its `summary`: what is left out, the ranks' GPUs together, the
/// spread of busy between ranks, who waited at collectives (the straggler), the slowest rank per
/// step and the arrival skew. Every number is a field of `summary` (checks `summary.FIELD`).
pub fn job_verdict(s: &JobSummary) -> Vec<VerdictLine> {
    let mut out = Vec::new();
    if s.dead_ranks > 0 || s.missing_ranks > 0 {
        out.push(
            Line(Vec::new())
                .t("RANKS LEFT OUT: ")
                .int("summary.dead_ranks", s.dead_ranks)
                .t(" dead (no usable trace), ")
                .int("summary.missing_ranks", s.missing_ranks)
                .t(" missing (no trace): the job's figures are the other ranks'")
                .done(true),
        );
    }
    if s.ranks_lost_data > 0 {
        out.push(
            Line(Vec::new())
                .int("summary.ranks_lost_data", s.ranks_lost_data)
                .t(format!(
                    "{} lost data or {} incomplete: {} figures cover what was recorded",
                    ranks_word(s.ranks_lost_data),
                    if s.ranks_lost_data == 1 { "is" } else { "are" },
                    if s.ranks_lost_data == 1 {
                        "its"
                    } else {
                        "their"
                    },
                ))
                .done(true),
        );
    }
    let mut l = Line(Vec::new())
        .int("summary.ranks", s.ranks)
        .t(format!("{}: GPUs busy ", ranks_word(s.ranks)))
        .pct("summary.busy_pct", s.busy_pct)
        .t(" of their kernel windows (compute ")
        .pct("summary.compute_pct", s.compute_pct)
        .t(", communication ")
        .pct("summary.comm_pct", s.comm_pct);
    if s.comm_ns > 0 {
        l = l
            .t(", ")
            .ns("summary.exposed_comm_ns", s.exposed_comm_ns)
            .t(" of it exposed");
    }
    out.push(
        l.t("); idle ")
            .pct("summary.idle_pct", s.idle_pct)
            .done(false),
    );
    if let (Some(lo), Some(hi)) = (s.busy_pct_min, s.busy_pct_max) {
        if s.ranks > 1 {
            out.push(
                Line(Vec::new())
                    .t("busy by rank: ")
                    .pct("summary.busy_pct_min.pct", lo.pct)
                    .t(" (rank ")
                    .int("summary.busy_pct_min.rank", u64::from(lo.rank))
                    .t(") to ")
                    .pct("summary.busy_pct_max.pct", hi.pct)
                    .t(" (rank ")
                    .int("summary.busy_pct_max.rank", u64::from(hi.rank))
                    .t(")")
                    .done(false),
            );
        }
    }
    if let (Some(m), Some(x)) = (s.most_waiting, s.least_waiting) {
        out.push(
            Line(Vec::new())
                .t("waited at collectives: rank ")
                .int("summary.most_waiting.rank", u64::from(m.rank))
                .t(" the most (")
                .ns("summary.most_waiting.ns", m.ns)
                .t("), rank ")
                .int("summary.least_waiting.rank", u64::from(x.rank))
                .t(" the least (")
                .ns("summary.least_waiting.ns", x.ns)
                .t("): it arrived last, the likely straggler")
                .done(false),
        );
    }
    if let Some(r) = s.slowest_rank {
        let mut l = Line(Vec::new())
            .t("steps: ")
            .int("summary.steps", s.steps)
            .t(" matched across ranks; the slowest most often: rank ")
            .int("summary.slowest_rank.rank", u64::from(r.rank))
            .t(" (in ")
            .int("summary.slowest_rank.steps", r.steps)
            .t(format!(" of {})", s.steps));
        if let (Some(m), Some(x)) = (s.step_spread_median_ns, s.step_spread_max_ns) {
            l = l
                .t("; spread between ranks median ")
                .ns("summary.step_spread_median_ns", m)
                .t(", max ")
                .ns("summary.step_spread_max_ns", x);
        }
        out.push(l.done(false));
    }
    if s.collectives_matched > 0 {
        let mut l = Line(Vec::new())
            .t("collectives: ")
            .int("summary.collectives_matched", s.collectives_matched)
            .t(" matched across ranks");
        if let (Some(m), Some(x)) = (s.skew_median_ns, s.skew_max_ns) {
            l = l
                .t(", arrival skew median ")
                .ns("summary.skew_median_ns", m)
                .t(", max ")
                .ns("summary.skew_max_ns", x);
        }
        out.push(l.done(false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_one_unit_with_three_digits() {
        assert_eq!(short_ns(999), "999 ns");
        assert_eq!(short_ns(1_500), "1.50 µs");
        assert_eq!(short_ns(647_930), "648 µs");
        assert_eq!(short_ns(3_508_382), "3.51 ms");
        assert_eq!(short_ns(50_000_000), "50.0 ms");
        assert_eq!(short_ns(12_345_000_000), "12.3 s");
    }
}
