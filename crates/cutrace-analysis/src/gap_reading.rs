//! What a device's idle gap says about its cause, read from the host's side of it
//! (`timeline::GapHost`): the GPU waited for the host, the next kernel was queued behind
//! something, or the gap is inside one launch (a CUDA graph). A reading is made only where the
//! numbers carry it; the report serializes it beside the numbers, and the text only words it.
//! Pure over the facts of one gap ([`GapFacts`]); `timeline::Gap::reading` gathers them.

use cutrace_trace::Ns;
use serde::Serialize;

/// The reading of a device gap, from when the launch call of the kernel after it returned
/// (`r` below: `NextLaunch::returned_into_gap_ns`) and what sits on either side of the gap.
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

    /// The reading of a gap with these facts; `None` when the launch returned early in the gap
    /// or within the clocks' agreement of its start (the host and the GPU both had a share in
    /// it, and the numbers do not say which mattered).
    pub fn read(f: &GapFacts) -> Option<GapReading> {
        let r = f.returned_into_gap_ns;
        if f.same_launch {
            Some(GapReading::InsideGraph)
        } else if r < -Self::QUEUED_MARGIN_NS {
            Some(if f.same_stream && f.gap_ns <= Self::DISPATCH_NS {
                GapReading::StreamDispatch
            } else if f.copy_ns > 0 {
                GapReading::QueuedBehindCopies
            } else {
                GapReading::Queued
            })
        } else if r > 0 && (r as u64).saturating_mul(2) >= f.gap_ns {
            Some(GapReading::WaitedForHost)
        } else {
            None
        }
    }
}

/// What a reading is made from: one device gap and the launch of the kernel after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapFacts {
    pub gap_ns: Ns,
    /// `NextLaunch::returned_into_gap_ns`: how far into the gap the launch returned.
    pub returned_into_gap_ns: i64,
    /// The kernels on both sides come from one launch call (one process, one correlation id).
    pub same_launch: bool,
    /// The kernels on both sides ran on one stream of one process.
    pub same_stream: bool,
    /// How long copies ran in the gap.
    pub copy_ns: Ns,
}

/// Whether module loading (`cuLibraryLoad*`, `cuModuleLoad*` calls) covered at least half of a
/// gap: with lazy loading a kernel's module loads on its first launch, so such a gap is
/// usually warm-up.
/// `calls` are (name, how much of the gap calls of that name covered).
pub fn module_loading<'a>(gap_ns: Ns, calls: impl IntoIterator<Item = (&'a str, Ns)>) -> bool {
    calls.into_iter().any(|(name, ns)| {
        (name.starts_with("cuLibraryLoad") || name.starts_with("cuModuleLoad"))
            && ns.saturating_mul(2) >= gap_ns
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gap of `gap_ns` whose next launch returned `r` ns into it, with `copy_ns` of copies.
    fn facts(gap_ns: Ns, r: i64, copy_ns: Ns) -> GapFacts {
        GapFacts {
            gap_ns,
            returned_into_gap_ns: r,
            same_launch: false,
            same_stream: false,
            copy_ns,
        }
    }

    fn on_one_stream(f: GapFacts) -> GapFacts {
        GapFacts {
            same_stream: true,
            ..f
        }
    }

    fn one_launch(f: GapFacts) -> GapFacts {
        GapFacts {
            same_launch: true,
            ..f
        }
    }

    /// Each reading of a gap's launch, and only where the numbers support it.
    #[test]
    fn a_gap_is_read_only_as_far_as_the_launch_goes() {
        use GapReading::*;
        let read = |f: GapFacts| GapReading::read(&f);
        // Late in the gap, or after the kernel began: the GPU waited for the host.
        assert_eq!(read(facts(100_000, 90_000, 0)), Some(WaitedForHost));
        assert_eq!(read(facts(100_000, 50_000, 0)), Some(WaitedForHost));
        assert_eq!(read(facts(100_000, 100_500, 0)), Some(WaitedForHost));
        // Early in the gap: no reading.
        assert_eq!(read(facts(100_000, 49_999, 0)), None);
        assert_eq!(read(facts(100_000, 0, 0)), None);
        // Before the gap, within the clocks' agreement: no reading either.
        assert_eq!(read(facts(100_000, -500, 0)), None);
        assert_eq!(read(facts(100_000, -1_000, 0)), None);
        // Queued: one stream's dispatch (short gaps only), copies, or something else.
        assert_eq!(
            read(on_one_stream(facts(2_000, -50_000, 0))),
            Some(StreamDispatch)
        );
        assert_eq!(
            read(on_one_stream(facts(5_000, -1_001, 0))),
            Some(StreamDispatch)
        );
        assert_eq!(read(on_one_stream(facts(5_001, -50_000, 0))), Some(Queued));
        assert_eq!(read(facts(2_000, -50_000, 0)), Some(Queued));
        assert_eq!(
            read(facts(200_000, -50_000, 150_000)),
            Some(QueuedBehindCopies)
        );
        assert_eq!(read(facts(200_000, -50_000, 0)), Some(Queued));
        // One launch on both sides: inside a graph, whenever the launch returned.
        assert_eq!(
            read(one_launch(facts(3_000, -500_000, 0))),
            Some(InsideGraph)
        );
        assert_eq!(read(one_launch(facts(3_000, 10, 0))), Some(InsideGraph));
    }

    #[test]
    fn module_loading_needs_loads_over_half_a_gap() {
        assert!(module_loading(100, [("cuLibraryLoadData", 50)]));
        assert!(module_loading(
            100,
            [("cudaMalloc", 10), ("cuModuleLoadDataEx", 70)]
        ));
        assert!(!module_loading(100, [("cuLibraryLoadData", 49)]));
        assert!(!module_loading(100, [("cudaFuncGetAttributes", 90)]));
    }
}
