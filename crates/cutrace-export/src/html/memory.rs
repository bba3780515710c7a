//! The memory-over-time plot of the report page, drawn beside the busy timeline: per pool of the
//! report (allocator, process, CPU or GPU and device), the replay's live bytes as a step line
//! over the report's time span, and torch's `Total Reserved` where the events report it. A pool
//! of a million events is drawn from at most [`BUCKETS`] points: each the highest value of its
//! slice of time, so the line's highest point is the report's `peak.bytes` exactly (marked, with
//! `data-check="memory_peak_bytes"`, for the tests).

use std::fmt::Write as _;

use cutrace_analysis::memory::{memory_series, PoolSeries};
use cutrace_analysis::{Report, Window};
use cutrace_trace::{MemoryPlace, Ns, Trace};

use super::{checked, escape};
use crate::text::memory::fmt_bytes;

/// Points per drawn line.
pub const BUCKETS: usize = 1024;

/// One pool's line, ready to draw: (offset from the span's start, bytes), each the highest of
/// its bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPlot {
    pub label: String,
    pub live: Vec<(Ns, u64)>,
    pub reserved: Vec<(Ns, u64)>,
}

/// Every pool's plot over one span of the trace clock, [lo, hi).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlots {
    pub lo: Ns,
    pub hi: Ns,
    /// In the report's pool order.
    pub pools: Vec<PoolPlot>,
}

/// The plots of `trace`'s pools inside `window` (the report's): the state entering the window
/// counts, as in the report's peak.
pub fn memory_plots(trace: &Trace, window: Option<&Window>) -> MemoryPlots {
    let (lo, hi) = match (window, trace.bounds_ns()) {
        (Some(w), Some((a, b))) => (w.from_ns.max(a), w.to_ns.min(b.saturating_add(1))),
        (None, Some((a, b))) => (a, b.saturating_add(1)),
        (_, None) => (0, 1),
    };
    let pools = memory_series(trace)
        .iter()
        .map(|p| PoolPlot {
            label: label(p),
            live: buckets(p, lo, hi, |x| Some(x.live_bytes)),
            reserved: buckets(p, lo, hi, |x| x.total_reserved),
        })
        .collect();
    MemoryPlots { lo, hi, pools }
}

fn label(p: &PoolSeries) -> String {
    let place = match p.place {
        MemoryPlace::Gpu => format!("GPU {}", p.device),
        MemoryPlace::Cpu => "CPU".into(),
        MemoryPlace::Other(n) => format!("device type {n} #{}", p.device),
    };
    format!("{place}, pid {}", p.pid)
}

/// The highest value of each of [`BUCKETS`] slices of [lo, hi), from the points inside it and
/// the value holding as it begins.
fn buckets(
    p: &PoolSeries,
    lo: Ns,
    hi: Ns,
    value: impl Fn(&cutrace_analysis::memory::SeriesPoint) -> Option<u64>,
) -> Vec<(Ns, u64)> {
    let span = hi.saturating_sub(lo).max(1);
    let mut out: Vec<(Ns, u64)> = Vec::new();
    let mut entering = None;
    for x in &p.points {
        let Some(v) = value(x) else { continue };
        if x.at_ns < lo {
            entering = Some(v);
            continue;
        }
        if x.at_ns >= hi {
            break;
        }
        let b = ((u128::from(x.at_ns - lo) * BUCKETS as u128) / u128::from(span)) as u64;
        let at = lo + (u128::from(b) * u128::from(span) / BUCKETS as u128) as u64 - lo;
        match out.last_mut() {
            Some(last) if last.0 == at => last.1 = last.1.max(v),
            _ => out.push((at, v)),
        }
    }
    // As in the report: what was live as the window began counts once the window has events.
    if let Some(v) = entering.filter(|&v| v > 0 && !out.is_empty()) {
        match out.first_mut() {
            Some(first) if first.0 == 0 => first.1 = first.1.max(v),
            _ => out.insert(0, (0, v)),
        }
    }
    out
}

/// The section: one plot per pool with events in the span.
pub fn section(o: &mut String, r: &Report, plots: &MemoryPlots) {
    let Some(m) = &r.memory else {
        return;
    };
    if m.pools.is_empty() {
        return;
    }
    o.push_str(
        "<h2>Memory over time</h2><p class=\"muted\">Live bytes of each allocator as the trace \
         replays its allocations and frees (the line: each pixel the highest of its time); \
         dashed: the allocator's reserved bytes, where reported.</p><div class=\"charts\">",
    );
    for (i, (pool, plot)) in m.pools.iter().zip(&plots.pools).enumerate() {
        let _ = write!(
            o,
            "<figure><figcaption>{} ({} allocator)</figcaption>",
            escape(&plot.label),
            pool.level
        );
        draw(o, (plots.lo, plots.hi), plot);
        match &pool.peak {
            Some(k) => {
                o.push_str("<figcaption>peak ");
                checked(
                    o,
                    "span",
                    "memory_peak_bytes",
                    &format!(" data-pool=\"{i}\""),
                    k.bytes,
                    &fmt_bytes(k.bytes),
                );
                let _ = write!(
                    o,
                    " at +{}</figcaption>",
                    escape(&cutrace_analysis::fmt_ns(k.at_offset_ns))
                );
            }
            None => o.push_str("<figcaption>no allocation of known size</figcaption>"),
        }
        o.push_str("</figure>");
    }
    o.push_str("</div>\n");
}

fn draw(o: &mut String, (lo, hi): (Ns, Ns), p: &PoolPlot) {
    let (w, h, left, bottom) = (640.0, 160.0, 4.0, 14.0);
    let max = p
        .live
        .iter()
        .chain(&p.reserved)
        .map(|x| x.1)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let span = hi.saturating_sub(lo).max(1) as f64;
    let x = |at: Ns| left + at as f64 / span * (w - 2.0 * left);
    let y = |v: u64| h - bottom - v as f64 / max * (h - bottom - 8.0);
    let _ = write!(
        o,
        "<svg class=\"chart memory\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"memory\">\
         <line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" class=\"axis\"/>\
         <text x=\"2\" y=\"10\" class=\"tick\">{2}</text>",
        h - bottom,
        w - left,
        escape(&format!("max {}", fmt_bytes(max as u64)))
    );
    for (class, line) in [("reserved", &p.reserved), ("live", &p.live)] {
        if line.is_empty() {
            continue;
        }
        let mut d = String::new();
        let mut prev: Option<f64> = None;
        for &(at, v) in line.iter() {
            let (px, py) = (x(at), y(v));
            match prev {
                None => {
                    let _ = write!(d, "M{px:.2},{py:.2}");
                }
                Some(_) => {
                    let _ = write!(d, "H{px:.2}V{py:.2}");
                }
            }
            prev = Some(py);
        }
        let _ = write!(d, "H{:.2}", w - left);
        let _ = write!(o, "<path class=\"mem {class}\" d=\"{d}\"/>");
    }
    if let Some(&(at, v)) = p.live.iter().max_by_key(|x| (x.1, std::cmp::Reverse(x.0))) {
        let _ = write!(
            o,
            "<circle class=\"dot\" cx=\"{:.2}\" cy=\"{:.2}\" r=\"3\"><title>{}</title></circle>",
            x(at),
            y(v),
            escape(&format!("peak {}", fmt_bytes(v)))
        );
    }
    o.push_str("</svg>");
}
