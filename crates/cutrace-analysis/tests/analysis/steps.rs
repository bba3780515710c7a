//! Steps: host ranges that mark iterations, each with its GPUs' busy time during it. Worked
//! examples with every figure written out, a merged two-process trace (a step sees only its own
//! process's kernels), and a property test against a per-nanosecond brute force.

use cutrace_analysis::{steps, StepMatch, Window};
use cutrace_testkit::records::{complete_trace, host_range, kernel};
use cutrace_trace::{Interner, Kernel, Ns, NvtxRange, RangeDomain, Trace};
use proptest::prelude::*;

fn trace(i: Interner, kernels: Vec<Kernel>, ranges: Vec<NvtxRange>) -> Trace {
    Trace {
        ranges,
        ..complete_trace(i, kernels, Vec::new())
    }
}

/// Three ProfilerStep ranges of 1,000 ns (the last 2,000 ns) and a "forward" range inside the
/// first; kernels on GPU 0 (two overlapping in step 1, one crossing from step 1 into step 2, a
/// slow step 3 with little GPU work) and one on GPU 1 in step 2.
fn three_steps() -> Trace {
    let mut i = Interner::new();
    let ranges = vec![
        host_range(&mut i, "ProfilerStep#1", 0, 1_000),
        host_range(&mut i, "forward", 100, 400),
        host_range(&mut i, "ProfilerStep#2", 1_000, 2_000),
        host_range(&mut i, "ProfilerStep#3", 2_000, 4_000),
    ];
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 100, 500),
        kernel(&mut i, "b", 0, 8, 2, 300, 600),
        // Crosses into step 2: 200 ns in each.
        kernel(&mut i, "c", 0, 7, 3, 800, 1_200),
        kernel(&mut i, "d", 1, 7, 4, 1_500, 1_900),
        kernel(&mut i, "e", 0, 7, 5, 2_500, 2_600),
    ];
    trace(i, kernels, ranges)
}

#[test]
fn each_step_gets_its_gpus_busy_time_clipped_to_it() {
    let t = three_steps();
    let s = steps(&t, None, &StepMatch::profiler_steps()).unwrap();
    assert_eq!(s.matched, "ProfilerStep#*");
    assert_eq!((s.count, s.processes), (3, 1));
    let names: Vec<&str> = s.steps.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    );
    let d = |k: usize| -> Vec<(u32, Ns)> {
        s.steps[k]
            .devices
            .iter()
            .map(|d| (d.device, d.busy_ns))
            .collect()
    };
    // Step 1: a ∪ b = [100, 600) = 500, plus c's [800, 1000) = 200 → 700 of 1,000. GPU 1 is
    // listed at 0: the process uses it (in step 2), and a step it idles in is what to see.
    assert_eq!(d(0), [(0, 700), (1, 0)]);
    assert_eq!(s.steps[0].kernels, 3);
    assert_eq!(s.steps[0].devices[0].busy_pct, 70.0);
    // Step 2: c's [1000, 1200) on GPU 0, d on GPU 1: devices are never unioned together.
    assert_eq!(d(1), [(0, 200), (1, 400)]);
    assert_eq!(s.steps[1].kernels, 2);
    // Step 3: 100 of 2,000.
    assert_eq!(d(2), [(0, 100), (1, 0)]);
    assert_eq!(s.steps[2].devices[0].busy_pct, 5.0);
    assert_eq!(
        (s.duration_min_ns, s.duration_median_ns, s.duration_max_ns),
        (Some(1_000), Some(1_000), Some(2_000))
    );
    let idx: Vec<u64> = s.steps.iter().map(|x| x.index).collect();
    assert_eq!(idx, [1, 2, 3]);
    // GPU 0: 70 %, 20 %, 5 % → nearest-rank median 20 %.
    let g0 = &s.devices[0];
    assert_eq!(
        (g0.device, g0.steps, g0.idle_steps, g0.busy_ns),
        (0, 3, 0, 1_000)
    );
    assert_eq!((g0.busy_pct_median, g0.busy_pct_min), (20.0, 5.0));
    // GPU 1: 0 %, 40 %, 0 % over all three steps, idle in two: median 0 %.
    let g1 = &s.devices[1];
    assert_eq!(
        (g1.device, g1.steps, g1.idle_steps, g1.busy_ns),
        (1, 3, 2, 400)
    );
    assert_eq!((g1.busy_pct_median, g1.busy_pct_min), (0.0, 0.0));
    assert_eq!(
        (
            s.zero_length_left_out,
            s.nested_left_out,
            s.cut_by_window_left_out
        ),
        (0, 0, 0)
    );
}

#[test]
fn names_exact_or_by_prefix_and_clipped_to_a_window() {
    let t = three_steps();
    let f = steps(&t, None, &StepMatch::parse("forward")).unwrap();
    assert_eq!((f.count, f.matched.as_str()), (1, "forward"));
    // forward [100, 400): a [100, 400) ∪ b [300, 400) = 300, all of it.
    assert_eq!(f.steps[0].devices[0].busy_ns, 300);
    assert_eq!(f.steps[0].kernels, 2);
    assert!(steps(&t, None, &StepMatch::parse("ProfilerStep")).is_none());
    assert_eq!(
        steps(&t, None, &StepMatch::parse("Profiler*"))
            .unwrap()
            .count,
        3
    );
    // The window [900, 2,100) holds step 2 whole and cuts steps 1 and 3: a cut step's length
    // is not a step time, so they are left out, and counted.
    let w = |a: Ns, b: Ns| {
        Window::resolve(
            Some(cutrace_analysis::TimeArg::Absolute(a)),
            Some(cutrace_analysis::TimeArg::Absolute(b)),
            0,
        )
        .unwrap()
    };
    let s = steps(&t, w(900, 2_100).as_ref(), &StepMatch::profiler_steps()).unwrap();
    let spans: Vec<(Ns, Ns)> = s.steps.iter().map(|x| (x.start_ns, x.end_ns)).collect();
    assert_eq!(spans, [(1_000, 2_000)]);
    assert_eq!(s.cut_by_window_left_out, 2);
    assert_eq!(s.duration_median_ns, Some(1_000));
    // Every step cut: none kept, said (not "no such ranges").
    let s = steps(&t, w(1_500, 2_500).as_ref(), &StepMatch::profiler_steps()).unwrap();
    assert_eq!((s.count, s.cut_by_window_left_out), (0, 2));
    assert_eq!(s.duration_median_ns, None);
    assert!(s.devices.is_empty());
    // GPU-domain ranges are never steps.
    let mut g = three_steps();
    for r in &mut g.ranges {
        r.domain = RangeDomain::Gpu;
    }
    assert!(steps(&g, None, &StepMatch::profiler_steps()).is_none());
}

#[test]
fn nested_and_zero_length_steps_are_left_out_and_counted() {
    let mut i = Interner::new();
    let ranges = vec![
        host_range(&mut i, "step", 0, 1_000),
        // The same annotation nested (on another thread too): its GPU work would count twice.
        host_range(&mut i, "step", 200, 400),
        NvtxRange {
            thread: 2,
            ..host_range(&mut i, "step", 0, 1_000)
        },
        host_range(&mut i, "step", 1_500, 1_500),
        host_range(&mut i, "step", 2_000, 3_000),
    ];
    let kernels = vec![kernel(&mut i, "k", 0, 7, 1, 250, 350)];
    let t = trace(i, kernels, ranges);
    let s = steps(&t, None, &StepMatch::parse("step")).unwrap();
    let spans: Vec<(Ns, Ns)> = s.steps.iter().map(|x| (x.start_ns, x.end_ns)).collect();
    assert_eq!(spans, [(0, 1_000), (2_000, 3_000)]);
    assert_eq!((s.nested_left_out, s.zero_length_left_out), (2, 1));
    // The kernel counts once; the second step is a GPU-idle step, and it shows.
    assert_eq!(s.devices[0].busy_ns, 100);
    assert_eq!((s.devices[0].steps, s.devices[0].idle_steps), (2, 1));
    assert_eq!(s.devices[0].busy_pct_min, 0.0);
    assert_eq!(s.steps[1].devices[0].busy_ns, 0);
}

#[test]
fn in_a_merged_trace_a_step_sees_only_its_own_process() {
    // Two processes (parts 0 and 1, pids 100 and 200) on the same GPU at the same time, as two
    // ranks sharing a device would be; part 1's stream ids carry 2^32.
    let mut i = Interner::new();
    let p1 = 1u64 << 32;
    let kernels = vec![
        kernel(&mut i, "mine", 0, 7, 1, 0, 300),
        kernel(&mut i, "theirs", 0, p1 + 7, p1 + 1, 200, 900),
    ];
    let mut a = host_range(&mut i, "step", 0, 1_000);
    a.process = 100;
    let mut b = a.clone();
    b.process = 200;
    let mut t = trace(i, kernels, vec![a, b]);
    t.meta.id_parts = vec![Some(100), Some(200)];
    let s = steps(&t, None, &StepMatch::parse("step")).unwrap();
    assert_eq!((s.count, s.processes), (2, 2));
    let by_pid: Vec<(u32, u64, Ns)> = s
        .steps
        .iter()
        .map(|x| (x.pid, x.kernels, x.devices[0].busy_ns))
        .collect();
    assert_eq!(by_pid, [(100, 1, 300), (200, 1, 700)]);
    // A part whose pid is unknown is charged to nobody's steps.
    t.meta.id_parts = vec![Some(100), None];
    let s = steps(&t, None, &StepMatch::parse("step")).unwrap();
    let by_pid: Vec<(u32, u64, usize)> = s
        .steps
        .iter()
        .map(|x| (x.pid, x.kernels, x.devices.len()))
        .collect();
    assert_eq!(by_pid, [(100, 1, 1), (200, 0, 0)]);
    assert_eq!(s.steps[0].devices[0].busy_ns, 300);
}

proptest! {
    /// Per-nanosecond brute force: a step's busy time on a GPU is the number of nanoseconds in
    /// the step some kernel of that GPU covers, and its kernel count the kernels that overlap it.
    #[test]
    fn busy_and_counts_match_a_brute_force(
        ks in prop::collection::vec((0u32..2, 0u64..60, 0u64..25), 0..30),
        ss in prop::collection::vec((0u64..70, 1u64..30), 1..6),
    ) {
        let mut i = Interner::new();
        let kernels: Vec<Kernel> = ks
            .iter()
            .enumerate()
            .map(|(n, &(dev, s, len))| kernel(&mut i, "k", dev, 7, n as u64 + 1, s, s + len))
            .collect();
        let ranges: Vec<NvtxRange> =
            ss.iter().map(|&(s, len)| host_range(&mut i, "step", s, s + len)).collect();
        let t = trace(i, kernels.clone(), ranges);
        let st = steps(&t, None, &StepMatch::parse("step")).unwrap();
        // Steps inside another are left out; every other one is kept.
        let inside = |a: &(u64, u64), k: usize| {
            ss.iter().enumerate().any(|(j, b)| {
                j != k && b.0 <= a.0 && a.0 + a.1 <= b.0 + b.1 && (b != a || j < k)
            })
        };
        let kept = (0..ss.len()).filter(|&k| !inside(&ss[k], k)).count();
        prop_assert_eq!(st.count as usize, kept);
        prop_assert_eq!((st.count + st.nested_left_out) as usize, ss.len());
        for step in &st.steps {
            let (s, e) = (step.start_ns, step.end_ns);
            for dev in 0..2u32 {
                let on: Vec<&Kernel> = kernels.iter().filter(|k| k.device == dev).collect();
                let covered = (s..e)
                    .filter(|&ns| on.iter().any(|k| k.start_ns <= ns && ns < k.end_ns))
                    .count() as u64;
                let got = step.devices.iter().find(|d| d.device == dev);
                // Every GPU the process used anywhere is listed, at 0 when idle in the step.
                if on.is_empty() {
                    prop_assert!(got.is_none());
                } else {
                    prop_assert_eq!(got.map(|d| d.busy_ns), Some(covered));
                }
            }
            let all = kernels.iter().filter(|k| k.start_ns < e && k.end_ns > s).count() as u64;
            prop_assert_eq!(step.kernels, all);
        }
    }
}

/// A real torch.profiler capture with a schedule (wait 1, warmup 1, active 4) on the H200
/// (`gpu/capture_torch.py`, `profiler_steps`): the host slept 5 ms before the work of
/// ProfilerStep#4, so that step is the longest and its GPU the least busy; the plan the capture
/// wrote is beside the trace.
#[test]
fn a_real_profiler_schedule_shows_the_stalled_step() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kineto");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("profiler_steps.plan")).unwrap())
            .unwrap();
    let trace = cutrace_trace::open(&root.join("profiler_steps.json.gz"), &mut |_, _| {}).unwrap();
    let st = steps(&trace, None, &StepMatch::profiler_steps()).expect("ProfilerStep# ranges");
    assert_eq!(st.count, plan["active_steps"].as_u64().unwrap());
    let stall = plan["stall_step_name"].as_str().unwrap();
    let longest = st.steps.iter().max_by_key(|s| s.duration_ns).unwrap();
    assert_eq!(longest.name, stall);
    // The stall adds the host's sleep to the step: at least 5 ms over the median step.
    let sleep_ns = plan["sleep_ms"].as_u64().unwrap() * 1_000_000;
    assert!(longest.duration_ns >= st.duration_median_ns.unwrap() + sleep_ns * 9 / 10);
    // Every step ran the same kernels; the stalled one has the lowest busy share.
    assert!(st
        .steps
        .iter()
        .all(|s| s.kernels == longest.kernels && s.kernels > 0));
    let lowest = st
        .steps
        .iter()
        .min_by(|a, b| a.devices[0].busy_pct.total_cmp(&b.devices[0].busy_pct))
        .unwrap();
    assert_eq!(lowest.name, stall);
    assert_eq!(st.devices[0].busy_pct_min, longest.devices[0].busy_pct);
}
