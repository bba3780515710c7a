//! The PM-sample part of `cutrace diff`'s text: per GPU, each layer of the report's layered
//! answer (kernels running, GPU, SMs, tensor pipes, DRAM) for the window and the idle gaps, on
//! both sides, and the change in percentage points.

use std::fmt::Write as _;

use cutrace_analysis::pm::{LayerChange, LayersDiff, PmDiff, PmSide};

use super::{count, fmt_ns};

fn side(s: Option<&PmSide>) -> String {
    match s {
        None => "no PM samples".into(),
        Some(s) => format!(
            "{} every {}, {} lost, {} values unavailable{}",
            count(s.samples as usize, "sample", "samples"),
            fmt_ns(s.interval_ns),
            s.samples_lost,
            s.values_unavailable,
            s.error
                .as_ref()
                .map_or(String::new(), |e| format!("; sampling failed: {e}"))
        ),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1} %"))
}

fn row(o: &mut String, label: &str, c: &LayerChange) {
    let change = c.change_points.map_or_else(
        || "-".into(),
        // Rounded first, so that a change below 0.05 reads +0.0, never -0.0.
        |p| format!("{:+.1} points", (p * 10.0).round() / 10.0 + 0.0),
    );
    let _ = writeln!(
        o,
        "    {label:<18} {:>10} {:>10}  {change}",
        pct(c.base),
        pct(c.new)
    );
}

fn layers(o: &mut String, title: &str, l: &LayersDiff) {
    let _ = writeln!(o, "  {title}");
    for (label, c) in l.rows() {
        row(o, label, c);
    }
}

pub fn render_diff(o: &mut String, d: &PmDiff) {
    let _ = writeln!(
        o,
        "\nPM samples (share of each side's own span; change = new − base in percentage points; \
         - where a side has no such span or no sample of the metric)\n  base: {}\n  new:  {}",
        side(d.base.as_ref()),
        side(d.new.as_ref())
    );
    for dev in &d.devices {
        let gpu = format!("  GPU {}", dev.device);
        let _ = writeln!(o, "{gpu:<23}{:>10} {:>10}", "base", "new");
        layers(
            o,
            "window (first kernel start to last kernel end)",
            &dev.window,
        );
        layers(o, "idle gaps of the window", &dev.idle_gaps);
    }
}
