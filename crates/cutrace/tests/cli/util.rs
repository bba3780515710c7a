//! Running the `cutrace` binary cargo built for these tests. Fixtures, temporary directories and
//! records come from cutrace-testkit.

use std::process::{Command, Output};

use cutrace_testkit::{repo, Run};

/// The `cutrace` binary, to be given arguments.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cutrace"))
}

/// `cutrace ARGS…` run from the repository root.
pub fn cutrace(args: &[&str]) -> Output {
    bin().current_dir(repo()).args(args).run()
}

/// `cutrace ARGS… --format json`, which must succeed, parsed.
pub fn cutrace_json(args: &[&str]) -> serde_json::Value {
    let out = bin()
        .current_dir(repo())
        .args(args)
        .args(["--format", "json"])
        .run_ok();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A `cutrace profile` trace built by hand, one part written into `dir`: kernels `gemm` (3, of
/// 1, 2 and 3 µs) and `copy` (1, of 4 µs) with counter values, and one `gemm` without values
/// (as a graph kernel). Metrics: `sm__ctas_launched.sum` (gemm 10, 20, 30; copy 7) and
/// `sm__warps_active.avg.pct_of_peak_sustained_active` (gemm 50, unavailable (NaN), 70; copy
/// 10). So by name: gemm sums 60 CTAs and averages (50·1 + 70·3) / 4 = 65 % weighted by
/// duration (the NaN kernel left out of the mean); copy 7 and 10 %.
pub fn counters_trace(dir: &std::path::Path) -> std::path::PathBuf {
    counters_trace_with(dir, &[])
}

/// [`counters_trace`] with host NVTX ranges (name, start µs, end µs, on the kernels' clock).
pub fn counters_trace_with(
    dir: &std::path::Path,
    ranges: &[(&str, u64, u64)],
) -> std::path::PathBuf {
    use cutrace_trace::native::{marker_flags, Header, MarkerEvent, Meta, Tail, Writer};
    use cutrace_trace::{CounterInfo, Kernel, KernelMetric, Launch};
    let header = Header {
        cutrace_version: "test".into(),
        host: Some("h".into()),
        pid: Some(77),
        ..Header::default()
    };
    let mut w = Writer::new(std::io::Cursor::new(Vec::new()), &header).unwrap();
    let gemm = w.intern("_Z4gemmPf");
    let copy = w.intern("_Z4copyPf");
    let ctas = w.intern("sm__ctas_launched.sum");
    let warps = w.intern("sm__warps_active.avg.pct_of_peak_sustained_active");
    // (correlation id, name, start µs, duration µs, ctas, warps %); None: no values.
    type Row = (u64, u32, u64, u64, Option<(f64, f64)>);
    let rows: [Row; 5] = [
        (1, gemm, 10, 1, Some((10.0, 50.0))),
        (2, gemm, 20, 2, Some((20.0, f64::NAN))),
        (3, gemm, 30, 3, Some((30.0, 70.0))),
        (4, copy, 40, 4, Some((7.0, 10.0))),
        (5, gemm, 50, 5, None),
    ];
    for (corr, name, start, dur, values) in rows {
        w.push_kernel(
            &Kernel {
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: corr,
                start_ns: 1_000_000 + start * 1_000,
                end_ns: 1_000_000 + (start + dur) * 1_000,
                name,
                launch: 0,
            },
            &Launch {
                grid: [4, 1, 1],
                block: [64, 1, 1],
                registers_per_thread: 8,
                static_shared_bytes: 0,
                dynamic_shared_bytes: 0,
                graph_id: u32::from(values.is_none()),
            },
        );
        if let Some((c, p)) = values {
            for (metric, value) in [(ctas, c), (warps, p)] {
                w.push_kernel_metric(&KernelMetric {
                    correlation_id: corr,
                    device: 0,
                    process: 77,
                    metric,
                    value,
                });
            }
        }
    }
    for (i, &(name, start, end)) in ranges.iter().enumerate() {
        let name = w.intern(name);
        let empty = w.intern("");
        for (ts, flags, name) in [
            (start, marker_flags::START, name),
            (end, marker_flags::END, empty),
        ] {
            w.push_marker(&MarkerEvent {
                ts_ns: 1_000_000 + ts * 1_000,
                id: i as u32 + 1,
                flags,
                name,
                domain: empty,
                process: 77,
                thread: 1,
            });
        }
    }
    w.write_meta(&Meta {
        counters: Some(CounterInfo {
            metrics: vec![
                "sm__ctas_launched.sum".into(),
                "sm__warps_active.avg.pct_of_peak_sustained_active".into(),
            ],
            passes: Some(1),
            kernels_profiled: 4,
            kernels_skipped: 0,
            graph_launches: 1,
            launches_captured: 0,
            ranges_dropped: 0,
            error: None,
        }),
        ..Meta::default()
    })
    .unwrap();
    let bytes = w.finish(&Tail::default()).unwrap().into_inner();
    let path = dir.join("h-77.cutrace");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `c.output()`, retried while the program is "busy" (ETXTBSY): a binary the test has just
/// copied can still be open for writing in a child that another test thread forked before the
/// copy's descriptor was closed, until that child execs.
pub fn output_of_copied(c: &mut Command) -> Output {
    let mut tries = 0;
    loop {
        match c.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r.expect("running a copied cutrace binary"),
        }
    }
}
