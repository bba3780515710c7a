//! Memory over time: a worked example with every figure planted (peak, the live set at the peak
//! and what made it, leaks, churn per step, the allocator's totals, the calls' host time, a
//! window), and a property test against a brute-force replay of every allocation and free.

use cutrace_analysis::memory::{memory_report, MemoryPool, NO_RANGE};
use cutrace_analysis::{steps, StepMatch, Window};
use cutrace_testkit::records::{complete_trace, host_range};
use cutrace_trace::{
    ApiCall, ApiKind, HostOp, HostOpKind, Interner, MemoryEvent, MemoryLevel, MemoryOp,
    MemoryPlace, Ns, Trace,
};
use proptest::prelude::*;

fn ev(ts_ns: Ns, op: MemoryOp, address: u64, bytes: Option<u64>) -> MemoryEvent {
    MemoryEvent {
        ts_ns,
        process: 1,
        thread: 1,
        place: MemoryPlace::Gpu,
        device: 0,
        level: MemoryLevel::Framework,
        op,
        address: Some(address),
        bytes,
        total_allocated: None,
        total_reserved: None,
        correlation_id: 0,
    }
}

fn call(i: &mut Interner, name: &str, kind: ApiKind, start: Ns, end: Ns) -> ApiCall {
    ApiCall {
        kind,
        name: i.intern(name),
        cbid: 0,
        process: 1,
        thread: 1,
        correlation_id: 0,
        start_ns: start,
        end_ns: end,
        return_value: 0,
    }
}

/// Two steps; `forward` in the first, `backward` in the second. A free of memory allocated
/// before the trace, six allocations (one of unknown size), three frees; the allocator's totals
/// are the replay plus 10,000 bytes allocated before the trace, with 20,000 reserved. One CPU
/// allocation on another thread, outside every range. A runtime allocation and free call, and
/// a driver call inside the first (not counted twice).
fn planted() -> Trace {
    use MemoryOp::{Alloc, Free};
    let mut i = Interner::new();
    let ranges = vec![
        host_range(&mut i, "ProfilerStep#1", 0, 1_000),
        host_range(&mut i, "forward", 100, 400),
        host_range(&mut i, "ProfilerStep#2", 1_000, 2_000),
        host_range(&mut i, "backward", 1_100, 1_500),
    ];
    let api = vec![
        call(&mut i, "cudaMalloc", ApiKind::Runtime, 1_050, 1_090),
        call(&mut i, "cuMemAlloc_v2", ApiKind::Driver, 1_060, 1_080),
        call(&mut i, "cudaFree", ApiKind::Runtime, 1_610, 1_650),
        call(&mut i, "cudaLaunchKernel", ApiKind::Runtime, 1_700, 1_710),
    ];
    let mut memory = vec![
        ev(50, Free, 0x9, Some(64)),
        ev(100, Alloc, 0x100, Some(1_000)),
        ev(200, Alloc, 0x200, Some(3_000)),
        ev(500, Free, 0x100, Some(1_000)),
        ev(600, Alloc, 0x300, Some(500)),
        ev(1_100, Alloc, 0x400, Some(4_000)),
        ev(1_200, Free, 0x200, Some(3_000)),
        ev(1_300, Alloc, 0x500, None),
        ev(1_600, Free, 0x400, Some(4_000)),
        ev(1_700, Alloc, 0x600, Some(100)),
    ];
    let live_after = [
        0u64, 1_000, 4_000, 3_000, 3_500, 7_500, 4_500, 4_500, 500, 600,
    ];
    for (e, live) in memory.iter_mut().zip(live_after) {
        e.total_allocated = Some(10_000 + live);
        e.total_reserved = Some(20_000);
    }
    let mut cpu = ev(300, Alloc, 0x10, Some(10));
    cpu.place = MemoryPlace::Cpu;
    cpu.thread = 2;
    memory.push(cpu);
    Trace {
        ranges,
        memory,
        ..complete_trace(i, Vec::new(), api)
    }
}

fn report_of(t: &Trace, window: Option<Window>) -> cutrace_analysis::MemoryReport {
    let st = steps(t, window.as_ref(), &StepMatch::profiler_steps());
    memory_report(t, window.as_ref(), st.as_ref(), 10).expect("a memory report")
}

fn gpu(r: &cutrace_analysis::MemoryReport) -> &MemoryPool {
    r.pools
        .iter()
        .find(|p| p.place == "gpu")
        .expect("the GPU pool")
}

fn sites(p: &[cutrace_analysis::memory::SiteBytes]) -> Vec<(&str, u64, u64)> {
    p.iter()
        .map(|s| (s.site.as_str(), s.allocations, s.bytes))
        .collect()
}

#[test]
fn planted_peak_live_set_leaks_and_churn() {
    let t = planted();
    let r = report_of(&t, None);
    assert_eq!(r.events, 11);
    assert_eq!(r.pools.len(), 2);
    let p = gpu(&r);
    assert_eq!((p.level, p.pid, p.device), ("framework", 1, 0));
    assert_eq!((p.allocs, p.frees), (6, 4));
    assert_eq!((p.alloc_bytes, p.free_bytes), (8_600, 8_064));
    assert_eq!(
        (p.frees_without_alloc, p.frees_without_alloc_bytes),
        (1, 64)
    );
    assert_eq!((p.allocs_unknown_size, p.unknown_events), (1, 0));
    assert_eq!((p.replaced_live, p.free_size_mismatches), (0, 0));
    let peak = p.peak.as_ref().expect("a peak");
    // The trace starts at its first record, the range at 0 ns.
    assert_eq!(
        (peak.bytes, peak.at_ns, peak.at_offset_ns, peak.step),
        (7_500, 1_100, 1_100, Some(2))
    );
    assert_eq!((peak.live.allocations, peak.live.bytes), (3, 7_500));
    let largest: Vec<_> = peak
        .live
        .largest
        .iter()
        .map(|a| (a.address, a.bytes, a.site.as_str()))
        .collect();
    assert_eq!(
        largest,
        vec![
            (0x400, Some(4_000), "backward"),
            (0x200, Some(3_000), "forward"),
            (0x300, Some(500), "ProfilerStep#1"),
        ]
    );
    assert_eq!(
        sites(&peak.live.by_site),
        vec![
            ("backward", 1, 4_000),
            ("forward", 1, 3_000),
            ("ProfilerStep#1", 1, 500)
        ]
    );
    let rp = p.reported_peak.as_ref().expect("the allocator's peak");
    assert_eq!(
        (rp.allocated_bytes, rp.at_ns, rp.step, rp.reserved_bytes),
        (17_500, 1_100, Some(2), Some(20_000))
    );
    assert_eq!(rp.reserved_minus_allocated_bytes, Some(2_500));
    // Leaks: C (500, step 1), E (unknown size, backward), F (100, step 2).
    let end = &p.live_at_end;
    assert_eq!((end.allocations, end.bytes), (3, 600));
    assert_eq!(
        sites(&end.by_site),
        vec![
            ("ProfilerStep#1", 1, 500),
            ("ProfilerStep#2", 1, 100),
            ("backward", 1, 0)
        ]
    );
    let st: Vec<_> = p
        .steps
        .iter()
        .map(|s| {
            (
                s.step,
                s.allocs,
                s.frees,
                s.alloc_bytes,
                s.free_bytes,
                s.peak_bytes,
            )
        })
        .collect();
    assert_eq!(
        st,
        vec![
            (1, 3, 2, 4_500, 1_064, 4_000),
            (2, 3, 2, 4_100, 7_000, 7_500)
        ]
    );
    let cpu = r.pools.iter().find(|p| p.place == "cpu").unwrap();
    assert_eq!(cpu.peak.as_ref().unwrap().live.largest[0].site, NO_RANGE);
    assert!(cpu.reported_peak.is_none());
    assert_eq!(r.api_churn.len(), 1);
    let c = &r.api_churn[0];
    assert_eq!(
        (c.kind, c.alloc_calls, c.free_calls, c.summed_host_ns),
        ("runtime", 1, 1, 80)
    );
    assert_eq!(
        c.steps
            .iter()
            .map(|s| (s.step, s.alloc_calls, s.free_calls))
            .collect::<Vec<_>>(),
        vec![(2, 1, 1)]
    );
}

/// In a window, what was live as it began counts toward its peak; its counts are its own.
#[test]
fn a_window_starts_with_what_was_live() {
    let t = planted();
    let r = report_of(
        &t,
        Some(Window {
            from_ns: 1_200,
            to_ns: 2_000,
        }),
    );
    let p = gpu(&r);
    let peak = p.peak.as_ref().unwrap();
    assert_eq!(
        (
            peak.bytes,
            peak.at_ns,
            peak.at_offset_ns,
            peak.live.allocations
        ),
        (7_500, 1_200, 0, 3)
    );
    assert_eq!((p.allocs, p.frees, p.frees_without_alloc), (2, 2, 0));
    assert_eq!(p.live_at_end.bytes, 600);
    // The allocator's own figure is the largest it reported inside the window.
    assert_eq!(p.reported_peak.as_ref().unwrap().allocated_bytes, 14_500);
}

/// Without memory events or allocation calls, there is no memory section.
#[test]
fn no_memory_no_section() {
    let t = complete_trace(Interner::new(), Vec::new(), Vec::new());
    assert!(memory_report(&t, None, None, 10).is_none());
}

/// The live allocations after event `k` (of `evs`, in replay order), by brute force: an
/// allocation is live if no later event up to `k` at its address allocates or frees.
fn live_after(evs: &[MemoryEvent], k: usize) -> Vec<(u64, Option<u64>)> {
    let mut out = Vec::new();
    for a in 0..=k {
        if evs[a].op != MemoryOp::Alloc {
            continue;
        }
        let ended =
            (a + 1..=k).any(|e| evs[e].address == evs[a].address && evs[e].op != MemoryOp::Unknown);
        if !ended {
            out.push((evs[a].address.expect("addressed"), evs[a].bytes));
        }
    }
    out.sort();
    out
}

fn known(live: &[(u64, Option<u64>)]) -> u64 {
    live.iter().map(|l| l.1.unwrap_or(0)).sum()
}

fn arb_event() -> impl Strategy<Value = MemoryEvent> {
    (
        0u64..40,
        prop_oneof![
            4 => Just(MemoryOp::Alloc),
            3 => Just(MemoryOp::Free),
            1 => Just(MemoryOp::Unknown)
        ],
        0u64..6,
        prop::option::weighted(0.9, 1u64..1_000),
    )
        .prop_map(|(ts, op, addr, bytes)| {
            ev(
                ts,
                op,
                addr,
                if op == MemoryOp::Unknown { None } else { bytes },
            )
        })
}

proptest! {
    #[test]
    fn replay_matches_brute_force(evs in prop::collection::vec(arb_event(), 1..60)) {
        let t = Trace { memory: evs.clone(), ..Trace::default() };
        let r = memory_report(&t, None, None, 1_000).unwrap();
        let p = &r.pools[0];
        let mut order = evs.clone();
        order.sort_by_key(|e| e.ts_ns);
        let n = order.len();
        let bytes: Vec<u64> = (0..n).map(|k| known(&live_after(&order, k))).collect();
        let max = bytes.iter().copied().max().unwrap_or(0);
        match &p.peak {
            None => prop_assert_eq!(max, 0),
            Some(peak) => {
                let k = bytes.iter().position(|&b| b == max).unwrap();
                prop_assert_eq!(peak.bytes, max);
                prop_assert_eq!(peak.at_ns, order[k].ts_ns);
                let mut got: Vec<_> =
                    peak.live.largest.iter().map(|a| (a.address, a.bytes)).collect();
                got.sort();
                prop_assert_eq!(got, live_after(&order, k));
            }
        }
        let end = live_after(&order, n - 1);
        prop_assert_eq!(p.live_at_end.allocations, end.len() as u64);
        prop_assert_eq!(p.live_at_end.bytes, known(&end));
        // A free pairs when the previous event at its address (that says what it is)
        // allocated; an allocation replaces a live one likewise.
        let prev_alloc = |k: usize| {
            (0..k).rev()
                .find(|&e| order[e].address == order[k].address && order[e].op != MemoryOp::Unknown)
                .is_some_and(|e| order[e].op == MemoryOp::Alloc)
        };
        let ord = &order;
        let of = |op| (0..n).filter(move |&k| ord[k].op == op);
        prop_assert_eq!(p.frees_without_alloc, of(MemoryOp::Free).filter(|&k| !prev_alloc(k)).count() as u64);
        prop_assert_eq!(p.replaced_live, of(MemoryOp::Alloc).filter(|&k| prev_alloc(k)).count() as u64);
        prop_assert_eq!(p.allocs, of(MemoryOp::Alloc).count() as u64);
        prop_assert_eq!(p.unknown_events, of(MemoryOp::Unknown).count() as u64);
    }
}

/// torch 1.8 wrote no `Addr`: such events replay by their sizes alone (a free takes back as
/// many live unaddressed bytes, or is one whose allocation came before the trace), beside
/// addressed ones in the same pool.
#[test]
fn events_without_an_address_replay_by_size() {
    use MemoryOp::{Alloc, Free};
    let bare = |ts, op, bytes| MemoryEvent {
        address: None,
        ..ev(ts, op, 0, Some(bytes))
    };
    let memory = vec![
        bare(10, Free, 8),
        bare(20, Alloc, 100),
        ev(25, Alloc, 0x40, Some(50)),
        bare(30, Alloc, 30),
        bare(40, Free, 100),
        bare(50, Free, 40),
        bare(60, Alloc, 5),
    ];
    let t = Trace {
        memory,
        ..Trace::default()
    };
    let r = memory_report(&t, None, None, 10).unwrap();
    let p = &r.pools[0];
    assert_eq!((p.allocs, p.frees, p.frees_without_alloc), (4, 3, 2));
    assert_eq!(p.frees_without_alloc_bytes, 48);
    let peak = p.peak.as_ref().unwrap();
    assert_eq!((peak.bytes, peak.at_ns), (180, 30));
    assert_eq!(
        (peak.live.unaddressed_bytes, peak.live.allocations),
        (130, 1)
    );
    assert_eq!(peak.live.largest[0].bytes, Some(50));
    let end = &p.live_at_end;
    assert_eq!((end.bytes, end.unaddressed_bytes), (85, 35));
}

/// `diff` compares peaks and churn: the new trace's fourth allocation is 2,000 B larger and one
/// more allocation call is made.
#[test]
fn diff_compares_peaks_and_churn() {
    use cutrace_analysis::memory::memory_diff;
    let base = planted();
    let mut new = planted();
    new.memory[5].bytes = Some(6_000);
    new.memory[8].bytes = Some(6_000);
    for e in &mut new.memory[5..10] {
        e.total_allocated = e.total_allocated.map(|t| t + 2_000);
    }
    new.memory[8].total_allocated = Some(10_500);
    let mut i = Interner::from_strings(new.strings.clone());
    new.api_calls
        .push(call(&mut i, "cudaMalloc", ApiKind::Runtime, 1_800, 1_820));
    new.strings = i.into_strings();
    let (b, n) = (report_of(&base, None), report_of(&new, None));
    let d = memory_diff(Some(&b), Some(&n)).unwrap();
    let gpu = d.pools.iter().find(|p| p.place == "gpu").unwrap();
    assert_eq!((gpu.level, gpu.device), ("framework", 0));
    assert_eq!(gpu.peak_change_bytes, Some(2_000));
    assert_eq!(gpu.reported_peak_change_bytes, Some(2_000));
    let (bs, ns) = (gpu.base.as_ref().unwrap(), gpu.new.as_ref().unwrap());
    assert_eq!((bs.peak_bytes, ns.peak_bytes), (Some(7_500), Some(9_500)));
    assert_eq!(ns.reserved_minus_allocated_bytes, Some(500));
    assert_eq!((ns.allocs, ns.frees, ns.steps), (6, 4, 2));
    assert_eq!(ns.allocs_per_step_median, Some(3));
    let (cb, cn) = (d.api_churn_base.unwrap(), d.api_churn_new.unwrap());
    assert_eq!((cb.alloc_calls, cn.alloc_calls), (1, 2));
    assert_eq!(cn.summed_host_ns - cb.summed_host_ns, 20);
    // A side without memory: its pools are absent, its changes unknown.
    let none = memory_diff(Some(&b), None).unwrap();
    assert!(none
        .pools
        .iter()
        .all(|p| p.new.is_none() && p.peak_change_bytes.is_none()));
    assert!(memory_diff(None, None).is_none());
}

/// A CUDA driver allocation (CUPTI's record names no thread) is attributed through the call its
/// correlation id joins: that call's thread's innermost range.
#[test]
fn driver_allocations_are_attributed_through_their_call() {
    let mut t = planted();
    let corr = 99;
    t.api_calls[0].correlation_id = corr;
    let mut e = ev(1_060, MemoryOp::Alloc, 0x9000, Some(1 << 20));
    e.thread = 0;
    e.process = 1;
    e.level = MemoryLevel::Driver;
    e.correlation_id = corr;
    t.memory.push(e);
    let r = report_of(&t, None);
    let p = r.pools.iter().find(|p| p.level == "driver").unwrap();
    let live = &p.live_at_end;
    assert_eq!((live.allocations, live.bytes), (1, 1 << 20));
    assert_eq!(live.largest[0].site, "ProfilerStep#2");
}

fn op(i: &mut Interner, kind: HostOpKind, name: &str, thread: u64, start: Ns, end: Ns) -> HostOp {
    HostOp {
        kind,
        name: i.intern(name),
        process: 1,
        thread,
        start_ns: start,
        end_ns: end,
        external_id: 0,
    }
}

/// With CPU ops, an allocation's site is the innermost op of its thread holding its time (start
/// inclusive, end exclusive), not the range around it; outside every op, the range; a Python
/// call or another thread's op is no site.
#[test]
fn allocations_are_attributed_to_their_innermost_cpu_op() {
    use HostOpKind::{CpuOp, PythonFunction};
    let mut t = planted();
    let mut i = Interner::from_strings(std::mem::take(&mut t.strings));
    t.host_ops = vec![
        // Around the 3,000 B allocation at 200 (inside `forward`).
        op(&mut i, CpuOp, "aten::linear", 1, 150, 450),
        op(&mut i, CpuOp, "aten::empty", 1, 200, 201),
        // The 4,000 B allocation at 1,100 is in aten::mm inside aten::addmm; the one of unknown
        // size at 1,300 in aten::addmm only (aten::mm ended at 1,300).
        op(&mut i, CpuOp, "aten::addmm", 1, 1_050, 1_400),
        op(&mut i, CpuOp, "aten::mm", 1, 1_080, 1_300),
        // Ends as the 100 B allocation at 1,700 happens: not its site.
        op(&mut i, CpuOp, "aten::relu", 1, 1_650, 1_700),
        // A Python call and another thread's op hold it: neither is a site.
        op(
            &mut i,
            PythonFunction,
            "train.py(12): step",
            1,
            1_600,
            1_800,
        ),
        op(&mut i, CpuOp, "aten::copy_", 2, 1_600, 1_800),
        // Holds the CPU allocation at 300 on thread 2.
        op(&mut i, CpuOp, "aten::to", 2, 250, 350),
    ];
    t.strings = i.into_strings();
    let r = report_of(&t, None);
    let p = gpu(&r);
    let peak = p.peak.as_ref().unwrap();
    let largest: Vec<_> = peak
        .live
        .largest
        .iter()
        .map(|a| (a.address, a.site.as_str()))
        .collect();
    assert_eq!(
        largest,
        vec![
            (0x400, "aten::mm"),
            (0x200, "aten::empty"),
            (0x300, "ProfilerStep#1"),
        ]
    );
    assert_eq!(
        sites(&p.live_at_end.by_site),
        vec![
            ("ProfilerStep#1", 1, 500),
            ("ProfilerStep#2", 1, 100),
            ("aten::addmm", 1, 0)
        ]
    );
    let cpu = r.pools.iter().find(|p| p.place == "cpu").unwrap();
    assert_eq!(cpu.peak.as_ref().unwrap().live.largest[0].site, "aten::to");
}
