//! The PC-sample part of `cutrace report`'s text (`cutrace profile --pc-sampling` traces): per
//! function, its samples, the stall reasons that hold them and its hottest source lines, and
//! what CUPTI counted that the trace does not hold.

use std::fmt::Write;

use cutrace_analysis::pc::{is_eligible, FunctionStalls, PcReport, ReasonShare};
use cutrace_analysis::Report;
use cutrace_trace::PcSamplingInfo;

/// "long_scoreboard 97.1 %, selected 1.2 %, …"
fn reasons(v: &[ReasonShare], n: usize) -> String {
    let shown: Vec<String> = v
        .iter()
        .take(n)
        .map(|r| format!("{} {:.1} %", r.reason, r.pct))
        .collect();
    shown.join(", ")
}

/// What the samples say in words: stalled on X, or mostly issuing.
fn verdict(f: &FunctionStalls) -> String {
    let eligible = cutrace_analysis::summary::pct(f.samples_eligible, f.samples);
    match f.reasons.iter().find(|r| !is_eligible(&r.reason)) {
        _ if eligible >= 50.0 => format!("mostly issuing ({eligible:.1} % selected or eligible)"),
        Some(r) => format!("stalled mostly on {} ({:.1} %)", r.reason, r.pct),
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
        "\nWhere kernels stall (PC sampling, whole trace: PC samples carry no time): {} samples in {} functions",
        pc.samples, pc.function_count
    );
    if let Some(c) = &pc.collection {
        let period = c
            .sampling_period
            .map_or("CUPTI's default period".to_string(), |n| {
                format!("a sample every 2^{n} cycles per SM")
            });
        let _ = writeln!(
            o,
            "  {} mode, {period}; CUPTI counted {} samples, {} in kernels it gives no PCs for; lost: {}",
            if c.collection_mode.is_empty() { "unknown" } else { &c.collection_mode },
            c.samples_total,
            c.samples_non_user,
            loss_line(c)
        );
        if let Some(e) = &c.error {
            let _ = writeln!(o, "  {}", super::escape_controls(e));
        }
    }
    if pc.samples == 0 {
        let _ = writeln!(o, "  no samples: no kernel ran while sampling was on");
        return;
    }
    let _ = writeln!(o, "  all functions: {}", reasons(&pc.reasons, 6));
    for f in pc.functions.iter().take(top) {
        let what = if f.is_kernel {
            "kernel"
        } else {
            "device function"
        };
        let _ = writeln!(
            o,
            "  {} ({what}): {} samples, {:.1} % of all; {}",
            super::escape_controls(&f.name),
            f.samples,
            f.pct,
            verdict(f)
        );
        let _ = writeln!(o, "    reasons: {}", reasons(&f.reasons, 5));
        if f.pcs_with_line == 0 {
            let _ = writeln!(
                o,
                "    source lines: unavailable ({} PCs; build with nvcc -lineinfo to map them)",
                f.pcs
            );
        }
        for l in &f.lines {
            let _ = writeln!(
                o,
                "    {}:{}  {:.1} %  {}",
                super::escape_controls(&l.file),
                l.line,
                l.pct,
                reasons(&l.reasons, 3)
            );
        }
    }
    if pc.functions.len() < pc.function_count as usize {
        let _ = writeln!(
            o,
            "  … {} more functions (--top N shows more)",
            pc.function_count as usize - pc.functions.len()
        );
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
    for c in d.reasons.iter().take(6) {
        let _ = writeln!(
            o,
            "    {:<20} {:>8} {:>8}  {}",
            c.reason,
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
            super::escape_controls(&f.name),
            samples(f.base_samples),
            samples(f.new_samples)
        );
        for c in f.reasons.iter().take(3) {
            let _ = writeln!(
                o,
                "    {:<20} {:>8} {:>8}  {}",
                c.reason,
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
