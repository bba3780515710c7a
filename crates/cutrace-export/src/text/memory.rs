//! The memory section of `cutrace report`'s text: per pool its peak (when, in which step, what
//! was live and which host range made it), the allocator's own totals, what was still live at
//! the end, what could not be known, per-step churn; then the CUDA allocation calls' host time.
//! Values come from `cutrace_analysis::memory`; this only words them.

use std::fmt::Write as _;

use cutrace_analysis::memory::{LiveSet, MemoryPool, MemoryReport};
use cutrace_analysis::{Report, Steps};

use super::{fmt_ns, short_name};

/// `1,234,567`: an integer with its thousands marked, exact.
pub fn grouped(b: u64) -> String {
    let digits = b.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 16);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1,234,567 B`, exact, with a short figure beside it from a kilobyte up (`(1.2 MB)`).
pub fn fmt_bytes(b: u64) -> String {
    let mut out = grouped(b);
    out.push_str(" B");
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "kB"),
    ];
    if let Some(&(d, u)) = UNITS.iter().find(|(d, _)| b >= *d) {
        let _ = write!(out, " ({:.1} {u})", b as f64 / d as f64);
    }
    out
}

/// `in step 3 (ProfilerStep#4)`: the step's place in the list and its name.
fn step_text(steps: Option<&Steps>, step: Option<u64>) -> String {
    if steps.is_none_or(|s| s.steps.is_empty()) {
        return String::new();
    }
    let Some(i) = step else {
        return ", outside every step".into();
    };
    let name = steps
        .and_then(|st| st.steps.iter().find(|s| s.index == i))
        .map(|s| format!(" ({})", short_name(&s.name, 40)))
        .unwrap_or_default();
    format!(", in step {i}{name}")
}

/// Renders the section, when the report has one.
pub fn render(o: &mut String, r: &Report, top: usize) {
    let Some(m) = &r.memory else {
        return;
    };
    if !m.pools.is_empty() {
        let _ = writeln!(
            o,
            "\nmemory ({} events; each pool replayed in time order, ties in the trace's order; \
             offsets from the {} start; site = the innermost CPU op around the event on its \
             thread, else the innermost host range):",
            m.events,
            if r.window.is_some() {
                "window's"
            } else {
                "trace's"
            }
        );
    }
    for p in &m.pools {
        render_pool(o, p, r.steps.as_ref(), top);
    }
    render_cuda_pools(o, m, r.trace.first_ns);
    render_calls(o, m);
}

/// CUDA's memory pools (`cudaMallocAsync`): per pool what it held from the device and what its
/// blocks used, at the driver level's peak and at the end.
fn render_cuda_pools(o: &mut String, m: &MemoryReport, origin: Option<u64>) {
    if m.cuda_pools.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "
CUDA memory pools (cudaMallocAsync; reserved = what the pool holds from the device, \
         used = what its blocks use):"
    );
    let st = super::Style {
        origin_ns: origin,
        ..super::Style::default()
    };
    for p in &m.cuda_pools {
        let mut line = format!(
            "  GPU {}, pid {}, pool {:#x} ({}): {}, {}, {} allocated",
            p.device,
            p.pid,
            p.address,
            p.pool_type,
            super::count(p.allocs as usize, "allocation", "allocations"),
            super::count(p.frees as usize, "free", "frees"),
            fmt_bytes(p.alloc_bytes)
        );
        match p.trims {
            0 => {}
            1 => line.push_str(", trimmed once"),
            n => {
                let _ = write!(line, ", trimmed {n} times");
            }
        }
        let _ = writeln!(o, "{line}");
        for (what, s) in [
            ("at the driver's peak", &p.at_driver_peak),
            ("at the end", &p.at_end),
        ] {
            if let Some(s) = s {
                let _ = writeln!(
                    o,
                    "    {what} ({}): reserved {}, used {}, {} held but unused",
                    st.at(s.at_ns),
                    fmt_bytes(s.reserved_bytes),
                    fmt_bytes(s.used_bytes),
                    fmt_bytes(s.unused_bytes)
                );
            }
        }
    }
}

fn render_pool(o: &mut String, p: &MemoryPool, steps: Option<&Steps>, top: usize) {
    let place = match p.place {
        "gpu" => format!("GPU {}", p.device),
        "cpu" => "CPU".to_owned(),
        _ => format!("device type {} #{}", p.device_type.unwrap_or(0), p.device),
    };
    let _ = writeln!(
        o,
        "  {place}, pid {} ({} allocator): {}, {}; {} allocated, {} freed",
        p.pid,
        p.level,
        super::count(p.allocs as usize, "allocation", "allocations"),
        super::count(p.frees as usize, "free", "frees"),
        fmt_bytes(p.alloc_bytes),
        fmt_bytes(p.free_bytes)
    );
    match &p.peak {
        Some(k) => {
            let _ = writeln!(
                o,
                "    peak {} live at +{}{}",
                fmt_bytes(k.bytes),
                fmt_ns(k.at_offset_ns),
                step_text(steps, k.step)
            );
            render_live(o, "live at the peak", &k.live, top);
        }
        None => {
            let _ = writeln!(o, "    no allocation of known size: no peak");
        }
    }
    if let Some(rp) = &p.reported_peak {
        let held = match (rp.reserved_bytes, rp.reserved_minus_allocated_bytes) {
            (Some(res), Some(held)) => format!(
                "; reserved then {}, of which {} held but not allocated",
                fmt_bytes(res),
                fmt_bytes(held)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "    the allocator's own peak (Total Allocated, with memory allocated before the \
             trace): {} at +{}{}{held}",
            fmt_bytes(rp.allocated_bytes),
            fmt_ns(rp.at_offset_ns),
            step_text(steps, rp.step)
        );
    }
    render_live(
        o,
        "still live at the end (leaks, as far as the trace can tell)",
        &p.live_at_end,
        top,
    );
    let unknown = [
        (
            p.frees_without_alloc,
            format!(
                "frees of memory allocated before the trace ({})",
                fmt_bytes(p.frees_without_alloc_bytes)
            ),
        ),
        (p.allocs_unknown_size, "allocations of unknown size".into()),
        (
            p.unknown_events,
            "events neither allocation nor free".into(),
        ),
        (p.replaced_live, "allocations over a live one".into()),
        (p.free_size_mismatches, "frees of another size".into()),
    ];
    let said: Vec<String> = unknown
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !said.is_empty() {
        let _ = writeln!(o, "    counted, not guessed: {}", said.join("; "));
    }
    if !p.steps.is_empty() {
        let _ = writeln!(o, "    per step (step: allocations / frees, peak):");
        for s in &p.steps {
            let _ = writeln!(
                o,
                "      {:>5}: {} / {}, peak {}",
                s.step,
                s.allocs,
                s.frees,
                fmt_bytes(s.peak_bytes)
            );
        }
    }
}

fn render_live(o: &mut String, what: &str, l: &LiveSet, top: usize) {
    let bare = if l.unaddressed_bytes > 0 {
        format!(
            "; {} of it allocated without an address (the source gave sizes only)",
            fmt_bytes(l.unaddressed_bytes)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "    {what}: {}, {}{bare}",
        super::count(l.allocations as usize, "allocation", "allocations"),
        fmt_bytes(l.bytes)
    );
    for s in l.by_site.iter().take(top) {
        let _ = writeln!(
            o,
            "      {:>28}  {:>6}  {}",
            fmt_bytes(s.bytes),
            s.allocations,
            short_name(&s.site, 70)
        );
    }
    if let Some(a) = l.largest.first() {
        let _ = writeln!(
            o,
            "      largest: {} at {:#x}, in {}",
            a.bytes.map_or_else(|| "unknown size".into(), fmt_bytes),
            a.address,
            short_name(&a.site, 60)
        );
    }
}

fn render_calls(o: &mut String, m: &MemoryReport) {
    if m.api_churn.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nCUDA allocation calls (cudaMalloc*/cudaFree*/cuMemAlloc*/…; each can synchronize the \
         device; host time summed over calls):"
    );
    for c in &m.api_churn {
        let _ = writeln!(
            o,
            "  pid {} ({}): {} allocation calls, {} free calls, {} summed",
            c.pid,
            c.kind,
            c.alloc_calls,
            c.free_calls,
            fmt_ns(c.summed_host_ns)
        );
        if !c.steps.is_empty() {
            let per: Vec<String> = c
                .steps
                .iter()
                .map(|s| {
                    format!(
                        "{}: {}+{} ({})",
                        s.step,
                        s.alloc_calls,
                        s.free_calls,
                        fmt_ns(s.summed_host_ns)
                    )
                })
                .collect();
            let _ = writeln!(o, "    per step (alloc+free calls): {}", per.join(", "));
        }
    }
}

/// Per step, the highest peak of the GPU pools (any allocator, any process of the step's),
/// for the step table; empty when no GPU pool has steps.
pub fn gpu_step_peaks(m: Option<&MemoryReport>) -> std::collections::HashMap<u64, u64> {
    let mut out = std::collections::HashMap::new();
    for p in m.map_or(&[][..], |m| &m.pools[..]) {
        if p.place != "gpu" {
            continue;
        }
        for s in &p.steps {
            let e = out.entry(s.step).or_insert(0);
            *e = s.peak_bytes.max(*e);
        }
    }
    out
}

/// The memory part of `cutrace diff`'s text.
pub fn render_diff(o: &mut String, d: &cutrace_analysis::memory::MemoryDiff) {
    use cutrace_analysis::memory::PoolSide;
    let _ = writeln!(
        o,
        "\nMemory (base → new{}):",
        if d.pools.is_empty() {
            ""
        } else {
            "; a device's processes together, peaks the highest of them"
        }
    );
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), fmt_bytes);
    let signed = |v: Option<i64>| match v {
        Some(c) if c < 0 => format!(" (−{})", fmt_bytes(c.unsigned_abs())),
        Some(c) => format!(" (+{})", fmt_bytes(c as u64)),
        None => String::new(),
    };
    for p in &d.pools {
        let place = match p.place {
            "gpu" => format!("GPU {}", p.device),
            "cpu" => "CPU".to_owned(),
            _ => format!("device #{} (other type)", p.device),
        };
        let side = |s: Option<&PoolSide>, f: &dyn Fn(&PoolSide) -> String| {
            s.map_or_else(|| "absent".to_owned(), f)
        };
        let (b, n) = (p.base.as_ref(), p.new.as_ref());
        let peak = |s: &PoolSide| opt(s.peak_bytes);
        let reported = |s: &PoolSide| opt(s.reported_peak_bytes);
        let churn = |s: &PoolSide| {
            format!(
                "{} allocations, {} frees, median {} per step",
                s.allocs,
                s.frees,
                s.allocs_per_step_median
                    .map_or_else(|| "-".to_owned(), |m| m.to_string())
            )
        };
        let _ = writeln!(o, "  {place} ({} allocator):", p.level);
        let _ = writeln!(
            o,
            "    peak live      {} → {}{}",
            side(b, &peak),
            side(n, &peak),
            signed(p.peak_change_bytes)
        );
        if b.is_some_and(|s| s.reported_peak_bytes.is_some())
            || n.is_some_and(|s| s.reported_peak_bytes.is_some())
        {
            let _ = writeln!(
                o,
                "    allocator peak {} → {}{}",
                side(b, &reported),
                side(n, &reported),
                signed(p.reported_peak_change_bytes)
            );
        }
        let _ = writeln!(
            o,
            "    churn          {} → {}",
            side(b, &churn),
            side(n, &churn)
        );
    }
    let calls = |c: Option<&cutrace_analysis::memory::ChurnSide>| {
        c.map_or_else(
            || "none".to_owned(),
            |c| {
                format!(
                    "{}+{} calls, {} summed",
                    c.alloc_calls,
                    c.free_calls,
                    fmt_ns(c.summed_host_ns)
                )
            },
        )
    };
    if d.api_churn_base.is_some() || d.api_churn_new.is_some() {
        let _ = writeln!(
            o,
            "  CUDA allocation+free calls: {} → {}",
            calls(d.api_churn_base.as_ref()),
            calls(d.api_churn_new.as_ref())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_exact_with_a_short_figure() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(999), "999 B");
        assert_eq!(fmt_bytes(1_000), "1,000 B (1.0 kB)");
        assert_eq!(fmt_bytes(2_532_893_696), "2,532,893,696 B (2.5 GB)");
        assert_eq!(
            fmt_bytes(u64::MAX),
            "18,446,744,073,709,551,615 B (18446744.1 TB)"
        );
    }
}
