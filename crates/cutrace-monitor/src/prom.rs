//! The monitor's state as Prometheus text exposition (format 0.0.4): what each metric means is
//! in its HELP line and in docs/MONITOR.md. Seconds are written as exact decimals of integer
//! nanoseconds (`12.000000345`), never through a float.

use std::fmt::Write as _;

use cutrace_trace::Ns;

use crate::state::{Process, State};
use crate::union::GAP_BOUNDS_NS;
use crate::wire::LATENCY_BOUNDS_NS;

/// The `Content-Type` of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `ns` as seconds, exactly: `1.500000000`.
pub fn seconds(ns: Ns) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// A bucket bound in seconds, without trailing zeros: `0.000001`, `10`.
fn bound(ns: Ns) -> String {
    let s = seconds(ns);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A label value escaped as the text format asks (backslash, quote, newline).
fn esc(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// One metric family: its HELP and TYPE, then its samples.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &str, value: &str) {
        let _ = writeln!(self.out, "{name}{labels} {value}");
    }
}

/// A process's identity labels.
fn process_labels(p: &Process) -> Vec<(&'static str, String)> {
    let h = &p.hello;
    let num = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
    vec![
        ("host", h.host.clone()),
        ("pid", h.pid.to_string()),
        ("command", h.command.clone()),
        ("rank", num(h.rank)),
        ("local_rank", num(h.local_rank)),
        // Not `job`: Prometheus sets that label to the scrape job, and would rename this one.
        ("job_id", h.job.clone().unwrap_or_default()),
        ("container_id", p.container_id.clone().unwrap_or_default()),
        ("pod_uid", p.pod_uid.clone().unwrap_or_default()),
    ]
}

fn with<'a>(base: &'a [(&'static str, String)], more: &[(&'a str, &'a str)]) -> String {
    let mut v: Vec<(&str, &str)> = more.to_vec();
    v.extend(base.iter().map(|(k, x)| (*k, x.as_str())));
    labels(&v)
}

/// The whole exposition; `host` labels the GPUs' own metrics.
pub fn render(s: &State, host: &str) -> String {
    let mut out = String::new();
    let mut f = Family { out: &mut out };
    render_gpus(&mut f, s, host);
    render_gaps(&mut f, s, host);
    render_process_gpus(&mut f, s);
    render_processes(&mut f, s);
    render_monitor(&mut f, s);
    out
}

fn render_gpus(f: &mut Family<'_>, s: &State, host: &str) {
    f.head(
        "cutrace_gpu_busy_seconds_total",
        "counter",
        "Time at least one kernel of any reporting process ran on the GPU: the union of kernel \
         intervals over processes and streams, never a sum.",
    );
    for (uuid, g) in &s.gpus {
        let i = g.index.to_string();
        let l = labels(&[("gpu_uuid", uuid), ("gpu", &i), ("host", host)]);
        f.sample(
            "cutrace_gpu_busy_seconds_total",
            &l,
            &seconds(g.busy.total_ns()),
        );
    }
    f.head(
        "cutrace_gpu_late_seconds_total",
        "counter",
        "Kernel time that arrived after its part of the GPU's union was final (older than the \
         monitor's horizon): left out of cutrace_gpu_busy_seconds_total, not guessed.",
    );
    for (uuid, g) in &s.gpus {
        let i = g.index.to_string();
        let l = labels(&[("gpu_uuid", uuid), ("gpu", &i), ("host", host)]);
        f.sample(
            "cutrace_gpu_late_seconds_total",
            &l,
            &seconds(g.busy.late_ns()),
        );
    }
}

fn render_gaps(f: &mut Family<'_>, s: &State, host: &str) {
    let name = "cutrace_gpu_idle_gap_seconds";
    f.head(
        name,
        "histogram",
        "The idle gaps between the GPU's busy runs (its union over processes), each counted once \
         nothing more can arrive inside it: it trails the GPU's newest record by the monitor's \
         horizon (120 s of GPU time).",
    );
    for (uuid, g) in &s.gpus {
        let i = g.index.to_string();
        let gaps = g.busy.gaps();
        let mut cum = 0u64;
        for (k, &c) in gaps.buckets.iter().enumerate() {
            cum = cum.saturating_add(c);
            let le = GAP_BOUNDS_NS
                .get(k)
                .map_or_else(|| "+Inf".to_string(), |&b| bound(b));
            let l = labels(&[("gpu_uuid", uuid), ("gpu", &i), ("host", host), ("le", &le)]);
            f.sample(&format!("{name}_bucket"), &l, &cum.to_string());
        }
        let l = labels(&[("gpu_uuid", uuid), ("gpu", &i), ("host", host)]);
        f.sample(&format!("{name}_sum"), &l, &seconds(gaps.sum_ns));
        f.sample(&format!("{name}_count"), &l, &cum.to_string());
    }
}

fn render_process_gpus(f: &mut Family<'_>, s: &State) {
    type Get = fn(&crate::state::ProcessGpu) -> String;
    let families: [(&str, &str, Get); 7] = [
        (
            "cutrace_process_gpu_busy_seconds_total",
            "Time at least one kernel of this process ran on the GPU (the union over its streams).",
            |g| seconds(g.busy.total_ns()),
        ),
        (
            "cutrace_process_comm_busy_seconds_total",
            "Time at least one communication kernel (NCCL, RCCL, MSCCL) of this process ran.",
            |g| seconds(g.comm.total_ns()),
        ),
        (
            "cutrace_process_exposed_comm_seconds_total",
            "Communication time of this process during which none of its other kernels ran on \
             the GPU: the communication nothing overlapped.",
            |g| seconds(g.exposed_comm_ns()),
        ),
        (
            "cutrace_process_kernels_total",
            "Kernels of this process that completed on the GPU.",
            |g| g.kernels.to_string(),
        ),
        (
            "cutrace_process_kernel_sum_seconds_total",
            "The SUM of this process's kernel durations: concurrent kernels count twice, so it \
             can pass wall time. Busy is cutrace_process_gpu_busy_seconds_total.",
            |g| seconds(g.kernel_sum_ns),
        ),
        (
            "cutrace_process_copies_total",
            "Memory copies of this process on the GPU.",
            |g| g.copies.to_string(),
        ),
        (
            "cutrace_process_copy_bytes_total",
            "Bytes those copies moved.",
            |g| g.copy_bytes.to_string(),
        ),
    ];
    for (name, help, get) in families {
        f.head(name, "counter", help);
        for p in s.processes.values() {
            let base = process_labels(p);
            for (uuid, g) in &p.gpus {
                let i = g.index.to_string();
                f.sample(
                    name,
                    &with(&base, &[("gpu_uuid", uuid), ("gpu", &i)]),
                    &get(g),
                );
            }
        }
    }
    let name = "cutrace_process_stream_busy_seconds_total";
    f.head(
        name,
        "counter",
        "Time a kernel of this stream of the process ran (a stream runs its kernels one after \
         another). A process's first 8 streams on a GPU have a series each (stream = CUDA's \
         stream id); stream=\"other\" sums the kernel time of the rest.",
    );
    for p in s.processes.values() {
        let base = process_labels(p);
        for (uuid, g) in &p.gpus {
            let i = g.index.to_string();
            for (stream, b) in &g.streams {
                let id = stream.to_string();
                let l = with(&base, &[("gpu_uuid", uuid), ("gpu", &i), ("stream", &id)]);
                f.sample(name, &l, &seconds(b.busy_ns));
            }
            if g.other_streams_ns > 0 {
                let l = with(
                    &base,
                    &[("gpu_uuid", uuid), ("gpu", &i), ("stream", "other")],
                );
                f.sample(name, &l, &seconds(g.other_streams_ns));
            }
        }
    }
    let name = "cutrace_process_launch_latency_seconds";
    f.head(
        name,
        "histogram",
        "Launch-to-start latency: a kernel's start minus the end of its launch call (joined by \
         correlation id; a negative one counts as 0).",
    );
    for p in s.processes.values() {
        let base = process_labels(p);
        for (uuid, g) in &p.gpus {
            let i = g.index.to_string();
            let mut cum = 0u64;
            for (k, &c) in g.latency.buckets.iter().enumerate() {
                cum = cum.saturating_add(c);
                let le = LATENCY_BOUNDS_NS
                    .get(k)
                    .map_or_else(|| "+Inf".to_string(), |&b| bound(b));
                let l = with(&base, &[("gpu_uuid", uuid), ("gpu", &i), ("le", &le)]);
                f.sample(&format!("{name}_bucket"), &l, &cum.to_string());
            }
            let l = with(&base, &[("gpu_uuid", uuid), ("gpu", &i)]);
            f.sample(&format!("{name}_sum"), &l, &seconds(g.latency.sum_ns));
            f.sample(&format!("{name}_count"), &l, &cum.to_string());
        }
    }
}

fn render_processes(f: &mut Family<'_>, s: &State) {
    f.head(
        "cutrace_process_traced_seconds_total",
        "counter",
        "How long tracing has been on in the process: the time the busy figures cover.",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample(
            "cutrace_process_traced_seconds_total",
            &l,
            &seconds(p.traced_ns),
        );
    }
    f.head(
        "cutrace_process_dropped_records_total",
        "counter",
        "Activity records lost: by CUPTI (source=cupti, its buffers were full) or by cutrace \
         (source=cutrace, the monitor was slow or gone). Busy undercounts by what they held.",
    );
    for p in s.processes.values() {
        let base = process_labels(p);
        for (src, n) in [
            ("cupti", p.dropped_by_cupti),
            ("cutrace", p.dropped_by_cutrace),
        ] {
            let l = with(&base, &[("source", src)]);
            f.sample("cutrace_process_dropped_records_total", &l, &n.to_string());
        }
    }
    f.head(
        "cutrace_process_launches_pending",
        "gauge",
        "Kernel launches of the process whose kernel has not completed (as of its last batch).",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample(
            "cutrace_process_launches_pending",
            &l,
            &p.launches_pending.to_string(),
        );
    }
    f.head(
        "cutrace_process_oldest_pending_launch_seconds",
        "gauge",
        "How long ago the oldest of those launches returned: a kernel that never ends (a hung \
         collective) makes it grow. 0 when none is pending.",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample(
            "cutrace_process_oldest_pending_launch_seconds",
            &l,
            &seconds(p.oldest_pending_ns),
        );
    }
    f.head(
        "cutrace_process_pending_kernel_info",
        "gauge",
        "1, labelled with the name of the kernel of the oldest pending launch, when CUPTI \
         handed over its record before it ended (the process had been silent; a hung kernel).",
    );
    for p in s.processes.values() {
        if let Some(k) = &p.oldest_pending_kernel {
            let l = with(&process_labels(p), &[("kernel", k)]);
            f.sample("cutrace_process_pending_kernel_info", &l, "1");
        }
    }
    f.head(
        "cutrace_process_unfinished_kernels_total",
        "counter",
        "Kernels whose record CUPTI handed over before they ended (a forced flush after the \
         process was silent) and that ended since: their time is in no busy figure.",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample(
            "cutrace_process_unfinished_kernels_total",
            &l,
            &p.unfinished_ended.to_string(),
        );
    }
    f.head(
        "cutrace_process_batches_lost_total",
        "counter",
        "Batches the process numbered but the monitor never received.",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample(
            "cutrace_process_batches_lost_total",
            &l,
            &p.batches_lost.to_string(),
        );
    }
    f.head(
        "cutrace_process_up",
        "gauge",
        "1 while the process is connected to the monitor, 0 once it ended.",
    );
    for p in s.processes.values() {
        let l = with(&process_labels(p), &[]);
        f.sample("cutrace_process_up", &l, if p.ended { "0" } else { "1" });
    }
    f.head(
        "cutrace_process_untraced_info",
        "gauge",
        "A process that runs untraced, and why (its busy figures stay at 0).",
    );
    for p in s.processes.values() {
        if let Some(why) = &p.untraced {
            let l = with(&process_labels(p), &[("reason", why)]);
            f.sample("cutrace_process_untraced_info", &l, "1");
        }
    }
}

fn render_monitor(f: &mut Family<'_>, s: &State) {
    f.head(
        "cutrace_monitor_rejected_frames_total",
        "counter",
        "Messages the monitor refused (garbage, oversize, another user's, a pid that is not the \
         sender's), by reason; the connection is closed on each.",
    );
    for (reason, n) in &s.rejected {
        let l = labels(&[("reason", reason)]);
        f.sample("cutrace_monitor_rejected_frames_total", &l, &n.to_string());
    }
    f.head(
        "cutrace_monitor_connections_total",
        "counter",
        "Connections accepted on the monitor's socket.",
    );
    f.sample(
        "cutrace_monitor_connections_total",
        "",
        &s.connections_total.to_string(),
    );
    f.head(
        "cutrace_monitor_connections_open",
        "gauge",
        "Connections open now.",
    );
    f.sample(
        "cutrace_monitor_connections_open",
        "",
        &s.connections_open.to_string(),
    );
    f.head(
        "cutrace_monitor_processes",
        "gauge",
        "Processes that said hello.",
    );
    f.sample(
        "cutrace_monitor_processes",
        "",
        &s.processes.len().to_string(),
    );
    f.head(
        "cutrace_monitor_forgotten_processes_total",
        "counter",
        "Processes whose own series were dropped, a while after they ended (--forget-after); \
         their time stays in cutrace_gpu_busy_seconds_total.",
    );
    f.sample(
        "cutrace_monitor_forgotten_processes_total",
        "",
        &s.forgotten.to_string(),
    );
    f.head(
        "cutrace_monitor_implausible_runs_total",
        "counter",
        "Kernel runs refused for an impossible time (longer than a day, or ending more than 10 \
         minutes past the GPU's newest end plus the time since): a broken or forged timestamp, \
         left out of every busy figure.",
    );
    f.sample(
        "cutrace_monitor_implausible_runs_total",
        "",
        &s.implausible_runs.to_string(),
    );
    f.head(
        "cutrace_monitor_gpus_dropped_total",
        "counter",
        "GPUs dropped from a full table (256) to make room, each one no kept process reported \
         on; one seen again starts its counters anew.",
    );
    f.sample(
        "cutrace_monitor_gpus_dropped_total",
        "",
        &s.gpus_forgotten.to_string(),
    );
    f.head(
        "cutrace_monitor_untraced_info",
        "gauge",
        "Set while nothing is traced, with the reason (no CUDA driver, no process reported).",
    );
    if let Some(why) = untraced_reason(s) {
        let l = labels(&[("reason", &why)]);
        f.sample("cutrace_monitor_untraced_info", &l, "1");
    }
}

/// Why nothing is traced, when nothing is: a process's own reason, else the binary's (no CUDA
/// driver), else that none has reported.
pub fn untraced_reason(s: &State) -> Option<String> {
    let traced = s.processes.values().any(|p| p.untraced.is_none()) || !s.gpus.is_empty();
    if traced {
        return None;
    }
    // A process's own reason is the one that happened; the binary's is a forecast.
    if let Some(why) = s.processes.values().find_map(|p| p.untraced.clone()) {
        return Some(why);
    }
    if let Some(r) = &s.untraced_reason {
        return Some(r.clone());
    }
    Some(
        "no CUDA process has reported to this monitor (the program has not initialised CUDA \
         yet, or uses none)"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Batch, DeviceBatch, Hello, Message, StreamRuns};

    #[test]
    fn seconds_are_exact_decimals_of_nanoseconds() {
        assert_eq!(seconds(0), "0.000000000");
        assert_eq!(seconds(12_000_000_345), "12.000000345");
        assert_eq!(seconds(u64::MAX), "18446744073.709551615");
        assert_eq!(bound(1_000), "0.000001");
        assert_eq!(bound(10_000_000_000), "10");
    }

    #[test]
    fn a_state_renders_each_family_once_with_escaped_labels() {
        let mut s = State::default();
        let mut c = None;
        s.apply(
            5,
            &mut c,
            Message::Hello(Hello {
                pid: 5,
                host: "n1".into(),
                command: "py\"th\\on\n".into(),
                rank: Some(2),
                ..Hello::default()
            }),
        )
        .unwrap();
        s.apply(
            5,
            &mut c,
            Message::Batch(Batch {
                seq: 1,
                devices: vec![DeviceBatch {
                    device: 0,
                    uuid: Some("GPU-a".into()),
                    kernels: 1,
                    streams: vec![StreamRuns {
                        stream: 1,
                        runs: vec![(0, 1_500_000_000)],
                    }],
                    ..DeviceBatch::default()
                }],
                ..Batch::default()
            }),
        )
        .unwrap();
        let t = render(&s, "n1");
        assert!(t.contains(
            "cutrace_gpu_busy_seconds_total{gpu_uuid=\"GPU-a\",gpu=\"0\",host=\"n1\"} 1.500000000\n"
        ), "{t}");
        assert!(t.contains("command=\"py\\\"th\\\\on\\n\""), "{t}");
        assert!(t.contains("rank=\"2\",local_rank=\"\",job_id=\"\""), "{t}");
        let mut helps: Vec<&str> = t.lines().filter(|l| l.starts_with("# HELP")).collect();
        let n = helps.len();
        helps.dedup();
        assert_eq!(helps.len(), n);
        assert!(!t.contains("cutrace_monitor_untraced_info{"), "{t}");
        assert!(untraced_reason(&State::default()).is_some());
    }
}
