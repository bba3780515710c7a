//! `cutrace convert --perfetto`: a trace as Perfetto's native protobuf (`.pftrace`), which
//! ui.perfetto.dev and trace_processor load without the JSON importer's size limits and at a
//! fraction of the Chrome JSON's size.
//!
//! One packet sequence of TrackEvents (Perfetto's `perfetto_trace.proto`): a track descriptor per
//! GPU (a root track named after the device) with a child track per stream row, and per host
//! process and thread ([`tracks`]); then slices as SLICE_BEGIN/SLICE_END pairs in time order
//! ([`order`]), NVTX marks as instants. What each record is (its lane, category, name, times,
//! arguments and flow) is the timeline model's (`crate::timeline_model`), as in the Chrome
//! export; this module encodes it. Event names, categories and argument names are interned.
//! Times are CUPTI's nanoseconds as they are (TrackEvent timestamps are integer ns, so nothing is
//! rounded). Each device record ends a flow that starts on the API call it joins (the report's
//! correlation join). Rows on a track only nest or follow each other: GPU rows are the model's
//! (`rows::gpu_rows`), host rows are made the same way per thread.

mod order;
mod tracks;
pub(crate) mod wire;

use std::io::{self, Write};

use cutrace_trace::{varint, FxHasher, StrId, Trace};

use crate::timeline_model::{ArgSink, Name, Rec, StreamLabel, Timeline};
use order::{events, sort_items, Ev};
use tracks::{layout, pid_of, Track, TrackName, Tracks};
use wire::{bytes, fixed64, int, msg, pf, uint, Interner};

/// Maps hashed with the Fx scheme: a track is looked up once per record, and 128k tracks (one per
/// row of overlapping work) put SipHash at the top of the profile.
type HashMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

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

/// The flow a device record is on: it ends there, or (when the record starts before its API
/// call) passes through.
#[derive(Clone, Copy)]
struct Flow {
    id: u64,
    ends: bool,
}

impl Flow {
    fn write(self, te: &mut Vec<u8>, flow0: u64) {
        let field = if self.ends {
            pf::TE_TERMINATING_FLOW_IDS
        } else {
            pf::TE_FLOW_IDS
        };
        fixed64(te, field, flow0 + self.id);
    }
}

/// Every flow: one per device record that joins an API call (the model's join), numbered from 1
/// in record order. A record that starts before its call does (clock skew between host and GPU
/// timestamps) would be read first, and trace_processor ignores an end it has not seen start:
/// there the record carries the id as an ordinary flow step, and the arrow is drawn between the
/// two.
struct Flows {
    kernels: Vec<Option<Flow>>,
    memcpys: Vec<Option<Flow>>,
    memsets: Vec<Option<Flow>>,
    /// (API call index, flow id), sorted by call.
    starts: Vec<(u32, u64)>,
}

impl Flows {
    fn new(tl: &Timeline<'_>) -> Self {
        let t = tl.t;
        let mut starts: Vec<(u32, u64)> = Vec::new();
        let mut flow_of = |rec: Rec| -> Option<Flow> {
            let api = tl.launched_by(rec)?;
            let id = starts.len() as u64 + 1;
            starts.push((api as u32, id));
            Some(Flow {
                id,
                ends: t.api_calls[api].start_ns <= tl.span(rec).0,
            })
        };
        let n = |len: usize| 0..len as u32;
        let kernels = n(t.kernels.len())
            .map(|i| flow_of(Rec::Kernel(i)))
            .collect();
        let memcpys = n(t.memcpys.len())
            .map(|i| flow_of(Rec::Memcpy(i)))
            .collect();
        let memsets = n(t.memsets.len())
            .map(|i| flow_of(Rec::Memset(i)))
            .collect();
        starts.sort_unstable();
        Flows {
            kernels,
            memcpys,
            memsets,
            starts,
        }
    }

    fn count(&self) -> u64 {
        self.starts.len() as u64
    }

    /// The flow ids a record's slice carries, each plus `flow0` (a job's earlier ranks' flows).
    fn write(&self, rec: Rec, te: &mut Vec<u8>, flow0: u64) {
        let on = match rec {
            Rec::Kernel(i) => self.kernels[i as usize],
            Rec::Memcpy(i) => self.memcpys[i as usize],
            Rec::Memset(i) => self.memsets[i as usize],
            Rec::Api(i) => {
                let from = self.starts.partition_point(|x| x.0 < i);
                let to = self.starts.partition_point(|x| x.0 <= i);
                for &(_, f) in &self.starts[from..to] {
                    fixed64(te, pf::TE_FLOW_IDS, flow0 + f);
                }
                None
            }
            _ => None,
        };
        if let Some(f) = on {
            f.write(te, flow0);
        }
    }
}

const EVENT_SEQUENCE: u64 = 1;
const DESCRIPTOR_SEQUENCE: u64 = 2;
/// Counter values (no interned data, so no incremental state).
const COUNTER_SEQUENCE: u64 = 3;
/// Packet sequences one trace (one rank of a job) writes on.
pub(crate) const SEQUENCES: u64 = 3;

/// Where one rank goes in a job's trace (`cutrace convert JOB --perfetto`, `crate::job_export`):
/// a process of its own, with its GPUs' tracks as children and its host threads as its threads.
/// Every id the rank writes is moved past those of the ranks before it, so no two ranks share a
/// track, a flow or a packet sequence (whose interned names are the sequence's own).
#[derive(Debug, Clone)]
pub(crate) struct RankScope {
    /// The rank's process track; its own tracks follow (`uuid0 + 1 + index`).
    pub(crate) uuid0: u64,
    /// Added to every flow id.
    pub(crate) flow0: u64,
    /// Its packet sequences are `seq0 + 1 ..= seq0 + SEQUENCES`.
    pub(crate) seq0: u64,
    /// The pid its process and its threads carry in the file (not a host's: two hosts' pids may
    /// be equal; the name says the real one).
    pub(crate) pid: i64,
    /// The process's name (`rank 3 (host a, pid 4242)`).
    pub(crate) name: String,
}

struct Writer<'t, W: Write> {
    w: W,
    t: &'t Trace,
    names: Interner,
    cats: Interner,
    keys: Interner,
    /// Name iids by string id: kernels (as shown, demangled) and everything else (as it is).
    kernel_iids: HashMap<StrId, u64>,
    plain_iids: HashMap<StrId, u64>,
    packets: u64,
    /// A job's rank, or `None` for a trace of its own.
    scope: Option<RankScope>,
}

impl<W: Write> Writer<'_, W> {
    /// Track `i`'s uuid in the file.
    fn uuid(&self, i: u32) -> u64 {
        self.uuid0() + Tracks::uuid(i)
    }

    fn uuid0(&self) -> u64 {
        self.scope.as_ref().map_or(0, |s| s.uuid0)
    }

    fn flow0(&self) -> u64 {
        self.scope.as_ref().map_or(0, |s| s.flow0)
    }

    /// A sequence's id in the file.
    fn seq(&self, seq: u64) -> u64 {
        self.scope.as_ref().map_or(0, |s| s.seq0) + seq
    }

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

    /// The name iid of a record.
    fn name_iid(&mut self, tl: &Timeline<'_>, name: Name) -> u64 {
        match name {
            // Each kernel name is demangled once (by the model) and interned once.
            Name::Kernel(id) => match self.kernel_iids.get(&id) {
                Some(&i) => i,
                None => {
                    let i = self.names.iid(tl.kernel_name(id));
                    self.kernel_iids.insert(id, i);
                    i
                }
            },
            Name::Text(id) => match self.plain_iids.get(&id) {
                Some(&i) => i,
                None => {
                    let i = self.names.iid(self.t.str(id));
                    self.plain_iids.insert(id, i);
                    i
                }
            },
            Name::Fixed(s) => self.names.iid(s),
        }
    }
}

/// Debug annotations of one event, interned by key.
struct Args<'a> {
    b: Vec<u8>,
    keys: &'a mut Interner,
    t: &'a Trace,
    /// Scratch for a grid or block as text.
    dims: String,
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
}

impl ArgSink for Args<'_> {
    fn uint(&mut self, key: &'static str, v: u64) {
        self.head(key, pf::DA_UINT, 0, varint::encoded_len(v) as u64);
        varint::put(&mut self.b, v);
    }
    fn int(&mut self, key: &'static str, v: i64) {
        self.head(key, pf::DA_INT, 0, varint::encoded_len(v as u64) as u64);
        varint::put(&mut self.b, v as u64);
    }
    fn float(&mut self, key: &'static str, v: f64) {
        self.head(key, pf::DA_DOUBLE, 1, 8);
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn text(&mut self, key: &'static str, v: &str) {
        let n = v.len() as u64;
        self.head(key, pf::DA_STRING, 2, varint::encoded_len(n) as u64 + n);
        varint::put(&mut self.b, n);
        self.b.extend_from_slice(v.as_bytes());
    }
    fn string(&mut self, key: &'static str, id: StrId) {
        let t = self.t;
        self.text(key, t.str(id));
    }
    fn dims(&mut self, key: &'static str, v: [u32; 3]) {
        use std::fmt::Write as _;
        let mut s = std::mem::take(&mut self.dims);
        s.clear();
        // Writing to a String cannot fail.
        let _ = write!(s, "[{}, {}, {}]", v[0], v[1], v[2]);
        self.text(key, &s);
        self.dims = s;
    }
}

/// Writes `t` as a Perfetto protobuf trace to `w`.
pub fn write_perfetto<W: Write>(w: W, t: &Trace) -> io::Result<Written> {
    write_scoped(w, t, None)
}

/// Writes `t` to `w` as a trace of its own (`scope` `None`) or as one rank of a job's trace
/// ([`RankScope`]); `Written::tracks` is the count of uuids it took after `scope.uuid0`.
pub(crate) fn write_scoped<W: Write>(
    w: W,
    t: &Trace,
    scope: Option<RankScope>,
) -> io::Result<Written> {
    let tl = Timeline::new(t);
    let mut tracks = layout(&tl);
    sort_items(&mut tracks);
    let flows = Flows::new(&tl);
    let mut wr = Writer {
        w,
        t,
        names: Interner::default(),
        cats: Interner::default(),
        keys: Interner::default(),
        kernel_iids: HashMap::default(),
        plain_iids: HashMap::default(),
        packets: 0,
        scope,
    };
    write_rank_process(&mut wr)?;
    write_descriptors(&mut wr, &tl, &tracks)?;
    let counters = crate::counter_tracks::counter_timeline(t);
    let counter_uuids = write_counter_tracks(&mut wr, &tracks, &counters)?;
    let mut samples = counters.samples.iter().peekable();
    let mut ep = EventPacket::default();
    for ev in events(&tracks) {
        while let Some(c) = samples.next_if(|c| c.at_ns <= ev.ts) {
            write_counter_value(&mut wr, counter_uuids[c.track as usize], c)?;
        }
        ep.write(&mut wr, &tl, &flows, ev)?;
    }
    for c in samples {
        write_counter_value(&mut wr, counter_uuids[c.track as usize], c)?;
    }
    wr.w.flush()?;
    Ok(Written {
        packets: wr.packets,
        tracks: (tracks.list.len() + counter_uuids.len()) as u64,
        flows: flows.count(),
        inverted: tl.inverted,
    })
}

/// A job's rank: its process track (uuid `uuid0`), which its GPUs' tracks are children of.
fn write_rank_process<W: Write>(wr: &mut Writer<'_, W>) -> io::Result<()> {
    let Some(s) = wr.scope.clone() else {
        return Ok(());
    };
    let mut p = Vec::new();
    uint(&mut p, pf::SEQUENCE_ID, s.seq0 + DESCRIPTOR_SEQUENCE);
    msg(&mut p, pf::TRACK_DESCRIPTOR, |d| {
        uint(d, pf::TD_UUID, s.uuid0);
        msg(d, pf::TD_PROCESS, |m| {
            int(m, pf::PD_PID, s.pid);
            bytes(m, pf::PD_NAME, s.name.as_bytes());
        });
        uint(d, pf::TD_CHILD_ORDERING, pf::ORDERING_EXPLICIT);
    });
    wr.packet(&p)
}

/// Each track's rank among its parent's children (dense, by [`Track::order`]) and which tracks
/// have children: `from[p]..from[p + 1]` are track `p`'s children. Children are grouped under
/// their parent by counting (a parent is a track too, at index uuid − 1), not in a hash table
/// keyed by parent: a GPU with 128k rows has 128k children.
fn sibling_ranks(tracks: &Tracks) -> (Vec<u32>, Vec<u32>) {
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
    (from, rank)
}

/// The track descriptors, on a sequence of their own: on the events' sequence, the last thread
/// descriptor would become that sequence's default thread, and trace_processor would tie every
/// GPU event to it. Siblings are ranked explicitly ([`sibling_ranks`]). Built in buffers reused
/// from track to track (one per message level): 128k rows are 128k descriptors.
fn write_descriptors<W: Write>(
    wr: &mut Writer<'_, W>,
    tl: &Timeline<'_>,
    tracks: &Tracks,
) -> io::Result<()> {
    let (from, rank) = sibling_ranks(tracks);
    let (mut p, mut d, mut m) = (Vec::new(), Vec::new(), Vec::new());
    let mut name = String::new();
    let mut label = StreamLabel::default();
    // In a job, the rank is the process: its GPUs are its children (in device order, as laid
    // out first), its threads carry its pid, and a host process of its own is no track.
    let job = wr.scope.as_ref().map(|s| (s.uuid0, s.pid));
    let processes = tracks
        .list
        .iter()
        .filter(|tk| matches!(tk.name, TrackName::Process(_)))
        .count();
    let mut gpu_roots = 0i64;
    for (i, tk) in tracks.list.iter().enumerate() {
        if job.is_some() && matches!(tk.name, TrackName::Process(_)) {
            continue;
        }
        tk.name.write(tl, &mut name, &mut label);
        if let (Some(_), TrackName::Thread { process, .. }, 2..) = (job, &tk.name, processes) {
            // Threads of several host processes under one rank: each says which.
            name.push_str(&format!(" (pid {process})"));
        }
        let name = name.as_bytes();
        d.clear();
        uint(&mut d, pf::TD_UUID, wr.uuid(i as u32));
        if let Some(parent) = tk.parent() {
            uint(&mut d, pf::TD_PARENT_UUID, wr.uuid0() + parent);
        }
        m.clear();
        match tk.name {
            TrackName::Process(process) => {
                int(&mut m, pf::PD_PID, pid_of(process));
                bytes(&mut m, pf::PD_NAME, name);
                bytes(&mut d, pf::TD_PROCESS, &m);
            }
            TrackName::Thread { process, thread } => {
                let pid = job.map_or_else(|| pid_of(process), |j| j.1);
                int(&mut m, pf::THD_PID, pid);
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
        } else if let (Some((uuid0, _)), true) = (job, tk.gpu) {
            uint(&mut d, pf::TD_PARENT_UUID, uuid0);
            int(&mut d, pf::TD_SIBLING_ORDER_RANK, gpu_roots);
            gpu_roots += 1;
        }
        p.clear();
        uint(&mut p, pf::SEQUENCE_ID, wr.seq(DESCRIPTOR_SEQUENCE));
        bytes(&mut p, pf::TRACK_DESCRIPTOR, &d);
        wr.packet(&p)?;
    }
    Ok(())
}

/// The buffers one event's packet is built in, reused by every event.
#[derive(Default)]
struct EventPacket {
    p: Vec<u8>,
    te: Vec<u8>,
    args: Vec<u8>,
    dims: String,
    /// Whether the first event packet was written (it starts the sequence's interning afresh).
    started: bool,
}

impl EventPacket {
    /// Writes one begin, end or instant as a TrackEvent packet on the events' sequence, with
    /// the interned data it is the first to use.
    fn write<W: Write>(
        &mut self,
        wr: &mut Writer<'_, W>,
        tl: &Timeline<'_>,
        flows: &Flows,
        ev: Ev,
    ) -> io::Result<()> {
        let te = &mut self.te;
        te.clear();
        // A track's uuid is its index + 1 (`Tracks::uuid`), after a job's earlier ranks'.
        uint(te, pf::TE_TRACK_UUID, wr.uuid(ev.track));
        if ev.what == 1 {
            uint(te, pf::TE_TYPE, pf::SLICE_END);
        } else {
            let rec = ev.rec;
            let name_iid = wr.name_iid(tl, tl.name(rec));
            let cat_iid = wr.cats.iid(tl.category(rec));
            let kind = if ev.what == 2 {
                pf::INSTANT
            } else {
                pf::SLICE_BEGIN
            };
            uint(te, pf::TE_TYPE, kind);
            uint(te, pf::TE_NAME_IID, name_iid);
            uint(te, pf::TE_CATEGORY_IIDS, cat_iid);
            flows.write(rec, te, wr.flow0());
            self.args.clear();
            let mut args = Args {
                b: std::mem::take(&mut self.args),
                keys: &mut wr.keys,
                t: tl.t,
                dims: std::mem::take(&mut self.dims),
            };
            tl.args(rec, &mut args);
            te.extend_from_slice(&args.b);
            self.args = args.b;
            self.dims = args.dims;
        }
        let p = &mut self.p;
        p.clear();
        uint(p, pf::TIMESTAMP, ev.ts);
        uint(p, pf::SEQUENCE_ID, wr.seq(EVENT_SEQUENCE));
        let cleared = if self.started {
            0
        } else {
            self.started = true;
            pf::SEQ_INCREMENTAL_STATE_CLEARED
        };
        uint(
            p,
            pf::SEQUENCE_FLAGS,
            cleared | pf::SEQ_NEEDS_INCREMENTAL_STATE,
        );
        if !(wr.names.fresh.is_empty() && wr.cats.fresh.is_empty() && wr.keys.fresh.is_empty()) {
            let fresh = [
                (pf::ID_CATEGORIES, std::mem::take(&mut wr.cats.fresh)),
                (pf::ID_EVENT_NAMES, std::mem::take(&mut wr.names.fresh)),
                (pf::ID_ANNOTATION_NAMES, std::mem::take(&mut wr.keys.fresh)),
            ];
            msg(p, pf::INTERNED_DATA, |d| {
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
        bytes(p, pf::TRACK_EVENT, te);
        wr.packet(p)
    }
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
    let uuid0 = wr.uuid0();
    // In a job, a counter track of a GPU with no track of its own is a child of the rank.
    let job = wr.scope.is_some().then_some(uuid0);
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
        uint(&mut p, pf::SEQUENCE_ID, wr.seq(DESCRIPTOR_SEQUENCE));
        msg(&mut p, pf::TRACK_DESCRIPTOR, |d| {
            uint(d, pf::TD_UUID, uuid0 + uuid);
            match (parent, job) {
                (Some(parent), _) => uint(d, pf::TD_PARENT_UUID, uuid0 + parent),
                (None, Some(rank)) => uint(d, pf::TD_PARENT_UUID, rank),
                (None, None) => {}
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
        uuids.push(uuid0 + uuid);
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
    uint(&mut p, pf::SEQUENCE_ID, wr.seq(COUNTER_SEQUENCE));
    msg(&mut p, pf::TRACK_EVENT, |te| {
        uint(te, pf::TE_TRACK_UUID, track);
        uint(te, pf::TE_TYPE, pf::COUNTER);
        fixed64(te, pf::TE_DOUBLE_COUNTER_VALUE, c.value.to_bits());
    });
    wr.packet(&p)
}
