//! `diff`: two traces side by side. A trace against itself changes nothing; names are matched
//! across traces and ordered by the size of their change; the caveats fire on what makes a
//! comparison not like for like, and only then.

use cutrace_analysis::diff::{Caveat, OneSided};
use cutrace_analysis::{diff, DiffOptions};
use cutrace_testkit::records::{call, complete_trace, kernel, launch, seed_trace};
use cutrace_trace::{Interner, Trace};

fn top(n: usize) -> DiffOptions {
    DiffOptions {
        top: n,
        ..DiffOptions::default()
    }
}

/// Device 0: `n` kernels named `name`, each `len` ns, 1,000 ns apart, each launched 100 ns
/// before it starts (its call ends 50 ns before).
fn steady(name: &str, n: u64, len: u64) -> Trace {
    let mut i = Interner::new();
    let mut kernels = Vec::new();
    let mut api_calls = Vec::new();
    for k in 0..n {
        let start = 10_000 + k * 1_000;
        kernels.push(kernel(&mut i, name, 0, 7, k + 1, start, start + len));
        api_calls.push(launch(&mut i, k + 1, start - 100, start - 50));
    }
    complete_trace(i, kernels, api_calls)
}

#[test]
fn a_trace_against_itself_changes_nothing() {
    let t = seed_trace(&[11, 12, 13, 14, 15]);
    let d = diff(&t, &t, &top(10)).unwrap();
    assert!(d.caveats.is_empty(), "{:?}", d.caveats);
    assert_eq!(d.devices.len(), 1);
    let dev = &d.devices[0];
    assert_eq!(dev.base, dev.new);
    assert_eq!(dev.busy_pct_points, Some(0.0));
    // The worked example: stream 13 fills stream 7's hole, so busy is the whole 8,000 ns
    // window (the summed 10,800 ns would say 135 %).
    let b = dev.base.as_ref().unwrap();
    assert_eq!(
        (b.window_ns, b.busy_ns, b.idle_ns, b.gaps),
        (8_000, 8_000, 0, 0)
    );
    assert_eq!(d.launch_latency.base, d.launch_latency.new);
    assert_eq!(d.kernel_names.base, 2);
    assert_eq!((d.kernel_names.only_base, d.kernel_names.only_new), (0, 0));
    for r in d.kernels.iter().chain(&d.api) {
        assert_eq!(r.total_change_ns, 0, "{}", r.name);
        assert_eq!(r.mean_change_pct, Some(0.0), "{}", r.name);
        assert_eq!(r.base, r.new);
    }
    assert_eq!(d.kernels.len(), 2);
}

#[test]
fn names_are_matched_and_ordered_by_their_change() {
    let mut i = Interner::new();
    // base: gemm 2 × 1,000 ns, relu 1 × 100 ns, old 1 × 50 ns;
    // new:  gemm 2 × 1,500 ns, relu 1 × 100 ns, fresh 3 × 300 ns.
    let base_k = vec![
        kernel(&mut i, "gemm", 0, 7, 1, 0, 1_000),
        kernel(&mut i, "gemm", 0, 7, 2, 2_000, 3_000),
        kernel(&mut i, "relu", 0, 7, 3, 4_000, 4_100),
        kernel(&mut i, "old", 0, 7, 4, 5_000, 5_050),
    ];
    let base = Trace {
        strings: i.into_strings(),
        kernels: base_k,
        ..Trace::default()
    };
    let mut j = Interner::new();
    let new_k = vec![
        kernel(&mut j, "gemm", 0, 7, 1, 0, 1_500),
        kernel(&mut j, "gemm", 0, 7, 2, 2_000, 3_500),
        kernel(&mut j, "relu", 0, 7, 3, 4_000, 4_100),
        kernel(&mut j, "fresh", 0, 7, 4, 5_000, 5_300),
        kernel(&mut j, "fresh", 0, 7, 5, 6_000, 6_300),
        kernel(&mut j, "fresh", 0, 7, 6, 7_000, 7_300),
    ];
    let new = Trace {
        strings: j.into_strings(),
        kernels: new_k,
        ..Trace::default()
    };
    let d = diff(&base, &new, &top(10)).unwrap();
    let order: Vec<(&str, i64)> = d
        .kernels
        .iter()
        .map(|r| (r.name.as_str(), r.total_change_ns))
        .collect();
    // |+1,000| gemm, |+900| fresh, |−50| old, 0 relu.
    assert_eq!(
        order,
        [("gemm", 1_000), ("fresh", 900), ("old", -50), ("relu", 0)]
    );
    let gemm = &d.kernels[0];
    assert_eq!(gemm.base.unwrap().mean_ns, 1_000);
    assert_eq!(gemm.new.unwrap().mean_ns, 1_500);
    assert_eq!(gemm.mean_change_pct, Some(50.0));
    let fresh = &d.kernels[1];
    assert!(fresh.base.is_none());
    assert_eq!(fresh.new.unwrap().count, 3);
    assert_eq!(fresh.mean_change_pct, None);
    assert_eq!(
        (
            d.kernel_names.base,
            d.kernel_names.new,
            d.kernel_names.only_base,
            d.kernel_names.only_new
        ),
        (3, 3, 1, 1)
    );
    // `top` cuts the rows, never the counts.
    let short = diff(&base, &new, &top(2)).unwrap();
    assert_eq!(short.kernels.len(), 2);
    assert_eq!(short.kernel_names, d.kernel_names);
    // Swapping the traces negates every change.
    let back = diff(&new, &base, &top(10)).unwrap();
    for r in &back.kernels {
        let fwd = d.kernels.iter().find(|f| f.name == r.name).unwrap();
        assert_eq!(r.total_change_ns, -fwd.total_change_ns, "{}", r.name);
    }
    // Both traces incomplete (never set complete): said once each.
    let lost: Vec<_> = d
        .caveats
        .iter()
        .filter(|c| c.kind() == "data_loss")
        .collect();
    assert_eq!(lost.len(), 2, "{:?}", d.caveats);
}

#[test]
fn busier_gpu_shows_in_points_and_in_the_idle_split() {
    // Same 20 kernels each; the new ones run 600 ns instead of 300 ns of every 1,000.
    let (base, new) = (steady("k", 20, 300), steady("k", 20, 600));
    let d = diff(&base, &new, &top(10)).unwrap();
    assert!(d.caveats.is_empty(), "{:?}", d.caveats);
    let dev = &d.devices[0];
    let (b, n) = (dev.base.as_ref().unwrap(), dev.new.as_ref().unwrap());
    assert_eq!((b.gaps, n.gaps), (19, 19));
    assert_eq!(b.idle_ns, 19 * 700);
    assert_eq!(n.idle_ns, 19 * 400);
    // Every next launch returned 50 ns before its kernel: all idle is before it, but those 50 ns.
    assert_eq!(b.idle_after_launch_ns, Some(19 * 50));
    assert_eq!(b.idle_before_launch_ns, Some(19 * 650));
    assert_eq!(n.idle_before_launch_ns, Some(19 * 350));
    assert_eq!((b.idle_unknown_ns, n.idle_unknown_ns), (Some(0), Some(0)));
    let pts = dev.busy_pct_points.unwrap();
    let want = n.busy_pct - b.busy_pct;
    assert!(pts > 20.0 && (pts - want).abs() < 1e-12, "{pts}");
    assert_eq!(d.kernels[0].total_change_ns, 20 * 300);
    assert_eq!(d.kernels[0].mean_change_pct, Some(100.0));
}

#[test]
fn different_amounts_of_work_gpus_and_api_modes_are_said() {
    let base = steady("k", 100, 300);
    // 20 % fewer kernels: beyond the 10 % tolerance.
    let mut new = steady("k", 80, 300);
    let d = diff(&base, &new, &top(10)).unwrap();
    let kinds: Vec<&str> = d.caveats.iter().map(Caveat::kind).collect();
    assert_eq!(kinds, ["different_work"]);
    assert_eq!(
        d.caveats[0],
        Caveat::DifferentWork {
            base_kernels: 100,
            new_kernels: 80
        }
    );
    // 95 against 100 is within it.
    let near = steady("k", 95, 300);
    assert!(diff(&base, &near, &top(10)).unwrap().caveats.is_empty());

    // A kernel on GPU 1 in the new trace only; the new trace recorded with `--api lean`.
    let mut i = Interner::new();
    for s in &new.strings {
        i.intern(s);
    }
    new.kernels
        .push(kernel(&mut i, "k", 1, 7, 999, 20_000, 20_300));
    new.api_calls
        .push(call(&mut i, "cudaDeviceSynchronize", 1, 1, 5, 6));
    new.strings = i.into_strings();
    new.meta.parts = vec![cutrace_trace::PartMeta {
        path: "h-1.cutrace".into(),
        header: cutrace_trace::Header {
            api_records: Some(cutrace_trace::ApiRecords {
                mode: "lean".into(),
                runtime_left_out: Some(36),
                driver_left_out: Some(47),
            }),
            ..Default::default()
        },
        ..Default::default()
    }];
    let d = diff(&base, &new, &top(10)).unwrap();
    let kinds: Vec<&str> = d.caveats.iter().map(Caveat::kind).collect();
    assert_eq!(
        kinds,
        [
            "orphans",
            "different_work",
            "api_records",
            "different_devices"
        ],
        "{:?}",
        d.caveats
    );
    assert_eq!(
        d.caveats[2],
        Caveat::ApiRecords {
            base: "all".into(),
            new: "lean".into()
        }
    );
    assert_eq!(
        d.caveats[3],
        Caveat::DifferentDevices {
            devices: vec![OneSided {
                device: 1,
                side: "new"
            }]
        }
    );
    let gpu1 = d.devices.iter().find(|x| x.device == 1).unwrap();
    assert!(gpu1.base.is_none() && gpu1.new.is_some());
    assert_eq!(gpu1.busy_pct_points, None);
    assert_eq!(d.api_names.only_new, 1);
}

#[test]
fn a_window_per_trace_compares_only_that_part() {
    use cutrace_analysis::Window;
    // 20 kernels from 10,000 ns, one per 1,000 ns; the window [15,000, 20,000) holds 5.
    let t = steady("k", 20, 300);
    let w = Window::resolve(
        Some(cutrace_analysis::TimeArg::Absolute(15_000)),
        Some(cutrace_analysis::TimeArg::Absolute(20_000)),
        0,
    )
    .unwrap();
    let opts = DiffOptions {
        new_window: w,
        ..DiffOptions::default()
    };
    let d = diff(&t, &t, &opts).unwrap();
    assert_eq!((d.base.kernels, d.new.kernels), (20, 5));
    assert_eq!((d.base.api_calls, d.new.api_calls), (20, 5));
    assert!(d.base.window.is_none());
    assert_eq!(d.new.window.unwrap().from_ns, 15_000);
    assert_eq!(d.kernels[0].new.unwrap().count, 5);
    assert_eq!(d.kernels[0].total_change_ns, -(15 * 300));
    let kinds: Vec<&str> = d.caveats.iter().map(Caveat::kind).collect();
    assert_eq!(kinds, ["different_work"]);
    // A window past the end: no kernels, said.
    let late = Window::resolve(
        Some(cutrace_analysis::TimeArg::Absolute(1_000_000)),
        None,
        0,
    )
    .unwrap();
    let d = diff(
        &t,
        &t,
        &DiffOptions {
            base_window: late,
            ..DiffOptions::default()
        },
    )
    .unwrap();
    assert_eq!(d.base.kernels, 0);
    // As offsets from the trace's start (its first record, the launch at 9,900 ns; the last
    // kernel ends at 29,300).
    assert_eq!(
        d.caveats[0],
        Caveat::EmptyWindow {
            side: "base",
            from_offset_ns: 990_100,
            to_offset_ns: None,
            span_ns: Some(19_400)
        },
        "{:?}",
        d.caveats
    );
}

#[test]
fn the_same_work_run_faster_is_not_a_caveat() {
    // Back to back: 50 kernels of 1,000 ns, then the same 50 at 400 ns: the GPU window shrinks
    // by 60 %, which is the change being measured, not a different capture.
    let back_to_back = |len: u64| {
        let mut i = Interner::new();
        let mut kernels = Vec::new();
        let mut api_calls = Vec::new();
        for k in 0..50u64 {
            let start = 1_000 + k * (len + 10);
            kernels.push(kernel(&mut i, "k", 0, 7, k + 1, start, start + len));
            api_calls.push(launch(&mut i, k + 1, 0, 10));
        }
        complete_trace(i, kernels, api_calls)
    };
    let d = diff(&back_to_back(1_000), &back_to_back(400), &top(10)).unwrap();
    assert!(d.caveats.is_empty(), "{:?}", d.caveats);
    assert_eq!(d.kernels[0].mean_change_pct, Some(-60.0));
    // A trace with no kernels at all is named.
    let empty = Trace {
        meta: back_to_back(1).meta,
        ..Trace::default()
    };
    let d = diff(&empty, &back_to_back(400), &top(10)).unwrap();
    assert_eq!(d.caveats[0].kind(), "no_kernels", "{:?}", d.caveats);
}

#[test]
fn a_name_spelled_two_ways_is_one_name() {
    use cutrace_analysis::diff::match_key;
    // cpp_demangle (native traces) against the C++ runtime's demangler (torch.profiler).
    let ours = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                std::array<char*, (unsigned long)1> >(int, at::native::FillFunctor<float>)";
    let theirs =
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                  std::array<char*, 1ul>>(int, at::native::FillFunctor<float>)";
    assert_eq!(match_key(ours), match_key(theirs));
    assert_eq!(
        match_key("f<(long)-3, (bool)1, (bool)0, (int)7>"),
        "f<-3l,true,false,7>"
    );
    assert_eq!(match_key("k<(unsigned int)32>"), match_key("k<32u>"));
    // A parameter list is not a cast.
    assert_eq!(match_key("f(int) (long)"), "f(int)(long)");
    assert_ne!(match_key("k<1ul>"), match_key("k<1l>"));

    let mut i = Interner::new();
    let base = Trace {
        kernels: vec![kernel(&mut i, ours, 0, 7, 1, 0, 100)],
        strings: i.into_strings(),
        ..Trace::default()
    };
    let mut j = Interner::new();
    let new = Trace {
        kernels: vec![kernel(&mut j, theirs, 0, 7, 1, 0, 150)],
        strings: j.into_strings(),
        ..Trace::default()
    };
    let d = diff(&base, &new, &top(10)).unwrap();
    assert_eq!(d.kernels.len(), 1);
    assert_eq!(d.kernels[0].name, ours);
    assert_eq!(d.kernels[0].total_change_ns, 50);
    assert_eq!((d.kernel_names.only_base, d.kernel_names.only_new), (0, 0));
}

#[test]
fn the_rows_shown_are_the_first_rows_of_the_whole_comparison() {
    use std::collections::BTreeMap;
    // 3,000 names a side, 2,000 of them in both, totals with many ties (so the cut at `top`
    // falls inside runs of equal changes, and ties are broken by name), past the point where
    // the diff prunes its candidates (1,024).
    let side = |names: std::ops::Range<u64>, scale: u64| {
        let mut i = Interner::new();
        let kernels = names
            .enumerate()
            .map(|(c, n)| {
                let len = 10 + (n * scale) % 23 * 10;
                let start = c as u64 * 1_000;
                kernel(
                    &mut i,
                    &format!("k{n}"),
                    0,
                    7,
                    c as u64 + 1,
                    start,
                    start + len,
                )
            })
            .collect();
        complete_trace(i, kernels, Vec::new())
    };
    let (base, new) = (side(0..3_000, 7), side(1_000..4_000, 11));
    let totals = |t: &Trace| -> BTreeMap<String, i64> {
        t.kernels
            .iter()
            .map(|k| {
                (
                    t.strings[k.name as usize].clone(),
                    (k.end_ns - k.start_ns) as i64,
                )
            })
            .collect()
    };
    let (tb, tn) = (totals(&base), totals(&new));
    let mut want: Vec<(String, i64)> = tb
        .keys()
        .chain(tn.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|n| {
            let change = tn.get(n).copied().unwrap_or(0) - tb.get(n).copied().unwrap_or(0);
            (n.clone(), change)
        })
        .collect();
    want.sort_by(|a, b| {
        b.1.unsigned_abs()
            .cmp(&a.1.unsigned_abs())
            .then_with(|| a.0.cmp(&b.0))
    });
    for n in [0, 1, 7, 1_000, 1_500, 3_999, 4_000, 9_000] {
        let d = diff(&base, &new, &top(n)).unwrap();
        let got: Vec<(String, i64)> = d
            .kernels
            .iter()
            .map(|r| (r.name.clone(), r.total_change_ns))
            .collect();
        assert_eq!(got[..], want[..n.min(want.len())], "top {n}");
        assert_eq!(
            (
                d.kernel_names.base,
                d.kernel_names.new,
                d.kernel_names.only_base,
                d.kernel_names.only_new
            ),
            (3_000, 3_000, 1_000, 1_000)
        );
    }
}
