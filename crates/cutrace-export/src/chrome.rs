//! `cutrace convert --chrome`: a trace as Chrome Trace Event JSON in the shape torch.profiler
//! (Kineto) writes, so Perfetto UI, chrome://tracing, Holistic Trace Analysis and TensorBoard open
//! it, and cutrace's own Kineto importer reads it back to the same records.
//!
//! Written as a stream, one event per line (millions of records never become one JSON value).
//! `ts` and `dur` are microseconds with exactly three decimals, printed from the integer
//! nanoseconds by integer arithmetic: the importer parses them back to the same nanoseconds.
//! The mapping is documented in docs/FORMAT.md ("Exporting").

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};

use cutrace_analysis::correlate::ApiIndex;
use cutrace_analysis::display_name;
use cutrace_trace::{
    ApiKind, Collective, ExportMeta, Ns, RangeDomain, SourceFormat, StrId, Trace, TraceMeta,
};

use crate::rows::{copy_name, gpu_rows, sync_name, GpuRows};

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

/// A kernel's demangled display name and, when it differs, CUPTI's name; both JSON-quoted.
type KernelName = (Box<[u8]>, Option<Box<[u8]>>);

/// JSON-escaped, quoted names, made once per interned string.
struct Names<'t> {
    t: &'t Trace,
    /// By string id; the last slot serves ids outside the table (`"?"`).
    plain: Vec<Option<Box<[u8]>>>,
    /// Kernel names: the demangled display name, and CUPTI's name when it differs.
    kernel: Vec<Option<KernelName>>,
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

    fn kernel(&mut self, id: StrId) -> (&[u8], Option<&[u8]>) {
        let i = self.slot(id);
        let t = self.t;
        let (d, m) = self.kernel[i].get_or_insert_with(|| {
            let raw = t.str(id);
            let shown = display_name(raw);
            let mangled = (shown != raw).then(|| quoted(raw));
            (quoted(&shown), mangled)
        });
        (d, m.as_deref())
    }
}

/// Host lanes (Perfetto's processes and threads) that records land on, for the metadata events.
#[derive(Default)]
struct Lanes {
    /// (process, thread).
    host: BTreeSet<(u32, u64)>,
    inverted: u64,
}

fn survey(t: &Trace) -> Lanes {
    fn span(s: Ns, e: Ns, l: &mut Lanes) {
        l.inverted += u64::from(e < s);
    }
    let mut l = Lanes::default();
    for k in &t.kernels {
        span(k.start_ns, k.end_ns, &mut l);
    }
    for m in &t.memcpys {
        span(m.start_ns, m.end_ns, &mut l);
    }
    for m in &t.memsets {
        span(m.start_ns, m.end_ns, &mut l);
    }
    for s in &t.syncs {
        span(s.start_ns, s.end_ns, &mut l);
    }
    for a in &t.api_calls {
        l.host.insert((a.process, a.thread));
        span(a.start_ns, a.end_ns, &mut l);
    }
    for r in &t.ranges {
        if r.domain == RangeDomain::Host {
            l.host.insert((r.process, r.thread));
        }
        span(r.start_ns, r.end_ns, &mut l);
    }
    for m in &t.marks {
        l.host.insert((m.process, m.thread));
    }
    for o in &t.overheads {
        l.host.insert((o.process, o.thread));
        span(o.start_ns, o.end_ns, &mut l);
    }
    l
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

    /// Closes a device record's event (its `args` and the event), then writes the `"f"` end of
    /// its flow arrow when an API call carries its correlation id.
    fn end_gpu(
        &mut self,
        attributed: bool,
        correlation: u64,
        device: u32,
        tid: i128,
        start: Ns,
    ) -> io::Result<()> {
        self.b.extend_from_slice(b"}}");
        self.end()?;
        if attributed {
            flow_end(self.begin(), correlation, device, tid, start);
            self.end()?;
        }
        Ok(())
    }
}

/// `{"ph":"X","cat":…,"name":…,"pid":…,"tid":…,"ts":…,"dur":…` (no closing brace), with the pid
/// and tid already written as text by the caller's closure.
fn complete_head(
    b: &mut Vec<u8>,
    cat: &str,
    name: &[u8],
    lane: impl FnOnce(&mut Vec<u8>),
    start: Ns,
    end: Ns,
) {
    b.extend_from_slice(b"{\"ph\":\"X\",\"cat\":\"");
    b.extend_from_slice(cat.as_bytes());
    b.extend_from_slice(b"\",\"name\":");
    b.extend_from_slice(name);
    lane(b);
    b.extend_from_slice(b",\"ts\":");
    push_us(b, start);
    b.extend_from_slice(b",\"dur\":");
    push_us(b, end.saturating_sub(start));
}

fn gpu_lane(device: u32, tid: i128) -> impl FnOnce(&mut Vec<u8>) {
    move |b: &mut Vec<u8>| {
        b.extend_from_slice(b",\"pid\":");
        push_u64(b, u64::from(device));
        b.extend_from_slice(b",\"tid\":");
        push_i128(b, tid);
    }
}

fn host_lane(process: u32, thread: u64) -> impl FnOnce(&mut Vec<u8>) {
    move |b: &mut Vec<u8>| {
        b.extend_from_slice(b",\"pid\":");
        push_pid(b, process);
        b.extend_from_slice(b",\"tid\":");
        push_u64(b, thread);
    }
}

/// `,"key":value` for an unsigned integer.
fn arg(b: &mut Vec<u8>, key: &str, v: u64) {
    b.extend_from_slice(b",\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":");
    push_u64(b, v);
}

/// A communication kernel's collective ([`Trace::collectives`]) as the args torch's Kineto
/// copies from `record_param_comms` onto the kernels it launched (`Collective name`, `Process
/// Group Name`, `Process Group Description`, `Group size`, `Seq`, `In msg nelems`, `Out msg
/// nelems`, `dtype`; each only when known), so that the Kineto importer, HTA and cutrace's job
/// report read the collective back from the kernel itself.
fn collective_args(b: &mut Vec<u8>, t: &Trace, c: &Collective) {
    let text = |b: &mut Vec<u8>, key: &str, v: Option<StrId>| {
        if let Some(v) = v {
            b.extend_from_slice(b",\"");
            b.extend_from_slice(key.as_bytes());
            b.extend_from_slice(b"\":");
            b.extend_from_slice(&quoted(t.str(v)));
        }
    };
    text(b, "Collective name", Some(c.name));
    text(b, "Process Group Name", c.group_name);
    text(b, "Process Group Description", c.group_desc);
    if let Some(n) = c.group_size {
        arg(b, "Group size", u64::from(n));
    }
    if let Some(n) = c.seq {
        arg(b, "Seq", n);
    }
    if let Some(n) = c.in_nelems {
        arg(b, "In msg nelems", n);
    }
    if let Some(n) = c.out_nelems {
        arg(b, "Out msg nelems", n);
    }
    text(b, "dtype", c.dtype);
}

/// `"args":{"device":…,"context":…,"stream":…,"correlation":…` (no closing brace).
fn gpu_args(b: &mut Vec<u8>, device: u32, context: u32, stream: Option<u64>, correlation: u64) {
    b.extend_from_slice(b",\"args\":{\"device\":");
    push_u64(b, u64::from(device));
    arg(b, "context", u64::from(context));
    if let Some(s) = stream {
        arg(b, "stream", s);
    }
    arg(b, "correlation", correlation);
}

/// The `"f"` end of a flow arrow, on the device record it points at.
fn flow_end(b: &mut Vec<u8>, correlation: u64, device: u32, tid: i128, start: Ns) {
    b.extend_from_slice(b"{\"ph\":\"f\",\"id\":");
    push_u64(b, correlation);
    gpu_lane(device, tid)(b);
    b.extend_from_slice(b",\"ts\":");
    push_us(b, start);
    b.extend_from_slice(b",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}");
}

fn dim3(b: &mut Vec<u8>, key: &str, v: [u32; 3]) {
    b.extend_from_slice(b",\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":[");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        push_u64(b, u64::from(*x));
    }
    b.push(b']');
}

/// GB/s of a copy or memset (bytes per ns), as Kineto writes it; "N/A" when it took no time.
fn bandwidth(b: &mut Vec<u8>, bytes: u64, start: Ns, end: Ns) {
    b.extend_from_slice(b",\"memory bandwidth (GB/s)\":");
    let d = end.saturating_sub(start);
    if d == 0 {
        b.extend_from_slice(b"\"N/A\"");
    } else {
        // A derived figure for display; times stay integers.
        let _ = write!(b, "{}", bytes as f64 / d as f64);
    }
}

fn source_label(m: &TraceMeta) -> &'static str {
    match m.source {
        SourceFormat::Native => "native",
        SourceFormat::Kineto => "kineto",
    }
}

/// The top-level `"cutrace"` member: what the trace says about itself, read back by the importer
/// ([`ExportMeta::restore`]).
fn cutrace_member(t: &Trace, lanes: &Lanes, rows: &GpuRows, base_ns: Ns) -> ExportMeta {
    let m = &t.meta;
    let mut notes: Vec<String> = vec![
        "ts and dur are microseconds with exactly 3 decimals: the trace's integer nanoseconds; ts \
         counts from baseTimeNanoseconds (time_base_ns here), a whole second before the first \
         record"
            .into(),
    ];
    if lanes.inverted > 0 {
        notes.push(format!(
            "{} records end before they start; they are written with \"dur\": 0",
            lanes.inverted
        ));
    }
    let past = rows.rows_past_u32_tid();
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
            o.insert("id".into(), d.device.into());
            o.insert("name".into(), d.name.clone().into());
            if let Some(b) = d.global_memory_bytes {
                o.insert("totalGlobalMem".into(), b.into());
            }
            if let Some((major, minor)) = d.compute_capability {
                o.insert("computeMajor".into(), major.into());
                o.insert("computeMinor".into(), minor.into());
            }
            if let Some(n) = d.sm_count {
                o.insert("numSms".into(), n.into());
            }
            if let Some(u) = &d.uuid {
                o.insert("uuid".into(), u.clone().into());
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
    lane: impl FnOnce(&mut Vec<u8>),
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
    t.earliest_ns()
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
    put("backend", d.backend.clone().map(Value::from));
    put("rank", d.rank.map(Value::from));
    put("world_size", d.world_size.map(Value::from));
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
                opt("pg_name", g.name.clone().map(Value::from));
                opt("pg_desc", g.desc.clone().map(Value::from));
                opt("backend_config", g.backend_config.clone().map(Value::from));
                opt("pg_size", g.size.map(Value::from));
                x.insert("ranks".into(), Value::from(g.ranks.clone()));
                Value::Object(x)
            })
            .collect();
        put("pg_count", Some(Value::from(groups.len())));
        put("pg_config", Some(Value::Array(groups)));
    }
    put("nccl_version", d.nccl_version.clone().map(Value::from));
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
    let lanes = survey(t);
    let rows = gpu_rows(t);
    let m = &t.meta;

    w.write_all(b"{\n\"schemaVersion\": 1,\n\"deviceProperties\": ")?;
    serde_json::to_writer(&mut *w, &device_properties(m)).map_err(io::Error::other)?;
    if let Some(v) = m.cupti_version {
        write!(w, ",\n\"cupti_version\": {v}")?;
    }
    if let Some(v) = m.cuda_driver_version {
        write!(w, ",\n\"cuda_driver_version\": {v}")?;
    }
    if let Some(d) = distributed_info(m) {
        write!(w, ",\n\"distributedInfo\": {d}")?;
    }
    write!(w, ",\n\"baseTimeNanoseconds\": {base_ns}")?;
    w.write_all(b",\n\"displayTimeUnit\": \"ns\",\n\"cutrace\": ")?;
    // Through a `Value`, whose members are sorted: the member's text does not depend on the
    // order of the type's fields.
    let member = serde_json::to_value(cutrace_member(t, &lanes, &rows, base_ns))
        .map_err(io::Error::other)?;
    serde_json::to_writer(&mut *w, &member).map_err(io::Error::other)?;
    w.write_all(b",\n\"traceEvents\": [")?;

    let mut ev = Events {
        w,
        b: Vec::with_capacity(512),
        n: 0,
    };
    write_metadata(&mut ev, t, &lanes, &rows)?;

    // Flow arrows join an API call to the device records that carry its correlation id, with the
    // report's choice of call where two share an id. Orphans get none.
    let index = ApiIndex::build(&t.api_calls);
    let mut launches = vec![false; t.api_calls.len()];
    let gpu_ids = t
        .kernels
        .iter()
        .map(|k| k.correlation_id)
        .chain(t.memcpys.iter().map(|r| r.correlation_id))
        .chain(t.memsets.iter().map(|r| r.correlation_id));
    for id in gpu_ids {
        if let Some(i) = index.get(id) {
            launches[i] = true;
        }
    }
    let attributed = |id: u64| index.get(id).is_some();

    let mut names = Names::new(t);
    let mut flows = 0u64;
    for (i, a) in t.api_calls.iter().enumerate() {
        let cat = match a.kind {
            ApiKind::Runtime => "cuda_runtime",
            ApiKind::Driver => "cuda_driver",
        };
        let b = ev.begin();
        complete_head(
            b,
            cat,
            names.plain(a.name),
            host_lane(a.process, a.thread),
            a.start_ns,
            a.end_ns,
        );
        b.extend_from_slice(b",\"args\":{\"cbid\":");
        push_u64(b, u64::from(a.cbid));
        arg(b, "correlation", a.correlation_id);
        if a.return_value != 0 {
            let _ = write!(b, ",\"return value\":{}", a.return_value);
        }
        b.extend_from_slice(b"}}");
        ev.end()?;
        if launches[i] {
            let b = ev.begin();
            b.extend_from_slice(b"{\"ph\":\"s\",\"id\":");
            push_u64(b, a.correlation_id);
            host_lane(a.process, a.thread)(b);
            b.extend_from_slice(b",\"ts\":");
            push_us(b, a.start_ns);
            b.extend_from_slice(b",\"cat\":\"ac2g\",\"name\":\"ac2g\"}");
            ev.end()?;
            flows += 1;
        }
    }

    let collectives: HashMap<(u64, u32), &Collective> = t
        .collectives
        .iter()
        .map(|c| ((c.correlation_id, c.device), c))
        .collect();
    for (i, k) in t.kernels.iter().enumerate() {
        let (shown, mangled) = names.kernel(k.name);
        let tid = rows.tid(Some(k.stream), rows.kernels[i]);
        let b = ev.begin();
        complete_head(
            b,
            "kernel",
            shown,
            gpu_lane(k.device, tid),
            k.start_ns,
            k.end_ns,
        );
        gpu_args(b, k.device, k.context, Some(k.stream), k.correlation_id);
        let l = t.launch(k);
        arg(b, "registers per thread", u64::from(l.registers_per_thread));
        // Kineto's "shared memory" is static + dynamic.
        let shared = u64::from(l.static_shared_bytes) + u64::from(l.dynamic_shared_bytes);
        arg(b, "shared memory", shared);
        arg(b, "static shared memory", u64::from(l.static_shared_bytes));
        arg(
            b,
            "dynamic shared memory",
            u64::from(l.dynamic_shared_bytes),
        );
        dim3(b, "grid", l.grid);
        dim3(b, "block", l.block);
        if l.graph_id != 0 {
            arg(b, "graph id", u64::from(l.graph_id));
        }
        if let Some(m) = mangled {
            b.extend_from_slice(b",\"mangled\":");
            b.extend_from_slice(m);
        }
        if let Some(c) = collectives.get(&(k.correlation_id, k.device)) {
            collective_args(b, t, c);
        }
        ev.end_gpu(
            attributed(k.correlation_id),
            k.correlation_id,
            k.device,
            tid,
            k.start_ns,
        )?;
    }

    for (i, c) in t.memcpys.iter().enumerate() {
        let tid = rows.tid(Some(c.stream), rows.memcpys[i]);
        let b = ev.begin();
        complete_head(
            b,
            "gpu_memcpy",
            copy_name(c.kind).as_bytes(),
            gpu_lane(c.device, tid),
            c.start_ns,
            c.end_ns,
        );
        gpu_args(b, c.device, c.context, Some(c.stream), c.correlation_id);
        arg(b, "bytes", c.bytes);
        bandwidth(b, c.bytes, c.start_ns, c.end_ns);
        ev.end_gpu(
            attributed(c.correlation_id),
            c.correlation_id,
            c.device,
            tid,
            c.start_ns,
        )?;
    }

    for (i, s) in t.memsets.iter().enumerate() {
        let tid = rows.tid(Some(s.stream), rows.memsets[i]);
        let b = ev.begin();
        complete_head(
            b,
            "gpu_memset",
            b"\"Memset\"",
            gpu_lane(s.device, tid),
            s.start_ns,
            s.end_ns,
        );
        gpu_args(b, s.device, s.context, Some(s.stream), s.correlation_id);
        arg(b, "bytes", s.bytes);
        arg(b, "value", u64::from(s.value));
        bandwidth(b, s.bytes, s.start_ns, s.end_ns);
        ev.end_gpu(
            attributed(s.correlation_id),
            s.correlation_id,
            s.device,
            tid,
            s.start_ns,
        )?;
    }

    for (i, s) in t.syncs.iter().enumerate() {
        let name = sync_name(s.kind);
        let tid = rows.tid(s.stream, rows.syncs[i]);
        let b = ev.begin();
        let quoted_name = format!("\"{name}\"");
        complete_head(
            b,
            "cuda_sync",
            quoted_name.as_bytes(),
            gpu_lane(s.device, tid),
            s.start_ns,
            s.end_ns,
        );
        b.extend_from_slice(b",\"args\":{\"cuda_sync_kind\":");
        b.extend_from_slice(quoted_name.as_bytes());
        b.extend_from_slice(b",\"device\":");
        push_u64(b, u64::from(s.device));
        arg(b, "context", u64::from(s.context));
        if let Some(st) = s.stream {
            arg(b, "stream", st);
        }
        arg(b, "correlation", s.correlation_id);
        b.extend_from_slice(b"}}");
        ev.end()?;
    }

    for (i, r) in t.ranges.iter().enumerate() {
        let b = ev.begin();
        let name = names.plain(r.name);
        match r.domain {
            RangeDomain::Host => complete_head(
                b,
                "user_annotation",
                name,
                host_lane(r.process, r.thread),
                r.start_ns,
                r.end_ns,
            ),
            RangeDomain::Gpu => complete_head(
                b,
                "gpu_user_annotation",
                name,
                gpu_lane(
                    r.device.unwrap_or(0),
                    r.stream.map_or(-1, |s| rows.tid(Some(s), rows.ranges[i])),
                ),
                r.start_ns,
                r.end_ns,
            ),
        }
        // A GPU range's device and stream, for the importer: its row need not be the stream's.
        // The NVTX domain (`nvtxDomainCreate`'s name, e.g. NCCL) when not the default.
        let gpu = match (r.domain, r.stream) {
            (RangeDomain::Gpu, Some(st)) => Some(st),
            _ => None,
        };
        if gpu.is_some() || r.nvtx_domain.is_some() {
            b.extend_from_slice(b",\"args\":{");
            if let Some(st) = gpu {
                b.extend_from_slice(b"\"device\":");
                push_u64(b, u64::from(r.device.unwrap_or(0)));
                arg(b, "stream", st);
                if r.nvtx_domain.is_some() {
                    b.push(b',');
                }
            }
            if let Some(d) = &r.nvtx_domain {
                b.extend_from_slice(b"\"domain\":");
                b.extend_from_slice(serde_json::to_string(&**d).unwrap_or_default().as_bytes());
            }
            b.push(b'}');
        }
        b.push(b'}');
        ev.end()?;
    }

    for mk in &t.marks {
        let b = ev.begin();
        b.extend_from_slice(b"{\"ph\":\"i\",\"cat\":\"user_annotation\",\"name\":");
        b.extend_from_slice(names.plain(mk.name));
        host_lane(mk.process, mk.thread)(b);
        b.extend_from_slice(b",\"ts\":");
        push_us(b, mk.ts_ns);
        b.extend_from_slice(b",\"s\":\"t\"");
        if let Some(d) = &mk.nvtx_domain {
            b.extend_from_slice(b",\"args\":{\"domain\":");
            b.extend_from_slice(serde_json::to_string(&**d).unwrap_or_default().as_bytes());
            b.push(b'}');
        }
        b.push(b'}');
        ev.end()?;
    }

    for o in &t.overheads {
        let b = ev.begin();
        complete_head(
            b,
            "overhead",
            names.plain(o.kind),
            host_lane(o.process, o.thread),
            o.start_ns,
            o.end_ns,
        );
        b.push(b'}');
        ev.end()?;
    }

    write_counter_events(&mut ev, t)?;

    let events = ev.n;
    w.write_all(b"\n]\n}\n")?;
    Ok(Written {
        events,
        flows,
        inverted: lanes.inverted,
        rows_past_u32_tid: rows.rows_past_u32_tid() as u64,
    })
}

/// Hardware counters as `"ph":"C"` events: a counter track per metric on each GPU's process
/// (`pid` = the device, `name` = the track's name, the value in `args.value`), one sample per
/// profiled kernel (`cat` `gpu_counter`) and one per PM sample (`cat` `gpu_pm_sample`, at the
/// sample's start), placed as [`crate::counter_tracks`] says. Viewers draw them; the Kineto
/// importer skips them (the CSV and Parquet tables are the exports to read values from).
fn write_counter_events<W: Write>(ev: &mut Events<'_, W>, t: &Trace) -> io::Result<()> {
    use crate::counter_tracks::Source;
    let c = crate::counter_tracks::counter_timeline(t);
    let heads: Vec<Vec<u8>> = c
        .tracks
        .iter()
        .map(|k| {
            let cat: &[u8] = match k.source {
                Source::Kernel => b"gpu_counter",
                Source::PmSample => b"gpu_pm_sample",
            };
            let mut b = b"{\"ph\":\"C\",\"cat\":\"".to_vec();
            b.extend_from_slice(cat);
            b.extend_from_slice(b"\",\"name\":");
            b.extend_from_slice(&quoted(&k.name(t)));
            b.extend_from_slice(b",\"pid\":");
            push_u64(&mut b, u64::from(k.device));
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
fn write_metadata<W: Write>(
    ev: &mut Events<'_, W>,
    t: &Trace,
    lanes: &Lanes,
    rows: &GpuRows,
) -> io::Result<()> {
    use serde_json::Value;
    let mut devices: BTreeSet<u32> = rows.lanes.iter().map(|l| l.0).collect();
    devices.extend(rows.streamless_ranges.iter().copied());
    devices.extend(t.meta.devices.iter().map(|d| d.device));
    for &d in &devices {
        let lane = |b: &mut Vec<u8>| {
            b.extend_from_slice(b",\"pid\":");
            push_u64(b, u64::from(d));
            b.extend_from_slice(b",\"tid\":0");
        };
        meta_event(
            ev,
            "process_name",
            lane,
            "name",
            &Value::from(format!("GPU {d}")),
        )?;
        if let Some(p) = t.meta.devices.iter().find(|p| p.device == d) {
            if !p.name.is_empty() {
                meta_event(
                    ev,
                    "process_labels",
                    lane,
                    "labels",
                    &Value::from(p.name.clone()),
                )?;
            }
        }
        let sort = Value::from(5_000_000u64 + u64::from(d));
        meta_event(ev, "process_sort_index", lane, "sort_index", &sort)?;
    }
    // A stream's rows come one after another: its label is made once, and each row's name is
    // written into one reused string (128k overlapping kernels are 128k rows).
    let mut shown: Option<(Option<u64>, String)> = None;
    let mut name = String::new();
    for &(d, s, slot) in &rows.lanes {
        if shown.as_ref().is_none_or(|x| x.0 != s) {
            let label = match s {
                Some(s) => format!("stream {}", t.meta.show_id(s)),
                None => "no stream".to_owned(),
            };
            shown = Some((s, label));
        }
        let stream = shown.as_ref().map_or("", |x| x.1.as_str());
        let (row, sync) = (slot / 2 + 1, slot % 2 == 1);
        name.clear();
        // Writing to a String cannot fail.
        let _ = match (sync, row, s) {
            (false, 1, _) => write!(name, "{stream}"),
            (false, r, _) => write!(name, "{stream} (overlapping, row {r})"),
            (true, 1, None) => write!(name, "context-wide syncs"),
            (true, 1, Some(_)) => write!(name, "{stream} syncs"),
            (true, r, None) => write!(name, "context-wide syncs (row {r})"),
            (true, r, Some(_)) => write!(name, "{stream} syncs (row {r})"),
        };
        let tid = rows.tid(s, slot);
        // Rows of one stream together, the stream's own row first. (Rows past 65,535 share
        // the last sort index; they are far past the rows Perfetto shows apart anyway, see
        // `GpuRows::rows_past_u32_tid`.)
        let order = s.map_or(rows.base - 1, u128::from) * 65_536 + u128::from(slot.min(65_535));
        let sort = u64::try_from(order).unwrap_or(u64::MAX);
        meta_event(ev, "thread_name", gpu_lane(d, tid), "name", name.as_str())?;
        meta_event(
            ev,
            "thread_sort_index",
            gpu_lane(d, tid),
            "sort_index",
            &sort,
        )?;
    }
    for &d in &rows.streamless_ranges {
        let name = Value::from("annotations without a stream");
        meta_event(ev, "thread_name", gpu_lane(d, -1), "name", &name)?;
    }
    let processes: BTreeSet<u32> = lanes.host.iter().map(|l| l.0).collect();
    for &p in &processes {
        let lane = |b: &mut Vec<u8>| {
            b.extend_from_slice(b",\"pid\":");
            push_pid(b, p);
            b.extend_from_slice(b",\"tid\":0");
        };
        let name = if p == 0 {
            "unknown process".to_owned()
        } else {
            format!("process {p}")
        };
        meta_event(ev, "process_name", lane, "name", &Value::from(name))?;
        let sort = if p == 0 { -1 } else { i64::from(p) };
        meta_event(
            ev,
            "process_sort_index",
            lane,
            "sort_index",
            &Value::from(sort),
        )?;
    }
    for &(p, th) in &lanes.host {
        let name = format!("thread {th}");
        meta_event(
            ev,
            "thread_name",
            host_lane(p, th),
            "name",
            &Value::from(name),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_trace::SyncKind;

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
                "stream 7 (overlapping, row 2)"
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
