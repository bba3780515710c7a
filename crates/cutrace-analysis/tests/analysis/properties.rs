//! Property tests against brute-force oracles: per-nanosecond coverage over small coordinates
//! decides busy, idle, gaps and windows; a nested-loop join decides orphans and latencies.
//! Random orderings, overlaps, touching and zero-length intervals, several devices and streams.

use std::collections::{BTreeMap, BTreeSet};

use cutrace_analysis::{analyze, launch_latencies, Options, Timeline, Window};
use cutrace_testkit::records::{kernel, launch};
use cutrace_trace::{Interner, Kernel, Ns, Trace};
use proptest::prelude::*;

/// Kernels on a coarse grid (many touching and identical edges) or free coordinates.
fn kernels_strategy() -> impl Strategy<Value = Vec<(u32, u64, u64, Ns, Ns)>> {
    kernels_on(3, 3, 40)
}

/// Kernels on `devices` × `streams` (device, stream) pairs, up to `max` of them.
fn kernels_on(
    devices: u32,
    streams: u64,
    max: usize,
) -> impl Strategy<Value = Vec<(u32, u64, u64, Ns, Ns)>> {
    let one = (
        0u32..devices,
        0u64..streams,
        1u64..40,
        0u64..100,
        0u64..4,
        any::<bool>(),
    )
        .prop_map(|(dev, stream, corr, start, dur_kind, grid)| {
            let (s, d) = if grid {
                ((start / 10) * 10, (dur_kind * 10).min(30))
            } else {
                (start, [0, 1, 7, 23][dur_kind as usize])
            };
            (dev, stream * 100 + 7, corr, s, s + d)
        });
    proptest::collection::vec(one, 0..max)
}

fn build(kernels: &[(u32, u64, u64, Ns, Ns)], api: &[(u64, Ns, Ns)]) -> Trace {
    let mut i = Interner::new();
    let names = ["gemm", "allreduce", "softmax"];
    let kernels: Vec<Kernel> = kernels
        .iter()
        .map(|&(d, s, c, a, b)| kernel(&mut i, names[(c % 3) as usize], d, s, c, a, b))
        .collect();
    let api_calls = api
        .iter()
        .map(|&(c, a, b)| launch(&mut i, c, a, b))
        .collect();
    Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    }
}

/// What the oracle says about one timeline.
#[derive(Debug, PartialEq)]
struct Expect {
    kernels: u64,
    zero: u64,
    summed: Ns,
    window: Option<(Ns, Ns)>,
    busy: Ns,
    gaps: Vec<(Ns, Ns)>,
}

/// Brute force: mark every covered nanosecond, then read runs and holes off the bitmap.
fn oracle(ivs: &[(Ns, Ns)], win: Option<Window>) -> Expect {
    let (lo, hi) = win.map_or((0, 1_000), |w| (w.from_ns, w.to_ns.min(1_000)));
    let mut covered = vec![false; 1_000];
    let mut e = Expect {
        kernels: 0,
        zero: 0,
        summed: 0,
        window: None,
        busy: 0,
        gaps: Vec::new(),
    };
    for &(s, t) in ivs {
        let (cs, ct) = (s.max(lo), t.min(hi));
        let kept = if t > s { cs < ct } else { lo <= s && s < hi };
        if !kept {
            continue;
        }
        e.kernels += 1;
        if t <= s {
            e.zero += 1;
            continue;
        }
        e.summed += ct - cs;
        for ns in cs..ct {
            covered[ns as usize] = true;
        }
    }
    let first = covered.iter().position(|&c| c);
    let last = covered.iter().rposition(|&c| c);
    if let (Some(f), Some(l)) = (first, last) {
        e.window = Some((f as Ns, l as Ns + 1));
        e.busy = covered.iter().filter(|&&c| c).count() as Ns;
        let mut ns = f;
        while ns <= l {
            if covered[ns] {
                ns += 1;
                continue;
            }
            let start = ns;
            while !covered[ns] {
                ns += 1;
            }
            e.gaps.push((start as Ns, ns as Ns));
        }
    }
    e
}

fn check(t: &Timeline, e: &Expect, top: usize, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(t.kernels, e.kernels, "{} kernels", what);
    prop_assert_eq!(t.zero_length_kernels, e.zero, "{} zero-length", what);
    prop_assert_eq!(t.summed_kernel_ns, e.summed, "{} summed", what);
    prop_assert_eq!(
        t.window_start_ns.zip(t.window_end_ns),
        e.window,
        "{} window",
        what
    );
    let window = e.window.map_or(0, |w| w.1 - w.0);
    prop_assert_eq!(t.window_ns, window, "{} window_ns", what);
    prop_assert_eq!(t.busy_ns, e.busy, "{} busy", what);
    prop_assert_eq!(t.idle_ns, window - e.busy, "{} idle", what);
    prop_assert_eq!(t.gaps, e.gaps.len() as u64, "{} gap count", what);
    let gap_total: Ns = e.gaps.iter().map(|g| g.1 - g.0).sum();
    prop_assert_eq!(t.idle_ns, gap_total, "{} idle = gaps", what);
    // Histogram: decade buckets.
    let hist_count: u64 = t.gap_histogram.iter().map(|b| b.count).sum();
    prop_assert_eq!(hist_count, e.gaps.len() as u64);
    for b in &t.gap_histogram {
        let inside: Vec<Ns> = e
            .gaps
            .iter()
            .map(|g| g.1 - g.0)
            .filter(|&l| l >= b.from_ns && b.to_ns.is_none_or(|to| l < to))
            .collect();
        prop_assert_eq!(b.count, inside.len() as u64);
        prop_assert_eq!(b.total_ns, inside.iter().sum::<Ns>());
    }
    // Largest gaps: longest first, earliest first among equals.
    let mut want = e.gaps.clone();
    want.sort_by(|a, b| (b.1 - b.0).cmp(&(a.1 - a.0)).then(a.0.cmp(&b.0)));
    want.truncate(top);
    let got: Vec<(Ns, Ns)> = t
        .largest_gaps
        .iter()
        .map(|g| (g.start_ns, g.end_ns))
        .collect();
    prop_assert_eq!(got, want, "{} largest gaps", what);
    for g in &t.largest_gaps {
        let (b, a) = (g.before.as_ref().unwrap(), g.after.as_ref().unwrap());
        prop_assert!(b.end_ns.max(b.start_ns) >= g.start_ns && b.start_ns < g.start_ns);
        prop_assert_eq!(a.start_ns, g.end_ns);
    }
    Ok(())
}

fn check_report(
    kernels: &[(u32, u64, u64, Ns, Ns)],
    win: Option<Window>,
    top: usize,
) -> Result<(), TestCaseError> {
    let trace = build(kernels, &[]);
    let opts = Options {
        window: win,
        top,
        orphan_list: 5,
        steps: None,
    };
    let r = analyze(&trace, &opts).expect("analysis of valid records");
    let devs: BTreeSet<u32> = kernels
        .iter()
        .filter(|k| oracle(&[(k.3, k.4)], win).kernels > 0)
        .map(|k| k.0)
        .collect();
    prop_assert_eq!(
        r.devices.iter().map(|d| d.device).collect::<Vec<_>>(),
        devs.iter().copied().collect::<Vec<_>>()
    );
    for d in &r.devices {
        // Every gap is split (here no launch calls: all of it unknown), and the parts add up.
        let x = d
            .idle_split
            .expect("a device with kernels has its idle split");
        prop_assert_eq!(x.unknown_ns, d.timeline.idle_ns);
        prop_assert_eq!(x.before_launch_ns + x.after_launch_ns, 0);
        prop_assert_eq!(x.gaps_unknown, d.timeline.gaps);
        let ivs: Vec<(Ns, Ns)> = kernels
            .iter()
            .filter(|k| k.0 == d.device)
            .map(|k| (k.3, k.4))
            .collect();
        check(
            &d.timeline,
            &oracle(&ivs, win),
            top,
            &format!("device {}", d.device),
        )?;
        prop_assert!(d.timeline.busy_ns <= d.timeline.window_ns);
        let mut streams: BTreeMap<u64, Vec<(Ns, Ns)>> = BTreeMap::new();
        for k in kernels
            .iter()
            .filter(|k| k.0 == d.device && oracle(&[(k.3, k.4)], win).kernels > 0)
        {
            streams.entry(k.1).or_default();
        }
        for k in kernels.iter().filter(|k| k.0 == d.device) {
            if let Some(v) = streams.get_mut(&k.1) {
                v.push((k.3, k.4));
            }
        }
        prop_assert_eq!(
            d.streams.iter().map(|s| s.stream).collect::<Vec<_>>(),
            streams.keys().copied().collect::<Vec<_>>()
        );
        for s in &d.streams {
            check(
                &s.timeline,
                &oracle(&streams[&s.stream], win),
                top,
                &format!("device {} stream {}", d.device, s.stream),
            )?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn timelines_match_the_per_ns_oracle(kernels in kernels_strategy(), top in 0usize..4) {
        check_report(&kernels, None, top)?;
    }

    /// More than 8 streams per device (the heap merge) and more than 16 keys (the map lookup).
    #[test]
    fn many_streams_match_the_oracle(kernels in kernels_on(2, 24, 120), top in 0usize..3) {
        check_report(&kernels, None, top)?;
    }

    #[test]
    fn windowed_timelines_match_the_oracle(kernels in kernels_strategy(), a in 0u64..140, b in 0u64..140) {
        let w = Window { from_ns: a.min(b), to_ns: a.max(b) };
        check_report(&kernels, Some(w), 3)?;
    }

    #[test]
    fn shuffling_records_changes_nothing(
        (kernels, shuffled) in kernels_strategy().prop_flat_map(|k| (Just(k.clone()), Just(k).prop_shuffle())),
        api in proptest::collection::vec((1u64..40, 0u64..100, 0u64..20), 0..30),
        api_seed in any::<u64>(),
    ) {
        let api: Vec<(u64, Ns, Ns)> = api.into_iter().map(|(c, s, d)| (c, s, s + d)).collect();
        // A different ordering of the API records too: rotate by a random amount and reverse.
        let mut api2 = api.clone();
        if !api2.is_empty() {
            let k = (api_seed as usize) % api2.len();
            api2.rotate_left(k);
            api2.reverse();
        }
        let opts = Options { window: None, top: 3, orphan_list: 4, steps: None };
        let a = analyze(&build(&kernels, &api), &opts).unwrap();
        let b = analyze(&build(&shuffled, &api2), &opts).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn correlation_matches_a_nested_loop_join(
        kernels in kernels_strategy(),
        api in proptest::collection::vec((0u64..40, 0u64..100, 0u64..20), 0..30),
    ) {
        let api: Vec<(u64, Ns, Ns)> = api.into_iter().map(|(c, s, d)| (c, s, s + d)).collect();
        let trace = build(&kernels, &api);
        let r = analyze(&trace, &Options { window: None, top: 3, orphan_list: 4, steps: None }).unwrap();
        let mut orphans = Vec::new();
        let mut lat = Vec::new();
        let mut attributed = 0u64;
        for k in &kernels {
            // All runtime calls: the earliest start wins, then the earliest end.
            let best = api.iter().filter(|a| a.0 == k.2 && a.0 != 0).min_by_key(|a| (a.1, a.2));
            match best {
                Some(a) => {
                    attributed += 1;
                    // A kernel with no timestamps (start = end = 0: profiled) has no latency.
                    if (k.3, k.4) != (0, 0) {
                        lat.push((k.2, k.3 as i64 - a.2 as i64));
                    }
                }
                None => orphans.push(k.2),
            }
        }
        orphans.sort_unstable();
        lat.sort_unstable();
        prop_assert_eq!(r.correlation.kernels, kernels.len() as u64);
        prop_assert_eq!(r.correlation.orphans, orphans.len() as u64);
        prop_assert_eq!(r.correlation.attributed, attributed);
        let listed: Vec<u64> = orphans.iter().copied().filter(|&c| c != 0).take(4).collect();
        prop_assert_eq!(&r.correlation.orphan_correlation_ids, &listed);
        let (got_lat, got_orphans) = launch_latencies(&trace, None);
        prop_assert_eq!(got_lat, lat.clone());
        prop_assert_eq!(got_orphans, orphans);
        let mut values: Vec<i64> = lat.iter().map(|l| l.1).collect();
        values.sort_unstable();
        prop_assert_eq!(r.launch_latency.min_ns, values.first().copied());
        prop_assert_eq!(r.launch_latency.max_ns, values.last().copied());
        prop_assert_eq!(r.launch_latency.negative, values.iter().filter(|&&v| v < 0).count() as u64);
    }
}
