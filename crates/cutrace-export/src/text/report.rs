//! The text of `cutrace report`: a `cutrace_analysis::Report` as a person reads it. Busy time
//! is shown only as the union of kernel intervals (never over 100 %); the sum of kernel durations
//! appears only under a label that says it double-counts overlap. The readings of idle gaps come
//! from the analysis ([`cutrace_analysis::GapReading`]); this only words them.

use std::fmt::Write as _;
use std::path::Path;

use cutrace_analysis::{DeviceReport, GapReading, Report, Steps};
use cutrace_trace::Trace;

use super::{count, Style};

/// A power-of-ten bucket bound in its natural unit: `1 µs`, `100 ms`.
fn fmt_round(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{} µs", ns / 1_000),
        1_000_000..=999_999_999 => format!("{} ms", ns / 1_000_000),
        _ => format!("{} s", ns / 1_000_000_000),
    }
}

fn fmt_opt(st: &Style, ns: Option<i64>) -> String {
    ns.map_or_else(|| "-".into(), |v| st.signed(v))
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

/// Appends the report's text to `o`, its control characters escaped (a trace's names reach a
/// terminal), its lines within [`WIDTH`] columns unless `wide`.
pub fn render(o: &mut String, path: &Path, r: &Report, top: usize, wide: bool) {
    let from = o.len();
    let st = Style::of(r, wide);
    render_unescaped(o, path, r, top, &st);
    super::escape_from(o, from);
    if !wide {
        let fitted = super::fit(&o[from..]);
        o.truncate(from);
        o.push_str(&fitted);
    }
}

// `write!` into a String cannot fail; the results are ignored on purpose throughout.
fn render_unescaped(o: &mut String, path: &Path, r: &Report, top: usize, st: &Style) {
    let _ = writeln!(
        o,
        "cutrace report: {} ({} trace)",
        super::escape_controls(&path.display().to_string()),
        r.trace.source
    );
    if let Some(l) = super::verdict::launch_loss_line(r) {
        let _ = writeln!(o, "{l}");
    }
    super::verdict::render(o, &r.summary);
    let _ = writeln!(
        o,
        "records: {} kernels, {} memcpys, {} memsets, {} API calls, {} annotation ranges",
        r.trace.kernels, r.trace.memcpys, r.trace.memsets, r.trace.api_calls, r.trace.ranges
    );
    render_parts(o, r);
    render_rank(o, r);
    if let (Some(a), Some(b)) = (r.trace.first_ns, r.trace.last_ns) {
        let res = if r.trace.resolution_ns > 1 {
            format!("; resolution {}", st.ns(r.trace.resolution_ns))
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "trace clock: {a} → {b} ns ({}{res}); times below are offsets from its start, as \
             --from and --to take them",
            st.ns(b - a)
        );
    }
    if let Some(w) = &r.window {
        let to = w.to_ns.map_or("the end".to_string(), |t| st.at(t));
        let _ = writeln!(
            o,
            "time window: {} → {to} (intervals clipped to it)",
            st.at(w.from_ns)
        );
        if let Some(why) = window_outside_trace(r) {
            let _ = writeln!(o, "WARNING: {why}");
        }
    }
    render_data_loss(o, r);
    render_notes(o, r);
    let t = &r.trace;
    let no_records = t.first_ns.is_none() && t.api_calls == 0 && t.kernels == 0;
    if no_records && t.source == "native" {
        let _ = writeln!(
            o,
            "\nno records at all: did the program use the GPU? is CUDA_INJECTION64_PATH reaching \
             it? `cutrace doctor` checks the driver and CUPTI on this machine"
        );
    } else if r.devices.is_empty() {
        let _ = writeln!(
            o,
            "\nno kernels or copies{}",
            if r.window.is_some() {
                " in the time window"
            } else {
                ""
            }
        );
    }
    let requested = requested_span(r);
    for d in &r.devices {
        render_device(o, d, requested, (r.trace.first_ns, r.trace.last_ns), st);
    }
    if r.devices.iter().any(|d| {
        d.timeline
            .largest_gaps
            .iter()
            .any(|g| g.host.as_ref().is_some_and(|h| h.module_loading))
    }) {
        let _ = writeln!(
            o,
            "\n(Module loading — cuLibraryLoad*/cuModuleLoad* — filled at least half of a gap \
             above. With lazy loading (the default on Linux since CUDA 12.2; PyTorch sets it too) a \
             kernel's module loads on its first launch, so such gaps are usually warm-up: \
             `--from` starts the report after it. A JIT compiler (Triton, NVRTC) loads modules \
             the same way when it compiles.)"
        );
    }
    if let Some(steps) = &r.steps {
        render_steps(o, steps, top, r.memory.as_ref(), st);
    }
    render_correlation(o, r, st);
    render_kernels(o, r, st);
    super::counters::render(o, r, top);
    super::pm::render(o, r);
    super::pc::render(o, r, top);
    super::memory::render(o, r, top);
    render_api(o, r, st);
    render_transfers(o, r, st);
    render_ranges(o, r, st);
    super::critical_path::render(o, r, top, st);
    let _ = writeln!(
        o,
        "\nDefinitions: busy = union of kernel intervals per device (touching intervals merge, \
         zero-length kernels add nothing); idle = window − busy = total of idle gaps; percentiles \
         are nearest-rank. Mangled kernel names are shown demangled (the JSON keeps the recorded \
         name as mangled_name)."
    );
}

/// Why `--steps` found nothing in a trace: the names asked for, where, and the trace's host
/// ranges to choose from.
pub fn steps_not_found(
    which: &cutrace_analysis::StepMatch,
    file: &std::path::Path,
    windowed: bool,
    trace: &Trace,
) -> String {
    let exact = matches!(which, cutrace_analysis::StepMatch::Exact(_));
    format!(
        "--steps {}: no host range in {}{} matches it{}; the trace's host ranges: {}",
        which.text(),
        if windowed { "the window of " } else { "" },
        file.display(),
        if exact && !windowed {
            " (end it with * to match names that start with it)"
        } else {
            ""
        },
        host_range_names(trace)
    )
}

/// Up to 8 host range names with their counts, most frequent first: what `--steps` could name.
pub fn host_range_names(trace: &Trace) -> String {
    let mut n: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for r in &trace.ranges {
        if r.domain == cutrace_trace::RangeDomain::Host {
            *n.entry(trace.str(r.name)).or_default() += 1;
        }
    }
    if n.is_empty() {
        return "none (record NVTX ranges, or torch.profiler with a schedule and prof.step())"
            .into();
    }
    let mut v: Vec<(&str, u64)> = n.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let more = v.len().saturating_sub(8);
    let mut s = v
        .iter()
        .take(8)
        .map(|(name, c)| format!("{} ({c})", super::escape_controls(name)))
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        let _ = write!(s, ", … ({more} more)");
    }
    s
}

/// The steps: their durations, each GPU's busy share during them, and the longest ones (with
/// their place in the list and their start as an offset from the trace's start).
fn render_steps(
    o: &mut String,
    steps: &Steps,
    top: usize,
    memory: Option<&cutrace_analysis::MemoryReport>,
    st: &Style,
) {
    let _ = writeln!(
        o,
        "\nSteps (host ranges \"{}\": {} in {})",
        steps.matched,
        steps.count,
        count(steps.processes as usize, "process", "processes")
    );
    let mut left = Vec::new();
    if steps.cut_by_window_left_out > 0 {
        left.push(format!(
            "{} cut by the window's edges",
            steps.cut_by_window_left_out
        ));
    }
    if steps.nested_left_out > 0 {
        left.push(format!(
            "{} inside another of the same process (nested or repeated: its GPU work would count twice)",
            steps.nested_left_out
        ));
    }
    if steps.zero_length_left_out > 0 {
        left.push(format!("{} of zero length", steps.zero_length_left_out));
    }
    if !left.is_empty() {
        let _ = writeln!(o, "  left out: {}", left.join("; "));
    }
    let (Some(min), Some(median), Some(max)) = (
        steps.duration_min_ns,
        steps.duration_median_ns,
        steps.duration_max_ns,
    ) else {
        let _ = writeln!(o, "  no step kept");
        return;
    };
    let _ = writeln!(
        o,
        "  step time: median {}, shortest {}, longest {}",
        st.ns(median),
        st.ns(min),
        st.ns(max)
    );
    for d in &steps.devices {
        let idle = if d.idle_steps > 0 {
            format!("; it ran none of their kernels in {}", d.idle_steps)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  GPU {} busy during a step (union of its kernels, clipped to the step): median \
             {:.1} %, lowest {:.1} % (over the {} of the processes that used it{idle})",
            d.device,
            d.busy_pct_median,
            d.busy_pct_min,
            count(d.steps as usize, "step", "steps")
        );
    }
    if steps.devices.is_empty() {
        let _ = writeln!(o, "  no kernel of the steps' processes in the trace");
    }
    let mut longest: Vec<&cutrace_analysis::Step> = steps.steps.iter().collect();
    longest.sort_by(|a, b| {
        b.duration_ns
            .cmp(&a.duration_ns)
            .then(a.start_ns.cmp(&b.start_ns))
    });
    longest.truncate(top.max(1).min(longest.len()));
    let many = steps.processes > 1;
    let mem = super::memory::gpu_step_peaks(memory);
    let _ = writeln!(
        o,
        "  longest steps (top {} of {}; # = place in time order, start = offset from the trace's start{}):",
        longest.len(),
        steps.count,
        if longest.iter().any(|s| s.dataloader_ns.is_some()) {
            "; DataLoader = time in enumerate(DataLoader), fetching batches"
        } else {
            ""
        }
    );
    let origin = st.origin_ns;
    let start =
        |s: &cutrace_analysis::Step| s.start_ns.saturating_sub(origin.unwrap_or(s.start_ns));
    let start_col = st.col(longest.iter().map(|s| start(s)));
    let dur_col = st.col(longest.iter().map(|s| s.duration_ns));
    let start_head = format!("start ({})", start_col.unit);
    let dur_head = format!("duration ({})", dur_col.unit);
    let mut cols = vec![
        super::num("#"),
        super::num(&start_head),
        super::num(&dur_head),
        super::num("kernels"),
        super::label("GPU busy in the step"),
    ];
    let loader = longest.iter().any(|s| s.dataloader_ns.is_some());
    let loader_col = st.col(longest.iter().filter_map(|s| s.dataloader_ns));
    let loader_head = format!("DataLoader ({})", loader_col.unit);
    if loader {
        cols.push(super::num(&loader_head));
    }
    if !mem.is_empty() {
        cols.push(super::num("GPU memory peak (B)"));
    }
    if many {
        cols.push(super::num("pid"));
    }
    let mut rows = Vec::new();
    let mut names = Vec::new();
    for s in longest {
        let busy = if s.devices.is_empty() {
            "-".to_owned()
        } else {
            s.devices
                .iter()
                .map(|d| format!("{}: {:.1} %", d.device, d.busy_pct))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut row = vec![
            s.index.to_string(),
            start_col.num(start(s)),
            dur_col.num(s.duration_ns),
            s.kernels.to_string(),
            busy,
        ];
        if loader {
            row.push(s.dataloader_ns.map_or("-".into(), |v| loader_col.num(v)));
        }
        if !mem.is_empty() {
            row.push(
                mem.get(&s.index)
                    .map_or("-".to_string(), |&b| super::memory::grouped(b)),
            );
        }
        if many {
            row.push(s.pid.to_string());
        }
        rows.push(row);
        names.push(s.name.clone());
    }
    super::table(o, st, &cols, &rows, Some(("name", &names)));
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or(path.into(), |f| f.to_string_lossy().into_owned())
}

/// How many part files and processes were read (native traces), and a warning when they may be
/// from separate runs recorded into one directory.
fn render_parts(o: &mut String, r: &Report) {
    let parts = &r.trace.parts;
    if parts.is_empty() {
        return;
    }
    let mut processes: Vec<(Option<&str>, u32)> = parts
        .iter()
        .filter_map(|p| Some((p.host.as_deref(), p.pid?)))
        .collect();
    processes.sort_unstable();
    processes.dedup();
    let mut hosts: Vec<&str> = parts.iter().filter_map(|p| p.host.as_deref()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    // Pids alone on one host; `host:pid` when the parts name several.
    const LISTED: usize = 12;
    let mut list: Vec<String> = processes
        .iter()
        .take(LISTED)
        .map(|(h, pid)| match (hosts.len() > 1, h) {
            (true, Some(h)) => format!("{h}:{pid}"),
            _ => pid.to_string(),
        })
        .collect();
    if processes.len() > LISTED {
        list.push(format!("… {} more", processes.len() - LISTED));
    }
    let mut line = format!("parts: {} read", count(parts.len(), "file", "files"));
    if !processes.is_empty() {
        let _ = write!(
            line,
            ", from {} ({} {})",
            count(processes.len(), "process", "processes"),
            if processes.len() == 1 { "pid" } else { "pids" },
            list.join(", ")
        );
    }
    let unknown = parts.iter().filter(|p| p.pid.is_none()).count();
    if unknown > 0 {
        let _ = write!(
            line,
            "{}{} with no pid (no header read)",
            if processes.is_empty() { ", " } else { " and " },
            count(unknown, "part", "parts")
        );
    }
    match hosts.as_slice() {
        [] => {}
        [h] => {
            let _ = write!(line, " on host {h}");
        }
        many => {
            let _ = write!(line, " on {} hosts ({})", many.len(), many.join(", "));
        }
    }
    let _ = writeln!(o, "{line}");
    if let Some(s) = &r.trace.separate_runs {
        let mut why = Vec::new();
        if !s.run_ids.is_empty() {
            why.push(format!(
                "they carry {} `cutrace record` run ids ({})",
                s.run_ids.len(),
                s.run_ids.join(", ")
            ));
        }
        if !s.hosts.is_empty() {
            why.push(format!(
                "they come from {} hosts ({}), whose clocks are not comparable",
                s.hosts.len(),
                s.hosts.join(", ")
            ));
        }
        if let Some(g) = &s.first_gap {
            why.push(format!(
                "their records form {} time spans that do not overlap (nothing recorded for {} \
                 between the last record of {} and the first of {})",
                s.time_spans,
                super::fmt_ns(g.gap_ns),
                file_name(&g.before),
                file_name(&g.after)
            ));
        }
        let _ = writeln!(
            o,
            "WARNING: these parts may be from separate runs merged into one timeline: {}; \
             record each run into a fresh -o directory",
            why.join("; and ")
        );
    }
}

fn render_data_loss(o: &mut String, r: &Report) {
    let l = &r.data_loss;
    let mut facts = Vec::new();
    if !l.complete {
        facts.push(format!(
            "the trace is INCOMPLETE ({})",
            l.incomplete_reason
                .as_deref()
                .unwrap_or("no reason recorded")
        ));
    }
    if l.damaged_regions > 0 {
        facts.push(format!(
            "{} damaged bytes skipped in {} stretches (the records in them are lost; every good \
             chunk around them was read)",
            l.damaged_bytes, l.damaged_regions
        ));
    }
    if l.dropped_by_recorder > 0 {
        facts.push(format!(
            "{} records dropped by the recorder",
            l.dropped_by_recorder
        ));
    }
    if l.dropped_by_cupti > 0 {
        facts.push(format!("{} records dropped by CUPTI", l.dropped_by_cupti));
    }
    if l.inverted_intervals > 0 {
        facts.push(format!(
            "{} records end before they start (treated as zero-length)",
            l.inverted_intervals
        ));
    }
    facts.extend(launch_facts(&l.launches));
    let skipped: Vec<String> = l
        .skipped_events
        .iter()
        .map(|s| format!("{} {}", s.count, s.category))
        .collect();
    let _ = writeln!(
        o,
        "data loss: {}",
        match (facts.is_empty(), l.drops_recorded) {
            (true, true) => {
                "none recorded (0 dropped by the recorder, 0 by CUPTI; trace complete)".to_string()
            }
            (true, false) if !l.source_drops.is_empty() => format!(
                "trace complete; the profiler's own account (Kineto's record counts): {}",
                source_drops(l)
            ),
            (true, false) => "none seen (a torch.profiler trace does not record whether CUPTI or \
                              the profiler dropped records: drop counts unknown)"
                .to_string(),
            (false, true) => facts.join("; "),
            (false, false) if !l.source_drops.is_empty() => format!(
                "{}; the profiler's own account (Kineto's record counts): {}",
                facts.join("; "),
                source_drops(l)
            ),
            (false, false) => format!(
                "{}; drop counts unknown (not in this format)",
                facts.join("; ")
            ),
        }
    );
    if !skipped.is_empty() {
        let _ = writeln!(
            o,
            "not modelled (events read past, nothing lost): {}",
            skipped.join(", ")
        );
    }
    if let Some(pm) = &r.pm_samples {
        let _ = writeln!(o, "{}", super::pm::loss_line(pm));
    }
}

/// What the launch calls say was lost: launches without their GPU records, and launches that
/// cannot be joined. Shared with the page's loss box.
pub fn launch_facts(l: &cutrace_analysis::LaunchLoss) -> Vec<String> {
    let mut facts = Vec::new();
    if l.launches_without_gpu_records > 0 {
        facts.push(format!(
            "{} of {} kernel launches have no kernel or copy record (their GPU records were \
             lost)",
            l.launches_without_gpu_records, l.kernel_launches
        ));
    }
    if l.launches_without_correlation_id > 0 {
        facts.push(format!(
            "{} kernel launch calls have no correlation id (whether their kernels were recorded \
             cannot be told)",
            l.launches_without_correlation_id
        ));
    }
    facts
}

/// `4181 out-of-range, 0 blocklisted runtime, …` from the source's own drop account.
fn source_drops(l: &cutrace_analysis::DataLoss) -> String {
    l.source_drops
        .iter()
        .map(|d| format!("{} = {}", d.name, d.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The recorder's notes, after the data-loss line: they often say why data is missing (another
/// CUPTI tool in the program, a setting that failed). Tagged with the process when the trace has
/// several parts.
/// One rank of a job of several: which, and how to report the whole job.
fn render_rank(o: &mut String, r: &Report) {
    let Some(d) = &r.trace.distributed else {
        return;
    };
    let (Some(w), rank) = (d.world_size.filter(|&w| w > 1), d.rank) else {
        return;
    };
    let rank = rank.map_or("a rank".to_string(), |n| format!("rank {n}"));
    let backend = d
        .backend
        .as_deref()
        .map(|b| format!(" ({b})"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "distributed: {rank} of a job of {w}{backend}; this report is that rank alone: \
         `cutrace report` over every rank's trace (a directory, or several files) reports the \
         job: communication, exposed communication, stragglers and collective skew"
    );
}

fn render_notes(o: &mut String, r: &Report) {
    if r.notes.is_empty() {
        return;
    }
    let _ = writeln!(o, "Notes from the recorder ({}):", r.notes.len());
    let several = r.trace.paths.len() > 1;
    for n in &r.notes {
        let tag = match (several, n.pid, n.part.as_deref()) {
            (false, _, _) => String::new(),
            (true, Some(pid), _) => format!("[pid {pid}] "),
            (true, None, Some(part)) => format!("[{}] ", file_name(part)),
            (true, None, None) => String::new(),
        };
        let _ = writeln!(o, "  - {tag}{}", n.text);
    }
}

/// The requested time window clipped to the trace's records (`None` without a window, or when
/// they do not meet).
fn requested_span(r: &Report) -> Option<(u64, u64)> {
    let w = r.window.as_ref()?;
    let (first, last) = (r.trace.first_ns?, r.trace.last_ns?);
    let (a, b) = (w.from_ns.max(first), w.to_ns.unwrap_or(u64::MAX).min(last));
    (b > a).then_some((a, b))
}

/// Why a window selects nothing of the trace, or starts before it because a plain number (an
/// absolute time) was given where an offset was likely meant.
pub fn window_outside_trace(r: &Report) -> Option<String> {
    let w = r.window.as_ref()?;
    let (first, last) = (r.trace.first_ns?, r.trace.last_ns?);
    let to = w.to_ns.unwrap_or(u64::MAX);
    if to <= first || w.from_ns >= last {
        return Some(format!(
            "the time window lies outside the trace, which runs from {first} to {last} ns on \
             its own clock ({} long): a plain number is an absolute time on that clock, a \
             number with a unit (--from 1ms) an offset from the trace's start",
            super::fmt_ns(last - first)
        ));
    }
    // A start given as a plain number below the trace's start (an offset with a unit never is):
    // almost always an offset meant, such as `--from 2` for 2 s.
    (w.from_ns > 0 && w.from_ns < first).then(|| {
        format!(
            "--from {} was read as {} ns on the trace's clock, before the trace starts ({first} \
             ns), so the window starts with the trace: for an offset from the trace's start, \
             give a unit (--from {}s, --from {}ms)",
            w.from_ns, w.from_ns, w.from_ns, w.from_ns
        )
    })
}

fn render_device(
    o: &mut String,
    d: &DeviceReport,
    requested: Option<(u64, u64)>,
    trace: (Option<u64>, Option<u64>),
    st: &Style,
) {
    let t = &d.timeline;
    let _ = writeln!(o, "\nGPU {}", d.device);
    if let (Some(a), Some(b)) = (t.window_start_ns, t.window_end_ns) {
        let _ = writeln!(
            o,
            "  window (first kernel start → last kernel end): {} ({} → {})",
            st.ns(t.window_ns),
            st.at(a),
            st.at(b)
        );
    }
    let _ = writeln!(
        o,
        "  busy (union of kernel intervals): {} = {} of the window",
        st.ns(t.busy_ns),
        pct(t.busy_ns, t.window_ns)
    );
    let _ = writeln!(
        o,
        "  idle: {} = {} in {}",
        st.ns(t.idle_ns),
        pct(t.idle_ns, t.window_ns),
        super::verdict::gap_count(
            t.gaps,
            cutrace_analysis::verdict::gaps_under_1us(&t.gap_histogram)
        )
    );
    if let Some(x) = d.idle_split.filter(|_| t.idle_ns > 0) {
        let mut line = format!(
            "  idle, split where each gap's next kernel was launched: {} before the launch \
             returned (the GPU waited for the host), {} after it (launched, not yet started: \
             queued behind other work, or launch latency)",
            pct_of(st, x.before_launch_ns, t.idle_ns),
            pct_of(st, x.after_launch_ns, t.idle_ns)
        );
        if x.unknown_ns > 0 {
            line += &format!(
                ", {} in {} whose next kernel has no launch call in the trace",
                pct_of(st, x.unknown_ns, t.idle_ns),
                count(x.gaps_unknown as usize, "gap", "gaps")
            );
        }
        let _ = writeln!(o, "{line}");
    }
    if let Some((a, b)) = requested {
        // The window the user asked for, not the first-to-last-kernel span inside it.
        let span = b - a;
        let _ = writeln!(
            o,
            "  of the requested window ({} → {}, {}, clipped to the trace): busy {}, idle {} \
             (counting the time before the first kernel and after the last)",
            st.at(a),
            st.at(b),
            st.ns(span),
            pct(t.busy_ns, span),
            pct(span.saturating_sub(t.busy_ns), span)
        );
    } else if let (Some(first), Some(last), Some(ws), Some(we)) =
        (trace.0, trace.1, t.window_start_ns, t.window_end_ns)
    {
        let (before, after) = (ws.saturating_sub(first), last.saturating_sub(we));
        if before > 0 || after > 0 {
            let _ = writeln!(
                o,
                "  outside the window, no kernel ran: {} before the first kernel (from the trace's \
                 first record) and {} after the last (to its last record)",
                st.ns(before),
                st.ns(after)
            );
        }
    }
    let _ = writeln!(
        o,
        "  sum of kernel durations (double-counts overlap): {}   kernels: {} ({} zero-length)",
        st.ns(t.summed_kernel_ns),
        t.kernels,
        t.zero_length_kernels
    );
    if d.copy_busy_ns > 0 {
        let _ = writeln!(
            o,
            "  copies busy (union of memcpys): {}; compute overlapping copies: {}",
            st.ns(d.copy_busy_ns),
            st.ns(d.compute_copy_overlap_ns)
        );
    }
    let buckets: Vec<String> = t
        .gap_histogram
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| {
            let to = b.to_ns.map_or("∞".to_string(), fmt_round);
            format!(
                "[{}, {}): {} ({})",
                fmt_round(b.from_ns),
                to,
                b.count,
                st.ns(b.total_ns)
            )
        })
        .collect();
    if !buckets.is_empty() {
        let _ = writeln!(o, "  idle gaps by length: {}", buckets.join("  "));
    }
    if !t.largest_gaps.is_empty() {
        let _ = writeln!(o, "  largest idle gaps:");
        for g in &t.largest_gaps {
            let _ = writeln!(o, "    {}", gap_line(g, st));
            if let Some(h) = host_line(g, st) {
                let _ = writeln!(o, "      host: {h}");
            }
        }
    }
    if !d.streams.is_empty() {
        let label = |s: &cutrace_analysis::StreamTimeline| match s.pid {
            Some(pid) => format!("{} (pid {pid})", s.stream),
            None => s.stream.to_string(),
        };
        let tl = || d.streams.iter().map(|s| &s.timeline);
        let busy = st.col(tl().map(|t| t.busy_ns));
        let idle = st.col(tl().map(|t| t.idle_ns));
        let sum = st.col(tl().map(|t| t.summed_kernel_ns));
        let heads = [
            format!("busy ({})", busy.unit),
            format!("idle ({})", idle.unit),
            format!("sum of durs ({})", sum.unit),
        ];
        let cols = [
            super::label("stream"),
            super::num("kernels"),
            super::num(&heads[0]),
            super::num("busy%"),
            super::num(&heads[1]),
            super::num("idle%"),
            super::num("gaps"),
            super::num(&heads[2]),
        ];
        let rows: Vec<Vec<String>> = d
            .streams
            .iter()
            .map(|s| {
                let t = &s.timeline;
                vec![
                    label(s),
                    t.kernels.to_string(),
                    busy.num(t.busy_ns),
                    pct(t.busy_ns, t.window_ns),
                    idle.num(t.idle_ns),
                    pct(t.idle_ns, t.window_ns),
                    t.gaps.to_string(),
                    sum.num(t.summed_kernel_ns),
                ]
            })
            .collect();
        super::table(o, st, &cols, &rows, None);
        let _ = writeln!(
            o,
            "  (a stream's busy% and idle% are of its own span: its first kernel start → last \
             kernel end)"
        );
        // Per stream, only its largest gap (the JSON has the full lists); one the GPU's list
        // above already shows in full is named, not repeated.
        for s in &d.streams {
            if let Some(g) = s.timeline.largest_gaps.first() {
                let shown = d
                    .timeline
                    .largest_gaps
                    .iter()
                    .any(|h| (h.start_ns, h.end_ns) == (g.start_ns, g.end_ns));
                if shown {
                    let _ = writeln!(
                        o,
                        "  stream {} largest gap: {} at {}, one of the GPU's above",
                        label(s),
                        st.ns(g.length_ns),
                        st.at(g.start_ns)
                    );
                } else {
                    let _ = writeln!(o, "  stream {} largest gap: {}", label(s), gap_line(g, st));
                }
            }
        }
    }
}

/// `200 ns at +1.250 ms: after NAME (corr 11, stream 7) → before NAME (corr 12, stream 7)`,
/// with `, pid P` in a trace merged from several processes.
fn gap_line(g: &cutrace_analysis::Gap, st: &Style) -> String {
    let side = |k: &Option<cutrace_analysis::KernelRef>| {
        k.as_ref().map_or("?".to_string(), |k| {
            let pid = k.pid.map_or(String::new(), |p| format!(", pid {p}"));
            format!(
                "{} (corr {}, stream {}{pid})",
                st.name(&k.name),
                k.correlation_id,
                k.stream
            )
        })
    };
    let copies = match g.copy_ns {
        Some(c) if c > 0 => format!(" [copies ran {} of it]", st.ns(c)),
        _ => String::new(),
    };
    format!(
        "{} at {}: after {} → before {}{copies}",
        st.ns(g.length_ns),
        st.at(g.start_ns),
        side(&g.before),
        side(&g.after)
    )
}

/// `12.345 ms (67.8 %)`: a part and its share of a whole.
fn pct_of(st: &Style, part: u64, whole: u64) -> String {
    format!("{} ({})", st.ns(part), pct(part, whole))
}

/// What the host was doing in a device gap: when the next kernel's launch returned (and what
/// that says), and the API calls and annotation ranges that covered most of it. `None` when the
/// trace says nothing of it.
fn host_line(g: &cutrace_analysis::Gap, st: &Style) -> Option<String> {
    let h = g.host.as_ref()?;
    let gap_ns = g.length_ns;
    let mut parts = Vec::new();
    if let Some(l) = &h.next_launch {
        let r = l.returned_into_gap_ns;
        let why = match h.reading {
            Some(GapReading::InsideGraph) => {
                " (both kernels come from this one launch, as a CUDA graph's nodes do: the gap \
                 is inside the graph)"
            }
            Some(GapReading::StreamDispatch) => {
                " (queued on the same stream: the GPU's dispatch from one kernel to the next)"
            }
            Some(GapReading::QueuedBehindCopies) => {
                " (it was queued while copies ran: the GPU waited on them or on what they wait \
                 for)"
            }
            Some(GapReading::Queued) => {
                " (it was queued: the GPU waited on something else, such as an event, another \
                 stream or another process)"
            }
            Some(GapReading::WaitedForHost) => " (the GPU waited for the host)",
            None => "",
        };
        let when = if r < 0 {
            format!("{} before the gap began", st.ns(r.unsigned_abs()))
        } else if r as u64 > gap_ns {
            format!(
                "{} into the gap, after the kernel had started",
                st.ns(r as u64)
            )
        } else {
            format!("{} into the gap", st.ns(r as u64))
        };
        parts.push(format!("the next kernel's {} returned {when}{why}", l.name));
    }
    let list = |v: &[cutrace_analysis::NamedSpan], quote: bool| {
        v.iter()
            .map(|x| {
                let n = super::short_name(&x.name, 60);
                if quote {
                    format!("\"{n}\" {}", st.ns(x.ns))
                } else {
                    format!("{n} {}", st.ns(x.ns))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !h.calls.is_empty() {
        // "recorded": a lean trace leaves state queries out, and torch.profiler records only
        // some calls.
        parts.push(format!(
            "recorded API calls covered {} of it ({}), none ran for {}",
            st.ns(h.in_calls_ns),
            list(&h.calls, false),
            st.ns(gap_ns.saturating_sub(h.in_calls_ns))
        ));
    } else if h.next_launch.is_some() {
        parts.push("no recorded API call ran in it".to_string());
    }
    if !h.ranges.is_empty() {
        parts.push(format!(
            "in ranges (NVTX, annotations): {}",
            list(&h.ranges, true)
        ));
    }
    if !h.cpu_ops.is_empty() {
        // Innermost first: what the host was running in the gap, as torch.profiler named it.
        // An op nested in one of its own name (a dispatcher's re-entry) is said once.
        let mut seen = std::collections::HashSet::new();
        let ops: Vec<String> = h
            .cpu_ops
            .iter()
            .filter(|x| seen.insert(x.name.as_str()))
            .map(|x| {
                format!(
                    "{} {} of it",
                    super::short_name(&x.name, 60),
                    st.ns(x.in_gap_ns)
                )
            })
            .collect();
        parts.push(format!("in CPU ops: {}", ops.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn render_correlation(o: &mut String, r: &Report, st: &Style) {
    let c = &r.correlation;
    let _ = writeln!(
        o,
        "\nCorrelation (device records → API calls, by correlation id)"
    );
    let mut line = format!(
        "  kernels: {}, attributed {}, orphans {}",
        c.kernels, c.attributed, c.orphans
    );
    if !c.orphan_correlation_ids.is_empty() {
        let ids: Vec<String> = c
            .orphan_correlation_ids
            .iter()
            .map(|&id| cutrace_trace::show_merged_id(&r.trace.id_parts, id))
            .collect();
        let more = if (c.orphan_correlation_ids.len() as u64)
            < c.orphans - c.kernels_without_correlation_id
        {
            ", …"
        } else {
            ""
        };
        let _ = write!(line, " (ids {}{more})", ids.join(", "));
    }
    if c.kernels_without_correlation_id > 0 {
        let _ = write!(
            line,
            "; {} have no correlation id (RUNTIME/DRIVER activity not recorded?)",
            c.kernels_without_correlation_id
        );
    }
    if c.orphans > c.kernels_without_correlation_id && c.api_calls == 0 {
        let _ = write!(
            line,
            "; the trace holds no API calls at all (record the runtime and driver kinds; in \
             torch.profiler, the CUDA activity)"
        );
    }
    let _ = writeln!(o, "{line}");
    if c.duplicate_api_correlation_ids > 0 {
        let _ = writeln!(
            o,
            "  {} API calls share a correlation id with an earlier call: device records with \
             that id are joined to the earlier one (a merged or hand-edited trace?)",
            c.duplicate_api_correlation_ids
        );
    }
    for (label, j) in [("memcpys", &c.memcpys), ("memsets", &c.memsets)] {
        if j.records > 0 {
            let _ = writeln!(
                o,
                "  {label}: {}, attributed {}, orphans {}",
                j.records, j.attributed, j.orphans
            );
        }
    }
    let l = &r.launch_latency;
    if l.kernels > 0 {
        let _ = writeln!(
            o,
            "  launch → start latency (API call end → kernel start) over {}: min {}  p50 {}  p90 {}  p99 {}  max {}",
            count(l.kernels as usize, "kernel", "kernels"),
            fmt_opt(st, l.min_ns),
            fmt_opt(st, l.p50_ns),
            fmt_opt(st, l.p90_ns),
            fmt_opt(st, l.p99_ns),
            fmt_opt(st, l.max_ns)
        );
        if l.negative > 0 {
            let _ = writeln!(
                o,
                "  {} of them start before their API call returns (the GPU may start a kernel before the launch call returns; a host/device clock offset also shows here)",
                l.negative
            );
        }
    }
}

fn render_kernels(o: &mut String, r: &Report, st: &Style) {
    if r.kernel_summary.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nKernels by total time (top {} of {} names; time% = share of summed kernel time, as in nsys: \
         not of busy time, which overlap makes smaller)",
        r.kernel_summary.len(),
        r.kernel_names
    );
    let stats = || r.kernel_summary.iter().map(|k| &k.stats);
    let total = st.col(stats().map(|s| s.total_ns));
    let each = st.col(stats().map(|s| s.max_ns));
    let heads = [
        format!("total ({})", total.unit),
        format!("mean ({})", each.unit),
    ];
    let cols = [
        super::num("time%"),
        super::num(&heads[0]),
        super::num("count"),
        super::num(&heads[1]),
        super::num("min"),
        super::num("median"),
        super::num("p99"),
        super::num("max"),
    ];
    let rows: Vec<Vec<String>> = r
        .kernel_summary
        .iter()
        .map(|k| {
            let s = &k.stats;
            vec![
                format!("{:.1}", k.share_of_kernel_time_pct),
                total.num(s.total_ns),
                s.count.to_string(),
                each.num(s.mean_ns),
                each.num(s.min_ns),
                each.num(s.median_ns),
                each.num(s.p99_ns),
                each.num(s.max_ns),
            ]
        })
        .collect();
    let names: Vec<String> = stats().map(|s| s.name.clone()).collect();
    super::table(o, st, &cols, &rows, Some(("name", &names)));
}

/// What the report calls the trace's API calls: `HIP` on ROCm, else `CUDA`.
pub fn api_label(r: &Report) -> &'static str {
    match r.trace.api_runtime {
        Some("hip") => "HIP",
        _ => "CUDA",
    }
}

fn render_api(o: &mut String, r: &Report, st: &Style) {
    if r.api_summary.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n{} API calls by total time (top {} of {} names)",
        api_label(r),
        r.api_summary.len(),
        r.api_names
    );
    let total = st.col(r.api_summary.iter().map(|s| s.total_ns));
    let each = st.col(r.api_summary.iter().map(|s| s.max_ns));
    let heads = [
        format!("total ({})", total.unit),
        format!("mean ({})", each.unit),
    ];
    let cols = [
        super::num(&heads[0]),
        super::num("count"),
        super::num(&heads[1]),
        super::num("min"),
        super::num("median"),
        super::num("max"),
    ];
    let rows: Vec<Vec<String>> = r
        .api_summary
        .iter()
        .map(|s| {
            vec![
                total.num(s.total_ns),
                s.count.to_string(),
                each.num(s.mean_ns),
                each.num(s.min_ns),
                each.num(s.median_ns),
                each.num(s.max_ns),
            ]
        })
        .collect();
    let names: Vec<String> = r.api_summary.iter().map(|s| s.name.clone()).collect();
    super::table(o, st, &cols, &rows, Some(("name", &names)));
    // Since `--api lean` became record's default, a reader looking for cudaGetDevice & co.
    // should learn here, not only in the notes at the top, why they are absent.
    if let Some(mode) = r
        .trace
        .parts
        .iter()
        .find_map(cutrace_analysis::diff::left_out_by)
    {
        let what = match mode {
            "lean" => "state queries (cudaGetDevice, cudaGetLastError, ...) were not recorded: \
                       `--api lean`"
                .to_owned(),
            "launches" => {
                "calls that launch or move nothing were not recorded: `--api launches`".to_owned()
            }
            // `custom` (runtime records for chosen callback ids), or a mode this build does
            // not know: said as the header names it, cut short.
            other => format!(
                "some calls were not recorded (API records: {})",
                super::short_name(other, 40)
            ),
        };
        let _ = writeln!(
            o,
            "  ({what}, see the notes; `cutrace record --api all` records every call)"
        );
    }
}

fn render_transfers(o: &mut String, r: &Report, st: &Style) {
    if r.transfers.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nCopies and memsets (bandwidth = bytes / summed duration)"
    );
    let time = st.col(r.transfers.iter().map(|t| t.total_ns));
    let head = format!("time ({})", time.unit);
    let cols = [
        super::label("kind"),
        super::num("count"),
        super::num("bytes"),
        super::num(&head),
        super::num("GB/s"),
    ];
    let rows: Vec<Vec<String>> = r
        .transfers
        .iter()
        .map(|t| {
            vec![
                t.kind.to_string(),
                t.count.to_string(),
                t.bytes.to_string(),
                time.num(t.total_ns),
                t.bandwidth_gb_s.map_or("-".into(), |b| format!("{b:.2}")),
            ]
        })
        .collect();
    super::table(o, st, &cols, &rows, None);
}

fn render_ranges(o: &mut String, r: &Report, st: &Style) {
    if r.ranges.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nAnnotation ranges (top {} of {}; totals are sums over ranges)",
        r.ranges.len(),
        r.range_names
    );
    let total = st.col(r.ranges.iter().map(|g| g.total_ns));
    let busy = st.col(r.ranges.iter().filter_map(|g| g.gpu_busy_ns));
    let heads = [
        format!("total ({})", total.unit),
        format!("GPU busy in it ({})", busy.unit),
    ];
    let cols = [
        super::label("domain"),
        super::num("count"),
        super::num(&heads[0]),
        super::num(&heads[1]),
    ];
    let rows: Vec<Vec<String>> = r
        .ranges
        .iter()
        .map(|g| {
            vec![
                g.domain.to_string(),
                g.count.to_string(),
                total.num(g.total_ns),
                g.gpu_busy_ns.map_or("-".into(), |b| busy.num(b)),
            ]
        })
        .collect();
    let names: Vec<String> = r.ranges.iter().map(|g| g.name.clone()).collect();
    super::table(o, st, &cols, &rows, Some(("name", &names)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{fmt_ns, short_name};

    #[test]
    fn durations_print_exactly_with_three_decimals() {
        assert_eq!(fmt_ns(0), "0 ns");
        assert_eq!(fmt_ns(999), "999 ns");
        assert_eq!(fmt_ns(9_999), "9.999 µs");
        assert_eq!(fmt_ns(10_800), "10.800 µs");
        assert_eq!(fmt_ns(1_234_567), "1.235 ms");
        assert_eq!(fmt_ns(12_345_678), "12.346 ms");
        assert_eq!(fmt_ns(98_765_432_100), "98.765 s");
        assert_eq!(Style::default().signed(-50), "-50 ns");
        assert_eq!(fmt_round(100_000), "100 µs");
        assert_eq!(fmt_round(1_000_000_000), "1 s");
        // Both ends kept: instances of one template differ at the end.
        assert_eq!(short_name("abcdef", 4), "a…ef");
        assert_eq!(short_name("abcdef", 6), "abcdef");
        let (f, d) = (
            "void elementwise_kernel<128, 4, Functor>(int, float)",
            "void elementwise_kernel<128, 4, Functor>(int, double)",
        );
        assert_ne!(short_name(f, 30), short_name(d, 30));
        assert_eq!(short_name(f, 30).chars().count(), 30);
    }

    /// A gap of 100 µs whose next kernel's launch returned `r` ns into it, with the reading
    /// `reading` (as the analysis would make it) and the given calls.
    fn gap(
        r: Option<i64>,
        reading: Option<GapReading>,
        calls: &[(&str, u64)],
    ) -> cutrace_analysis::Gap {
        cutrace_analysis::Gap {
            start_ns: 1_000_000,
            end_ns: 1_100_000,
            length_ns: 100_000,
            before: None,
            after: None,
            copy_ns: Some(0),
            host: Some(cutrace_analysis::GapHost {
                next_launch: r.map(|r| cutrace_analysis::NextLaunch {
                    name: "cudaLaunchKernel".into(),
                    start_ns: 0,
                    end_ns: 0,
                    returned_into_gap_ns: r,
                }),
                in_calls_ns: calls.iter().map(|c| c.1).sum(),
                calls: calls
                    .iter()
                    .map(|&(n, ns)| cutrace_analysis::NamedSpan { name: n.into(), ns })
                    .collect(),
                ranges: Vec::new(),
                reading,
                module_loading: false,
                cpu_ops: Vec::new(),
            }),
            after_correlation: 0,
        }
    }

    /// Each reading the analysis makes is worded, with when the launch returned and the calls.
    #[test]
    fn the_host_line_words_the_reading_and_the_numbers() {
        let line = |g: cutrace_analysis::Gap| host_line(&g, &Style::default()).unwrap();
        let waited = Some(GapReading::WaitedForHost);
        let l = line(gap(Some(90_000), waited, &[("cudaMalloc", 80_000)]));
        assert!(
            l.contains("returned 90.000 µs into the gap (the GPU waited for the host)"),
            "{l}"
        );
        assert!(l.contains("recorded API calls covered 80.000 µs of it (cudaMalloc 80.000 µs), none ran for 20.000 µs"), "{l}");
        // After the kernel began (the GPU starts a kernel before its launch call returns).
        let l = line(gap(Some(100_500), waited, &[]));
        assert!(
            l.contains("into the gap, after the kernel had started (the GPU waited for the host)"),
            "{l}"
        );
        assert!(l.contains("no recorded API call ran in it"), "{l}");
        // No reading: the numbers only.
        let l = line(gap(Some(10_000), None, &[]));
        assert!(l.contains("returned 10.000 µs into the gap;"), "{l}");
        let l = line(gap(Some(-500), None, &[]));
        assert!(l.contains("returned 500 ns before the gap began;"), "{l}");
        for (reading, words) in [
            (
                GapReading::StreamDispatch,
                "(queued on the same stream: the GPU's dispatch",
            ),
            (
                GapReading::QueuedBehindCopies,
                "(it was queued while copies ran",
            ),
            (
                GapReading::Queued,
                "(it was queued: the GPU waited on something else",
            ),
            (
                GapReading::InsideGraph,
                "(both kernels come from this one launch",
            ),
        ] {
            let l = line(gap(Some(-50_000), Some(reading), &[]));
            assert!(
                l.contains(&format!("returned 50.000 µs before the gap began {words}")),
                "{l}"
            );
        }
        // Nothing known: no line.
        let mut g = gap(None, None, &[]);
        assert!(host_line(&g, &Style::default()).is_none());
        g.host = None;
        assert!(host_line(&g, &Style::default()).is_none());
    }
}
