//! Kernel launch calls whose GPU records are missing: a count of lost data.
//!
//! A launch call (`cudaLaunchKernel`, `cuLaunchKernel`, a graph launch, their HIP forms) makes
//! device records that carry its correlation id: the kernel, or for a graph its kernels, copies
//! and memsets. A launch with no such record lost its GPU side: CUPTI dropped it, the profile
//! stopped before it ran (Kineto's `Out-of-range`), or the kernel records were never enabled. A
//! real A100 trace holds 260 launch calls and not one kernel; pytorch/pytorch#192021 shows
//! launches whose kernels are dropped at the start of a profile. Either way the report must say
//! so rather than read "trace complete".
//!
//! Counted over the whole trace, once per correlation id: a runtime call and the driver call
//! beneath it share one id and count once. A launch call without a correlation id (0) cannot be
//! joined and is counted apart. A launch made while one of its process's streams was being
//! captured into a graph (between `cudaStreamBeginCapture` and `cudaStreamEndCapture`, or their
//! driver and HIP forms) runs no kernel then: it is counted as captured, not as lost (seen in
//! `tests/fixtures/native/graph`, six launches between the two calls). The capture calls must be
//! in the trace for this: `cutrace record --api launches` leaves them out.

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::correlate::ApiIndex;

/// Kernel launch calls and those whose GPU records are missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LaunchLoss {
    /// Launches of a kernel or a graph ([`is_kernel_launch`]), whole trace: the distinct
    /// correlation ids of launch calls, and each launch call without one.
    pub kernel_launches: u64,
    /// Distinct correlation ids of launch calls with no kernel, memcpy or memset record.
    pub launches_without_gpu_records: u64,
    /// Launch calls with correlation id 0: whether their records exist cannot be told.
    pub launches_without_correlation_id: u64,
    /// Launches made while a stream of their process was being captured into a graph: they run
    /// later, inside a graph launch, and are not lost.
    pub launches_captured: u64,
}

/// Launch names with their `_ptsz`/`_ptds`/`_spt` and `_vNNNN` suffixes removed. Sources:
/// CUDA's runtime and driver API (`cuda_runtime_api.h`, `cuda.h`) and HIP's (`hip_runtime_api.h`,
/// `hip_ext.h`). `cudaLaunchHostFunc` and its kin launch no kernel and are not here.
const LAUNCHES: &[&str] = &[
    // CUDA runtime; `cudaLaunch` is the launch before cudaLaunchKernel.
    "cudaLaunch",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "cudaGraphLaunch",
    // CUDA driver.
    "cuLaunch",
    "cuLaunchGrid",
    "cuLaunchGridAsync",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernelMultiDevice",
    "cuGraphLaunch",
    // HIP.
    "hipLaunchKernel",
    "hipLaunchKernelExC",
    "hipExtLaunchKernel",
    "hipLaunchByPtr",
    "hipLaunchCooperativeKernel",
    "hipLaunchCooperativeKernelMultiDevice",
    "hipExtLaunchMultiKernelMultiDevice",
    "hipModuleLaunchKernel",
    "hipModuleLaunchKernelEx",
    "hipExtModuleLaunchKernel",
    "hipHccModuleLaunchKernel",
    "hipModuleLaunchCooperativeKernel",
    "hipModuleLaunchCooperativeKernelMultiDevice",
    "hipGraphLaunch",
];

/// A name without CUPTI's and HIP's suffixes: `cudaLaunchKernel_ptsz_v7000` → `cudaLaunchKernel`,
/// `hipGraphLaunch_spt` → `hipGraphLaunch`.
pub(crate) fn base_name(name: &str) -> &str {
    let mut n = name;
    loop {
        let before = n.len();
        for suffix in ["_ptsz", "_ptds", "_spt"] {
            if let Some(s) = n.strip_suffix(suffix) {
                n = s;
            }
        }
        if let Some(at) = n.rfind("_v") {
            let digits = &n[at + 2..];
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                n = &n[..at];
            }
        }
        if n.len() == before {
            return n;
        }
    }
}

/// What a call does to stream capture: `Some(true)` begins one, `Some(false)` ends one.
fn capture_edge(name: &str) -> Option<bool> {
    match base_name(name) {
        "cudaStreamBeginCapture"
        | "cudaStreamBeginCaptureToGraph"
        | "cuStreamBeginCapture"
        | "cuStreamBeginCaptureToGraph"
        | "hipStreamBeginCapture"
        | "hipStreamBeginCaptureToGraph" => Some(true),
        "cudaStreamEndCapture" | "cuStreamEndCapture" | "hipStreamEndCapture" => Some(false),
        _ => None,
    }
}

/// Per process, the spans during which at least one of its streams was being captured: from a
/// begin call's start to the end call's end that closes the last open capture (a capture left
/// open runs to the end of the trace). Sorted by (process, start).
fn capture_spans(trace: &Trace) -> Vec<(u32, Ns, Ns)> {
    let mut edges: Vec<(u32, Ns, bool)> = trace
        .api_calls
        .iter()
        .filter_map(|c| {
            capture_edge(trace.str(c.name)).map(|begin| {
                let at = if begin { c.start_ns } else { c.end_ns };
                (c.process, at, begin)
            })
        })
        .collect();
    // Begins before ends at one instant, so a capture that ends as another begins stays open.
    edges.sort_unstable_by_key(|&(p, at, begin)| (p, at, !begin));
    let mut spans = Vec::new();
    let mut open: Option<(u32, Ns, u64)> = None;
    for (p, at, begin) in edges {
        match open.as_mut() {
            Some((q, _, depth)) if *q == p => {
                if begin {
                    *depth += 1;
                } else {
                    *depth -= 1;
                    if *depth == 0 {
                        let (q, from, _) = open.take().unwrap_or_default();
                        spans.push((q, from, at));
                    }
                }
            }
            _ => {
                if let Some((q, from, _)) = open.take() {
                    spans.push((q, from, Ns::MAX));
                }
                if begin {
                    open = Some((p, at, 1));
                }
            }
        }
    }
    if let Some((q, from, _)) = open {
        spans.push((q, from, Ns::MAX));
    }
    spans
}

/// Whether `t` of process `p` lies in one of `spans` (as [`capture_spans`] makes them).
fn in_capture(spans: &[(u32, Ns, Ns)], p: u32, t: Ns) -> bool {
    let i = spans.partition_point(|&(q, from, _)| (q, from) <= (p, t));
    i > 0 && spans[i - 1].0 == p && t < spans[i - 1].2
}

/// Whether an API call of this name launches a kernel or a graph.
pub fn is_kernel_launch(name: &str) -> bool {
    LAUNCHES.contains(&base_name(name))
}

/// One bit per API call.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// The launch calls of `trace` and those whose GPU records are missing, through the report's
/// join (`index`: the call that owns each correlation id). Memory: two bits per API call and one
/// byte per string, and the capture calls.
pub(crate) fn launch_loss(trace: &Trace, index: &ApiIndex) -> LaunchLoss {
    let n = trace.api_calls.len();
    let mut has_records = Bits::new(n);
    let device_ids = trace
        .kernels
        .iter()
        .map(|k| k.correlation_id)
        .chain(trace.memcpys.iter().map(|r| r.correlation_id))
        .chain(trace.memsets.iter().map(|r| r.correlation_id));
    for id in device_ids {
        if let Some(i) = index.get(id) {
            has_records.set(i);
        }
    }
    // Per string: 0 not looked at, 1 a launch, 2 not one.
    let mut launch_name = vec![0u8; trace.strings.len()];
    let mut counted = Bits::new(n);
    let captures = capture_spans(trace);
    let mut loss = LaunchLoss::default();
    for c in &trace.api_calls {
        let is_launch = match launch_name.get_mut(c.name as usize) {
            Some(seen) => {
                if *seen == 0 {
                    *seen = if is_kernel_launch(trace.str(c.name)) {
                        1
                    } else {
                        2
                    };
                }
                *seen == 1
            }
            None => false,
        };
        if !is_launch {
            continue;
        }
        let Some(owner) = index.get(c.correlation_id) else {
            loss.kernel_launches += 1;
            loss.launches_without_correlation_id += 1;
            continue;
        };
        if counted.get(owner) {
            continue;
        }
        counted.set(owner);
        loss.kernel_launches += 1;
        if has_records.get(owner) {
            continue;
        }
        if in_capture(&captures, c.process, c.start_ns) {
            loss.launches_captured += 1;
        } else {
            loss.launches_without_gpu_records += 1;
        }
    }
    loss
}

#[cfg(test)]
mod tests {
    use cutrace_testkit::records::{complete_trace, kernel, launch};
    use cutrace_trace::{ApiKind, CopyKind, Interner, Memcpy};

    use super::*;

    #[test]
    fn launch_names_are_known_with_their_suffixes_and_host_functions_are_not() {
        for name in [
            "cudaLaunchKernel",
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernel_ptsz_v7000",
            "cudaLaunchKernelExC_v11060",
            "cudaGraphLaunch_v10000",
            "cuLaunchKernel",
            "cuLaunchKernelEx_ptsz",
            "cuGraphLaunch",
            "hipLaunchKernel",
            "hipExtModuleLaunchKernel",
            "hipModuleLaunchKernel",
            "hipGraphLaunch",
            "hipGraphLaunch_spt",
        ] {
            assert!(is_kernel_launch(name), "{name}");
        }
        for name in [
            "cudaLaunchHostFunc_v10000",
            "cuLaunchHostFunc",
            "cudaMemcpyAsync",
            "cudaGraphInstantiate",
            "hipLaunchHostFunc",
            "cudaLaunchKernel_vX",
            "",
        ] {
            assert!(!is_kernel_launch(name), "{name}");
        }
    }

    /// Launches 1..=4, a runtime and a driver call sharing id 3, a launch with id 0 and a copy
    /// call: kernels for 1 only, a memcpy for 2 (a graph of copies). 3 and 4 lost theirs, 3 once.
    #[test]
    fn launches_without_records_count_once_per_id_and_id_zero_apart() {
        let mut i = Interner::new();
        let mut calls = vec![
            launch(&mut i, 1, 0, 10),
            launch(&mut i, 2, 20, 30),
            launch(&mut i, 3, 40, 50),
            launch(&mut i, 4, 60, 70),
            launch(&mut i, 0, 80, 90),
        ];
        let mut driver = launch(&mut i, 3, 41, 49);
        driver.kind = ApiKind::Driver;
        driver.name = i.intern("cuLaunchKernel");
        calls.push(driver);
        let mut copy = launch(&mut i, 5, 100, 110);
        copy.name = i.intern("cudaMemcpyAsync");
        calls.push(copy);
        let k = kernel(&mut i, "gemm", 0, 7, 1, 100, 200);
        let mut trace = complete_trace(i, vec![k], calls);
        trace.memcpys.push(Memcpy {
            kind: CopyKind::DtoD,
            bytes: 8,
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: 2,
            start_ns: 300,
            end_ns: 400,
        });
        let index = ApiIndex::build(&trace.api_calls);
        let loss = launch_loss(&trace, &index);
        assert_eq!(
            loss,
            LaunchLoss {
                kernel_launches: 5,
                launches_without_gpu_records: 2,
                launches_without_correlation_id: 1,
                launches_captured: 0,
            }
        );
    }

    /// Launches inside a capture of their process run nothing then; one after the capture
    /// ended, or in another process, is lost. Two captures overlapping make one span.
    #[test]
    fn launches_inside_a_stream_capture_are_captured_not_lost() {
        let mut i = Interner::new();
        let at = |name: &str, process: u32, start: Ns, end: Ns, i: &mut Interner| {
            let mut c = launch(i, 0, start, end);
            c.name = i.intern(name);
            c.process = process;
            c
        };
        let mut calls = vec![
            at("cudaStreamBeginCapture_v10000", 1, 100, 110, &mut i),
            at("cuStreamBeginCapture_ptsz", 1, 150, 160, &mut i),
            at("cudaStreamEndCapture_v10000", 1, 200, 210, &mut i),
            at("cudaStreamEndCapture_v10000", 1, 300, 310, &mut i),
            at("hipStreamBeginCapture", 2, 400, 410, &mut i),
        ];
        for (id, process, start) in [
            (1, 1, 120),
            (2, 1, 250),
            (3, 1, 320),
            (4, 2, 120),
            (5, 2, 500),
        ] {
            let mut c = launch(&mut i, id, start, start + 5);
            c.process = process;
            calls.push(c);
        }
        let trace = complete_trace(i, Vec::new(), calls);
        let index = ApiIndex::build(&trace.api_calls);
        let loss = launch_loss(&trace, &index);
        // 1 and 2 in process 1's capture (100 → 310), 5 in process 2's capture left open.
        assert_eq!(loss.launches_captured, 3);
        assert_eq!(loss.launches_without_gpu_records, 2);
        assert_eq!(loss.kernel_launches, 5);
    }
}
