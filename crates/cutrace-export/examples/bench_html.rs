//! Benchmark of `cutrace report --html` against `--format json` on the synthetic trace of
//! `cutrace-analysis`'s `bench_analysis` (N kernels over 2 devices × 4 streams, 64 names, 1–50 µs
//! each, one cudaLaunchKernel per kernel, 10,000 `ProfilerStep#N` ranges), in thread CPU time,
//! best and median of 3: the JSON report (analysis, steps, serialization) and the HTML page
//! (the same analysis and steps, the timeline's levels, the page). Reading the trace, common to
//! both, is left out, so the ratio is the stricter one. Writes the page to PATH when given, for
//! `tests/html_browser.py --timing PATH`.
//!
//! With a third argument, also writes the trace's kernels and API calls (not its steps) as a
//! native trace file there, for timing the commands themselves (`cutrace report FILE --format
//! json` against `--html`).
//!
//! Run: `cargo run --release -p cutrace-export --example bench_html [-- N [PATH [TRACE]]]`.

use std::time::Instant;

use cutrace_analysis::{analyze, steps, Options, StepMatch};
use cutrace_trace::{ApiCall, ApiKind, Kernel, NvtxRange, RangeDomain, Trace};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, good enough for synthetic timings.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The same records as `bench_analysis`'s `synthetic` (completion order) plus its steps.
fn synthetic(n: usize, n_steps: u64) -> Trace {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut strings: Vec<String> = (0..64)
        .map(|i| format!("_ZN7cutlass6KernelINS_4gemm{i}EEEvNT_6ParamsE"))
        .collect();
    let launch_name = strings.len() as u32;
    strings.push("cudaLaunchKernel".into());
    let mut host = 1_700_000_000_000_000_000u64;
    let mut stream_free = [[0u64; 4]; 2];
    let mut kernels = Vec::with_capacity(n);
    let mut api_calls = Vec::with_capacity(n);
    for i in 0..n {
        let device = rng.below(2) as u32;
        let stream = rng.below(4) as usize;
        host += 1_000 + rng.below(10_000);
        let api_end = host + 2_000 + rng.below(3_000);
        let free = &mut stream_free[device as usize][stream];
        let start = (api_end + 1_000 + rng.below(4_000)).max(*free);
        let end = start + 1_000 + rng.below(49_000);
        *free = end;
        let correlation_id = i as u64 + 1;
        kernels.push(Kernel {
            device,
            context: 1,
            stream: 7 + stream as u64,
            correlation_id,
            start_ns: start,
            end_ns: end,
            name: rng.below(64) as u32,
            grid: [128, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 64,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
            graph_id: 0,
        });
        api_calls.push(ApiCall {
            kind: ApiKind::Runtime,
            name: launch_name,
            cbid: 211,
            process: 1,
            thread: 1,
            correlation_id,
            start_ns: host,
            end_ns: api_end,
            return_value: 0,
        });
    }
    kernels.sort_unstable_by_key(|k| k.end_ns);
    let mut t = Trace {
        strings,
        kernels,
        api_calls,
        ..Trace::default()
    };
    let first = t.kernels.iter().map(|k| k.start_ns).min().unwrap_or(0);
    let last = t.kernels.iter().map(|k| k.end_ns).max().unwrap_or(0);
    let len = (last - first) / n_steps.max(1);
    for i in 0..n_steps {
        let name = t.strings.len() as u32;
        t.strings.push(format!("ProfilerStep#{i}"));
        t.ranges.push(NvtxRange {
            domain: RangeDomain::Host,
            name,
            process: 1,
            thread: 1,
            device: None,
            stream: None,
            start_ns: first + i * len,
            end_ns: first + (i + 1) * len,
            nvtx_domain: None,
        });
    }
    t
}

/// CPU time of this thread (ns), from /proc: on a shared machine, wall time also counts the
/// time other processes held the core.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Best and median of 3 runs in seconds (thread CPU time; wall time when unavailable), and
/// the last run's output size.
fn time3(mut f: impl FnMut() -> usize) -> (f64, f64, usize) {
    let mut size = 0;
    let mut t: Vec<f64> = (0..3)
        .map(|_| {
            let t0 = Instant::now();
            let c0 = thread_cpu_ns();
            size = f();
            match (c0, thread_cpu_ns()) {
                (Some(a), Some(b)) => (b - a) as f64 / 1e9,
                _ => t0.elapsed().as_secs_f64(),
            }
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[0], t[1], size)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let out = args.next();
    let native = args.next();
    let t0 = Instant::now();
    let trace = synthetic(n, 10_000);
    println!(
        "synthetic trace: {n} kernels, {} API calls, {} steps, built in {:.1} s",
        trace.api_calls.len(),
        trace.ranges.len(),
        t0.elapsed().as_secs_f64()
    );
    let analysed = || {
        let mut r = analyze(&trace, &Options::default()).expect("analyze");
        r.steps = steps(&trace, None, &StepMatch::profiler_steps());
        r
    };
    let json = time3(|| {
        let r = analysed();
        serde_json::to_vec(&r).expect("json").len()
    });
    let mut page = String::new();
    let html = time3(|| {
        let r = analysed();
        page = cutrace_export::html::report::page("synthetic", &trace, &r, None).expect("page");
        page.len()
    });
    let r = analysed();
    let lod = time3(|| {
        let l = cutrace_export::html::timeline_lod(&trace, None).expect("levels");
        l.lanes.len()
    });
    let only_page = time3(|| {
        cutrace_export::html::report::page("synthetic", &trace, &r, None)
            .expect("page")
            .len()
    });
    for (label, (best, median, size)) in [
        ("JSON report (analysis + steps + JSON)", json),
        ("HTML report (analysis + steps + page)", html),
        ("  of which the timeline's levels", lod),
        ("  of which levels + page", only_page),
    ] {
        println!("{label:<40} best {best:>6.3} s  median {median:>6.3} s  output {size} bytes");
    }
    println!(
        "HTML / JSON: {:.2}× (best), {:.2}× (median); page {:.2} MB",
        html.0 / json.0,
        html.1 / json.1,
        html.2 as f64 / 1e6
    );
    if let Some(path) = out {
        std::fs::write(&path, &page).expect("writing the page");
        println!("page written to {path}");
    }
    if let Some(path) = native {
        write_native(&trace, &path).expect("writing the trace");
        println!("trace written to {path}");
    }
}

/// The kernels and API calls as one native part (the writer's string ids are the trace's: the
/// names are interned in the same order).
fn write_native(t: &Trace, path: &str) -> std::io::Result<()> {
    use cutrace_trace::native::{Header, Tail, Writer};
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let header = Header {
        cutrace_version: "bench".into(),
        pid: Some(1),
        ..Header::default()
    };
    let mut w = Writer::new(file, &header)?;
    for s in &t.strings {
        w.intern(s);
    }
    for (k, a) in t.kernels.iter().zip(&t.api_calls) {
        w.push_kernel(k);
        w.push_api(a);
        if w.pending_rows() >= 1 << 16 {
            w.flush()?;
        }
    }
    let tail = Tail {
        records: w.records(),
        ..Tail::default()
    };
    w.finish(&tail)?;
    Ok(())
}
