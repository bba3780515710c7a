//! `cutrace convert --perfetto`: a trace as Perfetto's native protobuf (`.pftrace`), which
//! ui.perfetto.dev and trace_processor load without the JSON importer's size limits and at a
//! fraction of the Chrome JSON's size.
//!
//! One packet sequence of TrackEvents (Perfetto's `perfetto_trace.proto`): a track descriptor per
//! GPU (a root track named after the device) with a child track per stream row, and per host
//! process and thread; then slices as SLICE_BEGIN/SLICE_END pairs in time order, NVTX marks as
//! instants. Event names, categories and argument names are interned. Times are CUPTI's
//! nanoseconds as they are (TrackEvent timestamps are integer ns, so nothing is rounded). Each
//! device record ends a flow that starts on the API call it joins (the report's correlation
//! join). Rows on a track only nest or follow each other: GPU rows are the Chrome export's
//! (`rows::gpu_rows`), host rows are made the same way per thread.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use cutrace_analysis::correlate::ApiIndex;
use cutrace_analysis::display_name;
use cutrace_trace::varint;
use cutrace_trace::{ApiKind, FxHasher, Ns, RangeDomain, StrId, Trace};

/// Maps hashed with the Fx scheme: a track is looked up once per record, and 128k tracks (one per
/// row of overlapping work) put SipHash at the top of the profile.
type HashMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

use crate::rows::{self, copy_name, sync_name, GpuRows};

/// What was written, for the command's summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: u64,
    pub tracks: u64,
    /// Flow arrows, one per device record joined to its API call.
    pub flows: u64,
    /// Records that end before they start, written as zero-length slices.
    pub inverted: u64,
}

// ---- protobuf wire format ----

fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    varint::put(b, u64::from(field) << 3);
    varint::put(b, v);
}

/// int32/int64 fields: negative values as ten-byte two's complement, as protobuf does.
fn int(b: &mut Vec<u8>, field: u32, v: i64) {
    uint(b, field, v as u64);
}

fn fixed64(b: &mut Vec<u8>, field: u32, v: u64) {
    varint::put(b, (u64::from(field) << 3) | 1);
    b.extend(v.to_le_bytes());
}

fn bytes(b: &mut Vec<u8>, field: u32, v: &[u8]) {
    varint::put(b, (u64::from(field) << 3) | 2);
    varint::put(b, v.len() as u64);
    b.extend_from_slice(v);
}

/// A length-delimited sub-message built by `f`.
fn msg(b: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut sub = Vec::new();
    f(&mut sub);
    bytes(b, field, &sub);
}

// perfetto_trace.proto field numbers.
mod pf {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
    // TrackDescriptor
    pub const TD_UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const TD_PROCESS: u32 = 3;
    pub const TD_THREAD: u32 = 4;
    pub const TD_PARENT_UUID: u32 = 5;
    pub const TD_COUNTER: u32 = 8;
    pub const TD_CHILD_ORDERING: u32 = 11;
    pub const TD_SIBLING_ORDER_RANK: u32 = 12;
    pub const ORDERING_EXPLICIT: u64 = 3;
    // ProcessDescriptor / ThreadDescriptor
    pub const PD_PID: u32 = 1;
    pub const PD_NAME: u32 = 6;
    pub const THD_PID: u32 = 1;
    pub const THD_TID: u32 = 2;
    pub const THD_NAME: u32 = 5;
    // TrackEvent
    pub const TE_CATEGORY_IIDS: u32 = 3;
    pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
    pub const TE_TYPE: u32 = 9;
    pub const TE_NAME_IID: u32 = 10;
    pub const TE_TRACK_UUID: u32 = 11;
    pub const TE_FLOW_IDS: u32 = 47;
    pub const TE_TERMINATING_FLOW_IDS: u32 = 48;
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
    pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
    // DebugAnnotation
    pub const DA_NAME_IID: u32 = 1;
    pub const DA_UINT: u32 = 3;
    pub const DA_INT: u32 = 4;
    pub const DA_DOUBLE: u32 = 5;
    pub const DA_STRING: u32 = 6;
    // InternedData: event_categories, event_names, debug_annotation_names; each {iid = 1, name = 2}
    pub const ID_CATEGORIES: u32 = 1;
    pub const ID_EVENT_NAMES: u32 = 2;
    pub const ID_ANNOTATION_NAMES: u32 = 3;
}

/// Interned strings of one kind: iids from 1, and the entries a packet must carry the first time
/// it uses one.
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u64>,
    fresh: Vec<(u64, String)>,
}

impl Interner {
    fn iid(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.ids.len() as u64 + 1;
        self.ids.insert(s.to_owned(), i);
        self.fresh.push((i, s.to_owned()));
        i
    }
}

/// What a slice or instant is: which record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rec {
    Kernel(u32),
    Memcpy(u32),
    Memset(u32),
    Sync(u32),
    Api(u32),
    Range(u32),
    Overhead(u32),
    Mark(u32),
}

impl Rec {
    /// (kind, index): the kind in 3 bits, as [`Packed`] holds it.
    fn split(self) -> (u32, u32) {
        match self {
            Rec::Kernel(i) => (0, i),
            Rec::Memcpy(i) => (1, i),
            Rec::Memset(i) => (2, i),
            Rec::Sync(i) => (3, i),
            Rec::Api(i) => (4, i),
            Rec::Range(i) => (5, i),
            Rec::Overhead(i) => (6, i),
            Rec::Mark(i) => (7, i),
        }
    }

    fn join(kind: u32, i: u32) -> Rec {
        match kind {
            0 => Rec::Kernel(i),
            1 => Rec::Memcpy(i),
            2 => Rec::Memset(i),
            3 => Rec::Sync(i),
            4 => Rec::Api(i),
            5 => Rec::Range(i),
            6 => Rec::Overhead(i),
            _ => Rec::Mark(i),
        }
    }
}

/// A slice (or, for a mark, an instant) on a track: start, end, record.
type Item = (Ns, Ns, Rec);

/// The flow a device record is on: it ends there, or (when the record starts before its API
/// call) passes through.
#[derive(Clone, Copy)]
struct Flow {
    id: u64,
    ends: bool,
}

impl Flow {
    fn write(self, te: &mut Vec<u8>) {
        let field = if self.ends {
            pf::TE_TERMINATING_FLOW_IDS
        } else {
            pf::TE_FLOW_IDS
        };
        fixed64(te, field, self.id);
    }
}

const EVENT_SEQUENCE: u64 = 1;
const DESCRIPTOR_SEQUENCE: u64 = 2;
/// Counter values (no interned data, so no incremental state).
const COUNTER_SEQUENCE: u64 = 3;

/// One begin, end or instant, in output order.
#[derive(Clone, Copy)]
struct Ev {
    ts: Ns,
    track: u32,
    /// 0 begin, 1 end, 2 instant.
    what: u8,
    rec: Rec,
}

/// Tracks below this many may have their events sorted as [`Packed`] (the track takes 26 bits
/// of its tag, see [`events`]); more take the heap merge.
const PACKED_TRACKS: usize = 1 << 26;

/// An event as [`radix_sort`] moves it: 16 bytes where an [`Ev`] is 24, as the sort's passes
/// over every event are the part of the export that grows fastest with their number. `tag`
/// holds the track (below [`PACKED_TRACKS`]), then `what` (2 bits), the GPU flag and the
/// record's kind (3 bits); `index` is the record's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed {
    ts: Ns,
    tag: u32,
    index: u32,
}

impl Packed {
    fn new(ts: Ns, track: u32, what: u8, gpu: bool, rec: Rec) -> Packed {
        let (kind, index) = rec.split();
        Packed {
            ts,
            tag: track | u32::from(what) << 26 | u32::from(gpu) << 28 | kind << 29,
            index,
        }
    }

    fn gpu(&self) -> bool {
        self.tag >> 28 & 1 == 1
    }

    fn ev(self) -> Ev {
        Ev {
            ts: self.ts,
            track: self.tag & (PACKED_TRACKS as u32 - 1),
            what: (self.tag >> 26 & 3) as u8,
            rec: Rec::join(self.tag >> 29, self.index),
        }
    }
}

/// A track: 72 bytes, as a trace of 128k overlapping kernels has a track per kernel. Its uuid
/// is its index + 1 ([`Tracks::uuid`]).
struct Track {
    /// The parent's uuid; 0: none.
    parent: u32,
    /// A GPU track: at equal times its events come after host events, so a flow's start (on the
    /// API call) is read before its end.
    gpu: bool,
    name: TrackName,
    /// Where the track goes among its parent's children (ranks are made from it, densely).
    order: (u64, u64),
    /// (start, end, record) of the slices on this track.
    items: Vec<Item>,
}

impl Track {
    fn new(parent: Option<u64>, name: TrackName, order: (u64, u64), gpu: bool) -> Track {
        Track {
            // A uuid is a track's index (a u32) + 1: below 2³² but for the 2³²-th track,
            // some 300 GB of tracks.
            parent: parent.map_or(0, |p| {
                debug_assert!(p <= u64::from(u32::MAX));
                p as u32
            }),
            gpu,
            name,
            order,
            items: Vec::new(),
        }
    }

    fn parent(&self) -> Option<u64> {
        (self.parent != 0).then_some(u64::from(self.parent))
    }
}

/// A track's name, and what it stands for: a host process or thread gets Perfetto's process or
/// thread descriptor. A GPU row's name is made when its descriptor is written: a trace of 128k
/// overlapping kernels has 128k rows, and their names would be as many strings held at once.
enum TrackName {
    Text(Box<str>),
    /// A stream's row; `no_stream` for work on no stream (context-wide synchronization).
    Row {
        stream: u64,
        slot: u32,
        no_stream: bool,
    },
    /// A host process (`0`: unknown).
    Process(u32),
    /// A host thread's own track (its overlap rows are `Text`).
    Thread {
        process: u32,
        thread: u64,
    },
}

impl From<String> for TrackName {
    fn from(s: String) -> Self {
        TrackName::Text(s.into_boxed_str())
    }
}

/// The label of the stream whose rows are being named: a stream's rows come one after another,
/// so it is made once per stream, not once per row.
#[derive(Default)]
struct StreamLabel {
    stream: Option<Option<u64>>,
    text: String,
}

impl TrackName {
    /// Writes the name to `out`, which it clears first.
    fn write(&self, t: &Trace, out: &mut String, label: &mut StreamLabel) {
        out.clear();
        match self {
            TrackName::Text(s) => out.push_str(s),
            &TrackName::Process(0) => out.push_str("process unknown"),
            // Writing to a String cannot fail.
            &TrackName::Process(p) => {
                let _ = write!(out, "process {p}");
            }
            &TrackName::Thread { thread, .. } => {
                let _ = write!(out, "thread {thread}");
            }
            &TrackName::Row {
                stream,
                slot,
                no_stream,
            } => {
                let stream = (!no_stream).then_some(stream);
                if label.stream != Some(stream) {
                    label.stream = Some(stream);
                    label.text = stream.map_or("no stream".to_string(), |s| {
                        format!("stream {}", t.meta.show_id(s))
                    });
                }
                let s = &label.text;
                // Writing to a String cannot fail.
                let _ = match slot {
                    0 => write!(out, "{s}"),
                    1 => write!(out, "{s} sync"),
                    n if n % 2 == 0 => write!(out, "{s} (overlap {})", n / 2),
                    n => write!(out, "{s} sync (overlap {})", n / 2),
                };
            }
        }
    }
}

/// Tracks by key, created on first use.
struct Tracks {
    list: Vec<Track>,
    /// Looked up once per record: hashed, as a tree's lookups grow with the track count (one
    /// track per row of overlapping work).
    by_key: HashMap<(u8, u64, u64, u64), u32>,
}

impl Tracks {
    /// A new track that is not looked up by key (a GPU row: see `layout`).
    fn push(&mut self, make: impl FnOnce() -> Track) -> u32 {
        let i = self.list.len() as u32;
        self.list.push(make());
        i
    }

    /// The uuid of track `i`.
    fn uuid(i: u32) -> u64 {
        u64::from(i) + 1
    }

    fn get(&mut self, key: (u8, u64, u64, u64), make: impl FnOnce() -> Track) -> u32 {
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(make());
        self.by_key.insert(key, i);
        i
    }
}

/// Rows in which the slices of one host thread only nest or follow each other (NVTX start/end
/// ranges may cross each other or a call). Row 0 is the thread itself.
fn host_rows(items: &[Item]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].0, std::cmp::Reverse(items[i].1)));
    let mut rows = rows::Rows::new();
    let mut out = vec![0u32; items.len()];
    for i in order {
        // At most one row per slice; a thread's slices are far fewer than 2³².
        out[i] = u32::try_from(rows.place(items[i].0, items[i].1)).unwrap_or(u32::MAX);
    }
    out
}

/// The pid written for a process: 0 means the trace does not know it (Kineto's CUPTI overhead
/// records); that becomes a placeholder no real pid reaches (Linux's pid_max is at most 2²²),
/// positive because trace_processor reads a process descriptor's pid as unsigned and a
/// thread descriptor's as signed.
const UNKNOWN_PID: i64 = i32::MAX as i64;

fn pid_of(process: u32) -> i64 {
    if process == 0 {
        UNKNOWN_PID
    } else {
        i64::from(process)
    }
}

fn device_label(t: &Trace, device: u32) -> String {
    match t.meta.devices.iter().find(|d| d.device == device) {
        Some(d) if !d.name.is_empty() => format!("GPU {device}: {}", d.name),
        _ => format!("GPU {device}"),
    }
}

/// Lays the records out on tracks.
fn layout(t: &Trace, rows: &GpuRows) -> (Tracks, u64) {
    let mut tr = Tracks {
        list: Vec::new(),
        by_key: HashMap::default(),
    };
    let mut inverted = 0u64;
    let mut span = |s: Ns, e: Ns| {
        inverted += u64::from(e < s);
        (s, e.max(s))
    };
    // GPUs first, in device order, then host processes.
    let gpu = |tr: &mut Tracks, device: u32| {
        tr.get((0, u64::from(device), 0, 0), || {
            Track::new(
                None,
                device_label(t, device).into(),
                (u64::from(device), 0),
                true,
            )
        })
    };
    // A stream's row tracks by slot (dense: slots are 2·row + family), so a record finds its
    // track by an index, not by hashing a key into a table of every row of every stream.
    // Streams are found by hashing, but once per run of records on one stream (the last one
    // found is kept), and each keeps its GPU's track: no hashing per row either.
    let mut lanes: HashMap<(u32, u64), usize> = HashMap::default();
    // Per stream: its GPU's track, and its rows' tracks by slot (`u32::MAX`: none yet).
    let mut streams: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut last: Option<((u32, u64), usize)> = None;
    let mut lane = |tr: &mut Tracks, device: u32, stream: Option<u64>, slot: u32| {
        let s = stream.map_or(u64::MAX, |s| s);
        let at = match last {
            Some((k, at)) if k == (device, s) => at,
            _ => {
                let at = *lanes.entry((device, s)).or_insert_with(|| {
                    streams.push((gpu(tr, device), Vec::new()));
                    streams.len() - 1
                });
                last = Some(((device, s), at));
                at
            }
        };
        let (root, slots) = &mut streams[at];
        if let Some(&i) = slots.get(slot as usize).filter(|&&i| i != u32::MAX) {
            return i;
        }
        let parent = Some(Tracks::uuid(*root));
        // Streams in id order, each stream's rows together, no-stream work last.
        let i = tr.push(|| {
            Track::new(
                parent,
                TrackName::Row {
                    stream: s,
                    slot,
                    no_stream: stream.is_none(),
                },
                (s, u64::from(slot)),
                true,
            )
        });
        if slots.len() <= slot as usize {
            slots.resize(slot as usize + 1, u32::MAX);
        }
        slots[slot as usize] = i;
        i
    };
    // One track per GPU row at least: reserved, not grown by copying (a trace of 128k
    // overlapping kernels has 128k rows).
    tr.list.reserve(rows.lanes.len() + 16);
    let mut devices: Vec<u32> = rows.lanes.iter().map(|l| l.0).collect();
    devices.extend(rows.streamless_ranges.iter().copied());
    devices.sort_unstable();
    devices.dedup();
    for d in devices {
        gpu(&mut tr, d);
    }
    // Kernels, copies, memsets and syncs: on the stream row the Chrome export gives them.
    macro_rules! place_on_rows {
        ($records:expr, $slots:expr, $rec:ident, |$r:ident| $stream:expr) => {
            for (i, $r) in $records.iter().enumerate() {
                let l = lane(&mut tr, $r.device, $stream, $slots[i]);
                let (s, e) = span($r.start_ns, $r.end_ns);
                tr.list[l as usize].items.push((s, e, Rec::$rec(i as u32)));
            }
        };
    }
    place_on_rows!(t.kernels, rows.kernels, Kernel, |r| Some(r.stream));
    place_on_rows!(t.memcpys, rows.memcpys, Memcpy, |r| Some(r.stream));
    place_on_rows!(t.memsets, rows.memsets, Memset, |r| Some(r.stream));
    place_on_rows!(t.syncs, rows.syncs, Sync, |r| r.stream);
    // GPU annotation ranges (torch's `gpu_user_annotation`): rows of their own under their
    // stream, since they may cross the stream's kernels (work launched from two threads), and
    // trace_processor closes the innermost open slice at each end; ranges without a stream
    // (imported traces only) on rows of a device-wide "annotations" track.
    let mut annotations: BTreeMap<(u32, Option<u64>), Vec<Item>> = BTreeMap::new();
    for (i, r) in t.ranges.iter().enumerate() {
        if r.domain == RangeDomain::Gpu {
            let (s, e) = span(r.start_ns, r.end_ns);
            annotations
                .entry((r.device.unwrap_or(0), r.stream))
                .or_default()
                .push((s, e, Rec::Range(i as u32)));
        }
    }
    for ((device, stream), items) in annotations {
        let root = gpu(&mut tr, device);
        let parent = Some(Tracks::uuid(root));
        let rows = host_rows(&items);
        let base = stream.map_or("annotations".to_string(), |s| {
            format!("stream {} annotations", t.meta.show_id(s))
        });
        for (it, row) in items.into_iter().zip(rows) {
            let key = (
                2,
                u64::from(device),
                stream.map_or(u64::MAX, |s| s),
                u64::from(row),
            );
            let l = tr.get(key, || {
                let name = if row == 0 {
                    base.clone()
                } else {
                    format!("{base} (overlap {row})")
                };
                Track::new(
                    parent,
                    name.into(),
                    (key.2, (1 << 32) + u64::from(row)),
                    true,
                )
            });
            tr.list[l as usize].items.push(it);
        }
    }
    // Host: per thread, API calls, NVTX ranges and CUPTI overhead, in rows that nest.
    let mut threads: BTreeMap<(u32, u64), Vec<Item>> = BTreeMap::new();
    for (i, a) in t.api_calls.iter().enumerate() {
        let (s, e) = span(a.start_ns, a.end_ns);
        threads
            .entry((a.process, a.thread))
            .or_default()
            .push((s, e, Rec::Api(i as u32)));
    }
    for (i, r) in t.ranges.iter().enumerate() {
        if r.domain == RangeDomain::Host {
            let (s, e) = span(r.start_ns, r.end_ns);
            threads
                .entry((r.process, r.thread))
                .or_default()
                .push((s, e, Rec::Range(i as u32)));
        }
    }
    for (i, o) in t.overheads.iter().enumerate() {
        let (s, e) = span(o.start_ns, o.end_ns);
        threads
            .entry((o.process, o.thread))
            .or_default()
            .push((s, e, Rec::Overhead(i as u32)));
    }
    for (i, m) in t.marks.iter().enumerate() {
        threads.entry((m.process, m.thread)).or_default().push((
            m.ts_ns,
            m.ts_ns,
            Rec::Mark(i as u32),
        ));
    }
    for ((process, thread), mut items) in threads {
        // The process's own track names it (its threads find it by pid).
        tr.get((3, u64::from(process), 0, 0), || {
            Track::new(None, TrackName::Process(process), (0, 0), false)
        });
        // Marks are instants: they take no room in a row.
        let (marks, slices): (Vec<_>, Vec<_>) =
            items.drain(..).partition(|x| matches!(x.2, Rec::Mark(_)));
        let rows = host_rows(&slices);
        // Row 0 is the thread's own track; overlap rows are its children.
        let thread_track = |tr: &mut Tracks, row: u32| {
            let parent =
                (row > 0).then(|| Tracks::uuid(tr.by_key[&(4, u64::from(process), thread, 0)]));
            tr.get((4, u64::from(process), thread, u64::from(row)), || {
                let name = if row == 0 {
                    TrackName::Thread { process, thread }
                } else {
                    format!("thread {thread} (overlap {row})").into()
                };
                Track::new(parent, name, (u64::from(row), 0), false)
            })
        };
        thread_track(&mut tr, 0);
        for it in marks {
            let l = thread_track(&mut tr, 0);
            tr.list[l as usize].items.push(it);
        }
        for (it, row) in slices.into_iter().zip(rows) {
            let l = thread_track(&mut tr, row);
            tr.list[l as usize].items.push(it);
        }
    }
    (tr, inverted)
}

/// One track's begin/end/instant events in order, made on demand: an enclosing slice begins
/// first and ends last; a slice that ends where the next begins is closed before it. The track's
/// items are sorted already ([`sort_items`]).
struct Cursor<'a> {
    items: &'a [Item],
    next: usize,
    open: Open,
}

/// The slices open on a track, innermost last. Most tracks never nest (a GPU row holds one
/// slice at a time), so the first lives inline: 128k tracks then cost no allocation each.
#[derive(Default)]
struct Open {
    first: Option<(Ns, Rec)>,
    more: Vec<(Ns, Rec)>,
}

impl Open {
    fn push(&mut self, x: (Ns, Rec)) {
        if self.first.is_none() {
            self.first = Some(x);
        } else {
            self.more.push(x);
        }
    }
    fn last(&self) -> Option<&(Ns, Rec)> {
        self.more.last().or(self.first.as_ref())
    }
    fn pop(&mut self) -> Option<(Ns, Rec)> {
        self.more.pop().or_else(|| self.first.take())
    }
}

/// Puts every track's items in the order its events are written: by start, an enclosing slice
/// (ending later) first; ties keep their order.
fn sort_items(tracks: &mut Tracks) {
    for tk in &mut tracks.list {
        tk.items.sort_by_key(|x| (x.0, std::cmp::Reverse(x.1)));
    }
}

impl<'a> Cursor<'a> {
    fn new(track: &'a Track) -> Self {
        Cursor {
            items: &track.items,
            next: 0,
            open: Open::default(),
        }
    }

    /// (time, 0 begin / 1 end / 2 instant, record).
    fn pull(&mut self) -> Option<(Ns, u8, Rec)> {
        let Some(&(s, e, rec)) = self.items.get(self.next) else {
            return self.open.pop().map(|(end, r)| (end, 1, r));
        };
        if self.open.last().is_some_and(|&(end, _)| end <= s) {
            return self.open.pop().map(|(end, r)| (end, 1, r));
        }
        self.next += 1;
        if matches!(rec, Rec::Mark(_)) {
            return Some((s, 2, rec));
        }
        self.open.push((e, rec));
        Some((s, 0, rec))
    }
}

/// Every track's events in output order: by time, at equal times host events first (a flow's
/// start, on the API call, must be read before its end on the device record), then by track;
/// one track's events keep their order (their times never decrease).
///
/// Three ways to the same order. Where tracks hold a slice or two each (overlapping work: a
/// track per row), the events are held at once and put in order by a stable radix sort,
/// linear in the events; merging a cursor per track through a heap cost log(tracks) per event,
/// a track per record there. Their buffers (2 × 16 bytes an event, [`Packed`]) are then of the
/// size of the tracks' own state. Where, moreover, each track holds one slice and the slices
/// begin and end in turn ([`InTurn`]), the begins and the ends are merged as read, holding
/// nothing. Elsewhere (a real trace: few tracks, millions of records) the tracks are merged
/// through the heap, holding nothing per event: sorting all of a 10 MB trace's events would
/// take some 350 MB.
fn events(tracks: &Tracks) -> Box<dyn Iterator<Item = Ev> + '_> {
    let slices: usize = tracks.list.iter().map(|tk| tk.items.len()).sum();
    if slices > 2 * tracks.list.len() || tracks.list.len() >= PACKED_TRACKS {
        return Box::new(Merge::new(tracks));
    }
    if InTurn::applies(tracks) {
        return Box::new(InTurn {
            list: &tracks.list,
            begin: 0,
            end: 0,
        });
    }
    Box::new(sorted_events(tracks).into_iter().map(Packed::ev))
}

/// [`events`] where every track holds at most one slice (no instant), and across the tracks
/// that hold one, in track order, the slices' (start, host before GPU) never decrease and nor
/// do their (end, host before GPU): work that starts and ends in turn, each on a row of its
/// own. The begins, read in track order, are then in output order, and so are the ends: the
/// two are merged as they are read, holding nothing (the sort would hold every event twice).
struct InTurn<'a> {
    list: &'a [Track],
    /// The next track whose begin, and whose end, is still to come.
    begin: usize,
    end: usize,
}

impl<'a> InTurn<'a> {
    /// Whether `tracks` are as the type's doc says.
    fn applies(tracks: &Tracks) -> bool {
        let mut last: Option<((Ns, bool), (Ns, bool))> = None;
        for tk in &tracks.list {
            let (s, e, rec) = match tk.items.as_slice() {
                [] => continue,
                &[it] => it,
                _ => return false,
            };
            if matches!(rec, Rec::Mark(_)) {
                return false;
            }
            // Every slice is laid out with its end clamped to its start (`layout`'s `span`).
            debug_assert!(s <= e);
            let keys = ((s, tk.gpu), (e, tk.gpu));
            if last.is_some_and(|(b, f)| keys.0 < b || keys.1 < f) {
                return false;
            }
            last = Some(keys);
        }
        true
    }

    /// The next track at or after `i` that holds a slice, and the slice.
    fn next_slice(&self, mut i: usize) -> Option<(usize, Item)> {
        while let Some(tk) = self.list.get(i) {
            if let Some(&it) = tk.items.first() {
                return Some((i, it));
            }
            i += 1;
        }
        None
    }
}

impl Iterator for InTurn<'_> {
    type Item = Ev;
    fn next(&mut self) -> Option<Ev> {
        let b = self.next_slice(self.begin);
        let e = self.next_slice(self.end)?;
        // Output order: time, host before GPU, track, and a track's begin before its end.
        let key_b = b.map(|(i, (s, _, _))| (s, self.list[i].gpu, i, 0));
        let key_e = (e.1 .1, self.list[e.0].gpu, e.0, 1);
        match b {
            Some((i, (s, _, rec))) if key_b.is_some_and(|k| k < key_e) => {
                self.begin = i + 1;
                Some(Ev {
                    ts: s,
                    track: i as u32,
                    what: 0,
                    rec,
                })
            }
            _ => {
                self.end = e.0 + 1;
                Some(Ev {
                    ts: e.1 .1,
                    track: e.0 as u32,
                    what: 1,
                    rec: e.1 .2,
                })
            }
        }
    }
}

/// [`events`] by holding them all and sorting.
/// Fewer than [`PACKED_TRACKS`] tracks.
fn sorted_events(tracks: &Tracks) -> Vec<Packed> {
    debug_assert!(tracks.list.len() < PACKED_TRACKS);
    let n: usize = tracks.list.iter().map(|tk| 2 * tk.items.len()).sum();
    let mut evs = Vec::with_capacity(n);
    for (i, tk) in tracks.list.iter().enumerate() {
        let mut c = Cursor::new(tk);
        while let Some((ts, what, rec)) = c.pull() {
            evs.push(Packed::new(ts, i as u32, what, tk.gpu, rec));
        }
    }
    radix_sort(evs)
}

/// Every track's events merged by time, without holding them all: the order of [`events`].
struct Merge<'a> {
    gpu: Vec<bool>,
    cursors: Vec<Cursor<'a>>,
    heads: Vec<Option<(Ns, u8, Rec)>>,
    /// Each track's next event as one integer, [`merge_key`]: one comparison per step of a
    /// sift, where the tuple took three (with one track per row of overlapping work, the heap
    /// holds a track per record).
    heap: std::collections::BinaryHeap<std::cmp::Reverse<u128>>,
}

/// (time, host before GPU, track) packed so that integer order is their order.
fn merge_key(ts: Ns, gpu: bool, track: u32) -> u128 {
    u128::from(ts) << 64 | u128::from(gpu) << 32 | u128::from(track)
}

impl<'a> Merge<'a> {
    fn new(tracks: &'a Tracks) -> Self {
        let gpu: Vec<bool> = tracks.list.iter().map(|t| t.gpu).collect();
        let mut cursors: Vec<Cursor> = tracks.list.iter().map(Cursor::new).collect();
        let heads: Vec<Option<(Ns, u8, Rec)>> = cursors.iter_mut().map(Cursor::pull).collect();
        // Built at once (linear), not pushed one by one.
        let heap = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                h.map(|(ts, _, _)| std::cmp::Reverse(merge_key(ts, gpu[i], i as u32)))
            })
            .collect();
        Merge {
            gpu,
            cursors,
            heads,
            heap,
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = Ev;
    fn next(&mut self) -> Option<Ev> {
        // The track with the earliest head: its next event replaces it in place (one sift
        // instead of a pop and a push).
        let mut top = self.heap.peek_mut()?;
        // The low 32 bits are the track.
        let i = top.0 as u32;
        let (ts, what, rec) = self.heads[i as usize]
            .take()
            .expect("a head per heap entry");
        self.heads[i as usize] = self.cursors[i as usize].pull();
        match self.heads[i as usize] {
            Some((next, _, _)) => {
                *top = std::cmp::Reverse(merge_key(next, self.gpu[i as usize], i));
            }
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Some(Ev {
            ts,
            track: i,
            what,
            rec,
        })
    }
}

/// Sorts `evs` by (time, host before GPU), stably (so by track and order within a track, as
/// they were pushed): least significant digit first, the GPU flag and then the time's eight
/// bytes; a digit that every event shares (the high bytes of nearby times) is skipped.
fn radix_sort(evs: Vec<Packed>) -> Vec<Packed> {
    let digit = |e: &Packed, d: usize| -> usize {
        if d == 0 {
            usize::from(e.gpu())
        } else {
            ((e.ts >> (8 * (d - 1))) & 0xff) as usize
        }
    };
    let mut counts = vec![[0usize; 256]; 9];
    for e in &evs {
        for (d, c) in counts.iter_mut().enumerate() {
            c[digit(e, d)] += 1;
        }
    }
    let mut src = evs;
    let mut dst: Vec<Packed> = Vec::new();
    for (d, c) in counts.iter().enumerate() {
        if c.contains(&src.len()) {
            continue;
        }
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, &k) in at.iter_mut().zip(c.iter()) {
            *a = sum;
            sum += k;
        }
        if dst.len() != src.len() {
            dst = src.clone();
        }
        for e in &src {
            let k = digit(e, d);
            dst[at[k]] = *e;
            at[k] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    src
}

struct Writer<'t, W: Write> {
    w: W,
    t: &'t Trace,
    names: Interner,
    cats: Interner,
    keys: Interner,
    /// Name iids by string id: kernels (demangled) and everything else (as it is).
    /// Per kernel name: its iid, and whether the name shown differs from the raw one (demangled).
    kernel_iids: HashMap<StrId, (u64, bool)>,
    plain_iids: HashMap<StrId, u64>,
    packets: u64,
}

impl<W: Write> Writer<'_, W> {
    fn packet(&mut self, p: &[u8]) -> io::Result<()> {
        // The field key (one byte) and the length: on the stack, not allocated per packet.
        let mut head = [0u8; 1 + varint::MAX_LEN];
        head[0] = (pf::TRACE_PACKET << 3 | 2) as u8;
        let (len, n) = varint::encode(p.len() as u64);
        head[1..=n].copy_from_slice(&len[..n]);
        self.w.write_all(&head[..=n])?;
        self.w.write_all(p)?;
        self.packets += 1;
        Ok(())
    }

    /// The name iid of a kernel (its demangled display name), and whether the name was
    /// demangled: each name is demangled once.
    fn kernel_name(&mut self, id: StrId) -> (u64, bool) {
        if let Some(&v) = self.kernel_iids.get(&id) {
            return v;
        }
        let raw = self.t.str(id);
        let shown = display_name(raw);
        let v = (self.names.iid(&shown), shown != raw);
        self.kernel_iids.insert(id, v);
        v
    }

    /// The name iid of a string used as it is.
    fn plain_iid(&mut self, id: StrId) -> u64 {
        if let Some(&i) = self.plain_iids.get(&id) {
            return i;
        }
        let i = self.names.iid(self.t.str(id));
        self.plain_iids.insert(id, i);
        i
    }
}

/// Debug annotations of one event, interned by key.
struct Args<'a> {
    b: Vec<u8>,
    keys: &'a mut Interner,
}

impl Args<'_> {
    /// `debug_annotations { name_iid: key, <field>: <value> }`: the annotation's header, then
    /// `value_len` bytes of the value's encoding after its key byte, which the caller appends
    /// (all annotation fields are < 16). Nothing is built in a scratch buffer: this runs about
    /// ten times per kernel.
    fn head(&mut self, key: &str, field: u32, wire: u64, value_len: u64) {
        let k = self.keys.iid(key);
        let len = 1 + varint::encoded_len(k) as u64 + 1 + value_len;
        varint::put(&mut self.b, (u64::from(pf::TE_DEBUG_ANNOTATIONS) << 3) | 2);
        varint::put(&mut self.b, len);
        uint(&mut self.b, pf::DA_NAME_IID, k);
        varint::put(&mut self.b, (u64::from(field) << 3) | wire);
    }
    fn u(&mut self, key: &str, v: u64) {
        self.head(key, pf::DA_UINT, 0, varint::encoded_len(v) as u64);
        varint::put(&mut self.b, v);
    }
    fn i(&mut self, key: &str, v: i64) {
        self.head(key, pf::DA_INT, 0, varint::encoded_len(v as u64) as u64);
        varint::put(&mut self.b, v as u64);
    }
    fn f(&mut self, key: &str, v: f64) {
        self.head(key, pf::DA_DOUBLE, 1, 8);
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn s(&mut self, key: &str, v: &str) {
        let n = v.len() as u64;
        self.head(key, pf::DA_STRING, 2, varint::encoded_len(n) as u64 + n);
        varint::put(&mut self.b, n);
        self.b.extend_from_slice(v.as_bytes());
    }
}

/// Writes `t` as a Perfetto protobuf trace to `w`.
pub fn write_perfetto<W: Write>(w: W, t: &Trace) -> io::Result<Written> {
    let rows = rows::gpu_rows(t);
    let (mut tracks, inverted) = layout(t, &rows);
    sort_items(&mut tracks);

    // Flows: each device record joined to an API call ends a flow that starts on that call.
    // A record that starts before its call does (clock skew between host and GPU timestamps)
    // would be read first, and trace_processor ignores an end it has not seen start: there the
    // record carries the id as an ordinary flow step, and the arrow is drawn between the two.
    let index = ApiIndex::build(&t.api_calls);
    // (API call index, flow id), sorted by call once all are known.
    let mut flow_starts: Vec<(u32, u64)> = Vec::new();
    let mut next_flow = 1u64;
    let mut flow_of = |corr: u64, start: Ns, flow_starts: &mut Vec<(u32, u64)>| -> Option<Flow> {
        let api = index.get(corr)?;
        let id = next_flow;
        next_flow += 1;
        flow_starts.push((api as u32, id));
        Some(Flow {
            id,
            ends: t.api_calls[api].start_ns <= start,
        })
    };
    let kernel_flows: Vec<Option<Flow>> = t
        .kernels
        .iter()
        .map(|k| flow_of(k.correlation_id, k.start_ns, &mut flow_starts))
        .collect();
    let memcpy_flows: Vec<Option<Flow>> = t
        .memcpys
        .iter()
        .map(|m| flow_of(m.correlation_id, m.start_ns, &mut flow_starts))
        .collect();
    let memset_flows: Vec<Option<Flow>> = t
        .memsets
        .iter()
        .map(|m| flow_of(m.correlation_id, m.start_ns, &mut flow_starts))
        .collect();
    let flows = next_flow - 1;
    flow_starts.sort_unstable();

    let mut wr = Writer {
        w,
        t,
        names: Interner::default(),
        cats: Interner::default(),
        keys: Interner::default(),
        kernel_iids: HashMap::default(),
        plain_iids: HashMap::default(),
        packets: 0,
    };

    // Sibling ranks, dense per parent, by `order`; a parent with children orders them
    // explicitly. Children are grouped under their parent by counting (a parent is a track
    // too, at index uuid − 1), not in a hash table keyed by parent: a GPU with 128k rows has
    // 128k children.
    let n = tracks.list.len();
    let parent_of = |tk: &Track| tk.parent().map(|p| (p - 1) as usize);
    // Children of track `p` go to `kids[from[p]..from[p + 1]]`, in track order. Track indices
    // are u32 (`Tracks::push`): half the memory of `usize` at 128k rows.
    let mut from = vec![0u32; n + 1];
    for tk in &tracks.list {
        if let Some(p) = parent_of(tk) {
            from[p + 1] += 1;
        }
    }
    for p in 0..n {
        from[p + 1] += from[p];
    }
    let mut kids = vec![0u32; from[n] as usize];
    let mut at = from.clone();
    for (i, tk) in tracks.list.iter().enumerate() {
        if let Some(p) = parent_of(tk) {
            kids[at[p] as usize] = i as u32;
            at[p] += 1;
        }
    }
    drop(at);
    let mut rank = vec![0u32; n];
    let mut keyed: Vec<((u64, u64), u32)> = Vec::new();
    let order = |i: u32| tracks.list[i as usize].order;
    for p in 0..n {
        let ks = &kids[from[p] as usize..from[p + 1] as usize];
        // Mostly in order already (rows are made from the lowest up): then a child's rank is
        // its place, without gathering and sorting the keys.
        if ks.windows(2).all(|w| order(w[0]) <= order(w[1])) {
            for (r, &i) in ks.iter().enumerate() {
                rank[i as usize] = r as u32;
            }
            continue;
        }
        // By the keys gathered first: a GPU with 128k rows would look each up at random.
        // Stable: siblings of one key keep their track order.
        keyed.clear();
        keyed.extend(ks.iter().map(|&i| (order(i), i)));
        keyed.sort_by_key(|k| k.0);
        for (r, &(_, i)) in keyed.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
    }
    // Track descriptors go on a sequence of their own: on the events' sequence, the last thread
    // descriptor would become that sequence's default thread, and trace_processor would tie
    // every GPU event to it. Built in buffers reused from track to track (one per message
    // level): 128k rows are 128k descriptors.
    let (mut p, mut d, mut m) = (Vec::new(), Vec::new(), Vec::new());
    let mut name = String::new();
    let mut label = StreamLabel::default();
    for (i, tk) in tracks.list.iter().enumerate() {
        tk.name.write(t, &mut name, &mut label);
        let name = name.as_bytes();
        d.clear();
        uint(&mut d, pf::TD_UUID, Tracks::uuid(i as u32));
        if let Some(parent) = tk.parent() {
            uint(&mut d, pf::TD_PARENT_UUID, parent);
        }
        m.clear();
        match tk.name {
            TrackName::Process(process) => {
                int(&mut m, pf::PD_PID, pid_of(process));
                bytes(&mut m, pf::PD_NAME, name);
                bytes(&mut d, pf::TD_PROCESS, &m);
            }
            TrackName::Thread { process, thread } => {
                int(&mut m, pf::THD_PID, pid_of(process));
                int(&mut m, pf::THD_TID, thread as i64);
                bytes(&mut m, pf::THD_NAME, name);
                bytes(&mut d, pf::TD_THREAD, &m);
            }
            _ => bytes(&mut d, pf::TD_NAME, name),
        }
        if from[i + 1] > from[i] {
            uint(&mut d, pf::TD_CHILD_ORDERING, pf::ORDERING_EXPLICIT);
        }
        if tk.parent != 0 {
            int(
                &mut d,
                pf::TD_SIBLING_ORDER_RANK,
                i64::from(rank[i].min(i32::MAX as u32)),
            );
        }
        p.clear();
        uint(&mut p, pf::SEQUENCE_ID, DESCRIPTOR_SEQUENCE);
        bytes(&mut p, pf::TRACK_DESCRIPTOR, &d);
        wr.packet(&p)?;
    }

    let counters = crate::counter_tracks::counter_timeline(t);
    let counter_uuids = write_counter_tracks(&mut wr, &tracks, &counters)?;
    let mut samples = counters.samples.iter().peekable();

    let mut p = Vec::with_capacity(256);
    let mut first = true;
    let mut te = Vec::with_capacity(160);
    // Scratch reused by every event: the annotations, a kernel's grid and block as text.
    let mut args_buf: Vec<u8> = Vec::with_capacity(160);
    let mut dims = String::new();
    for ev in events(&tracks) {
        while let Some(c) = samples.next_if(|c| c.at_ns <= ev.ts) {
            write_counter_value(&mut wr, counter_uuids[c.track as usize], c)?;
        }
        // A track's uuid is its index + 1 (`Tracks::uuid`).
        let track = u64::from(ev.track) + 1;
        te.clear();
        uint(&mut te, pf::TE_TRACK_UUID, track);
        if ev.what == 1 {
            uint(&mut te, pf::TE_TYPE, pf::SLICE_END);
        } else {
            // Whether a kernel's name was demangled (its raw name then goes in the arguments).
            let mut demangled = false;
            let (name_iid, cat) = match ev.rec {
                Rec::Kernel(i) => {
                    let (iid, d) = wr.kernel_name(t.kernels[i as usize].name);
                    demangled = d;
                    (iid, "kernel")
                }
                Rec::Memcpy(i) => (
                    wr.names.iid(copy_name(t.memcpys[i as usize].kind)),
                    "gpu_memcpy",
                ),
                Rec::Memset(_) => (wr.names.iid("Memset"), "gpu_memset"),
                Rec::Sync(i) => (
                    wr.names.iid(sync_name(t.syncs[i as usize].kind)),
                    "cuda_sync",
                ),
                Rec::Api(i) => {
                    let a = &t.api_calls[i as usize];
                    let cat = match a.kind {
                        ApiKind::Runtime => "cuda_runtime",
                        ApiKind::Driver => "cuda_driver",
                    };
                    (wr.plain_iid(a.name), cat)
                }
                Rec::Range(i) => {
                    let r = &t.ranges[i as usize];
                    let cat = match r.domain {
                        RangeDomain::Host => "nvtx",
                        RangeDomain::Gpu => "gpu_user_annotation",
                    };
                    (wr.plain_iid(r.name), cat)
                }
                Rec::Overhead(i) => (wr.plain_iid(t.overheads[i as usize].kind), "cupti_overhead"),
                Rec::Mark(i) => (wr.plain_iid(t.marks[i as usize].name), "nvtx"),
            };
            let cat_iid = wr.cats.iid(cat);
            uint(
                &mut te,
                pf::TE_TYPE,
                if ev.what == 2 {
                    pf::INSTANT
                } else {
                    pf::SLICE_BEGIN
                },
            );
            uint(&mut te, pf::TE_NAME_IID, name_iid);
            uint(&mut te, pf::TE_CATEGORY_IIDS, cat_iid);
            args_buf.clear();
            let mut args = Args {
                b: std::mem::take(&mut args_buf),
                keys: &mut wr.keys,
            };
            match ev.rec {
                Rec::Kernel(i) => {
                    let k = &t.kernels[i as usize];
                    let l = t.launch(k);
                    args.u("device", u64::from(k.device));
                    args.u("stream", k.stream);
                    args.u("correlation", k.correlation_id);
                    for (key, d) in [("grid", l.grid), ("block", l.block)] {
                        dims.clear();
                        // Writing to a String cannot fail.
                        let _ = write!(dims, "[{}, {}, {}]", d[0], d[1], d[2]);
                        args.s(key, &dims);
                    }
                    args.u("registers per thread", u64::from(l.registers_per_thread));
                    args.u("static shared memory", u64::from(l.static_shared_bytes));
                    args.u("dynamic shared memory", u64::from(l.dynamic_shared_bytes));
                    if l.graph_id != 0 {
                        args.u("graph id", u64::from(l.graph_id));
                    }
                    if demangled {
                        args.s("mangled", t.str(k.name));
                    }
                    if let Some(f) = kernel_flows[i as usize] {
                        f.write(&mut te);
                    }
                }
                Rec::Memcpy(i) => {
                    let m = &t.memcpys[i as usize];
                    args.u("device", u64::from(m.device));
                    args.u("stream", m.stream);
                    args.u("correlation", m.correlation_id);
                    args.u("bytes", m.bytes);
                    if m.end_ns > m.start_ns {
                        args.f("GB/s", m.bytes as f64 / (m.end_ns - m.start_ns) as f64);
                    }
                    if let Some(f) = memcpy_flows[i as usize] {
                        f.write(&mut te);
                    }
                }
                Rec::Memset(i) => {
                    let m = &t.memsets[i as usize];
                    args.u("device", u64::from(m.device));
                    args.u("stream", m.stream);
                    args.u("correlation", m.correlation_id);
                    args.u("bytes", m.bytes);
                    args.u("value", u64::from(m.value));
                    if let Some(f) = memset_flows[i as usize] {
                        f.write(&mut te);
                    }
                }
                Rec::Sync(i) => {
                    let y = &t.syncs[i as usize];
                    args.u("device", u64::from(y.device));
                    if let Some(s) = y.stream {
                        args.u("stream", s);
                    }
                    args.u("correlation", y.correlation_id);
                }
                Rec::Api(i) => {
                    let a = &t.api_calls[i as usize];
                    args.u("cbid", u64::from(a.cbid));
                    args.u("correlation", a.correlation_id);
                    if a.return_value != 0 {
                        args.i("return value", i64::from(a.return_value));
                    }
                    let from = flow_starts.partition_point(|x| x.0 < i);
                    let to = flow_starts.partition_point(|x| x.0 <= i);
                    for &(_, f) in &flow_starts[from..to] {
                        fixed64(&mut te, pf::TE_FLOW_IDS, f);
                    }
                }
                // The NVTX domain (`nvtxDomainCreate`'s name, e.g. NCCL), when not the default.
                Rec::Range(i) => {
                    if let Some(d) = &t.ranges[i as usize].nvtx_domain {
                        args.s("domain", d);
                    }
                }
                Rec::Mark(i) => {
                    if let Some(d) = &t.marks[i as usize].nvtx_domain {
                        args.s("domain", d);
                    }
                }
                Rec::Overhead(_) => {}
            }
            te.extend_from_slice(&args.b);
            args_buf = args.b;
        }
        p.clear();
        uint(&mut p, pf::TIMESTAMP, ev.ts);
        uint(&mut p, pf::SEQUENCE_ID, EVENT_SEQUENCE);
        // The first event packet starts the sequence's interning afresh.
        let cleared = if first {
            first = false;
            pf::SEQ_INCREMENTAL_STATE_CLEARED
        } else {
            0
        };
        uint(
            &mut p,
            pf::SEQUENCE_FLAGS,
            cleared | pf::SEQ_NEEDS_INCREMENTAL_STATE,
        );
        if !(wr.names.fresh.is_empty() && wr.cats.fresh.is_empty() && wr.keys.fresh.is_empty()) {
            let fresh = [
                (pf::ID_CATEGORIES, std::mem::take(&mut wr.cats.fresh)),
                (pf::ID_EVENT_NAMES, std::mem::take(&mut wr.names.fresh)),
                (pf::ID_ANNOTATION_NAMES, std::mem::take(&mut wr.keys.fresh)),
            ];
            msg(&mut p, pf::INTERNED_DATA, |d| {
                for (field, list) in &fresh {
                    for (iid, s) in list {
                        msg(d, *field, |m| {
                            uint(m, 1, *iid);
                            bytes(m, 2, s.as_bytes());
                        });
                    }
                }
            });
        }
        bytes(&mut p, pf::TRACK_EVENT, &te);
        let packet = std::mem::take(&mut p);
        wr.packet(&packet)?;
        p = packet;
    }
    for c in samples {
        write_counter_value(&mut wr, counter_uuids[c.track as usize], c)?;
    }
    wr.w.flush()?;
    Ok(Written {
        packets: wr.packets,
        tracks: (tracks.list.len() + counter_uuids.len()) as u64,
        flows,
        inverted,
    })
}

/// The counter tracks of a `cutrace profile` or `cutrace sample` trace
/// ([`crate::counter_tracks`]): one per metric per GPU and source, a child of the GPU's track
/// after its stream rows, named as [`crate::counter_tracks::Track::name`] says. Returns
/// each one's uuid (after every other track's).
fn write_counter_tracks<W: Write>(
    wr: &mut Writer<'_, W>,
    tracks: &Tracks,
    c: &crate::counter_tracks::CounterTimeline,
) -> io::Result<Vec<u64>> {
    let mut uuids = Vec::with_capacity(c.tracks.len());
    let mut rank: HashMap<u64, i64> = HashMap::default();
    for (i, k) in c.tracks.iter().enumerate() {
        let device = k.device;
        let uuid = tracks.list.len() as u64 + 1 + i as u64;
        let parent = tracks
            .by_key
            .get(&(0, u64::from(device), 0, 0))
            .map(|&r| Tracks::uuid(r));
        let name = match parent {
            Some(_) => k.name(wr.t),
            None => format!("GPU {device}: {}", k.name(wr.t)),
        };
        let mut p = Vec::new();
        uint(&mut p, pf::SEQUENCE_ID, DESCRIPTOR_SEQUENCE);
        msg(&mut p, pf::TRACK_DESCRIPTOR, |d| {
            uint(d, pf::TD_UUID, uuid);
            if let Some(parent) = parent {
                uint(d, pf::TD_PARENT_UUID, parent);
            }
            bytes(d, pf::TD_NAME, name.as_bytes());
            msg(d, pf::TD_COUNTER, |_| {});
            if let Some(parent) = parent {
                // After the parent's other children (ranked densely from 0).
                let r = rank.entry(parent).or_insert_with(|| {
                    tracks
                        .list
                        .iter()
                        .filter(|x| x.parent() == Some(parent))
                        .count() as i64
                });
                int(d, pf::TD_SIBLING_ORDER_RANK, (*r).min(i64::from(i32::MAX)));
                *r += 1;
            }
        });
        wr.packet(&p)?;
        uuids.push(uuid);
    }
    Ok(uuids)
}

fn write_counter_value<W: Write>(
    wr: &mut Writer<'_, W>,
    track: u64,
    c: &crate::counter_tracks::Sample,
) -> io::Result<()> {
    let mut p = Vec::with_capacity(40);
    uint(&mut p, pf::TIMESTAMP, c.at_ns);
    uint(&mut p, pf::SEQUENCE_ID, COUNTER_SEQUENCE);
    msg(&mut p, pf::TRACK_EVENT, |te| {
        uint(te, pf::TE_TRACK_UUID, track);
        uint(te, pf::TE_TYPE, pf::COUNTER);
        fixed64(te, pf::TE_DOUBLE_COUNTER_VALUE, c.value.to_bits());
    });
    wr.packet(&p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays the events as trace_processor pairs them (an END closes the innermost open slice
    /// of its track) and returns each record's (start, end).
    fn replay(evs: &[Ev]) -> Vec<(u32, Ns, Ns)> {
        let mut open: HashMap<u32, Vec<(Ns, Rec)>> = HashMap::default();
        let mut out = Vec::new();
        let mut last = 0;
        for e in evs {
            assert!(e.ts >= last);
            last = e.ts;
            let id = |r: Rec| match r {
                Rec::Kernel(i) | Rec::Api(i) | Rec::Mark(i) => i,
                _ => unreachable!(),
            };
            match e.what {
                0 => open.entry(e.track).or_default().push((e.ts, e.rec)),
                1 => {
                    let (s, r) = open.get_mut(&e.track).unwrap().pop().unwrap();
                    assert!(r == e.rec, "END of {} closes {}", id(e.rec), id(r));
                    out.push((id(r), s, e.ts));
                }
                _ => out.push((id(e.rec), e.ts, e.ts)),
            }
        }
        out.sort();
        out
    }

    /// Tracks holding `items`, sorted as the writer sorts them.
    fn tracks(items: Vec<Vec<Item>>) -> Tracks {
        let mut t = Tracks {
            list: items
                .into_iter()
                .map(|items| Track {
                    items,
                    ..Track::new(None, String::new().into(), (0, 0), false)
                })
                .collect(),
            by_key: HashMap::default(),
        };
        sort_items(&mut t);
        t
    }

    #[test]
    fn equal_starts_nest_outer_first_and_back_to_back_slices_do_not_nest() {
        // On one track: 0 and 1 start together (1 inside 0); 2 starts where 1 ends; 3 is
        // zero-length where 2 ends; 4 starts where 0 ends; a mark inside; a second track.
        let items = vec![
            vec![
                (10, 50, Rec::Kernel(1)),
                (10, 100, Rec::Kernel(0)),
                (50, 70, Rec::Kernel(2)),
                (70, 70, Rec::Kernel(3)),
                (100, 120, Rec::Kernel(4)),
                (60, 60, Rec::Mark(9)),
            ],
            vec![(0, 200, Rec::Api(5)), (10, 10, Rec::Api(6))],
        ];
        let t = tracks(items.clone());
        let mut want: Vec<(u32, Ns, Ns)> = items
            .iter()
            .flatten()
            .map(|&(s, e, r)| {
                let i = match r {
                    Rec::Kernel(i) | Rec::Api(i) | Rec::Mark(i) => i,
                    _ => unreachable!(),
                };
                (i, s, e)
            })
            .collect();
        want.sort();
        assert_eq!(replay(&events(&t).collect::<Vec<_>>()), want);
        assert_eq!(replay(&Merge::new(&t).collect::<Vec<_>>()), want);
        let sorted: Vec<Ev> = sorted_events(&t).into_iter().map(Packed::ev).collect();
        assert_eq!(replay(&sorted), want);
    }

    proptest::proptest! {
        /// Tracks of one slice each, in turn or not: the events come in the heap merge's
        /// order, whichever way they are made.
        #[test]
        fn one_slice_tracks_in_turn_give_the_merge_order(
            spec in proptest::collection::vec(
                (
                    proptest::prelude::any::<bool>(),
                    proptest::option::of((0u64..3, 0u64..4)),
                ),
                0..40,
            ),
            in_turn in proptest::prelude::any::<bool>(),
        ) {
            let mut at = 0;
            let items: Vec<Vec<Item>> = spec
                .iter()
                .enumerate()
                .map(|(i, (_, slice))| {
                    slice
                        .map(|(gap, dur)| {
                            at += gap;
                            // In turn: every slice as long (ends in start order); else any.
                            let end = at + if in_turn { 5 } else { dur };
                            (at, end, Rec::Kernel(i as u32))
                        })
                        .into_iter()
                        .collect()
                })
                .collect();
            let mut t = tracks(items);
            for (tk, (gpu, _)) in t.list.iter_mut().zip(&spec) {
                tk.gpu = *gpu;
            }
            // Slices in turn on tracks of one kind: the merge as read must be taken.
            if in_turn && spec.iter().all(|x| x.0 == spec[0].0) {
                proptest::prop_assert!(InTurn::applies(&t));
            }
            let key = |e: &Ev| (e.ts, e.track, e.what, e.rec.split());
            let merged: Vec<_> = Merge::new(&t).map(|e| key(&e)).collect();
            let got: Vec<_> = events(&t).map(|e| key(&e)).collect();
            proptest::prop_assert_eq!(&merged, &got);
            if InTurn::applies(&t) {
                let direct: Vec<_> = InTurn { list: &t.list, begin: 0, end: 0 }
                    .map(|e| key(&e))
                    .collect();
                proptest::prop_assert_eq!(&merged, &direct);
            }
        }
    }

    #[test]
    fn overlapping_kernels_laid_out_are_merged_in_turn() {
        // 100 kernels on one stream all running at once (as bench_lanes makes them), laid out
        // as the writer lays them out: a row each, under the GPU's track, begins and ends in
        // turn.
        let t = Trace {
            strings: vec!["k".into()],
            kernels: (0..100u64)
                .map(|i| cutrace_trace::Kernel {
                    device: 0,
                    context: 1,
                    stream: 7,
                    correlation_id: 0,
                    start_ns: 1_000 + i,
                    end_ns: 1_000_000 + i,
                    name: 0,
                    launch: 0,
                })
                .collect(),
            ..Trace::default()
        };
        let rows = rows::gpu_rows(&t);
        let (mut tracks, _) = layout(&t, &rows);
        sort_items(&mut tracks);
        assert_eq!(tracks.list.len(), 101);
        assert!(InTurn::applies(&tracks));
        let evs: Vec<Ev> = events(&tracks).collect();
        let want: Vec<Ev> = Merge::new(&tracks).collect();
        let key = |e: &Ev| (e.ts, e.track, e.what, e.rec.split());
        assert_eq!(
            evs.iter().map(key).collect::<Vec<_>>(),
            want.iter().map(key).collect::<Vec<_>>()
        );
        assert_eq!(evs.len(), 200);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_track_is_as_small_as_its_doc_says() {
        // 128k overlapping kernels are 128k tracks: a field added here costs 128k times over.
        assert_eq!(std::mem::size_of::<Track>(), 72);
    }

    #[test]
    fn a_packed_event_is_the_event_it_was_made_from() {
        let recs = [
            Rec::Kernel(0),
            Rec::Memcpy(7),
            Rec::Memset(u32::MAX),
            Rec::Sync(1),
            Rec::Api(2),
            Rec::Range(3),
            Rec::Overhead(4),
            Rec::Mark(5),
        ];
        for (k, &rec) in recs.iter().enumerate() {
            for (track, what, gpu) in [
                (0, 0, false),
                (PACKED_TRACKS as u32 - 1, 2, true),
                (5, 1, true),
            ] {
                let p = Packed::new(u64::MAX - k as u64, track, what, gpu, rec);
                let e = p.ev();
                assert_eq!((e.ts, e.track, e.what), (u64::MAX - k as u64, track, what));
                assert_eq!(p.gpu(), gpu);
                assert!(e.rec == rec);
            }
        }
        assert_eq!(std::mem::size_of::<Packed>(), 16);
    }

    proptest::proptest! {
        /// The radix sort gives what a stable comparison sort by (time, host before GPU)
        /// gives: times across all 64 bits, and many ties.
        #[test]
        fn radix_sort_is_a_stable_sort_by_time_then_host_first(
            raw in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::prelude::any::<bool>(), 0u8..3),
                0..400,
            )
        ) {
            let evs: Vec<Packed> = raw
                .iter()
                .enumerate()
                .map(|(i, &(x, gpu, spread))| {
                    let ts = match spread {
                        0 => x,
                        1 => x % 16,
                        _ => 1 << 40 | (x % 300),
                    };
                    Packed::new(ts, i as u32, 0, gpu, Rec::Kernel(i as u32))
                })
                .collect();
            let mut want = evs.clone();
            want.sort_by_key(|e| (e.ts, e.gpu()));
            let got = radix_sort(evs);
            let key = |v: &[Packed]| {
                v.iter().map(|e| (e.ts, e.gpu(), e.ev().track)).collect::<Vec<_>>()
            };
            proptest::prop_assert_eq!(key(&got), key(&want));
        }

        /// The heap merge and the radix sort give the same events in the same order: tracks
        /// of slices one after another (zero-length ones and shared times included), host and
        /// GPU tracks at the same times.
        #[test]
        fn merging_and_sorting_give_one_order(
            spec in proptest::collection::vec(
                (
                    proptest::prelude::any::<bool>(),
                    proptest::collection::vec((0u64..4, 0u64..4), 0..12),
                ),
                0..24,
            )
        ) {
            let mut id = 0;
            let items: Vec<Vec<Item>> = spec
                .iter()
                .map(|(_, slices)| {
                    let mut at = 0;
                    slices
                        .iter()
                        .map(|&(gap, dur)| {
                            at += gap;
                            let it = (at, at + dur, Rec::Kernel(id));
                            at += dur;
                            id += 1;
                            it
                        })
                        .collect()
                })
                .collect();
            let mut t = tracks(items);
            for (tk, (gpu, _)) in t.list.iter_mut().zip(&spec) {
                tk.gpu = *gpu;
            }
            // The GPU flag is the track's; the record tells events of one time apart.
            let key = |e: &Ev| (e.ts, e.track, e.what, e.rec.split());
            let merged: Vec<_> = Merge::new(&t).map(|e| key(&e)).collect();
            let sorted: Vec<_> = sorted_events(&t).into_iter().map(|p| key(&p.ev())).collect();
            proptest::prop_assert_eq!(merged, sorted);
        }
    }

    #[test]
    fn host_rows_keep_crossing_ranges_apart() {
        // NVTX start/end ranges that cross: the second goes to another row; a call inside the
        // first stays on row 0.
        let items = vec![
            (0, 100, Rec::Api(0)),
            (50, 150, Rec::Api(1)),
            (10, 20, Rec::Api(2)),
            (100, 110, Rec::Api(3)),
        ];
        assert_eq!(host_rows(&items), [0, 1, 0, 0]);
    }
}
