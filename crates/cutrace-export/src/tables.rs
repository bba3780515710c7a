//! The trace as flat, typed tables: one per record kind, one column per field. `convert --csv`
//! and `convert --parquet` both write these, so the two exports always hold the same columns.

use std::borrow::Cow;
use std::ops::Range;

use cutrace_trace::{ApiKind, RangeDomain, StrId, Trace};

/// One column's values, typed as the model holds them.
pub enum Values<'a> {
    U32(Vec<u32>),
    U64(Vec<u64>),
    I32(Vec<i32>),
    /// `None` is a value the source did not have (a CSV empty field, a Parquet null).
    OptU64(Vec<Option<u64>>),
    OptU32(Vec<Option<u32>>),
    Str(Vec<Cow<'a, str>>),
    OptStr(Vec<Option<Cow<'a, str>>>),
    /// A measurement; `None` is a value the source marked unavailable (a counter's NaN).
    OptF64(Vec<Option<f64>>),
}

impl Values<'_> {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            Values::U32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::OptU64(v) => v.len(),
            Values::OptU32(v) => v.len(),
            Values::Str(v) => v.len(),
            Values::OptStr(v) => v.len(),
            Values::OptF64(v) => v.len(),
        }
    }
}

impl<'a> Values<'a> {
    /// The values of rows `r` (a copy; the text stays borrowed where it was).
    pub fn slice(&self, r: Range<usize>) -> Values<'a> {
        match self {
            Values::U32(v) => Values::U32(v[r].to_vec()),
            Values::U64(v) => Values::U64(v[r].to_vec()),
            Values::I32(v) => Values::I32(v[r].to_vec()),
            Values::OptU64(v) => Values::OptU64(v[r].to_vec()),
            Values::OptU32(v) => Values::OptU32(v[r].to_vec()),
            Values::Str(v) => Values::Str(v[r].to_vec()),
            Values::OptStr(v) => Values::OptStr(v[r].to_vec()),
            Values::OptF64(v) => Values::OptF64(v[r].to_vec()),
        }
    }
}

/// Makes a column's values for a range of rows.
type Fill<'a> = Box<dyn Fn(Range<usize>) -> Values<'a> + 'a>;

/// One column: its name and its values, made a range of rows at a time when a writer asks, so a
/// table of millions of rows is never held whole (a kernel row as values is about 100 bytes,
/// twice the record's size).
pub struct Column<'a> {
    pub name: &'static str,
    fill: Fill<'a>,
}

impl<'a> Column<'a> {
    /// A column whose values for rows `r` are `fill(r)`.
    pub fn new(name: &'static str, fill: impl Fn(Range<usize>) -> Values<'a> + 'a) -> Self {
        Column {
            name,
            fill: Box::new(fill),
        }
    }

    /// A column of values already held.
    pub fn held(name: &'static str, values: Values<'a>) -> Self {
        Column::new(name, move |r| values.slice(r))
    }

    /// The values of rows `r`.
    pub fn values(&self, r: Range<usize>) -> Values<'a> {
        (self.fill)(r)
    }

    /// No values, of the column's type (for a writer's schema).
    pub fn kind(&self) -> Values<'a> {
        (self.fill)(0..0)
    }
}

pub struct Table<'a> {
    /// File stem: `kernels` → kernels.csv / kernels.parquet.
    pub name: &'static str,
    pub columns: Vec<Column<'a>>,
    /// Rows of every column.
    pub rows: usize,
}

impl Table<'_> {
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// The tables, in the order they are written.
pub const NAMES: [&str; 8] = [
    "kernels",
    "api_calls",
    "memcpys",
    "memsets",
    "syncs",
    "ranges",
    "marks",
    "overheads",
];

/// The table of hardware counter values (`cutrace profile`), written only for traces that
/// have counters, so other traces' exports keep exactly the files they had.
pub const COUNTERS: &str = "kernel_metrics";

/// The table of PM samples (`cutrace sample`), written only for traces that have them.
pub const PM_SAMPLES: &str = "pm_samples";

/// The table of PC samples (`cutrace profile --pc-sampling`), written only for traces that
/// have them.
pub const PC_SAMPLES: &str = "pc_samples";

/// The table of allocations and frees (torch.profiler's `[memory]` events), written only for
/// traces that have them.
pub const MEMORY: &str = "memory";

/// The table of host ops (torch.profiler's `cpu_op`, `python_function`, and the `Operator` of
/// 2020–2021 traces), written only for traces that have them.
pub const CPU_OPS: &str = "cpu_ops";

/// Every table a trace may be exported to: [`NAMES`], then [`COUNTERS`], [`PM_SAMPLES`],
/// [`PC_SAMPLES`], [`MEMORY`] and [`CPU_OPS`].
pub const ALL_NAMES: [&str; 13] = [
    "kernels",
    "api_calls",
    "memcpys",
    "memsets",
    "syncs",
    "ranges",
    "marks",
    "overheads",
    COUNTERS,
    PM_SAMPLES,
    PC_SAMPLES,
    MEMORY,
    CPU_OPS,
];

/// The tables `t` is exported to, in [`ALL_NAMES`] order: [`NAMES`], [`COUNTERS`] when it has
/// counters, [`PM_SAMPLES`] when it has PM samples, [`PC_SAMPLES`] when it has PC samples (or
/// says it was sampled), [`MEMORY`] when it has memory events and [`CPU_OPS`] when it has host
/// ops, so other traces' exports keep exactly the files they had.
pub fn names_for(t: &Trace) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = NAMES.to_vec();
    if !t.kernel_metrics.is_empty() || t.meta.counters.is_some() {
        v.push(COUNTERS);
    }
    if !t.pm_samples.is_empty() || t.meta.pm_sampling.is_some() {
        v.push(PM_SAMPLES);
    }
    if !t.pc_samples.is_empty() || t.meta.pc_sampling.is_some() {
        v.push(PC_SAMPLES);
    }
    if !t.memory.is_empty() {
        v.push(MEMORY);
    }
    if !t.host_ops.is_empty() {
        v.push(CPU_OPS);
    }
    v
}

/// One column of `recs`: `name`, of values `Values::$ty`, each made from a record by `$e`.
macro_rules! col {
    ($recs:expr, $ty:ident, $name:literal, |$r:ident| $e:expr) => {{
        let recs = &$recs[..];
        Column::new($name, move |rows: Range<usize>| {
            Values::$ty(recs[rows].iter().map(|$r| $e).collect())
        })
    }};
}

/// Builds one table (by its name in [`ALL_NAMES`]). Nothing is copied here: each column makes its
/// values from the records when a writer asks for a range of rows.
pub fn build<'a>(t: &'a Trace, name: &str) -> Table<'a> {
    let (columns, rows) = match name {
        "kernels" => (kernel_columns(t), t.kernels.len()),
        "api_calls" => (api_call_columns(t), t.api_calls.len()),
        "memcpys" => (memcpy_columns(t), t.memcpys.len()),
        "memsets" => (memset_columns(t), t.memsets.len()),
        "syncs" => (sync_columns(t), t.syncs.len()),
        "ranges" => (range_columns(t), t.ranges.len()),
        "marks" => (mark_columns(t), t.marks.len()),
        "overheads" => (overhead_columns(t), t.overheads.len()),
        COUNTERS => (counter_columns(t), t.kernel_metrics.len()),
        PM_SAMPLES => (pm_sample_columns(t), t.pm_samples.len()),
        PC_SAMPLES => (pc_sample_columns(t), t.pc_samples.len()),
        MEMORY => (memory_columns(t), t.memory.len()),
        CPU_OPS => (host_op_columns(t), t.host_ops.len()),
        other => unreachable!("no table named {other}"),
    };
    Table {
        name: ALL_NAMES.iter().find(|n| **n == name).unwrap(),
        columns,
        rows,
    }
}

/// A string of the trace, borrowed.
fn text<'a>(t: &'a Trace) -> impl Fn(StrId) -> Cow<'a, str> + Copy {
    move |id| Cow::Borrowed(t.str(id))
}

/// The process that recorded a GPU record. In a trace merged from several processes, the one
/// whose part the stream id's offset (N·2³²) names (correlation id 0, "none", carries no
/// offset); in a one-process trace, its pid. Null where unknown (a torch.profiler trace does
/// not say; a part whose header was lost; a context-wide sync without a correlation id).
fn recorder_pid(t: &Trace) -> impl Fn(Option<u64>) -> Option<u32> + Copy + '_ {
    let merged = t.meta.id_parts.len() > 1;
    move |id: Option<u64>| {
        if merged {
            id.and_then(|id| t.meta.id_origin(id).0)
        } else {
            t.meta.pid
        }
    }
}

/// An NVTX domain's name, borrowed; `None` for the default domain.
fn domain(d: &Option<std::sync::Arc<str>>) -> Option<Cow<'_, str>> {
    d.as_deref().map(Cow::Borrowed)
}

/// One row per kernel, with its launch configuration.
fn kernel_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let pid = recorder_pid(t);
    let k = &t.kernels;
    vec![
        col!(k, U32, "device", |r| r.device),
        col!(k, U32, "context", |r| r.context),
        col!(k, U64, "stream", |r| r.stream),
        col!(k, U64, "correlation_id", |r| r.correlation_id),
        col!(k, U64, "start_ns", |r| r.start_ns),
        col!(k, U64, "end_ns", |r| r.end_ns),
        col!(k, Str, "name", |r| s(r.name)),
        col!(k, U32, "grid_x", |r| t.launch(r).grid[0]),
        col!(k, U32, "grid_y", |r| t.launch(r).grid[1]),
        col!(k, U32, "grid_z", |r| t.launch(r).grid[2]),
        col!(k, U32, "block_x", |r| t.launch(r).block[0]),
        col!(k, U32, "block_y", |r| t.launch(r).block[1]),
        col!(k, U32, "block_z", |r| t.launch(r).block[2]),
        col!(k, U32, "registers_per_thread", |r| t
            .launch(r)
            .registers_per_thread),
        col!(k, U32, "static_shared_bytes", |r| t
            .launch(r)
            .static_shared_bytes),
        col!(k, U32, "dynamic_shared_bytes", |r| t
            .launch(r)
            .dynamic_shared_bytes),
        col!(k, U32, "graph_id", |r| t.launch(r).graph_id),
        col!(k, OptU32, "pid", |r| pid(Some(r.stream))),
    ]
}

/// One row per runtime or driver call.
fn api_call_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let a = &t.api_calls;
    vec![
        col!(a, Str, "kind", |r| Cow::Borrowed(match r.kind {
            ApiKind::Runtime => "Runtime",
            ApiKind::Driver => "Driver",
        })),
        col!(a, Str, "name", |r| s(r.name)),
        col!(a, U32, "cbid", |r| u32::from(r.cbid)),
        col!(a, U32, "process", |r| r.process),
        col!(a, U64, "thread", |r| r.thread),
        col!(a, U64, "correlation_id", |r| r.correlation_id),
        col!(a, U64, "start_ns", |r| r.start_ns),
        col!(a, U64, "end_ns", |r| r.end_ns),
        col!(a, I32, "return_value", |r| r.return_value),
    ]
}

/// One row per copy.
fn memcpy_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let pid = recorder_pid(t);
    let m = &t.memcpys;
    vec![
        col!(m, Str, "kind", |r| Cow::Borrowed(r.kind.label())),
        col!(m, U64, "bytes", |r| r.bytes),
        col!(m, U32, "device", |r| r.device),
        col!(m, U32, "context", |r| r.context),
        col!(m, U64, "stream", |r| r.stream),
        col!(m, U64, "correlation_id", |r| r.correlation_id),
        col!(m, U64, "start_ns", |r| r.start_ns),
        col!(m, U64, "end_ns", |r| r.end_ns),
        col!(m, OptU32, "pid", |r| pid(Some(r.stream))),
    ]
}

/// One row per memset.
fn memset_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let pid = recorder_pid(t);
    let m = &t.memsets;
    vec![
        col!(m, U64, "bytes", |r| r.bytes),
        col!(m, U32, "value", |r| r.value),
        col!(m, U32, "device", |r| r.device),
        col!(m, U32, "context", |r| r.context),
        col!(m, U64, "stream", |r| r.stream),
        col!(m, U64, "correlation_id", |r| r.correlation_id),
        col!(m, U64, "start_ns", |r| r.start_ns),
        col!(m, U64, "end_ns", |r| r.end_ns),
        col!(m, OptU32, "pid", |r| pid(Some(r.stream))),
    ]
}

/// One row per synchronization.
fn sync_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let pid = recorder_pid(t);
    let nonzero = |id: u64| (id != 0).then_some(id);
    let y = &t.syncs;
    vec![
        col!(y, Str, "kind", |r| Cow::Borrowed(r.kind.label())),
        col!(y, U32, "device", |r| r.device),
        col!(y, U32, "context", |r| r.context),
        col!(y, OptU64, "stream", |r| r.stream),
        col!(y, U64, "correlation_id", |r| r.correlation_id),
        col!(y, U64, "start_ns", |r| r.start_ns),
        col!(y, U64, "end_ns", |r| r.end_ns),
        col!(y, OptU32, "pid", |r| pid(r
            .stream
            .or(nonzero(r.correlation_id)))),
    ]
}

/// One row per NVTX range, host or GPU.
fn range_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let g = &t.ranges;
    vec![
        // Host or Gpu (where the range was recorded); the NVTX domain is `nvtx_domain`.
        col!(g, Str, "domain", |r| Cow::Borrowed(match r.domain {
            RangeDomain::Host => "Host",
            RangeDomain::Gpu => "Gpu",
        })),
        col!(g, Str, "name", |r| s(r.name)),
        col!(g, U32, "process", |r| r.process),
        col!(g, U64, "thread", |r| r.thread),
        col!(g, U64, "start_ns", |r| r.start_ns),
        col!(g, U64, "end_ns", |r| r.end_ns),
        // GPU ranges only (torch's gpu_user_annotation); empty / null for host ranges.
        col!(g, OptU32, "device", |r| r.device),
        col!(g, OptU64, "stream", |r| r.stream),
        // Null for NVTX's default domain and where the source does not record domains.
        col!(g, OptStr, "nvtx_domain", |r| domain(&r.nvtx_domain)),
    ]
}

/// One row per NVTX mark.
fn mark_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let m = &t.marks;
    vec![
        col!(m, Str, "name", |r| s(r.name)),
        col!(m, U32, "process", |r| r.process),
        col!(m, U64, "thread", |r| r.thread),
        col!(m, U64, "ts_ns", |r| r.ts_ns),
        col!(m, OptStr, "nvtx_domain", |r| domain(&r.nvtx_domain)),
    ]
}

/// One row per CUPTI overhead record.
fn overhead_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let o = &t.overheads;
    vec![
        col!(o, Str, "kind", |r| s(r.kind)),
        col!(o, U32, "process", |r| r.process),
        col!(o, U64, "thread", |r| r.thread),
        col!(o, U64, "start_ns", |r| r.start_ns),
        col!(o, U64, "end_ns", |r| r.end_ns),
    ]
}

/// One row per host op; `external_id` is null where the source gave none.
fn host_op_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let o = &t.host_ops;
    vec![
        col!(o, Str, "category", |r| Cow::Borrowed(r.kind.label())),
        col!(o, Str, "name", |r| s(r.name)),
        col!(o, U32, "process", |r| r.process),
        col!(o, U64, "thread", |r| r.thread),
        col!(o, U64, "start_ns", |r| r.start_ns),
        col!(o, U64, "end_ns", |r| r.end_ns),
        col!(o, OptU64, "external_id", |r| (r.external_id != 0)
            .then_some(r.external_id)),
    ]
}

/// One row per kernel and metric; the kernel's name by its correlation id.
fn counter_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    // One row per kernel and metric; the kernel's name by its correlation id.
    let names: std::rc::Rc<std::collections::HashMap<u64, u32>> = std::rc::Rc::new(
        t.kernels
            .iter()
            .map(|k| (k.correlation_id, k.name))
            .collect(),
    );
    let m = &t.kernel_metrics;
    vec![
        col!(m, U64, "correlation_id", |r| r.correlation_id),
        col!(m, U32, "device", |r| r.device),
        col!(m, U32, "process", |r| r.process),
        col!(m, OptStr, "kernel", |r| names
            .get(&r.correlation_id)
            .map(|&n| s(n))),
        col!(m, Str, "metric", |r| s(r.metric)),
        // Null where CUPTI could not read the value: never 0.
        col!(m, OptF64, "value", |r| (!r.value.is_nan())
            .then_some(r.value)),
    ]
}

/// One row per PM sample and metric.
fn pm_sample_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let p = &t.pm_samples;
    vec![
        col!(p, U64, "start_ns", |r| r.start_ns),
        col!(p, U64, "end_ns", |r| r.end_ns),
        col!(p, U32, "device", |r| r.device),
        col!(p, U32, "process", |r| r.process),
        col!(p, Str, "metric", |r| s(r.metric)),
        // The sample's value over [start_ns, end_ns); null where it could not be
        // evaluated: never 0.
        col!(p, OptF64, "value", |r| (!r.value.is_nan())
            .then_some(r.value)),
    ]
}

/// One row per instruction and stall reason (and buffer read: rows of one PC and reason add).
fn pc_sample_columns<'a>(t: &'a Trace) -> Vec<Column<'a>> {
    let s = text(t);
    let p = &t.pc_samples;
    vec![
        col!(p, U32, "device", |r| r.device),
        col!(p, U32, "process", |r| r.process),
        col!(p, U64, "correlation_id", |r| r.correlation_id),
        col!(p, Str, "function", |r| s(r.function)),
        col!(p, U32, "function_index", |r| r.function_index),
        col!(p, U64, "pc_offset", |r| r.pc_offset),
        col!(p, U64, "cubin_crc", |r| r.cubin_crc),
        col!(p, Str, "stall_reason", |r| s(r.stall_reason)),
        col!(p, U64, "samples", |r| r.samples),
        // Null without line information; the line is null where the file is.
        col!(p, OptStr, "source_file", |r| r.source_file.map(s)),
        col!(p, OptU32, "source_line", |r| r
            .source_file
            .map(|_| r.source_line)),
    ]
}

/// One row per allocation or free, in the trace's order. `bytes` is the block's size (a free's
/// too: `op` says which); null where the source gave no size, as the totals where it gave none.
fn memory_columns(t: &Trace) -> Vec<Column<'_>> {
    use cutrace_trace::{MemoryLevel, MemoryOp, MemoryPlace};
    let m = &t.memory;
    vec![
        col!(m, U64, "ts_ns", |r| r.ts_ns),
        col!(m, U32, "process", |r| r.process),
        col!(m, U64, "thread", |r| r.thread),
        col!(m, Str, "place", |r| Cow::Borrowed(match r.place {
            MemoryPlace::Gpu => "gpu",
            MemoryPlace::Cpu => "cpu",
            MemoryPlace::Other(_) => "other",
        })),
        col!(m, OptU32, "device_type", |r| match r.place {
            MemoryPlace::Other(n) => Some(u32::from(n)),
            _ => None,
        }),
        col!(m, U32, "device", |r| r.device),
        col!(m, Str, "level", |r| Cow::Borrowed(match r.level {
            MemoryLevel::Framework => "framework",
            MemoryLevel::Driver => "driver",
        })),
        col!(m, Str, "op", |r| Cow::Borrowed(match r.op {
            MemoryOp::Alloc => "alloc",
            MemoryOp::Free => "free",
            MemoryOp::Unknown => "unknown",
        })),
        col!(m, OptU64, "address", |r| r.address),
        col!(m, OptU64, "bytes", |r| r.bytes),
        col!(m, OptU64, "total_allocated", |r| r.total_allocated),
        col!(m, OptU64, "total_reserved", |r| r.total_reserved),
        col!(m, U64, "correlation_id", |r| r.correlation_id),
    ]
}
