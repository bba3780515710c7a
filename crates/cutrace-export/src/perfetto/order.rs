//! The order a Perfetto trace's events are written in: every track's begins, ends and instants,
//! by time, host events before GPU events at one time (a flow's start, on the API call, must be
//! read before its end on the device record), then by track.

use cutrace_trace::Ns;

use super::tracks::{Item, Track, Tracks};
use crate::timeline_model::Rec;

/// One begin, end or instant, in output order.
#[derive(Clone, Copy)]
pub(super) struct Ev {
    pub(super) ts: Ns,
    pub(super) track: u32,
    /// 0 begin, 1 end, 2 instant.
    pub(super) what: u8,
    pub(super) rec: Rec,
}

/// Tracks below this many may have their events sorted as [`Packed`] (the track takes 25 bits
/// of its tag, see [`events`]); more take the heap merge.
const PACKED_TRACKS: usize = 1 << 25;

/// An event as [`radix_sort`] moves it: 16 bytes where an [`Ev`] is 24, as the sort's passes
/// over every event are the part of the export that grows fastest with their number. `tag`
/// holds the track (below [`PACKED_TRACKS`]), then `what` (2 bits), the GPU flag and the
/// record's kind (4 bits); `index` is the record's index.
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
            tag: track | u32::from(what) << 25 | u32::from(gpu) << 27 | kind << 28,
            index,
        }
    }

    fn gpu(&self) -> bool {
        self.tag >> 27 & 1 == 1
    }

    fn ev(self) -> Ev {
        Ev {
            ts: self.ts,
            track: self.tag & (PACKED_TRACKS as u32 - 1),
            what: (self.tag >> 25 & 3) as u8,
            rec: Rec::join(self.tag >> 28, self.index),
        }
    }
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
pub(super) fn sort_items(tracks: &mut Tracks) {
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
        if rec.is_instant() {
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
pub(super) fn events(tracks: &Tracks) -> Box<dyn Iterator<Item = Ev> + '_> {
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
            if rec.is_instant() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfetto::tracks::layout;
    use crate::perfetto::HashMap;
    use crate::timeline_model::Timeline;
    use cutrace_trace::Trace;

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
        let tl = Timeline::new(&t);
        let mut tracks = layout(&tl);
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
            Rec::HostOp(6),
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
}
