//! How the timeline exports scale with overlap: N kernels on one stream, all running at once
//! (the worst case for row placement: every kernel needs a row of its own), written as Chrome
//! JSON and as Perfetto protobuf to a sink, for N = 16k, 32k, 64k and 128k, in alternating
//! rounds. The ratio of 128k to 64k is about 2 when the export is O(n log n), and 4 when it is
//! quadratic.
//!
//! `cargo run --release -p cutrace-export --example bench_lanes [-- --fresh]` (results in
//! BENCHMARKS.md; `--fresh`: each export in a process of its own, see `main`). `-- --bytes`
//! prints the size of each export at 64k and 128k instead: the output itself grows a little
//! faster than the kernels (row numbers and `tid`s gain digits). `-- --write-native DIR` writes
//! the 64k and 128k traces as native parts (`DIR/overlap-65536.cutrace`, …), which
//! `bench/lanes_convert.py` times through `cutrace convert`, as a user runs it.

use std::time::Instant;

use cutrace_export::{chrome, perfetto};
use cutrace_testkit::bench::thread_cpu_ns;
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

/// `t`'s kernels as a complete native part at `path` (a new file).
fn write_native(t: &Trace, path: &std::path::Path) -> std::io::Result<()> {
    use cutrace_trace::native::{Header, Tail, Writer};
    let file = std::fs::File::create_new(path)?;
    let header = Header {
        cutrace_version: "bench".into(),
        kinds: vec!["CONCURRENT_KERNEL".into()],
        ..Header::default()
    };
    let mut w = Writer::new(std::io::BufWriter::new(file), &header)?;
    let name = w.intern(&t.strings[0]);
    for k in &t.kernels {
        w.push_kernel(&Kernel { name, ..k.clone() }, &t.launch(k));
        if w.pending_rows() >= 16_384 {
            w.flush()?;
        }
    }
    w.finish(&Tail::default())?;
    Ok(())
}

/// This thread's minor page faults so far (Linux: `minflt` in `/proc/thread-self/stat`), which
/// show whether a size's time goes to mapping fresh memory rather than to the export's work.
fn minor_faults() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // After the command name (in parentheses, which may hold spaces): state, ppid, pgrp,
    // session, tty, tpgid, flags, minflt.
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(7)?
        .parse()
        .ok()
}

/// `f`'s run time in seconds of thread CPU time (wall time where unavailable), and the minor
/// page faults it took.
fn timed(f: impl FnOnce()) -> (f64, u64) {
    let t0 = Instant::now();
    let c0 = thread_cpu_ns();
    let f0 = minor_faults();
    f();
    let faults = match (f0, minor_faults()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let s = match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => t0.elapsed().as_secs_f64(),
    };
    (s, faults)
}

/// Rounds: each times every size once, the sizes alternating, so that a change in the machine's
/// load (other builds on a shared machine) falls on all sizes alike; a size's figure is its
/// best round.
const ROUNDS: usize = 7;

/// Times one export of `t`: (thread CPU seconds, minor page faults).
fn export(t: &Trace, perfetto: bool) -> (f64, u64) {
    timed(|| {
        if perfetto {
            perfetto::write_perfetto(std::io::sink(), t).expect("a sink does not fail");
        } else {
            chrome::write_chrome(&mut std::io::sink(), t, 0).expect("a sink does not fail");
        }
    })
}

/// One export in a process of its own (`--fresh`): the bench runs itself as
/// `bench_lanes --one chrome|perfetto N`, which prints the seconds and the page faults.
fn export_fresh(n: u64, perfetto: bool) -> (f64, u64) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let out = std::process::Command::new(exe)
        .args(["--one", if perfetto { "perfetto" } else { "chrome" }])
        .arg(n.to_string())
        .output()
        .expect("the bench runs itself");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f = text.split_whitespace();
    let s = f.next().and_then(|x| x.parse().ok());
    let pf = f.next().and_then(|x| x.parse().ok());
    s.zip(pf).expect("`--one` prints seconds and page faults")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write-native") {
        let dir = std::path::PathBuf::from(args.get(1).expect("--write-native DIR"));
        for n in [65_536u64, 131_072] {
            let path = dir.join(format!("overlap-{n}.cutrace"));
            write_native(&overlapping(n), &path).expect("writing a native part");
            println!("{}", path.display());
        }
        return;
    }
    if args.first().map(String::as_str) == Some("--bytes") {
        for n in [65_536u64, 131_072] {
            let t = overlapping(n);
            let mut c = Vec::new();
            chrome::write_chrome(&mut c, &t, 0).expect("a Vec does not fail");
            let mut p = Vec::new();
            perfetto::write_perfetto(&mut p, &t).expect("a Vec does not fail");
            println!("{n} chrome {} perfetto {}", c.len(), p.len());
        }
        return;
    }
    if args.first().map(String::as_str) == Some("--one") {
        let n = args[2].parse().expect("--one chrome|perfetto N");
        let (s, pf) = export(&overlapping(n), args[1] == "perfetto");
        println!("{s} {pf}");
        return;
    }
    // In-process (the default), every round's exports reuse the memory earlier rounds freed,
    // as far as the allocator keeps it: glibc gives back a freed top of the heap past a
    // threshold, which the larger sizes cross and the smaller do not, so only the larger pay
    // for fresh pages again. `--fresh` runs each export in a new process instead, as one
    // `cutrace convert` does: every size pays for its pages once.
    let fresh = args.iter().any(|a| a == "--fresh");
    let sizes = [16_384u64, 32_768, 65_536, 131_072];
    let traces: Vec<Trace> = if fresh {
        Vec::new()
    } else {
        sizes.iter().map(|&n| overlapping(n)).collect()
    };
    let mut chrome_s = vec![f64::INFINITY; sizes.len()];
    let mut perfetto_s = vec![f64::INFINITY; sizes.len()];
    // Minor page faults of each size's best round.
    let mut chrome_pf = vec![0u64; sizes.len()];
    let mut perfetto_pf = vec![0u64; sizes.len()];
    for _ in 0..ROUNDS {
        for (i, &n) in sizes.iter().enumerate() {
            let (c, p) = if fresh {
                (export_fresh(n, false), export_fresh(n, true))
            } else {
                (export(&traces[i], false), export(&traces[i], true))
            };
            if c.0 < chrome_s[i] {
                (chrome_s[i], chrome_pf[i]) = c;
            }
            if p.0 < perfetto_s[i] {
                (perfetto_s[i], perfetto_pf[i]) = p;
            }
        }
    }
    println!(
        "{:>8} {:>12} {:>12} {:>10} {:>10}  (thread CPU seconds, best of {ROUNDS} alternating \
         rounds{}; minor page faults in that round)",
        "kernels",
        "chrome s",
        "perfetto s",
        "chrome pf",
        "perf. pf",
        if fresh { ", a process per export" } else { "" }
    );
    for (i, n) in sizes.iter().enumerate() {
        println!(
            "{n:>8} {:>12.4} {:>12.4} {:>10} {:>10}",
            chrome_s[i], perfetto_s[i], chrome_pf[i], perfetto_pf[i]
        );
    }
    println!(
        "ratio 128k/64k: chrome {:.2}, perfetto {:.2}",
        chrome_s[3] / chrome_s[2],
        perfetto_s[3] / perfetto_s[2]
    );
}
