//! The PC-sample part of `cutrace report`'s text (`cutrace profile --pc-sampling` traces): per
//! function, its samples, the stall reasons that hold them and its hottest source lines, and
//! what CUPTI counted that the trace does not hold.

use std::fmt::Write;

use cutrace_analysis::pc::{is_eligible, FunctionStalls, PcReport, ReasonShare};
use cutrace_analysis::Report;
use cutrace_trace::PcSamplingInfo;

/// The widest name shown in this section; longer names keep their start and their
/// distinguishing tail (`super::short_name`).
const NAME_WIDTH: usize = 72;

/// What each warp state means, in a line (after Nsight Compute's Profiling Guide, "Warp Stall
/// Reasons"); shown under the section for the states it lists.
const GLOSSES: &[(&str, &str)] = &[
    (
        "barrier",
        "waiting at a block-wide barrier (__syncthreads) for the block's other warps",
    ),
    (
        "branch_resolving",
        "waiting for a branch target or the branch mask to be computed",
    ),
    (
        "dispatch_stall",
        "picked, but the dispatcher could not issue (a pipeline conflict)",
    ),
    (
        "drain",
        "waiting for memory stores to drain before the warp exits",
    ),
    ("imc_miss", "waiting for an immediate-constant cache miss"),
    (
        "lg_throttle",
        "the local/global memory instruction queue is full",
    ),
    (
        "long_scoreboard",
        "waiting for L1TEX data: a global, local, texture or surface load",
    ),
    (
        "math_pipe_throttle",
        "the math pipe this instruction needs is busy",
    ),
    ("membar", "waiting at a memory barrier"),
    (
        "mio_throttle",
        "the memory input/output queue is full (shared memory, special math)",
    ),
    ("misc", "other"),
    (
        "no_instructions",
        "no instruction fetched yet (instruction cache miss, after a jump)",
    ),
    (
        "not_selected",
        "eligible, but the scheduler issued another warp's instruction: not a stall",
    ),
    ("selected", "issued an instruction: not a stall"),
    (
        "short_scoreboard",
        "waiting for an MIO result: shared memory, special functions",
    ),
    ("sleeping", "all threads asleep, yielded or blocked"),
    ("tex_throttle", "the texture unit queue is full"),
    ("wait", "a fixed-latency dependency between instructions"),
    (
        "warpgroup_arrive",
        "waiting at a warpgroup arrive barrier (wgmma)",
    ),
];

/// "long_scoreboard 97.1 %, selected 1.2 %, …", leaving out shares that round to 0.0 %.
fn reasons(v: &[ReasonShare], n: usize) -> String {
    let shown: Vec<String> = v
        .iter()
        .filter(|r| r.pct >= 0.05)
        .take(n)
        .map(|r| format!("{} {:.1} %", super::escape_controls(&r.reason), r.pct))
        .collect();
    shown.join(", ")
}

/// What the samples say in words: bound by issue, or the top stall (a majority or not).
fn verdict(f: &FunctionStalls) -> String {
    let eligible = cutrace_analysis::summary::pct(f.samples_eligible, f.samples);
    let share = |name: &str| {
        f.reasons
            .iter()
            .find(|r| r.reason == name)
            .map_or(0.0, |r| r.pct)
    };
    match f.reasons.iter().find(|r| !is_eligible(&r.reason)) {
        _ if eligible >= 50.0 => format!(
            "issue-bound: {eligible:.1} % eligible (selected {:.1} %, not_selected {:.1} %)",
            share("selected"),
            share("not_selected")
        ),
        Some(r) if r.pct >= 50.0 => format!("stalled mostly on {} ({:.1} %)", r.reason, r.pct),
        Some(r) => format!("top stall: {} ({:.1} %)", r.reason, r.pct),
        None => "no stall sampled".to_string(),
    }
}

/// The loss line: what CUPTI counted that the rows do not hold, "none" when nothing.
pub fn loss_line(c: &PcSamplingInfo) -> String {
    let mut facts = Vec::new();
    if c.samples_dropped > 0 {
        facts.push(format!(
            "{} samples dropped by the hardware (buffer full: a larger --pc-interval N samples less often)",
            c.samples_dropped
        ));
    }
    if c.hardware_buffer_full > 0 {
        facts.push(format!(
            "{} reads found the hardware buffer full",
            c.hardware_buffer_full
        ));
    }
    if c.pcs_lost > 0 {
        facts.push(format!("{} PC records lost (past the buffers)", c.pcs_lost));
    }
    if c.rows_dropped_queue > 0 {
        facts.push(format!(
            "{} rows dropped (recorder queue full)",
            c.rows_dropped_queue
        ));
    }
    if c.records_odd > 0 {
        facts.push(format!(
            "{} odd fields in PC records (kept, counted)",
            c.records_odd
        ));
    }
    if c.cubins_not_kept > 0 {
        facts.push(format!(
            "{} modules not kept for source lines (past 512 MiB of cubins)",
            c.cubins_not_kept
        ));
    }
    if facts.is_empty() {
        "none".to_string()
    } else {
        facts.join("; ")
    }
}

pub fn render(o: &mut String, r: &Report, top: usize) {
    let Some(pc) = &r.pc_samples else { return };
    render_pc(o, pc, top);
}

fn render_pc(o: &mut String, pc: &PcReport, top: usize) {
    let _ = writeln!(
        o,
        "\nWhere kernels stall (PC sampling; PC samples carry no time: the whole trace)"
    );
    let _ = writeln!(
        o,
        "  {} samples in {} functions",
        pc.samples, pc.function_count
    );
    if let Some(c) = &pc.collection {
        let period = c.sampling_period.map_or(
            "CUPTI's default period (which it does not report)".to_string(),
            |n| format!("a sample every 2^{n} cycles per SM"),
        );
        let mode = if c.collection_mode.is_empty() {
            "unknown"
        } else {
            &c.collection_mode
        };
        let _ = writeln!(o, "  {mode} mode, {period}");
        let _ = writeln!(
            o,
            "  CUPTI counted {} samples, {} ({:.1} %) in kernels CUPTI does not expose",
            c.samples_total,
            c.samples_non_user,
            cutrace_analysis::summary::pct(c.samples_non_user, c.samples_total)
        );
        let _ = writeln!(o, "  lost: {}", loss_line(c));
        if let Some(e) = &c.error {
            let _ = writeln!(o, "  {}", super::escape_controls(e));
        }
    }
    if pc.samples == 0 {
        let _ = writeln!(o, "  no samples: no kernel ran while sampling was on");
        return;
    }
    let hot: Vec<_> = pc.lines.iter().filter(|l| l.pct >= 0.05).take(5).collect();
    if !hot.is_empty() {
        let _ = writeln!(o, "  hottest source lines (% of all samples):");
        for l in hot {
            let _ = writeln!(
                o,
                "    {:>5.1} %  {}:{}  {}  {}",
                l.pct,
                super::escape_controls(&l.file),
                l.line,
                super::short_name(&super::escape_controls(&l.function), 40),
                reasons(&l.reasons, 2)
            );
        }
    }
    let _ = writeln!(o, "  all functions: {}", reasons(&pc.reasons, 5));
    for f in pc.functions.iter().take(top) {
        render_function(o, f);
    }
    if pc.functions.len() < pc.function_count as usize {
        let _ = writeln!(
            o,
            "  … {} more functions (--top N shows more)",
            pc.function_count as usize - pc.functions.len()
        );
    }
    render_glosses(o, pc);
}

fn render_function(o: &mut String, f: &FunctionStalls) {
    let what = if f.is_kernel {
        "kernel"
    } else {
        "device function"
    };
    let _ = writeln!(
        o,
        "  {} ({what}): {} samples, {:.1} % of all",
        super::short_name(&super::escape_controls(&f.name), NAME_WIDTH),
        f.samples,
        f.pct
    );
    let _ = writeln!(
        o,
        "    {}; nothing issued in {:.1} % of its sampled cycles",
        verdict(f),
        cutrace_analysis::summary::pct(f.samples_not_issued, f.samples)
    );
    let _ = writeln!(o, "    reasons: {}", reasons(&f.reasons, 5));
    if f.pcs_with_line == 0 {
        let _ = writeln!(
            o,
            "    source lines: unavailable ({} PCs; build with nvcc -lineinfo to map them)",
            f.pcs
        );
    } else if f.pcs_with_line < f.pcs {
        let _ = writeln!(
            o,
            "    source lines: {} of {} PCs mapped",
            f.pcs_with_line, f.pcs
        );
    }
    for l in f.lines.iter().filter(|l| l.pct >= 0.05) {
        let _ = writeln!(
            o,
            "    {:>5.1} % of it  {}:{}  {}",
            l.pct,
            super::escape_controls(&l.file),
            l.line,
            reasons(&l.reasons, 3)
        );
    }
}

/// One line per warp state the section names.
fn render_glosses(o: &mut String, pc: &PcReport) {
    let named: Vec<&(&str, &str)> = GLOSSES
        .iter()
        .filter(|(r, _)| {
            pc.reasons.iter().take(5).any(|x| x.reason == *r)
                || pc.functions.iter().any(|f| {
                    f.reasons
                        .iter()
                        .take(5)
                        .any(|x| x.reason == *r && x.pct >= 0.05)
                })
        })
        .collect();
    if named.is_empty() {
        return;
    }
    let _ = writeln!(o, "  warp states (CUPTI's names):");
    for (r, g) in named {
        let _ = writeln!(o, "    {r:<18} {g}");
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1} %"))
}

fn change(c: &cutrace_analysis::pc::ReasonChange) -> String {
    // Rounded first, so that a change below 0.05 reads +0.0, never -0.0.
    c.pct_points.map_or_else(
        || "-".into(),
        |p| format!("{:+.1} points", (p * 10.0).round() / 10.0 + 0.0),
    )
}

/// `cutrace diff`'s PC-sample part: the stall mix over every function, then per function,
/// those whose mix moved most first.
pub fn render_diff(o: &mut String, d: &cutrace_analysis::pc::PcDiff) {
    let _ = writeln!(
        o,
        "\nStall reasons (PC sampling, whole traces): {} samples → {} samples",
        d.base_samples, d.new_samples
    );
    let _ = writeln!(
        o,
        "    {:<20} {:>8} {:>8}  change",
        "warp state", "base", "new"
    );
    for c in d.reasons.iter().take(6) {
        let _ = writeln!(
            o,
            "    {:<20} {:>8} {:>8}  {}",
            super::escape_controls(&c.reason),
            pct(c.base_pct),
            pct(c.new_pct),
            change(c)
        );
    }
    for f in &d.functions {
        let samples = |s: Option<u64>| s.map_or("absent".to_string(), |n| format!("{n} samples"));
        let _ = writeln!(
            o,
            "  {}: {} → {}",
            super::short_name(&super::escape_controls(&f.name), NAME_WIDTH),
            samples(f.base_samples),
            samples(f.new_samples)
        );
        for c in f.reasons.iter().take(3) {
            let _ = writeln!(
                o,
                "    {:<20} {:>8} {:>8}  {}",
                super::escape_controls(&c.reason),
                pct(c.base_pct),
                pct(c.new_pct),
                change(c)
            );
        }
    }
    if d.functions.len() < d.function_count as usize {
        let _ = writeln!(
            o,
            "  … {} more functions (--top N shows more)",
            d.function_count as usize - d.functions.len()
        );
    }
}
