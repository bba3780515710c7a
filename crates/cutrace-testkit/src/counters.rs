//! A small `cutrace profile` trace built by hand, for the counter report, diff and exports: two
//! GPUs, two steps, kernels profiled with replay (no timestamps, as CUPTI writes them), one timed
//! kernel, one value unavailable (NaN, as on a shared MIG instance), one kernel skipped, one
//! profiled kernel outside every step. Its expected figures are worked out in the tests that use
//! it, from the table below.

use cutrace_trace::{CounterInfo, Interner, KernelMetric, Ns, Trace};

use crate::records::{complete_trace, host_range, kernel, launch};

pub const CTAS: &str = "sm__ctas_launched.sum";
pub const WARPS_PCT: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
pub const GPU_TIME: &str = "gpu__time_duration.sum";

/// (correlation id, kernel, device, kernel start/end (0/0: replayed, untimed), launch call
/// start/end, values of [CTAS, WARPS_PCT, GPU_TIME] or None when not profiled).
#[allow(clippy::type_complexity)]
pub const KERNELS: [(u64, &str, u32, (Ns, Ns), (Ns, Ns), Option<[f64; 3]>); 6] = [
    (
        1,
        "gemm",
        0,
        (0, 0),
        (1_000, 3_000),
        Some([100.0, 50.0, 1_000.0]),
    ),
    (
        2,
        "gemm",
        0,
        (0, 0),
        (4_000, 5_000),
        Some([200.0, 80.0, 3_000.0]),
    ),
    (
        3,
        "copy",
        1,
        (12_000, 14_000),
        (11_000, 11_500),
        Some([10.0, f64::NAN, 2_000.0]),
    ),
    (
        4,
        "gemm",
        0,
        (0, 0),
        (15_000, 16_000),
        Some([300.0, 20.0, 1_000.0]),
    ),
    (5, "gemm", 0, (21_000, 22_000), (20_500, 20_600), None),
    (
        6,
        "copy",
        1,
        (0, 0),
        (25_000, 26_000),
        Some([5.0, 10.0, 500.0]),
    ),
];

/// The two steps (host ranges `ProfilerStep#1`, `#2`).
pub const STEPS: [(Ns, Ns); 2] = [(1_000, 10_000), (10_000, 20_000)];

/// The trace of [`KERNELS`] and [`STEPS`], with its `CounterInfo` (1 pass, 2 ranges dropped).
pub fn counter_trace() -> Trace {
    let mut i = Interner::new();
    let mut kernels = Vec::new();
    let mut calls = Vec::new();
    let mut metrics = Vec::new();
    let ids = [i.intern(CTAS), i.intern(WARPS_PCT), i.intern(GPU_TIME)];
    for (corr, name, dev, (ks, ke), (ls, le), values) in KERNELS {
        kernels.push(kernel(&mut i, name, dev, 7, corr, ks, ke));
        calls.push(launch(&mut i, corr, ls, le));
        for (metric, value) in ids.iter().zip(values.iter().flatten()) {
            metrics.push(KernelMetric {
                correlation_id: corr,
                device: dev,
                process: 1,
                metric: *metric,
                value: *value,
            });
        }
    }
    let ranges: Vec<_> = STEPS
        .iter()
        .enumerate()
        .map(|(n, &(s, e))| host_range(&mut i, &format!("ProfilerStep#{}", n + 1), s, e))
        .collect();
    let mut t = complete_trace(i, kernels, calls);
    t.ranges = ranges;
    t.kernel_metrics = metrics;
    t.meta.counters = Some(CounterInfo {
        metrics: vec![CTAS.into(), WARPS_PCT.into(), GPU_TIME.into()],
        passes: Some(1),
        kernels_profiled: 5,
        kernels_skipped: 1,
        ranges_dropped: 2,
        ..CounterInfo::default()
    });
    t
}
