//! The hardware counters of a `cutrace profile` trace as `cutrace report` prints them (per
//! kernel name, per GPU, per step and GPU, with how they were taken), and as `cutrace diff`
//! compares them. An unavailable value prints as `n/a`, never as 0.

use std::fmt::Write as _;

use cutrace_analysis::counters::{
    Aggregation, CounterReport, CounterSide, CountersDiff, MetricColumn,
};
use cutrace_analysis::Report;

use super::{count, fmt_ns, short_name};

/// A counter value as read: integers without decimals, others with up to 3, `n/a` for none.
pub fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// `sum` or `mean` (duration-weighted), as the tables print a metric's rule.
pub fn rule(a: Aggregation) -> &'static str {
    match a {
        Aggregation::Sum => "sum",
        Aggregation::DurationWeightedMean => "mean",
    }
}

pub fn render(o: &mut String, r: &Report, top: usize) {
    let Some(c) = &r.counters else { return };
    let passes = c.passes.map_or("passes unknown".to_string(), |p| {
        count(p as usize, "pass", "passes")
    });
    let _ = writeln!(
        o,
        "\nHardware counters (cutrace profile: Range Profiling, one range per kernel, {passes}): \
         {} profiled, {} skipped on purpose, {} and {} captured into graphs (no counters), {} \
         ranges dropped, {} kernel records without values, {} values unavailable (n/a, never 0)",
        count(c.kernels_profiled as usize, "kernel", "kernels"),
        c.kernels_skipped,
        count(c.graph_launches as usize, "graph launch", "graph launches"),
        count(c.launches_captured as usize, "launch", "launches"),
        c.ranges_dropped,
        c.kernels_without_values,
        c.values_unavailable
    );
    if c.ranges_dropped > 0 {
        let _ = writeln!(
            o,
            "  {} the profiler dropped (or whose values could not be read): those kernels have \
             no values.",
            count(c.ranges_dropped as usize, "range", "ranges")
        );
    }
    if c.values_unavailable > 0 {
        let _ = writeln!(
            o,
            "  {} unavailable (NaN from CUPTI: a unit shared with another MIG instance, or an \
             evaluation that failed): shown as n/a and left out of every sum and mean.",
            count(c.values_unavailable as usize, "value is", "values are")
        );
    }
    if c.kernels_serialized {
        let _ = writeln!(
            o,
            "  Kernels were serialized while profiling (each profiled kernel ran alone, once per \
             pass: {passes}): the times and overlap above are not those of an unprofiled run."
        );
    }
    if let Some(rc) = &c.replay {
        let ratio = rc
            .launch_over_kernel
            .map_or(String::new(), |x| format!(" ({x:.1}×)"));
        let _ = writeln!(
            o,
            "  Replay cost seen in the trace: the launch calls of {} with values took {} against \
             {} of kernel time{ratio}; CUPTI replays and reads each kernel inside its launch \
             call. The program's slowdown against an unprofiled run needs that run (`cutrace \
             diff` it against a `cutrace record` trace).",
            count(rc.kernels as usize, "kernel", "kernels"),
            fmt_ns(rc.launch_ns),
            fmt_ns(rc.kernel_ns)
        );
    }
    if c.kernels_without_timestamps > 0 {
        let _ = writeln!(
            o,
            "  {} of the profiled kernels have no timestamps (CUPTI writes 0 in the activity \
             records of kernels it replays): the busy time, gaps and latencies above cannot \
             place them; their durations below come from gpu__time_duration.sum where measured.",
            c.kernels_without_timestamps
        );
    }
    if let Some(e) = &c.error {
        let _ = writeln!(o, "  counters failed: {e}");
    }
    if c.by_kernel.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "  Per kernel name (top {} of {}): sum = summed over the kernels; mean = mean weighted by \
         kernel duration (ratios, percentages, rates)",
        c.by_kernel.len(),
        c.kernel_names
    );
    let w = c.metrics.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for k in &c.by_kernel {
        let _ = writeln!(
            o,
            "  {} ({}, {})",
            short_name(&k.name, 90),
            count(k.kernels as usize, "kernel", "kernels"),
            fmt_ns(k.duration_ns)
        );
        for (m, v) in c.metrics.iter().zip(&k.values) {
            let _ = writeln!(
                o,
                "    {:<w$}  {:<4}  {:>18}",
                m.name,
                rule(m.aggregation),
                fmt_value(*v)
            );
        }
    }
    render_tables(o, c, top);
}

/// The per-GPU and per-step tables: one column per metric, numbered in a legend.
fn render_tables(o: &mut String, c: &CounterReport, top: usize) {
    let _ = writeln!(o, "  Metrics of the tables below:");
    legend(o, &c.metrics);
    let _ = writeln!(
        o,
        "  Per GPU:\n    {:>6} {:>8} {:>12}{}",
        "GPU",
        "kernels",
        "duration",
        heads(c.metrics.len())
    );
    for d in &c.by_device {
        let _ = writeln!(
            o,
            "    {:>6} {:>8} {:>12}{}",
            d.device,
            d.kernels,
            fmt_ns(d.duration_ns),
            cells(&d.values)
        );
    }
    let Some(rows) = &c.by_step else { return };
    let shown = rows.len().min(top.max(1));
    let _ = writeln!(
        o,
        "  Per step and GPU (a kernel counts in the step during which it was launched, or started \
         when its launch call is not in the trace; {} of {} \
         rows, in step order; {} with values in no step):\n    {:>6} {:>6} {:>8} \
         {:>12}{}  step",
        shown,
        rows.len(),
        count(
            c.kernels_outside_steps.unwrap_or(0) as usize,
            "kernel",
            "kernels"
        ),
        "#",
        "GPU",
        "kernels",
        "duration",
        heads(c.metrics.len())
    );
    for s in &rows[..shown] {
        let _ = writeln!(
            o,
            "    {:>6} {:>6} {:>8} {:>12}{}  {}",
            s.step,
            s.device,
            s.kernels,
            fmt_ns(s.duration_ns),
            cells(&s.values),
            short_name(&s.name, 40)
        );
    }
}

fn legend(o: &mut String, metrics: &[MetricColumn]) {
    for (i, m) in metrics.iter().enumerate() {
        let _ = writeln!(
            o,
            "    m{:<3} {:<4}  {}",
            i + 1,
            rule(m.aggregation),
            m.name
        );
    }
}

fn heads(n: usize) -> String {
    (1..=n)
        .map(|i| format!(" {:>14}", format!("m{i}")))
        .collect()
}

fn cells(values: &[Option<f64>]) -> String {
    values
        .iter()
        .map(|v| format!(" {:>14}", fmt_value(*v)))
        .collect()
}

/// `cutrace diff`'s counters: per kernel name and metric, base, new and the change.
pub fn render_diff(o: &mut String, d: &CountersDiff) {
    let side = |s: Option<&CounterSide>| match s {
        None => "no counters".to_string(),
        Some(s) => format!(
            "{}, {} profiled, {} ranges dropped, {} values unavailable{}",
            s.passes.map_or("passes unknown".into(), |p| count(
                p as usize, "pass", "passes"
            )),
            count(s.kernels_profiled as usize, "kernel", "kernels"),
            s.ranges_dropped,
            s.values_unavailable,
            s.error
                .as_ref()
                .map_or(String::new(), |e| format!("; counters failed: {e}"))
        ),
    };
    let _ = writeln!(
        o,
        "\nHardware counters (per kernel name: sum or duration-weighted mean, as in the report; \
         change = new − base; sums compare like for like only when both sides profiled as many \
         kernels)\n  base: {}\n  new:  {}\n  kernel names with values: {} in both, {} only in \
         base, {} only in new",
        side(d.base.as_ref()),
        side(d.new.as_ref()),
        d.kernel_names_in_both,
        d.kernel_names_only_in_base,
        d.kernel_names_only_in_new
    );
    let w = d.metrics.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for k in &d.kernels {
        let _ = writeln!(
            o,
            "  {} (kernels: base {}, new {})\n    {:<w$}  {:<4}  {:>16} {:>16} {:>16} {:>10}",
            short_name(&k.name, 90),
            k.base_kernels,
            k.new_kernels,
            "metric",
            "rule",
            "base",
            "new",
            "change",
            "change %"
        );
        for (m, c) in d.metrics.iter().zip(&k.metrics) {
            let change = match c.change {
                None => "n/a".into(),
                Some(x) if x > 0.0 => format!("+{}", fmt_value(Some(x))),
                Some(x) => fmt_value(Some(x)),
            };
            let pct = c.change_pct.map_or("n/a".into(), |p| format!("{p:+.1} %"));
            let _ = writeln!(
                o,
                "    {:<w$}  {:<4}  {:>16} {:>16} {:>16} {:>10}",
                m.name,
                rule(m.aggregation),
                fmt_value(c.base),
                fmt_value(c.new),
                change,
                pct
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_analysis::{analyze, Options, StepMatch};
    use cutrace_testkit::counters::counter_trace;

    fn report_text() -> String {
        let t = counter_trace();
        let opts = Options {
            steps: Some(StepMatch::profiler_steps()),
            ..Options::default()
        };
        let r = analyze(&t, &opts).expect("analyze");
        assert!(r.steps.is_some() && r.counters.as_ref().is_some_and(|c| c.by_step.is_some()));
        let mut o = String::new();
        render(&mut o, &r, 10);
        o
    }

    #[test]
    fn per_gpu_and_per_step_rows_with_unavailable_values_as_na() {
        let o = report_text();
        let lines: Vec<&str> = o.lines().collect();
        let row = |prefix: &[&str]| {
            lines
                .iter()
                .find(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() > prefix.len() && w[..prefix.len()] == *prefix
                })
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .unwrap_or_else(|| panic!("no row {prefix:?} in\n{o}"))
        };
        // GPU 1: copy kernels, corr 3 and 6: 15 CTAs, the % from corr 6 only (10), 2500 ns.
        assert_eq!(row(&["1", "2"])[2..], ["2.500", "µs", "15", "10", "2500"]);
        // Step 2 on GPU 1: only corr 3, whose % is unavailable.
        assert_eq!(
            row(&["2", "1", "1"])[3..],
            ["2.000", "µs", "10", "n/a", "2000", "ProfilerStep#2"]
        );
        assert!(o.contains("2 ranges the profiler dropped"), "{o}");
        assert!(o.contains("1 value is unavailable"), "{o}");
        assert!(o.contains("1 kernel with values in no step"), "{o}");
        assert!(
            o.contains("launch calls of 5 kernels with values took 5.500 µs against 7.500 µs"),
            "{o}"
        );
        assert!(
            o.contains("    m2   mean  sm__warps_active.avg.pct_of_peak_sustained_active"),
            "{o}"
        );
    }

    #[test]
    fn the_diff_shows_base_new_and_change_with_na_for_unknowns() {
        let base = counter_trace();
        let plain = cutrace_testkit::records::seed_trace(&[]);
        let d = cutrace_analysis::counters::counters_diff(&base, &plain, (None, None), 10, |s| {
            s.to_string()
        })
        .unwrap();
        let mut o = String::new();
        render_diff(&mut o, &d);
        assert!(o.contains("  new:  no counters"), "{o}");
        assert!(o.contains("2 only in base"), "{o}");
        let ctas: Vec<&str> = o
            .lines()
            .find(|l| l.trim_start().starts_with("sm__ctas_launched.sum"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            ctas,
            ["sm__ctas_launched.sum", "sum", "600", "n/a", "n/a", "n/a"]
        );
    }
}
