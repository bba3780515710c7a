//! The PM-sample part of `cutrace report`'s text (`cutrace sample` traces): the layered answer
//! per GPU, over the window, the idle gaps and each step, and what sampling lost.

use std::fmt::Write;

use cutrace_analysis::fmt_ns;
use cutrace_analysis::pm::{Layers, PmReport};
use cutrace_analysis::Report;

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".to_string(), |v| format!("{v:.1} %"))
}

/// "kernels running 97.0 % of the window, GPU active …, SMs active …, tensor pipes …, DRAM …"
/// (a layer not sampled is left out of the sentence; one sampled but with no sample in the span
/// reads n/a).
pub fn layers_sentence(l: &Layers, of: &str, pm: &PmReport) -> String {
    let mut s = format!("kernels running {:.1} % of {of}", l.kernels_running_pct);
    let sampled = |name: &str| pm.metrics.iter().any(|m| m.name == name);
    for (name, word, v) in [
        (
            cutrace_analysis::pm::GPU_ACTIVE,
            "GPU active",
            l.gpu_active_pct,
        ),
        (
            cutrace_analysis::pm::SM_ACTIVE,
            "SMs active",
            l.sm_active_pct,
        ),
        (
            cutrace_analysis::pm::TENSOR_ACTIVE,
            "tensor pipes",
            l.tensor_active_pct,
        ),
        (
            cutrace_analysis::pm::DRAM_THROUGHPUT,
            "DRAM",
            l.dram_throughput_pct,
        ),
    ] {
        if sampled(name) {
            let _ = write!(s, ", {word} {}", pct(v));
        }
    }
    if l.sampled_pct < 99.0 {
        let _ = write!(s, " (samples cover {:.1} % of it)", l.sampled_pct);
    }
    s
}

/// The data-loss line of PM sampling, shown under the trace's own.
pub fn loss_line(pm: &PmReport) -> String {
    let mut facts = vec![format!(
        "{} first sample(s) dropped as outliers (as CUPTI advises)",
        pm.first_samples_dropped
    )];
    if pm.overflows > 0 || pm.samples_lost > 0 {
        facts.push(format!(
            "{} hardware-buffer overflow(s), about {} samples lost in gaps",
            pm.overflows, pm.samples_lost
        ));
    }
    if pm.samples_dropped_queue > 0 {
        facts.push(format!(
            "{} samples dropped by the recorder (queue full)",
            pm.samples_dropped_queue
        ));
    }
    if pm.values_unavailable > 0 {
        facts.push(format!(
            "{} values unavailable (not evaluated; left out, not 0)",
            pm.values_unavailable
        ));
    }
    if let Some(e) = &pm.error {
        facts.push(e.clone());
    }
    format!("PM samples: {} kept; {}", pm.samples, facts.join("; "))
}

pub fn render(o: &mut String, r: &Report) {
    let Some(pm) = &r.pm_samples else { return };
    let _ = writeln!(
        o,
        "\nPM samples (cutrace sample: device-wide counters every {}, {} samples)",
        fmt_ns(pm.interval_ns),
        pm.samples
    );
    if !pm.left_out.is_empty() {
        let _ = writeln!(
            o,
            "  not on this GPU, so not sampled: {}",
            pm.left_out.join(", ")
        );
    }
    for d in &pm.devices {
        let Some(w) = &d.window else {
            let _ = writeln!(
                o,
                "GPU {}: {} samples, no timed kernel",
                d.device, d.samples
            );
            continue;
        };
        let _ = writeln!(
            o,
            "GPU {}: {}",
            d.device,
            layers_sentence(w, "the window", pm)
        );
        if let Some(g) = &d.idle_gaps {
            let _ = writeln!(
                o,
                "  idle gaps ({}): {}",
                fmt_ns(g.span_ns),
                layers_sentence(g, "them", pm)
            );
        }
        for s in &d.steps {
            let _ = writeln!(
                o,
                "  step {} {} ({}): {}",
                s.index,
                super::short_name(&s.name, 40),
                fmt_ns(s.layers.span_ns),
                layers_sentence(&s.layers, "the step", pm)
            );
        }
        let _ = writeln!(o, "  every metric over the window:");
        for (m, v) in pm.metrics.iter().zip(&w.values) {
            let how = match m.aggregation {
                cutrace_analysis::counters::Aggregation::Sum => "sum",
                cutrace_analysis::counters::Aggregation::DurationWeightedMean => "mean",
            };
            let v = v.map_or("n/a".to_string(), |v| format!("{v:.6}"));
            let _ = writeln!(o, "    {:<72} {v:>18} ({how})", m.name);
        }
    }
}
