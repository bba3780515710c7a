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
use cutrace_testkit::bench::thread_cpu_ns;
use cutrace_testkit::synthetic::{add_steps, synthetic};
use cutrace_trace::Trace;

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
    let mut trace = synthetic(n);
    add_steps(&mut trace, 10_000);
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
        w.push_kernel(k, &t.launch(k));
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
