//! Where GPU records go in a timeline viewer: rows per stream in which events only nest or
//! follow each other, shared by the Chrome and Perfetto writers; and the Kineto names of
//! synchronizations and copies both writers use.

use std::collections::BTreeSet;

use cutrace_trace::{CopyKind, Ns, RangeDomain, SyncKind, Trace};

/// Rows of a GPU process. Perfetto drops a complete event that partially overlaps another on
/// the same track (`slice_drop_overlapping_complete_event`), and GPU work does overlap: a
/// synchronization waits while the stream's kernels run, kernels of one CUDA graph launch can
/// run at once on their launch stream. So each stream gets rows in which events only nest or
/// follow each other: `tid = slot × base + stream`, where `base` is a power of ten (at least
/// 1,000,000) above every stream id, and the slot is
///
/// * 0: the stream's own row (`tid` = the stream id, as Kineto writes it): kernels, copies,
///   memsets, and GPU annotation ranges (as torch.profiler puts them; one that crosses the
///   stream's work goes to a further row, like work that overlaps);
/// * 1: its synchronizations; work on no stream (context-wide synchronization) uses the stream
///   number `base − 1`;
/// * 2, 4, …: further rows for work that overlaps work already on the stream's row;
/// * 3, 5, …: further rows for overlapping synchronizations.
///
/// In a trace merged from several processes, stream ids carry their part's N·2³²; `tid`s use
/// `N × local_base + the process's own stream id` instead, so they stay far below 2³² (viewers
/// read `tid` as a 32-bit number: Perfetto puts a larger one on its process's row).
///
/// The importer takes devices and streams from `args`, never from these `tid`s.
pub(crate) struct GpuRows {
    pub(crate) base: u128,
    /// A power of ten above every process's own stream id, in a merged trace.
    pub(crate) local_base: Option<u128>,
    pub(crate) kernels: Vec<u16>,
    pub(crate) memcpys: Vec<u16>,
    pub(crate) memsets: Vec<u16>,
    pub(crate) syncs: Vec<u16>,
    /// By range index; only GPU ranges with a stream use theirs.
    pub(crate) ranges: Vec<u16>,
    /// Every (device, stream, slot) used; `None` = no stream.
    pub(crate) lanes: BTreeSet<(u32, Option<u64>, u16)>,
    /// GPU annotation ranges without a stream (only in imported traces) go to `tid` -1.
    pub(crate) streamless_ranges: BTreeSet<u32>,
}

impl GpuRows {
    pub(crate) fn tid(&self, stream: Option<u64>, slot: u16) -> i128 {
        let s = stream.map_or(self.base - 1, |s| self.key(s));
        (u128::from(slot) * self.base + s) as i128
    }

    /// The stream's number within the rows: its id, or in a merged trace
    /// `N × local_base + its process's own id`.
    pub(crate) fn key(&self, stream: u64) -> u128 {
        match self.local_base {
            Some(lb) => u128::from(stream >> 32) * lb + u128::from(stream & 0xffff_ffff),
            None => u128::from(stream),
        }
    }
}

/// The first row where `[start, end]` only nests in or follows what is there, with each row the
/// ends of its events still open at `start` (innermost last); items must come in start order,
/// and at one start the longer first.
pub(crate) fn place(rows: &mut Vec<Vec<Ns>>, start: Ns, end: Ns) -> usize {
    let mut r = 0;
    loop {
        if r == rows.len() {
            rows.push(Vec::new());
        }
        let st = &mut rows[r];
        while st.last().is_some_and(|&top| top <= start) {
            st.pop();
        }
        if st.last().is_none_or(|&top| end <= top) {
            st.push(end);
            return r;
        }
        r += 1;
    }
}

pub(crate) fn gpu_rows(t: &Trace) -> GpuRows {
    // What one sweep item is: which record, and whether it may move off the stream's row.
    const KERNEL: u8 = 0;
    const MEMCPY: u8 = 1;
    const MEMSET: u8 = 2;
    const SYNC: u8 = 3;
    const RANGE: u8 = 4;
    struct Item {
        device: u32,
        stream: Option<u64>,
        family: u8,
        start: Ns,
        end: Ns,
        kind: u8,
        index: u32,
    }
    let item = |device, stream, family, start: Ns, end: Ns, kind, index: usize| Item {
        device,
        stream,
        family,
        start,
        end: end.max(start),
        kind,
        index: index as u32,
    };
    let mut items: Vec<Item> =
        Vec::with_capacity(t.kernels.len() + t.memcpys.len() + t.memsets.len() + t.syncs.len());
    let mut max_stream = 0u64;
    let mut streamless_ranges = BTreeSet::new();
    // Kernels, copies and memsets: stream work of the same shape.
    macro_rules! stream_work {
        ($records:expr, $kind:expr) => {
            for (i, r) in $records.iter().enumerate() {
                max_stream = max_stream.max(r.stream);
                items.push(item(
                    r.device,
                    Some(r.stream),
                    0,
                    r.start_ns,
                    r.end_ns,
                    $kind,
                    i,
                ));
            }
        };
    }
    stream_work!(t.kernels, KERNEL);
    stream_work!(t.memcpys, MEMCPY);
    stream_work!(t.memsets, MEMSET);
    for (i, s) in t.syncs.iter().enumerate() {
        max_stream = max_stream.max(s.stream.unwrap_or(0));
        items.push(item(s.device, s.stream, 1, s.start_ns, s.end_ns, SYNC, i));
    }
    for (i, r) in t.ranges.iter().enumerate() {
        if r.domain != RangeDomain::Gpu {
            continue;
        }
        let device = r.device.unwrap_or(0);
        match r.stream {
            Some(s) => {
                max_stream = max_stream.max(s);
                items.push(item(device, Some(s), 0, r.start_ns, r.end_ns, RANGE, i));
            }
            None => {
                streamless_ranges.insert(device);
            }
        }
    }
    // Merged ids (part N's carry N·2³²): rows are numbered by part and the process's own id.
    let local_base = (t.meta.id_parts.len() > 1).then(|| {
        let max_local = items
            .iter()
            .filter_map(|it| it.stream)
            .map(|s| s & 0xffff_ffff)
            .max()
            .unwrap_or(0);
        let mut lb: u128 = 10;
        while lb <= u128::from(max_local) {
            lb *= 10;
        }
        lb
    });
    let max_key = match local_base {
        Some(lb) => u128::from(max_stream >> 32) * lb + (lb - 1),
        None => u128::from(max_stream),
    };
    let mut base: u128 = 1_000_000;
    while base <= max_key + 1 {
        base *= 10;
    }
    // Within a row, earlier first and, at one start, longer first (a parent before its child).
    items.sort_unstable_by(|a, b| {
        (
            a.device,
            a.stream,
            a.family,
            a.start,
            b.end,
            b.kind == RANGE,
        )
            .cmp(&(
                b.device,
                b.stream,
                b.family,
                b.start,
                a.end,
                a.kind == RANGE,
            ))
    });
    let mut out = GpuRows {
        base,
        local_base,
        kernels: vec![0; t.kernels.len()],
        memcpys: vec![0; t.memcpys.len()],
        memsets: vec![0; t.memsets.len()],
        syncs: vec![0; t.syncs.len()],
        ranges: vec![0; t.ranges.len()],
        lanes: BTreeSet::new(),
        streamless_ranges,
    };
    // Per row, the ends of the events still open at the sweep's time (innermost last).
    let mut rows: Vec<Vec<Ns>> = Vec::new();
    let mut group = None;
    for it in &items {
        let key = (it.device, it.stream, it.family);
        if group != Some(key) {
            group = Some(key);
            rows.iter_mut().for_each(Vec::clear);
        }
        // Annotation ranges too: on the stream's row where they fit (as torch.profiler puts
        // them), on a further row where they cross the stream's work (work launched from two
        // threads), which Perfetto would otherwise drop.
        let row = place(&mut rows, it.start, it.end);
        let slot = u16::try_from(2 * row + usize::from(it.family)).unwrap_or(u16::MAX);
        out.lanes.insert((it.device, it.stream, slot));
        let i = it.index as usize;
        match it.kind {
            KERNEL => out.kernels[i] = slot,
            MEMCPY => out.memcpys[i] = slot,
            MEMSET => out.memsets[i] = slot,
            SYNC => out.syncs[i] = slot,
            RANGE => out.ranges[i] = slot,
            _ => {}
        }
    }
    out
}

/// The Kineto name of a synchronization; the importer maps it back to the same kind.
pub(crate) fn sync_name(k: SyncKind) -> &'static str {
    match k {
        SyncKind::EventSynchronize => "Event Sync",
        SyncKind::StreamWaitEvent => "Stream Wait Event",
        SyncKind::StreamSynchronize => "Stream Sync",
        SyncKind::ContextSynchronize => "Context Sync",
        SyncKind::Unknown => "Unknown Sync",
    }
}

pub(crate) fn copy_name(k: CopyKind) -> &'static str {
    match k {
        CopyKind::HtoD => "\"Memcpy HtoD\"",
        CopyKind::DtoH => "\"Memcpy DtoH\"",
        CopyKind::DtoD => "\"Memcpy DtoD\"",
        CopyKind::HtoH => "\"Memcpy HtoH\"",
        CopyKind::PtoP => "\"Memcpy PtoP\"",
        CopyKind::Unknown => "\"Memcpy unknown\"",
    }
}
