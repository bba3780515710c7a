//! How the timeline exports scale with overlap: N kernels on one stream, all running at once
//! (the worst case for row placement: every kernel needs a row of its own), written as Chrome
//! JSON and as Perfetto protobuf to a sink, for N = 16k, 32k, 64k and 128k, in alternating
//! rounds. The ratio of 128k to 64k is about 2 when the export is O(n log n), and 4 when it is
//! quadratic.
//!
//! `cargo run --release -p cutrace-export --example bench_lanes` (results in BENCHMARKS.md).

use std::time::Instant;

use cutrace_export::{chrome, perfetto};
use cutrace_trace::{Kernel, Trace};

fn overlapping(n: u64) -> Trace {
    Trace {
        strings: vec!["k".into()],
        kernels: (0..n)
            .map(|i| Kernel {
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: 0,
                start_ns: 1_000 + i,
                end_ns: 1_000_000_000 + i,
                name: 0,
                launch: 0,
            })
            .collect(),
        ..Trace::default()
    }
}

/// This thread's CPU time so far (Linux), in nanoseconds: on a shared machine wall time would
/// also count time the core spent on someone else's work.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// `f`'s run time in seconds of thread CPU time (wall time where unavailable).
fn timed(f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    let c0 = thread_cpu_ns();
    f();
    match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => t0.elapsed().as_secs_f64(),
    }
}

/// Rounds: each times every size once, the sizes alternating, so that a change in the machine's
/// load (other builds on a shared machine) falls on all sizes alike; a size's figure is its
/// best round.
const ROUNDS: usize = 7;

fn main() {
    let sizes = [16_384u64, 32_768, 65_536, 131_072];
    let traces: Vec<Trace> = sizes.iter().map(|&n| overlapping(n)).collect();
    let mut chrome_s = vec![f64::INFINITY; sizes.len()];
    let mut perfetto_s = vec![f64::INFINITY; sizes.len()];
    for _ in 0..ROUNDS {
        for (i, t) in traces.iter().enumerate() {
            let c = timed(|| {
                chrome::write_chrome(&mut std::io::sink(), t, 0).expect("a sink does not fail");
            });
            let p = timed(|| {
                perfetto::write_perfetto(std::io::sink(), t).expect("a sink does not fail");
            });
            chrome_s[i] = chrome_s[i].min(c);
            perfetto_s[i] = perfetto_s[i].min(p);
        }
    }
    println!(
        "{:>8} {:>12} {:>12}  (thread CPU seconds, best of {ROUNDS} alternating rounds)",
        "kernels", "chrome s", "perfetto s"
    );
    for (i, n) in sizes.iter().enumerate() {
        println!("{n:>8} {:>12.3} {:>12.3}", chrome_s[i], perfetto_s[i]);
    }
    println!(
        "ratio 128k/64k: chrome {:.2}, perfetto {:.2}",
        chrome_s[3] / chrome_s[2],
        perfetto_s[3] / perfetto_s[2]
    );
}
