//! From CUPTI records to the native writer: a pure step over decoded records, so it is tested
//! with hand-built buffers and no GPU.

use std::collections::HashMap;
use std::io::Write;

use cutrace_cupti::activity::{
    self, Activity, ApiRec, DeviceRec, KernelRec, MarkerRec, MemcpyRec, MemsetRec, OverheadRec,
    SyncRec,
};
use cutrace_trace::native::{DeviceInfo, MarkerEvent, Writer};
use cutrace_trace::*;

/// Per-file decoding state: name caches and the devices seen.
#[derive(Default)]
pub struct Decoder {
    /// CUPTI name pointers are stable for a function's lifetime: cache their ids.
    names: HashMap<usize, StrId>,
    api_names: HashMap<(bool, u32), StrId>,
    overhead_names: HashMap<u32, StrId>,
    pub devices: Vec<DeviceInfo>,
    pub devices_changed: bool,
    pub records: u64,
    pub unknown: u64,
}

/// Looks up an API function's name by (driver?, callback id).
pub type ApiNamer<'a> = &'a dyn Fn(bool, u32) -> Option<String>;

/// `cudaLaunchKernel_v7000` → `cudaLaunchKernel` (Kineto's spelling).
pub fn strip_version_suffix(name: &str) -> &str {
    if let Some(i) = name.rfind("_v") {
        let tail = &name[i + 2..];
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
            return &name[..i];
        }
    }
    name
}

impl Decoder {
    /// A decoder for a new part, knowing `devices` already (their META goes in at its first
    /// flush).
    pub(crate) fn with_devices(devices: Vec<DeviceInfo>) -> Decoder {
        Decoder {
            devices_changed: !devices.is_empty(),
            devices,
            ..Decoder::default()
        }
    }

    fn name<W: Write>(&mut self, w: &mut Writer<W>, ptr: usize) -> StrId {
        if let Some(&id) = self.names.get(&ptr) {
            return id;
        }
        // SAFETY: CUPTI owns the string and keeps it alive while loaded (or ptr is 0).
        let s = unsafe { activity::cstr_at(ptr) }.unwrap_or_default();
        let id = w.intern(&s);
        self.names.insert(ptr, id);
        id
    }

    /// Has the next records with name pointer `ptr` take `name` (read earlier, when the
    /// pointer was known to be valid), not what the pointer holds now.
    pub(crate) fn name_as<W: Write>(&mut self, w: &mut Writer<W>, ptr: usize, name: &str) {
        let id = w.intern(name);
        self.names.insert(ptr, id);
    }

    /// Adds one decoded record to the writer.
    pub fn add<W: Write>(&mut self, w: &mut Writer<W>, a: &Activity, api_name: ApiNamer<'_>) {
        self.records += 1;
        match a {
            Activity::Kernel(k) => self.add_kernel(w, k),
            Activity::Api(r) => self.add_api(w, r, api_name),
            Activity::Memcpy(m) => w.push_memcpy(&memcpy(m)),
            Activity::Memset(m) => w.push_memset(&memset(m)),
            Activity::Sync(s) => w.push_sync(&synchronization(s), false),
            Activity::Marker(m) => add_marker(w, m),
            Activity::Overhead(o) => self.add_overhead(w, o),
            Activity::Device(d) => self.add_device(d),
            Activity::Memory(m) => {
                w.push_memory(&memory(m));
                if let Some(p) = pool_block(m) {
                    w.push_memory_pool(&p);
                }
            }
            Activity::MemoryPool(p) => w.push_memory_pool(&memory_pool(p)),
            Activity::Other(_) => self.unknown += 1,
        }
    }

    // The per-kind steps below are `#[inline]`: they run once per record, and called from the
    // one match in `add` they compile as the single function they were split from.

    /// Writes a kernel record with its launch configuration; its name through the pointer cache.
    #[inline]
    fn add_kernel<W: Write>(&mut self, w: &mut Writer<W>, k: &KernelRec) {
        let name = self.name(w, k.name_ptr);
        w.push_kernel(
            &Kernel {
                device: k.device,
                context: k.context,
                stream: k.stream.into(),
                correlation_id: k.correlation_id.into(),
                start_ns: k.start,
                end_ns: k.end,
                name,
                launch: 0,
            },
            &Launch {
                grid: k.grid.map(|v| v as u32),
                block: k.block.map(|v| v as u32),
                registers_per_thread: k.registers_per_thread.into(),
                static_shared_bytes: k.static_shared as u32,
                dynamic_shared_bytes: k.dynamic_shared as u32,
                graph_id: k.graph_id,
            },
        );
    }

    /// Writes a runtime or driver API call; its name is looked up once per (driver?, callback
    /// id), without the version suffix, or `cbid_N` when the namer does not know it.
    #[inline]
    fn add_api<W: Write>(&mut self, w: &mut Writer<W>, r: &ApiRec, api_name: ApiNamer<'_>) {
        let key = (r.driver, r.cbid);
        let name = match self.api_names.get(&key) {
            Some(&id) => id,
            None => {
                let n = api_name(r.driver, r.cbid)
                    .map(|n| strip_version_suffix(&n).to_owned())
                    .unwrap_or_else(|| format!("cbid_{}", r.cbid));
                let id = w.intern(&n);
                self.api_names.insert(key, id);
                id
            }
        };
        w.push_api(&ApiCall {
            kind: if r.driver {
                ApiKind::Driver
            } else {
                ApiKind::Runtime
            },
            name,
            cbid: ApiCall::cbid_of(r.cbid.into()),
            process: r.process,
            thread: r.thread.into(),
            correlation_id: r.correlation_id.into(),
            start_ns: r.start,
            end_ns: r.end,
            return_value: r.return_value as i32,
        });
    }

    /// Writes a CUPTI overhead record; its kind's name interned once per kind.
    #[inline]
    fn add_overhead<W: Write>(&mut self, w: &mut Writer<W>, o: &OverheadRec) {
        let kind = *self
            .overhead_names
            .entry(o.overhead_kind)
            .or_insert_with(|| w.intern(activity::overhead_kind_name(o.overhead_kind)));
        w.push_overhead(&Overhead {
            kind,
            process: o.object_a,
            thread: o.object_b.into(),
            start_ns: o.start,
            end_ns: o.end,
        });
    }

    /// Records a device the first time it is seen (name, compute capability, SMs, memory and
    /// UUID), and marks the devices changed.
    pub(crate) fn add_device(&mut self, d: &DeviceRec) {
        if self.devices.iter().any(|x| x.device == d.id) {
            return;
        }
        // SAFETY: CUPTI-owned name string, or null.
        let name = unsafe { activity::cstr_at(d.name_ptr) }.unwrap_or_default();
        let u = d.uuid;
        let uuid = format!(
            "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
        );
        self.devices.push(DeviceInfo {
            device: d.id,
            name,
            compute_capability: Some((d.cc_major, d.cc_minor)),
            sm_count: Some(d.sm_count),
            global_memory_bytes: Some(d.global_memory_bytes),
            uuid: Some(uuid),
        });
        self.devices_changed = true;
    }
}

/// A CUPTI memcpy record as the trace's copy, its kind read from CUPTI's copy-kind code.
#[inline]
fn memcpy(m: &MemcpyRec) -> Memcpy {
    Memcpy {
        kind: match m.copy_kind {
            1 => CopyKind::HtoD,
            2 => CopyKind::DtoH,
            8 => CopyKind::DtoD,
            9 => CopyKind::HtoH,
            10 => CopyKind::PtoP,
            _ => CopyKind::Unknown,
        },
        bytes: m.bytes,
        device: m.device,
        context: m.context,
        stream: m.stream.into(),
        correlation_id: m.correlation_id.into(),
        start_ns: m.start,
        end_ns: m.end,
    }
}

/// A CUPTI memset record as the trace's memset.
#[inline]
fn memset(m: &MemsetRec) -> Memset {
    Memset {
        bytes: m.bytes,
        value: m.value,
        device: m.device,
        context: m.context,
        stream: m.stream.into(),
        correlation_id: m.correlation_id.into(),
        start_ns: m.start,
        end_ns: m.end,
    }
}

/// A CUPTI synchronization record as the trace's; a stream of `u32::MAX` means none.
#[inline]
fn synchronization(s: &SyncRec) -> Synchronization {
    Synchronization {
        kind: match s.sync_type {
            1 => SyncKind::EventSynchronize,
            2 => SyncKind::StreamWaitEvent,
            3 => SyncKind::StreamSynchronize,
            4 => SyncKind::ContextSynchronize,
            _ => SyncKind::Unknown,
        },
        device: 0,
        context: s.context,
        stream: (s.stream != u32::MAX).then_some(s.stream.into()),
        correlation_id: s.correlation_id.into(),
        start_ns: s.start,
        end_ns: s.end,
        // CUPTI does not say which stream an event was recorded on.
        wait_on_stream: None,
        event_record_correlation: None,
    }
}

/// Writes an NVTX marker with its name and domain interned.
#[inline]
fn add_marker<W: Write>(w: &mut Writer<W>, m: &MarkerRec) {
    // Marker strings may be freed and their addresses reused: no pointer cache.
    // SAFETY: CUPTI-owned strings, valid while the buffer is being processed.
    let name = w.intern(&unsafe { activity::cstr_at(m.name_ptr) }.unwrap_or_default());
    let domain =
        // SAFETY: as for the name.
        w.intern(&unsafe { activity::cstr_at(m.domain_ptr) }.unwrap_or_default());
    w.push_marker(&MarkerEvent {
        ts_ns: m.timestamp,
        id: m.id,
        flags: m.flags,
        name,
        domain,
        process: m.object_a,
        thread: m.object_b.into(),
    });
}

/// An allocation or free of CUDA's (the driver's level): device memory, arrays and managed
/// memory on the GPU, pageable and pinned host memory on the CPU. CUPTI's record names no
/// thread: the report reaches the calling thread through the correlation id.
pub fn memory(m: &activity::MemoryRec) -> MemoryEvent {
    let host = matches!(m.memory_kind, 1 | 2);
    MemoryEvent {
        ts_ns: m.timestamp,
        process: m.process,
        thread: 0,
        place: if host {
            MemoryPlace::Cpu
        } else {
            MemoryPlace::Gpu
        },
        device: if host { 0 } else { m.device },
        level: MemoryLevel::Driver,
        op: match m.operation {
            1 => MemoryOp::Alloc,
            2 => MemoryOp::Free,
            _ => MemoryOp::Unknown,
        },
        address: Some(m.address),
        bytes: Some(m.bytes),
        total_allocated: None,
        total_reserved: None,
        correlation_id: m.correlation_id.into(),
    }
}

/// The pool side of an allocation or free from a CUDA memory pool (`cudaMallocAsync`,
/// `cudaFreeAsync`, `cudaMallocFromPoolAsync`): the block, and the pool's size and use after
/// it. `None` for memory not from a pool.
pub fn pool_block(m: &activity::MemoryRec) -> Option<PoolEvent> {
    let pool_type = pool_type(m.pool_type)?;
    Some(PoolEvent {
        ts_ns: m.timestamp,
        process: m.process,
        device: m.device,
        op: match m.operation {
            1 => PoolOp::Alloc,
            2 => PoolOp::Free,
            _ => PoolOp::Unknown,
        },
        pool_type,
        address: m.pool_address,
        size: m.pool_size,
        utilized: m.pool_utilized,
        release_threshold: m.pool_release_threshold,
        min_bytes_to_keep: 0,
        managed: false,
        block_address: m.address,
        block_bytes: m.bytes,
        correlation_id: m.correlation_id.into(),
    })
}

/// A pool created, destroyed or trimmed.
pub fn memory_pool(p: &activity::MemoryPoolRec) -> PoolEvent {
    PoolEvent {
        ts_ns: p.timestamp,
        process: p.process,
        device: p.device,
        op: match p.operation {
            1 => PoolOp::Created,
            2 => PoolOp::Destroyed,
            3 => PoolOp::Trimmed,
            _ => PoolOp::Unknown,
        },
        pool_type: pool_type(p.pool_type).unwrap_or(PoolType::Unknown),
        address: p.address,
        size: p.size,
        utilized: p.utilized,
        release_threshold: p.release_threshold,
        min_bytes_to_keep: p.min_bytes_to_keep,
        managed: p.managed == 1,
        block_address: 0,
        block_bytes: 0,
        correlation_id: p.correlation_id.into(),
    }
}

/// CUPTI's pool type; `None` for "not a pool" (`CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID`).
fn pool_type(t: u32) -> Option<PoolType> {
    match t {
        0 => None,
        1 => Some(PoolType::Local),
        2 => Some(PoolType::Imported),
        _ => Some(PoolType::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_cupti::activity::{decode, mock};
    use cutrace_trace::native::Header;
    use std::io::Cursor;

    #[test]
    fn hand_built_buffer_becomes_a_trace() {
        let name = std::ffi::CString::new("_Z6squarePf").unwrap();
        let recs = vec![
            mock::runtime(211, 100, 200, 1),
            mock::kernel(300, 900, 0, 13, 1, name.as_ptr() as usize),
            mock::runtime(211, 210, 260, 2),
            mock::kernel(950, 1500, 0, 13, 2, name.as_ptr() as usize),
        ];
        let mut w = Writer::new(Cursor::new(Vec::new()), &Header::default()).unwrap();
        let mut d = Decoder::default();
        let namer = |drv: bool, cbid: u32| {
            (!drv && cbid == 211).then(|| "cudaLaunchKernel_v7000".to_string())
        };
        for r in &recs {
            d.add(&mut w, &decode(r).unwrap(), &namer);
        }
        let bytes = w.finish(&Default::default()).unwrap().into_inner();
        let dir = std::env::temp_dir().join(format!("cutrace-inject-dec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.cutrace");
        std::fs::write(&p, bytes).unwrap();
        let t = cutrace_trace::native::read(&p, &mut |_, _| {}).unwrap();
        assert_eq!(t.kernels.len(), 2);
        assert_eq!(t.api_calls.len(), 2);
        assert_eq!(t.str(t.api_calls[0].name), "cudaLaunchKernel");
        assert_eq!(t.str(t.kernels[0].name), "_Z6squarePf");
        assert_eq!(t.kernels[1].stream, 13);
        assert!(t.meta.complete);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A plain allocation is a memory row only; one from a pool is also the pool's row (the
    /// block and the pool's size and use then); a pool record is a pool row.
    #[test]
    fn pool_records_become_pool_rows() {
        let pool = [0x7f00, 1 << 30, 2 << 20, 4096];
        let mut d = Decoder::default();
        let mut w = Writer::new(Cursor::new(Vec::new()), &Header::default()).unwrap();
        let none = |_: bool, _: u32| None;
        for r in [
            mock::memory_pool(1, 0x7f00, 0, 0, 10, 1),
            mock::memory(1, 0x9000, 512, 20, 2),
            mock::pool_memory(1, 0x7f00_1000, 4096, 30, 3, pool),
            mock::memory_pool(3, 0x7f00, 2 << 20, 4096, 40, 4),
        ] {
            d.add(&mut w, &decode(&r).unwrap(), &none);
        }
        let bytes = w.finish(&Default::default()).unwrap().into_inner();
        let dir = std::env::temp_dir().join(format!("cutrace-inject-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.cutrace");
        std::fs::write(&p, bytes).unwrap();
        let t = cutrace_trace::native::read(&p, &mut |_, _| {});
        let _ = std::fs::remove_dir_all(&dir);
        let t = t.unwrap();
        assert_eq!(t.memory.len(), 2);
        let ops: Vec<_> = t
            .memory_pools
            .iter()
            .map(|p| {
                (
                    p.ts_ns,
                    p.op,
                    p.address,
                    p.size,
                    p.utilized,
                    p.block_address,
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                (10, PoolOp::Created, 0x7f00, 0, 0, 0),
                (30, PoolOp::Alloc, 0x7f00, 2 << 20, 4096, 0x7f00_1000),
                (40, PoolOp::Trimmed, 0x7f00, 2 << 20, 4096, 0),
            ]
        );
        assert_eq!(t.memory_pools[1].block_bytes, 4096);
        assert_eq!(t.memory_pools[1].release_threshold, 1 << 30);
        assert_eq!(t.memory_pools[2].min_bytes_to_keep, 4096);
        assert!(t
            .memory_pools
            .iter()
            .all(|p| p.pool_type == PoolType::Local));
    }

    #[test]
    fn version_suffix_stripping() {
        assert_eq!(
            strip_version_suffix("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(
            strip_version_suffix("cudaLaunchKernel_ptsz_v7000"),
            "cudaLaunchKernel_ptsz"
        );
        assert_eq!(strip_version_suffix("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(strip_version_suffix("foo_v"), "foo_v");
    }
}
