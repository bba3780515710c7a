//! The timeline that `convert --chrome` and `--perfetto` draw, decided once: for every record of
//! a trace, its lane (a GPU stream row or a host thread), category, name, times, arguments and
//! flow, and the names of the lanes. The Chrome writer (`chrome.rs`) and the Perfetto writer
//! (`perfetto.rs`) only encode it, so the two exports say the same thing about every record.
//!
//! Categories and argument names are torch.profiler's (Kineto's,
//! [`cutrace_trace::kineto::vocab`]): Holistic Trace Analysis and TensorBoard read the Chrome
//! export as a torch.profiler trace, and cutrace's Kineto importer reads it back to the same
//! records.
//!
//! | category | records | name |
//! |---|---|---|
//! | `kernel` | kernels | demangled, as `report` shows it |
//! | `gpu_memcpy` | copies | `Memcpy HtoD` (DtoH, DtoD, HtoH, PtoP, unknown) |
//! | `gpu_memset` | memsets | `Memset` |
//! | `cuda_sync` | synchronizations | `Event Sync`, `Stream Wait Event`, `Stream Sync`, `Context Sync`, `Unknown Sync` |
//! | `cuda_runtime`, `cuda_driver` | API calls | the function |
//! | `user_annotation` | NVTX ranges and marks | the range's or mark's |
//! | `gpu_user_annotation` | GPU annotation ranges (Kineto input) | the range's |
//! | `overhead` | CUPTI overhead | its kind |
//! | `cpu_op`, `python_function` | host ops (Kineto input; the `Operator` of 2020–2021 traces is written `cpu_op`) | the op's |
//! | `cpu_instant_event` | allocations and frees (Chrome only: Perfetto draws counter tracks) | `[memory]` |
//!
//! Where the two formats must differ, and why:
//!
//! | what | Chrome JSON | Perfetto protobuf | why |
//! |---|---|---|---|
//! | times | µs with three decimals, from a time base a whole second before the first record | CUPTI's integer ns | JSON viewers parse `ts` as a double, which has no ns resolution at Unix-epoch magnitudes |
//! | a GPU row | `pid` the device, `tid` = slot × base + stream ([`GpuRows::tid`]) | a child track of the GPU's track | JSON lanes are numbers; Perfetto's tracks are named by 64-bit uuids |
//! | GPU annotation ranges | on the stream's rows ([`GpuRows`]: one that crosses the stream's work goes to a further row) | rows of their own under the stream (`stream 7 annotations`) | Perfetto's tracks are cheap and named, so a stream's track holds only its work |
//! | host slices that cross on one thread | on the thread's lane (`tid` = the thread, which the importer reads back) | further rows under the thread (`thread T (overlap 1)`) | Perfetto pairs begins and ends per track, and would close the wrong slice |
//! | an unknown process | `pid` -1, as Kineto writes it | pid 2147483647 | trace_processor reads a process descriptor's pid as unsigned |
//! | a GPU's lane | `process_name` `GPU 0`, `process_labels` the device's name | track `GPU 0: NVIDIA H200` | Chrome's JSON has labels beside a process's name; a track has one name |
//! | flow | `s` on the call, `f` (`"bp": "e"`) on each device record, id = correlation id | one flow id per device record, listed on the call; a record that starts before its call (clock skew) steps the flow instead of ending it | trace_processor ignores the end of a flow it has not seen start |
//! | `grid`, `block` | JSON arrays `[x, y, z]` | the text `[x, y, z]` | a debug annotation is one value |

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use cutrace_analysis::correlate::ApiIndex;
use cutrace_analysis::display_name;
use cutrace_trace::kineto::vocab::{self, arg, cat};
use cutrace_trace::{
    ApiKind, Collective, FxHasher, MemoryLevel, MemoryOp, MemoryPlace, Ns, RangeDomain, StrId,
    Trace,
};

use crate::rows::{gpu_rows, GpuRows};

/// One record of the trace, by kind and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rec {
    Kernel(u32),
    Memcpy(u32),
    Memset(u32),
    Sync(u32),
    Api(u32),
    Range(u32),
    Overhead(u32),
    Mark(u32),
    HostOp(u32),
}

impl Rec {
    /// (kind 0–8, index).
    pub(crate) fn split(self) -> (u32, u32) {
        match self {
            Rec::Kernel(i) => (0, i),
            Rec::Memcpy(i) => (1, i),
            Rec::Memset(i) => (2, i),
            Rec::Sync(i) => (3, i),
            Rec::Api(i) => (4, i),
            Rec::Range(i) => (5, i),
            Rec::Overhead(i) => (6, i),
            Rec::Mark(i) => (7, i),
            Rec::HostOp(i) => (8, i),
        }
    }

    /// The inverse of [`Rec::split`] (a kind past 8 is a mark).
    pub(crate) fn join(kind: u32, i: u32) -> Rec {
        match kind {
            0 => Rec::Kernel(i),
            1 => Rec::Memcpy(i),
            2 => Rec::Memset(i),
            3 => Rec::Sync(i),
            4 => Rec::Api(i),
            5 => Rec::Range(i),
            6 => Rec::Overhead(i),
            8 => Rec::HostOp(i),
            _ => Rec::Mark(i),
        }
    }

    /// A record drawn at one time, not as a slice.
    pub(crate) fn is_instant(self) -> bool {
        matches!(self, Rec::Mark(_))
    }
}

/// Where a record is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// A row of a GPU stream ([`GpuRows`]); `stream` is `None` for context-wide work.
    Gpu {
        device: u32,
        stream: Option<u64>,
        slot: u32,
    },
    /// GPU annotation ranges without a stream (only in imported traces).
    GpuStreamless { device: u32 },
    /// A host thread; process 0 is one the trace does not know.
    Host { process: u32, thread: u64 },
}

/// A record's name: a string of the trace as it is, a kernel's (shown demangled:
/// [`Timeline::kernel_name`]), or one of cutrace's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Text(StrId),
    Kernel(StrId),
    Fixed(&'static str),
}

/// Where a writer puts a record's arguments, in the order the model gives them.
pub(crate) trait ArgSink {
    fn uint(&mut self, key: &'static str, v: u64);
    fn int(&mut self, key: &'static str, v: i64);
    fn float(&mut self, key: &'static str, v: f64);
    fn text(&mut self, key: &'static str, v: &str);
    /// A string of the trace's table, which a writer may encode once per id.
    fn string(&mut self, key: &'static str, id: StrId);
    /// A grid or block size.
    fn dims(&mut self, key: &'static str, v: [u32; 3]);
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// A trace's timeline (see the module doc).
pub(crate) struct Timeline<'t> {
    pub(crate) t: &'t Trace,
    pub(crate) rows: GpuRows,
    /// The report's join of device records to API calls.
    calls: ApiIndex,
    /// Per API call: whether a device record joins it.
    launches: Vec<bool>,
    collectives: FxMap<(u64, u32), &'t Collective>,
    /// Every host (process, thread) a record is drawn on.
    pub(crate) host_lanes: BTreeSet<(u32, u64)>,
    /// Records that end before they start: drawn with no length.
    pub(crate) inverted: u64,
    /// Kernel names as shown, by string id, demangled once each (`None`: as CUPTI named it).
    shown: Vec<OnceCell<Option<Box<str>>>>,
}

impl<'t> Timeline<'t> {
    pub(crate) fn new(t: &'t Trace) -> Self {
        let calls = ApiIndex::build(&t.api_calls);
        let mut launches = vec![false; t.api_calls.len()];
        let device_ids = t
            .kernels
            .iter()
            .map(|k| k.correlation_id)
            .chain(t.memcpys.iter().map(|r| r.correlation_id))
            .chain(t.memsets.iter().map(|r| r.correlation_id));
        for id in device_ids {
            if let Some(i) = calls.get(id) {
                launches[i] = true;
            }
        }
        let (host_lanes, inverted) = survey(t);
        Timeline {
            t,
            rows: gpu_rows(t),
            calls,
            launches,
            collectives: t
                .collectives
                .iter()
                .map(|c| ((c.correlation_id, c.device), c))
                .collect(),
            host_lanes,
            inverted,
            shown: (0..=t.strings.len()).map(|_| OnceCell::new()).collect(),
        }
    }

    /// Every record, in the order the Chrome export lists them: API calls, kernels, copies,
    /// memsets, synchronizations, ranges, marks, overheads, host ops.
    pub(crate) fn records(&self) -> impl Iterator<Item = Rec> + 't {
        let t = self.t;
        let n = |len: usize| 0..len as u32;
        n(t.api_calls.len())
            .map(Rec::Api)
            .chain(n(t.kernels.len()).map(Rec::Kernel))
            .chain(n(t.memcpys.len()).map(Rec::Memcpy))
            .chain(n(t.memsets.len()).map(Rec::Memset))
            .chain(n(t.syncs.len()).map(Rec::Sync))
            .chain(n(t.ranges.len()).map(Rec::Range))
            .chain(n(t.marks.len()).map(Rec::Mark))
            .chain(n(t.overheads.len()).map(Rec::Overhead))
            .chain(n(t.host_ops.len()).map(Rec::HostOp))
    }

    pub(crate) fn lane(&self, rec: Rec) -> Lane {
        let t = self.t;
        let rows = &self.rows;
        let gpu = |device, stream, slot| Lane::Gpu {
            device,
            stream,
            slot,
        };
        match rec {
            Rec::Kernel(i) => {
                let k = &t.kernels[i as usize];
                gpu(k.device, Some(k.stream), rows.kernels[i as usize])
            }
            Rec::Memcpy(i) => {
                let m = &t.memcpys[i as usize];
                gpu(m.device, Some(m.stream), rows.memcpys[i as usize])
            }
            Rec::Memset(i) => {
                let m = &t.memsets[i as usize];
                gpu(m.device, Some(m.stream), rows.memsets[i as usize])
            }
            Rec::Sync(i) => {
                let s = &t.syncs[i as usize];
                gpu(s.device, s.stream, rows.syncs[i as usize])
            }
            Rec::Range(i) => {
                let r = &t.ranges[i as usize];
                let device = r.device.unwrap_or(0);
                match (r.domain, r.stream) {
                    (RangeDomain::Host, _) => Lane::Host {
                        process: r.process,
                        thread: r.thread,
                    },
                    (RangeDomain::Gpu, Some(s)) => gpu(device, Some(s), rows.ranges[i as usize]),
                    (RangeDomain::Gpu, None) => Lane::GpuStreamless { device },
                }
            }
            Rec::Api(i) => {
                let a = &t.api_calls[i as usize];
                Lane::Host {
                    process: a.process,
                    thread: a.thread,
                }
            }
            Rec::Overhead(i) => {
                let o = &t.overheads[i as usize];
                Lane::Host {
                    process: o.process,
                    thread: o.thread,
                }
            }
            Rec::Mark(i) => {
                let m = &t.marks[i as usize];
                Lane::Host {
                    process: m.process,
                    thread: m.thread,
                }
            }
            Rec::HostOp(i) => {
                let o = &t.host_ops[i as usize];
                Lane::Host {
                    process: o.process,
                    thread: o.thread,
                }
            }
        }
    }

    pub(crate) fn category(&self, rec: Rec) -> &'static str {
        let t = self.t;
        match rec {
            Rec::Kernel(_) => cat::KERNEL,
            Rec::Memcpy(_) => cat::GPU_MEMCPY,
            Rec::Memset(_) => cat::GPU_MEMSET,
            Rec::Sync(_) => cat::CUDA_SYNC,
            Rec::Api(i) => match t.api_calls[i as usize].kind {
                ApiKind::Runtime => cat::CUDA_RUNTIME,
                ApiKind::Driver => cat::CUDA_DRIVER,
            },
            Rec::Range(i) => match t.ranges[i as usize].domain {
                RangeDomain::Host => cat::USER_ANNOTATION,
                RangeDomain::Gpu => cat::GPU_USER_ANNOTATION,
            },
            Rec::Mark(_) => cat::USER_ANNOTATION,
            Rec::Overhead(_) => cat::OVERHEAD,
            Rec::HostOp(i) => t.host_ops[i as usize].kind.label(),
        }
    }

    pub(crate) fn name(&self, rec: Rec) -> Name {
        let t = self.t;
        match rec {
            Rec::Kernel(i) => Name::Kernel(t.kernels[i as usize].name),
            Rec::Memcpy(i) => Name::Fixed(vocab::copy_name(t.memcpys[i as usize].kind)),
            Rec::Memset(_) => Name::Fixed(vocab::MEMSET),
            Rec::Sync(i) => Name::Fixed(vocab::sync_name(t.syncs[i as usize].kind)),
            Rec::Api(i) => Name::Text(t.api_calls[i as usize].name),
            Rec::Range(i) => Name::Text(t.ranges[i as usize].name),
            Rec::Overhead(i) => Name::Text(t.overheads[i as usize].kind),
            Rec::Mark(i) => Name::Text(t.marks[i as usize].name),
            Rec::HostOp(i) => Name::Text(t.host_ops[i as usize].name),
        }
    }

    /// A kernel's name as shown: demangled, as `report` shows it.
    pub(crate) fn kernel_name(&self, id: StrId) -> &str {
        self.shown_name(id).unwrap_or(self.t.str(id))
    }

    /// The demangled name, when it differs from CUPTI's.
    fn shown_name(&self, id: StrId) -> Option<&str> {
        let slot = (id as usize).min(self.t.strings.len());
        self.shown[slot]
            .get_or_init(|| {
                let raw = self.t.str(id);
                let shown = display_name(raw);
                (shown != raw).then(|| shown.into_owned().into_boxed_str())
            })
            .as_deref()
    }

    /// Start and end; a record that ends before it starts ends where it starts (counted in
    /// [`Timeline::inverted`]); an instant's end is its time.
    pub(crate) fn span(&self, rec: Rec) -> (Ns, Ns) {
        let t = self.t;
        let (s, e) = match rec {
            Rec::Kernel(i) => {
                let r = &t.kernels[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Memcpy(i) => {
                let r = &t.memcpys[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Memset(i) => {
                let r = &t.memsets[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Sync(i) => {
                let r = &t.syncs[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Api(i) => {
                let r = &t.api_calls[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Range(i) => {
                let r = &t.ranges[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Overhead(i) => {
                let r = &t.overheads[i as usize];
                (r.start_ns, r.end_ns)
            }
            Rec::Mark(i) => {
                let ts = t.marks[i as usize].ts_ns;
                (ts, ts)
            }
            Rec::HostOp(i) => {
                let r = &t.host_ops[i as usize];
                (r.start_ns, r.end_ns)
            }
        };
        (s, e.max(s))
    }

    /// The flow a device record ends: the index of the API call it joins (the report's join:
    /// where two calls share a correlation id, the same one wins). `None` for an orphan and for
    /// records that are not device records.
    pub(crate) fn launched_by(&self, rec: Rec) -> Option<usize> {
        let t = self.t;
        let corr = match rec {
            Rec::Kernel(i) => t.kernels[i as usize].correlation_id,
            Rec::Memcpy(i) => t.memcpys[i as usize].correlation_id,
            Rec::Memset(i) => t.memsets[i as usize].correlation_id,
            _ => return None,
        };
        self.calls.get(corr)
    }

    /// Whether API call `i` starts flows: a device record joins it.
    pub(crate) fn launches(&self, i: usize) -> bool {
        self.launches[i]
    }

    /// A record's arguments, in order.
    pub(crate) fn args(&self, rec: Rec, out: &mut impl ArgSink) {
        let t = self.t;
        match rec {
            Rec::Kernel(i) => self.kernel_args(i as usize, out),
            Rec::Memcpy(i) => {
                let m = &t.memcpys[i as usize];
                gpu_args(out, m.device, m.context, Some(m.stream), m.correlation_id);
                out.uint(arg::BYTES, m.bytes);
                bandwidth(out, m.bytes, m.start_ns, m.end_ns);
            }
            Rec::Memset(i) => {
                let m = &t.memsets[i as usize];
                gpu_args(out, m.device, m.context, Some(m.stream), m.correlation_id);
                out.uint(arg::BYTES, m.bytes);
                out.uint(arg::VALUE, u64::from(m.value));
                bandwidth(out, m.bytes, m.start_ns, m.end_ns);
            }
            Rec::Sync(i) => {
                let s = &t.syncs[i as usize];
                out.text(arg::SYNC_KIND, vocab::sync_name(s.kind));
                // What an event's waiter waited for, as Kineto writes it: the critical path of
                // the export reads them back.
                if let Some(w) = s.wait_on_stream {
                    out.uint(arg::WAIT_ON_STREAM, w);
                }
                if let Some(c) = s.event_record_correlation {
                    out.uint(arg::WAIT_ON_EVENT_RECORD, c);
                }
                gpu_args(out, s.device, s.context, s.stream, s.correlation_id);
            }
            Rec::Api(i) => {
                let a = &t.api_calls[i as usize];
                out.uint(arg::CBID, u64::from(a.cbid));
                out.uint(arg::CORRELATION, a.correlation_id);
                if a.return_value != 0 {
                    out.int(arg::RETURN_VALUE, i64::from(a.return_value));
                }
            }
            Rec::Range(i) => {
                let r = &t.ranges[i as usize];
                // A GPU range's device and stream, for the importer: its row need not be the
                // stream's.
                if let (RangeDomain::Gpu, Some(s)) = (r.domain, r.stream) {
                    out.uint(arg::DEVICE, u64::from(r.device.unwrap_or(0)));
                    out.uint(arg::STREAM, s);
                }
                if let Some(d) = &r.nvtx_domain {
                    out.text(arg::DOMAIN, d);
                }
            }
            Rec::Mark(i) => {
                if let Some(d) = &t.marks[i as usize].nvtx_domain {
                    out.text(arg::DOMAIN, d);
                }
            }
            Rec::Overhead(_) => {}
            Rec::HostOp(i) => {
                let o = &t.host_ops[i as usize];
                if o.external_id != 0 {
                    out.uint(arg::EXTERNAL_ID, o.external_id);
                }
            }
        }
    }

    /// A memory event's arguments, as torch.profiler writes a `[memory]` event's (the Chrome
    /// export writes each as one, `cpu_instant_event` on its host thread; Perfetto draws memory
    /// as counter tracks instead, `counter_tracks.rs`). A free's `Bytes` is negative; an event
    /// of unknown size has none.
    pub(crate) fn memory_args(&self, i: usize, out: &mut impl ArgSink) {
        let m = &self.t.memory[i];
        let (kind, device) = match m.place {
            MemoryPlace::Cpu => (0, -1),
            MemoryPlace::Gpu => (1, i64::from(m.device)),
            MemoryPlace::Other(n) => (u64::from(n), i64::from(m.device)),
        };
        out.uint(arg::DEVICE_TYPE, kind);
        out.int(arg::DEVICE_ID, device);
        if let Some(a) = m.address {
            out.uint(arg::ADDR, a);
        }
        let bytes = m.bytes.and_then(|b| i64::try_from(b).ok());
        match (m.op, bytes) {
            (MemoryOp::Alloc, Some(b)) => out.int(arg::MEM_BYTES, b),
            (MemoryOp::Free, Some(b)) => out.int(arg::MEM_BYTES, -b),
            _ => {}
        }
        if let Some(v) = m.total_allocated {
            out.uint(arg::TOTAL_ALLOCATED, v);
        }
        if let Some(v) = m.total_reserved {
            out.uint(arg::TOTAL_RESERVED, v);
        }
        if m.level == MemoryLevel::Driver {
            out.text(arg::MEMORY_LEVEL, arg::DRIVER_LEVEL);
        }
        if m.correlation_id != 0 {
            out.uint(arg::CORRELATION, m.correlation_id);
        }
    }

    fn kernel_args(&self, i: usize, out: &mut impl ArgSink) {
        let k = &self.t.kernels[i];
        gpu_args(out, k.device, k.context, Some(k.stream), k.correlation_id);
        let l = self.t.launch(k);
        out.uint(arg::REGISTERS_PER_THREAD, u64::from(l.registers_per_thread));
        // Kineto's "shared memory" is static + dynamic.
        let (st, dy) = (l.static_shared_bytes, l.dynamic_shared_bytes);
        out.uint(arg::SHARED_MEMORY, u64::from(st) + u64::from(dy));
        out.uint(arg::STATIC_SHARED_MEMORY, u64::from(st));
        out.uint(arg::DYNAMIC_SHARED_MEMORY, u64::from(dy));
        out.dims(arg::GRID, l.grid);
        out.dims(arg::BLOCK, l.block);
        if l.graph_id != 0 {
            out.uint(arg::GRAPH_ID, u64::from(l.graph_id));
        }
        // CUPTI's name, where the one shown is demangled: the importer takes it back.
        if self.shown_name(k.name).is_some() {
            out.string(arg::MANGLED, k.name);
        }
        if !self.collectives.is_empty() {
            if let Some(c) = self.collectives.get(&(k.correlation_id, k.device)) {
                collective_args(out, c);
            }
        }
    }

    /// The name of the GPU row of `stream` (`None`: context-wide work) at `slot`, into `out`
    /// (cleared first): `stream 7`, `stream 7 syncs`, `stream 7 (overlap 1)`, `stream 7 syncs
    /// (overlap 1)`, `context-wide syncs`. `label` keeps the last stream's label: a stream's
    /// rows come one after another, and 128k rows would be 128k labels.
    pub(crate) fn row_name(
        &self,
        stream: Option<u64>,
        slot: u32,
        label: &mut StreamLabel,
        out: &mut String,
    ) {
        out.clear();
        let syncs = slot % 2 == 1;
        match stream {
            Some(s) => {
                if label.stream != Some(s) {
                    label.stream = Some(s);
                    label.text = format!("stream {}", self.t.meta.show_id(s));
                }
                out.push_str(&label.text);
                if syncs {
                    out.push_str(" syncs");
                }
            }
            None if syncs => out.push_str("context-wide syncs"),
            None => out.push_str("no stream"),
        }
        if slot >= 2 {
            // Writing to a String cannot fail.
            let _ = write!(out, " (overlap {})", slot / 2);
        }
    }
}

/// The label of the stream whose rows are being named ([`Timeline::row_name`]).
#[derive(Default)]
pub(crate) struct StreamLabel {
    stream: Option<u64>,
    text: String,
}

/// The lane of GPU annotation ranges without a stream.
pub(crate) const STREAMLESS_ANNOTATIONS: &str = "annotations";

/// A GPU's name: `GPU 0`.
pub(crate) fn gpu_name(device: u32) -> String {
    format!("GPU {device}")
}

/// A GPU's name with the device's (`GPU 0: NVIDIA H200`), where the trace knows it.
pub(crate) fn gpu_label(t: &Trace, device: u32) -> String {
    match t.meta.devices.iter().find(|d| d.device == device) {
        Some(d) if !d.name.is_empty() => format!("GPU {device}: {}", d.name),
        _ => gpu_name(device),
    }
}

/// A host process's name; 0 is one the trace does not know.
pub(crate) fn process_name(process: u32) -> String {
    if process == 0 {
        "unknown process".to_owned()
    } else {
        format!("process {process}")
    }
}

/// A host thread's name.
pub(crate) fn thread_name(thread: u64) -> String {
    format!("thread {thread}")
}

/// Host lanes records land on, and how many records end before they start.
fn survey(t: &Trace) -> (BTreeSet<(u32, u64)>, u64) {
    let mut host = BTreeSet::new();
    let mut inverted = 0u64;
    let mut span = |s: Ns, e: Ns| inverted += u64::from(e < s);
    for k in &t.kernels {
        span(k.start_ns, k.end_ns);
    }
    for m in &t.memcpys {
        span(m.start_ns, m.end_ns);
    }
    for m in &t.memsets {
        span(m.start_ns, m.end_ns);
    }
    for s in &t.syncs {
        span(s.start_ns, s.end_ns);
    }
    for a in &t.api_calls {
        host.insert((a.process, a.thread));
        span(a.start_ns, a.end_ns);
    }
    for r in &t.ranges {
        if r.domain == RangeDomain::Host {
            host.insert((r.process, r.thread));
        }
        span(r.start_ns, r.end_ns);
    }
    for m in &t.marks {
        host.insert((m.process, m.thread));
    }
    for o in &t.overheads {
        host.insert((o.process, o.thread));
        span(o.start_ns, o.end_ns);
    }
    for o in &t.host_ops {
        host.insert((o.process, o.thread));
        span(o.start_ns, o.end_ns);
    }
    for m in &t.memory {
        host.insert((m.process, m.thread));
    }
    (host, inverted)
}

/// `device`, `context`, `stream` (when there is one), `correlation`.
fn gpu_args(out: &mut impl ArgSink, device: u32, context: u32, stream: Option<u64>, corr: u64) {
    out.uint(arg::DEVICE, u64::from(device));
    out.uint(arg::CONTEXT, u64::from(context));
    if let Some(s) = stream {
        out.uint(arg::STREAM, s);
    }
    out.uint(arg::CORRELATION, corr);
}

/// GB/s of a copy or memset (bytes per ns), as Kineto writes it; "N/A" when it took no time.
fn bandwidth(out: &mut impl ArgSink, bytes: u64, start: Ns, end: Ns) {
    match end.saturating_sub(start) {
        0 => out.text(arg::BANDWIDTH, "N/A"),
        // A derived figure for display; times stay integers.
        d => out.float(arg::BANDWIDTH, bytes as f64 / d as f64),
    }
}

/// A communication kernel's collective ([`Trace::collectives`]) as the args torch's Kineto
/// copies from `record_param_comms` onto the kernels it launched (each only when known), so
/// that the Kineto importer, HTA and cutrace's job report read the collective back from the
/// kernel itself.
fn collective_args(out: &mut impl ArgSink, c: &Collective) {
    out.string(arg::COLLECTIVE_NAME, c.name);
    if let Some(v) = c.group_name {
        out.string(arg::GROUP_NAME, v);
    }
    if let Some(v) = c.group_desc {
        out.string(arg::GROUP_DESC, v);
    }
    if let Some(n) = c.group_size {
        out.uint(arg::GROUP_SIZE, u64::from(n));
    }
    if let Some(n) = c.seq {
        out.uint(arg::SEQ, n);
    }
    if let Some(n) = c.in_nelems {
        out.uint(arg::IN_NELEMS, n);
    }
    if let Some(n) = c.out_nelems {
        out.uint(arg::OUT_NELEMS, n);
    }
    if let Some(v) = c.dtype {
        out.string(arg::DTYPE, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a sink is given, as text.
    #[derive(Default)]
    struct Listed(Vec<String>);

    impl ArgSink for Listed {
        fn uint(&mut self, key: &'static str, v: u64) {
            self.0.push(format!("{key}={v}"));
        }
        fn int(&mut self, key: &'static str, v: i64) {
            self.0.push(format!("{key}={v}"));
        }
        fn float(&mut self, key: &'static str, v: f64) {
            self.0.push(format!("{key}={v}"));
        }
        fn text(&mut self, key: &'static str, v: &str) {
            self.0.push(format!("{key}={v:?}"));
        }
        fn string(&mut self, key: &'static str, id: StrId) {
            self.0.push(format!("{key}=#{id}"));
        }
        fn dims(&mut self, key: &'static str, v: [u32; 3]) {
            self.0.push(format!("{key}={v:?}"));
        }
    }

    fn trace() -> Trace {
        Trace {
            strings: vec!["_Z4spinyPi".into(), "cudaLaunchKernel".into(), "k".into()],
            kernels: vec![
                cutrace_trace::Kernel {
                    device: 0,
                    context: 1,
                    stream: 7,
                    correlation_id: 5,
                    start_ns: 100,
                    end_ns: 90,
                    name: 0,
                    launch: 0,
                },
                cutrace_trace::Kernel {
                    device: 0,
                    context: 1,
                    stream: 7,
                    correlation_id: 6,
                    start_ns: 200,
                    end_ns: 300,
                    name: 2,
                    launch: 0,
                },
            ],
            memsets: vec![cutrace_trace::Memset {
                bytes: 64,
                value: 0,
                device: 0,
                context: 1,
                stream: 7,
                correlation_id: 9,
                start_ns: 400,
                end_ns: 400,
            }],
            api_calls: vec![cutrace_trace::ApiCall {
                kind: ApiKind::Runtime,
                name: 1,
                cbid: 211,
                process: 12,
                thread: 34,
                correlation_id: 5,
                start_ns: 50,
                end_ns: 60,
                return_value: -2,
            }],
            ..Trace::default()
        }
    }

    fn args(tl: &Timeline<'_>, rec: Rec) -> Vec<String> {
        let mut l = Listed::default();
        tl.args(rec, &mut l);
        l.0
    }

    #[test]
    fn records_carry_kineto_categories_names_and_args() {
        let t = trace();
        let tl = Timeline::new(&t);
        assert_eq!(
            tl.records().collect::<Vec<_>>(),
            [Rec::Api(0), Rec::Kernel(0), Rec::Kernel(1), Rec::Memset(0)]
        );
        assert_eq!(tl.category(Rec::Api(0)), "cuda_runtime");
        assert_eq!(tl.category(Rec::Memset(0)), "gpu_memset");
        assert_eq!(tl.name(Rec::Memset(0)), Name::Fixed("Memset"));
        assert_eq!(tl.kernel_name(0), "spin(unsigned long long, int*)");
        assert_eq!(tl.kernel_name(2), "k");
        assert_eq!(
            args(&tl, Rec::Kernel(0)),
            [
                "device=0",
                "context=1",
                "stream=7",
                "correlation=5",
                "registers per thread=0",
                "shared memory=0",
                "static shared memory=0",
                "dynamic shared memory=0",
                "grid=[0, 0, 0]",
                "block=[0, 0, 0]",
                "mangled=#0",
            ]
        );
        // A name shown as it is has no `mangled`.
        assert!(!args(&tl, Rec::Kernel(1))
            .iter()
            .any(|a| a.starts_with("mangled")));
        assert_eq!(
            args(&tl, Rec::Memset(0)),
            [
                "device=0",
                "context=1",
                "stream=7",
                "correlation=9",
                "bytes=64",
                "value=0",
                "memory bandwidth (GB/s)=\"N/A\"",
            ]
        );
        assert_eq!(
            args(&tl, Rec::Api(0)),
            ["cbid=211", "correlation=5", "return value=-2"]
        );
    }

    #[test]
    fn times_flows_and_lanes() {
        let t = trace();
        let tl = Timeline::new(&t);
        // Ends before it starts: drawn with no length, and counted.
        assert_eq!(tl.span(Rec::Kernel(0)), (100, 100));
        assert_eq!(tl.inverted, 1);
        assert_eq!(tl.launched_by(Rec::Kernel(0)), Some(0));
        assert_eq!(tl.launched_by(Rec::Kernel(1)), None);
        assert_eq!(tl.launched_by(Rec::Api(0)), None);
        assert!(tl.launches(0));
        assert_eq!(
            tl.lane(Rec::Api(0)),
            Lane::Host {
                process: 12,
                thread: 34
            }
        );
        assert_eq!(
            tl.lane(Rec::Kernel(1)),
            Lane::Gpu {
                device: 0,
                stream: Some(7),
                slot: 0
            }
        );
        assert_eq!(
            tl.host_lanes.iter().copied().collect::<Vec<_>>(),
            [(12, 34)]
        );
    }

    #[test]
    fn rows_are_named_by_stream_family_and_overlap() {
        let t = Trace::default();
        let tl = Timeline::new(&t);
        let mut label = StreamLabel::default();
        let mut out = String::new();
        let mut name = |stream, slot| {
            tl.row_name(stream, slot, &mut label, &mut out);
            out.clone()
        };
        assert_eq!(name(Some(7), 0), "stream 7");
        assert_eq!(name(Some(7), 1), "stream 7 syncs");
        assert_eq!(name(Some(7), 2), "stream 7 (overlap 1)");
        assert_eq!(name(Some(7), 5), "stream 7 syncs (overlap 2)");
        assert_eq!(name(None, 1), "context-wide syncs");
        assert_eq!(name(None, 3), "context-wide syncs (overlap 1)");
        assert_eq!(process_name(0), "unknown process");
    }

    #[test]
    fn a_record_and_its_kind_and_index_are_one() {
        for k in 0..9 {
            for i in [0, 1, u32::MAX] {
                assert_eq!(Rec::join(k, i).split(), (k, i));
            }
        }
    }
}
