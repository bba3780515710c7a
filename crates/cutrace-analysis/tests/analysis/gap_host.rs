//! The host's side of a device's idle gaps: when the next kernel's launch returned, how much of
//! the gap CUDA calls covered (a union over threads), by name, and the host NVTX ranges open in
//! it; in a trace merged from several processes, only the calls of the process whose kernel
//! ends the gap.

use cutrace_analysis::{analyze, NamedSpan, Options};
use cutrace_testkit::records::{call, host_range, kernel, launch};
use cutrace_trace::{Interner, Trace};

fn span(name: &str, ns: u64) -> NamedSpan {
    NamedSpan {
        name: name.into(),
        ns,
    }
}

#[test]
fn a_gap_names_the_late_launch_and_the_calls_and_ranges_inside_it() {
    let mut i = Interner::new();
    // Kernel 1 [0, 100), kernel 2 [1000, 1100): one gap [100, 1000).
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
    ];
    let api_calls = vec![
        launch(&mut i, 1, 0, 10),
        // Two threads overlap: the union [200, 700) counts once.
        call(&mut i, "cudaMalloc", 1, 1, 200, 600),
        call(&mut i, "cudaMemcpy", 1, 2, 400, 700),
        // Starts before the gap: only its part inside counts.
        call(&mut i, "cudaMalloc", 1, 3, 50, 150),
        launch(&mut i, 2, 900, 950),
    ];
    let ranges = vec![host_range(&mut i, "load", 150, 800)];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ranges,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let g = &r.devices[0].timeline.largest_gaps[0];
    assert_eq!((g.start_ns, g.end_ns), (100, 1_000));
    let h = g.host.as_ref().expect("a device gap has its host side");
    let l = h.next_launch.as_ref().expect("kernel b's launch");
    assert_eq!(
        (l.name.as_str(), l.start_ns, l.end_ns),
        ("cudaLaunchKernel", 900, 950)
    );
    assert_eq!(l.returned_into_gap_ns, 850);
    // [100, 150) + [200, 700) + [900, 950)
    assert_eq!(h.in_calls_ns, 50 + 500 + 50);
    assert_eq!(
        h.calls,
        [
            span("cudaMalloc", 50 + 400),
            span("cudaMemcpy", 300),
            span("cudaLaunchKernel", 50)
        ]
    );
    assert_eq!(h.ranges, [span("load", 650)]);
    // Stream gaps carry no host side.
    assert!(r.devices[0].streams[0].timeline.largest_gaps[0]
        .host
        .is_none());
    // Record order does not matter.
    let mut shuffled = t.clone();
    shuffled.api_calls.reverse();
    assert_eq!(analyze(&shuffled, &Options::default()).unwrap(), r);
}

#[test]
fn a_launch_before_the_gap_is_a_negative_return_and_other_processes_are_left_out() {
    let mut i = Interner::new();
    let part1 = 1u64 << 32;
    // Process 200 (part 1): its kernel ends a gap whose launch returned before the gap began.
    let kernels = vec![
        kernel(&mut i, "a", 0, part1 + 7, part1 + 1, 0, 100),
        kernel(&mut i, "b", 0, part1 + 7, part1 + 2, 1_000, 1_100),
    ];
    let mut l1 = launch(&mut i, part1 + 1, 0, 10);
    let mut l2 = launch(&mut i, part1 + 2, 60, 80);
    l1.process = 200;
    l2.process = 200;
    let api_calls = vec![
        l1,
        l2,
        call(&mut i, "cudaStreamSynchronize", 200, 1, 100, 990),
        // Process 100 on the same GPU: not this gap's host.
        call(&mut i, "cudaMalloc", 100, 1, 100, 900),
    ];
    let mut t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    t.meta.id_parts = vec![Some(100), Some(200)];
    let r = analyze(&t, &Options::default()).unwrap();
    let g = &r.devices[0].timeline.largest_gaps[0];
    assert_eq!(g.after.as_ref().unwrap().pid, Some(200));
    let h = g.host.as_ref().unwrap();
    assert_eq!(h.next_launch.as_ref().unwrap().returned_into_gap_ns, -20);
    assert_eq!(h.calls, [span("cudaStreamSynchronize", 890)]);
    assert_eq!(h.in_calls_ns, 890);
    assert!(h.ranges.is_empty());
}

#[test]
fn a_kernel_without_its_launch_call_leaves_next_launch_empty() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let h = r.devices[0].timeline.largest_gaps[0].host.as_ref().unwrap();
    assert!(h.next_launch.is_none() && h.calls.is_empty() && h.in_calls_ns == 0);
}

/// Gaps of two devices overlap in time: a call reaches each gap it overlaps, and each device's
/// gap names its own next launch.
#[test]
fn overlapping_gaps_of_two_devices_each_get_their_calls() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
        kernel(&mut i, "c", 1, 9, 3, 0, 500),
        kernel(&mut i, "d", 1, 9, 4, 2_000, 2_100),
    ];
    let api_calls = vec![
        launch(&mut i, 2, 900, 950),
        launch(&mut i, 4, 1_900, 1_950),
        // Covers device 0's gap [100, 1000) from 300 and device 1's [500, 2000) to 1200.
        call(&mut i, "cudaDeviceSynchronize", 1, 1, 300, 1_200),
        // Only in device 1's gap.
        call(&mut i, "cudaFree", 1, 2, 1_300, 1_400),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let h0 = r.devices[0].timeline.largest_gaps[0].host.as_ref().unwrap();
    assert_eq!(h0.next_launch.as_ref().unwrap().end_ns, 950);
    assert_eq!(
        h0.calls,
        [
            span("cudaDeviceSynchronize", 700),
            span("cudaLaunchKernel", 50)
        ]
    );
    let h1 = r.devices[1].timeline.largest_gaps[0].host.as_ref().unwrap();
    assert_eq!(h1.next_launch.as_ref().unwrap().end_ns, 1_950);
    assert_eq!(
        h1.calls,
        [
            span("cudaDeviceSynchronize", 700),
            span("cudaFree", 100),
            span("cudaLaunchKernel", 100)
        ]
    );
    // The union: [500, 1200) holds device 0's launch [900, 950); then [1300, 1400) and
    // [1900, 1950).
    assert_eq!(h1.in_calls_ns, 700 + 100 + 50);
}

/// A torch.profiler trace has no part numbers, but its API calls name their process: the
/// launch's process is the gap's host, another process's calls are left out.
#[test]
fn without_part_numbers_the_launch_names_the_process() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
    ];
    let api_calls = vec![
        launch(&mut i, 1, 0, 10),
        launch(&mut i, 2, 900, 950), // process 1
        call(&mut i, "cudaMalloc", 1, 1, 200, 300),
        call(&mut i, "cudaFree", 2, 1, 200, 800), // another process
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let h = r.devices[0].timeline.largest_gaps[0].host.as_ref().unwrap();
    assert_eq!(
        h.calls,
        [span("cudaMalloc", 100), span("cudaLaunchKernel", 50)]
    );
    assert_eq!(h.in_calls_ns, 150);
}

/// Two kernels of one launch (a CUDA graph's nodes share the launch's correlation id): the gap
/// between them names that launch, which returned before the gap began.
#[test]
fn kernels_of_one_graph_launch_share_their_launch() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "n1", 0, 7, 5, 1_000, 1_100),
        kernel(&mut i, "n2", 0, 7, 5, 1_200, 1_300),
    ];
    let mut g = launch(&mut i, 5, 500, 600);
    g.name = i.intern("cudaGraphLaunch");
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls: vec![g],
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let gap = &r.devices[0].timeline.largest_gaps[0];
    assert_eq!(gap.before.as_ref().unwrap().correlation_id, 5);
    let l = gap.host.as_ref().unwrap().next_launch.as_ref().unwrap();
    assert_eq!(
        (l.name.as_str(), l.returned_into_gap_ns),
        ("cudaGraphLaunch", -500)
    );
}

/// Every gap of a device split where its next kernel's launch returned: before (the host had
/// not launched it yet), after (launched, not started), unknown (no launch call); the parts add
/// up to the idle time.
#[test]
fn idle_time_splits_at_each_next_launch() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        // Gap [100, 1000): launch returned at 950.
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
        // Gap [1100, 2000): launched at 500, long before (queued).
        kernel(&mut i, "c", 0, 7, 3, 2_000, 2_100),
        // Gap [2100, 3000): no launch call (an orphan).
        kernel(&mut i, "d", 0, 7, 4, 3_000, 3_100),
        // Gap [3100, 4000): the launch returned after the kernel started: all of it before.
        kernel(&mut i, "e", 0, 7, 5, 4_000, 4_100),
    ];
    let api_calls = vec![
        launch(&mut i, 1, 0, 10),
        launch(&mut i, 2, 900, 950),
        launch(&mut i, 3, 400, 500),
        launch(&mut i, 5, 3_900, 4_050),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let d = &r.devices[0];
    let x = d.idle_split.unwrap();
    assert_eq!(x.before_launch_ns, 850 + 900);
    assert_eq!(x.after_launch_ns, 50 + 900);
    assert_eq!(x.unknown_ns, 900);
    assert_eq!(
        (x.gaps_before_launch, x.gaps_after_launch, x.gaps_unknown),
        (2, 2, 1)
    );
    assert_eq!(
        x.before_launch_ns + x.after_launch_ns + x.unknown_ns,
        d.timeline.idle_ns
    );
}

/// Nested ranges: those covering at least half the gap, innermost first (the most specific
/// thing the host was inside); a range covering a sliver is left out.
#[test]
fn ranges_are_listed_innermost_first() {
    let mut i = Interner::new();
    let kernels = vec![
        kernel(&mut i, "a", 0, 7, 1, 0, 100),
        kernel(&mut i, "b", 0, 7, 2, 1_000, 1_100),
    ];
    let api_calls = vec![launch(&mut i, 1, 0, 10), launch(&mut i, 2, 900, 950)];
    let mut range = |name: &str, s: u64, e: u64| host_range(&mut i, name, s, e);
    let ranges = vec![
        range("step", 0, 2_000),
        range("fwd", 100, 1_000),
        range("load", 150, 900),
        range("tiny", 120, 130),
    ];
    let t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ranges,
        ..Trace::default()
    };
    let r = analyze(&t, &Options::default()).unwrap();
    let h = r.devices[0].timeline.largest_gaps[0].host.as_ref().unwrap();
    assert_eq!(
        h.ranges,
        [span("load", 750), span("fwd", 900), span("step", 900)]
    );
}
