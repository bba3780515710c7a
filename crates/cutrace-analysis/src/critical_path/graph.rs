//! The dependency graph of one time span of one trace, and the walk back along it that is the
//! critical path. Nodes are points in time: the start and end of every host interval (framework
//! op, CUDA call, host range) and of every GPU operation (kernel, copy, memset). Edges:
//!
//! - each host thread is one chain of its points in time order (intervals nest on their thread:
//!   the time between two points belongs to the innermost interval open there);
//! - each GPU stream is one chain: an operation's start follows the previous one's end (stream
//!   order), its end follows its start (the operation ran);
//! - a launch call's start → the start of every GPU operation with its correlation id (a CUDA
//!   graph launch → each kernel it ran, which carry the graph launch's id);
//! - the end of the GPU work a blocking call waited for → the call's end (`cudaStreamSynchronize`
//!   on its stream, `cudaEventSynchronize` on the event's stream, `cudaDeviceSynchronize` on every
//!   stream of its process, a blocking copy on its own copy);
//! - `cudaStreamWaitEvent`: the GPU work the event stood for → the first operation launched on
//!   the waiting stream after the call.
//!
//! The work an event stood for is the last operation launched on the stream it was recorded on
//! before the `cudaEventRecord` call that recorded it. torch.profiler's synchronization records
//! name both (`wait_on_stream`, `wait_on_cuda_event_record_corr_id`): a stream wait and an event
//! synchronize then wait for exactly that operation, or for nothing where none had been
//! launched there ([`super::Recorded`]). Where the record call is not named (CUPTI's records
//! never name it), the work is inferred ([`super::Inferred`]): a stream wait is tied to the last
//! work launched on the event's stream before the wait where the record names that stream
//! (older torch.profiler), else to the work its thread launched last, on another stream, before
//! its last `cudaEventRecord`; an event synchronize waits for its stream's last work to end
//! before it returned. A stream wait with no record of its waiting stream is not followed, and
//! is counted.
//!
//! Every edge runs forward in time; one whose cause ends after its effect starts (clocks of
//! host and GPU that disagree) is not followed and is counted. The walk starts at the span's
//! end and, at each point, steps to the predecessor that arrived last (the one the point waited
//! for); the time between them is one segment. Segments tile the span: the path's length is the
//! span's length, exactly.

use std::collections::HashMap;

use cutrace_trace::{Ns, StrId, Synchronization};

use super::index::{Call, GpuLane, HostIv, Index, NO_API};
use super::{Inferred, Kind, Recorded};

pub(crate) const NONE: u32 = u32::MAX;

/// How many operations queued on a stream after a `cudaStreamWaitEvent` call are searched for
/// the first one launched after it (and after a `cudaEventRecord` call, for the last one
/// launched before it).
const WAIT_SCAN: usize = 4096;

/// Where a dependency comes from: a node of the graph (`NONE` for an operation outside the
/// span), and when it arrived.
#[derive(Debug, Clone, Copy)]
struct Src {
    node: u32,
    t: Ns,
}

/// What the time between two points was: its kind, the name of the op or record, the lane it
/// ran on (a host lane for host kinds, a GPU lane otherwise) and, for GPU kinds, the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub kind: Kind,
    /// `NONE` for host time outside any op.
    pub name: StrId,
    pub lane: u32,
    /// The GPU operation's index in its lane (GPU kinds), else `NONE`.
    pub op: u32,
}

impl Seg {
    const UNEXPLAINED: Seg = Seg {
        kind: Kind::Unexplained,
        name: NONE,
        lane: NONE,
        op: NONE,
    };
}

/// An edge from another lane (or from outside the span: `src == NONE`, at `src_t`).
#[derive(Debug, Clone, Copy)]
struct Cross {
    dst: u32,
    src: u32,
    src_t: Ns,
    seg: Seg,
}

/// One piece of the path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathSeg {
    pub seg: Seg,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// Reached by a hand-off between threads ([`Graph::handoff`]).
    pub handoff: bool,
}

/// A GPU operation of the span: its lane and index there, and its two nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuNode {
    pub lane: u32,
    pub op: u32,
    pub start: u32,
    pub end: u32,
}

/// The graph of one span `[start_ns, end_ns]`.
pub(crate) struct Graph {
    t: Vec<Ns>,
    prev: Vec<u32>,
    prev_seg: Vec<Seg>,
    /// Whether the edge from `prev` is work that any delay before it pushes along (host program
    /// order, a GPU operation running) rather than a dependency that may be waited for.
    prev_work: Vec<bool>,
    cross: Vec<Cross>,
    pub gpu: Vec<GpuNode>,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// Host lanes' indices in the index, by the lane numbers segments carry.
    pub host_lanes: Vec<u32>,
    /// GPU lanes' indices in the index, by the lane numbers segments carry.
    pub gpu_lanes: Vec<u32>,
    /// Each GPU lane's operations in [`Graph::gpu`], as a range (they are pushed lane by lane).
    lane_ops: Vec<(u32, u32)>,
    /// (device, stream) → lane number.
    lane_of: HashMap<(u32, u64), u32>,
    /// Each host lane's nodes, as a range (a lane's chain is made in one go, in time order).
    host_nodes: Vec<(u32, u32)>,
    /// The host lane of the span's end (the step's thread), where a walk that reaches another
    /// thread's first point goes on ([`Graph::set_main`]).
    main_lane: Option<u32>,
    /// The event waits whose work the synchronization records named.
    pub recorded: Recorded,
    /// Every GPU operation's (end, lane, index in [`Graph::gpu`]) by its lane's process (`None`
    /// for a trace of one process), in that order: the last to end before a device-wide
    /// synchronize returned is one binary search, however many streams there are.
    by_end: HashMap<Option<u32>, Vec<EndAt>>,
}

/// A GPU operation's end, its lane (the lower lane sorting later) and its index in
/// [`Graph::gpu`]: sorted, the last one at or before a time is the one a tie-break prefers.
type EndAt = (Ns, std::cmp::Reverse<u32>, u32);

/// [`Graph::binding`]'s mark for a hand-off from another thread's first point to the main
/// thread.
const HANDOFF: u32 = NONE - 1;

/// Which host lanes and GPU lanes a span takes: those of one process, or all.
pub(crate) struct SpanSel {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub pid: Option<u32>,
}

impl Graph {
    fn node(&mut self, t: Ns, prev: u32, seg: Seg, work: bool) -> u32 {
        let id = self.t.len() as u32;
        self.t.push(t);
        self.prev.push(prev);
        self.prev_seg.push(seg);
        self.prev_work.push(work);
        id
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn t(&self, n: u32) -> Ns {
        self.t[n as usize]
    }

    /// Builds the graph of `sel` over `ix`; returns it and, for each host interval that is a
    /// host range, its end node (by (lane, start, end, name)) through `range_end`.
    pub fn build(ix: &Index, sel: &SpanSel, inferred: &mut Inferred) -> (Graph, RangeEnds) {
        let mut g = Graph {
            t: Vec::new(),
            prev: Vec::new(),
            prev_seg: Vec::new(),
            prev_work: Vec::new(),
            cross: Vec::new(),
            gpu: Vec::new(),
            start_ns: sel.start_ns,
            end_ns: sel.end_ns,
            host_lanes: Vec::new(),
            gpu_lanes: Vec::new(),
            lane_ops: Vec::new(),
            lane_of: HashMap::new(),
            host_nodes: Vec::new(),
            main_lane: None,
            recorded: Recorded::default(),
            by_end: HashMap::new(),
        };
        // API index → (start node, end node, host lane, position in that lane's span slice).
        let mut api_nodes: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut range_ends = RangeEnds::default();
        // Host lanes, each a slice of its intervals that start inside the span.
        let mut host_slices: Vec<&[HostIv]> = Vec::new();
        // Threads are sorted by process: a step's are found by a binary search, not a pass over
        // every thread of the trace for every step.
        let threads = match sel.pid {
            Some(p) => {
                let lo = ix.threads.partition_point(|l| l.pid < p);
                lo..lo + ix.threads[lo..].partition_point(|l| l.pid == p)
            }
            None => 0..ix.threads.len(),
        };
        for li in threads {
            let lane = &ix.threads[li];
            let ivs = lane.span(sel.start_ns, sel.end_ns);
            if ivs.is_empty() {
                continue;
            }
            let lane_no = g.host_lanes.len() as u32;
            g.host_lanes.push(li as u32);
            host_slices.push(ivs);
            let first = g.t.len() as u32;
            g.chain(lane_no, ivs, &mut api_nodes, &mut range_ends);
            g.host_nodes.push((first, g.t.len() as u32));
        }
        // GPU lanes: the operations that start inside the span, and the one before them.
        let mut by_corr: HashMap<u64, u32> = HashMap::new();
        for (li, lane) in ix.streams.iter().enumerate() {
            if sel.pid.is_some() && lane.pid.is_some() && lane.pid != sel.pid {
                continue;
            }
            let (lo, hi) = lane.span(sel.start_ns, sel.end_ns);
            if lo == hi {
                continue;
            }
            let lane_no = g.gpu_lanes.len() as u32;
            g.gpu_lanes.push(li as u32);
            g.lane_of.insert((lane.device, lane.stream), lane_no);
            let first = g.gpu.len() as u32;
            g.stream_chain(
                ix,
                lane,
                lane_no,
                lo,
                hi,
                &mut by_corr,
                &api_nodes,
                inferred,
            );
            g.lane_ops.push((first, g.gpu.len() as u32));
        }
        for (i, gn) in g.gpu.iter().enumerate() {
            let pid = ix.streams[g.gpu_lanes[gn.lane as usize] as usize].pid;
            let e = (g.t(gn.end), std::cmp::Reverse(gn.lane), i as u32);
            g.by_end.entry(pid).or_default().push(e);
        }
        for v in g.by_end.values_mut() {
            v.sort_unstable();
        }
        g.sync_edges(ix, &host_slices, &api_nodes, &by_corr, inferred);
        g.cross.sort_by_key(|c| c.dst);
        (g, range_ends)
    }

    /// One host lane's chain of points.
    fn chain(
        &mut self,
        lane_no: u32,
        ivs: &[HostIv],
        api_nodes: &mut HashMap<u32, (u32, u32)>,
        range_ends: &mut RangeEnds,
    ) {
        let seg_of = |top: Option<&(usize, Ns)>| Seg {
            kind: Kind::Host,
            name: top.map_or(NONE, |&(i, _)| ivs[i].name),
            lane: lane_no,
            op: NONE,
        };
        // (interval, its end as nested) of the open intervals, innermost last.
        let mut stack: Vec<(usize, Ns)> = Vec::new();
        let mut starts: Vec<u32> = vec![NONE; ivs.len()];
        let mut last = NONE;
        let mut i = 0;
        loop {
            let next = ivs.get(i);
            let closes = stack
                .last()
                .is_some_and(|&(_, end)| next.is_none_or(|iv| end <= iv.start));
            if closes {
                let top = stack.last().copied();
                let Some((k, end)) = top else { break };
                let n = self.node(end, last, seg_of(top.as_ref()), true);
                stack.pop();
                last = n;
                let iv = &ivs[k];
                if iv.api != NO_API {
                    api_nodes.insert(iv.api, (starts[k], n));
                }
                if iv.range {
                    range_ends.0.insert((iv.start, iv.end), n);
                }
                continue;
            }
            let Some(iv) = next else { break };
            let n = self.node(iv.start, last, seg_of(stack.last()), true);
            starts[i] = n;
            last = n;
            // An interval that outlasts its parent ends with it: points stay in time order.
            let end = stack
                .last()
                .map_or(iv.end, |&(_, pe)| iv.end.min(pe))
                .max(iv.start);
            stack.push((i, end));
            i += 1;
        }
    }

    /// One GPU lane's chain, and the launch edges into it.
    #[allow(clippy::too_many_arguments)]
    fn stream_chain(
        &mut self,
        ix: &Index,
        lane: &GpuLane,
        lane_no: u32,
        lo: usize,
        hi: usize,
        by_corr: &mut HashMap<u64, u32>,
        api_nodes: &HashMap<u32, (u32, u32)>,
        inferred: &mut Inferred,
    ) {
        let mut last = NONE;
        for (k, op) in lane.ops[lo..hi].iter().enumerate() {
            let k = (lo + k) as u32;
            let seg = Seg {
                kind: Kind::Queue,
                name: op.name,
                lane: lane_no,
                op: k,
            };
            // Stream order: a start before the previous end (overlap on one stream, which the
            // hardware does not do) is not followed.
            let prev_ok = last != NONE && self.t(last) <= op.start;
            let s = self.node(op.start, if prev_ok { last } else { NONE }, seg, false);
            let run = Seg {
                kind: op.kind,
                ..seg
            };
            let e = self.node(op.end.max(op.start), s, run, true);
            last = e;
            let gi = self.gpu.len() as u32;
            self.gpu.push(GpuNode {
                lane: lane_no,
                op: k,
                start: s,
                end: e,
            });
            if op.corr != 0 {
                let keep = by_corr
                    .get(&op.corr)
                    .is_none_or(|&o| self.t(self.gpu[o as usize].end) <= op.end);
                if keep {
                    by_corr.insert(op.corr, gi);
                }
            }
            match ix.launch_of.get(&op.corr) {
                Some(&api) if op.corr != 0 => {
                    let call = &ix.api[api as usize];
                    if call.start > op.start {
                        inferred.inverted_edges += 1;
                        continue;
                    }
                    let src = api_nodes.get(&api).map_or(NONE, |n| n.0);
                    self.cross.push(Cross {
                        dst: s,
                        src,
                        src_t: call.start,
                        seg: Seg {
                            kind: Kind::Launch,
                            ..seg
                        },
                    });
                }
                _ => inferred.gpu_ops_without_launch += 1,
            }
        }
    }

    /// Edges into blocking calls' ends and out of the work `cudaStreamWaitEvent` waited for.
    fn sync_edges(
        &mut self,
        ix: &Index,
        host_slices: &[&[HostIv]],
        api_nodes: &HashMap<u32, (u32, u32)>,
        by_corr: &HashMap<u64, u32>,
        inferred: &mut Inferred,
    ) {
        for (lane_no, ivs) in host_slices.iter().enumerate() {
            for (pos, iv) in ivs.iter().enumerate() {
                if iv.api == NO_API {
                    continue;
                }
                let call = &ix.api[iv.api as usize];
                let Some(&(_, end_node)) = api_nodes.get(&iv.api) else {
                    continue;
                };
                // An event synchronize whose record names the event's work waits for it alone.
                let exact = match call.call {
                    Call::EventSync => ix
                        .sync_of
                        .get(&call.corr)
                        .and_then(|&s| self.recorded_work(ix, &ix.trace.syncs[s as usize])),
                    _ => None,
                };
                let waited = match (call.call, exact) {
                    (_, Some(src)) => src,
                    (Call::Copy, _) => by_corr.get(&call.corr).map(|&gi| self.end_of(gi)),
                    (Call::StreamSync | Call::EventSync | Call::DeviceSync, _) => self
                        .waited_for(ix, call.corr, call.call, call.pid, call.end, inferred)
                        .map(|gi| self.end_of(gi)),
                    (Call::WaitEvent, _) => {
                        self.stream_wait(ix, ivs, pos, by_corr, inferred);
                        None
                    }
                    _ => None,
                };
                if matches!(exact, Some(None)) {
                    // The record says the event stood for no work: nothing was waited for.
                    self.recorded.event_syncs += 1;
                    self.recorded.waited_for_nothing += 1;
                }
                if let Some(src) = waited {
                    if src.t > call.end {
                        inferred.inverted_edges += 1;
                        continue;
                    }
                    if exact.is_some() {
                        self.recorded.event_syncs += 1;
                    }
                    self.cross.push(Cross {
                        dst: end_node,
                        src: src.node,
                        src_t: src.t,
                        seg: Seg {
                            kind: Kind::Sync,
                            name: iv.name,
                            lane: lane_no as u32,
                            op: NONE,
                        },
                    });
                }
            }
        }
    }

    /// The end of [`Graph::gpu`]'s operation `gi`.
    fn end_of(&self, gi: u32) -> Src {
        let node = self.gpu[gi as usize].end;
        Src {
            node,
            t: self.t(node),
        }
    }

    /// The GPU operation a synchronizing call waited for: the last to end, no later than the
    /// call's return, on the stream its synchronization record names (for an event
    /// synchronize, the stream the event was recorded on), or on every stream of its process
    /// (device-wide, and where no record names a stream).
    fn waited_for(
        &self,
        ix: &Index,
        corr: u64,
        call: Call,
        pid: u32,
        by: Ns,
        inferred: &mut Inferred,
    ) -> Option<u32> {
        let rec = ix.sync_of.get(&corr).map(|&s| &ix.trace.syncs[s as usize]);
        let stream = match (call, rec) {
            (Call::DeviceSync, _) => None,
            (_, Some(r)) if r.stream.or(r.wait_on_stream).is_some() => {
                if call == Call::EventSync {
                    // The event's stream without its record call: its last work is inferred.
                    inferred.event_syncs += 1;
                }
                r.stream.or(r.wait_on_stream).map(|s| (r.device, s))
            }
            _ => {
                inferred.syncs_without_stream += 1;
                None
            }
        };
        let Some(key) = stream else {
            // Every stream of its process (and of a trace of one process): the operation that
            // ended last by then; ties: the lower lane, then the later operation in it.
            let last = |k: Option<u32>| {
                let v = self.by_end.get(&k)?;
                v.get(v.partition_point(|e| e.0 <= by).checked_sub(1)?)
                    .copied()
            };
            return last(None).max(last(Some(pid))).map(|e| e.2);
        };
        // On one stream operations run one after another: their ends are in order.
        let &l = self.lane_of.get(&key)?;
        let (lo, hi) = self.lane_ops[l as usize];
        let ops = &self.gpu[lo as usize..hi as usize];
        let k = ops.partition_point(|gn| self.t(gn.end) <= by);
        k.checked_sub(1).map(|k| lo + k as u32)
    }

    /// The work the event of synchronization record `rec` stood for, where the record names it:
    /// the end of the last operation launched on the stream the event was recorded on before the
    /// `cudaEventRecord` call that recorded it. `None` where the record does not name both, or
    /// the call is not in the trace (the caller infers); `Some(None)` where nothing had been
    /// launched there (the event was complete when recorded: torch records events on streams
    /// that never run work).
    fn recorded_work(&self, ix: &Index, rec: &Synchronization) -> Option<Option<Src>> {
        let stream = rec.wait_on_stream?;
        let &call = ix.launch_of.get(&rec.event_record_correlation?)?;
        let call = &ix.api[call as usize];
        if call.call != Call::Record {
            return None;
        }
        Some(self.last_launched(ix, (rec.device, stream), call.start))
    }

    /// The end of the last operation launched on stream `key` before `t` (a call's start), as
    /// the graph holds it (its end outside the span where the graph does not); `None` where
    /// nothing had been launched there.
    fn last_launched(&self, ix: &Index, key: (u32, u64), t: Ns) -> Option<Src> {
        // A stream the graph has no lane for ran nothing before the span's end.
        let &l = self.lane_of.get(&key)?;
        let lane = &ix.streams[self.gpu_lanes[l as usize] as usize];
        // A stream runs its work in the order it was launched. Work that started before `t` was
        // launched before it; work launched before it may start after it (queued behind the
        // stream's work): the longest prefix of ops each started or launched before `t`.
        let ops = &lane.ops;
        let k = lane
            .launched_by
            .partition_point(|&b| b < t)
            .checked_sub(1)?;
        // The operation's node where the graph holds it, else its end outside the span.
        let (lo, hi) = self.lane_ops[l as usize];
        let first = self.gpu[lo as usize].op as usize;
        let node = match k.checked_sub(first) {
            Some(d) if d < (hi - lo) as usize => self.gpu[lo as usize + d].end,
            _ => NONE,
        };
        Some(Src {
            node,
            t: ops[k].end,
        })
    }

    /// The first operation launched on stream `key` at or after `t` (a call's start), where the
    /// graph holds one.
    fn first_launched_after(&self, ix: &Index, key: (u32, u64), t: Ns) -> Option<GpuNode> {
        let &l = self.lane_of.get(&key)?;
        let (lo, hi) = self.lane_ops[l as usize];
        let lane = &ix.streams[self.gpu_lanes[l as usize] as usize];
        // Launches on a stream come in its order: the first op whose launch call started at or
        // after `t` is where the latest known launch first reaches `t` (ops without a launch
        // call do not move it, and are passed over).
        let k = lane.launch_max.partition_point(|&m| m < t);
        let first = self.gpu.get(lo as usize)?.op as usize;
        let d = k.checked_sub(first)?;
        (d < (hi - lo) as usize).then(|| self.gpu[lo as usize + d])
    }

    /// `cudaStreamWaitEvent` at `ivs[pos]`: the work the event stood for (named by the wait's
    /// synchronization record, else inferred: the last work launched on the event's stream
    /// before the call where the record names that stream, else the work launched before the
    /// thread's last `cudaEventRecord` on another stream) → the first operation launched on the
    /// waiting stream after the call. Each call is counted once: recorded, inferred, not
    /// followed (no record of the waiting stream, or no work found) or inverted.
    fn stream_wait(
        &mut self,
        ix: &Index,
        ivs: &[HostIv],
        pos: usize,
        by_corr: &HashMap<u64, u32>,
        inferred: &mut Inferred,
    ) {
        let wait = &ix.api[ivs[pos].api as usize];
        let rec = ix
            .sync_of
            .get(&wait.corr)
            .map(|&s| &ix.trace.syncs[s as usize]);
        // Without a record of the waiting stream, the work that waited is unknown.
        let Some((rec, waiting)) = rec.and_then(|r| Some((r, r.stream?))) else {
            inferred.stream_waits_not_followed += 1;
            return;
        };
        let key = (rec.device, waiting);
        // The work the event stood for (`Some(None)`: nothing had been launched on its stream).
        let exact = self.recorded_work(ix, rec);
        let dep = match exact {
            Some(work) => work,
            None => {
                let guess = match rec.wait_on_stream {
                    Some(s) => Some(self.last_launched(ix, (rec.device, s), wait.start)),
                    None => {
                        self.inferred_work(ix, ivs, pos, key, by_corr)
                            .map(|(work, ambiguous)| {
                                if ambiguous {
                                    inferred.stream_waits_ambiguous += 1;
                                }
                                Some(work)
                            })
                    }
                };
                let Some(work) = guess else {
                    inferred.stream_waits_not_followed += 1;
                    return;
                };
                work
            }
        };
        let after = self.first_launched_after(ix, key, wait.start);
        let edge = match (dep, after) {
            (Some(dep), Some(after)) if dep.t > self.t(after.start) => {
                inferred.inverted_edges += 1;
                return;
            }
            (Some(dep), Some(after)) => Some((dep, after)),
            // Nothing to wait for, or nothing in the span that waited.
            _ => None,
        };
        if exact.is_some() {
            self.recorded.stream_waits += 1;
            if dep.is_none() {
                self.recorded.waited_for_nothing += 1;
            }
        } else {
            inferred.stream_waits += 1;
            if dep.is_none() {
                inferred.waited_for_nothing += 1;
            }
        }
        let Some((dep, after)) = edge else {
            return;
        };
        let lane = &ix.streams[self.gpu_lanes[after.lane as usize] as usize];
        self.cross.push(Cross {
            dst: after.start,
            src: dep.node,
            src_t: dep.t,
            seg: Seg {
                kind: Kind::StreamWait,
                name: lane.ops[after.op as usize].name,
                lane: after.lane,
                op: after.op,
            },
        });
    }

    /// The work a stream wait at `ivs[pos]` is taken to have waited for, where its record does
    /// not say: the last GPU work its thread launched, on another stream than `waiting`, before
    /// its last `cudaEventRecord` call.
    ///
    /// Also whether that was ambiguous: since its previous `cudaEventRecord` the thread also
    /// launched on a third stream, on which the event may as well have been recorded. Each search
    /// looks back at most [`WAIT_SCAN`] intervals of the thread (a wait further from its record
    /// is not followed): bounded, however many waits the thread makes.
    fn inferred_work(
        &self,
        ix: &Index,
        ivs: &[HostIv],
        pos: usize,
        waiting: (u32, u64),
        by_corr: &HashMap<u64, u32>,
    ) -> Option<(Src, bool)> {
        let is_record =
            |p: usize| ivs[p].api != NO_API && ix.api[ivs[p].api as usize].call == Call::Record;
        let launched = |p: usize| -> Option<(u32, (u32, u64))> {
            let a = ivs[p].api;
            if a == NO_API {
                return None;
            }
            let gi = *by_corr.get(&ix.api[a as usize].corr)?;
            let lane = &ix.streams[self.gpu_lanes[self.gpu[gi as usize].lane as usize] as usize];
            Some((gi, (lane.device, lane.stream)))
        };
        let floor = pos.saturating_sub(WAIT_SCAN);
        let record_pos = (floor..pos).rev().find(|&p| is_record(p))?;
        let floor = record_pos.saturating_sub(WAIT_SCAN);
        let (at, gi, stream) = (floor..record_pos).rev().find_map(|p| {
            let (gi, stream) = launched(p)?;
            (stream != waiting).then_some((p, gi, stream))
        })?;
        // Back to the thread's previous record: another stream launched on in between?
        let ambiguous = (floor..at)
            .rev()
            .take_while(|&p| !is_record(p))
            .filter_map(launched)
            .any(|(_, s)| s != waiting && s != stream);
        Some((self.end_of(gi), ambiguous))
    }

    fn crosses(&self, v: u32) -> &[Cross] {
        let lo = self.cross.partition_point(|c| c.dst < v);
        let hi = self.cross.partition_point(|c| c.dst <= v);
        &self.cross[lo..hi]
    }

    /// The predecessor `v` waited for: the one that arrived last (an edge from another lane
    /// wins a tie), as (its time, its node or `NONE` when outside the span, the segment, the
    /// cross edge's index or `NONE` for the lane's own predecessor).
    fn binding(&self, v: u32) -> Option<(Ns, u32, Seg, u32)> {
        self.waited_on(v).or_else(|| self.handoff(v))
    }

    /// The host lane whose chain holds `n`, if any.
    fn host_lane_of(&self, n: u32) -> Option<u32> {
        let k = self.host_nodes.partition_point(|r| r.0 <= n);
        (k > 0 && n < self.host_nodes[k - 1].1).then(|| k as u32 - 1)
    }

    /// Makes the host lane holding `sink` the main one (see [`Graph::handoff`]).
    pub fn set_main(&mut self, sink: u32) {
        self.main_lane = self.host_lane_of(sink);
    }

    /// The first point of another thread's chain has no recorded cause (the trace shows no
    /// dependency between threads): the thread is taken to have followed the main thread, at the
    /// main thread's last point before it (an autograd thread's backward after the forward).
    /// Inferred, and counted on the path ([`super::PathReport::thread_handoffs`]).
    fn handoff(&self, v: u32) -> Option<(Ns, u32, Seg, u32)> {
        let main = self.main_lane?;
        let lane = self.host_lane_of(v)?;
        if lane == main || self.host_nodes[lane as usize].0 != v {
            return None;
        }
        let (a, b) = self.host_nodes[main as usize];
        let tv = self.t(v);
        let k = self.t[a as usize..b as usize].partition_point(|&t| t <= tv);
        let u = a + k.checked_sub(1)? as u32;
        let name = if u + 1 < b {
            self.prev_seg[u as usize + 1].name
        } else {
            NONE
        };
        let seg = Seg {
            kind: Kind::Host,
            name,
            lane: main,
            op: NONE,
        };
        Some((self.t(u), u, seg, HANDOFF))
    }

    /// [`Graph::binding`] over the recorded edges alone.
    fn waited_on(&self, v: u32) -> Option<(Ns, u32, Seg, u32)> {
        let tv = self.t(v);
        let mut best: Option<(Ns, u32, Seg, u32)> = None;
        let p = self.prev[v as usize];
        if p != NONE && self.t(p) <= tv {
            best = Some((self.t(p), p, self.prev_seg[v as usize], NONE));
        }
        let lo = self.cross.partition_point(|c| c.dst < v);
        for (k, c) in self.crosses(v).iter().enumerate() {
            if c.src_t <= tv && best.is_none_or(|b| c.src_t >= b.0) {
                best = Some((c.src_t, c.src, c.seg, (lo + k) as u32));
            }
        }
        best
    }

    /// The critical path back from `sink` to the span's start, in time order.
    pub fn walk(&self, sink: u32) -> Vec<PathSeg> {
        self.walk_until(sink, |_| false).0
    }

    /// [`Graph::walk`], stopping after the first segment `stop` accepts (the path then starts
    /// with it, and the second value is true).
    pub fn walk_until(&self, sink: u32, stop: impl Fn(&Seg) -> bool) -> (Vec<PathSeg>, bool) {
        let mut out: Vec<PathSeg> = Vec::new();
        let mut stopped = false;
        let s = self.start_ns;
        let mut v = sink;
        let mut steps = 0usize;
        let limit = self.t.len() + self.cross.len() + 1;
        loop {
            let tv = self.t(v);
            if tv <= s {
                break;
            }
            steps += 1;
            let Some((pt, src, seg, how)) = self.binding(v).filter(|_| steps <= limit) else {
                out.push(PathSeg {
                    seg: Seg::UNEXPLAINED,
                    start_ns: s,
                    end_ns: tv,
                    handoff: false,
                });
                break;
            };
            let from = pt.max(s);
            if from < tv || how == HANDOFF {
                out.push(PathSeg {
                    seg,
                    start_ns: from,
                    end_ns: tv,
                    handoff: how == HANDOFF,
                });
            }
            if pt <= s {
                break;
            }
            if stop(&seg) {
                stopped = true;
                break;
            }
            if src == NONE {
                out.push(PathSeg {
                    seg: Seg::UNEXPLAINED,
                    start_ns: s,
                    end_ns: pt,
                    handoff: false,
                });
                break;
            }
            v = src;
        }
        out.reverse();
        (out, stopped)
    }

    /// Each GPU operation's slack, by [`Graph::gpu`]: how much later its end could come before
    /// `sink` would, with every other record where it was. A dependency that bound its target
    /// keeps its recorded delay; one that did not may grow until it binds. Work after the
    /// span's end, or that nothing in the span waits for, may grow until the span's end.
    pub fn slack(&self, sink: u32) -> Vec<Ns> {
        let n = self.t.len();
        // Each node's incoming edges are its lane predecessor and its cross edges (sorted by
        // target): walked in place, no edge list is built.
        let mut out_deg = vec![0u32; n];
        for v in 0..n as u32 {
            self.each_into(v, |u, _| out_deg[u as usize] += 1);
        }
        // Latest times, in reverse topological order (Kahn's algorithm on the reversed edges).
        let mut latest: Vec<Ns> = self.t.iter().map(|&t| t.max(self.end_ns)).collect();
        latest[sink as usize] = self.t(sink);
        let mut ready: Vec<u32> = (0..n as u32)
            .filter(|&v| out_deg[v as usize] == 0)
            .collect();
        while let Some(v) = ready.pop() {
            let lv = latest[v as usize];
            self.each_into(v, |u, w| {
                let lu = &mut latest[u as usize];
                *lu = (*lu).min(lv.saturating_sub(w));
                out_deg[u as usize] -= 1;
                if out_deg[u as usize] == 0 {
                    ready.push(u);
                }
            });
        }
        self.gpu
            .iter()
            .map(|gn| latest[gn.end as usize].saturating_sub(self.t(gn.end)))
            .collect()
    }

    /// Calls `f(u, weight)` for each edge u → `v` inside the span: work (host program order, a
    /// GPU operation running) and the dependency `v` waited for keep their recorded time; any
    /// other dependency weighs 0 (it may grow until it binds).
    fn each_into(&self, v: u32, mut f: impl FnMut(u32, Ns)) {
        let tv = self.t(v);
        let bind = self.binding(v).map(|b| b.3);
        let p = self.prev[v as usize];
        if p != NONE && self.t(p) <= tv {
            let w = if self.prev_work[v as usize] || bind == Some(NONE) {
                tv - self.t(p)
            } else {
                0
            };
            f(p, w);
        }
        let lo = self.cross.partition_point(|c| c.dst < v);
        for (k, c) in self.crosses(v).iter().enumerate() {
            if c.src == NONE || c.src_t > tv {
                continue;
            }
            let binds = bind == Some((lo + k) as u32);
            f(c.src, if binds { tv - c.src_t } else { 0 });
        }
    }
}

/// The end node of each host range by (start, end), to find a step's end.
#[derive(Default)]
pub(crate) struct RangeEnds(pub HashMap<(Ns, Ns), u32>);
