//! The timeline's levels of detail, computed once in Rust so that the page's size and drawing
//! cost do not grow with the trace: per lane (a GPU, its copies, one of its streams, or one host
//! thread) a fixed number of buckets at a few zoom levels, each bucket with its busy share and,
//! for a GPU, the reading of most of its idle time (the report's idle split: waiting for the
//! host, launched and not started, unknown).

use std::collections::{BTreeMap, HashMap};

use cutrace_analysis::{kernel_timelines, merge_in_place, AnalysisError, ApiIndex, Window};
use cutrace_trace::{Ns, Trace};
use serde::Serialize;

/// Buckets of the coarsest level; each finer level has [`ZOOM`] times as many.
pub const BASE_BUCKETS: u64 = 1024;
/// Bucket ratio between one level and the next finer one.
pub const ZOOM: u64 = 4;
/// The encoded levels of all lanes together stay under this many bytes, whatever the trace:
/// deeper levels, then stream lanes, are left out to stay within it.
pub const BUDGET_BYTES: u64 = 1_600_000;
/// Buckets shorter than this add bytes and no insight: kernels and gaps are rarely shorter.
pub const MIN_BUCKET_NS: Ns = 200;
/// Most stream lanes drawn (the busiest); the page says how many more there are.
pub const MAX_STREAM_LANES: usize = 48;
/// Most host lanes drawn (the threads busiest in CPU ops and CUDA calls); the page says how many
/// more there are.
pub const MAX_HOST_LANES: usize = 16;

/// What most of a bucket's idle time was, as the report's idle split reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum IdleKind {
    /// No idle time inside the device's kernel span (all busy, or outside the span).
    None = 0,
    /// Before the next kernel's launch call returned: the GPU waited for the host.
    Host = 1,
    /// After it returned: launched, not started.
    Queued = 2,
    /// The next kernel has no launch call in the trace.
    Unknown = 3,
}

/// One lane of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lane {
    pub device: u32,
    /// `None` for the GPU's own lane (the union of its streams).
    pub stream: Option<u64>,
    /// The process of the stream, in a trace merged from several processes.
    pub pid: Option<u32>,
    /// A job's lane of one rank ([`super::job_lod`]): its buckets' second character is the
    /// communication share (in 64ths, as the busy share), not an [`IdleKind`]. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// A lane that is not a GPU's kernels or a stream's: absent for those.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<LaneRole>,
    /// The width of its finest buckets, where it is not its kind's (`gpu_bucket_ns` for a GPU's
    /// lane, `stream_bucket_ns` for the others): the critical path's lane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_ns: Option<Ns>,
    /// Levels, coarsest first: level `k` has `BASE_BUCKETS · ZOOM^k` buckets over the span, two
    /// characters each: the busy share in 64ths (`0`–`9`, `A`–`Z`, `a`–`z`, `+`, `/`: 0 only
    /// when nothing ran, 63 only when the bucket is full) and the [`IdleKind`] digit.
    pub levels: Vec<String>,
}

/// What a lane beside the kernels shows. Its buckets' two characters are both shares in 64ths,
/// as a GPU lane's busy share is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneRole {
    /// A GPU's copies (`device`): the memcpys' union (the report's `copy_busy_ns`, clipped to
    /// the span drawn), then the memsets'.
    Copies,
    /// One host thread (`pid`, `thread`): the union of its host ops (CPU ops, Python calls),
    /// then of its CUDA API calls.
    Host { thread: u64 },
    /// The critical path ([`super::path`]): its buckets' first character is the share of the
    /// bucket on the path, the second the class of most of that time (a digit, by
    /// [`super::path::CLASSES`], 1-based; `0` when none).
    Path,
}

/// The timeline of a trace (or of its window).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineLod {
    /// The span drawn: the first kernel start to the last kernel end over all GPUs. The page
    /// gets times relative to the start (absolute ones are above 2^53, which JavaScript rounds).
    #[serde(skip)]
    pub start_ns: Ns,
    pub span_ns: Ns,
    /// The finest bucket of each kind of lane, in ns.
    pub gpu_bucket_ns: Ns,
    pub stream_bucket_ns: Ns,
    pub base_buckets: u64,
    pub zoom: u64,
    pub lanes: Vec<Lane>,
    /// Streams with kernels that have no lane (past [`MAX_STREAM_LANES`] or the byte budget).
    pub streams_not_drawn: u64,
    /// Host threads with CPU ops or CUDA calls in the span that have no lane (past
    /// [`MAX_HOST_LANES`] or the byte budget).
    pub host_threads_not_drawn: u64,
    /// With a critical path lane first ([`super::path::add_lane`]): how much of the path lies
    /// within the span drawn, and all of it.
    #[serde(skip)]
    pub path_drawn: Option<(Ns, Ns)>,
}

/// Per-bucket sums at the finest level of one lane.
struct Acc {
    busy: Vec<Ns>,
    /// Idle ns per [`IdleKind`] 1..=3 (GPU lanes only).
    idle: Vec<[Ns; 3]>,
}

pub(super) struct Grid {
    pub(super) start: Ns,
    pub(super) width: Ns,
    pub(super) n: usize,
}

impl Grid {
    /// Adds `[s, e)` to `v` bucket by bucket.
    pub(super) fn add(&self, s: Ns, e: Ns, mut f: impl FnMut(usize, Ns)) {
        if e <= s {
            return;
        }
        let s = s.max(self.start);
        let mut b = ((s - self.start) / self.width) as usize;
        let mut t = s;
        while t < e && b < self.n {
            // Saturating: a span near 2^64 ns (corrupt records) must not wrap the last edge.
            let edge = self
                .start
                .saturating_add((b as u64 + 1).saturating_mul(self.width));
            let to = e.min(edge);
            f(b, to - t);
            t = to;
            b += 1;
        }
    }
}

/// The levels of every GPU lane, each GPU's copies lane, and the lanes of the busiest streams
/// and host threads. `window` is the report's.
pub fn timeline_lod(trace: &Trace, window: Option<&Window>) -> Result<TimelineLod, AnalysisError> {
    timeline_lod_covering(trace, window, None)
}

/// [`timeline_lod`] over a span widened to hold `cover` too (the critical path, whose host time
/// may begin before the first kernel and end after the last); the GPU lanes read no idle time
/// outside their kernels' span.
pub fn timeline_lod_covering(
    trace: &Trace,
    window: Option<&Window>,
    cover: Option<(Ns, Ns)>,
) -> Result<TimelineLod, AnalysisError> {
    let scan = scan_kernels(trace, window);
    let bounds = scan.bounds.map(|(s, e)| match cover {
        Some((a, b)) if a < b => (s.min(a), e.max(b)),
        _ => (s, e),
    });
    let Some((start, end)) = bounds else {
        return Ok(TimelineLod {
            start_ns: 0,
            span_ns: 0,
            gpu_bucket_ns: 0,
            stream_bucket_ns: 0,
            base_buckets: BASE_BUCKETS,
            zoom: ZOOM,
            lanes: Vec::new(),
            streams_not_drawn: 0,
            host_threads_not_drawn: 0,
            path_drawn: None,
        });
    };
    let mut devices = scan.devices;
    devices.sort_unstable();

    let mut streams: Vec<((u32, u64), Ns)> = scan.stream_busy.into_iter().collect();
    streams.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let copies = copy_runs(trace, window, start, end);
    let mut hosts = host_runs(trace, window, start, end);

    let span = end - start;
    let fit = fit_levels(
        span,
        devices.len(),
        copies.len(),
        hosts.len().min(MAX_HOST_LANES),
        streams.len(),
    );
    let n_streams = fit.streams;
    let kept: HashMap<(u32, u64), usize> = streams[..n_streams]
        .iter()
        .enumerate()
        .map(|(i, s)| (s.0, i))
        .collect();
    let hosts_not_drawn = (hosts.len() - fit.hosts) as u64;
    hosts.truncate(fit.hosts);
    hosts.sort_unstable_by_key(|h| h.id);

    let dev = Levels::over(start, span, fit.dev_levels);
    let stream = Levels::over(start, span, fit.stream_levels);
    // The host threads' lanes first, and their runs dropped before the GPUs' sums are made: a
    // trace's calls can be millions, and the two need not be held at once.
    let mut lanes = host_lanes(&hosts, &stream);
    drop(hosts);
    let dev_acc = gpu_sums(trace, window, &devices, &dev.grid)?;
    let stream_acc = stream_sums(trace, window, &kept, &stream.grid, n_streams);
    lanes.extend(encode_lanes(
        trace,
        &devices,
        &dev_acc,
        &dev,
        &kept,
        &stream_acc,
        &stream,
        &copies,
    ));
    Ok(TimelineLod {
        start_ns: start,
        span_ns: span,
        gpu_bucket_ns: dev.grid.width,
        stream_bucket_ns: stream.grid.width,
        base_buckets: BASE_BUCKETS,
        zoom: ZOOM,
        lanes,
        streams_not_drawn: (streams.len() - n_streams) as u64,
        host_threads_not_drawn: hosts_not_drawn,
        path_drawn: None,
    })
}

/// Two sets of merged runs drawn on one lane: the first as its busy share, the second as its
/// other share.
struct SideRuns<K> {
    id: K,
    first: Vec<(Ns, Ns)>,
    second: Vec<(Ns, Ns)>,
}

impl<K> SideRuns<K> {
    fn ns(&self) -> Ns {
        self.first
            .iter()
            .chain(&self.second)
            .map(|r| r.1 - r.0)
            .sum()
    }
}

/// The intervals of a lane's two shares, before merging.
type TwoRuns = (Vec<(Ns, Ns)>, Vec<(Ns, Ns)>);

/// `[s, e)` clipped to the window and to the span `[from, to)`, when anything is left.
fn inside(window: Option<&Window>, s: Ns, e: Ns, from: Ns, to: Ns) -> Option<(Ns, Ns)> {
    let (s, e) = cutrace_analysis::window::clip(window, s, e)?;
    let (s, e) = (s.max(from), e.min(to));
    (e > s).then_some((s, e))
}

/// Per device with copies in the span, by device: its memcpys' and memsets' merged runs.
fn copy_runs(trace: &Trace, window: Option<&Window>, from: Ns, to: Ns) -> Vec<SideRuns<u32>> {
    let mut by: BTreeMap<u32, TwoRuns> = BTreeMap::new();
    for c in &trace.memcpys {
        if let Some(iv) = inside(window, c.start_ns, c.end_ns, from, to) {
            by.entry(c.device).or_default().0.push(iv);
        }
    }
    for m in &trace.memsets {
        if let Some(iv) = inside(window, m.start_ns, m.end_ns, from, to) {
            by.entry(m.device).or_default().1.push(iv);
        }
    }
    by.into_iter()
        .map(|(id, (mut a, mut b))| {
            merge_in_place(&mut a);
            merge_in_place(&mut b);
            SideRuns {
                id,
                first: a,
                second: b,
            }
        })
        .collect()
}

/// Per host thread (process, thread) with host ops or CUDA calls in the span: their merged
/// runs, busiest thread first (ties: lower ids).
fn host_runs(
    trace: &Trace,
    window: Option<&Window>,
    from: Ns,
    to: Ns,
) -> Vec<SideRuns<(u32, u64)>> {
    // Each thread's intervals, its vectors sized exactly (a counting pass first: a trace's
    // calls can be millions), then merged where they are.
    let mut count: HashMap<(u32, u64), (usize, usize)> = HashMap::new();
    for o in &trace.host_ops {
        if inside(window, o.start_ns, o.end_ns, from, to).is_some() {
            count.entry((o.process, o.thread)).or_default().0 += 1;
        }
    }
    for c in &trace.api_calls {
        if inside(window, c.start_ns, c.end_ns, from, to).is_some() {
            count.entry((c.process, c.thread)).or_default().1 += 1;
        }
    }
    let mut by: HashMap<(u32, u64), TwoRuns> = count
        .into_iter()
        .map(|(k, (a, b))| (k, (Vec::with_capacity(a), Vec::with_capacity(b))))
        .collect();
    for o in &trace.host_ops {
        if let Some(iv) = inside(window, o.start_ns, o.end_ns, from, to) {
            by.entry((o.process, o.thread)).or_default().0.push(iv);
        }
    }
    for c in &trace.api_calls {
        if let Some(iv) = inside(window, c.start_ns, c.end_ns, from, to) {
            by.entry((c.process, c.thread)).or_default().1.push(iv);
        }
    }
    let mut v: Vec<SideRuns<(u32, u64)>> = by
        .into_iter()
        .map(|(id, (mut a, mut b))| {
            merge_in_place(&mut a);
            merge_in_place(&mut b);
            SideRuns {
                id,
                first: a,
                second: b,
            }
        })
        .collect();
    v.sort_by_cached_key(|h| (std::cmp::Reverse(h.ns()), h.id));
    v
}

/// The host threads' lanes, in the order given, on the stream lanes' grid.
fn host_lanes(hosts: &[SideRuns<(u32, u64)>], levels: &Levels) -> Vec<Lane> {
    hosts
        .iter()
        .map(|h| Lane {
            device: 0,
            stream: None,
            pid: Some(h.id.0),
            rank: None,
            role: Some(LaneRole::Host { thread: h.id.1 }),
            bucket_ns: None,
            levels: side_levels(h, levels),
        })
        .collect()
}

/// The levels of a lane of two shares ([`SideRuns`]).
fn side_levels<K>(r: &SideRuns<K>, levels: &Levels) -> Vec<String> {
    let g = &levels.grid;
    let sums = |runs: &[(Ns, Ns)]| {
        let mut v = vec![0; g.n];
        for &(s, e) in runs {
            g.add(s, e, |b, ns| v[b] += ns);
        }
        v
    };
    let (mut first, mut second, mut width) = (sums(&r.first), sums(&r.second), g.width);
    let mut out = Vec::with_capacity(levels.count as usize);
    for _ in 0..levels.count {
        let mut s = String::with_capacity(first.len() * 2);
        for (a, b) in first.iter().zip(&second) {
            s.push(share_char(*a, width));
            s.push(share_char(*b, width));
        }
        out.push(s);
        (first, second) = (coarser(&first), coarser(&second));
        width *= ZOOM;
    }
    out.reverse();
    out
}

/// What the first pass over the kernels finds.
struct KernelScan {
    /// The first start to the last end of the kernels with time; `None` when none has any.
    bounds: Option<(Ns, Ns)>,
    /// The devices with kernel time, in the order first seen.
    devices: Vec<u32>,
    /// Each stream's busy time, for choosing lanes.
    stream_busy: HashMap<(u32, u64), Ns>,
}

/// Pass 1, over the records: the span (the first start to the last end of the kernels with
/// time, as the busy runs' span is), the devices with kernel time, and each stream's busy time
/// for choosing lanes. Nothing per record is kept: the span fixes the buckets, and the busy runs
/// are then added to them as they are swept.
fn scan_kernels(trace: &Trace, window: Option<&Window>) -> KernelScan {
    let mut bounds: Option<(Ns, Ns)> = None;
    let mut devices: Vec<u32> = Vec::new();
    let mut stream_busy: HashMap<(u32, u64), Ns> = HashMap::new();
    for k in &trace.kernels {
        let Some((s, e)) = cutrace_analysis::window::clip(window, k.start_ns, k.end_ns) else {
            continue;
        };
        // An inverted record (end before start) is a point, as the analysis reads it: it adds
        // no busy time (and a corrupt one cannot overflow the sum).
        let busy = stream_busy.entry((k.device, k.stream)).or_default();
        *busy = busy.saturating_add(e.saturating_sub(s));
        if e <= s {
            continue;
        }
        bounds = Some(bounds.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
        if devices.last() != Some(&k.device) && !devices.contains(&k.device) {
            devices.push(k.device);
        }
    }
    KernelScan {
        bounds,
        devices,
        stream_busy,
    }
}

/// How the lanes fit the byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fit {
    dev_levels: u32,
    /// Of stream, copies and host lanes alike.
    stream_levels: u32,
    /// How many of the busiest streams and host threads get a lane.
    streams: usize,
    hosts: usize,
}

/// Levels: GPU lanes get 4, the others (streams, copies, host threads) 3, none finer than
/// [`MIN_BUCKET_NS`] (a short trace needs fewer); lowered (the others first), and then stream
/// lanes dropped, then host lanes, until the bytes fit the budget. A GPU's copies lane is never
/// dropped: it is the GPU's other engine.
fn fit_levels(span: Ns, devices: usize, copies: usize, hosts: usize, streams: usize) -> Fit {
    let bytes = |levels: u32, lanes: usize| -> u64 {
        (0..levels)
            .map(|k| 2 * BASE_BUCKETS * ZOOM.pow(k))
            .sum::<u64>()
            * lanes as u64
    };
    let finest = |levels: u32| span / (BASE_BUCKETS * ZOOM.pow(levels - 1));
    let (mut dev_levels, mut stream_levels) = (4u32, 3u32);
    while dev_levels > 1 && finest(dev_levels) < MIN_BUCKET_NS {
        dev_levels -= 1;
    }
    while stream_levels > 1 && finest(stream_levels) < MIN_BUCKET_NS {
        stream_levels -= 1;
    }
    let mut n_streams = streams.min(MAX_STREAM_LANES);
    let mut n_hosts = hosts.min(MAX_HOST_LANES);
    while bytes(dev_levels, devices) + bytes(stream_levels, n_streams + copies + n_hosts)
        > BUDGET_BYTES
    {
        if stream_levels > 1 && stream_levels >= dev_levels - 1 {
            stream_levels -= 1;
        } else if dev_levels > 1 && dev_levels > stream_levels {
            dev_levels -= 1;
        } else if n_streams > 0 {
            n_streams -= 1;
        } else if n_hosts > 0 {
            n_hosts -= 1;
        } else {
            break;
        }
    }
    Fit {
        dev_levels,
        stream_levels,
        streams: n_streams,
        hosts: n_hosts,
    }
}

/// One kind of lane's finest grid and how many levels it keeps.
pub(super) struct Levels {
    pub(super) grid: Grid,
    pub(super) count: u32,
}

impl Levels {
    /// `count` levels over `span` from `start`: the finest has `BASE_BUCKETS · ZOOM^(count-1)`
    /// buckets.
    pub(super) fn over(start: Ns, span: Ns, count: u32) -> Self {
        let n = BASE_BUCKETS * ZOOM.pow(count.max(1) - 1);
        Levels {
            grid: Grid {
                start,
                width: span.div_ceil(n).max(1),
                n: n as usize,
            },
            count,
        }
    }
}

/// Pass 2, for the GPU lanes: the busy runs, device by device in order, straight into the
/// buckets, and each gap split where its next kernel's launch returned.
fn gpu_sums(
    trace: &Trace,
    window: Option<&Window>,
    devices: &[u32],
    dev_grid: &Grid,
) -> Result<Vec<Acc>, AnalysisError> {
    let mut dev_acc: Vec<Acc> = devices
        .iter()
        .map(|_| Acc {
            busy: vec![0; dev_grid.n],
            idle: vec![[0; 3]; dev_grid.n],
        })
        .collect();
    let index = ApiIndex::build(&trace.api_calls);
    let mut prev: Option<(u32, Ns)> = None;
    kernel_timelines(trace, window, 0, |dev, s, e, first| {
        let a = &mut dev_acc[devices.binary_search(&dev).unwrap_or(0)];
        if let Some((pd, pe)) = prev {
            if pd == dev && pe < s {
                let corr = trace.kernels[first as usize].correlation_id;
                match index.get(corr).map(|i| trace.api_calls[i].end_ns) {
                    Some(r) => {
                        let r = r.clamp(pe, s);
                        dev_grid.add(pe, r, |b, ns| a.idle[b][0] += ns);
                        dev_grid.add(r, s, |b, ns| a.idle[b][1] += ns);
                    }
                    None => dev_grid.add(pe, s, |b, ns| a.idle[b][2] += ns),
                }
            }
        }
        dev_grid.add(s, e, |b, ns| a.busy[b] += ns);
        prev = Some((dev, e));
    })?;
    Ok(dev_acc)
}

/// Stream lanes: the kernels' time (a stream runs its kernels one after another), per kept
/// stream in `kept`'s lane order.
fn stream_sums(
    trace: &Trace,
    window: Option<&Window>,
    kept: &HashMap<(u32, u64), usize>,
    stream_grid: &Grid,
    n_streams: usize,
) -> Vec<Vec<Ns>> {
    let mut stream_acc: Vec<Vec<Ns>> = vec![vec![0; stream_grid.n]; n_streams];
    if n_streams > 0 {
        for k in &trace.kernels {
            let Some(&i) = kept.get(&(k.device, k.stream)) else {
                continue;
            };
            if let Some((s, e)) = cutrace_analysis::window::clip(window, k.start_ns, k.end_ns) {
                stream_grid.add(s, e, |b, ns| stream_acc[i][b] += ns);
            }
        }
    }
    stream_acc
}

/// The encoded lanes: each GPU's own lane, then its copies lane when it has copies in the
/// span, then its kept streams' lanes in stream order.
#[allow(clippy::too_many_arguments)]
fn encode_lanes(
    trace: &Trace,
    devices: &[u32],
    dev_acc: &[Acc],
    dev: &Levels,
    kept: &HashMap<(u32, u64), usize>,
    stream_acc: &[Vec<Ns>],
    stream: &Levels,
    copies: &[SideRuns<u32>],
) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for (d, a) in devices.iter().zip(dev_acc) {
        lanes.push(Lane {
            device: *d,
            stream: None,
            pid: None,
            rank: None,
            role: None,
            bucket_ns: None,
            levels: encode_levels(&dev.grid, dev.count, &a.busy, Some(&a.idle)),
        });
        if let Some(c) = copies.iter().find(|c| c.id == *d) {
            lanes.push(Lane {
                device: *d,
                stream: None,
                pid: None,
                rank: None,
                role: Some(LaneRole::Copies),
                bucket_ns: None,
                levels: side_levels(c, stream),
            });
        }
        let mut own: Vec<(u64, usize)> = kept
            .iter()
            .filter(|(k, _)| k.0 == *d)
            .map(|(k, &i)| (k.1, i))
            .collect();
        own.sort_unstable();
        for (s, i) in own {
            let (pid, s) = trace.meta.id_origin(s);
            lanes.push(Lane {
                device: *d,
                stream: Some(s),
                pid,
                rank: None,
                role: None,
                bucket_ns: None,
                levels: encode_levels(&stream.grid, stream.count, &stream_acc[i], None),
            });
        }
    }
    lanes
}

const B64: &[u8; 64] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/";

/// The finest sums, then each coarser level by summing `ZOOM` neighbours; encoded coarsest
/// first.
fn encode_levels(g: &Grid, levels: u32, busy: &[Ns], idle: Option<&[[Ns; 3]]>) -> Vec<String> {
    let mut out = Vec::with_capacity(levels as usize);
    let mut busy = busy.to_vec();
    let mut idle: Option<Vec<[Ns; 3]>> = idle.map(<[_]>::to_vec);
    let mut width = g.width;
    for _ in 0..levels {
        out.push(encode(&busy, idle.as_deref(), width));
        let z = ZOOM as usize;
        busy = coarser(&busy);
        idle = idle.map(|v| {
            v.chunks(z)
                .map(|c| {
                    c.iter()
                        .fold([0; 3], |a, x| [a[0] + x[0], a[1] + x[1], a[2] + x[2]])
                })
                .collect()
        });
        width *= ZOOM;
    }
    out.reverse();
    out
}

/// One level coarser: each [`ZOOM`] neighbours summed.
pub(super) fn coarser(v: &[Ns]) -> Vec<Ns> {
    v.chunks(ZOOM as usize).map(|c| c.iter().sum()).collect()
}

/// `ns` of `capacity` as a share in 64ths, as one character: `0` only when `ns` is 0, `/` (63)
/// only when full; nonzero stays visible (at least 1) and a partial bucket never reads full.
pub(super) fn share_char(ns: Ns, capacity: Ns) -> char {
    let q = if ns == 0 {
        0
    } else if ns >= capacity {
        63
    } else {
        ((ns as u128 * 63 / capacity as u128) as usize).clamp(1, 62)
    };
    B64[q] as char
}

fn encode(busy: &[Ns], idle: Option<&[[Ns; 3]]>, width: Ns) -> String {
    let mut s = String::with_capacity(busy.len() * 2);
    for (b, &ns) in busy.iter().enumerate() {
        s.push(share_char(ns, width));
        let kind = idle.map_or(IdleKind::None, |v| dominant(v[b]));
        s.push((b'0' + kind as u8) as char);
    }
    s
}

/// The busy share, in 64ths, of an encoded bucket's first character.
pub fn b64_value(c: u8) -> u8 {
    B64.iter().position(|&x| x == c).unwrap_or(0) as u8
}

fn dominant(i: [Ns; 3]) -> IdleKind {
    if i == [0; 3] {
        IdleKind::None
    } else if i[0] >= i[1] && i[0] >= i[2] {
        IdleKind::Host
    } else if i[1] >= i[2] {
        IdleKind::Queued
    } else {
        IdleKind::Unknown
    }
}
