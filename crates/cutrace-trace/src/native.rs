//! The native trace format (writer and reader): chunked, append-only, crash-safe. See
//! docs/FORMAT.md for the byte layout; this module is its reference implementation.
//!
//! A file is an 8-byte magic and a format version, then self-delimiting chunks, each with its own
//! length and CRC-32. Records are stored in columnar batches (delta + zigzag + varint, then
//! deflate), so a kernel with its launch record costs a few bytes. A reader keeps every chunk whose
//! checksum holds, skipping damaged bytes to the next good chunk (and counting them), and reports
//! the trace as incomplete unless the final `TAIL` chunk was written.

mod codec;
mod reader;
mod writer;

pub use reader::{
    read, read_file, read_file_with, read_parts, read_parts_with, read_stream, read_with,
};
pub use writer::Writer;

use serde::{Deserialize, Serialize};

use crate::model::Distributed;

/// A process's place in a distributed job from its environment: `RANK`, `LOCAL_RANK` and
/// `WORLD_SIZE` (set by torchrun, torch.distributed.launch, and most launchers), and the id of
/// the `cutrace record` run it belongs to (`run_id`, which the recorder gives every process it
/// starts: `cutrace_settings::Settings::run_id`). `None` when none is set. A value that is not a
/// number is left out, and named in the second result (for the part's notes).
pub fn distributed_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    run_id: Option<String>,
) -> (Option<Distributed>, Vec<String>) {
    let mut notes = Vec::new();
    let mut num = |key: &str| -> Option<u32> {
        let v = env(key)?;
        let n = v.trim().parse().ok();
        if n.is_none() {
            notes.push(format!(
                "{key}={v:?} is not a rank number: not recorded in the part's header"
            ));
        }
        n
    };
    let d = Distributed {
        rank: num("RANK"),
        local_rank: num("LOCAL_RANK"),
        world_size: num("WORLD_SIZE"),
        run_id: run_id.filter(|s| !s.is_empty()),
        ..Distributed::default()
    };
    let any =
        d.rank.is_some() || d.local_rank.is_some() || d.world_size.is_some() || d.run_id.is_some();
    (any.then_some(d), notes)
}

/// First bytes of every native trace file.
pub const MAGIC: [u8; 8] = *b"\x89CUTRACE";
/// Version of the chunk layout written after the magic (u32 little-endian).
pub const FORMAT_VERSION: u32 = 1;
/// File name extension of one process's part.
pub const PART_EXTENSION: &str = "cutrace";
/// Size of a chunk header: tag, codec, 3 reserved bytes, stored length, raw length, CRC-32.
pub const CHUNK_HEADER_LEN: usize = 20;
/// Chunks larger than this (stored or raw) are treated as corrupt whatever the limits say.
pub const MAX_CHUNK_BYTES: u32 = 256 << 20;

/// Chunk tags.
pub mod tag {
    pub const HEAD: [u8; 4] = *b"HEAD";
    pub const STRS: [u8; 4] = *b"STRS";
    pub const RECS: [u8; 4] = *b"RECS";
    pub const META: [u8; 4] = *b"META";
    pub const TAIL: [u8; 4] = *b"TAIL";
}

/// Payload codecs.
pub mod codec_id {
    pub const NONE: u8 = 0;
    pub const DEFLATE: u8 = 1;
}

/// Record tables and their column order, as stored in `RECS` chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Table {
    Kernel = 1,
    Memcpy = 2,
    Memset = 3,
    Api = 4,
    Sync = 5,
    Marker = 6,
    Overhead = 7,
    KernelMetric = 8,
    PmSample = 9,
    PcSample = 10,
    Memory = 11,
    MemoryPool = 12,
}

impl Table {
    pub const ALL: [Table; 12] = [
        Table::Kernel,
        Table::Memcpy,
        Table::Memset,
        Table::Api,
        Table::Sync,
        Table::Marker,
        Table::Overhead,
        Table::KernelMetric,
        Table::PmSample,
        Table::PcSample,
        Table::Memory,
        Table::MemoryPool,
    ];

    pub fn from_id(id: u8) -> Option<Table> {
        Table::ALL.into_iter().find(|t| *t as u8 == id)
    }

    /// Column names, in stored order. Readers ignore columns past the ones they know and fill
    /// missing trailing columns with 0, so columns may only ever be appended.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Table::Kernel => &[
                "start_ns",
                "duration_ns",
                "correlation_id",
                "device",
                "context",
                "stream",
                "name",
                "grid_x",
                "grid_y",
                "grid_z",
                "block_x",
                "block_y",
                "block_z",
                "registers_per_thread",
                "static_shared_bytes",
                "dynamic_shared_bytes",
                "graph_id",
            ],
            Table::Memcpy => &[
                "start_ns",
                "duration_ns",
                "correlation_id",
                "device",
                "context",
                "stream",
                "copy_kind",
                "bytes",
            ],
            Table::Memset => &[
                "start_ns",
                "duration_ns",
                "correlation_id",
                "device",
                "context",
                "stream",
                "bytes",
                "value",
            ],
            Table::Api => &[
                "start_ns",
                "duration_ns",
                "correlation_id",
                "api_kind",
                "cbid",
                "name",
                "process",
                "thread",
                "return_value",
            ],
            Table::Sync => &[
                "start_ns",
                "duration_ns",
                "correlation_id",
                "sync_kind",
                "context",
                "stream_plus_1",
                "device_plus_1",
            ],
            Table::Marker => &[
                "ts_ns", "id", "flags", "name", "domain", "process", "thread",
            ],
            Table::Overhead => &["start_ns", "duration_ns", "kind", "process", "thread"],
            Table::KernelMetric => &[
                "correlation_id",
                "device",
                "process",
                "metric",
                "value_bits",
            ],
            Table::PmSample => &[
                "start_ns",
                "duration_ns",
                "device",
                "process",
                "metric",
                "value_bits",
            ],
            Table::PcSample => &[
                "device",
                "process",
                "correlation_id",
                "function",
                "pc_offset",
                "cubin_crc",
                "stall_reason",
                "samples",
                "function_index",
                "source_file_plus_1",
                "source_line",
            ],
            Table::Memory => &[
                "ts_ns",
                "process",
                "thread",
                "device",
                "place",
                "level",
                "op",
                "address",
                "bytes",
                "total_allocated",
                "total_reserved",
                "known",
                "correlation_id",
            ],
            Table::MemoryPool => &[
                "ts_ns",
                "process",
                "device",
                "op",
                "pool_type",
                "address",
                "size",
                "utilized",
                "release_threshold",
                "min_bytes_to_keep",
                "managed",
                "block_address",
                "block_bytes",
                "correlation_id",
            ],
        }
    }

    pub fn ncols(self) -> usize {
        self.columns().len()
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Kernel => "kernel",
            Table::Memcpy => "memcpy",
            Table::Memset => "memset",
            Table::Api => "api",
            Table::Sync => "sync",
            Table::Marker => "marker",
            Table::Overhead => "overhead",
            Table::KernelMetric => "kernel_metric",
            Table::PmSample => "pm_sample",
            Table::PcSample => "pc_sample",
            Table::Memory => "memory",
            Table::MemoryPool => "memory_pool",
        }
    }
}

/// A pool operation as table 12 stores it: 1 created, 2 destroyed, 3 trimmed (CUPTI's
/// `CUpti_ActivityMemoryPoolOperationType`), 4 a block allocated, 5 a block freed, 0 unknown.
pub fn pool_op_code(op: crate::model::PoolOp) -> u64 {
    use crate::model::PoolOp;
    match op {
        PoolOp::Unknown => 0,
        PoolOp::Created => 1,
        PoolOp::Destroyed => 2,
        PoolOp::Trimmed => 3,
        PoolOp::Alloc => 4,
        PoolOp::Free => 5,
    }
}

/// The inverse of [`pool_op_code`]; a code it never writes reads as unknown.
pub fn pool_op_from_code(c: u64) -> crate::model::PoolOp {
    use crate::model::PoolOp;
    match c {
        1 => PoolOp::Created,
        2 => PoolOp::Destroyed,
        3 => PoolOp::Trimmed,
        4 => PoolOp::Alloc,
        5 => PoolOp::Free,
        _ => PoolOp::Unknown,
    }
}

/// A pool's type as table 12 stores it: CUPTI's `CUpti_ActivityMemoryPoolType` (1 local, 2
/// imported; anything else unknown, written 0).
pub fn pool_type_code(t: crate::model::PoolType) -> u64 {
    use crate::model::PoolType;
    match t {
        PoolType::Unknown => 0,
        PoolType::Local => 1,
        PoolType::Imported => 2,
    }
}

pub fn pool_type_from_code(c: u64) -> crate::model::PoolType {
    use crate::model::PoolType;
    match c {
        1 => PoolType::Local,
        2 => PoolType::Imported,
        _ => PoolType::Unknown,
    }
}

/// A memory event's place as table 11 stores it: 0 CPU, 1 GPU, 256 + n for torch's device type
/// n.
pub fn memory_place_code(p: crate::model::MemoryPlace) -> u64 {
    use crate::model::MemoryPlace;
    match p {
        MemoryPlace::Cpu => 0,
        MemoryPlace::Gpu => 1,
        MemoryPlace::Other(n) => 256 + u64::from(n),
    }
}

/// The inverse of [`memory_place_code`]; a code it never writes reads as another device type
/// (255), not as a CPU or GPU.
pub fn memory_place_from_code(c: u64) -> crate::model::MemoryPlace {
    use crate::model::MemoryPlace;
    match c {
        0 => MemoryPlace::Cpu,
        1 => MemoryPlace::Gpu,
        256..=511 => MemoryPlace::Other((c - 256) as u8),
        _ => MemoryPlace::Other(255),
    }
}

/// NVTX marker flags as CUPTI reports them (CUPTI_ACTIVITY_FLAG_MARKER_*).
pub mod marker_flags {
    pub const INSTANTANEOUS: u32 = 1;
    pub const START: u32 = 2;
    pub const END: u32 = 4;
}

/// One raw NVTX marker event. Ranges are stored as a start and an end event sharing `id`; the
/// reader pairs them into [`crate::NvtxRange`]s. Instantaneous events become [`crate::NvtxMark`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerEvent {
    pub ts_ns: u64,
    pub id: u32,
    pub flags: u32,
    pub name: crate::StrId,
    pub domain: crate::StrId,
    pub process: u32,
    pub thread: u64,
}

// The HEAD chunk's types are metadata of the trace model (each part's header travels in
// `TraceMeta`), defined there and named here too, where the format uses them.
pub use crate::model::{ClockRef, Header};

/// One GPU as the recorder saw it: the model's device properties, stored as JSON in `META`.
pub type DeviceInfo = crate::model::DeviceProps;

/// A `META` chunk: facts learned while recording. Later chunks supersede earlier ones field by
/// field (counters are cumulative snapshots).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    pub devices: Vec<DeviceInfo>,
    pub dropped_by_cupti: Option<u64>,
    pub dropped_by_recorder: Option<u64>,
    pub notes: Vec<String>,
    /// Counter collection so far (`cutrace profile`); cumulative, superseded by later chunks.
    pub counters: Option<crate::model::CounterInfo>,
    /// PM Sampling so far (`cutrace sample`); cumulative, superseded by later chunks.
    pub pm_sampling: Option<crate::model::PmSamplingInfo>,
    /// PC Sampling so far (`cutrace profile --pc-sampling`); cumulative, superseded by later
    /// chunks.
    pub pc_sampling: Option<crate::model::PcSamplingInfo>,
}

/// The `TAIL` chunk: written last, it marks the file complete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tail {
    pub records: u64,
    pub dropped_by_cupti: u64,
    pub dropped_by_recorder: u64,
    /// Buffers CUPTI asked for that the bounded pool could not give.
    pub buffers_refused: u64,
    pub buffers_completed: u64,
    /// Set when the writer finished early (deadline at exit, I/O error) though it wrote a tail.
    pub incomplete_reason: Option<String>,
}

/// True when `head` (the first bytes of a file) starts like a native cutrace trace.
pub fn looks_native(head: &[u8]) -> bool {
    let n = head.len().min(MAGIC.len());
    n >= 4 && head[..n] == MAGIC[..n]
}

/// The file name of one process's part: `<host>-<pid>.cutrace` (`-<n>` added on a clash).
pub fn part_file_name(host: &str, pid: u32, attempt: u32) -> String {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if attempt == 0 {
        format!("{host}-{pid}.{PART_EXTENSION}")
    } else {
        format!("{host}-{pid}-{attempt}.{PART_EXTENSION}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_and_run_id_come_from_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let (d, notes) = distributed_from_env(
            &env(&[("RANK", "3"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "8")]),
            Some("r-1".into()),
        );
        let d = d.unwrap();
        assert_eq!(
            (d.rank, d.local_rank, d.world_size, d.run_id.as_deref()),
            (Some(3), Some(1), Some(8), Some("r-1"))
        );
        assert!(notes.is_empty());
        // Only the run id (a spawn child: torch.multiprocessing sets no RANK).
        let (d, _) = distributed_from_env(&env(&[]), Some("r-2".into()));
        assert_eq!(d.unwrap().rank, None);
        // Nothing set: no distributed facts at all.
        assert_eq!(distributed_from_env(&env(&[]), None).0, None);
        // A value that is not a number is left out and named.
        let (d, notes) = distributed_from_env(&env(&[("RANK", "zero"), ("WORLD_SIZE", "2")]), None);
        let d = d.unwrap();
        assert_eq!((d.rank, d.world_size), (None, Some(2)));
        assert!(notes[0].contains("RANK=\"zero\""), "{notes:?}");
    }
}
