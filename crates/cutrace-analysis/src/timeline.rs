//! Busy time, idle time and idle gaps per device and per (device, stream), from kernel records.
//!
//! This is the hot path of `cutrace report`, one pass over the records. A stream runs its
//! kernels one after another and CUPTI writes a record when its kernel completes, so a stream's
//! records nearly always arrive in start order: each such stream is swept as it is read, merging
//! its kernels into busy runs and recording its gaps, and nothing per kernel is stored. A device's
//! busy time is then the union of its streams' busy runs, merged in start order (a branchless scan
//! of up to 8 heads, a heap beyond). A stream whose records arrive out of order is collected in a
//! second pass, sorted, and swept again. No hashing per record: (device, stream) keys resolve
//! through a small direct-mapped cache, with a list or map behind it. Memory: the busy runs (at
//! most one per kernel, far fewer on a busy stream), delta-coded at about 8 bytes a run. Earlier
//! designs (a 24-byte array per device sorted whole; 16-byte per-stream arrays) spent most of
//! their time in page faults and the sort: BENCHMARKS.md has the numbers. Kernels on the same instant are told apart by content, never by
//! record order, so every reported kernel is the same for any order of the records.
//!
//! Definitions: window = first start to last end of the kernels with a non-zero duration;
//! busy = the union of kernel intervals (touching intervals merge); idle = window − busy, which
//! is exactly the sum of the idle gaps between busy runs; zero-length kernels are counted but add
//! no busy time, do not widen the window and split no gap. Devices are never unioned together.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use cutrace_trace::{varint, Kernel, Ns, Trace};
use serde::Serialize;

use crate::error::AnalysisError;
use crate::gap_reading::{module_loading, GapFacts, GapReading};
use crate::window::{clip, Window};

/// A kernel named in a report (at a gap's edge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelRef {
    /// Demangled for display when the trace has a mangled name. Held once per name for the
    /// whole report ([`kernel_timelines`]): a kernel is named at many gaps.
    pub name: Arc<str>,
    /// The name as the trace records it, when that differs from `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mangled_name: Option<Arc<str>>,
    /// Correlation and stream ids as the kernel's process knows them.
    pub correlation_id: u64,
    pub stream: u64,
    /// The kernel's process, in a trace merged from several processes' parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub start_ns: Ns,
    pub end_ns: Ns,
}

/// One idle gap between two busy runs, with the kernels on either side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub length_ns: Ns,
    /// The kernel that ends the busy run before the gap (the one ending last).
    pub before: Option<KernelRef>,
    /// The kernel that starts the busy run after the gap.
    pub after: Option<KernelRef>,
    /// Of a device's gap: how long memcpys on that device ran within it (no kernel ran, but the
    /// GPU was moving data: a gap filled by copies is an input-pipeline stall, not an empty
    /// GPU). Absent for a stream's gaps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_ns: Option<Ns>,
    /// Of a device's gap: what the host of the kernel after it was doing (see [`GapHost`]).
    /// Absent for a stream's gaps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<GapHost>,
    /// The correlation id of the kernel after the gap as the trace holds it (merged: with its
    /// part's offset), for the report's own lookups; not serialized.
    #[serde(skip)]
    pub after_correlation: u64,
}

impl Gap {
    /// Whether the kernels on both sides are of one process and agree in `f` (their
    /// correlation id: one launch; their stream).
    fn same_on_both_sides(&self, f: fn(&KernelRef) -> u64) -> bool {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => b.pid == a.pid && f(b) == f(a),
            _ => false,
        }
    }

    /// The reading of this gap with its host side `host`; `None` when the trace has no launch
    /// call for the kernel after it, or the numbers carry no reading ([`GapReading::read`]).
    pub fn reading(&self, host: &GapHost) -> Option<GapReading> {
        let launch = host.next_launch.as_ref()?;
        GapReading::read(&GapFacts {
            gap_ns: self.length_ns,
            returned_into_gap_ns: launch.returned_into_gap_ns,
            same_launch: self.same_on_both_sides(|k| k.correlation_id),
            same_stream: self.same_on_both_sides(|k| k.stream),
            copy_ns: self.copy_ns.unwrap_or(0),
        })
    }

    /// Whether module loading covered at least half of this gap ([`module_loading`]).
    pub fn module_loading(&self, host: &GapHost) -> bool {
        module_loading(
            self.length_ns,
            host.calls.iter().map(|c| (c.name.as_str(), c.ns)),
        )
    }
}

/// The host's side of a device's idle gap, from the API calls and host NVTX ranges of the
/// process whose kernel ends the gap (every process in a trace of one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapHost {
    /// The API call that launched the kernel after the gap (joined by correlation id), when the
    /// trace has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_launch: Option<NextLaunch>,
    /// How much of the gap some thread of the process spent in a CUDA API call (any name; the
    /// union over threads). The rest the host spent in its own code, or in calls not recorded.
    pub in_calls_ns: Ns,
    /// API calls that ran during the gap, by name: how much of the gap calls of that name
    /// covered (the union over threads, so never more than the gap), largest first; at most 3.
    pub calls: Vec<NamedSpan>,
    /// Host NVTX ranges open during the gap: those covering at least half of it, innermost
    /// (shortest) first, or else the ones covering the most; at most 3.
    pub ranges: Vec<NamedSpan>,
    /// What the gap says about its cause ([`GapReading`]), when the numbers carry a reading.
    pub reading: Option<GapReading>,
    /// Whether module loading covered at least half of the gap (usually warm-up).
    pub module_loading: bool,
    /// Host ops (torch's CPU ops and Python calls) of the process open during the gap: those
    /// covering at least half of it, innermost (shortest) first, or else the ones covering the
    /// most; at most 3 ([`crate::host_ops`]). Absent when none was (and in traces without
    /// host ops).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpu_ops: Vec<crate::host_ops::GapOp>,
}

/// The call that launched the kernel after a gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextLaunch {
    pub name: String,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// `end_ns − gap start`: how far into the gap the launch returned (negative: before the
    /// gap began, so the kernel was queued while the GPU idled).
    pub returned_into_gap_ns: i64,
}

/// A name and how much of a gap it covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedSpan {
    pub name: String,
    pub ns: Ns,
}

/// Idle gaps whose length lies in `[from_ns, to_ns)` (`to_ns` null for the last bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GapBucket {
    pub from_ns: Ns,
    pub to_ns: Option<Ns>,
    pub count: u64,
    pub total_ns: Ns,
}

/// Decade buckets: [1,10) ns, [10,100) ns, … [100 ms, 1 s), then everything from 1 s on.
pub const GAP_BUCKETS: usize = 10;

/// Busy, idle and gaps of one timeline (a device, or one stream of a device).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// Kernels in this timeline (inside the time window, when there is one).
    pub kernels: u64,
    /// Of those, kernels with a zero (or negative) duration: counted, but no busy time.
    pub zero_length_kernels: u64,
    pub window_start_ns: Option<Ns>,
    pub window_end_ns: Option<Ns>,
    /// `window_end_ns − window_start_ns`.
    pub window_ns: Ns,
    /// The union of kernel intervals: never more than `window_ns`.
    pub busy_ns: Ns,
    /// The sum of kernel durations. Double-counts overlap; never a measure of busy.
    pub summed_kernel_ns: Ns,
    /// `window_ns − busy_ns`, equal to the total length of the idle gaps.
    pub idle_ns: Ns,
    /// Number of idle gaps inside the window.
    pub gaps: u64,
    pub gap_histogram: Vec<GapBucket>,
    /// The largest gaps, longest first (ties: earliest first).
    pub largest_gaps: Vec<Gap>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamTimeline {
    /// The stream id as its process knows it.
    pub stream: u64,
    /// The stream's process, in a trace merged from several processes' parts (stream ids are
    /// per process: two processes' stream 7 are two streams).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub timeline: Timeline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceTimeline {
    pub device: u32,
    #[serde(flatten)]
    pub timeline: Timeline,
    /// Streams of this device, by stream id.
    pub streams: Vec<StreamTimeline>,
}

/// Per-device and per-stream timelines of the trace's kernels, devices and streams in id order.
///
/// `top_gaps` caps each `largest_gaps` list. `on_run(device, start, end, first)` receives every
/// merged busy run of every device, in increasing order within a device (devices one after
/// another), with the index of the kernel that starts it, so callers can intersect with other
/// activity, or look at each gap's next kernel, without storing the runs.
pub fn kernel_timelines(
    trace: &Trace,
    window: Option<&Window>,
    top_gaps: usize,
    mut on_run: impl FnMut(u32, Ns, Ns, u32),
) -> Result<Vec<DeviceTimeline>, AnalysisError> {
    if u32::try_from(trace.kernels.len()).is_err() {
        return Err(AnalysisError::TooManyRecords {
            what: "kernels",
            count: trace.kernels.len(),
        });
    }
    let mut g = group(trace, window, top_gaps);
    resweep_out_of_order(trace, window, top_gaps, &mut g);
    let Grouped {
        mut devices,
        mut streams,
        ..
    } = g;
    devices.sort_unstable_by_key(|d| d.device);
    let mut names = RefNames::default();
    let mut out = Vec::with_capacity(devices.len());
    for dev in &devices {
        let mut dev_sweep = Sweep::new(top_gaps);
        for &slot in &dev.stream_slots {
            let st = &mut streams[slot];
            if let Some(run) = st.sweep.finish() {
                st.runs.push(run);
            }
            dev_sweep.kernels += st.sweep.kernels;
            dev_sweep.summed = dev_sweep.summed.saturating_add(st.sweep.summed);
        }
        // The device's busy time is the union of its streams' busy runs, merged in start order.
        let arrays: Vec<RunCursor<'_>> = dev
            .stream_slots
            .iter()
            .map(|&slot| streams[slot].runs.cursor())
            .collect();
        merge_in_start_order(arrays, |run| {
            if let Some(closed) = dev_sweep.push_run(run, trace) {
                on_run(dev.device, closed.start, closed.end, closed.first);
            }
        });
        if let Some(closed) = dev_sweep.finish() {
            on_run(dev.device, closed.start, closed.end, closed.first);
        }
        let mut rows: Vec<StreamTimeline> = Vec::with_capacity(dev.stream_slots.len());
        let mut zero = 0;
        for &slot in &dev.stream_slots {
            let st = &mut streams[slot];
            zero += st.zero_length;
            let sweep = std::mem::replace(&mut st.sweep, Sweep::new(0));
            st.runs = RunLog::default();
            rows.push(StreamTimeline {
                stream: st.stream,
                pid: None,
                timeline: sweep.into_timeline(st.zero_length, trace, &mut names),
            });
        }
        // In merged-id order (process by process), then as each process knows its streams.
        rows.sort_unstable_by_key(|s| s.stream);
        for r in &mut rows {
            (r.pid, r.stream) = trace.meta.id_origin(r.stream);
        }
        out.push(DeviceTimeline {
            device: dev.device,
            timeline: dev_sweep.into_timeline(zero, trace, &mut names),
            streams: rows,
        });
    }
    Ok(out)
}

/// The timeline of a device with no kernels (it has copies): all zeros, same shape.
pub(crate) fn empty_timeline() -> Timeline {
    Sweep::new(0).into_timeline(0, &Trace::default(), &mut RefNames::default())
}

/// The names of the kernels a report refers to, each made once (demangled, cut: `names.rs`) and
/// shared by every reference.
#[derive(Default)]
struct RefNames(HashMap<u32, (Arc<str>, Option<Arc<str>>)>);

impl RefNames {
    fn get(&mut self, trace: &Trace, id: u32) -> (Arc<str>, Option<Arc<str>>) {
        self.0
            .entry(id)
            .or_insert_with(|| {
                let (name, mangled) = crate::names::name_pair(trace.str(id));
                (name.into(), mangled.map(Into::into))
            })
            .clone()
    }
}

/// A merged busy run, with the kernels at its edges: `first` starts it, `last` ends it (ties
/// between kernels on the same instant are broken by content).
#[derive(Debug, Clone, Copy)]
struct Run {
    start: Ns,
    end: Ns,
    first: u32,
    last: u32,
}

/// A clipped kernel interval in 16 bytes, for the streams whose records arrive out of start
/// order. Durations of 2^32 − 1 ns (4.3 s) or more are stored as `LONG` and re-read from the
/// record: rare, and it keeps the fallback's memory at 16 bytes per kernel.
#[derive(Debug, Clone, Copy)]
struct Iv {
    start: Ns,
    dur: u32,
    idx: u32,
}

const LONG: u32 = u32::MAX;

impl Iv {
    #[inline]
    fn end(&self, trace: &Trace, window: Option<&Window>) -> Ns {
        if self.dur != LONG {
            return self.start + Ns::from(self.dur);
        }
        let k = &trace.kernels[self.idx as usize];
        clip(window, k.start_ns, k.end_ns).map_or(k.end_ns, |c| c.1)
    }
}

/// A stream's closed busy runs in start order, delta-coded in LEB128 varints: the gap from the
/// previous run's end, the run's length, its first kernel's index from the previous run's last,
/// its last kernel's from its first. On a dense trace nearly every kernel is a run of its own, and
/// these deltas take 1–3 bytes each: about 8 bytes a run where a [`Run`] takes 24 (50 MB of a
/// 10 MB trace's report, BENCHMARKS.md "Memory on a 10 MB native trace").
#[derive(Debug, Default)]
struct RunLog {
    bytes: Vec<u8>,
    end: Ns,
    last: u32,
}

impl RunLog {
    #[inline]
    fn push(&mut self, r: Run) {
        // Wrapping: a stream's runs are disjoint and in order, so the deltas are small, but the
        // coding must not depend on it (the cursor undoes exactly what is done here).
        varint::put(&mut self.bytes, r.start.wrapping_sub(self.end));
        varint::put(&mut self.bytes, r.end.wrapping_sub(r.start));
        varint::put(&mut self.bytes, zigzag(r.first, self.last));
        varint::put(&mut self.bytes, zigzag(r.last, r.first));
        self.end = r.end;
        self.last = r.last;
    }

    fn clear(&mut self) {
        *self = RunLog::default();
    }

    fn cursor(&self) -> RunCursor<'_> {
        RunCursor {
            bytes: &self.bytes,
            pos: 0,
            end: 0,
            last: 0,
        }
    }
}

/// Reads a [`RunLog`] back, run by run.
struct RunCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: Ns,
    last: u32,
}

impl Iterator for RunCursor<'_> {
    type Item = Run;

    #[inline]
    fn next(&mut self) -> Option<Run> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        // The log is only ever written by `RunLog::push`, so every run is whole.
        let start = self
            .end
            .wrapping_add(varint::get(self.bytes, &mut self.pos)?);
        let end = start.wrapping_add(varint::get(self.bytes, &mut self.pos)?);
        let first = unzigzag(varint::get(self.bytes, &mut self.pos)?, self.last);
        let last = unzigzag(varint::get(self.bytes, &mut self.pos)?, first);
        self.end = end;
        self.last = last;
        Some(Run {
            start,
            end,
            first,
            last,
        })
    }
}

/// `x − base` for kernel indices, zigzag-coded so that small steps back stay small.
#[inline]
fn zigzag(x: u32, base: u32) -> u64 {
    varint::zigzag(i64::from(x) - i64::from(base))
}

#[inline]
fn unzigzag(z: u64, base: u32) -> u32 {
    (i64::from(base) + varint::unzigzag(z)) as u32
}

/// Calls `f` on every run of the cursors (each in start order), in overall start order.
fn merge_in_start_order(mut arrays: Vec<RunCursor<'_>>, mut f: impl FnMut(Run)) {
    match arrays.len() {
        0 => {}
        1 => arrays.pop().into_iter().flatten().for_each(f),
        n if n <= MERGE_WAYS => merge_few(arrays, f),
        _ => {
            // Many streams on one device: a heap of (next start, array), with each array's head.
            let mut heads: Vec<Option<Run>> = arrays.iter_mut().map(Iterator::next).collect();
            let mut heap: BinaryHeap<Reverse<(Ns, usize)>> = heads
                .iter()
                .enumerate()
                .filter_map(|(a, h)| h.map(|r| Reverse((r.start, a))))
                .collect();
            while let Some(Reverse((_, a))) = heap.pop() {
                if let Some(r) = heads[a] {
                    f(r);
                }
                heads[a] = arrays[a].next();
                if let Some(r) = heads[a] {
                    heap.push(Reverse((r.start, a)));
                }
            }
        }
    }
}

const MERGE_WAYS: usize = 8;

/// The merge for a handful of streams: the heads live in a fixed array scanned without branches
/// (an exhausted array's head is `Ns::MAX`, which no start equals: every run ends later).
fn merge_few(mut arrays: Vec<RunCursor<'_>>, mut f: impl FnMut(Run)) {
    let mut head = [Ns::MAX; MERGE_WAYS];
    let mut runs = [None; MERGE_WAYS];
    for ((h, r), arr) in head.iter_mut().zip(&mut runs).zip(&mut arrays) {
        *r = arr.next();
        *h = r.map_or(Ns::MAX, |r: Run| r.start);
    }
    loop {
        let mut best = 0;
        let mut best_start = head[0];
        for (a, &h) in head.iter().enumerate().skip(1) {
            let less = h < best_start;
            best = if less { a } else { best };
            best_start = if less { h } else { best_start };
        }
        if best_start == Ns::MAX {
            return;
        }
        if let Some(r) = runs[best] {
            f(r);
        }
        runs[best] = arrays[best].next();
        head[best] = runs[best].map_or(Ns::MAX, |r| r.start);
    }
}

struct DeviceGroup {
    device: u32,
    stream_slots: Vec<usize>,
}

struct StreamGroup {
    stream: u64,
    zero_length: u64,
    /// Whether the stream's records have arrived in start order so far; while they do, the
    /// stream is swept as it is read.
    in_order: bool,
    last_start: Ns,
    sweep: Sweep,
    /// Busy runs the sweep has closed, in start order.
    runs: RunLog,
}

struct Grouped {
    devices: Vec<DeviceGroup>,
    streams: Vec<StreamGroup>,
    index: SlotIndex,
}

/// (device, stream) → stream slot without hashing in the common case: most records repeat the
/// previous key or one of a handful of streams.
struct SlotIndex {
    /// Direct-mapped cache: one compare finds a recent key (streams interleave in the records).
    cache: [((u32, u64), u32); CACHE],
    keys: Vec<(u32, u64)>,
    map: HashMap<(u32, u64), usize>,
}

const CACHE: usize = 64;
const LINEAR_KEYS: usize = 16;

impl SlotIndex {
    fn new() -> Self {
        SlotIndex {
            // Slot u32::MAX marks an empty entry.
            cache: [((0, 0), u32::MAX); CACHE],
            keys: Vec::new(),
            map: HashMap::new(),
        }
    }

    #[inline]
    fn cache_line(key: (u32, u64)) -> usize {
        (key.1 ^ (key.1 >> 7) ^ u64::from(key.0).wrapping_mul(0x9e37_79b9)) as usize % CACHE
    }

    #[inline]
    fn find(&mut self, key: (u32, u64)) -> Option<usize> {
        let line = Self::cache_line(key);
        let (k, slot) = self.cache[line];
        if k == key && slot != u32::MAX {
            return Some(slot as usize);
        }
        self.find_slow(key, line)
    }

    #[cold]
    fn find_slow(&mut self, key: (u32, u64), line: usize) -> Option<usize> {
        let found = if self.keys.len() <= LINEAR_KEYS {
            self.keys.iter().position(|&k| k == key)
        } else {
            self.map.get(&key).copied()
        };
        if let Some(slot) = found {
            self.cache[line] = (key, slot as u32);
        }
        found
    }

    fn insert(&mut self, key: (u32, u64)) -> usize {
        let slot = self.keys.len();
        self.keys.push(key);
        if self.keys.len() > LINEAR_KEYS {
            if self.map.is_empty() {
                self.map
                    .extend(self.keys.iter().enumerate().map(|(i, &k)| (k, i)));
            } else {
                self.map.insert(key, slot);
            }
        }
        self.cache[Self::cache_line(key)] = (key, slot as u32);
        slot
    }
}

fn group(trace: &Trace, window: Option<&Window>, top_gaps: usize) -> Grouped {
    // Two copies of the loop, so the common case (no window) has no clipping in it.
    match window {
        None => group_with(trace, top_gaps, |s, e| Some((s, e))),
        Some(w) => group_with(trace, top_gaps, |s, e| w.clip(s, e)),
    }
}

/// The one pass over the records: finds each kernel's stream and, while that stream's records
/// stay in start order, sweeps it on the spot, so nothing per kernel is stored.
#[inline(always)]
fn group_with(
    trace: &Trace,
    top_gaps: usize,
    clip: impl Fn(Ns, Ns) -> Option<(Ns, Ns)>,
) -> Grouped {
    let mut g = Grouped {
        devices: Vec::new(),
        streams: Vec::new(),
        index: SlotIndex::new(),
    };
    for (i, k) in trace.kernels.iter().enumerate() {
        let Some((s, e)) = clip(k.start_ns, k.end_ns) else {
            continue;
        };
        let key = (k.device, k.stream);
        let slot = match g.index.find(key) {
            Some(slot) => slot,
            None => new_slot(&mut g, key, top_gaps),
        };
        let st = &mut g.streams[slot];
        if e <= s {
            st.zero_length += 1;
        } else if st.in_order {
            if s >= st.last_start {
                st.last_start = s;
                if let Some(run) = st.sweep.push(s, e, i as u32, trace) {
                    st.runs.push(run);
                }
            } else {
                // Out of order: this stream is redone from a sorted copy after the pass.
                st.in_order = false;
            }
        }
    }
    g
}

#[cold]
fn new_slot(g: &mut Grouped, key: (u32, u64), top_gaps: usize) -> usize {
    let dev = match g.devices.iter().position(|d| d.device == key.0) {
        Some(d) => d,
        None => {
            g.devices.push(DeviceGroup {
                device: key.0,
                stream_slots: Vec::new(),
            });
            g.devices.len() - 1
        }
    };
    let slot = g.index.insert(key);
    g.devices[dev].stream_slots.push(slot);
    g.streams.push(StreamGroup {
        stream: key.1,
        zero_length: 0,
        in_order: true,
        last_start: 0,
        sweep: Sweep::new(top_gaps),
        runs: RunLog::default(),
    });
    slot
}

/// Streams whose records arrived out of start order: collect their intervals in a second pass,
/// sort them, and sweep them again from the start.
fn resweep_out_of_order(trace: &Trace, window: Option<&Window>, top_gaps: usize, g: &mut Grouped) {
    if g.streams.iter().all(|st| st.in_order) {
        return;
    }
    let mut ivs: Vec<Vec<Iv>> = g.streams.iter().map(|_| Vec::new()).collect();
    for (i, k) in trace.kernels.iter().enumerate() {
        let Some((s, e)) = clip(window, k.start_ns, k.end_ns) else {
            continue;
        };
        if e <= s {
            continue;
        }
        if let Some(slot) = g.index.find((k.device, k.stream)) {
            if !g.streams[slot].in_order {
                ivs[slot].push(Iv {
                    start: s,
                    dur: u32::try_from(e - s).unwrap_or(LONG),
                    idx: i as u32,
                });
            }
        }
    }
    for (st, mut v) in g.streams.iter_mut().zip(ivs) {
        if st.in_order {
            continue;
        }
        v.sort_unstable_by_key(|iv| iv.start);
        st.sweep = Sweep::new(top_gaps);
        st.runs.clear();
        for iv in &v {
            if let Some(run) = st
                .sweep
                .push(iv.start, iv.end(trace, window), iv.idx, trace)
            {
                st.runs.push(run);
            }
        }
    }
}

/// Deterministic choice between kernels that tie on time, by content (never by record order).
fn content_key<'t>(k: &Kernel, trace: &'t Trace) -> (u64, u64, Ns, Ns, &'t str) {
    (
        k.correlation_id,
        k.stream,
        k.start_ns,
        k.end_ns,
        trace.str(k.name),
    )
}

/// Whether kernel `a` is preferred to kernel `b` when they tie on time.
fn preferred(a: u32, b: u32, trace: &Trace) -> bool {
    content_key(&trace.kernels[a as usize], trace) < content_key(&trace.kernels[b as usize], trace)
}

/// Gap length, start, end, kernel before it, kernel after it.
type GapEntry = (Ns, Ns, Ns, u32, u32);

/// Run-merging state of one timeline, fed kernels (or another timeline's runs) in start order.
#[derive(Debug)]
struct Sweep {
    /// Non-empty kernel intervals seen, and their summed length.
    kernels: u64,
    summed: Ns,
    started: bool,
    first_start: Ns,
    /// The current busy run.
    run: Run,
    busy: Ns,
    gaps: u64,
    idle: Ns,
    hist: [(u64, Ns); GAP_BUCKETS],
    top_n: usize,
    top: Vec<GapEntry>,
    /// Index into `top` of its smallest entry, valid when `top.len() == top_n`.
    top_min: usize,
    /// Slot in `top` of the gap just before the current run, whose "after" kernel can still
    /// change if another kernel starts at the same instant.
    open_gap: Option<usize>,
}

impl Sweep {
    fn new(top_n: usize) -> Self {
        Sweep {
            kernels: 0,
            summed: 0,
            started: false,
            first_start: 0,
            run: Run {
                start: 0,
                end: 0,
                first: 0,
                last: 0,
            },
            busy: 0,
            gaps: 0,
            idle: 0,
            hist: [(0, 0); GAP_BUCKETS],
            top_n,
            top: Vec::new(),
            top_min: 0,
            open_gap: None,
        }
    }

    /// Adds one kernel interval (non-empty, start order); returns the busy run it closed, if any.
    #[inline(always)]
    fn push(&mut self, start: Ns, end: Ns, idx: u32, trace: &Trace) -> Option<Run> {
        self.kernels += 1;
        // Saturating: bogus records (end near 2^64) must not overflow the sum.
        self.summed = self.summed.saturating_add(end - start);
        self.push_run(
            Run {
                start,
                end,
                first: idx,
                last: idx,
            },
            trace,
        )
    }

    /// Adds a run (of kernels, or of another timeline) in start order; returns the run it closed.
    #[inline(always)]
    fn push_run(&mut self, r: Run, trace: &Trace) -> Option<Run> {
        if !self.started {
            self.started = true;
            self.first_start = r.start;
            self.run = r;
            return None;
        }
        if r.start > self.run.end {
            let closed = self.run;
            self.busy += closed.end - closed.start;
            self.record_gap(closed.end, r.start, closed.last, r.first);
            self.run = r;
            return Some(closed);
        }
        if r.start == self.run.start {
            self.tie_first(r.first, trace);
        }
        if r.end > self.run.end {
            self.run.end = r.end;
            self.run.last = r.last;
        } else if r.end == self.run.end {
            self.tie_last(r.last, trace);
        }
        None
    }

    #[cold]
    fn tie_first(&mut self, idx: u32, trace: &Trace) {
        if preferred(idx, self.run.first, trace) {
            self.run.first = idx;
            if let Some(slot) = self.open_gap {
                self.top[slot].4 = idx;
            }
        }
    }

    #[cold]
    fn tie_last(&mut self, idx: u32, trace: &Trace) {
        if preferred(idx, self.run.last, trace) {
            self.run.last = idx;
        }
    }

    #[inline]
    fn record_gap(&mut self, start: Ns, end: Ns, before: u32, after: u32) {
        let len = end - start;
        self.gaps += 1;
        self.idle += len;
        let bucket = (len.ilog10() as usize).min(GAP_BUCKETS - 1);
        self.hist[bucket].0 += 1;
        self.hist[bucket].1 += len;
        self.open_gap = None;
        if self.top_n == 0 {
            return;
        }
        let entry = (len, start, end, before, after);
        if self.top.len() < self.top_n {
            self.open_gap = Some(self.top.len());
            self.top.push(entry);
            if self.top.len() == self.top_n {
                self.refresh_min();
            }
        } else if gap_better(&entry, &self.top[self.top_min]) {
            self.open_gap = Some(self.top_min);
            self.top[self.top_min] = entry;
            self.refresh_min();
        }
    }

    fn refresh_min(&mut self) {
        let mut m = 0;
        for i in 1..self.top.len() {
            if gap_better(&self.top[m], &self.top[i]) {
                m = i;
            }
        }
        self.top_min = m;
    }

    /// Closes the last run; returns it.
    fn finish(&mut self) -> Option<Run> {
        if !self.started || self.run.start == self.run.end {
            // Never started, or already finished (an empty run adds nothing).
            return None;
        }
        self.busy += self.run.end - self.run.start;
        let run = self.run;
        self.run.start = self.run.end;
        Some(run)
    }

    /// Builds the report. Call after [`Sweep::finish`].
    fn into_timeline(
        mut self,
        zero_length_kernels: u64,
        trace: &Trace,
        names: &mut RefNames,
    ) -> Timeline {
        let (window_start_ns, window_end_ns, window_ns) = if self.started {
            let end = self.run.end;
            (Some(self.first_start), Some(end), end - self.first_start)
        } else {
            (None, None, 0)
        };
        debug_assert_eq!(window_ns - self.busy, self.idle);
        self.top
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut kref = |idx: u32| {
            let k = &trace.kernels[idx as usize];
            let (name, mangled_name) = names.get(trace, k.name);
            // The stream names the process (correlation id 0, "none", carries no offset).
            let (pid, stream) = trace.meta.id_origin(k.stream);
            KernelRef {
                name,
                mangled_name,
                correlation_id: trace.meta.id_origin(k.correlation_id).1,
                stream,
                pid,
                start_ns: k.start_ns,
                end_ns: k.end_ns,
            }
        };
        let largest_gaps = self
            .top
            .iter()
            .map(|&(len, start, end, before, after)| Gap {
                start_ns: start,
                end_ns: end,
                length_ns: len,
                before: Some(kref(before)),
                after: Some(kref(after)),
                copy_ns: None,
                host: None,
                after_correlation: trace.kernels[after as usize].correlation_id,
            })
            .collect();
        let gap_histogram = self
            .hist
            .iter()
            .enumerate()
            .map(|(i, &(count, total_ns))| GapBucket {
                from_ns: 10u64.pow(i as u32),
                to_ns: (i + 1 < GAP_BUCKETS).then(|| 10u64.pow(i as u32 + 1)),
                count,
                total_ns,
            })
            .collect();
        Timeline {
            kernels: self.kernels + zero_length_kernels,
            zero_length_kernels,
            window_start_ns,
            window_end_ns,
            window_ns,
            busy_ns: self.busy,
            summed_kernel_ns: self.summed,
            idle_ns: window_ns - self.busy,
            gaps: self.gaps,
            gap_histogram,
            largest_gaps,
        }
    }
}

/// Longer first; among equal lengths, the earlier gap.
fn gap_better(a: &GapEntry, b: &GapEntry) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kref(correlation_id: u64, stream: u64, pid: Option<u32>) -> KernelRef {
        KernelRef {
            name: "k".into(),
            mangled_name: None,
            correlation_id,
            stream,
            pid,
            start_ns: 0,
            end_ns: 0,
        }
    }

    /// A 3 µs device gap between `before` and `after`.
    fn gap(before: KernelRef, after: KernelRef) -> Gap {
        Gap {
            start_ns: 1_000_000,
            end_ns: 1_003_000,
            length_ns: 3_000,
            before: Some(before),
            after: Some(after),
            copy_ns: Some(0),
            host: None,
            after_correlation: 0,
        }
    }

    /// The host side: the next launch returned `r` ns into the gap (none: no launch call).
    fn host(r: Option<i64>, calls: &[(&str, Ns)]) -> GapHost {
        GapHost {
            next_launch: r.map(|r| NextLaunch {
                name: "cudaLaunchKernel".into(),
                start_ns: 0,
                end_ns: 0,
                returned_into_gap_ns: r,
            }),
            in_calls_ns: 0,
            calls: calls
                .iter()
                .map(|&(n, ns)| NamedSpan { name: n.into(), ns })
                .collect(),
            ranges: Vec::new(),
            reading: None,
            module_loading: false,
            cpu_ops: Vec::new(),
        }
    }

    /// One launch and one stream mean one process's: kernels of two processes share ids only
    /// by chance.
    #[test]
    fn a_gap_is_read_from_its_launch_and_the_kernels_on_both_sides() {
        let queued = host(Some(-50_000), &[]);
        let g = gap(kref(5, 7, None), kref(5, 7, None));
        assert_eq!(g.reading(&queued), Some(GapReading::InsideGraph));
        let g = gap(kref(5, 7, None), kref(6, 7, None));
        assert_eq!(g.reading(&queued), Some(GapReading::StreamDispatch));
        let g = gap(kref(5, 7, Some(1)), kref(5, 7, Some(2)));
        assert_eq!(g.reading(&queued), Some(GapReading::Queued));
        let mut g = gap(kref(5, 7, None), kref(6, 9, None));
        g.copy_ns = Some(1);
        assert_eq!(g.reading(&queued), Some(GapReading::QueuedBehindCopies));
        assert_eq!(g.reading(&host(None, &[])), None);
        assert!(g.module_loading(&host(None, &[("cuLibraryLoadData", 1_500)])));
        assert!(!g.module_loading(&host(None, &[("cuLibraryLoadData", 1_499)])));
    }

    /// The delta coding gives back every run exactly, whatever the values: the extremes of both
    /// types, kernel indices that step back, runs out of order (the coding wraps).
    #[test]
    fn a_run_log_reads_back_what_was_pushed() {
        let runs = [
            (0, 0, 0, 0),
            (5, 1_000, 3, 2),
            (1_000, 1_001, 1, u32::MAX),
            (Ns::MAX - 7, Ns::MAX, u32::MAX, 0),
            (3, 2, 7, 7),
            (1 << 62, (1 << 62) + (1 << 40), 100, 4_000_000),
        ];
        let mut log = RunLog::default();
        for &(start, end, first, last) in &runs {
            log.push(Run {
                start,
                end,
                first,
                last,
            });
        }
        let back: Vec<(Ns, Ns, u32, u32)> = log
            .cursor()
            .map(|r| (r.start, r.end, r.first, r.last))
            .collect();
        assert_eq!(back, runs);
        // A dense stream's runs (one kernel each, 1.5 µs apart) take 6 bytes, not 24 (the first
        // run's start is absolute: 7 more).
        let mut log = RunLog::default();
        for i in 0..1_000u32 {
            let start = 1_700_000_000_000_000_000 + u64::from(i) * 3_000;
            log.push(Run {
                start,
                end: start + 1_500,
                first: 2 * i,
                last: 2 * i,
            });
        }
        assert_eq!(log.bytes.len(), 6_000 + 7);
        log.clear();
        assert_eq!(log.cursor().count(), 0);
    }
}
