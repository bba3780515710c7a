//! Benchmark of the analysis pass over synthetic kernel records (records/s on one core, peak
//! memory). Run: `cargo run --release -p cutrace-analysis --example bench_analysis [-- N]`.
//!
//! The synthetic trace: N kernels over 2 devices × 4 streams, 64 kernel names, durations of
//! 1–50 µs, launched by one host thread (one cudaLaunchKernel record per kernel, so the
//! correlation join runs on N API records too), with queueing and idle gaps. Two orderings are measured: "completion order" (CUPTI writes a kernel's
//! record when it completes, so streams interleave but each stream is in order) and "fully
//! shuffled" (the worst case: every per-stream array needs a sort). Each case is run 3 times; the
//! best and the median are reported, in CPU time of the benchmark thread. The host thread's time
//! is cut into 10,000 `ProfilerStep#N` ranges (no other ranges), for the steps pass.

use std::time::Instant;

use cutrace_analysis::{
    analyze, correlate, kernel_summary, kernel_timelines, steps, Options, StepMatch,
};
use cutrace_testkit::bench::thread_cpu_ns;
use cutrace_testkit::synthetic::{add_steps, synthetic, Rng};
use cutrace_trace::Trace;

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Best and median of 3 runs, in seconds of thread CPU time (wall time when unavailable).
fn time3(mut f: impl FnMut()) -> (f64, f64) {
    let mut t: Vec<f64> = (0..3)
        .map(|_| {
            let t0 = Instant::now();
            let c0 = thread_cpu_ns();
            f();
            match (c0, thread_cpu_ns()) {
                (Some(a), Some(b)) => (b - a) as f64 / 1e9,
                _ => t0.elapsed().as_secs_f64(),
            }
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[0], t[1])
}

fn report(label: &str, n: usize, (best, median): (f64, f64)) {
    println!(
        "{label:<44} best {:>7.3} s  {:>6.1} M kernel records/s   (median {:.3} s, {:.1} M/s)",
        best,
        n as f64 / best / 1e6,
        median,
        n as f64 / median / 1e6
    );
}

fn run_case(name: &str, trace: &Trace) {
    let n = trace.kernels.len();
    let opts = Options::default();
    println!("-- {name}");
    // BENCH_ONLY=timelines limits the run to the first case (for profiling).
    report(
        "baseline: one read pass over the kernel records",
        n,
        time3(|| {
            let s: u64 = trace.kernels.iter().map(|k| k.end_ns - k.start_ns).sum();
            std::hint::black_box(s);
        }),
    );
    report(
        "baseline: copy (start, end) pairs out",
        n,
        time3(|| {
            let v: Vec<(u64, u64)> = trace
                .kernels
                .iter()
                .map(|k| (k.start_ns, k.end_ns))
                .collect();
            std::hint::black_box(v);
        }),
    );
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "analyze") {
        report(
            "full report (analyze)",
            n,
            time3(|| {
                std::hint::black_box(analyze(trace, &opts).expect("analyze"));
            }),
        );
        return;
    }
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "timelines") {
        report(
            "busy/idle/gaps per device+stream",
            n,
            time3(|| {
                let t = kernel_timelines(trace, None, 10, |_, _, _, _| {}).expect("timelines");
                std::hint::black_box(t);
            }),
        );
        return;
    }
    report(
        "busy/idle/gaps per device+stream",
        n,
        time3(|| {
            let t = kernel_timelines(trace, None, 10, |_, _, _, _| {}).expect("timelines");
            std::hint::black_box(t);
        }),
    );
    report(
        "correlation join + launch latency",
        n,
        time3(|| {
            std::hint::black_box(correlate(trace, None, 20));
        }),
    );
    report(
        "kernel summary by name",
        n,
        time3(|| {
            std::hint::black_box(kernel_summary(trace, None));
        }),
    );
    report(
        "steps: 10,000 ProfilerStep# ranges (`steps`)",
        n,
        time3(|| {
            std::hint::black_box(steps(trace, None, &StepMatch::profiler_steps()));
        }),
    );
    report(
        "full report (analyze)",
        n,
        time3(|| {
            std::hint::black_box(analyze(trace, &opts).expect("analyze"));
        }),
    );
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let t0 = Instant::now();
    let mut trace = synthetic(n);
    add_steps(&mut trace, 10_000);
    let rss_trace = vm_rss_kib().unwrap_or(0);
    println!(
        "{n} kernels + {n} API calls generated in {:.1} s; trace in memory: {} MiB RSS",
        t0.elapsed().as_secs_f64(),
        rss_trace / 1024
    );
    run_case("completion order (as CUPTI writes records)", &trace);
    let hwm_buffer = vm_hwm_kib().unwrap_or(0);
    if std::env::var("BENCH_ORDERED_ONLY").is_ok() {
        return;
    }
    let mut rng = Rng(42);
    shuffle(&mut trace.kernels, &mut rng);
    shuffle(&mut trace.api_calls, &mut rng);
    run_case("fully shuffled records", &trace);
    let hwm = vm_hwm_kib().unwrap_or(0);
    println!(
        "peak memory (VmHWM): {} MiB after completion-order runs, {} MiB overall; the trace itself is {} MiB, so the analysis adds at most {} MiB",
        hwm_buffer / 1024,
        hwm / 1024,
        rss_trace / 1024,
        hwm.saturating_sub(rss_trace) / 1024
    );
}
