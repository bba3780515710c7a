//! Kineto import throughput: `cargo run --release -p cutrace-trace --example bench_import -- FILE`.
//! Prints MB/s of input (the file as stored) and the process's peak resident memory (VmHWM).

use std::time::Instant;

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: bench_import FILE [REPEATS]");
        std::process::exit(2);
    };
    let repeats: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut best = f64::INFINITY;
    let mut kernels = 0;
    for _ in 0..repeats {
        let t = Instant::now();
        let trace = match cutrace_trace::open(path.as_ref(), &mut |_, _| {}) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        best = best.min(t.elapsed().as_secs_f64());
        kernels = trace.kernels.len();
    }
    println!(
        "{path}: {:.1} MB in {:.3} s (best of {repeats}) = {:.0} MB/s, {kernels} kernels, peak RSS {} MiB",
        bytes as f64 / 1e6,
        best,
        bytes as f64 / 1e6 / best,
        peak_rss_kib().unwrap_or(0) / 1024
    );
}
