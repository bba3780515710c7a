//! Edge cases the property tests' small coordinates do not reach: kernels longer than 2^32 ns
//! (stored out of line in the hot path), inverted records, copies overlapping compute, GPU ranges,
//! and per-name summaries.

use cutrace_analysis::{analyze, Options, TimeArg, Window};
use cutrace_testkit::records::{kernel, launch};
use cutrace_trace::{CopyKind, Interner, Memcpy, NvtxRange, RangeDomain, Trace};

const S: u64 = 1_000_000_000;

#[test]
fn kernels_longer_than_four_seconds_keep_their_exact_length() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "long", 0, 7, 1, 10 * S, 16 * S + 3), // 6 s + 3 ns
        kernel(&mut i, "short", 0, 7, 2, 17 * S, 17 * S + 5),
        kernel(&mut i, "long", 1, 9, 3, 5 * S, 5 * S + u64::from(u32::MAX)), // exactly the sentinel
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let d0 = &r.devices[0].timeline;
    assert_eq!(d0.busy_ns, 6 * S + 3 + 5);
    assert_eq!(d0.window_ns, 7 * S + 5);
    assert_eq!(d0.idle_ns, S - 3);
    assert_eq!(d0.largest_gaps[0].length_ns, S - 3);
    assert_eq!(
        d0.largest_gaps[0].before.as_ref().unwrap().name.as_ref(),
        "long"
    );
    assert_eq!(r.devices[1].timeline.busy_ns, u64::from(u32::MAX));
    // Records out of start order take the sorted fallback, which stores long kernels out of line.
    let mut reversed = t.clone();
    reversed.kernels.reverse();
    assert_eq!(analyze(&reversed, &Options::default()).unwrap(), r);
    // Clipped to a window, a long kernel is re-clipped from its record.
    let w = Window::resolve(
        Some(TimeArg::Absolute(11 * S)),
        Some(TimeArg::Absolute(17 * S + 2)),
        0,
    )
    .unwrap();
    let r = analyze(
        &t,
        &Options {
            window: w,
            ..Options::default()
        },
    )
    .unwrap();
    let d0 = &r.devices[0].timeline;
    assert_eq!(
        (d0.busy_ns, d0.window_ns, d0.gaps),
        (5 * S + 3 + 2, 6 * S + 2, 1)
    );
    assert_eq!(
        r.devices.len(),
        1,
        "device 1's kernel ended before the window"
    );
}

#[test]
fn inverted_records_count_as_data_loss_and_add_no_time() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 100, 200),
        kernel(&mut i, "b", 0, 7, 2, 500, 300), // ends before it starts
        kernel(&mut i, "c", 0, 7, 3, 400, 450),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    assert_eq!(r.data_loss.inverted_intervals, 1);
    let d = &r.devices[0].timeline;
    assert_eq!(
        (
            d.kernels,
            d.zero_length_kernels,
            d.busy_ns,
            d.summed_kernel_ns
        ),
        (3, 1, 150, 150)
    );
    assert_eq!(
        (d.gaps, d.idle_ns),
        (1, 200),
        "the inverted record splits no gap"
    );
}

#[test]
fn copies_overlapping_compute_ranges_and_summaries() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "gemm", 0, 7, 1, 1_000, 2_000),
        kernel(&mut i, "gemm", 0, 7, 2, 3_000, 5_000),
        kernel(&mut i, "relu", 0, 8, 3, 4_500, 4_600),
    ];
    let copy = |kind, bytes, s, e, corr| Memcpy {
        kind,
        bytes,
        device: 0,
        context: 1,
        stream: 9,
        correlation_id: corr,
        start_ns: s,
        end_ns: e,
    };
    let memcpys = vec![
        copy(CopyKind::HtoD, 4_000, 1_500, 3_500, 10), // overlaps gemm 1 by 500 and gemm 2 by 500
        copy(CopyKind::HtoD, 1_000, 6_000, 6_500, 11), // overlaps nothing
        copy(CopyKind::DtoH, 300, 4_900, 5_200, 12),   // overlaps gemm 2 by 100
    ];
    let api_calls = vec![
        launch(&mut i, 1, 500, 900),
        launch(&mut i, 10, 1_000, 1_400),
    ];
    let name = i.intern("step");
    let ranges = vec![
        NvtxRange {
            domain: RangeDomain::Gpu,
            name,
            process: 1,
            thread: 1,
            device: Some(0),
            stream: Some(7),
            start_ns: 1_500,
            end_ns: 3_500,
            nvtx_domain: None,
        },
        NvtxRange {
            domain: RangeDomain::Host,
            name,
            process: 1,
            thread: 1,
            device: None,
            stream: None,
            start_ns: 0,
            end_ns: 900,
            nvtx_domain: None,
        },
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        memcpys,
        api_calls,
        ranges,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let d = &r.devices[0];
    assert_eq!(d.timeline.busy_ns, 3_000);
    assert_eq!(d.copy_busy_ns, 2_000 + 500 + 300);
    assert_eq!(d.compute_copy_overlap_ns, 500 + 500 + 100);
    let htod = r.transfers.iter().find(|t| t.kind == "HtoD").unwrap();
    assert_eq!((htod.count, htod.bytes, htod.total_ns), (2, 5_000, 2_500));
    assert_eq!(htod.bandwidth_gb_s, Some(2.0));
    assert_eq!(
        (
            r.correlation.memcpys.attributed,
            r.correlation.memcpys.orphans
        ),
        (1, 2)
    );
    assert_eq!(r.correlation.memcpys.orphan_correlation_ids, vec![11, 12]);
    let gemm = &r.kernel_summary[0].stats;
    assert_eq!(
        (gemm.name.as_str(), gemm.count, gemm.total_ns, gemm.mean_ns),
        ("gemm", 2, 3_000, 1_500)
    );
    assert_eq!(
        (gemm.min_ns, gemm.median_ns, gemm.p99_ns, gemm.max_ns),
        (1_000, 1_000, 2_000, 2_000)
    );
    // gemm's 3000 ns of the 3100 ns summed kernel time (relu runs inside gemm's busy time, so a
    // share of busy time would have read 100 % for gemm and 3.3 % more for relu).
    assert_eq!(
        r.kernel_summary[0].share_of_kernel_time_pct,
        100.0 * 3_000.0 / 3_100.0
    );
    let gpu = r.ranges.iter().find(|g| g.domain == "gpu").unwrap();
    assert_eq!(
        (gpu.count, gpu.total_ns, gpu.gpu_busy_ns),
        (1, 2_000, Some(500 + 500))
    );
    let host = r.ranges.iter().find(|g| g.domain == "host").unwrap();
    assert_eq!(
        (host.count, host.total_ns, host.gpu_busy_ns),
        (1, 900, None)
    );
    assert_eq!(r.api_summary[0].count, 2);
}

#[test]
fn absurd_timestamps_do_not_panic_or_wrap() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, u64::MAX),
        kernel(&mut i, "a", 0, 8, 2, 0, u64::MAX - 1),
        kernel(&mut i, "b", 1, 7, 3, u64::MAX - 1, u64::MAX),
    ];
    let api_calls = vec![
        launch(&mut i, 1, u64::MAX - 5, u64::MAX),
        launch(&mut i, 3, 0, 1),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let d = &r.devices[0].timeline;
    assert_eq!(d.busy_ns, u64::MAX);
    assert_eq!(d.summed_kernel_ns, u64::MAX, "saturated, not wrapped");
    assert_eq!(r.kernel_summary[0].stats.total_ns, u64::MAX);
    assert_eq!(r.correlation.attributed, 2);
}

#[test]
fn mangled_kernel_names_are_shown_demangled() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "_Z10add_kernelPfS_i", 0, 7, 1, 0, 100),
        kernel(&mut i, "_Z10add_kernelPfS_i", 0, 7, 2, 300, 400),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let row = &r.kernel_summary[0].stats;
    assert_eq!(row.name, "add_kernel(float*, float*, int)");
    assert_eq!(row.mangled_name.as_deref(), Some("_Z10add_kernelPfS_i"));
    let gap = &r.devices[0].timeline.largest_gaps[0];
    assert_eq!(
        &*gap.before.as_ref().unwrap().name,
        "add_kernel(float*, float*, int)"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["kernel_summary"][0]["mangled_name"],
        "_Z10add_kernelPfS_i"
    );
}

#[test]
fn an_empty_trace_is_a_report_not_an_error() {
    let r = analyze(&Trace::default(), &Options::default()).unwrap();
    assert!(r.devices.is_empty());
    assert_eq!(r.correlation.kernels, 0);
    assert_eq!(r.launch_latency.p50_ns, None);
    assert!(
        !r.data_loss.complete,
        "Trace::default() says nothing about completeness"
    );
}

/// A kernel profiled with kernel replay has start = end = 0 in CUPTI's record: it does not pull
/// the trace's start back to 0 ns nor give a launch latency of minus the wall clock.
#[test]
fn untimed_profiled_kernels_leave_the_bounds_and_latencies_alone() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "timed", 0, 7, 1, 5 * S + 2_000, 5 * S + 3_000),
        kernel(&mut i, "profiled", 0, 7, 2, 0, 0),
    ];
    let api = vec![
        launch(&mut i, 1, 5 * S, 5 * S + 1_000),
        launch(&mut i, 2, 5 * S + 4_000, 5 * S + 5_000),
    ];
    let t = cutrace_testkit::records::complete_trace(i, kernels, api);
    assert_eq!(t.bounds_ns(), Some((5 * S, 5 * S + 5_000)));
    let r = analyze(&t, &Options::default()).unwrap();
    assert_eq!(r.trace.first_ns, Some(5 * S));
    assert_eq!(r.correlation.attributed, 2);
    assert_eq!(r.launch_latency.kernels, 1);
    assert_eq!(r.launch_latency.min_ns, Some(1_000));
    assert_eq!(r.launch_latency.negative, 0);
}
