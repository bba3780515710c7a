//! The words of torch.profiler's (Kineto's) trace format that cutrace reads and writes: the
//! top-level members and the members inside them, event categories, argument names and the
//! names of copies and synchronizations. The Kineto importer reads them and `cutrace convert
//! --chrome` writes them (the events through `cutrace-export`'s timeline model, the top-level
//! members in its `chrome.rs`), so an export reads back to the records it came from, and HTA and
//! TensorBoard read it as a torch.profiler trace.
//!
//! Names marked *cutrace* are not Kineto's: cutrace writes them where the model holds more than
//! a torch.profiler trace does, and the importer reads those it needs back.

use crate::model::{CopyKind, SyncKind};

/// The top-level members of a trace.
pub mod top {
    /// torch.profiler and cutrace write it first.
    pub const SCHEMA_VERSION: &str = "schemaVersion";
    /// The events: the one member a trace must have.
    pub const TRACE_EVENTS: &str = "traceEvents";
    /// One entry per GPU ([`super::device`]).
    pub const DEVICE_PROPERTIES: &str = "deviceProperties";
    pub const CUPTI_VERSION: &str = "cupti_version";
    pub const CUDA_DRIVER_VERSION: &str = "cuda_driver_version";
    /// The distributed job ([`super::dist`]).
    pub const DISTRIBUTED_INFO: &str = "distributedInfo";
    /// What every `ts` counts from, in nanoseconds.
    pub const BASE_TIME_NANOSECONDS: &str = "baseTimeNanoseconds";
    pub const DISPLAY_TIME_UNIT: &str = "displayTimeUnit";
    /// Kineto's log lines of each level, when it logs to the trace.
    pub const LOG_INFO: &str = "INFO";
    pub const LOG_WARNING: &str = "WARNING";
    pub const LOG_ERROR: &str = "ERROR";
    /// *cutrace*: what an export says about itself (`ExportMeta`).
    pub const CUTRACE: &str = "cutrace";
    /// The members that mark a Chrome/Kineto trace when one comes first in an object: the
    /// members torch.profiler's and cutrace's traces start with.
    pub const TRACE_FIRST: [&str; 6] = [
        SCHEMA_VERSION,
        TRACE_EVENTS,
        DEVICE_PROPERTIES,
        DISTRIBUTED_INFO,
        DISPLAY_TIME_UNIT,
        BASE_TIME_NANOSECONDS,
    ];
}

/// Members of one `deviceProperties` entry.
pub mod device {
    pub const ID: &str = "id";
    pub const NAME: &str = "name";
    pub const TOTAL_GLOBAL_MEM: &str = "totalGlobalMem";
    pub const COMPUTE_MAJOR: &str = "computeMajor";
    pub const COMPUTE_MINOR: &str = "computeMinor";
    pub const NUM_SMS: &str = "numSms";
    /// *cutrace*: the GPU's UUID, where the trace knows it.
    pub const UUID: &str = "uuid";
}

/// Members of `distributedInfo`, and of each process group in its `pg_config`.
pub mod dist {
    pub const BACKEND: &str = "backend";
    pub const RANK: &str = "rank";
    pub const WORLD_SIZE: &str = "world_size";
    pub const PG_COUNT: &str = "pg_count";
    pub const PG_CONFIG: &str = "pg_config";
    pub const NCCL_VERSION: &str = "nccl_version";
    pub const PG_NAME: &str = "pg_name";
    pub const PG_DESC: &str = "pg_desc";
    pub const BACKEND_CONFIG: &str = "backend_config";
    pub const PG_SIZE: &str = "pg_size";
    pub const RANKS: &str = "ranks";
}

/// Values of an event's `cat`.
pub mod cat {
    pub const KERNEL: &str = "kernel";
    pub const GPU_MEMCPY: &str = "gpu_memcpy";
    pub const GPU_MEMSET: &str = "gpu_memset";
    pub const CUDA_RUNTIME: &str = "cuda_runtime";
    pub const CUDA_DRIVER: &str = "cuda_driver";
    pub const CUDA_SYNC: &str = "cuda_sync";
    /// A host range: torch's `record_function`; NVTX ranges and marks in cutrace's exports.
    pub const USER_ANNOTATION: &str = "user_annotation";
    /// A range on a GPU stream (torch's `record_function` seen from the device).
    pub const GPU_USER_ANNOTATION: &str = "gpu_user_annotation";
    /// CUPTI's own overhead (buffer requests, instrumentation, …).
    pub const OVERHEAD: &str = "overhead";
    /// A torch operator on the host (a host op; `record_param_comms` ones also carry a
    /// collective's facts).
    pub const CPU_OP: &str = "cpu_op";
    /// A Python call on the host (`with_stack=True`): a host op.
    pub const PYTHON_FUNCTION: &str = "python_function";
    /// The torch 1.8-era profiler's (2020–2021) name for `cpu_op`; `ProfilerStep#N` was one
    /// too, and is read as the host range torch writes today.
    pub const OPERATOR: &str = "operator";
    /// torch.profiler's instant events; only `[memory]` ones ([`super::MEMORY`]) are read.
    pub const CPU_INSTANT_EVENT: &str = "cpu_instant_event";
    /// The flow from a launching call to its device records.
    pub const FLOW: &str = "ac2g";
}

/// Keys of an event's `args`.
pub mod arg {
    pub const DEVICE: &str = "device";
    pub const CONTEXT: &str = "context";
    pub const STREAM: &str = "stream";
    pub const CORRELATION: &str = "correlation";
    pub const EXTERNAL_ID: &str = "External id";
    pub const CBID: &str = "cbid";
    /// *cutrace*: a call's CUDA result when it is not 0.
    pub const RETURN_VALUE: &str = "return value";
    pub const REGISTERS_PER_THREAD: &str = "registers per thread";
    /// Static + dynamic shared memory per block, as Kineto writes it.
    pub const SHARED_MEMORY: &str = "shared memory";
    /// *cutrace*: the two parts of `shared memory`.
    pub const STATIC_SHARED_MEMORY: &str = "static shared memory";
    pub const DYNAMIC_SHARED_MEMORY: &str = "dynamic shared memory";
    pub const GRID: &str = "grid";
    pub const BLOCK: &str = "block";
    /// *cutrace*: the CUDA graph a kernel ran in.
    pub const GRAPH_ID: &str = "graph id";
    /// *cutrace*: CUPTI's name of a kernel whose `name` is demangled.
    pub const MANGLED: &str = "mangled";
    pub const BYTES: &str = "bytes";
    /// *cutrace*: the byte a memset wrote.
    pub const VALUE: &str = "value";
    /// GB/s of a copy or memset; `"N/A"` when it took no time.
    pub const BANDWIDTH: &str = "memory bandwidth (GB/s)";
    pub const SYNC_KIND: &str = "cuda_sync_kind";
    /// On a `cuda_sync` event of an event synchronize or a stream's wait on an event: the
    /// stream the event was recorded on (-1 when unknown).
    pub const WAIT_ON_STREAM: &str = "wait_on_stream";
    /// The correlation id of the `cudaEventRecord` call that recorded that event (-1 when
    /// unknown).
    pub const WAIT_ON_EVENT_RECORD: &str = "wait_on_cuda_event_record_corr_id";
    /// *cutrace*: an NVTX range's or mark's domain, outside NVTX's default one.
    pub const DOMAIN: &str = "domain";
    // A collective's facts, which torch copies from `record_param_comms` onto the kernels it
    // launched.
    pub const COLLECTIVE_NAME: &str = "Collective name";
    pub const GROUP_NAME: &str = "Process Group Name";
    pub const GROUP_DESC: &str = "Process Group Description";
    pub const GROUP_SIZE: &str = "Group size";
    pub const SEQ: &str = "Seq";
    pub const IN_NELEMS: &str = "In msg nelems";
    pub const OUT_NELEMS: &str = "Out msg nelems";
    pub const DTYPE: &str = "dtype";
    // A `[memory]` event's facts (torch's caching allocator, `profile_memory=True`).
    pub const ADDR: &str = "Addr";
    /// Positive for an allocation, negative for a free (not `bytes`, a copy's size).
    pub const MEM_BYTES: &str = "Bytes";
    pub const TOTAL_ALLOCATED: &str = "Total Allocated";
    pub const TOTAL_RESERVED: &str = "Total Reserved";
    /// -1 for the CPU.
    pub const DEVICE_ID: &str = "Device Id";
    /// c10's device type: 0 CPU, 1 CUDA.
    pub const DEVICE_TYPE: &str = "Device Type";
    /// *cutrace*: `driver` on a `[memory]` event of CUDA's allocator (`record --memory`); torch's
    /// are the framework's and carry none.
    pub const MEMORY_LEVEL: &str = "level";
    /// The value of [`MEMORY_LEVEL`] for CUDA's allocator.
    pub const DRIVER_LEVEL: &str = "driver";
}

/// The prefix of torch.profiler's step annotations (`prof.step()`): `ProfilerStep#12`.
pub const PROFILER_STEP: &str = "ProfilerStep#";

/// The `cpu_op` that carries a collective's facts.
pub const PARAM_COMMS: &str = "record_param_comms";

/// The name of torch.profiler's allocation and free events (`ph: "i"`, `cpu_instant_event`).
pub const MEMORY: &str = "[memory]";

/// The name of a memset event.
pub const MEMSET: &str = "Memset";

/// The name cutrace gives a copy (Kineto adds the memory kinds: `Memcpy HtoD (Pinned ->
/// Device)`); [`copy_kind`] reads both.
pub fn copy_name(k: CopyKind) -> &'static str {
    match k {
        CopyKind::HtoD => "Memcpy HtoD",
        CopyKind::DtoH => "Memcpy DtoH",
        CopyKind::DtoD => "Memcpy DtoD",
        CopyKind::HtoH => "Memcpy HtoH",
        CopyKind::PtoP => "Memcpy PtoP",
        CopyKind::Unknown => "Memcpy unknown",
    }
}

/// The name of a synchronization event, as Kineto writes it; [`sync_kind`] reads it.
pub fn sync_name(k: SyncKind) -> &'static str {
    match k {
        SyncKind::EventSynchronize => "Event Sync",
        SyncKind::StreamWaitEvent => "Stream Wait Event",
        SyncKind::StreamSynchronize => "Stream Sync",
        SyncKind::ContextSynchronize => "Context Sync",
        SyncKind::Unknown => "Unknown Sync",
    }
}

/// The kind of copy a `gpu_memcpy` event's name says.
pub fn copy_kind(name: &str) -> CopyKind {
    for (tag, kind) in [
        ("HtoD", CopyKind::HtoD),
        ("DtoH", CopyKind::DtoH),
        ("DtoD", CopyKind::DtoD),
        ("HtoH", CopyKind::HtoH),
        ("PtoP", CopyKind::PtoP),
    ] {
        if name.contains(tag) {
            return kind;
        }
    }
    CopyKind::Unknown
}

/// The kind of synchronization a `cuda_sync` event's name says (any case: Kineto's names have
/// changed over versions).
pub fn sync_kind(name: &str) -> SyncKind {
    let n = name.to_ascii_lowercase();
    if n.contains("wait") {
        SyncKind::StreamWaitEvent
    } else if n.contains("event") {
        SyncKind::EventSynchronize
    } else if n.contains("stream") {
        SyncKind::StreamSynchronize
    } else if n.contains("context") || n.contains("device") {
        SyncKind::ContextSynchronize
    } else {
        SyncKind::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_written_read_back_as_their_kind() {
        for k in [
            CopyKind::HtoD,
            CopyKind::DtoH,
            CopyKind::DtoD,
            CopyKind::HtoH,
            CopyKind::PtoP,
            CopyKind::Unknown,
        ] {
            assert_eq!(copy_kind(copy_name(k)), k);
        }
        for k in [
            SyncKind::EventSynchronize,
            SyncKind::StreamWaitEvent,
            SyncKind::StreamSynchronize,
            SyncKind::ContextSynchronize,
            SyncKind::Unknown,
        ] {
            assert_eq!(sync_kind(sync_name(k)), k);
        }
        assert_eq!(copy_kind("Memcpy HtoD (Pinned -> Device)"), CopyKind::HtoD);
    }
}
