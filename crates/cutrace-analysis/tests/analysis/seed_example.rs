//! The worked example of five kernels on two streams (`cutrace_testkit::records::SEED_KERNELS`:
//! why summed kernel time overstates busy time), exactly: union 8000 ns, sum
//! 10800 ns, span 8000 ns; stream 7 alone idle 200 ns (2.5 %); queue latencies; orphans.

use cutrace_analysis::{analyze, launch_latencies, union_ns, Options};
use cutrace_testkit::records::*;

const ALL: [u64; 5] = [11, 12, 13, 14, 15];

#[test]
fn union_not_sum_over_overlapping_streams() {
    let r = analyze(&seed_trace(&ALL), &Options::default()).unwrap();
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert_eq!(d.device, 0);
    assert_eq!(d.timeline.kernels, 5);
    assert_eq!(d.timeline.busy_ns, 8_000, "union");
    assert_eq!(d.timeline.summed_kernel_ns, 10_800, "sum of durations");
    assert_eq!(d.timeline.window_ns, 8_000, "span");
    assert_eq!(
        d.timeline.summed_kernel_ns * 100 / d.timeline.window_ns,
        135,
        "the naive 135 %"
    );
    assert_eq!(d.busy_pct, 100.0);
    assert_eq!(
        (d.timeline.idle_ns, d.timeline.gaps),
        (0, 0),
        "1000..9000 is one busy run"
    );
    assert_eq!(d.timeline.zero_length_kernels, 1, "kernel 15");
}

#[test]
fn the_two_gemms_alone_union_equals_sum() {
    let mut serial = [(1_000, 5_000), (5_200, 9_000)];
    assert_eq!(union_ns(&mut serial), 7_800);
}

#[test]
fn stream_7_alone_shows_the_200_ns_launch_gap() {
    let r = analyze(&seed_trace(&ALL), &Options::default()).unwrap();
    let streams = &r.devices[0].streams;
    assert_eq!(
        streams.iter().map(|s| s.stream).collect::<Vec<_>>(),
        vec![7, 13]
    );
    let s7 = &streams[0].timeline;
    assert_eq!(s7.kernels, 3);
    assert_eq!(s7.window_ns, 8_000);
    assert_eq!(s7.busy_ns, 7_800);
    assert_eq!(s7.idle_ns, 200);
    assert_eq!(s7.idle_ns * 1000 / s7.window_ns, 25, "2.5 % of the window");
    assert_eq!(s7.gaps, 1);
    let gap = &s7.largest_gaps[0];
    assert_eq!(
        (gap.start_ns, gap.end_ns, gap.length_ns),
        (5_000, 5_200, 200)
    );
    let before = gap.before.as_ref().unwrap();
    let after = gap.after.as_ref().unwrap();
    assert_eq!((before.name.as_ref(), before.correlation_id), ("gemm", 11));
    assert_eq!((after.name.as_ref(), after.correlation_id), ("gemm", 12));
    let bucket = s7.gap_histogram.iter().find(|b| b.count > 0).unwrap();
    assert_eq!(
        (bucket.from_ns, bucket.to_ns, bucket.total_ns),
        (100, Some(1_000), 200)
    );
    let s13 = &streams[1].timeline;
    assert_eq!(
        (s13.busy_ns, s13.window_ns, s13.idle_ns, s13.gaps),
        (3_000, 3_000, 0, 0),
        "touching merge"
    );
}

#[test]
fn queue_latencies_are_exact() {
    let (lat, orphans) = launch_latencies(&seed_trace(&ALL), None);
    assert_eq!(lat, vec![(11, 50), (12, 100), (13, 50), (14, 10), (15, 50)]);
    assert!(orphans.is_empty());
    let r = analyze(&seed_trace(&ALL), &Options::default()).unwrap();
    let l = &r.launch_latency;
    assert_eq!(l.kernels, 5);
    assert_eq!(
        (l.min_ns, l.p50_ns, l.p90_ns, l.max_ns),
        (Some(10), Some(50), Some(100), Some(100))
    );
    assert_eq!(
        (
            r.correlation.kernels,
            r.correlation.attributed,
            r.correlation.orphans
        ),
        (5, 5, 0)
    );
}

#[test]
fn missing_api_records_make_orphans_not_panics() {
    let trace = seed_trace(&[11, 13, 15]);
    let (lat, orphans) = launch_latencies(&trace, None);
    assert_eq!(orphans, vec![12, 14]);
    assert_eq!(
        lat.iter().map(|l| l.0).collect::<Vec<_>>(),
        vec![11, 13, 15]
    );
    let r = analyze(&trace, &Options::default()).unwrap();
    assert_eq!(r.correlation.kernels, 5);
    assert_eq!(r.correlation.attributed, 3);
    assert_eq!(r.correlation.orphans, 2);
    assert_eq!(r.correlation.orphan_correlation_ids, vec![12, 14]);
    assert_eq!(r.launch_latency.kernels, 3);
}

/// Every ordering of the 5 kernels and of the launches gives the same report.
#[test]
fn every_buffer_ordering_gives_the_same_report() {
    let base = seed_trace(&ALL);
    let want = analyze(&base, &Options::default()).unwrap();
    let mut perm: Vec<usize> = (0..5).collect();
    let mut seen = 0;
    // Heap's algorithm: all 120 orderings.
    let mut c = [0usize; 5];
    let mut check = |perm: &[usize]| {
        let mut t = base.clone();
        t.kernels = perm.iter().map(|&i| base.kernels[i].clone()).collect();
        t.api_calls = perm
            .iter()
            .rev()
            .map(|&i| base.api_calls[i].clone())
            .collect();
        assert_eq!(
            analyze(&t, &Options::default()).unwrap(),
            want,
            "ordering {perm:?}"
        );
        seen += 1;
    };
    check(&perm);
    let mut i = 0;
    while i < 5 {
        if c[i] < i {
            let j = if i % 2 == 0 { 0 } else { c[i] };
            perm.swap(j, i);
            check(&perm);
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    assert_eq!(seen, 120);
}

#[test]
fn json_contract_field_names() {
    let r = analyze(&seed_trace(&[11, 13, 15]), &Options::default()).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["device"], 0);
    assert_eq!(d["kernels"], 5);
    assert_eq!(d["window_ns"], 8_000);
    assert_eq!(d["busy_ns"], 8_000);
    assert_eq!(d["summed_kernel_ns"], 10_800);
    assert_eq!(d["idle_ns"], 0);
    assert_eq!(d["gaps"], 0);
    assert_eq!(d["streams"][0]["stream"], 7);
    assert_eq!(d["streams"][0]["kernels"], 3);
    assert_eq!(d["streams"][0]["busy_ns"], 7_800);
    assert_eq!(v["correlation"]["kernels"], 5);
    assert_eq!(v["correlation"]["attributed"], 3);
    assert_eq!(v["correlation"]["orphans"], 2);
    assert_eq!(
        v["correlation"]["orphan_correlation_ids"],
        serde_json::json!([12, 14])
    );
    assert_eq!(v["data_loss"]["complete"], true);
}
