//! The trace's records sorted once into lanes (host threads, GPU streams) so that each span's
//! graph takes its records with binary searches: memory per span is bounded by the records the
//! span holds.

use std::collections::HashMap;

use cutrace_trace::{is_comm_kernel, Ns, RangeDomain, StrId, Trace};

use super::graph::NONE;
use super::Kind;
use crate::launches::{base_name, is_kernel_launch};

pub(crate) const NO_API: u32 = NONE;
/// The names of copies and memsets, which have none in the trace.
pub(crate) const COPY_NAME: u32 = NONE - 1;
pub(crate) const MEMSET_NAME: u32 = NONE - 2;

/// What a CUDA call means for the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Launch,
    Copy,
    StreamSync,
    EventSync,
    DeviceSync,
    WaitEvent,
    Record,
    Other,
}

/// `name` without CUPTI's suffixes, as the graph reads it.
pub(crate) fn call_of(name: &str) -> Call {
    if is_kernel_launch(name) {
        return Call::Launch;
    }
    match base_name(name) {
        "cudaStreamSynchronize" | "cuStreamSynchronize" | "hipStreamSynchronize" => {
            Call::StreamSync
        }
        "cudaEventSynchronize" | "cuEventSynchronize" | "hipEventSynchronize" => Call::EventSync,
        "cudaDeviceSynchronize"
        | "cudaThreadSynchronize"
        | "cuCtxSynchronize"
        | "hipDeviceSynchronize" => Call::DeviceSync,
        "cudaStreamWaitEvent" | "cuStreamWaitEvent" | "hipStreamWaitEvent" => Call::WaitEvent,
        "cudaEventRecord"
        | "cudaEventRecordWithFlags"
        | "cuEventRecord"
        | "cuEventRecordWithFlags"
        | "hipEventRecord" => Call::Record,
        // The copies that return only when the copy is done (the Async forms do not, except
        // from pageable memory, which the trace does not show).
        "cudaMemcpy"
        | "cudaMemcpy2D"
        | "cudaMemcpy3D"
        | "cudaMemcpyToSymbol"
        | "cudaMemcpyFromSymbol"
        | "cudaMemcpyPeer"
        | "cuMemcpy"
        | "cuMemcpyHtoD"
        | "cuMemcpyDtoH"
        | "cuMemcpyDtoD"
        | "cuMemcpy2D"
        | "cuMemcpy3D"
        | "cuMemcpyPeer"
        | "hipMemcpy"
        | "hipMemcpyHtoD"
        | "hipMemcpyDtoH"
        | "hipMemcpyDtoD" => Call::Copy,
        _ => Call::Other,
    }
}

/// A host interval: a framework op, a CUDA call (`api`) or a host range (`range`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostIv {
    pub start: Ns,
    pub end: Ns,
    pub name: StrId,
    pub api: u32,
    pub range: bool,
}

/// One host thread's intervals, by start (the longer first at one start: the parent).
pub(crate) struct HostLane {
    pub pid: u32,
    pub thread: u64,
    pub ivs: Vec<HostIv>,
}

impl HostLane {
    /// The intervals that start inside `[s, e]`.
    pub fn span(&self, s: Ns, e: Ns) -> &[HostIv] {
        let lo = self.ivs.partition_point(|iv| iv.start < s);
        let hi = self.ivs.partition_point(|iv| iv.start <= e);
        &self.ivs[lo..hi.max(lo)]
    }
}

/// A GPU operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuOp {
    pub start: Ns,
    pub end: Ns,
    pub corr: u64,
    pub name: StrId,
    pub kind: Kind,
}

/// One GPU stream's operations, by start; `pid` is the stream's process in a merged trace.
pub(crate) struct GpuLane {
    pub device: u32,
    pub stream: u64,
    pub pid: Option<u32>,
    pub ops: Vec<GpuOp>,
    /// Per op, the latest of (its start, or its launch call's start where earlier) over it and
    /// the ops before it: nondecreasing, so "the ops launched before `t`" is a binary search
    /// (an op launched before `t` started before `t` or was launched before it).
    pub launched_by: Vec<Ns>,
    /// Per op, the latest launch call start over it and the ops before it (0 where none is
    /// known): the first op launched at or after `t` is a binary search.
    pub launch_max: Vec<Ns>,
}

impl GpuLane {
    /// The operations that start inside `[s, e]`, and the one before them (what the first of
    /// them may have queued behind), as a range of indices.
    pub fn span(&self, s: Ns, e: Ns) -> (usize, usize) {
        let lo = self.ops.partition_point(|o| o.start < s).saturating_sub(1);
        let hi = self.ops.partition_point(|o| o.start <= e);
        (lo, hi.max(lo))
    }
}

/// A CUDA call as the graph needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApiRec {
    pub start: Ns,
    pub end: Ns,
    pub corr: u64,
    pub pid: u32,
    pub call: Call,
}

pub(crate) struct Index<'t> {
    pub trace: &'t Trace,
    pub threads: Vec<HostLane>,
    pub streams: Vec<GpuLane>,
    pub api: Vec<ApiRec>,
    /// Correlation id → the launch call that made it (the earliest-starting, when a runtime
    /// call and the driver call beneath it share the id).
    pub launch_of: HashMap<u64, u32>,
    /// Correlation id → its synchronization record.
    pub sync_of: HashMap<u64, u32>,
}

impl<'t> Index<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        let mut names: HashMap<StrId, Call> = HashMap::new();
        let mut threads: HashMap<(u32, u64), Vec<HostIv>> = HashMap::new();
        let mut api = Vec::with_capacity(trace.api_calls.len());
        let mut launch_of: HashMap<u64, u32> = HashMap::new();
        for (i, a) in trace.api_calls.iter().enumerate() {
            let call = *names
                .entry(a.name)
                .or_insert_with(|| call_of(trace.str(a.name)));
            let end = a.end_ns.max(a.start_ns);
            api.push(ApiRec {
                start: a.start_ns,
                end,
                corr: a.correlation_id,
                pid: a.process,
                call,
            });
            // Any call can put work on the GPU (launches, copies, memsets): its records carry
            // the call's correlation id.
            if a.correlation_id != 0 {
                let keep = launch_of
                    .get(&a.correlation_id)
                    .is_none_or(|&o| trace.api_calls[o as usize].start_ns > a.start_ns);
                if keep {
                    launch_of.insert(a.correlation_id, i as u32);
                }
            }
            threads
                .entry((a.process, a.thread))
                .or_default()
                .push(HostIv {
                    start: a.start_ns,
                    end,
                    name: a.name,
                    api: i as u32,
                    range: false,
                });
        }
        for o in &trace.host_ops {
            threads
                .entry((o.process, o.thread))
                .or_default()
                .push(HostIv {
                    start: o.start_ns,
                    end: o.end_ns.max(o.start_ns),
                    name: o.name,
                    api: NO_API,
                    range: false,
                });
        }
        for r in trace
            .ranges
            .iter()
            .filter(|r| r.domain == RangeDomain::Host)
        {
            threads
                .entry((r.process, r.thread))
                .or_default()
                .push(HostIv {
                    start: r.start_ns,
                    end: r.end_ns.max(r.start_ns),
                    name: r.name,
                    api: NO_API,
                    range: true,
                });
        }
        let mut threads: Vec<HostLane> = threads
            .into_iter()
            .map(|((pid, thread), mut ivs)| {
                // At one start the longer first (the parent), then ranges before ops before
                // calls (a call is the innermost), then record order.
                ivs.sort_by(|a, b| {
                    (a.start, b.end, !a.range, a.api).cmp(&(b.start, a.end, !b.range, b.api))
                });
                HostLane { pid, thread, ivs }
            })
            .collect();
        threads.sort_by_key(|l| (l.pid, l.thread));
        let mut streams = gpu_lanes(trace);
        for lane in &mut streams {
            let (mut by, mut max) = (0, 0);
            for o in &lane.ops {
                let launch = launch_of.get(&o.corr).map(|&a| api[a as usize].start);
                by = by.max(launch.map_or(o.start, |l| l.min(o.start)));
                max = max.max(launch.unwrap_or(0));
                lane.launched_by.push(by);
                lane.launch_max.push(max);
            }
        }
        let sync_of = trace
            .syncs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.correlation_id != 0)
            .map(|(i, s)| (s.correlation_id, i as u32))
            .collect();
        Index {
            trace,
            threads,
            streams,
            api,
            launch_of,
            sync_of,
        }
    }
}

fn gpu_lanes(trace: &Trace) -> Vec<GpuLane> {
    let merged = trace.meta.id_parts.len() > 1;
    let mut comm: HashMap<StrId, bool> = HashMap::new();
    let mut lanes: HashMap<(u32, u64), Vec<GpuOp>> = HashMap::new();
    for k in &trace.kernels {
        let c = *comm
            .entry(k.name)
            .or_insert_with(|| is_comm_kernel(trace.str(k.name)));
        lanes.entry((k.device, k.stream)).or_default().push(GpuOp {
            start: k.start_ns,
            end: k.end_ns.max(k.start_ns),
            corr: k.correlation_id,
            name: k.name,
            kind: if c { Kind::Communication } else { Kind::Kernel },
        });
    }
    for m in &trace.memcpys {
        lanes.entry((m.device, m.stream)).or_default().push(GpuOp {
            start: m.start_ns,
            end: m.end_ns.max(m.start_ns),
            corr: m.correlation_id,
            name: COPY_NAME,
            kind: Kind::Copy,
        });
    }
    for m in &trace.memsets {
        lanes.entry((m.device, m.stream)).or_default().push(GpuOp {
            start: m.start_ns,
            end: m.end_ns.max(m.start_ns),
            corr: m.correlation_id,
            name: MEMSET_NAME,
            kind: Kind::Memset,
        });
    }
    let mut out: Vec<GpuLane> = lanes
        .into_iter()
        .map(|((device, stream), mut ops)| {
            ops.sort_by_key(|o| (o.start, o.end, o.corr));
            GpuLane {
                launched_by: Vec::with_capacity(ops.len()),
                launch_max: Vec::with_capacity(ops.len()),
                device,
                stream,
                pid: if merged {
                    trace.meta.id_origin(stream).0
                } else {
                    None
                },
                ops,
            }
        })
        .collect();
    out.sort_by_key(|l| (l.device, l.stream));
    out
}
