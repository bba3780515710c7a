//! The tracks of a Perfetto trace and the slices on each: a root track per GPU with a child
//! per stream row (the timeline model's rows) and rows of its GPU annotation ranges; per host
//! process a track, and per thread one, with overlap rows where the thread's slices cross.

use std::collections::BTreeMap;

use cutrace_trace::{Ns, Trace};

use super::HashMap;
use crate::rows;
use crate::timeline_model::{self as model, Lane, Rec, StreamLabel, Timeline};

/// A slice (or, for a mark, an instant) on a track: start, end, record.
pub(super) type Item = (Ns, Ns, Rec);

/// A track: 72 bytes, as a trace of 128k overlapping kernels has a track per kernel. Its uuid
/// is its index + 1 ([`Tracks::uuid`]).
pub(super) struct Track {
    /// The parent's uuid; 0: none.
    pub(super) parent: u32,
    /// A GPU track: at equal times its events come after host events, so a flow's start (on the
    /// API call) is read before its end.
    pub(super) gpu: bool,
    pub(super) name: TrackName,
    /// Where the track goes among its parent's children (ranks are made from it, densely).
    pub(super) order: (u64, u64),
    /// (start, end, record) of the slices on this track.
    pub(super) items: Vec<Item>,
}

impl Track {
    pub(super) fn new(parent: Option<u64>, name: TrackName, order: (u64, u64), gpu: bool) -> Track {
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

    pub(super) fn parent(&self) -> Option<u64> {
        (self.parent != 0).then_some(u64::from(self.parent))
    }
}

/// A track's name, and what it stands for: a host process or thread gets Perfetto's process or
/// thread descriptor. A GPU row's name is made when its descriptor is written: a trace of 128k
/// overlapping kernels has 128k rows, and their names would be as many strings held at once.
pub(super) enum TrackName {
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

impl TrackName {
    /// Writes the name to `out`, which it clears first.
    pub(super) fn write(&self, tl: &Timeline<'_>, out: &mut String, label: &mut StreamLabel) {
        out.clear();
        match self {
            TrackName::Text(s) => out.push_str(s),
            &TrackName::Process(p) => out.push_str(&model::process_name(p)),
            &TrackName::Thread { thread, .. } => out.push_str(&model::thread_name(thread)),
            &TrackName::Row {
                stream,
                slot,
                no_stream,
            } => tl.row_name((!no_stream).then_some(stream), slot, label, out),
        }
    }
}

/// Tracks by key, created on first use.
pub(super) struct Tracks {
    pub(super) list: Vec<Track>,
    /// Looked up once per record: hashed, as a tree's lookups grow with the track count (one
    /// track per row of overlapping work).
    pub(super) by_key: HashMap<(u8, u64, u64, u64), u32>,
}

impl Tracks {
    /// A new track that is not looked up by key (a GPU row: see `layout`).
    fn push(&mut self, make: impl FnOnce() -> Track) -> u32 {
        let i = self.list.len() as u32;
        self.list.push(make());
        i
    }

    /// The uuid of track `i`.
    pub(super) fn uuid(i: u32) -> u64 {
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
pub(super) fn host_rows(items: &[Item]) -> Vec<u32> {
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

pub(super) fn pid_of(process: u32) -> i64 {
    if process == 0 {
        UNKNOWN_PID
    } else {
        i64::from(process)
    }
}

/// Lays the records out on tracks. GPUs come first, in device order, then host processes.
pub(super) fn layout(tl: &Timeline<'_>) -> Tracks {
    let rows = &tl.rows;
    let mut tr = Tracks {
        list: Vec::new(),
        by_key: HashMap::default(),
    };
    // One track per GPU row at least: reserved, not grown by copying (a trace of 128k
    // overlapping kernels has 128k rows).
    tr.list.reserve(rows.lanes.len() + 16);
    let mut devices: Vec<u32> = rows.lanes.iter().map(|l| l.0).collect();
    devices.extend(rows.streamless_ranges.iter().copied());
    devices.sort_unstable();
    devices.dedup();
    for d in devices {
        gpu_track(&mut tr, tl.t, d);
    }
    let mut stream_rows = StreamRows::default();
    let mut annotations: BTreeMap<(u32, Option<u64>), Vec<Item>> = BTreeMap::new();
    let mut threads: BTreeMap<(u32, u64), Vec<Item>> = BTreeMap::new();
    for rec in tl.records() {
        let (s, e) = tl.span(rec);
        match tl.lane(rec) {
            Lane::Gpu { device, stream, .. } if matches!(rec, Rec::Range(_)) => annotations
                .entry((device, stream))
                .or_default()
                .push((s, e, rec)),
            Lane::GpuStreamless { device } => annotations
                .entry((device, None))
                .or_default()
                .push((s, e, rec)),
            // Kernels, copies, memsets and syncs: on the stream row the model gives them.
            Lane::Gpu {
                device,
                stream,
                slot,
            } => {
                let l = stream_rows.track(&mut tr, tl.t, device, stream, slot);
                tr.list[l as usize].items.push((s, e, rec));
            }
            Lane::Host { process, thread } => threads
                .entry((process, thread))
                .or_default()
                .push((s, e, rec)),
        }
    }
    annotation_tracks(&mut tr, tl, annotations);
    host_tracks(&mut tr, threads);
    tr
}

/// The root track of a GPU.
fn gpu_track(tr: &mut Tracks, t: &Trace, device: u32) -> u32 {
    tr.get((0, u64::from(device), 0, 0), || {
        Track::new(
            None,
            model::gpu_label(t, device).into(),
            (u64::from(device), 0),
            true,
        )
    })
}

/// The tracks of the stream rows, found without hashing per record: a stream's row tracks are
/// held by slot (dense: slots are 2·row + family), so a record finds its track by an index, not
/// by hashing a key into a table of every row of every stream. Streams are found by hashing,
/// but once per run of records on one stream (the last one found is kept), and each keeps its
/// GPU's track.
#[derive(Default)]
struct StreamRows {
    by_stream: HashMap<(u32, u64), usize>,
    /// Per stream: its GPU's track, and its rows' tracks by slot (`u32::MAX`: none yet).
    streams: Vec<(u32, Vec<u32>)>,
    last: Option<((u32, u64), usize)>,
}

impl StreamRows {
    fn track(
        &mut self,
        tr: &mut Tracks,
        t: &Trace,
        device: u32,
        stream: Option<u64>,
        slot: u32,
    ) -> u32 {
        let s = stream.map_or(u64::MAX, |s| s);
        let at = match self.last {
            Some((k, at)) if k == (device, s) => at,
            _ => {
                let streams = &mut self.streams;
                let at = *self.by_stream.entry((device, s)).or_insert_with(|| {
                    streams.push((gpu_track(tr, t, device), Vec::new()));
                    streams.len() - 1
                });
                self.last = Some(((device, s), at));
                at
            }
        };
        let (root, slots) = &mut self.streams[at];
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
    }
}

/// GPU annotation ranges (torch's `gpu_user_annotation`): rows of their own under their stream
/// (`stream 7 annotations`), apart from the stream's work; ranges without a stream (imported
/// traces only) on rows of a device-wide `annotations` track.
fn annotation_tracks(
    tr: &mut Tracks,
    tl: &Timeline<'_>,
    annotations: BTreeMap<(u32, Option<u64>), Vec<Item>>,
) {
    for ((device, stream), items) in annotations {
        let root = gpu_track(tr, tl.t, device);
        let parent = Some(Tracks::uuid(root));
        let rows = host_rows(&items);
        let base = stream.map_or(model::STREAMLESS_ANNOTATIONS.to_string(), |s| {
            format!("stream {} annotations", tl.t.meta.show_id(s))
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
}

/// Host: per thread, API calls, NVTX ranges and marks, and CUPTI overhead, in rows that nest.
fn host_tracks(tr: &mut Tracks, threads: BTreeMap<(u32, u64), Vec<Item>>) {
    for ((process, thread), mut items) in threads {
        // The process's own track names it (its threads find it by pid).
        tr.get((3, u64::from(process), 0, 0), || {
            Track::new(None, TrackName::Process(process), (0, 0), false)
        });
        // Marks are instants: they take no room in a row.
        let (marks, slices): (Vec<_>, Vec<_>) = items.drain(..).partition(|x| x.2.is_instant());
        let rows = host_rows(&slices);
        // Row 0 is the thread's own track; overlap rows are its children.
        let thread_track = |tr: &mut Tracks, row: u32| {
            let parent =
                (row > 0).then(|| Tracks::uuid(tr.by_key[&(4, u64::from(process), thread, 0)]));
            tr.get((4, u64::from(process), thread, u64::from(row)), || {
                let name = if row == 0 {
                    TrackName::Thread { process, thread }
                } else {
                    format!("{} (overlap {row})", model::thread_name(thread)).into()
                };
                Track::new(parent, name, (u64::from(row), 0), false)
            })
        };
        thread_track(tr, 0);
        for it in marks {
            let l = thread_track(tr, 0);
            tr.list[l as usize].items.push(it);
        }
        for (it, row) in slices.into_iter().zip(rows) {
            let l = thread_track(tr, row);
            tr.list[l as usize].items.push(it);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_track_is_as_small_as_its_doc_says() {
        // 128k overlapping kernels are 128k tracks: a field added here costs 128k times over.
        assert_eq!(std::mem::size_of::<Track>(), 72);
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
