//! What a device's idle gap says about its cause, read from the host's side of it
//! ([`GapHost`]): the GPU waited for the host, the next kernel was queued behind something, or
//! the gap is inside one launch (a CUDA graph). A reading is made only where the numbers carry
//! it; the report serializes it beside the numbers, and the text only words it.

use serde::Serialize;

use crate::timeline::{Gap, GapHost, KernelRef};
use cutrace_trace::Ns;

/// The reading of a device gap, from when the launch call of the kernel after it returned
/// (`NextLaunch::returned_into_gap_ns`, `r` below) and what sits on either side of the gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapReading {
    /// The kernels on both sides come from one launch call, as a CUDA graph's nodes (or one
    /// cooperative launch) do: the gap is inside the graph.
    InsideGraph,
    /// The launch returned over [`GapReading::QUEUED_MARGIN_NS`] before the gap began, both
    /// kernels are on one stream and the gap is at most [`GapReading::DISPATCH_NS`]: the GPU's
    /// own dispatch from one queued kernel to the next.
    StreamDispatch,
    /// Queued (as above) while copies ran in the gap: the GPU waited on them, or on what they
    /// wait for.
    QueuedBehindCopies,
    /// Queued, with no copy in the gap: the GPU waited on something else, such as an event,
    /// another stream or another process.
    Queued,
    /// The launch returned in the second half of the gap (`0 < r` and `2r ≥ gap`): the GPU
    /// waited for the host to launch the kernel.
    WaitedForHost,
}

impl GapReading {
    /// A launch that returned less than this before a gap began is not called queued: host and
    /// GPU timestamps of one process agree only to about a microsecond.
    pub const QUEUED_MARGIN_NS: i64 = 1_000;
    /// Gaps between kernels of one stream up to this long are the GPU's own dispatch of queued
    /// work.
    pub const DISPATCH_NS: Ns = 5_000;

    /// The reading of `gap` with its host side `host`; `None` when the trace has no launch call
    /// for the kernel after it, or the launch returned early in the gap (the host and the GPU
    /// both had a share in it, and the numbers do not say which mattered).
    pub fn of(gap: &Gap, host: &GapHost) -> Option<GapReading> {
        let r = host.next_launch.as_ref()?.returned_into_gap_ns;
        let same = |f: fn(&KernelRef) -> u64| match (&gap.before, &gap.after) {
            (Some(b), Some(a)) => b.pid == a.pid && f(b) == f(a),
            _ => false,
        };
        if same(|k| k.correlation_id) {
            Some(GapReading::InsideGraph)
        } else if r < -Self::QUEUED_MARGIN_NS {
            Some(
                if same(|k| k.stream) && gap.length_ns <= Self::DISPATCH_NS {
                    GapReading::StreamDispatch
                } else if gap.copy_ns.is_some_and(|c| c > 0) {
                    GapReading::QueuedBehindCopies
                } else {
                    GapReading::Queued
                },
            )
        } else if r > 0 && (r as u64).saturating_mul(2) >= gap.length_ns {
            Some(GapReading::WaitedForHost)
        } else {
            None
        }
    }
}

/// Whether module loading (`cuLibraryLoad*`, `cuModuleLoad*` calls) covered at least half of a
/// gap: with lazy loading a kernel's module loads on its first launch, so such a gap is
/// usually warm-up.
pub fn module_loading(gap_ns: Ns, host: &GapHost) -> bool {
    host.calls.iter().any(|c| {
        (c.name.starts_with("cuLibraryLoad") || c.name.starts_with("cuModuleLoad"))
            && c.ns.saturating_mul(2) >= gap_ns
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{NamedSpan, NextLaunch};

    fn kref(corr: u64, stream: u64) -> KernelRef {
        KernelRef {
            name: "k".into(),
            mangled_name: None,
            correlation_id: corr,
            stream,
            pid: None,
            start_ns: 0,
            end_ns: 0,
        }
    }

    /// A gap of `len` ns between kernels (corr, stream) `before` and `after`, whose launch
    /// returned `r` ns into it, with `copies` ns of copies and the given calls.
    fn gap(
        len: u64,
        before: (u64, u64),
        after: (u64, u64),
        r: Option<i64>,
        copies: u64,
        calls: &[(&str, u64)],
    ) -> (Gap, GapHost) {
        let host = GapHost {
            next_launch: r.map(|r| NextLaunch {
                name: "cudaLaunchKernel".into(),
                start_ns: 0,
                end_ns: 0,
                returned_into_gap_ns: r,
            }),
            in_calls_ns: calls.iter().map(|c| c.1).sum(),
            calls: calls
                .iter()
                .map(|&(n, ns)| NamedSpan { name: n.into(), ns })
                .collect(),
            ranges: Vec::new(),
            reading: None,
            module_loading: false,
        };
        let gap = Gap {
            start_ns: 1_000_000,
            end_ns: 1_000_000 + len,
            length_ns: len,
            before: Some(kref(before.0, before.1)),
            after: Some(kref(after.0, after.1)),
            copy_ns: Some(copies),
            host: None,
            after_correlation: after.0,
        };
        (gap, host)
    }

    fn read(g: (Gap, GapHost)) -> Option<GapReading> {
        GapReading::of(&g.0, &g.1)
    }

    /// Each reading of a gap's launch, and only where the numbers support it.
    #[test]
    fn a_gap_is_read_only_as_far_as_the_launch_goes() {
        use GapReading::*;
        // Late in the gap, or after the kernel began: the GPU waited for the host.
        assert_eq!(
            read(gap(100_000, (1, 7), (2, 7), Some(90_000), 0, &[])),
            Some(WaitedForHost)
        );
        assert_eq!(
            read(gap(100_000, (1, 7), (2, 7), Some(50_000), 0, &[])),
            Some(WaitedForHost)
        );
        assert_eq!(
            read(gap(100_000, (1, 7), (2, 7), Some(100_500), 0, &[])),
            Some(WaitedForHost)
        );
        // Early in the gap: no reading.
        assert_eq!(
            read(gap(100_000, (1, 7), (2, 7), Some(49_999), 0, &[])),
            None
        );
        assert_eq!(read(gap(100_000, (1, 7), (2, 7), Some(0), 0, &[])), None);
        // Before the gap, within the clocks' agreement: no reading either.
        assert_eq!(read(gap(100_000, (1, 7), (2, 7), Some(-500), 0, &[])), None);
        assert_eq!(
            read(gap(100_000, (1, 7), (2, 9), Some(-1_000), 0, &[])),
            None
        );
        // Queued: one stream's dispatch (short gaps only), copies, or something else.
        assert_eq!(
            read(gap(2_000, (1, 7), (2, 7), Some(-50_000), 0, &[])),
            Some(StreamDispatch)
        );
        assert_eq!(
            read(gap(5_000, (1, 7), (2, 7), Some(-1_001), 0, &[])),
            Some(StreamDispatch)
        );
        assert_eq!(
            read(gap(5_001, (1, 7), (2, 7), Some(-50_000), 0, &[])),
            Some(Queued)
        );
        assert_eq!(
            read(gap(200_000, (1, 7), (2, 9), Some(-50_000), 150_000, &[])),
            Some(QueuedBehindCopies)
        );
        assert_eq!(
            read(gap(200_000, (1, 7), (2, 9), Some(-50_000), 0, &[])),
            Some(Queued)
        );
        // One launch on both sides: inside a graph, whenever the launch returned.
        assert_eq!(
            read(gap(3_000, (5, 7), (5, 7), Some(-500_000), 0, &[])),
            Some(InsideGraph)
        );
        assert_eq!(
            read(gap(3_000, (5, 7), (5, 8), Some(10), 0, &[])),
            Some(InsideGraph)
        );
        // No launch call: nothing to read.
        assert_eq!(read(gap(3_000, (1, 7), (2, 7), None, 0, &[])), None);
    }

    /// Kernels of two processes share correlation ids and stream numbers only by chance.
    #[test]
    fn kernels_of_two_processes_are_never_one_launch_or_one_stream() {
        let (mut g, h) = gap(3_000, (5, 7), (5, 7), Some(-50_000), 0, &[]);
        g.before.as_mut().unwrap().pid = Some(1);
        g.after.as_mut().unwrap().pid = Some(2);
        assert_eq!(GapReading::of(&g, &h), Some(GapReading::Queued));
    }

    #[test]
    fn module_loading_needs_loads_over_half_a_gap() {
        let loads = |calls: &[(&str, u64)]| {
            module_loading(100, &gap(100, (1, 7), (2, 7), Some(90), 0, calls).1)
        };
        assert!(loads(&[("cuLibraryLoadData", 50)]));
        assert!(loads(&[("cuModuleLoadDataEx", 70)]));
        assert!(!loads(&[("cuLibraryLoadData", 49)]));
        assert!(!loads(&[("cudaFuncGetAttributes", 90)]));
    }
}
