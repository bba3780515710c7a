//! Decoding CUPTI 13 activity records: a pure function from a record's bytes to a typed value.
//!
//! Offsets are those of the CUPTI 13.x headers (`CUpti_ActivityKernel10`, `CUpti_ActivityAPI`,
//! `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemset4`, `CUpti_ActivitySynchronization2`,
//! `CUpti_ActivityMarker2`, `CUpti_ActivityOverhead3`, `CUpti_ActivityDevice5`,
//! `CUpti_ActivityMemory4`, `CUpti_ActivityMemoryPool3`; all
//! `#pragma pack(8)`). Later 13.x versions only append fields, so the prefix read here is
//! stable across CUPTI 13; `crate::version` refuses any other major version. Tests build
//! records by hand (the idea of Kineto's MockCuptiActivityBuffer): no GPU needed.

/// `CUpti_ActivityKind` values used here.
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const KERNEL: u32 = 3;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const DEVICE: u32 = 8;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const MARKER: u32 = 12;
    pub const OVERHEAD: u32 = 17;
    pub const SYNCHRONIZATION: u32 = 38;
    /// Allocations and frees (`CUpti_ActivityMemory4`); `record --memory` enables it.
    pub const MEMORY2: u32 = 49;
    /// Memory pools created, destroyed or trimmed (`CUpti_ActivityMemoryPool3`); `record
    /// --memory` enables it with MEMORY2.
    pub const MEMORY_POOL: u32 = 50;

    /// The header's name of a kind (for trace headers and messages).
    pub fn name(k: u32) -> &'static str {
        match k {
            MEMCPY => "CUPTI_ACTIVITY_KIND_MEMCPY",
            MEMSET => "CUPTI_ACTIVITY_KIND_MEMSET",
            KERNEL => "CUPTI_ACTIVITY_KIND_KERNEL",
            DRIVER => "CUPTI_ACTIVITY_KIND_DRIVER",
            RUNTIME => "CUPTI_ACTIVITY_KIND_RUNTIME",
            DEVICE => "CUPTI_ACTIVITY_KIND_DEVICE",
            CONCURRENT_KERNEL => "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
            MARKER => "CUPTI_ACTIVITY_KIND_MARKER",
            OVERHEAD => "CUPTI_ACTIVITY_KIND_OVERHEAD",
            SYNCHRONIZATION => "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            MEMORY2 => "CUPTI_ACTIVITY_KIND_MEMORY2",
            MEMORY_POOL => "CUPTI_ACTIVITY_KIND_MEMORY_POOL",
            _ => "CUPTI_ACTIVITY_KIND_(other)",
        }
    }
}

/// `CUpti_ActivityOverheadKind` names.
pub fn overhead_kind_name(k: u32) -> &'static str {
    match k {
        1 => "DRIVER_COMPILER",
        0x10000 => "CUPTI_BUFFER_FLUSH",
        0x20000 => "CUPTI_INSTRUMENTATION",
        0x30000 => "CUPTI_RESOURCE",
        0x40000 => "RUNTIME_TRIGGERED_MODULE_LOADING",
        0x50000 => "LAZY_FUNCTION_LOADING",
        0x60000 => "COMMAND_BUFFER_FULL",
        0x70000 => "ACTIVITY_BUFFER_REQUEST",
        0x80000 => "UVM_ACTIVITY_INIT",
        _ => "UNKNOWN",
    }
}

/// Bytes a caller should make available from a record's start for [`decode`] to read it all.
pub const MAX_RECORD_PREFIX: usize = 216;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRec {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared: i32,
    pub dynamic_shared: i32,
    pub correlation_id: u32,
    /// `const char*` owned by CUPTI (resolve with [`cstr_at`]).
    pub name_ptr: usize,
    pub graph_id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRec {
    pub driver: bool,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process: u32,
    pub thread: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemcpyRec {
    pub copy_kind: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemsetRec {
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
}

/// One allocation or free (`CUpti_ActivityMemory4`, read at the offsets of
/// [`crate::sys::ActivityMemory4`], which the layout test checks against the
/// `nvidia-cuda-cupti==13.0.*` headers: 128 bytes, LP64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRec {
    /// `CUpti_ActivityMemoryOperationType`: 1 allocation, 2 release.
    pub operation: u32,
    /// `CUpti_ActivityMemoryKind`: 1 pageable, 2 pinned, 3 device, 4 array, 5 managed, 6
    /// device static, 7 managed static.
    pub memory_kind: u32,
    pub correlation_id: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub process: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub is_async: u32,
    /// The pool it came from (`memoryPoolConfig`): `CUpti_ActivityMemoryPoolType`, 0 when the
    /// allocation is not from a pool (`cudaMalloc`), 1 local, 2 imported.
    pub pool_type: u32,
    pub pool_address: u64,
    pub pool_release_threshold: u64,
    /// The pool's size then (a local pool; an imported one's owning process id).
    pub pool_size: u64,
    pub pool_utilized: u64,
}

/// A memory pool created, destroyed or trimmed (`CUpti_ActivityMemoryPool3`, at the offsets of
/// [`crate::sys::ActivityMemoryPool3`]: 80 bytes, LP64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPoolRec {
    /// `CUpti_ActivityMemoryPoolOperationType`: 1 created, 2 destroyed, 3 trimmed.
    pub operation: u32,
    /// `CUpti_ActivityMemoryPoolType`: 1 local, 2 imported.
    pub pool_type: u32,
    pub correlation_id: u32,
    pub process: u32,
    pub device: u32,
    /// What a trim was asked to keep (`cudaMemPoolTrimTo`'s `minBytesToKeep`).
    pub min_bytes_to_keep: u64,
    pub address: u64,
    /// The pool's size (local pools).
    pub size: u64,
    pub release_threshold: u64,
    pub timestamp: u64,
    pub utilized: u64,
    /// 1 for a pool of managed memory, 0 pinned.
    pub managed: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRec {
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context: u32,
    /// `u32::MAX` (CUPTI_SYNCHRONIZATION_INVALID_VALUE) for context-wide synchronization.
    pub stream: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerRec {
    pub flags: u32,
    pub timestamp: u64,
    pub id: u32,
    pub object_kind: u32,
    /// Process id (thread-scoped markers) or device id.
    pub object_a: u32,
    /// Thread id (thread-scoped markers) or context id.
    pub object_b: u32,
    pub name_ptr: usize,
    pub domain_ptr: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverheadRec {
    pub overhead_kind: u32,
    pub object_kind: u32,
    pub object_a: u32,
    pub object_b: u32,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRec {
    pub id: u32,
    pub global_memory_bytes: u64,
    pub sm_count: u32,
    pub cc_major: u32,
    pub cc_minor: u32,
    pub uuid: [u8; 16],
    pub name_ptr: usize,
}

/// One decoded activity record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    Kernel(KernelRec),
    Api(ApiRec),
    Memcpy(MemcpyRec),
    Memset(MemsetRec),
    Sync(SyncRec),
    Marker(MarkerRec),
    Overhead(OverheadRec),
    Device(DeviceRec),
    Memory(MemoryRec),
    MemoryPool(MemoryPoolRec),
    /// A kind this decoder does not model (its `CUpti_ActivityKind`).
    Other(u32),
}

fn u8_at(b: &[u8], o: usize) -> Option<u8> {
    b.get(o).copied()
}
fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn i32_at(b: &[u8], o: usize) -> Option<i32> {
    u32_at(b, o).map(|v| v as i32)
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}
fn ptr_at(b: &[u8], o: usize) -> Option<usize> {
    u64_at(b, o).map(|v| v as usize)
}

/// Decodes one record from its bytes (the record's start up to at least its known prefix).
/// `None` when the bytes are too short for the kind they claim.
pub fn decode(b: &[u8]) -> Option<Activity> {
    let k = u32_at(b, 0)?;
    Some(match k {
        kind::CONCURRENT_KERNEL | kind::KERNEL => Activity::Kernel(KernelRec {
            registers_per_thread: u16_at(b, 6)?,
            start: u64_at(b, 16)?,
            end: u64_at(b, 24)?,
            device: u32_at(b, 40)?,
            context: u32_at(b, 44)?,
            stream: u32_at(b, 48)?,
            grid: [i32_at(b, 52)?, i32_at(b, 56)?, i32_at(b, 60)?],
            block: [i32_at(b, 64)?, i32_at(b, 68)?, i32_at(b, 72)?],
            static_shared: i32_at(b, 76)?,
            dynamic_shared: i32_at(b, 80)?,
            correlation_id: u32_at(b, 92)?,
            name_ptr: ptr_at(b, 104)?,
            graph_id: u32_at(b, 156)?,
        }),
        kind::RUNTIME | kind::DRIVER => Activity::Api(ApiRec {
            driver: k == kind::DRIVER,
            cbid: u32_at(b, 4)?,
            start: u64_at(b, 8)?,
            end: u64_at(b, 16)?,
            process: u32_at(b, 24)?,
            thread: u32_at(b, 28)?,
            correlation_id: u32_at(b, 32)?,
            return_value: u32_at(b, 36)?,
        }),
        kind::MEMCPY => Activity::Memcpy(MemcpyRec {
            copy_kind: u8_at(b, 4)?,
            bytes: u64_at(b, 8)?,
            start: u64_at(b, 16)?,
            end: u64_at(b, 24)?,
            device: u32_at(b, 32)?,
            context: u32_at(b, 36)?,
            stream: u32_at(b, 40)?,
            correlation_id: u32_at(b, 44)?,
        }),
        kind::MEMSET => Activity::Memset(MemsetRec {
            value: u32_at(b, 4)?,
            bytes: u64_at(b, 8)?,
            start: u64_at(b, 16)?,
            end: u64_at(b, 24)?,
            device: u32_at(b, 32)?,
            context: u32_at(b, 36)?,
            stream: u32_at(b, 40)?,
            correlation_id: u32_at(b, 44)?,
        }),
        kind::SYNCHRONIZATION => Activity::Sync(SyncRec {
            sync_type: u32_at(b, 4)?,
            start: u64_at(b, 8)?,
            end: u64_at(b, 16)?,
            correlation_id: u32_at(b, 24)?,
            context: u32_at(b, 28)?,
            stream: u32_at(b, 32)?,
        }),
        kind::MARKER => Activity::Marker(MarkerRec {
            flags: u32_at(b, 4)?,
            timestamp: u64_at(b, 8)?,
            id: u32_at(b, 16)?,
            object_kind: u32_at(b, 20)?,
            object_a: u32_at(b, 24)?,
            object_b: u32_at(b, 28)?,
            name_ptr: ptr_at(b, 40)?,
            domain_ptr: ptr_at(b, 48)?,
        }),
        kind::OVERHEAD => Activity::Overhead(OverheadRec {
            overhead_kind: u32_at(b, 4)?,
            object_kind: u32_at(b, 8)?,
            object_a: u32_at(b, 12)?,
            object_b: u32_at(b, 16)?,
            start: u64_at(b, 24)?,
            end: u64_at(b, 32)?,
        }),
        kind::DEVICE => Activity::Device(DeviceRec {
            global_memory_bytes: u64_at(b, 16)?,
            sm_count: u32_at(b, 44)?,
            cc_major: u32_at(b, 104)?,
            cc_minor: u32_at(b, 108)?,
            id: u32_at(b, 112)?,
            uuid: b.get(120..136)?.try_into().ok()?,
            name_ptr: ptr_at(b, 136)?,
        }),
        kind::MEMORY2 => Activity::Memory(decode_memory(b)?),
        kind::MEMORY_POOL => Activity::MemoryPool(decode_memory_pool(b)?),
        other => Activity::Other(other),
    })
}

fn decode_memory(b: &[u8]) -> Option<MemoryRec> {
    use crate::sys::ActivityMemory4 as M;
    use std::mem::offset_of;
    Some(MemoryRec {
        operation: u32_at(b, offset_of!(M, memory_operation_type))?,
        memory_kind: u32_at(b, offset_of!(M, memory_kind))?,
        correlation_id: u32_at(b, offset_of!(M, correlation_id))?,
        address: u64_at(b, offset_of!(M, address))?,
        bytes: u64_at(b, offset_of!(M, bytes))?,
        timestamp: u64_at(b, offset_of!(M, timestamp))?,
        process: u32_at(b, offset_of!(M, process_id))?,
        device: u32_at(b, offset_of!(M, device_id))?,
        context: u32_at(b, offset_of!(M, context_id))?,
        stream: u32_at(b, offset_of!(M, stream_id))?,
        is_async: u32_at(b, offset_of!(M, is_async))?,
        pool_type: u32_at(b, offset_of!(M, memory_pool_type))?,
        pool_address: u64_at(b, offset_of!(M, pool_address))?,
        pool_release_threshold: u64_at(b, offset_of!(M, pool_release_threshold))?,
        pool_size: u64_at(b, offset_of!(M, pool_size))?,
        pool_utilized: u64_at(b, offset_of!(M, pool_utilized_size))?,
    })
}

fn decode_memory_pool(b: &[u8]) -> Option<MemoryPoolRec> {
    use crate::sys::ActivityMemoryPool3 as P;
    use std::mem::offset_of;
    Some(MemoryPoolRec {
        operation: u32_at(b, offset_of!(P, memory_pool_operation_type))?,
        pool_type: u32_at(b, offset_of!(P, memory_pool_type))?,
        correlation_id: u32_at(b, offset_of!(P, correlation_id))?,
        process: u32_at(b, offset_of!(P, process_id))?,
        device: u32_at(b, offset_of!(P, device_id))?,
        min_bytes_to_keep: u64_at(b, offset_of!(P, min_bytes_to_keep))?,
        address: u64_at(b, offset_of!(P, address))?,
        size: u64_at(b, offset_of!(P, pool_size))?,
        release_threshold: u64_at(b, offset_of!(P, release_threshold))?,
        timestamp: u64_at(b, offset_of!(P, timestamp))?,
        utilized: u64_at(b, offset_of!(P, utilized_size))?,
        managed: u8_at(b, offset_of!(P, is_managed_pool))?,
    })
}

/// Reads a NUL-terminated string CUPTI owns. `None` for a null pointer.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string that stays valid during the call
/// (CUPTI keeps kernel, marker and device names alive while it is loaded).
pub unsafe fn cstr_at(ptr: usize) -> Option<String> {
    if ptr == 0 {
        return None;
    }
    // SAFETY: the caller vouches for the pointer; null was handled above.
    let s = unsafe { std::ffi::CStr::from_ptr(ptr as *const std::ffi::c_char) };
    Some(s.to_string_lossy().into_owned())
}

/// Builders of hand-made records, for tests here and in other crates.
pub mod mock {
    /// A zeroed record of `len` bytes with its kind set.
    pub fn record(kind: u32, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[..4].copy_from_slice(&kind.to_le_bytes());
        v
    }
    pub fn put_u16(b: &mut [u8], o: usize, v: u16) {
        b[o..o + 2].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// A CUpti_ActivityMemory4 (MEMORY2) with the fields cutrace reads.
    pub fn memory(operation: u32, address: u64, bytes: u64, timestamp: u64, corr: u32) -> Vec<u8> {
        let mut b = record(super::kind::MEMORY2, 128);
        put_u32(&mut b, 4, operation);
        put_u32(&mut b, 8, 3);
        put_u32(&mut b, 12, corr);
        put_u64(&mut b, 16, address);
        put_u64(&mut b, 24, bytes);
        put_u64(&mut b, 32, timestamp);
        put_u32(&mut b, 48, 4242);
        put_u32(&mut b, 52, 0);
        put_u32(&mut b, 56, 1);
        put_u32(&mut b, 60, 7);
        b
    }

    /// A CUpti_ActivityMemory4 of an allocation or free from a local pool: `pool` is the
    /// pool's (address, release threshold, size, utilized size) then.
    pub fn pool_memory(
        operation: u32,
        address: u64,
        bytes: u64,
        timestamp: u64,
        corr: u32,
        pool: [u64; 4],
    ) -> Vec<u8> {
        let mut b = memory(operation, address, bytes, timestamp, corr);
        put_u32(&mut b, 72, 1);
        put_u32(&mut b, 80, 1);
        for (i, v) in pool.iter().enumerate() {
            put_u64(&mut b, 88 + 8 * i, *v);
        }
        b
    }

    /// A CUpti_ActivityMemoryPool3 (MEMORY_POOL) of a local pool on device 0: `operation` 1
    /// created, 2 destroyed, 3 trimmed.
    pub fn memory_pool(
        operation: u32,
        address: u64,
        size: u64,
        utilized: u64,
        timestamp: u64,
        corr: u32,
    ) -> Vec<u8> {
        let mut b = record(super::kind::MEMORY_POOL, 80);
        put_u32(&mut b, 4, operation);
        put_u32(&mut b, 8, 1);
        put_u32(&mut b, 12, corr);
        put_u32(&mut b, 16, 4242);
        put_u32(&mut b, 20, 0);
        put_u64(&mut b, 24, 4096);
        put_u64(&mut b, 32, address);
        put_u64(&mut b, 40, size);
        put_u64(&mut b, 48, 1 << 30);
        put_u64(&mut b, 56, timestamp);
        put_u64(&mut b, 64, utilized);
        b
    }

    /// A CUpti_ActivityKernel10 (CONCURRENT_KERNEL) with the fields cutrace reads.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel(
        start: u64,
        end: u64,
        device: u32,
        stream: u32,
        corr: u32,
        name: usize,
    ) -> Vec<u8> {
        let mut b = record(super::kind::CONCURRENT_KERNEL, 216);
        put_u16(&mut b, 6, 32);
        put_u64(&mut b, 16, start);
        put_u64(&mut b, 24, end);
        put_u32(&mut b, 40, device);
        put_u32(&mut b, 44, 1);
        put_u32(&mut b, 48, stream);
        for (i, v) in [2u32, 1, 1, 128, 1, 1].iter().enumerate() {
            put_u32(&mut b, 52 + 4 * i, *v);
        }
        put_u32(&mut b, 80, 1024);
        put_u32(&mut b, 92, corr);
        put_u64(&mut b, 104, name as u64);
        b
    }

    /// A CUpti_ActivityAPI record (RUNTIME).
    pub fn runtime(cbid: u32, start: u64, end: u64, corr: u32) -> Vec<u8> {
        let mut b = record(super::kind::RUNTIME, 40);
        put_u32(&mut b, 4, cbid);
        put_u64(&mut b, 8, start);
        put_u64(&mut b, 16, end);
        put_u32(&mut b, 24, 100);
        put_u32(&mut b, 28, 101);
        put_u32(&mut b, 32, corr);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::mock::*;
    use super::*;

    #[test]
    fn kernel_record_decodes() {
        let name = std::ffi::CString::new("_Z3addPfS_").unwrap();
        let b = kernel(1000, 3000, 0, 7, 42, name.as_ptr() as usize);
        let Some(Activity::Kernel(k)) = decode(&b) else {
            panic!()
        };
        assert_eq!(
            (k.start, k.end, k.stream, k.correlation_id),
            (1000, 3000, 7, 42)
        );
        assert_eq!(k.grid, [2, 1, 1]);
        assert_eq!(k.block, [128, 1, 1]);
        assert_eq!(k.dynamic_shared, 1024);
        assert_eq!(k.registers_per_thread, 32);
        assert_eq!(
            // SAFETY: name_ptr points into the test's own NUL-terminated name.
            unsafe { cstr_at(k.name_ptr) }.as_deref(),
            Some("_Z3addPfS_")
        );
        // Too short for its kind: no decode, no panic.
        assert_eq!(decode(&b[..100]), None);
        assert_eq!(decode(&b[..3]), None);
    }

    #[test]
    fn memory_record_decodes() {
        let b = memory(1, 0x7f00_0000_0000, 1 << 20, 5_000, 77);
        let Some(Activity::Memory(m)) = decode(&b) else {
            panic!()
        };
        assert_eq!((m.operation, m.memory_kind, m.correlation_id), (1, 3, 77));
        assert_eq!(
            (m.address, m.bytes, m.timestamp),
            (0x7f00_0000_0000, 1 << 20, 5_000)
        );
        assert_eq!((m.process, m.device, m.context, m.stream), (4242, 0, 1, 7));
        assert_eq!((m.pool_type, m.pool_address, m.pool_size), (0, 0, 0));
        assert_eq!(decode(&b[..70]), None);
        // From a pool: the pool's configuration then.
        let b = pool_memory(
            1,
            0x7f00_0010_0000,
            4096,
            6_000,
            78,
            [0x7f00, 1 << 30, 2 << 20, 8192],
        );
        let Some(Activity::Memory(m)) = decode(&b) else {
            panic!()
        };
        assert_eq!((m.is_async, m.pool_type, m.pool_address), (1, 1, 0x7f00));
        assert_eq!(
            (m.pool_release_threshold, m.pool_size, m.pool_utilized),
            (1 << 30, 2 << 20, 8192)
        );
        assert_eq!(decode(&b[..119]), None);
    }

    #[test]
    fn memory_pool_record_decodes() {
        let b = memory_pool(3, 0x7f00, 2 << 20, 4096, 9_000, 80);
        let Some(Activity::MemoryPool(p)) = decode(&b) else {
            panic!()
        };
        assert_eq!((p.operation, p.pool_type, p.correlation_id), (3, 1, 80));
        assert_eq!((p.process, p.device, p.min_bytes_to_keep), (4242, 0, 4096));
        assert_eq!((p.address, p.size, p.utilized), (0x7f00, 2 << 20, 4096));
        assert_eq!(
            (p.release_threshold, p.timestamp, p.managed),
            (1 << 30, 9_000, 0)
        );
        assert_eq!(decode(&b[..72]), None);
    }

    #[test]
    fn api_memcpy_sync_marker_overhead_decode() {
        let Some(Activity::Api(a)) = decode(&runtime(211, 5, 9, 42)) else {
            panic!()
        };
        assert_eq!(
            (a.cbid, a.start, a.end, a.correlation_id, a.thread),
            (211, 5, 9, 42, 101)
        );
        assert!(!a.driver);

        let mut m = record(kind::MEMCPY, 96);
        m[4] = 1;
        put_u64(&mut m, 8, 4096);
        put_u64(&mut m, 16, 10);
        put_u64(&mut m, 24, 20);
        put_u32(&mut m, 40, 13);
        put_u32(&mut m, 44, 77);
        let Some(Activity::Memcpy(c)) = decode(&m) else {
            panic!()
        };
        assert_eq!(
            (c.copy_kind, c.bytes, c.stream, c.correlation_id),
            (1, 4096, 13, 77)
        );

        let mut s = record(kind::SYNCHRONIZATION, 56);
        put_u32(&mut s, 4, 3);
        put_u64(&mut s, 8, 1);
        put_u64(&mut s, 16, 2);
        put_u32(&mut s, 24, 5);
        put_u32(&mut s, 32, u32::MAX);
        let Some(Activity::Sync(y)) = decode(&s) else {
            panic!()
        };
        assert_eq!((y.sync_type, y.correlation_id, y.stream), (3, 5, u32::MAX));

        let mut k = record(kind::MARKER, 56);
        put_u32(&mut k, 4, 2);
        put_u64(&mut k, 8, 99);
        put_u32(&mut k, 16, 4);
        put_u32(&mut k, 24, 100);
        put_u32(&mut k, 28, 101);
        let Some(Activity::Marker(r)) = decode(&k) else {
            panic!()
        };
        assert_eq!(
            (
                r.flags,
                r.timestamp,
                r.id,
                r.object_a,
                r.object_b,
                r.name_ptr
            ),
            (2, 99, 4, 100, 101, 0)
        );

        let mut o = record(kind::OVERHEAD, 56);
        put_u32(&mut o, 4, 0x10000);
        put_u64(&mut o, 24, 7);
        put_u64(&mut o, 32, 8);
        let Some(Activity::Overhead(v)) = decode(&o) else {
            panic!()
        };
        assert_eq!(overhead_kind_name(v.overhead_kind), "CUPTI_BUFFER_FLUSH");
        assert_eq!((v.start, v.end), (7, 8));

        assert_eq!(decode(&record(51, 8)), Some(Activity::Other(51)));
    }
}
