//! The critical path of each step and of the window: the chain of dependent work (host ops,
//! launches, kernels and copies, stream order, event waits, synchronizations) whose length is
//! the step's time, what it is made of, its longest segments and how much the large work off it
//! could grow before the step would lengthen.
//!
//! The graph is built from what the trace holds ([`graph`] lists the edges); an edge whose
//! cause the trace does not show is not invented, and what is inferred is counted: in
//! [`Inferred`], and on each path the hand-offs between threads
//! ([`PathReport::thread_handoffs`]). The path is walked back from the step's end (the end of its host range): at
//! each point, to the predecessor that arrived last. Its segments tile the step, so the path's
//! length is the step's duration, exactly. The trace shows when each dependency arrived, not
//! how long an edge must take at least: the time from the last arrival to the point (a launch's
//! latency, a kernel queued behind the previous one) is charged to that last arrival. Where
//! every record starts a delay after its last dependency arrives, the path is a longest path
//! of the dependency graph (`tests/analysis/critical_path.rs` checks it against a brute force). Per step, the graph holds only the records that start
//! inside the step (and each stream's operation before them): memory is bounded by the step.

pub(crate) mod diff;
pub(crate) mod graph;
pub(crate) mod index;

use std::collections::HashMap;

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::steps::Steps;
use crate::window::Window;
pub use diff::{diff, OnPathChange, PartChange, PathDiff, STEP_RANGE};
use graph::{Graph, PathSeg, SpanSel, NONE};
use index::Index;

/// What a segment of the path was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Host time inside the innermost op, call or host range open on its thread.
    Host,
    /// A kernel ran (not a communication kernel).
    Kernel,
    /// A communication kernel ran ([`cutrace_trace::is_comm_kernel`]).
    Communication,
    Copy,
    Memset,
    /// From a launch call's start to its GPU work's start.
    Launch,
    /// From the previous operation's end on the stream to the next one's start.
    Queue,
    /// From the end of the GPU work a blocking call waited for to the call's return.
    Sync,
    /// From the end of the work a `cudaStreamWaitEvent` waited for to the waiting work's start.
    StreamWait,
    /// Time whose cause the trace does not show (a kernel without its launch call, a thread's
    /// first op with no thread of the span's own to hand off from).
    Unexplained,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Kernel => "kernel",
            Kind::Communication => "communication",
            Kind::Copy => "copy",
            Kind::Memset => "memset",
            Kind::Launch => "launch",
            Kind::Queue => "queue",
            Kind::Sync => "sync",
            Kind::StreamWait => "stream_wait",
            Kind::Unexplained => "unexplained",
        }
    }
}

/// The critical path of every step and of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalPath {
    /// What the graph took from inference rather than from a record, counted.
    pub inferred: Inferred,
    /// Event waits whose work the trace's synchronization records named, counted.
    pub recorded: Recorded,
    /// The path over the window (the whole trace without `--from`/`--to`): from its first
    /// record's start to its last record's end; null when the window holds no record.
    pub window: Option<PathReport>,
    /// Per step, in the steps' order.
    pub steps: Vec<StepPath>,
}

impl CriticalPath {
    /// The step whose path is longest (ties: the earlier step): the one the text and the page
    /// detail.
    pub fn slowest_step(&self) -> Option<&StepPath> {
        self.steps
            .iter()
            .max_by_key(|s| (s.path.length_ns, std::cmp::Reverse(s.index)))
    }
}

/// Edges the graph inferred, and edges it could not follow. With [`Recorded`], every
/// `cudaStreamWaitEvent` call of the window is counted once: in `recorded.stream_waits`,
/// `stream_waits`, `stream_waits_not_followed` or `inverted_edges`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Inferred {
    /// `cudaStreamWaitEvent` calls whose synchronization record names the waiting stream but not
    /// the `cudaEventRecord` call that recorded the event: tied to the last GPU work launched
    /// before the wait on the event's stream where the record names it (torch.profiler's
    /// `wait_on_stream` alone), else to the GPU work their thread launched last, on another
    /// stream, before its last `cudaEventRecord` call.
    pub stream_waits: u64,
    /// Of `stream_waits`, those on an event's stream (named by the record) where nothing had been
    /// launched before the wait: they waited for nothing, whichever call recorded the event.
    pub waited_for_nothing: u64,
    /// `cudaStreamWaitEvent` calls not followed: no synchronization record names the waiting
    /// stream (CUPTI and torch.profiler leave some calls without one), or nothing names the work
    /// the event stood for and the inference above finds none.
    pub stream_waits_not_followed: u64,
    /// Of `stream_waits` tied by the thread's launches (no stream named by the record), those
    /// where the thread had also launched on a third stream since its previous
    /// `cudaEventRecord`: the event may have been recorded there instead (torch 2.11 writes
    /// neither the event's stream nor its record call, `tests/fixtures/kineto/
    /// torch211_sync_events.json.gz`).
    pub stream_waits_ambiguous: u64,
    /// `cudaEventSynchronize` calls whose record names the event's stream but not its
    /// `cudaEventRecord` call: taken to wait for the last GPU work on that stream to end before
    /// they returned.
    pub event_syncs: u64,
    /// Stream and event synchronizations with no record of their stream: taken to wait for the
    /// last GPU work of their process to end before they returned.
    pub syncs_without_stream: u64,
    /// GPU operations with no launch call in the trace: their start has no recorded cause.
    pub gpu_ops_without_launch: u64,
    /// Dependencies whose cause ends after their effect starts (host and GPU clocks that
    /// disagree): not followed.
    pub inverted_edges: u64,
}

/// Event waits whose synchronization record names the event's stream and the `cudaEventRecord`
/// call that recorded it (torch.profiler's `wait_on_stream` and
/// `wait_on_cuda_event_record_corr_id`): each waits for the last GPU operation launched on that
/// stream before that call, or for nothing where none had been.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Recorded {
    /// `cudaStreamWaitEvent` calls.
    pub stream_waits: u64,
    /// `cudaEventSynchronize` calls.
    pub event_syncs: u64,
    /// Of `stream_waits` and `event_syncs`, those that waited for nothing: nothing had been
    /// launched on the event's stream before the event was recorded (torch records events on
    /// streams that never run work).
    pub waited_for_nothing: u64,
}

impl Inferred {
    /// Adds `o`'s counts (a job's, over its ranks' step graphs).
    pub fn add(&mut self, o: &Inferred) {
        let Inferred {
            stream_waits,
            waited_for_nothing,
            stream_waits_not_followed,
            stream_waits_ambiguous,
            event_syncs,
            syncs_without_stream,
            gpu_ops_without_launch,
            inverted_edges,
        } = o;
        self.stream_waits_ambiguous += stream_waits_ambiguous;
        self.stream_waits += stream_waits;
        self.waited_for_nothing += waited_for_nothing;
        self.stream_waits_not_followed += stream_waits_not_followed;
        self.event_syncs += event_syncs;
        self.syncs_without_stream += syncs_without_stream;
        self.gpu_ops_without_launch += gpu_ops_without_launch;
        self.inverted_edges += inverted_edges;
    }
}

impl Recorded {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &Recorded) {
        let Recorded {
            stream_waits,
            event_syncs,
            waited_for_nothing,
        } = o;
        self.stream_waits += stream_waits;
        self.event_syncs += event_syncs;
        self.waited_for_nothing += waited_for_nothing;
    }
}

/// One step's path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPath {
    /// The step's index in `steps.steps` (1-based).
    pub index: u64,
    pub name: String,
    pub pid: u32,
    #[serde(flatten)]
    pub path: PathReport,
}

/// A path over one span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathReport {
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The sum of the segments: `end_ns − start_ns`.
    pub length_ns: Ns,
    /// Segments on the path.
    pub segments: u64,
    pub composition: Composition,
    /// The longest segments, longest first: the ones to shorten first.
    pub longest_segments: Vec<Segment>,
    /// The largest GPU operations off the path, largest first, with their slack.
    pub slack: Vec<Slack>,
    /// Times the path reached another thread's first op in the span, whose cause the trace does
    /// not show, and went on along the span's own thread from its last point before it
    /// (inferred: an autograd thread's backward follows the forward).
    pub thread_handoffs: u64,
    /// Time on the path by (kind, name), every one (for `diff`; not in the report's JSON).
    #[serde(skip)]
    pub by_what: Vec<(Kind, String, Ns)>,
    /// The whole path in time order, neighbours of one kind merged (for the page's timeline;
    /// not in the report's JSON).
    #[serde(skip)]
    pub runs: Vec<PathRun>,
}

/// A stretch of the path of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRun {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub kind: Kind,
}

/// `segs` (start, end, kind) in time order as runs, touching neighbours of one kind merged.
pub fn runs_of(segs: impl IntoIterator<Item = (Ns, Ns, Kind)>) -> Vec<PathRun> {
    let mut out: Vec<PathRun> = Vec::new();
    for (start_ns, end_ns, kind) in segs {
        if end_ns <= start_ns {
            continue;
        }
        match out.last_mut() {
            Some(r) if r.kind == kind && r.end_ns == start_ns => r.end_ns = end_ns,
            _ => out.push(PathRun {
                start_ns,
                end_ns,
                kind,
            }),
        }
    }
    out
}

/// The path's length by what it was; the fields add up to `length_ns`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Composition {
    pub host_ns: Ns,
    /// Host time by op (the innermost open), largest first.
    pub host_ops: Vec<OpTime>,
    pub compute_ns: Ns,
    pub communication_ns: Ns,
    /// Copies and memsets.
    pub copy_ns: Ns,
    /// Launch gaps: launch call to GPU start, and queueing behind the stream's previous work.
    pub launch_ns: Ns,
    pub sync_ns: Ns,
    pub stream_wait_ns: Ns,
    pub unexplained_ns: Ns,
    /// A job's path only: the time ranks on the path waited at collectives for the rank the
    /// path goes on along (that rank's work fills it: not part of the sum above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_wait_ns: Option<Ns>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpTime {
    pub name: String,
    pub ns: Ns,
}

/// Where a segment ran: a host thread, or a GPU stream (as its process knows it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Place {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// A job's path: the rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub kind: Kind,
    /// The op, call, kernel or range; `(no op)` for host time outside any.
    pub name: String,
    pub place: Place,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub length_ns: Ns,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slack {
    pub kind: Kind,
    pub name: String,
    pub place: Place,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// How much later it could end before the span's end would move, every other record where
    /// it was.
    pub slack_ns: Ns,
}

/// The critical path of `trace` over `window`, and of each of `steps`; lists capped at `top`.
pub fn critical_path(
    trace: &Trace,
    window: Option<&Window>,
    steps: Option<&Steps>,
    top: usize,
) -> CriticalPath {
    let ix = Index::new(trace);
    let mut inferred = Inferred::default();
    let mut recorded = Recorded::default();
    let window_path = window_span(trace, window).and_then(|(s, e)| {
        let sel = SpanSel {
            start_ns: s,
            end_ns: e,
            pid: None,
        };
        let (mut g, _) = Graph::build(&ix, &sel, &mut inferred);
        recorded = g.recorded.clone();
        let sink = (0..g.len() as u32).max_by_key(|&n| (g.t(n), std::cmp::Reverse(n)))?;
        g.set_main(sink);
        Some(report(&ix, &g, sink, top))
    });
    let mut out = Vec::new();
    for st in steps.map_or(&[][..], |s| &s.steps[..]) {
        let sel = SpanSel {
            start_ns: st.start_ns,
            end_ns: st.end_ns,
            pid: Some(st.pid),
        };
        // The window's graph holds every record a step does: count inferences there once.
        let (mut g, ends) = Graph::build(&ix, &sel, &mut Inferred::default());
        let Some(&sink) = ends.0.get(&(st.start_ns, st.end_ns)) else {
            continue;
        };
        g.set_main(sink);
        out.push(StepPath {
            index: st.index,
            name: st.name.clone(),
            pid: st.pid,
            path: report(&ix, &g, sink, top),
        });
    }
    CriticalPath {
        inferred,
        recorded,
        window: window_path,
        steps: out,
    }
}

/// The window's span: its records' first start and last end, clipped to it.
fn window_span(trace: &Trace, window: Option<&Window>) -> Option<(Ns, Ns)> {
    let (s, e) = trace.bounds_ns()?;
    match window {
        None => Some((s, e)),
        Some(w) => {
            let (s, e) = (s.max(w.from_ns), e.min(w.to_ns));
            (s < e).then_some((s, e))
        }
    }
}

/// The path to `sink` over `g`, clipped to the span, as a report.
fn report(ix: &Index, g: &Graph, sink: u32, top: usize) -> PathReport {
    let mut path = g.walk(sink);
    let thread_handoffs = path.iter().filter(|p| p.handoff).count() as u64;
    for p in &mut path {
        p.end_ns = p.end_ns.min(g.end_ns);
    }
    path.retain(|p| p.start_ns < p.end_ns);
    let start_ns = g.start_ns;
    let end_ns = g.t(sink).min(g.end_ns);
    let slack = slack_list(ix, g, sink, &path, top);
    let composition = composition(ix, &path, top);
    let mut longest: Vec<&PathSeg> = path.iter().collect();
    longest.sort_by_key(|p| (std::cmp::Reverse(p.end_ns - p.start_ns), p.start_ns));
    let longest_segments = longest
        .into_iter()
        .take(top)
        .map(|p| segment(ix, g, p))
        .collect();
    let mut by_what: HashMap<(Kind, u32, u32), Ns> = HashMap::new();
    for p in &path {
        *by_what
            .entry((p.seg.kind, p.seg.name, p.seg.lane))
            .or_default() += p.end_ns - p.start_ns;
    }
    let mut named: HashMap<(Kind, String), Ns> = HashMap::new();
    for ((kind, name, lane), ns) in by_what {
        *named
            .entry((kind, name_place(ix, g, kind, name, lane).0))
            .or_default() += ns;
    }
    let by_what = named.into_iter().map(|((k, n), ns)| (k, n, ns)).collect();
    let runs = runs_of(path.iter().map(|p| (p.start_ns, p.end_ns, p.seg.kind)));
    PathReport {
        start_ns,
        end_ns,
        length_ns: path.iter().map(|p| p.end_ns - p.start_ns).sum(),
        segments: path.len() as u64,
        composition,
        longest_segments,
        slack,
        thread_handoffs,
        by_what,
        runs,
    }
}

fn composition(ix: &Index, path: &[PathSeg], top: usize) -> Composition {
    let mut c = Composition::default();
    let mut ops: HashMap<u32, Ns> = HashMap::new();
    for p in path {
        let d = p.end_ns - p.start_ns;
        let slot = match p.seg.kind {
            Kind::Host => {
                *ops.entry(p.seg.name).or_default() += d;
                &mut c.host_ns
            }
            Kind::Kernel => &mut c.compute_ns,
            Kind::Communication => &mut c.communication_ns,
            Kind::Copy | Kind::Memset => &mut c.copy_ns,
            Kind::Launch | Kind::Queue => &mut c.launch_ns,
            Kind::Sync => &mut c.sync_ns,
            Kind::StreamWait => &mut c.stream_wait_ns,
            Kind::Unexplained => &mut c.unexplained_ns,
        };
        *slot += d;
    }
    let mut ops: Vec<(u32, Ns)> = ops.into_iter().collect();
    ops.sort_by_key(|&(n, ns)| (std::cmp::Reverse(ns), n));
    c.host_ops = ops
        .into_iter()
        .take(top)
        .map(|(n, ns)| OpTime {
            name: host_name(ix.trace, n),
            ns,
        })
        .collect();
    c
}

fn host_name(trace: &Trace, name: u32) -> String {
    if name == NONE {
        "(no op)".to_owned()
    } else {
        trace.str(name).to_owned()
    }
}

pub(crate) fn segment(ix: &Index, g: &Graph, p: &PathSeg) -> Segment {
    let (name, place) = name_place(ix, g, p.seg.kind, p.seg.name, p.seg.lane);
    Segment {
        kind: p.seg.kind,
        name,
        place,
        start_ns: p.start_ns,
        end_ns: p.end_ns,
        length_ns: p.end_ns - p.start_ns,
    }
}

/// A segment's name and place, from its kind, name id and lane.
fn name_place(ix: &Index, g: &Graph, kind: Kind, name: u32, lane: u32) -> (String, Place) {
    let trace = ix.trace;
    match kind {
        Kind::Host | Kind::Sync => {
            let l = &ix.threads[g.host_lanes[lane as usize] as usize];
            let place = Place {
                pid: Some(l.pid),
                thread: Some(l.thread),
                ..Place::default()
            };
            (host_name(trace, name), place)
        }
        Kind::Unexplained => ("no recorded cause".to_owned(), Place::default()),
        _ => {
            let l = &ix.streams[g.gpu_lanes[lane as usize] as usize];
            let (pid, stream) = trace.meta.id_origin(l.stream);
            let place = Place {
                pid,
                device: Some(l.device),
                stream: Some(stream),
                ..Place::default()
            };
            let name = match name {
                index::COPY_NAME => "copy".to_owned(),
                index::MEMSET_NAME => "memset".to_owned(),
                NONE => "?".to_owned(),
                _ => crate::names::display_name(trace.str(name)).into_owned(),
            };
            (name, place)
        }
    }
}

/// The largest GPU operations off the path inside the span, with their slack.
fn slack_list(ix: &Index, g: &Graph, sink: u32, path: &[PathSeg], top: usize) -> Vec<Slack> {
    let on_path: std::collections::HashSet<(u32, u32)> = path
        .iter()
        .filter(|p| {
            p.seg.op != NONE
                && matches!(
                    p.seg.kind,
                    Kind::Kernel | Kind::Communication | Kind::Copy | Kind::Memset
                )
        })
        .map(|p| (p.seg.lane, p.seg.op))
        .collect();
    let mut off: Vec<usize> = g
        .gpu
        .iter()
        .enumerate()
        .filter(|(_, gn)| {
            let (s, e) = (g.t(gn.start), g.t(gn.end));
            s >= g.start_ns && e <= g.end_ns && e > s && !on_path.contains(&(gn.lane, gn.op))
        })
        .map(|(i, _)| i)
        .collect();
    let dur = |i: usize| g.t(g.gpu[i].end) - g.t(g.gpu[i].start);
    off.sort_by_key(|&i| (std::cmp::Reverse(dur(i)), g.t(g.gpu[i].start)));
    off.truncate(top);
    if off.is_empty() {
        return Vec::new();
    }
    let slack = g.slack(sink);
    off.into_iter()
        .map(|i| {
            let gn = g.gpu[i];
            let lane = &ix.streams[g.gpu_lanes[gn.lane as usize] as usize];
            let op = &lane.ops[gn.op as usize];
            let (name, place) = name_place(ix, g, op.kind, op.name, gn.lane);
            Slack {
                kind: op.kind,
                name,
                place,
                start_ns: g.t(gn.start),
                end_ns: g.t(gn.end),
                duration_ns: dur(i),
                slack_ns: slack[i],
            }
        })
        .collect()
}
