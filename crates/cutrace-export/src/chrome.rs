//! `cutrace convert --chrome`: a trace as Chrome Trace Event JSON in the shape torch.profiler
//! (Kineto) writes, so Perfetto UI, chrome://tracing, Holistic Trace Analysis and TensorBoard open
//! it, and cutrace's own Kineto importer reads it back to the same records.
//!
//! Written as a stream, one event per line (millions of records never become one JSON value).
//! `ts` and `dur` are microseconds with exactly three decimals, printed from the integer
//! nanoseconds by integer arithmetic: the importer parses them back to the same nanoseconds.
//! The mapping is documented in docs/EXPORTS.md ("Chrome Trace Event JSON").

use std::collections::BTreeSet;
use std::io::{self, Write};

use cutrace_trace::kineto::vocab::{self, cat, device, dist, top};
use cutrace_trace::{ExportMeta, Ns, SourceFormat, StrId, Trace, TraceMeta};

use crate::timeline_model::{self as model, ArgSink, Lane, Name, Rec, StreamLabel, Timeline};

/// What was written, for the command's summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Every element of `traceEvents` (records, flow events, metadata).
    pub events: u64,
    /// Flow arrows: one `"s"` per launching API call (each with one `"f"` per device record).
    pub flows: u64,
    /// Records that end before they start, written with `"dur": 0`.
    pub inverted: u64,
    /// GPU rows (overlapping work of one stream) whose `tid` is above 2³²−1: Perfetto's JSON
    /// importer reads `tid` as a 32-bit number and shows their events on the process's row,
    /// dropping those that overlap. With stream ids below 10⁶ that is past about 2,100
    /// overlapping rows of one stream. Perfetto's own format (`--perfetto`) has no such limit.
    pub rows_past_u32_tid: u64,
}

/// `ns` as microseconds with exactly three decimals (`1796022092907496988` →
/// `1796022092907496.988`), by integer arithmetic.
#[cfg(test)]
fn us_text(ns: Ns) -> String {
    let mut b = Vec::with_capacity(24);
    push_us(&mut b, ns);
    String::from_utf8(b).expect("digits are ASCII")
}

fn push_u64(b: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    b.extend_from_slice(&tmp[i..]);
}

fn push_us(b: &mut Vec<u8>, ns: Ns) {
    push_u64(b, ns / 1000);
    let f = ns % 1000;
    b.extend_from_slice(&[
        b'.',
        b'0' + (f / 100) as u8,
        b'0' + (f / 10 % 10) as u8,
        b'0' + (f % 10) as u8,
    ]);
}

/// A host `pid`: the process id, or -1 where the trace does not know it (as Kineto writes for
/// CUPTI's overhead records), so it never lands on GPU 0's lane.
fn push_pid(b: &mut Vec<u8>, process: u32) {
    if process == 0 {
        b.extend_from_slice(b"-1");
    } else {
        push_u64(b, u64::from(process));
    }
}

fn push_i128(b: &mut Vec<u8>, v: i128) {
    if v < 0 {
        b.push(b'-');
    }
    match u64::try_from(v.unsigned_abs()) {
        Ok(u) => push_u64(b, u),
        Err(_) => {
            let _ = write!(b, "{}", v.unsigned_abs());
        }
    }
}

/// JSON-escaped, quoted names, made once per interned string.
struct Names<'t> {
    t: &'t Trace,
    /// By string id; the last slot serves ids outside the table (`"?"`).
    plain: Vec<Option<Box<[u8]>>>,
    /// Kernel names as shown (demangled).
    kernel: Vec<Option<Box<[u8]>>>,
}

fn quoted(s: &str) -> Box<[u8]> {
    serde_json::to_vec(s)
        .expect("a string always serializes")
        .into_boxed_slice()
}

impl<'t> Names<'t> {
    fn new(t: &'t Trace) -> Self {
        let n = t.strings.len() + 1;
        Names {
            t,
            plain: vec![None; n],
            kernel: vec![None; n],
        }
    }

    fn slot(&self, id: StrId) -> usize {
        (id as usize).min(self.t.strings.len())
    }

    fn plain(&mut self, id: StrId) -> &[u8] {
        let i = self.slot(id);
        let t = self.t;
        self.plain[i].get_or_insert_with(|| quoted(t.str(id)))
    }

    /// Appends a record's name, quoted.
    fn push(&mut self, b: &mut Vec<u8>, tl: &Timeline<'_>, name: Name) {
        match name {
            Name::Text(id) => b.extend_from_slice(self.plain(id)),
            Name::Kernel(id) => {
                let i = self.slot(id);
                b.extend_from_slice(
                    self.kernel[i].get_or_insert_with(|| quoted(tl.kernel_name(id))),
                );
            }
            // cutrace's own names need no escapes.
            Name::Fixed(s) => {
                debug_assert!(!s.contains(['"', '\\']));
                b.push(b'"');
                b.extend_from_slice(s.as_bytes());
                b.push(b'"');
            }
        }
    }
}

/// Streams events into `traceEvents`: `,\n` between them (one event per line, which also lets
/// the importer scan the file on several threads).
struct Events<'w, W: Write> {
    w: &'w mut W,
    b: Vec<u8>,
    n: u64,
}

impl<W: Write> Events<'_, W> {
    /// Starts the next event in the line buffer.
    fn begin(&mut self) -> &mut Vec<u8> {
        self.b.clear();
        self.b
            .extend_from_slice(if self.n == 0 { b"\n" } else { b",\n" });
        &mut self.b
    }

    fn end(&mut self) -> io::Result<()> {
        self.n += 1;
        self.w.write_all(&self.b)
    }
}

/// A lane, as a job's file numbers it ([`RankLanes`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum LaneKey {
    Host(u32, u64),
    Gpu(u32, Option<u64>, u32),
    Streamless(u32),
}

impl From<Lane> for LaneKey {
    fn from(l: Lane) -> LaneKey {
        match l {
            Lane::Host { process, thread } => LaneKey::Host(process, thread),
            Lane::Gpu {
                device,
                stream,
                slot,
            } => LaneKey::Gpu(device, stream, slot),
            Lane::GpuStreamless { device } => LaneKey::Streamless(device),
        }
    }
}

/// One rank of a job's Chrome file (`cutrace convert JOB --chrome`, `crate::job_export`): a
/// process of its own, `pid` (the file's number for it, not a host's: two hosts' pids may be
/// equal), with every lane of the rank (its host threads, then its GPUs' stream rows, in the
/// one-trace export's order) a thread numbered from 1, so that no two lanes of its GPUs and
/// threads share a `tid` and every `tid` fits the 32 bits Perfetto's JSON importer reads. Each
/// lane's name says what it is (`thread 140…`, `GPU 0: NVIDIA H100 stream 7`).
pub(crate) struct RankLanes {
    pid: u64,
    /// The process's name (`rank 3 (host a, pid 4242)`) and labels (the clock).
    name: String,
    labels: String,
    /// Where the process sorts among the ranks (its place in the job, from 0).
    sort: u64,
    tids: std::collections::HashMap<LaneKey, u64>,
}

/// A rank's flow ids are its correlation ids plus its place in the job times 2⁴⁰ (viewers join
/// `"s"` and `"f"` events of every process by id): distinct for correlation ids below 2⁴⁰ (a
/// trace merged from fewer than 256 processes), and exact in a double for 8,192 ranks.
const RANK_FLOW_STRIDE: u64 = 1 << 40;

impl RankLanes {
    pub(crate) fn new(pid: u64, name: String, labels: String, sort: u64) -> RankLanes {
        RankLanes {
            pid,
            name,
            labels,
            sort,
            tids: Default::default(),
        }
    }

    /// Numbers the lanes of `tl`'s trace.
    fn number(&mut self, tl: &Timeline<'_>) {
        let mut keys: Vec<LaneKey> = tl
            .host_lanes
            .iter()
            .map(|&(p, th)| LaneKey::Host(p, th))
            .collect();
        keys.extend(
            tl.t.memory
                .iter()
                .map(|m| LaneKey::Host(m.process, m.thread)),
        );
        keys.sort_unstable();
        keys.dedup();
        keys.extend(
            tl.rows
                .lanes
                .iter()
                .map(|&(d, s, slot)| LaneKey::Gpu(d, s, slot)),
        );
        keys.extend(
            tl.rows
                .streamless_ranges
                .iter()
                .map(|&d| LaneKey::Streamless(d)),
        );
        for k in keys {
            let n = self.tids.len() as u64 + 1;
            self.tids.entry(k).or_insert(n);
        }
    }
}

/// `,"pid":…,"tid":…` of a lane: a GPU's process is the device, its rows' `tid`s are
/// [`crate::rows::GpuRows::tid`]; a host lane is the process and thread. In a job's file, the
/// rank's process and the lane's number there ([`RankLanes`]).
fn push_lane(b: &mut Vec<u8>, tl: &Timeline<'_>, job: Option<&RankLanes>, lane: Lane) {
    b.extend_from_slice(b",\"pid\":");
    if let Some(r) = job {
        push_u64(b, r.pid);
        b.extend_from_slice(b",\"tid\":");
        // Every lane was numbered ([`RankLanes::number`]); 0 is the process's own lane.
        push_u64(b, r.tids.get(&LaneKey::from(lane)).copied().unwrap_or(0));
        return;
    }
    match lane {
        Lane::Gpu {
            device,
            stream,
            slot,
        } => {
            push_u64(b, u64::from(device));
            b.extend_from_slice(b",\"tid\":");
            push_i128(b, tl.rows.tid(stream, slot));
        }
        Lane::GpuStreamless { device } => {
            push_u64(b, u64::from(device));
            b.extend_from_slice(b",\"tid\":-1");
        }
        Lane::Host { process, thread } => {
            push_pid(b, process);
            b.extend_from_slice(b",\"tid\":");
            push_u64(b, thread);
        }
    }
}

/// A record's `args` as JSON members: `,"args":{` before the first, nothing at all when there
/// are none.
struct JsonArgs<'a, 't> {
    b: &'a mut Vec<u8>,
    names: &'a mut Names<'t>,
    open: bool,
}

impl JsonArgs<'_, '_> {
    fn key(&mut self, key: &str) {
        self.b
            .extend_from_slice(if self.open { b",\"" } else { b",\"args\":{\"" });
        self.open = true;
        self.b.extend_from_slice(key.as_bytes());
        self.b.extend_from_slice(b"\":");
    }

    fn close(self) {
        if self.open {
            self.b.push(b'}');
        }
    }
}

impl ArgSink for JsonArgs<'_, '_> {
    fn uint(&mut self, key: &'static str, v: u64) {
        self.key(key);
        push_u64(self.b, v);
    }
    fn int(&mut self, key: &'static str, v: i64) {
        self.key(key);
        push_i128(self.b, i128::from(v));
    }
    fn float(&mut self, key: &'static str, v: f64) {
        self.key(key);
        // Finite; Rust prints an f64 without an exponent: valid JSON.
        let _ = write!(self.b, "{v}");
    }
    fn text(&mut self, key: &'static str, v: &str) {
        self.key(key);
        self.b.extend_from_slice(&quoted(v));
    }
    fn string(&mut self, key: &'static str, id: StrId) {
        self.key(key);
        self.b.extend_from_slice(self.names.plain(id));
    }
    fn dims(&mut self, key: &'static str, v: [u32; 3]) {
        self.key(key);
        self.b.push(b'[');
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                self.b.push(b',');
            }
            push_u64(self.b, u64::from(*x));
        }
        self.b.push(b']');
    }
}

/// One record as its event: `{"ph":"X",…,"ts":…,"dur":…,"args":{…}}` (`"ph":"i"` with
/// `"s":"t"` for an instant).
fn write_record<W: Write>(
    ev: &mut Events<'_, W>,
    tl: &Timeline<'_>,
    (names, job): (&mut Names<'_>, Option<&RankLanes>),
    rec: Rec,
) -> io::Result<()> {
    let b = ev.begin();
    b.extend_from_slice(if rec.is_instant() {
        b"{\"ph\":\"i\",\"cat\":\""
    } else {
        b"{\"ph\":\"X\",\"cat\":\""
    });
    b.extend_from_slice(tl.category(rec).as_bytes());
    b.extend_from_slice(b"\",\"name\":");
    names.push(b, tl, tl.name(rec));
    let lane = tl.lane(rec);
    push_lane(b, tl, job, lane);
    let (start, end) = tl.span(rec);
    b.extend_from_slice(b",\"ts\":");
    push_us(b, start);
    if rec.is_instant() {
        b.extend_from_slice(b",\"s\":\"t\"");
    } else {
        b.extend_from_slice(b",\"dur\":");
        push_us(b, end - start);
    }
    close_with_args(b, names, |a| tl.args(rec, a));
    ev.end()
}

/// An event's `args` (`,"args":{…}`, nothing when `fill` adds none), then its closing brace.
fn close_with_args<'t>(
    b: &mut Vec<u8>,
    names: &mut Names<'t>,
    fill: impl FnOnce(&mut JsonArgs<'_, 't>),
) {
    let mut args = JsonArgs {
        b: &mut *b,
        names,
        open: false,
    };
    fill(&mut args);
    args.close();
    b.push(b'}');
}

/// The flow events of a record: the `"s"` start on a call that launched device records (one
/// per call, with the correlation id as the flow's id), the `"f"` end (`"bp":"e"`) on each
/// device record that joins a call. Returns the flows started.
fn write_flow<W: Write>(
    ev: &mut Events<'_, W>,
    tl: &Timeline<'_>,
    job: Option<&RankLanes>,
    rec: Rec,
) -> io::Result<u64> {
    let t = tl.t;
    let (call, ph): (usize, &[u8]) = match rec {
        Rec::Api(i) if tl.launches(i as usize) => (i as usize, b"s"),
        _ => match tl.launched_by(rec) {
            Some(call) => (call, b"f"),
            None => return Ok(0),
        },
    };
    let b = ev.begin();
    b.extend_from_slice(b"{\"ph\":\"");
    b.extend_from_slice(ph);
    b.extend_from_slice(b"\",\"id\":");
    let flow0 = job.map_or(0, |r| r.sort.wrapping_mul(RANK_FLOW_STRIDE));
    push_u64(b, t.api_calls[call].correlation_id.wrapping_add(flow0));
    push_lane(b, tl, job, tl.lane(rec));
    b.extend_from_slice(b",\"ts\":");
    push_us(b, tl.span(rec).0);
    b.extend_from_slice(b",\"cat\":\"");
    b.extend_from_slice(cat::FLOW.as_bytes());
    b.extend_from_slice(b"\",\"name\":\"");
    b.extend_from_slice(cat::FLOW.as_bytes());
    b.extend_from_slice(if ph == b"s" {
        b"\"}"
    } else {
        b"\",\"bp\":\"e\"}"
    });
    ev.end()?;
    Ok(u64::from(ph == b"s"))
}

fn source_label(m: &TraceMeta) -> &'static str {
    match m.source {
        SourceFormat::Native => "native",
        SourceFormat::Kineto => "kineto",
    }
}

/// The top-level `"cutrace"` member: what the trace says about itself, read back by the importer
/// ([`ExportMeta::restore`]).
fn cutrace_member(tl: &Timeline<'_>, base_ns: Ns) -> ExportMeta {
    let m = &tl.t.meta;
    let mut notes: Vec<String> = vec![
        "ts and dur are microseconds with exactly 3 decimals: the trace's integer nanoseconds; ts \
         counts from baseTimeNanoseconds (time_base_ns here), a whole second before the first \
         record"
            .into(),
    ];
    if tl.inverted > 0 {
        notes.push(format!(
            "{} records end before they start; they are written with \"dur\": 0",
            tl.inverted
        ));
    }
    let past = tl.rows.rows_past_u32_tid();
    if past > 0 {
        notes.push(format!(
            "{past} rows of overlapping GPU work have a tid above 2^32-1: Perfetto's JSON \
             importer shows their events on the GPU's process row and drops those that overlap \
             there; cutrace convert --perfetto writes every row as its own track"
        ));
    }
    // Metadata and flow events of the source are written anew; anything else unmodelled is lost.
    let lost: Vec<&(String, u64)> = m
        .skipped_events
        .iter()
        .filter(|(c, _)| !matches!(c.as_str(), "ph=M" | "ph=s" | "ph=f"))
        .collect();
    if !lost.is_empty() {
        let total: u64 = lost.iter().map(|(_, n)| n).sum();
        let list: Vec<String> = lost.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        notes.push(format!(
            "{total} events of the source that cutrace does not model are not in this file ({})",
            list.join(", ")
        ));
    }
    ExportMeta {
        version: Some(env!("CARGO_PKG_VERSION").into()),
        source: Some(source_label(m).into()),
        source_paths: Some(m.paths.clone()),
        export_notes: Some(notes),
        // Stream and correlation ids of part N (N ≥ 1) carry N·2³² (args and tids alike): the
        // pid behind each N, so a report on this file names processes as one on the original.
        id_parts: Some(m.id_parts.clone()),
        time_base_ns: Some(base_ns),
        ..ExportMeta::common(m)
    }
}

fn device_properties(m: &TraceMeta) -> serde_json::Value {
    let devs: Vec<serde_json::Value> = m
        .devices
        .iter()
        .map(|d| {
            let mut o = serde_json::Map::new();
            o.insert(device::ID.into(), d.device.into());
            o.insert(device::NAME.into(), d.name.clone().into());
            if let Some(b) = d.global_memory_bytes {
                o.insert(device::TOTAL_GLOBAL_MEM.into(), b.into());
            }
            if let Some((major, minor)) = d.compute_capability {
                o.insert(device::COMPUTE_MAJOR.into(), major.into());
                o.insert(device::COMPUTE_MINOR.into(), minor.into());
            }
            if let Some(n) = d.sm_count {
                o.insert(device::NUM_SMS.into(), n.into());
            }
            if let Some(u) = &d.uuid {
                o.insert(device::UUID.into(), u.clone().into());
            }
            serde_json::Value::Object(o)
        })
        .collect();
    serde_json::Value::Array(devs)
}

/// `{"ph":"M","name":<what>,"pid":…,"tid":…,"args":{<key>:<value>}}`.
fn meta_event(
    ev: &mut Events<'_, impl Write>,
    what: &str,
    lane: impl Fn(&mut Vec<u8>),
    key: &str,
    value: &(impl serde::Serialize + ?Sized),
) -> io::Result<()> {
    let b = ev.begin();
    b.extend_from_slice(b"{\"ph\":\"M\",\"name\":\"");
    b.extend_from_slice(what.as_bytes());
    b.push(b'"');
    lane(b);
    b.extend_from_slice(b",\"args\":{\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":");
    serde_json::to_writer(&mut *b, value).map_err(io::Error::other)?;
    b.extend_from_slice(b"}}");
    ev.end()
}

/// The time base an export is written against: the whole second strictly before the trace's
/// first non-zero start (0 when there is none). Strictly before, so every real timestamp is
/// written as a positive offset and 0 keeps meaning "not collected" (see [`to_base`]).
pub fn time_base(t: &Trace) -> Ns {
    time_base_of(t.earliest_ns())
}

/// [`time_base`] of a trace (or a job) whose first non-zero start is `earliest`.
pub fn time_base_of(earliest: Option<Ns>) -> Ns {
    earliest
        .map(|e| {
            let e = e - 1;
            e - e % 1_000_000_000
        })
        .unwrap_or(0)
}

/// A timestamp relative to `base`: 0 stays 0 (CUPTI's "not collected"), and a time before the
/// base (only the end of a record that ends before it starts) becomes 0, never a wrapped value;
/// such a record is written with `"dur": 0` and counted. The importer adds the base back to
/// every non-zero time.
pub fn to_base(t: Ns, base: Ns) -> Ns {
    t.saturating_sub(base)
}

/// Writes `t` as Chrome Trace Event JSON against its [`time_base`], as `cutrace convert
/// --chrome` does. Absolute CUPTI times (~1.8e15 µs) do not fit a double's 53 bits at ns
/// resolution, and viewers parse `ts` as doubles, so the times are written relative to a whole
/// second before the first record (Kineto's `baseTimeNanoseconds`); the base is in the file and
/// cutrace's importer adds it back. `t`'s times are moved to the base in place (a copy of a large
/// trace would double the memory).
pub fn write_trace<W: Write>(w: &mut W, t: &mut Trace) -> io::Result<Written> {
    let base = time_base(t);
    t.map_times(|x| to_base(x, base));
    write_chrome(w, t, base)
}

/// torch.profiler's `distributedInfo` header for a trace that knows its rank, world size or
/// backend ([`TraceMeta::distributed`]), as torch 2.x writes it: `backend`, `rank`,
/// `world_size`, `pg_count` and `pg_config` (each group's `pg_name`, `pg_desc`,
/// `backend_config`, `pg_size`, `ranks`), and `nccl_version`, each only when known, in that
/// order, with `": "` between a key and its value. The spacing matters: HTA finds a file's rank
/// with the pattern `"rank":\s+(\d+)`. cutrace's own Kineto importer reads it back.
/// `local_rank` and the `cutrace record` run id have no place there and are not written.
fn distributed_info(m: &TraceMeta) -> Option<String> {
    use serde_json::{Map, Value};
    let d = m.distributed.as_ref()?;
    if d.rank.is_none() && d.world_size.is_none() && d.backend.is_none() {
        return None;
    }
    let mut members: Vec<(&str, Value)> = Vec::new();
    let mut put = |k: &'static str, v: Option<Value>| {
        if let Some(v) = v {
            members.push((k, v));
        }
    };
    put(dist::BACKEND, d.backend.clone().map(Value::from));
    put(dist::RANK, d.rank.map(Value::from));
    put(dist::WORLD_SIZE, d.world_size.map(Value::from));
    if !d.process_groups.is_empty() {
        let groups: Vec<Value> = d
            .process_groups
            .iter()
            .map(|g| {
                let mut x = Map::new();
                let mut opt = |k: &str, v: Option<Value>| {
                    if let Some(v) = v {
                        x.insert(k.into(), v);
                    }
                };
                opt(dist::PG_NAME, g.name.clone().map(Value::from));
                opt(dist::PG_DESC, g.desc.clone().map(Value::from));
                opt(
                    dist::BACKEND_CONFIG,
                    g.backend_config.clone().map(Value::from),
                );
                opt(dist::PG_SIZE, g.size.map(Value::from));
                x.insert(dist::RANKS.into(), Value::from(g.ranks.clone()));
                Value::Object(x)
            })
            .collect();
        put(dist::PG_COUNT, Some(Value::from(groups.len())));
        put(dist::PG_CONFIG, Some(Value::Array(groups)));
    }
    put(dist::NCCL_VERSION, d.nccl_version.clone().map(Value::from));
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    Some(format!("{{{}}}", body.join(", ")))
}

/// Writes `t` as Chrome Trace Event JSON (see the module doc). `t`'s times are relative to
/// `base_ns` (see [`time_base`]), which the file carries as `baseTimeNanoseconds` and as the
/// `"cutrace"` member's `time_base_ns`.
pub fn write_chrome<W: Write>(w: &mut W, t: &Trace, base_ns: Ns) -> io::Result<Written> {
    let tl = Timeline::new(t);
    write_header(w, &tl, base_ns)?;
    let written = write_events(w, &tl, None, 0)?;
    write_job_footer(w)?;
    Ok(written)
}

/// The events of `tl`'s trace, as a trace of its own or (`job`) as one rank of a job's file;
/// `before` events are in `traceEvents` already.
fn write_events<W: Write>(
    w: &mut W,
    tl: &Timeline<'_>,
    job: Option<&RankLanes>,
    before: u64,
) -> io::Result<Written> {
    let mut ev = Events {
        w,
        b: Vec::with_capacity(512),
        n: before,
    };
    match job {
        Some(r) => write_rank_metadata(&mut ev, tl, r)?,
        None => write_metadata(&mut ev, tl)?,
    }
    // Flow arrows join an API call to the device records that carry its correlation id, with the
    // report's choice of call where two share an id. Orphans get none.
    let mut names = Names::new(tl.t);
    let mut flows = 0u64;
    for rec in tl.records() {
        write_record(&mut ev, tl, (&mut names, job), rec)?;
        flows += write_flow(&mut ev, tl, job, rec)?;
    }
    write_memory_events(&mut ev, tl, (&mut names, job))?;
    write_counter_events(&mut ev, tl.t, job)?;
    Ok(Written {
        events: ev.n - before,
        flows,
        inverted: tl.inverted,
        rows_past_u32_tid: if job.is_some() {
            0
        } else {
            tl.rows.rows_past_u32_tid() as u64
        },
    })
}

/// The top of a job's file (`cutrace convert JOB --chrome`): the members a one-trace export has
/// that hold for the whole job, `member` as the `"cutrace"` member, and `traceEvents`' opening
/// bracket; each rank follows ([`write_rank`]), then [`write_job_footer`]. Times are relative
/// to `base_ns`, one base for every rank.
pub(crate) fn write_job_header<W: Write>(
    w: &mut W,
    base_ns: Ns,
    member: &ExportMeta,
) -> io::Result<()> {
    write!(w, "{{\n\"{}\": 1", top::SCHEMA_VERSION)?;
    // Each rank's GPUs are in its lanes' names; device ids repeat from rank to rank.
    write!(w, ",\n\"{}\": []", top::DEVICE_PROPERTIES)?;
    write!(w, ",\n\"{}\": {base_ns}", top::BASE_TIME_NANOSECONDS)?;
    write!(w, ",\n\"{}\": \"ns\"", top::DISPLAY_TIME_UNIT)?;
    write!(w, ",\n\"{}\": ", top::CUTRACE)?;
    let member = serde_json::to_value(member).map_err(io::Error::other)?;
    serde_json::to_writer(&mut *w, &member).map_err(io::Error::other)?;
    write!(w, ",\n\"{}\": [", top::TRACE_EVENTS)
}

/// One rank of a job's file: `t`, whose times are relative to the file's base, as the process
/// `rank` says; `before` events precede it in `traceEvents`.
pub(crate) fn write_rank<W: Write>(
    w: &mut W,
    t: &Trace,
    rank: &mut RankLanes,
    before: u64,
) -> io::Result<Written> {
    let tl = Timeline::new(t);
    rank.tids.clear();
    rank.number(&tl);
    write_events(w, &tl, Some(rank), before)
}

/// The end of `traceEvents` and of the file.
pub(crate) fn write_job_footer<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(b"\n]\n}\n")
}

/// The top-level members before `traceEvents`, and its opening bracket.
fn write_header<W: Write>(w: &mut W, tl: &Timeline<'_>, base_ns: Ns) -> io::Result<()> {
    let m = &tl.t.meta;
    write!(w, "{{\n\"{}\": 1", top::SCHEMA_VERSION)?;
    write!(w, ",\n\"{}\": ", top::DEVICE_PROPERTIES)?;
    serde_json::to_writer(&mut *w, &device_properties(m)).map_err(io::Error::other)?;
    if let Some(v) = m.cupti_version {
        write!(w, ",\n\"{}\": {v}", top::CUPTI_VERSION)?;
    }
    if let Some(v) = m.cuda_driver_version {
        write!(w, ",\n\"{}\": {v}", top::CUDA_DRIVER_VERSION)?;
    }
    if let Some(d) = distributed_info(m) {
        write!(w, ",\n\"{}\": {d}", top::DISTRIBUTED_INFO)?;
    }
    write!(w, ",\n\"{}\": {base_ns}", top::BASE_TIME_NANOSECONDS)?;
    write!(w, ",\n\"{}\": \"ns\"", top::DISPLAY_TIME_UNIT)?;
    write!(w, ",\n\"{}\": ", top::CUTRACE)?;
    // Through a `Value`, whose members are sorted: the member's text does not depend on the
    // order of the type's fields.
    let member = serde_json::to_value(cutrace_member(tl, base_ns)).map_err(io::Error::other)?;
    serde_json::to_writer(&mut *w, &member).map_err(io::Error::other)?;
    write!(w, ",\n\"{}\": [", top::TRACE_EVENTS)
}

/// Allocations and frees as torch.profiler writes them (`"ph":"i"`, `cpu_instant_event`,
/// `[memory]`, on the host thread that made them), so the export reads back to the same events
/// and HTA and TensorBoard read its memory as a torch trace's.
fn write_memory_events<W: Write>(
    ev: &mut Events<'_, W>,
    tl: &Timeline<'_>,
    (names, job): (&mut Names<'_>, Option<&RankLanes>),
) -> io::Result<()> {
    for (i, m) in tl.t.memory.iter().enumerate() {
        let b = ev.begin();
        b.extend_from_slice(b"{\"ph\":\"i\",\"cat\":\"");
        b.extend_from_slice(cat::CPU_INSTANT_EVENT.as_bytes());
        b.extend_from_slice(b"\",\"name\":");
        b.extend_from_slice(&quoted(vocab::MEMORY));
        let lane = Lane::Host {
            process: m.process,
            thread: m.thread,
        };
        push_lane(b, tl, job, lane);
        b.extend_from_slice(b",\"ts\":");
        push_us(b, m.ts_ns);
        b.extend_from_slice(b",\"s\":\"t\"");
        close_with_args(b, names, |a| tl.memory_args(i, a));
        ev.end()?;
    }
    Ok(())
}

/// Hardware counters as `"ph":"C"` events: a counter track per metric on each GPU's process
/// (`pid` = the device, `name` = the track's name, the value in `args.value`), one sample per
/// profiled kernel (`cat` `gpu_counter`) and one per PM sample (`cat` `gpu_pm_sample`, at the
/// sample's start), placed as [`crate::counter_tracks`] says. Viewers draw them; the Kineto
/// importer skips them (the CSV and Parquet tables are the exports to read values from).
/// In a job's file they are the rank's, named `GPU N: ` and the track's name.
fn write_counter_events<W: Write>(
    ev: &mut Events<'_, W>,
    t: &Trace,
    job: Option<&RankLanes>,
) -> io::Result<()> {
    use crate::counter_tracks::Source;
    let c = crate::counter_tracks::counter_timeline(t);
    let heads: Vec<Vec<u8>> = c
        .tracks
        .iter()
        .map(|k| {
            let cat: &[u8] = match k.source {
                Source::Kernel => b"gpu_counter",
                Source::PmSample => b"gpu_pm_sample",
                Source::Memory { .. } => b"gpu_memory",
            };
            let mut b = b"{\"ph\":\"C\",\"cat\":\"".to_vec();
            b.extend_from_slice(cat);
            b.extend_from_slice(b"\",\"name\":");
            match job {
                Some(r) => {
                    let name = format!("{}: {}", model::gpu_name(k.device), k.name(t));
                    b.extend_from_slice(&quoted(&name));
                    b.extend_from_slice(b",\"pid\":");
                    push_u64(&mut b, r.pid);
                }
                None => {
                    b.extend_from_slice(&quoted(&k.name(t)));
                    b.extend_from_slice(b",\"pid\":");
                    push_u64(&mut b, u64::from(k.device));
                }
            }
            b
        })
        .collect();
    for s in &c.samples {
        let b = ev.begin();
        b.extend_from_slice(&heads[s.track as usize]);
        b.extend_from_slice(b",\"ts\":");
        push_us(b, s.at_ns);
        // Finite (NaN has no sample); Rust prints an f64 without an exponent: valid JSON.
        let _ = write!(b, ",\"args\":{{\"value\":{}}}}}", s.value);
        ev.end()?;
    }
    Ok(())
}

/// Process and thread names (Perfetto and chrome://tracing label lanes with them) and sort order:
/// GPUs after host processes (as Kineto sorts them), each stream's rows together.
fn write_metadata<W: Write>(ev: &mut Events<'_, W>, tl: &Timeline<'_>) -> io::Result<()> {
    write_gpu_metadata(ev, tl)?;
    write_host_metadata(ev, tl)
}

/// `,"pid":…,"tid":0`: a process's own lane, where its metadata goes.
fn process_lane(pid: impl Fn(&mut Vec<u8>)) -> impl Fn(&mut Vec<u8>) {
    move |b: &mut Vec<u8>| {
        b.extend_from_slice(b",\"pid\":");
        pid(b);
        b.extend_from_slice(b",\"tid\":0");
    }
}

fn write_gpu_metadata<W: Write>(ev: &mut Events<'_, W>, tl: &Timeline<'_>) -> io::Result<()> {
    use serde_json::Value;
    let (t, rows) = (tl.t, &tl.rows);
    let mut devices: BTreeSet<u32> = rows.lanes.iter().map(|l| l.0).collect();
    devices.extend(rows.streamless_ranges.iter().copied());
    devices.extend(t.meta.devices.iter().map(|d| d.device));
    for &d in &devices {
        let lane = process_lane(|b| push_u64(b, u64::from(d)));
        let name = Value::from(model::gpu_name(d));
        meta_event(ev, "process_name", &lane, "name", &name)?;
        if let Some(p) = t.meta.devices.iter().find(|p| p.device == d) {
            if !p.name.is_empty() {
                let labels = Value::from(p.name.clone());
                meta_event(ev, "process_labels", &lane, "labels", &labels)?;
            }
        }
        let sort = Value::from(5_000_000u64 + u64::from(d));
        meta_event(ev, "process_sort_index", &lane, "sort_index", &sort)?;
    }
    // Each row's name is written into one reused string (128k overlapping kernels are 128k
    // rows).
    let mut label = StreamLabel::default();
    let mut name = String::new();
    for &(device, stream, slot) in &rows.lanes {
        tl.row_name(stream, slot, &mut label, &mut name);
        let lane = |b: &mut Vec<u8>| {
            let row = Lane::Gpu {
                device,
                stream,
                slot,
            };
            push_lane(b, tl, None, row);
        };
        // Rows of one stream together, the stream's own row first. (Rows past 65,535 share
        // the last sort index; they are far past the rows Perfetto shows apart anyway, see
        // `GpuRows::rows_past_u32_tid`.)
        let order =
            stream.map_or(rows.base - 1, u128::from) * 65_536 + u128::from(slot.min(65_535));
        let sort = u64::try_from(order).unwrap_or(u64::MAX);
        meta_event(ev, "thread_name", lane, "name", name.as_str())?;
        meta_event(ev, "thread_sort_index", lane, "sort_index", &sort)?;
    }
    for &device in &rows.streamless_ranges {
        let lane = |b: &mut Vec<u8>| push_lane(b, tl, None, Lane::GpuStreamless { device });
        let name = model::STREAMLESS_ANNOTATIONS;
        meta_event(ev, "thread_name", lane, "name", name)?;
    }
    Ok(())
}

/// A job's rank: its process's name, labels and place, and each lane's name and place, in the
/// order [`RankLanes::number`] gave them.
fn write_rank_metadata<W: Write>(
    ev: &mut Events<'_, W>,
    tl: &Timeline<'_>,
    r: &RankLanes,
) -> io::Result<()> {
    let lane = process_lane(|b| push_u64(b, r.pid));
    meta_event(ev, "process_name", &lane, "name", r.name.as_str())?;
    meta_event(ev, "process_labels", &lane, "labels", r.labels.as_str())?;
    meta_event(ev, "process_sort_index", &lane, "sort_index", &r.sort)?;
    let mut lanes: Vec<(&LaneKey, &u64)> = r.tids.iter().collect();
    lanes.sort_unstable_by_key(|l| *l.1);
    let processes: BTreeSet<u32> = tl.host_lanes.iter().map(|l| l.0).collect();
    let mut label = StreamLabel::default();
    let mut row = String::new();
    for (key, &tid) in lanes {
        let name = match *key {
            LaneKey::Host(process, thread) if processes.len() > 1 => {
                format!("{} (pid {process})", model::thread_name(thread))
            }
            LaneKey::Host(_, thread) => model::thread_name(thread),
            LaneKey::Gpu(device, stream, slot) => {
                tl.row_name(stream, slot, &mut label, &mut row);
                format!("{} {row}", model::gpu_label(tl.t, device))
            }
            LaneKey::Streamless(device) => format!(
                "{} {}",
                model::gpu_label(tl.t, device),
                model::STREAMLESS_ANNOTATIONS
            ),
        };
        let lane = |b: &mut Vec<u8>| {
            b.extend_from_slice(b",\"pid\":");
            push_u64(b, r.pid);
            b.extend_from_slice(b",\"tid\":");
            push_u64(b, tid);
        };
        meta_event(ev, "thread_name", lane, "name", name.as_str())?;
        meta_event(ev, "thread_sort_index", lane, "sort_index", &tid)?;
    }
    Ok(())
}

fn write_host_metadata<W: Write>(ev: &mut Events<'_, W>, tl: &Timeline<'_>) -> io::Result<()> {
    use serde_json::Value;
    let processes: BTreeSet<u32> = tl.host_lanes.iter().map(|l| l.0).collect();
    for &p in &processes {
        let lane = process_lane(|b| push_pid(b, p));
        let name = Value::from(model::process_name(p));
        meta_event(ev, "process_name", &lane, "name", &name)?;
        let sort = Value::from(if p == 0 { -1 } else { i64::from(p) });
        meta_event(ev, "process_sort_index", &lane, "sort_index", &sort)?;
    }
    for &(process, thread) in &tl.host_lanes {
        let lane = |b: &mut Vec<u8>| push_lane(b, tl, None, Lane::Host { process, thread });
        let name = Value::from(model::thread_name(thread));
        meta_event(ev, "thread_name", lane, "name", &name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::gpu_rows;
    use cutrace_trace::{RangeDomain, SyncKind};

    #[test]
    fn microseconds_have_three_decimals_by_integer_arithmetic() {
        assert_eq!(us_text(1_796_022_092_907_496_988), "1796022092907496.988");
        assert_eq!(us_text(0), "0.000");
        assert_eq!(us_text(5), "0.005");
        assert_eq!(us_text(1_000), "1.000");
        assert_eq!(us_text(12_340), "12.340");
        assert_eq!(us_text(u64::MAX), "18446744073709551.615");
        // Every value reads back exactly through the importer's parser.
        for ns in [1, 999, 1_001, 5_153_875_767_895_669, u64::MAX - 1] {
            assert_eq!(
                cutrace_trace::timeparse::parse_us_to_ns(&us_text(ns)),
                Ok(ns)
            );
        }
    }

    fn kernel(stream: u64, start: Ns, end: Ns) -> cutrace_trace::Kernel {
        cutrace_trace::Kernel {
            device: 0,
            context: 1,
            stream,
            correlation_id: 0,
            start_ns: start,
            end_ns: end,
            name: 0,
            launch: 0,
        }
    }

    fn sync(stream: Option<u64>, start: Ns, end: Ns) -> cutrace_trace::Synchronization {
        cutrace_trace::Synchronization {
            kind: if stream.is_some() {
                SyncKind::StreamSynchronize
            } else {
                SyncKind::ContextSynchronize
            },
            device: 0,
            context: 1,
            stream,
            correlation_id: 0,
            start_ns: start,
            end_ns: end,
            wait_on_stream: None,
            event_record_correlation: None,
        }
    }

    /// Events that would cross on a stream's row go to rows of their own, annotation ranges too.
    #[test]
    fn overlapping_gpu_work_gets_rows_that_nest() {
        let t = Trace {
            strings: vec!["k".into()],
            kernels: vec![
                kernel(7, 100, 300),
                kernel(7, 200, 400), // crosses the first and the range
                kernel(7, 120, 150), // inside the first
                kernel(7, 400, 500), // after the second: back on the stream's row
            ],
            syncs: vec![sync(Some(7), 150, 500), sync(None, 10, 20)],
            ranges: vec![cutrace_trace::NvtxRange {
                domain: RangeDomain::Gpu,
                name: 0,
                process: 0,
                thread: 0,
                device: Some(0),
                stream: Some(7),
                start_ns: 90,
                end_ns: 350,
                nvtx_domain: None,
            }],
            ..Trace::default()
        };
        let rows = gpu_rows(&t);
        assert_eq!(rows.base, 1_000_000);
        let tids: Vec<i128> = rows.kernels.iter().map(|&s| rows.tid(Some(7), s)).collect();
        assert_eq!(tids, [7, 2_000_007, 7, 7]);
        assert_eq!(rows.tid(Some(7), rows.syncs[0]), 1_000_007);
        assert_eq!(rows.tid(None, rows.syncs[1]), 1_999_999);
        let mut out = Vec::new();
        write_chrome(&mut out, &t, 0).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let names: Vec<&str> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "context-wide syncs",
                "stream 7",
                "stream 7 syncs",
                "stream 7 (overlap 1)"
            ]
        );
        // A stream id that reaches the base moves the base up a power of ten.
        let t = Trace {
            kernels: vec![kernel(999_999, 0, 1)],
            ..Trace::default()
        };
        assert_eq!(gpu_rows(&t).base, 10_000_000);
    }

    #[test]
    fn an_empty_trace_is_valid_json() {
        let mut out = Vec::new();
        let w = write_chrome(&mut out, &Trace::default(), 0).unwrap();
        assert_eq!(w.events, 0);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["traceEvents"], serde_json::json!([]));
        assert_eq!(v["displayTimeUnit"], "ns");
    }
}
