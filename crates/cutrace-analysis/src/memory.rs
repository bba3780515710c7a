//! Memory over time: per allocator level, process, CPU or GPU and device, the peak of what the
//! trace saw allocated (when, in which step, what was live then and which host range made it),
//! what was still allocated at the end (leaks, as far as a trace can tell), allocation churn per
//! step, and the allocator's own totals where the source reports them (torch's `Total
//! Allocated` / `Total Reserved`); beside them, the host time in CUDA's allocation calls.
//!
//! The replay: a pool's events in time order (events at the same nanosecond in the order the
//! trace lists them: the allocator reported them so), an allocation live from its event until a
//! free, or another allocation, at its address. What cannot be known is counted, never guessed:
//! a free whose allocation came before the trace (the previous event at its address is not an
//! allocation), an allocation of unknown size (its address pairs with a free, its bytes are not
//! added), an event that says neither. Sizes are integer bytes, times integer ns.
//!
//! Attribution ("site"): torch.profiler writes no op into a `[memory]` event, so each event is
//! attributed to the innermost CPU op (`cpu_op`, [`Trace::host_ops`]) of its process and thread
//! that encloses its time (start inclusive, end exclusive): the op that allocated, as torch
//! calls its allocator inside the op. Outside every op (or in a trace without ops, a native
//! one), the innermost host range (`record_function`, NVTX, `ProfilerStep#N`) that encloses it,
//! else no site. CUPTI's memory records name no thread: theirs is the thread of the API call
//! their correlation id joins.

use std::collections::{BTreeMap, HashMap};

use cutrace_trace::{
    HostOpKind, MemoryEvent, MemoryLevel, MemoryOp, MemoryPlace, Ns, PoolEvent, PoolOp, PoolType,
    RangeDomain, StrId, Trace,
};
use serde::Serialize;

use crate::steps::Steps;
use crate::window::Window;

/// The site of an event outside every host range of its thread.
pub const NO_RANGE: &str = "(no enclosing host range)";

/// Everything the report says about memory; absent when the trace has no memory events and no
/// allocation calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryReport {
    /// Memory events in the trace (all of them; the pools count those in the window).
    pub events: u64,
    /// One entry per (level, process, CPU or GPU, device), in that order.
    pub pools: Vec<MemoryPool>,
    /// CUDA's allocation and free calls (`cudaMalloc*`, `cudaFree*`, `cuMemAlloc*`, …) per
    /// process: the host time churn costs.
    pub api_churn: Vec<ApiChurn>,
    /// CUDA memory pools (`cudaMallocAsync`'s stream-ordered allocator, CUPTI's MEMORY_POOL
    /// records and the pool side of MEMORY2's), per process, device and pool: what each held
    /// (reserved) and used, at the driver's peak and at the end. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cuda_pools: Vec<CudaPool>,
}

/// One CUDA memory pool of one process on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CudaPool {
    pub pid: u32,
    pub device: u32,
    /// The pool's base address (its identity in the process).
    pub address: u64,
    /// `local` (the process's own; its sizes are known), `imported` (another process's: CUPTI
    /// gives no sizes for it) or `unknown`.
    pub pool_type: &'static str,
    /// Managed (true) or pinned memory, as a MEMORY_POOL record says; null without one.
    pub managed: Option<bool>,
    /// The pool's release threshold (`cudaMemPoolAttrReleaseThreshold`), as last reported.
    pub release_threshold_bytes: Option<u64>,
    /// When it was created and destroyed, where the trace saw it.
    pub created_at_ns: Option<Ns>,
    pub destroyed_at_ns: Option<Ns>,
    /// `cudaMemPoolTrimTo` calls, and blocks allocated and freed from the pool, in the window.
    pub trims: u64,
    pub allocs: u64,
    pub frees: u64,
    pub alloc_bytes: u64,
    /// The most the pool held from the device (its size: reserved) and the most its blocks
    /// used (utilized size), over its reports before the window's end; null for a pool
    /// without sizes.
    pub reserved_peak_bytes: Option<u64>,
    pub used_peak_bytes: Option<u64>,
    /// Its state at the peak of the driver's GPU memory of its process and device (the last
    /// report at or before that peak's `at_ns`): reserved vs used then. Null without such a
    /// peak or a report before it.
    pub at_driver_peak: Option<PoolState>,
    /// Its last reported state before the window's end.
    pub at_end: Option<PoolState>,
}

/// A pool's size (reserved) and utilized size (used) as reported at `at_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolState {
    pub at_ns: Ns,
    pub reserved_bytes: u64,
    pub used_bytes: u64,
    /// Reserved but not used: memory the pool holds that no block uses (what a trim, or a
    /// lower release threshold, would give back).
    pub unused_bytes: u64,
}

/// One allocator's memory on one device of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryPool {
    /// `framework` (torch's allocator) or `driver` (CUDA's).
    pub level: &'static str,
    pub pid: u32,
    /// `gpu`, `cpu`, or `other` (a device type torch numbers otherwise; see `device_type`).
    pub place: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_type: Option<u8>,
    pub device: u32,
    pub allocs: u64,
    pub frees: u64,
    pub alloc_bytes: u64,
    pub free_bytes: u64,
    /// Frees whose allocation the trace does not hold (made before the trace began), and their
    /// bytes as the free gave them (frees of unknown size add 0).
    pub frees_without_alloc: u64,
    pub frees_without_alloc_bytes: u64,
    /// Allocations whose size is unknown: replayed as live at their address, adding no bytes.
    pub allocs_unknown_size: u64,
    /// Events that say neither allocation nor free (no readable size).
    pub unknown_events: u64,
    /// Allocations at an address that was still live (the free between was not recorded): the
    /// earlier one ends there.
    pub replaced_live: u64,
    /// Frees whose size differs from their allocation's (the allocation's counts).
    pub free_size_mismatches: u64,
    /// The most bytes live at once in the replay; null without allocations of known size.
    pub peak: Option<Peak>,
    /// The allocator's own figure, where the source reports it: the largest `Total Allocated`
    /// (which counts memory allocated before the trace began), with `Total Reserved` then.
    pub reported_peak: Option<ReportedPeak>,
    /// Allocations still live at the end of the window: leaks, as far as a trace can tell.
    pub live_at_end: LiveSet,
    /// Per step of this pool's process that has events of the pool.
    pub steps: Vec<StepMemory>,
}

/// The replay's peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Peak {
    pub bytes: u64,
    /// When it was first reached (trace clock), and as an offset from the window's start (the
    /// trace's start without a window).
    pub at_ns: Ns,
    pub at_offset_ns: Ns,
    /// The step it fell in (its place in the step list), null outside every step.
    pub step: Option<u64>,
    /// What was live then.
    pub live: LiveSet,
}

/// The largest `Total Allocated` the allocator reported, first reached at `at_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportedPeak {
    pub allocated_bytes: u64,
    pub at_ns: Ns,
    pub at_offset_ns: Ns,
    pub step: Option<u64>,
    /// `Total Reserved` at that event, and reserved minus allocated (held but not in use).
    pub reserved_bytes: Option<u64>,
    pub reserved_minus_allocated_bytes: Option<u64>,
}

/// A set of live allocations: how many, their bytes, the largest, and the bytes per site.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveSet {
    /// Allocations with an address (those of unknown size included).
    pub allocations: u64,
    /// Known bytes, `unaddressed_bytes` included.
    pub bytes: u64,
    /// Bytes of allocations the source gave no address for (torch 1.8), live by the sizes of
    /// their allocations and frees alone: in `bytes`, not in the lists below.
    pub unaddressed_bytes: u64,
    /// The largest allocations (top N, by bytes then time).
    pub largest: Vec<LiveAllocation>,
    /// Bytes per site, largest first (top N).
    pub by_site: Vec<SiteBytes>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveAllocation {
    pub address: u64,
    pub bytes: Option<u64>,
    pub allocated_at_ns: Ns,
    pub site: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteBytes {
    pub site: String,
    pub allocations: u64,
    pub bytes: u64,
}

/// One step's churn in one pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepMemory {
    /// The step's place in the step list.
    pub step: u64,
    pub allocs: u64,
    pub frees: u64,
    pub alloc_bytes: u64,
    pub free_bytes: u64,
    /// The most bytes live during the step (what was live as it began counts).
    pub peak_bytes: u64,
}

/// One process's allocation and free calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiChurn {
    pub pid: u32,
    /// `runtime` or `driver`: the runtime's calls when the process has any (its driver calls
    /// are made inside them), else the driver's.
    pub kind: &'static str,
    pub alloc_calls: u64,
    pub free_calls: u64,
    /// Summed over the calls (labelled a sum: calls on two threads may overlap).
    pub summed_host_ns: Ns,
    pub steps: Vec<StepCalls>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepCalls {
    pub step: u64,
    pub alloc_calls: u64,
    pub free_calls: u64,
    pub summed_host_ns: Ns,
}

/// A pool's identity, in report order.
type PoolKey = (MemoryLevel, u32, MemoryPlace, u32);

/// The memory report of `trace` inside `window`, with `steps` (the report's step list) for the
/// step of each event; `top` bounds every list of allocations and sites.
pub fn memory_report(
    trace: &Trace,
    window: Option<&Window>,
    steps: Option<&Steps>,
    top: usize,
) -> Option<MemoryReport> {
    let api_churn = api_churn(trace, window, steps);
    if trace.memory.is_empty() && api_churn.is_empty() && trace.memory_pools.is_empty() {
        return None;
    }
    let sites = sites(trace);
    let step_of = StepLookup::new(steps);
    let origin = window
        .map(|w| w.from_ns)
        .or_else(|| trace.bounds_ns().map(|b| b.0))
        .unwrap_or(0);
    let by_pool = pools_of(trace);
    let ctx = Ctx {
        trace,
        window,
        sites: &sites,
        step_of: &step_of,
        origin,
        top,
    };
    let pools: Vec<MemoryPool> = by_pool
        .into_iter()
        .map(|(key, idx)| ctx.pool(key, &idx))
        .collect();
    let cuda_pools = cuda_pools(trace, window, &pools);
    Some(MemoryReport {
        events: trace.memory.len() as u64,
        pools,
        api_churn,
        cuda_pools,
    })
}

/// Each CUDA memory pool's report: its reports in time order (ties in the trace's order), up
/// to the window's end.
fn cuda_pools(trace: &Trace, window: Option<&Window>, pools: &[MemoryPool]) -> Vec<CudaPool> {
    let mut by_pool: BTreeMap<(u32, u32, u64), Vec<&PoolEvent>> = BTreeMap::new();
    for e in &trace.memory_pools {
        if window.is_some_and(|w| e.ts_ns >= w.to_ns) {
            continue;
        }
        by_pool
            .entry((e.process, e.device, e.address))
            .or_default()
            .push(e);
    }
    // The driver level's peak per process and GPU, looked up once per pool (the first such pool
    // of each, as the pools come).
    let mut peaks: BTreeMap<(u32, u32), Option<Ns>> = BTreeMap::new();
    for p in pools
        .iter()
        .filter(|p| p.level == "driver" && p.place == "gpu")
    {
        peaks
            .entry((p.pid, p.device))
            .or_insert_with(|| p.peak.as_ref().map(|k| k.at_ns));
    }
    by_pool
        .into_iter()
        .map(|((pid, device, address), mut evs)| {
            evs.sort_by_key(|e| e.ts_ns);
            let peak_at = peaks.get(&(pid, device)).copied().flatten();
            cuda_pool(pid, device, address, &evs, window, peak_at)
        })
        .collect()
}

fn cuda_pool(
    pid: u32,
    device: u32,
    address: u64,
    evs: &[&PoolEvent],
    window: Option<&Window>,
    peak_at: Option<Ns>,
) -> CudaPool {
    let pool_type = evs
        .iter()
        .map(|e| e.pool_type)
        .find(|&t| t != PoolType::Unknown)
        .unwrap_or(PoolType::Unknown);
    // Only a local pool's size and utilized size are sizes (an imported one's "size" is its
    // owner's process id).
    let sized = pool_type == PoolType::Local;
    let state = |e: &PoolEvent| PoolState {
        at_ns: e.ts_ns,
        reserved_bytes: e.size,
        used_bytes: e.utilized,
        unused_bytes: e.size.saturating_sub(e.utilized),
    };
    let in_window = |t: Ns| window.is_none_or(|w| w.from_ns <= t);
    let mut p = CudaPool {
        pid,
        device,
        address,
        pool_type: match pool_type {
            PoolType::Local => "local",
            PoolType::Imported => "imported",
            PoolType::Unknown => "unknown",
        },
        managed: None,
        release_threshold_bytes: None,
        created_at_ns: None,
        destroyed_at_ns: None,
        trims: 0,
        allocs: 0,
        frees: 0,
        alloc_bytes: 0,
        reserved_peak_bytes: None,
        used_peak_bytes: None,
        at_driver_peak: None,
        at_end: None,
    };
    for &e in evs {
        let counted = in_window(e.ts_ns);
        match e.op {
            PoolOp::Created => {
                p.created_at_ns.get_or_insert(e.ts_ns);
            }
            PoolOp::Destroyed => p.destroyed_at_ns = Some(e.ts_ns),
            PoolOp::Trimmed => p.trims += u64::from(counted),
            PoolOp::Alloc if counted => {
                p.allocs += 1;
                p.alloc_bytes = p.alloc_bytes.saturating_add(e.block_bytes);
            }
            PoolOp::Free => p.frees += u64::from(counted),
            PoolOp::Alloc | PoolOp::Unknown => {}
        }
        if matches!(e.op, PoolOp::Created | PoolOp::Destroyed | PoolOp::Trimmed) {
            p.managed = Some(e.managed);
        }
        if !sized {
            continue;
        }
        p.release_threshold_bytes = Some(e.release_threshold);
        p.reserved_peak_bytes = Some(p.reserved_peak_bytes.unwrap_or(0).max(e.size));
        p.used_peak_bytes = Some(p.used_peak_bytes.unwrap_or(0).max(e.utilized));
        if peak_at.is_some_and(|t| e.ts_ns <= t) {
            p.at_driver_peak = Some(state(e));
        }
        p.at_end = Some(state(e));
    }
    p
}

/// Each pool's events in replay order: by time, events at one ns in the trace's order (a
/// stable sort).
fn pools_of(trace: &Trace) -> BTreeMap<PoolKey, Vec<u32>> {
    let mut by_pool: BTreeMap<PoolKey, Vec<u32>> = BTreeMap::new();
    for (i, e) in trace.memory.iter().enumerate() {
        by_pool
            .entry((e.level, e.process, e.place, e.device))
            .or_default()
            .push(i as u32);
    }
    for idx in by_pool.values_mut() {
        idx.sort_by_key(|&i| trace.memory[i as usize].ts_ns);
    }
    by_pool
}

/// What every pool's replay reads.
struct Ctx<'a> {
    trace: &'a Trace,
    window: Option<&'a Window>,
    /// Per memory event, its innermost enclosing host range.
    sites: &'a [Option<StrId>],
    step_of: &'a StepLookup,
    origin: Ns,
    top: usize,
}

/// The live allocations with an address, by address: bytes (None: unknown) and event.
type Live = HashMap<u64, (Option<u64>, u32)>;

/// The state of one replay.
#[derive(Default)]
struct Replay {
    live: Live,
    /// Known live bytes, those of allocations without an address included; u128 so that
    /// hostile sizes cannot overflow it.
    bytes: u128,
    /// Live bytes of allocations without an address, by their sizes alone.
    unaddressed: u128,
}

impl Replay {
    /// Applies one event; returns what it was for the counts.
    fn apply(&mut self, e: &MemoryEvent, i: u32) -> Applied {
        let size = u128::from(e.bytes.unwrap_or(0));
        match (e.op, e.address) {
            (MemoryOp::Unknown, _) => Applied::Unknown,
            (MemoryOp::Alloc, Some(addr)) => {
                let replaced = self.end(addr).is_some();
                self.bytes += size;
                self.live.insert(addr, (e.bytes, i));
                Applied::Alloc { replaced }
            }
            (MemoryOp::Free, Some(addr)) => match self.end(addr) {
                Some(known) => Applied::Free {
                    mismatch: matches!((known, e.bytes), (Some(a), Some(b)) if a != b),
                },
                None => Applied::Orphan,
            },
            (MemoryOp::Alloc, None) => {
                self.unaddressed += size;
                self.bytes += size;
                Applied::Alloc { replaced: false }
            }
            // Without an address, a free pairs with as many unaddressed bytes still live, or
            // is one whose allocation the trace did not see.
            (MemoryOp::Free, None) if size > 0 && size <= self.unaddressed => {
                self.unaddressed -= size;
                self.bytes -= size;
                Applied::Free { mismatch: false }
            }
            (MemoryOp::Free, None) => Applied::Orphan,
        }
    }

    /// Ends the live allocation at `addr`, if any; its size.
    fn end(&mut self, addr: u64) -> Option<Option<u64>> {
        let (size, _) = self.live.remove(&addr)?;
        self.bytes -= u128::from(size.unwrap_or(0));
        Some(size)
    }

    fn bytes(&self) -> u64 {
        u64::try_from(self.bytes).unwrap_or(u64::MAX)
    }
}

enum Applied {
    Alloc { replaced: bool },
    Free { mismatch: bool },
    Orphan,
    Unknown,
}

impl Ctx<'_> {
    fn in_window(&self, t: Ns) -> bool {
        self.window.is_none_or(|w| w.from_ns <= t && t < w.to_ns)
    }

    fn before_end(&self, t: Ns) -> bool {
        self.window.is_none_or(|w| t < w.to_ns)
    }

    fn pool(&self, key: PoolKey, idx: &[u32]) -> MemoryPool {
        let (level, pid, place, device) = key;
        let mut p = empty_pool(level, pid, place, device);
        let mut r = Replay::default();
        // The peak: bytes, time, event index (None: the state entering the window).
        let mut peak: Option<(u64, Ns, Option<u32>)> = None;
        let mut reported: Option<(u64, u32)> = None;
        let mut steps: BTreeMap<u64, StepMemory> = BTreeMap::new();
        let mut entered = self.window.is_none();
        for &i in idx {
            let e = &self.trace.memory[i as usize];
            if !self.before_end(e.ts_ns) {
                break;
            }
            if !entered && self.in_window(e.ts_ns) {
                entered = true;
                if let (Some(w), true) = (self.window, r.bytes > 0) {
                    peak = Some((r.bytes(), w.from_ns, None));
                }
            }
            let before = r.bytes();
            let applied = r.apply(e, i);
            if !entered {
                continue;
            }
            count(&mut p, e, &applied);
            let now = r.bytes();
            if e.op == MemoryOp::Alloc && peak.is_none_or(|(b, _, _)| now > b) {
                peak = Some((now, e.ts_ns, Some(i)));
            }
            if let Some(t) = e.total_allocated {
                if reported.is_none_or(|(b, _)| t > b) {
                    reported = Some((t, i));
                }
            }
            if let Some(s) = self.step_of.step(pid, e.ts_ns) {
                let st = steps.entry(s).or_insert_with(|| StepMemory {
                    step: s,
                    allocs: 0,
                    frees: 0,
                    alloc_bytes: 0,
                    free_bytes: 0,
                    peak_bytes: before,
                });
                step_count(st, e, &applied);
                st.peak_bytes = st.peak_bytes.max(now);
            }
        }
        p.live_at_end = self.live_set(&r);
        p.peak = peak
            .filter(|&(b, _, _)| b > 0)
            .map(|(bytes, at, upto)| Peak {
                bytes,
                at_ns: at,
                at_offset_ns: at.saturating_sub(self.origin),
                step: self.step_of.step(pid, at),
                live: self.live_set(&self.replay_to(idx, upto)),
            });
        p.reported_peak = reported.map(|(allocated, i)| {
            let e = &self.trace.memory[i as usize];
            ReportedPeak {
                allocated_bytes: allocated,
                at_ns: e.ts_ns,
                at_offset_ns: e.ts_ns.saturating_sub(self.origin),
                step: self.step_of.step(pid, e.ts_ns),
                reserved_bytes: e.total_reserved,
                reserved_minus_allocated_bytes: e
                    .total_reserved
                    .map(|r| r.saturating_sub(allocated)),
            }
        });
        p.steps = steps.into_values().collect();
        p
    }

    /// The replay after event `upto` (None: before the first event in the window).
    fn replay_to(&self, idx: &[u32], upto: Option<u32>) -> Replay {
        let mut r = Replay::default();
        for &i in idx {
            let e = &self.trace.memory[i as usize];
            if upto.is_none() && self.in_window(e.ts_ns) {
                break;
            }
            r.apply(e, i);
            if Some(i) == upto {
                break;
            }
        }
        r
    }

    fn site(&self, i: u32) -> String {
        match self.sites.get(i as usize).copied().flatten() {
            Some(id) => self.trace.str(id).to_owned(),
            None => NO_RANGE.to_owned(),
        }
    }

    fn live_set(&self, r: &Replay) -> LiveSet {
        let mut all: Vec<(Option<u64>, Ns, u64, u32)> = r
            .live
            .iter()
            .map(|(&addr, &(b, i))| (b, self.trace.memory[i as usize].ts_ns, addr, i))
            .collect();
        // Largest first; then by time and address, so the list does not depend on the map.
        all.sort_by(|a, b| (b.0.unwrap_or(0), a.1, a.2).cmp(&(a.0.unwrap_or(0), b.1, b.2)));
        let mut sites: HashMap<String, (u64, u64)> = HashMap::new();
        for &(b, _, _, i) in &all {
            let s = sites.entry(self.site(i)).or_default();
            s.0 += 1;
            s.1 = s.1.saturating_add(b.unwrap_or(0));
        }
        let mut by_site: Vec<SiteBytes> = sites
            .into_iter()
            .map(|(site, (allocations, bytes))| SiteBytes {
                site,
                allocations,
                bytes,
            })
            .collect();
        by_site.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
        by_site.truncate(self.top);
        LiveSet {
            allocations: all.len() as u64,
            bytes: r.bytes(),
            unaddressed_bytes: u64::try_from(r.unaddressed).unwrap_or(u64::MAX),
            largest: all
                .iter()
                .take(self.top)
                .map(|&(bytes, at, address, i)| LiveAllocation {
                    address,
                    bytes,
                    allocated_at_ns: at,
                    site: self.site(i),
                })
                .collect(),
            by_site,
        }
    }
}

fn empty_pool(level: MemoryLevel, pid: u32, place: MemoryPlace, device: u32) -> MemoryPool {
    MemoryPool {
        level: match level {
            MemoryLevel::Framework => "framework",
            MemoryLevel::Driver => "driver",
        },
        pid,
        place: match place {
            MemoryPlace::Gpu => "gpu",
            MemoryPlace::Cpu => "cpu",
            MemoryPlace::Other(_) => "other",
        },
        device_type: match place {
            MemoryPlace::Other(n) => Some(n),
            _ => None,
        },
        device,
        allocs: 0,
        frees: 0,
        alloc_bytes: 0,
        free_bytes: 0,
        frees_without_alloc: 0,
        frees_without_alloc_bytes: 0,
        allocs_unknown_size: 0,
        unknown_events: 0,
        replaced_live: 0,
        free_size_mismatches: 0,
        peak: None,
        reported_peak: None,
        live_at_end: LiveSet::default(),
        steps: Vec::new(),
    }
}

fn count(p: &mut MemoryPool, e: &MemoryEvent, a: &Applied) {
    let b = e.bytes.unwrap_or(0);
    match *a {
        Applied::Alloc { replaced } => {
            p.allocs += 1;
            p.alloc_bytes = p.alloc_bytes.saturating_add(b);
            p.allocs_unknown_size += u64::from(e.bytes.is_none());
            p.replaced_live += u64::from(replaced);
        }
        Applied::Free { mismatch } => {
            p.frees += 1;
            p.free_bytes = p.free_bytes.saturating_add(b);
            p.free_size_mismatches += u64::from(mismatch);
        }
        Applied::Orphan => {
            p.frees += 1;
            p.free_bytes = p.free_bytes.saturating_add(b);
            p.frees_without_alloc += 1;
            p.frees_without_alloc_bytes = p.frees_without_alloc_bytes.saturating_add(b);
        }
        Applied::Unknown => p.unknown_events += 1,
    }
}

fn step_count(s: &mut StepMemory, e: &MemoryEvent, a: &Applied) {
    let b = e.bytes.unwrap_or(0);
    match a {
        Applied::Alloc { .. } => {
            s.allocs += 1;
            s.alloc_bytes = s.alloc_bytes.saturating_add(b);
        }
        Applied::Free { .. } | Applied::Orphan => {
            s.frees += 1;
            s.free_bytes = s.free_bytes.saturating_add(b);
        }
        Applied::Unknown => {}
    }
}

/// The step (its 1-based place in the list) of a process that holds a time.
struct StepLookup {
    by_pid: HashMap<u32, Vec<(Ns, Ns, u64)>>,
}

impl StepLookup {
    fn new(steps: Option<&Steps>) -> Self {
        let mut by_pid: HashMap<u32, Vec<(Ns, Ns, u64)>> = HashMap::new();
        for s in steps.map_or(&[][..], |s| s.steps.as_slice()) {
            by_pid
                .entry(s.pid)
                .or_default()
                .push((s.start_ns, s.end_ns, s.index));
        }
        for v in by_pid.values_mut() {
            v.sort_unstable();
        }
        StepLookup { by_pid }
    }

    /// Steps of one process do not nest (the step list leaves nested ones out).
    fn step(&self, pid: u32, t: Ns) -> Option<u64> {
        let v = self.by_pid.get(&pid)?;
        let k = v.partition_point(|s| s.0 <= t);
        let s = v.get(k.checked_sub(1)?)?;
        (t < s.1).then_some(s.2)
    }
}

/// A host thread: (pid, tid).
type Thread = (u32, u64);

/// Per thread, intervals with a name: (start, end, name).
type Intervals = HashMap<Thread, Vec<(Ns, Ns, StrId)>>;

/// Per memory event, its site: the innermost CPU op (torch.profiler's `cpu_op`) of its process
/// and thread that holds its time, else the innermost host range that does (`record_function`,
/// NVTX, `ProfilerStep#N`), else none. CUPTI's memory records name no thread: the call their
/// correlation id joins does.
fn sites(trace: &Trace) -> Vec<Option<StrId>> {
    let mut events: HashMap<Thread, Vec<u32>> = HashMap::new();
    let calls = trace
        .memory
        .iter()
        .any(|e| e.thread == 0 && e.correlation_id != 0)
        .then(|| crate::correlate::ApiIndex::build(&trace.api_calls));
    for (i, e) in trace.memory.iter().enumerate() {
        let call = calls
            .as_ref()
            .filter(|_| e.thread == 0 && e.correlation_id != 0)
            .and_then(|c| c.get(e.correlation_id))
            .map(|k| &trace.api_calls[k]);
        let thread = call.map_or((e.process, e.thread), |a| (a.process, a.thread));
        events.entry(thread).or_default().push(i as u32);
    }
    let mut ops: Intervals = HashMap::new();
    for o in &trace.host_ops {
        if o.kind == HostOpKind::CpuOp && events.contains_key(&(o.process, o.thread)) {
            let v = ops.entry((o.process, o.thread)).or_default();
            v.push((o.start_ns, o.end_ns, o.name));
        }
    }
    let mut ranges: Intervals = HashMap::new();
    for r in &trace.ranges {
        if r.domain == RangeDomain::Host && events.contains_key(&(r.process, r.thread)) {
            let v = ranges.entry((r.process, r.thread)).or_default();
            v.push((r.start_ns, r.end_ns, r.name));
        }
    }
    let mut out = vec![None; trace.memory.len()];
    for (key, mut evs) in events {
        evs.sort_by_key(|&i| trace.memory[i as usize].ts_ns);
        let ts: Vec<Ns> = evs
            .iter()
            .map(|&i| trace.memory[i as usize].ts_ns)
            .collect();
        let by_op = innermost(ops.get_mut(&key), &ts);
        let by_range = innermost(ranges.get_mut(&key), &ts);
        for (k, &i) in evs.iter().enumerate() {
            out[i as usize] = by_op[k].or(by_range[k]);
        }
    }
    out
}

/// For each of `ts` (in order), the innermost of `intervals` (one thread's, which nest) that
/// holds it, start inclusive and end exclusive: one sweep with a stack of the intervals begun
/// and not yet ended.
fn innermost(intervals: Option<&mut Vec<(Ns, Ns, StrId)>>, ts: &[Ns]) -> Vec<Option<StrId>> {
    let Some(rs) = intervals else {
        return vec![None; ts.len()];
    };
    // By start, outer (longer) first, so the stack's top is the innermost.
    rs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let mut stack: Vec<(Ns, StrId)> = Vec::new();
    let mut next = 0;
    ts.iter()
        .map(|&t| {
            while let Some(&(s, e, name)) = rs.get(next) {
                if s > t {
                    break;
                }
                // An interval that does not nest in the top (it ends later) still holds `t`
                // only if it has not ended; kept, it is popped when it has.
                stack.push((e, name));
                next += 1;
            }
            // Ended intervals leave from the top only (amortized O(1) per interval): one that
            // ended below an open one stays until it surfaces, and the top, the latest begun of
            // those still open, is the innermost.
            while stack.last().is_some_and(|&(e, _)| e <= t) {
                stack.pop();
            }
            stack.last().map(|&(_, name)| name)
        })
        .collect()
}

/// Whether a CUDA call allocates or frees memory, by its name (`_v2`, `_ptsz` and other
/// suffixes do not change it): `Some(true)` allocates, `Some(false)` frees.
pub fn allocation_call(name: &str) -> Option<bool> {
    const ALLOC: [&str; 5] = [
        "cudaMalloc",
        "cudaHostAlloc",
        "cuMemAlloc",
        "cuMemHostAlloc",
        "cuMemCreate",
    ];
    const FREE: [&str; 3] = ["cudaFree", "cuMemFree", "cuMemRelease"];
    if ALLOC.iter().any(|p| name.starts_with(p)) {
        Some(true)
    } else if FREE.iter().any(|p| name.starts_with(p)) {
        Some(false)
    } else {
        None
    }
}

/// Allocation and free calls per process and step.
fn api_churn(trace: &Trace, window: Option<&Window>, steps: Option<&Steps>) -> Vec<ApiChurn> {
    use cutrace_trace::ApiKind;
    let step_of = StepLookup::new(steps);
    let mut kind_of: BTreeMap<u32, ApiKind> = BTreeMap::new();
    let mut calls = Vec::new();
    for a in &trace.api_calls {
        let Some(alloc) = allocation_call(trace.str(a.name)) else {
            continue;
        };
        if window.is_some_and(|w| !(w.from_ns <= a.start_ns && a.start_ns < w.to_ns)) {
            continue;
        }
        let k = kind_of.entry(a.process).or_insert(a.kind);
        if a.kind == ApiKind::Runtime {
            *k = ApiKind::Runtime;
        }
        calls.push((a, alloc));
    }
    let mut out: BTreeMap<u32, (ApiChurn, BTreeMap<u64, StepCalls>)> = BTreeMap::new();
    for (a, alloc) in calls {
        if kind_of.get(&a.process) != Some(&a.kind) {
            continue;
        }
        let ns = a.end_ns.saturating_sub(a.start_ns);
        let (c, st) = out.entry(a.process).or_insert_with(|| {
            let kind = match a.kind {
                ApiKind::Runtime => "runtime",
                ApiKind::Driver => "driver",
            };
            (
                ApiChurn {
                    pid: a.process,
                    kind,
                    alloc_calls: 0,
                    free_calls: 0,
                    summed_host_ns: 0,
                    steps: Vec::new(),
                },
                BTreeMap::new(),
            )
        });
        c.alloc_calls += u64::from(alloc);
        c.free_calls += u64::from(!alloc);
        c.summed_host_ns = c.summed_host_ns.saturating_add(ns);
        if let Some(s) = step_of.step(a.process, a.start_ns) {
            let sc = st.entry(s).or_insert(StepCalls {
                step: s,
                alloc_calls: 0,
                free_calls: 0,
                summed_host_ns: 0,
            });
            sc.alloc_calls += u64::from(alloc);
            sc.free_calls += u64::from(!alloc);
            sc.summed_host_ns = sc.summed_host_ns.saturating_add(ns);
        }
    }
    out.into_values()
        .map(|(mut c, st)| {
            c.steps = st.into_values().collect();
            c
        })
        .collect()
}

/// One pool's memory over time, for timelines and plots: after each event, the replay's live
/// bytes and the allocator's totals where the event reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSeries {
    pub level: MemoryLevel,
    pub pid: u32,
    pub place: MemoryPlace,
    pub device: u32,
    pub points: Vec<SeriesPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesPoint {
    pub at_ns: Ns,
    pub live_bytes: u64,
    pub total_allocated: Option<u64>,
    pub total_reserved: Option<u64>,
}

/// Every pool's series over the whole trace, in the report's pool order, each by time (events
/// at one ns in the trace's order, as the replay takes them): the same replay as
/// [`memory_report`], so a plot's highest live point is the report's peak.
pub fn memory_series(trace: &Trace) -> Vec<PoolSeries> {
    pools_of(trace)
        .into_iter()
        .map(|((level, pid, place, device), idx)| {
            let mut r = Replay::default();
            let points = idx
                .iter()
                .map(|&i| {
                    let e = &trace.memory[i as usize];
                    r.apply(e, i);
                    SeriesPoint {
                        at_ns: e.ts_ns,
                        live_bytes: r.bytes(),
                        total_allocated: e.total_allocated,
                        total_reserved: e.total_reserved,
                    }
                })
                .collect();
            PoolSeries {
                level,
                pid,
                place,
                device,
                points,
            }
        })
        .collect()
}

/// Two traces' memory (`cutrace diff`): per (level, CPU or GPU, device), the peaks and the
/// churn of each side, and the churn of CUDA's allocation calls. Processes differ from run to
/// run, so a side's pools of one (level, place, device) are taken together: counts add, and a
/// peak is the highest of its processes'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryDiff {
    pub pools: Vec<PoolDiff>,
    pub api_churn_base: Option<ChurnSide>,
    pub api_churn_new: Option<ChurnSide>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolDiff {
    pub level: &'static str,
    pub place: &'static str,
    pub device: u32,
    /// Null for a side without such a pool.
    pub base: Option<PoolSide>,
    pub new: Option<PoolSide>,
    /// `new − base` of `peak_bytes` and of `reported_peak_bytes`, null unless both are known.
    pub peak_change_bytes: Option<i64>,
    pub reported_peak_change_bytes: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSide {
    /// The replay's peak (the report's `peak.bytes`), and the allocator's (`reported_peak`).
    pub peak_bytes: Option<u64>,
    pub reported_peak_bytes: Option<u64>,
    pub reserved_minus_allocated_bytes: Option<u64>,
    pub allocs: u64,
    pub frees: u64,
    pub live_at_end_bytes: u64,
    /// Steps with events of the pool, and the median (nearest-rank) of allocations per step.
    pub steps: u64,
    pub allocs_per_step_median: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChurnSide {
    pub alloc_calls: u64,
    pub free_calls: u64,
    pub summed_host_ns: Ns,
}

/// The diff of two reports' memory sections; `None` when neither has one.
pub fn memory_diff(base: Option<&MemoryReport>, new: Option<&MemoryReport>) -> Option<MemoryDiff> {
    if base.is_none() && new.is_none() {
        return None;
    }
    type Key = (&'static str, &'static str, u32);
    let mut by: BTreeMap<Key, (Option<PoolSide>, Option<PoolSide>)> = BTreeMap::new();
    for (side, r) in [(0, base), (1, new)] {
        let mut sides: BTreeMap<Key, (PoolSide, Vec<u64>)> = BTreeMap::new();
        for p in r.map_or(&[][..], |r| &r.pools[..]) {
            let (s, per_step) = sides
                .entry((p.level, p.place, p.device))
                .or_insert_with(|| (empty_side(), Vec::new()));
            merge_side(s, p);
            per_step.extend(p.steps.iter().map(|x| x.allocs));
        }
        for (k, (mut s, mut per_step)) in sides {
            per_step.sort_unstable();
            s.steps = per_step.len() as u64;
            s.allocs_per_step_median = (!per_step.is_empty())
                .then(|| per_step[crate::percentile::nearest_rank(per_step.len(), 500) - 1]);
            let e = by.entry(k).or_default();
            if side == 0 {
                e.0 = Some(s);
            } else {
                e.1 = Some(s);
            }
        }
    }
    let change = |b: Option<u64>, n: Option<u64>| match (b, n) {
        (Some(b), Some(n)) => Some(clamp_i64(i128::from(n) - i128::from(b))),
        _ => None,
    };
    let pools = by
        .into_iter()
        .map(|((level, place, device), (b, n))| PoolDiff {
            level,
            place,
            device,
            peak_change_bytes: change(
                b.as_ref().and_then(|s| s.peak_bytes),
                n.as_ref().and_then(|s| s.peak_bytes),
            ),
            reported_peak_change_bytes: change(
                b.as_ref().and_then(|s| s.reported_peak_bytes),
                n.as_ref().and_then(|s| s.reported_peak_bytes),
            ),
            base: b,
            new: n,
        })
        .collect();
    let churn = |r: Option<&MemoryReport>| {
        r.filter(|r| !r.api_churn.is_empty()).map(|r| ChurnSide {
            alloc_calls: r.api_churn.iter().map(|c| c.alloc_calls).sum(),
            free_calls: r.api_churn.iter().map(|c| c.free_calls).sum(),
            summed_host_ns: r
                .api_churn
                .iter()
                .fold(0, |a: Ns, c| a.saturating_add(c.summed_host_ns)),
        })
    };
    Some(MemoryDiff {
        pools,
        api_churn_base: churn(base),
        api_churn_new: churn(new),
    })
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn empty_side() -> PoolSide {
    PoolSide {
        peak_bytes: None,
        reported_peak_bytes: None,
        reserved_minus_allocated_bytes: None,
        allocs: 0,
        frees: 0,
        live_at_end_bytes: 0,
        steps: 0,
        allocs_per_step_median: None,
    }
}

/// Adds one process's pool to a side: counts add, the highest peak is kept (with its
/// reserved-minus-allocated).
fn merge_side(s: &mut PoolSide, p: &MemoryPool) {
    s.allocs += p.allocs;
    s.frees += p.frees;
    s.live_at_end_bytes = s.live_at_end_bytes.saturating_add(p.live_at_end.bytes);
    if let Some(k) = &p.peak {
        s.peak_bytes = Some(s.peak_bytes.map_or(k.bytes, |b| b.max(k.bytes)));
    }
    if let Some(rp) = &p.reported_peak {
        if s.reported_peak_bytes.is_none_or(|b| rp.allocated_bytes > b) {
            s.reported_peak_bytes = Some(rp.allocated_bytes);
            s.reserved_minus_allocated_bytes = rp.reserved_minus_allocated_bytes;
        }
    }
}
