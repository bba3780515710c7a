//! Where GPU records go in a timeline viewer: rows per stream in which events only nest or
//! follow each other, the timeline model's rows (`timeline_model`), which the Chrome and
//! Perfetto writers both draw.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use cutrace_trace::{Ns, RangeDomain, Trace};

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
/// There is no limit on the number of rows (slots are `u32`: at most one row per record). But
/// Perfetto's JSON importer reads `tid` as a 32-bit unsigned number and puts an event whose
/// `tid` does not fit on its process's own row, where overlapping slices are dropped: the
/// Chrome export says how many rows are past that ([`GpuRows::rows_past_u32_tid`]). Perfetto's
/// own format names tracks by 64-bit uuids and has no such limit.
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
    pub(crate) kernels: Vec<u32>,
    pub(crate) memcpys: Vec<u32>,
    pub(crate) memsets: Vec<u32>,
    pub(crate) syncs: Vec<u32>,
    /// By range index; only GPU ranges with a stream use theirs.
    pub(crate) ranges: Vec<u32>,
    /// Every (device, stream, slot) used, sorted, each once; `None` = no stream. A sorted
    /// vector, not a tree: one allocation rather than a node per few of 128k rows.
    pub(crate) lanes: Vec<(u32, Option<u64>, u32)>,
    /// GPU annotation ranges without a stream (only in imported traces) go to `tid` -1.
    pub(crate) streamless_ranges: BTreeSet<u32>,
}

impl GpuRows {
    pub(crate) fn tid(&self, stream: Option<u64>, slot: u32) -> i128 {
        let s = stream.map_or(self.base - 1, |s| self.key(s));
        (u128::from(slot) * self.base + s) as i128
    }

    /// The rows whose `tid` is above `u32::MAX`: Perfetto's JSON importer puts their events on
    /// the process's row (see the type's doc), where those that overlap are dropped.
    pub(crate) fn rows_past_u32_tid(&self) -> usize {
        self.lanes
            .iter()
            .filter(|&&(_, s, slot)| self.tid(s, slot) > i128::from(u32::MAX))
            .count()
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

/// Rows in which events only nest in or follow each other, filled first fit: each event goes
/// to the lowest row where it nests in the innermost event still open there (or where nothing
/// is open). Events must come in start order, and at one start the longer first.
///
/// In O(log rows) per event, whatever the overlap: the rows' innermost open ends sit in a
/// max segment tree (the first row that fits is found by descending it), and the open events'
/// ends in a heap (the events that have ended by a start are closed without visiting every
/// row). Scanning rows one by one was quadratic: 128k overlapping kernels took 11 s. Work that
/// all runs at once, the case that makes many rows, takes a new row without the descent and
/// without touching the tree, which takes such rows in at once when next needed.
#[derive(Default)]
pub(crate) struct Rows {
    /// Per row, its innermost open event in `events` (`NONE`: nothing open).
    open: Vec<u32>,
    /// Every event placed: (end, the event it nests in on its row, or `NONE`). The rows' stacks
    /// of open events are lists through this one vector: one allocation, not one per row.
    events: Vec<(Ns, u32)>,
    /// (end, event, row) of every open event, the earliest end first and, at one end, the
    /// event placed last first. A heap, not an ordered set: an event's entry stays while
    /// events nest in it, so placing one is a push (constant time when ends come in order, as
    /// they do for work that starts and ends in turn), not a removal and an insertion.
    ends: BinaryHeap<Reverse<(Ns, Reverse<u32>, usize)>>,
    /// Max segment tree over `leaves` rows: leaf `i` is row `i`'s innermost open end, `Ns::MAX`
    /// when nothing is open there (every row past the last one used is empty). Up to date for
    /// the rows below `stale_from` only; [`Rows::flush`] brings it up to date (and grows it)
    /// before it is read or changed.
    tree: Vec<Ns>,
    leaves: usize,
    /// The latest end placed so far: no open event ends later.
    max_end: Ns,
    /// Rows below `open.len()` with nothing open.
    empty_rows: usize,
    /// Rows from here on were opened by the sweep of work all running at once and are not in
    /// the tree yet: each would have climbed it to the root (its end is the new maximum), a
    /// log(rows) per event. They go in at once, in time linear in their number, when the tree
    /// is next read or changed ([`Rows::flush`]). `usize::MAX` when none is; 0 at the start
    /// (no rows and no tree yet: the first flush builds it).
    stale_from: usize,
}

const NONE: u32 = u32::MAX;

impl Rows {
    pub(crate) fn new() -> Rows {
        Rows::default()
    }

    /// Rows with room for `events` events.
    pub(crate) fn with_capacity(events: usize) -> Rows {
        Rows {
            events: Vec::with_capacity(events),
            ends: BinaryHeap::with_capacity(events),
            ..Rows::default()
        }
    }

    /// The end of row `row`'s innermost open event.
    fn top(&self, row: usize) -> Option<Ns> {
        let e = self.open[row];
        (e != NONE).then(|| self.events[e as usize].0)
    }

    /// The row `[start, end]` goes to (see the type's doc).
    pub(crate) fn place(&mut self, start: Ns, end: Ns) -> usize {
        // Close what has ended by `start`. A row's open events nest, so their ends do not
        // increase from the outermost to the innermost, and at one end the innermost was placed
        // last: the heap's order pops every row's innermost open event before the ones it
        // nests in.
        while let Some(&Reverse((top, _, row))) = self.ends.peek() {
            if top > start {
                break;
            }
            self.flush();
            self.ends.pop();
            self.open[row] = self.events[self.open[row] as usize].1;
            self.empty_rows += usize::from(self.open[row] == NONE);
            let next = self.top(row);
            self.set(row, next.unwrap_or(Ns::MAX));
        }
        // Work that all runs at once (every event ends after every open one, and no row has
        // emptied) takes a new row: found without descending the tree, so such a sweep costs
        // no log(rows) per event.
        let sweep = self.empty_rows == 0 && end > self.max_end;
        let row = if sweep {
            self.open.len()
        } else {
            self.flush();
            self.first_at_least(end)
        };
        self.max_end = self.max_end.max(end);
        if row == self.open.len() {
            self.open.push(NONE);
        } else if self.open[row] == NONE {
            self.empty_rows -= 1;
        }
        // Rows are placed for at most u32::MAX records (record indices are u32).
        let id = u32::try_from(self.events.len()).unwrap_or(NONE - 1);
        self.events.push((end, self.open[row]));
        self.open[row] = id;
        self.ends.push(Reverse((end, Reverse(id), row)));
        if sweep {
            // A new row past every other, the tree left stale for it (see `stale_from`).
            self.stale_from = self.stale_from.min(row);
        } else {
            self.set(row, end);
        }
        row
    }

    /// Brings the tree up to date: the rows from `stale_from` on go in (their leaves, then each
    /// level's parents of that range, up to the root). After it the tree has a leaf for every
    /// row and one spare empty row past the last used (`first_at_least` finds a new row there);
    /// a sweep of work all at once never reads the tree, so it is grown here, not per row.
    fn flush(&mut self) {
        if self.open.len() + 1 > self.leaves {
            // Rebuilt from every row: nothing is stale after.
            self.grow();
            return;
        }
        let (lo, hi) = (self.stale_from, self.open.len());
        self.stale_from = usize::MAX;
        if lo >= hi {
            return;
        }
        for row in lo..hi {
            self.tree[self.leaves + row] = self.top(row).unwrap_or(Ns::MAX);
        }
        let (mut a, mut b) = ((self.leaves + lo) / 2, (self.leaves + hi - 1) / 2);
        while a >= 1 {
            for i in a..=b {
                self.tree[i] = self.tree[2 * i].max(self.tree[2 * i + 1]);
            }
            (a, b) = (a / 2, b / 2);
        }
    }

    /// The number of rows used.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    fn set(&mut self, row: usize, v: Ns) {
        let mut i = self.leaves + row;
        self.tree[i] = v;
        while i > 1 {
            i /= 2;
            let m = self.tree[2 * i].max(self.tree[2 * i + 1]);
            // Nothing above changes either (a new row beside an empty one stops at once).
            if self.tree[i] == m {
                break;
            }
            self.tree[i] = m;
        }
    }

    /// The lowest row whose innermost open end is at least `end`; there is one, as the spare
    /// empty rows hold `Ns::MAX`.
    fn first_at_least(&self, end: Ns) -> usize {
        let mut i = 1;
        while i < self.leaves {
            i = if self.tree[2 * i] >= end {
                2 * i
            } else {
                2 * i + 1
            };
        }
        i - self.leaves
    }

    /// Enough leaves for every row and a spare (a power of two, at least 16), the rows'
    /// values rebuilt.
    fn grow(&mut self) {
        let leaves = (self.open.len() + 1).next_power_of_two().max(16);
        let mut tree = vec![Ns::MAX; 2 * leaves];
        for row in 0..self.open.len() {
            tree[leaves + row] = self.top(row).unwrap_or(Ns::MAX);
        }
        for i in (1..leaves).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        self.tree = tree;
        self.leaves = leaves;
        // Every row is in the rebuilt tree.
        self.stale_from = usize::MAX;
    }
}

// What one sweep item is: which record.
const KERNEL: u8 = 0;
const MEMCPY: u8 = 1;
const MEMSET: u8 = 2;
const SYNC: u8 = 3;
const RANGE: u8 = 4;

/// One record to place: where it runs, its family (0: work, 1: syncs), its span, and which
/// record it is.
struct SweepItem {
    device: u32,
    stream: Option<u64>,
    family: u8,
    start: Ns,
    end: Ns,
    kind: u8,
    index: u32,
}

/// The rows of every GPU record of `t` (see [`GpuRows`]).
pub(crate) fn gpu_rows(t: &Trace) -> GpuRows {
    let (mut items, max_stream, streamless_ranges) = sweep_items(t);
    let (base, local_base) = bases(t, &items, max_stream);
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
        lanes: Vec::new(),
        streamless_ranges,
    };
    place_all(&items, &mut out);
    out
}

/// The records to place (kernels, copies, memsets, syncs and GPU ranges with a stream), the
/// largest stream id, and the devices of GPU ranges without a stream.
fn sweep_items(t: &Trace) -> (Vec<SweepItem>, u64, BTreeSet<u32>) {
    let item = |device, stream, family, start: Ns, end: Ns, kind, index: usize| SweepItem {
        device,
        stream,
        family,
        start,
        end: end.max(start),
        kind,
        index: index as u32,
    };
    let mut items: Vec<SweepItem> =
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
    (items, max_stream, streamless_ranges)
}

/// The power of ten above every stream's number in the rows, and in a merged trace the one
/// above every process's own stream id (see [`GpuRows`]).
fn bases(t: &Trace, items: &[SweepItem], max_stream: u64) -> (u128, Option<u128>) {
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
    (base, local_base)
}

/// Places the sorted items, group by group (a device's stream and family), first fit.
fn place_all(items: &[SweepItem], out: &mut GpuRows) {
    let mut lanes = Vec::new();
    // The rows of the (device, stream, family) being swept.
    let mut rows = Rows::new();
    let mut group = None;
    for (n, it) in items.iter().enumerate() {
        let key = (it.device, it.stream, it.family);
        if group != Some(key) {
            group = Some(key);
            // Room for the group's events at once: grown by doubling, the copies made the
            // placement of 128k overlapping kernels more than twice as slow as of 64k.
            let len = items[n..]
                .iter()
                .take_while(|x| (x.device, x.stream, x.family) == key)
                .count();
            rows = Rows::with_capacity(len);
        }
        // Annotation ranges too: on the stream's row where they fit (as torch.profiler puts
        // them), on a further row where they cross the stream's work (work launched from two
        // threads), which Perfetto would otherwise drop.
        let row = rows.place(it.start, it.end);
        // At most one row per record, and records are counted in u32 (`Item::index`).
        let slot = u32::try_from(2 * row + usize::from(it.family)).unwrap_or(u32::MAX);
        // Consecutive records mostly share a row: one entry for the run.
        if lanes.last() != Some(&(it.device, it.stream, slot)) {
            lanes.push((it.device, it.stream, slot));
        }
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
    // Mostly in order already (a stream's rows are used from the lowest up): the sort then
    // only checks it.
    lanes.sort_unstable();
    lanes.dedup();
    out.lanes = lanes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The first-fit rule written plainly, one row after the other (quadratic): what `Rows`
    /// must give.
    fn place_by_scanning(rows: &mut Vec<Vec<Ns>>, start: Ns, end: Ns) -> usize {
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

    proptest! {
        #[test]
        fn rows_are_those_of_the_plain_first_fit_rule(
            spans in proptest::collection::vec((0u64..200, 0u64..60), 0..300)
        ) {
            let mut items: Vec<(Ns, Ns)> = spans.iter().map(|&(s, d)| (s, s + d)).collect();
            items.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            let mut fast = Rows::new();
            let mut plain = Vec::new();
            for &(s, e) in &items {
                prop_assert_eq!(fast.place(s, e), place_by_scanning(&mut plain, s, e));
            }
            prop_assert_eq!(fast.len(), plain.len());
        }
    }

    /// `n` kernels on stream 7, all running at once.
    fn overlapping(n: u64) -> Trace {
        Trace {
            strings: vec!["k".into()],
            kernels: (0..n)
                .map(|i| cutrace_trace::Kernel {
                    device: 0,
                    context: 1,
                    stream: 7,
                    correlation_id: 0,
                    start_ns: 1_000 + i,
                    end_ns: 1_000_000_000 + i,
                    name: 0,
                    launch: 0,
                })
                .collect(),
            ..Trace::default()
        }
    }

    /// Rows used to be numbered in 16 bits: past 32,767 rows, kernels shared the last one and
    /// overlapped there (what Perfetto drops), without a word.
    #[test]
    fn forty_thousand_overlapping_kernels_get_a_row_each_and_a_warning() {
        let n = 40_000;
        let t = overlapping(n);
        let rows = gpu_rows(&t);
        let distinct: BTreeSet<u32> = rows.kernels.iter().copied().collect();
        assert_eq!(distinct.len() as u64, n);
        assert_eq!(rows.lanes.len() as u64, n);
        // Stream 7, base 10⁶: rows 0 to 2,147 (slots up to 4,294) have a tid below 2³².
        let past = rows.rows_past_u32_tid();
        assert_eq!(past as u64, n - 2_148);
        let mut json = Vec::new();
        let w = crate::chrome::write_chrome(&mut json, &t, 0).unwrap();
        assert_eq!(w.rows_past_u32_tid, past as u64);
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let notes = v["cutrace"]["export_notes"].to_string();
        assert!(notes.contains(&format!("{past} rows")), "{notes}");
        let p = crate::perfetto::write_perfetto(Vec::new(), &t).unwrap();
        // One track per row, under the GPU's.
        assert!(p.tracks > n, "{} tracks", p.tracks);
    }

    #[test]
    fn overlapping_events_get_a_row_each_and_nested_ones_share() {
        let mut r = Rows::new();
        // 40 kernels all running at once: 40 rows (more than the tree's first 16 leaves).
        for i in 0..40 {
            assert_eq!(r.place(i, 1_000 + i), i as usize);
        }
        // After they end, row 0 again; a child nests in its parent's row.
        assert_eq!(r.place(5_000, 6_000), 0);
        assert_eq!(r.place(5_100, 5_200), 0);
        // Crosses its parent's end: the next row.
        assert_eq!(r.place(5_900, 6_100), 1);
    }
}
