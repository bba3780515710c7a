//! The record model: every activity cutrace knows, in integer nanoseconds, independent of CUDA.
//!
//! Timestamps are `u64` nanoseconds on the trace's own clock (CUPTI's normalized clock for native
//! traces, the Kineto `ts` for imported ones). Durations and differences are `i64`, because
//! launch-to-start latency can be negative on an imported trace whose host and device clocks
//! disagree. Nothing here assumes records are ordered: CUPTI's buffers are not.

/// Nanoseconds on the trace clock.
pub type Ns = u64;

/// Index into [`Trace::strings`]. Names are interned so a kernel record stays small.
pub type StrId = u32;

/// Index into [`Trace::launches`]: a kernel's launch configuration.
pub type LaunchId = u32;

/// A kernel execution (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, Kineto `kernel`).
///
/// Kept to 48 bytes: a 10 MB native part holds about 2 M kernels (with their launch calls), and
/// the records are what a command keeps in memory. What repeats from launch to launch (grid,
/// block, registers, shared memory, graph) lives once in [`Trace::launches`]; see
/// [`Trace::launch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub device: u32,
    pub context: u32,
    pub stream: u64,
    pub correlation_id: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// Mangled name as CUPTI reports it (demangled only when printed).
    pub name: StrId,
    /// The kernel's [`Launch`] in [`Trace::launches`]; an id outside the table reads as the
    /// all-zero launch (unknown).
    pub launch: LaunchId,
}

/// How a kernel was launched. Kernels share few distinct ones (a training step launches the same
/// kernels with the same shapes again and again), so a trace holds each once, in
/// [`Trace::launches`], and a [`Kernel`] its index. All zero when the source does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers_per_thread: u32,
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    /// CUDA graph the kernel was launched from, 0 when none.
    pub graph_id: u32,
}

/// Interns [`Launch`]es while a trace is being built, as [`Interner`] does strings.
#[derive(Debug, Default)]
pub struct LaunchInterner {
    launches: Vec<Launch>,
    index: std::collections::HashMap<Launch, LaunchId, FxBuild>,
}

impl LaunchInterner {
    /// Starts from an existing table (ids are kept).
    pub fn from_launches(launches: Vec<Launch>) -> Self {
        let index = launches
            .iter()
            .enumerate()
            .map(|(i, l)| (*l, i as LaunchId))
            .collect();
        LaunchInterner { launches, index }
    }

    pub fn intern(&mut self, l: Launch) -> LaunchId {
        if let Some(&id) = self.index.get(&l) {
            return id;
        }
        let id = self.launches.len() as LaunchId;
        self.launches.push(l);
        self.index.insert(l, id);
        id
    }

    pub fn into_launches(self) -> Vec<Launch> {
        self.launches
    }

    /// The launches interned so far, by id.
    pub fn as_slice(&self) -> &[Launch] {
        &self.launches
    }
}

impl Kernel {
    /// Whether the record has no timestamps: CUPTI writes start = end = 0 for a kernel profiled
    /// with kernel replay (`cutrace profile`); no real GPU timestamp is 0.
    pub fn untimed(&self) -> bool {
        self.start_ns == 0 && self.end_ns == 0
    }
}

/// One hardware counter value of one kernel (`cutrace profile`: CUPTI Range Profiling, one range
/// per kernel, joined to the kernel by its correlation id).
#[derive(Debug, Clone, Copy)]
pub struct KernelMetric {
    pub correlation_id: u64,
    pub device: u32,
    pub process: u32,
    /// The metric's name (`sm__ctas_launched.sum`).
    pub metric: StrId,
    /// NaN when the value is unavailable (a unit shared with another MIG instance, an
    /// evaluation that failed): never 0, which would be a measurement.
    pub value: f64,
}

/// One PM Sampling value (`cutrace sample`): a device-wide counter read by the hardware over
/// one sampling interval, `[start_ns, end_ns)`, on the trace's clock (the activity records').
#[derive(Debug, Clone, Copy)]
pub struct PmSample {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub device: u32,
    pub process: u32,
    /// The metric's name (`sm__cycles_active.avg.pct_of_peak_sustained_elapsed`).
    pub metric: StrId,
    /// NaN when the value could not be evaluated: never 0.
    pub value: f64,
}

/// Whether a memory event took memory or gave it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryOp {
    Alloc,
    Free,
    /// The source did not say (a torch `[memory]` event whose `Bytes` did not read): counted,
    /// never replayed.
    Unknown,
}

/// What kind of memory an event is about (torch's `Device Type`: 0 CPU, 1 CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryPlace {
    Cpu,
    Gpu,
    /// Another device type (torch's number for it).
    Other(u8),
}

/// Which allocator made an allocation: the framework's (torch's caching allocator, as its
/// `[memory]` events say) or the CUDA driver's (CUPTI's memory activity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryLevel {
    Framework,
    Driver,
}

/// One allocation or free (torch.profiler's `[memory]` instant event). Sizes are integer
/// bytes; `None` is a value the source did not give (or that did not read), never a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEvent {
    pub ts_ns: Ns,
    pub process: u32,
    /// The host thread that allocated or freed (attribution to host ranges goes through it).
    pub thread: u64,
    pub place: MemoryPlace,
    pub device: u32,
    pub level: MemoryLevel,
    pub op: MemoryOp,
    /// The block's address; `None` where the source did not give one (torch 1.8's `[memory]`
    /// events have no `Addr`): such events are replayed by their sizes alone.
    pub address: Option<u64>,
    /// The block's size (for a free, the size given back).
    pub bytes: Option<u64>,
    /// What the allocator reported in use and held after this event (torch's `Total
    /// Allocated` and `Total Reserved`), over the whole process, not just what the trace saw.
    pub total_allocated: Option<u64>,
    pub total_reserved: Option<u64>,
    /// The call that made it, where the source links one (CUPTI's correlation id; 0 = none).
    pub correlation_id: u64,
}

/// What happened to a CUDA memory pool (`cudaMallocAsync`'s stream-ordered allocator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolOp {
    /// CUPTI's MEMORY_POOL records: the pool made, destroyed, trimmed (`cudaMemPoolTrimTo`).
    Created,
    Destroyed,
    Trimmed,
    /// A MEMORY2 record from the pool: an allocation or free of a block in it, with the pool's
    /// state then.
    Alloc,
    Free,
    /// An operation code the reader does not know.
    Unknown,
}

/// A CUDA memory pool's type (`CUpti_ActivityMemoryPoolType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolType {
    /// The process's own pool: its size, utilized size and release threshold are valid.
    Local,
    /// A pool imported from another process (`cudaMemPoolImportFromShareableHandle`): CUPTI
    /// gives its owner's process id where a local pool's size is, and no use figures.
    Imported,
    Unknown,
}

/// One observation of a CUDA memory pool (CUPTI's `CUpti_ActivityMemoryPool3`, or the
/// `memoryPoolConfig` of a `CUpti_ActivityMemory4` from the pool): the pool's size (what it
/// holds from the device: reserved) and utilized size (what its live blocks use) at `ts_ns`.
/// Integer bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolEvent {
    pub ts_ns: Ns,
    pub process: u32,
    pub device: u32,
    pub op: PoolOp,
    pub pool_type: PoolType,
    /// The pool's base address: the pool's identity within its process.
    pub address: u64,
    /// The pool's size (a local pool; for an imported one, the owning process id as CUPTI
    /// gives it, not a size).
    pub size: u64,
    pub utilized: u64,
    pub release_threshold: u64,
    /// What a trim was asked to keep (0 for the other operations).
    pub min_bytes_to_keep: u64,
    /// A pool of managed memory (else pinned, as CUPTI says it): known from MEMORY_POOL
    /// records only, false in block records.
    pub managed: bool,
    /// For `Alloc` and `Free`: the block's address and size (0 otherwise).
    pub block_address: u64,
    pub block_bytes: u64,
    /// The call that did it (CUPTI's correlation id; 0 = none).
    pub correlation_id: u64,
}

/// Bitwise, so that a NaN ("unavailable") equals itself and traces compare as written.
impl PartialEq for PmSample {
    fn eq(&self, o: &Self) -> bool {
        self.start_ns == o.start_ns
            && self.end_ns == o.end_ns
            && self.device == o.device
            && self.process == o.process
            && self.metric == o.metric
            && self.value.to_bits() == o.value.to_bits()
    }
}

impl Eq for PmSample {}

/// How a trace's PM samples were collected (`cutrace sample`), from its parts' `META` chunks.
/// Everything lost is counted here, so a report can say so.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PmSamplingInfo {
    /// The metrics sampled, in order.
    pub metrics: Vec<String>,
    /// The sampling interval asked for, in ns (GPU time-interval trigger).
    pub interval_ns: u64,
    /// Devices sampled.
    pub devices: Vec<u32>,
    /// Samples kept (one value per metric each).
    pub samples: u64,
    /// First samples dropped on purpose, one per sampled device: CUPTI documents the first
    /// sample as a possible outlier.
    pub first_samples_dropped: u64,
    /// Decodes that found the hardware buffer had overflowed: samples were lost there.
    pub overflows: u64,
    /// Samples estimated lost to overflows, from the gaps they left in the sample times.
    pub samples_lost: u64,
    /// Samples left out because the writer's queue was full.
    pub samples_dropped_queue: u64,
    /// What was added to the samples' timestamps to put them on the trace's clock (0: the
    /// same clock; see docs/FORMAT.md).
    pub clock_offset_ns: i64,
    /// Why sampling did not start or stopped, with the fix (the first failure).
    pub error: Option<String>,
    /// Metrics of the default set the device does not have (NVLink on a GPU without it).
    pub left_out: Vec<String>,
}

/// The most entries a merged list of a part's facts keeps (metric names, devices, stall
/// reasons): far above any recording; a hostile part's longer lists are cut there.
pub const MAX_LISTED: usize = 4096;

/// Adds the entries of `src` that `dst` lacks, in order, up to [`MAX_LISTED`]: linear in both
/// (two parts of 100,000 names once took 15 s here).
fn union_into<T: Eq + std::hash::Hash + Clone>(dst: &mut Vec<T>, src: &[T]) {
    let mut seen: std::collections::HashSet<T> = dst.iter().cloned().collect();
    for x in src {
        if dst.len() >= MAX_LISTED {
            break;
        }
        if seen.insert(x.clone()) {
            dst.push(x.clone());
        }
    }
}

impl PmSamplingInfo {
    /// Two parts' facts as one: counts add, lists are unioned in order, the first error is kept.
    pub fn merge(&mut self, o: &PmSamplingInfo) {
        union_into(&mut self.metrics, &o.metrics);
        union_into(&mut self.devices, &o.devices);
        union_into(&mut self.left_out, &o.left_out);
        self.interval_ns = self.interval_ns.max(o.interval_ns);
        self.samples = self.samples.saturating_add(o.samples);
        self.first_samples_dropped = self
            .first_samples_dropped
            .saturating_add(o.first_samples_dropped);
        self.overflows = self.overflows.saturating_add(o.overflows);
        self.samples_lost = self.samples_lost.saturating_add(o.samples_lost);
        self.samples_dropped_queue = self
            .samples_dropped_queue
            .saturating_add(o.samples_dropped_queue);
        if self.clock_offset_ns == 0 {
            self.clock_offset_ns = o.clock_offset_ns;
        }
        if self.error.is_none() {
            self.error = o.error.clone();
        }
    }
}

/// One PC Sampling count (`cutrace profile --pc-sampling`): how often CUPTI's sampler found a
/// warp at one instruction (a PC offset in a function of a module) stalled for one reason. It
/// has no time: CUPTI's PC records carry none. A (PC, reason) may have several rows, one per
/// buffer the recorder read; their samples add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcSample {
    pub device: u32,
    pub process: u32,
    /// CUPTI's correlation id of the launch; 0 in continuous mode, the mode cutrace samples in
    /// (CUPTI ties no record to a launch then; the function names the code).
    pub correlation_id: u64,
    /// The function holding the PC, as CUPTI names it (mangled): the kernel itself, or a device
    /// function it calls that was not inlined.
    pub function: StrId,
    /// CUPTI's index of that function's symbol in its module.
    pub function_index: u32,
    /// The instruction's offset in the function (bytes of SASS).
    pub pc_offset: u64,
    /// CUPTI's CRC of the module (cubin) the function is in: with the function and the offset,
    /// it names the instruction.
    pub cubin_crc: u64,
    /// CUPTI's name of the stall reason (`smsp__pcsamp_warps_issue_stalled_long_scoreboard`).
    pub stall_reason: StrId,
    pub samples: u64,
    /// The source file of the PC, from the cubin's line information; `None` when it has none.
    pub source_file: Option<StrId>,
    /// The source line; 0 when unknown.
    pub source_line: u32,
}

/// How a trace's PC samples were collected (`cutrace profile --pc-sampling`), from its parts'
/// `META` chunks. Every sample CUPTI counted but the trace does not hold is counted here.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PcSamplingInfo {
    /// The stall reasons collected (every one the GPU names), CUPTI's names in its order.
    pub stall_reasons: Vec<String>,
    /// CUPTI's sampling period exponent: a sample every 2^N cycles per SM; `None` when CUPTI's
    /// default (chosen by SM count) was kept.
    pub sampling_period: Option<u32>,
    /// `continuous` (kernels run as they would, correlation ids are 0) or `kernel_serialized`.
    pub collection_mode: String,
    /// Devices sampled.
    pub devices: Vec<u32>,
    /// CUPTI's `totalSamples` over every buffer read: all samples, dropped and non-user ones
    /// included.
    pub samples_total: u64,
    /// CUPTI's `droppedSamples`: dropped by the hardware (backpressure, overflow).
    pub samples_dropped: u64,
    /// CUPTI's `nonUsrKernelsTotalSamples`: samples in kernels CUPTI gives no PC records for.
    pub samples_non_user: u64,
    /// Buffers read while the hardware buffer was full (its PC data then reads as 0).
    pub hardware_buffer_full: u64,
    /// PC records CUPTI had that no buffer held (beyond its capacity, or discarded at Disable).
    pub pcs_lost: u64,
    /// PC records read with something odd (a stall count past its array, no array, a name cut
    /// or missing, a stall reason CUPTI did not name).
    pub records_odd: u64,
    /// Rows left out because the recorder's queue was full.
    pub rows_dropped_queue: u64,
    /// Loaded modules whose cubin the recorder did not keep (past its bound): their PCs have no
    /// source line.
    pub cubins_not_kept: u64,
    /// Why sampling did not start or stopped, with the fix (the first failure).
    pub error: Option<String>,
}

impl PcSamplingInfo {
    /// Two parts' facts as one: counts add, lists are unioned in order, the first period, mode
    /// and error are kept.
    pub fn merge(&mut self, o: &PcSamplingInfo) {
        union_into(&mut self.stall_reasons, &o.stall_reasons);
        union_into(&mut self.devices, &o.devices);
        self.sampling_period = self.sampling_period.or(o.sampling_period);
        if self.collection_mode.is_empty() {
            self.collection_mode = o.collection_mode.clone();
        }
        self.samples_total = self.samples_total.saturating_add(o.samples_total);
        self.samples_dropped = self.samples_dropped.saturating_add(o.samples_dropped);
        self.samples_non_user = self.samples_non_user.saturating_add(o.samples_non_user);
        self.hardware_buffer_full = self
            .hardware_buffer_full
            .saturating_add(o.hardware_buffer_full);
        self.pcs_lost = self.pcs_lost.saturating_add(o.pcs_lost);
        self.records_odd = self.records_odd.saturating_add(o.records_odd);
        self.rows_dropped_queue = self.rows_dropped_queue.saturating_add(o.rows_dropped_queue);
        self.cubins_not_kept = self.cubins_not_kept.saturating_add(o.cubins_not_kept);
        if self.error.is_none() {
            self.error = o.error.clone();
        }
    }
}

/// One communication call (all-reduce, all-gather, send, …) as the trace annotates it, joined to
/// the kernel that carried it out by its correlation id. Fields the source did not write are
/// `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collective {
    /// The kernel's correlation id ([`Kernel::correlation_id`]).
    pub correlation_id: u64,
    pub device: u32,
    /// The collective's name as written (`allreduce`, `_allgather_base`, `send`).
    pub name: StrId,
    /// Process group name and description (`0`, `default_pg`).
    pub group_name: Option<StrId>,
    pub group_desc: Option<StrId>,
    /// Ranks in the process group.
    pub group_size: Option<u32>,
    /// The process group's sequence number of this call: equal on every rank for one call.
    pub seq: Option<u64>,
    /// Message sizes in elements, and the element type.
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub dtype: Option<StrId>,
}

/// Bitwise, so that a NaN ("unavailable") equals itself and traces compare as written.
impl PartialEq for KernelMetric {
    fn eq(&self, o: &Self) -> bool {
        self.correlation_id == o.correlation_id
            && self.device == o.device
            && self.process == o.process
            && self.metric == o.metric
            && self.value.to_bits() == o.value.to_bits()
    }
}

impl Eq for KernelMetric {}

/// How a trace's counters were collected (`cutrace profile`), from its parts' `META` chunks.
/// Every count of a kernel left without values is here, so a report can say so.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CounterInfo {
    /// The metrics asked for, in order.
    pub metrics: Vec<String>,
    /// Replay passes the metrics need (each profiled kernel ran this many times).
    pub passes: Option<u32>,
    /// Kernels whose values were read.
    pub kernels_profiled: u64,
    /// Kernels left out on purpose: not matching --kernels, past --max-kernels, between
    /// --every.
    pub kernels_skipped: u64,
    /// Graph launches (cuGraphLaunch): their kernels are traced but get no counters.
    pub graph_launches: u64,
    /// Launches into a stream being captured into a graph (they run later, inside a graph
    /// launch, without counters). No range is opened while a capture is open.
    pub launches_captured: u64,
    /// Ranges the profiler dropped (`numOfRangeDropped`) or whose values could not be read.
    pub ranges_dropped: u64,
    /// Why counters were not read at all or stopped, with the fix (the first failure).
    pub error: Option<String>,
}

impl CounterInfo {
    /// Two parts' counter facts as one: counts add, metrics are unioned in order, the larger
    /// pass count and the first error are kept.
    pub fn merge(&mut self, o: &CounterInfo) {
        union_into(&mut self.metrics, &o.metrics);
        self.passes = self.passes.max(o.passes);
        self.kernels_profiled = self.kernels_profiled.saturating_add(o.kernels_profiled);
        self.kernels_skipped = self.kernels_skipped.saturating_add(o.kernels_skipped);
        self.graph_launches = self.graph_launches.saturating_add(o.graph_launches);
        self.launches_captured = self.launches_captured.saturating_add(o.launches_captured);
        self.ranges_dropped = self.ranges_dropped.saturating_add(o.ranges_dropped);
        if self.error.is_none() {
            self.error = o.error.clone();
        }
    }
}

/// Direction of a memory copy, in CUPTI's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyKind {
    HtoD,
    DtoH,
    DtoD,
    HtoH,
    PtoP,
    Unknown,
}

impl CopyKind {
    pub fn label(self) -> &'static str {
        match self {
            CopyKind::HtoD => "HtoD",
            CopyKind::DtoH => "DtoH",
            CopyKind::DtoD => "DtoD",
            CopyKind::HtoH => "HtoH",
            CopyKind::PtoP => "PtoP",
            CopyKind::Unknown => "unknown",
        }
    }
}

/// A memory copy (CUPTI_ACTIVITY_KIND_MEMCPY / MEMCPY2, Kineto `gpu_memcpy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memcpy {
    pub kind: CopyKind,
    pub bytes: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u64,
    pub correlation_id: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
}

/// A memset (CUPTI_ACTIVITY_KIND_MEMSET, Kineto `gpu_memset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memset {
    pub bytes: u64,
    pub value: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u64,
    pub correlation_id: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
}

/// Which CUDA API layer a call belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiKind {
    Runtime,
    Driver,
}

/// A host-side CUDA API call (CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER, Kineto `cuda_runtime` /
/// `cuda_driver`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCall {
    pub kind: ApiKind,
    /// Function name (`cudaLaunchKernel`); CUPTI gives a callback id that the recorder resolves.
    pub name: StrId,
    /// CUPTI callback id when known (0 on imported traces). CUPTI's ids are below 2¹⁶ (a few
    /// hundred per API); 16 bits keep the record at 48 bytes (see [`Kernel`]).
    pub cbid: u16,
    pub process: u32,
    pub thread: u64,
    pub correlation_id: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The call's return value (0 = success) when known.
    pub return_value: i32,
}

impl ApiCall {
    /// A callback id as stored: one past 2¹⁶ (none exists) reads as 65535, never wrapped.
    pub fn cbid_of(v: u64) -> u16 {
        u16::try_from(v).unwrap_or(u16::MAX)
    }
}

/// What a synchronization waited on (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, Kineto `cuda_sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncKind {
    EventSynchronize,
    StreamWaitEvent,
    StreamSynchronize,
    ContextSynchronize,
    Unknown,
}

impl SyncKind {
    pub fn label(self) -> &'static str {
        match self {
            SyncKind::EventSynchronize => "event_sync",
            SyncKind::StreamWaitEvent => "stream_wait_event",
            SyncKind::StreamSynchronize => "stream_sync",
            SyncKind::ContextSynchronize => "context_sync",
            SyncKind::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synchronization {
    pub kind: SyncKind,
    pub device: u32,
    pub context: u32,
    /// Stream waited on; `None` for context-wide synchronization.
    pub stream: Option<u64>,
    pub correlation_id: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// For an event synchronize or a stream's wait on an event: the stream the event was
    /// recorded on (Kineto's `wait_on_stream`); `None` where the source does not say (CUPTI's
    /// records do not).
    pub wait_on_stream: Option<u64>,
    /// The correlation id of the `cudaEventRecord` call that recorded the event waited for
    /// (Kineto's `wait_on_cuda_event_record_corr_id`); `None` where unknown.
    pub event_record_correlation: Option<u64>,
}

/// Where an annotation range was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeDomain {
    /// A host-side range: NVTX push/pop or start/end, Kineto `user_annotation`.
    Host,
    /// The GPU projection of a host range, Kineto `gpu_user_annotation`.
    Gpu,
}

/// An NVTX range (or a torch `record_function` annotation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvtxRange {
    pub domain: RangeDomain,
    pub name: StrId,
    pub process: u32,
    pub thread: u64,
    /// Device for GPU-domain ranges.
    pub device: Option<u32>,
    /// Stream for GPU-domain ranges.
    pub stream: Option<u64>,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The NVTX domain the range was pushed in (`nvtxDomainCreate`'s name, e.g. `NCCL`); `None`
    /// for NVTX's default domain and for sources that do not record one (Kineto JSON). Held as
    /// text, not a string id, so it survives the merge of parts unchanged.
    pub nvtx_domain: Option<std::sync::Arc<str>>,
}

/// An instantaneous NVTX mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvtxMark {
    pub name: StrId,
    pub process: u32,
    pub thread: u64,
    pub ts_ns: Ns,
    /// The NVTX domain of the mark, as [`NvtxRange::nvtx_domain`].
    pub nvtx_domain: Option<std::sync::Arc<str>>,
}

/// Which of the source's host categories a [`HostOp`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostOpKind {
    /// A framework operator: torch.profiler's `cpu_op` (an ATen op, `enumerate(DataLoader)`,
    /// `Optimizer.step`), written `Operator` by the torch 1.8-era profiler (2020–2021).
    CpuOp,
    /// A Python call (torch.profiler's `python_function`, with `with_stack=True`).
    PythonFunction,
}

impl HostOpKind {
    /// The source's category, as torch.profiler writes it today.
    pub fn label(self) -> &'static str {
        match self {
            HostOpKind::CpuOp => "cpu_op",
            HostOpKind::PythonFunction => "python_function",
        }
    }
}

/// A framework operation on a host thread: what the program was doing on the CPU when it was
/// not in a CUDA call. Ops nest on their thread by their intervals (an op inside another's
/// interval on the same process and thread ran inside it); the CUDA calls they made are the
/// [`ApiCall`]s of the same thread inside their interval. Kept to 48 bytes: a trace of a
/// training run holds ten times more of them than kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOp {
    pub kind: HostOpKind,
    pub name: StrId,
    pub process: u32,
    pub thread: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The source's id of the op (Kineto's `External id`, which the CUDA calls it made carry
    /// too); 0 when none.
    pub external_id: u64,
}

/// Time CUPTI itself spent (CUPTI_ACTIVITY_KIND_OVERHEAD): buffer flushes, instrumentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overhead {
    /// CUPTI's overhead kind, as a name (`CUPTI_OVERHEAD_KIND_BUFFER_FLUSH`, …).
    pub kind: StrId,
    pub process: u32,
    pub thread: u64,
    pub start_ns: Ns,
    pub end_ns: Ns,
}

/// Static properties of one GPU, as far as the source knows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceProps {
    pub device: u32,
    pub name: String,
    pub compute_capability: Option<(u32, u32)>,
    pub sm_count: Option<u32>,
    pub global_memory_bytes: Option<u64>,
    pub uuid: Option<String>,
}

/// Where a trace came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceFormat {
    /// cutrace's own recorder.
    #[default]
    Native,
    /// A PyTorch profiler (Kineto) chrome-trace JSON.
    Kineto,
}

/// Something the recorder wanted a reader to know: a setting that failed, a fallback it took,
/// another CUPTI tool in the program, a buffer it could not read to its end. Native traces carry
/// them in the `HEAD` chunk and in later `META` chunks of each part.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceNote {
    /// The process whose part holds the note (`HEAD.pid`), when known.
    pub pid: Option<u32>,
    /// The part file that holds it.
    pub part: Option<String>,
    pub text: String,
}

/// Where CUPTI's clock stood against the host's clocks when recording began.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClockRef {
    /// `cuptiGetTimestamp()` (the clock every record uses).
    pub cupti_ns: u64,
    /// `CLOCK_REALTIME` read right after, nanoseconds since the Unix epoch.
    pub realtime_ns: u64,
    /// `CLOCK_MONOTONIC` read right after.
    pub monotonic_ns: u64,
}

/// The `HEAD` chunk: who wrote the file, where, with what.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Header {
    pub format_version: u32,
    pub cutrace_version: String,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub cupti_version: Option<u32>,
    pub cupti_path: Option<String>,
    pub cuda_driver_version: Option<u32>,
    pub driver_version: Option<String>,
    pub clock: Option<ClockRef>,
    /// Activity kinds enabled, in CUPTI's names.
    pub kinds: Vec<String>,
    pub buffer_bytes: Option<u64>,
    /// CUPTI's per-context device buffer asked for with `CUTRACE_DEVICE_BUFFER_BYTES` (`None`:
    /// CUPTI's default); a note says so if CUPTI refused it.
    pub device_buffer_bytes: Option<u64>,
    /// Only with `cutrace record --record-cmdline` (a command line can hold secrets).
    pub cmdline: Option<Vec<String>>,
    /// Anything the recorder wants a reader to know (settings that failed, fallbacks taken).
    pub notes: Vec<String>,
    /// The process's place in a distributed job: `RANK`, `LOCAL_RANK`, `WORLD_SIZE` from its
    /// environment, and the id of the `cutrace record` run that started it (`CUTRACE_RUN_ID`).
    /// Absent in parts written before cutrace recorded them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<Distributed>,
    /// Which CUDA API calls the recorder kept (`cutrace record --api`), as it applied them.
    /// Absent when the part records no API kind, and in parts written before the header said
    /// it (the reader then takes it from the recorder's note, see `native::reader`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_records: Option<ApiRecords>,
}

/// The API calls a part holds records of, as the recorder applied `--api`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ApiRecords {
    /// `all`, `lean` (state queries left out), `launches` (only calls that launch work or
    /// move memory) or `custom` (runtime records for the callback ids a benchmark named). `all`
    /// also where a mode could not be applied and every call was recorded. Read as written:
    /// any other text is a mode this build does not know, said as it is.
    pub mode: String,
    /// Runtime and driver callback ids whose calls were left out by choice (absent in parts
    /// whose header did not say, whose note named the mode alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_left_out: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_left_out: Option<u64>,
}

impl ApiRecords {
    /// True when the mode leaves calls out (`lean`, `launches`).
    pub fn leaves_calls_out(&self) -> bool {
        self.mode != "all"
    }
}

/// One part file of a native trace (one CUDA process), as read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartMeta {
    /// The file.
    pub path: String,
    /// `HEAD.host` and `HEAD.pid`, when the part's header was read.
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// Earliest start and latest end of the part's records ([`Trace::bounds_ns`]); `None` when
    /// the part holds no records.
    pub first_ns: Option<Ns>,
    pub last_ns: Option<Ns>,
    /// False when the part's writer did not finish or the file was cut short.
    pub complete: bool,
    /// The part's `HEAD` chunk as read (the default when it was lost), for exports that carry
    /// it (`meta.json`); not part of the report.
    #[serde(skip)]
    pub header: Header,
}

impl PartMeta {
    /// The part's place in a distributed job, as its header recorded it (`None` for parts
    /// written before cutrace recorded ranks, and for processes outside a distributed job with
    /// no `cutrace record` run id).
    pub fn distributed(&self) -> Option<&Distributed> {
        self.header.distributed.as_ref()
    }

    /// The `cutrace record` run that wrote the part, when its header says.
    pub fn run_id(&self) -> Option<&str> {
        self.distributed().and_then(|d| d.run_id.as_deref())
    }
}

/// Facts about the trace as a whole. Every count of lost data lives here and is reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceMeta {
    pub source: SourceFormat,
    /// File(s) the trace was read from.
    pub paths: Vec<String>,
    /// Records the recorder dropped because its buffer pool ran out.
    pub dropped_by_recorder: u64,
    /// CUPTI's own dropped count (`cuptiActivityGetNumDroppedRecords`), summed over contexts.
    pub dropped_by_cupti: u64,
    /// Whether the source records the two drop counts above: cutrace's own traces (and their
    /// Chrome exports) do, torch.profiler's do not. When false the counts are unknown, not 0.
    pub drops_recorded: bool,
    /// `cuptiGetVersion`, when known.
    pub cupti_version: Option<u32>,
    /// `cuDriverGetVersion` (e.g. 13000), when known.
    pub cuda_driver_version: Option<u32>,
    /// Kernel driver version string (`580.159.04`), when known.
    pub driver_version: Option<String>,
    pub devices: Vec<DeviceProps>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// False when the writer did not finish (killed, crashed) or the file was truncated.
    pub complete: bool,
    /// Why the trace is incomplete, when it is.
    pub incomplete_reason: Option<String>,
    /// Native traces: bytes skipped as damaged (chunks failing their checksum or not decoding,
    /// not a file merely cut off), and the stretches of them; every good chunk after them was read.
    pub damaged_bytes: u64,
    pub damaged_regions: u64,
    /// Events in the source the importer did not model (by category), so nothing vanishes silently.
    pub skipped_events: Vec<(String, u64)>,
    /// Values that did not read in fields cutrace does not compute from (a negative stream, a
    /// string where a number was expected), by `category "key"`: each was left unknown and the
    /// rest of its event read. Counted, never fatal; each kind also has a note.
    pub unread_values: Vec<(String, u64)>,
    /// The source's own account of records it dropped or could not place, when it wrote one:
    /// Kineto's `Record counts: Out-of-range = 4181, Blocklisted runtime = 0, …` line, as
    /// (name, count) in its order.
    pub source_drops: Vec<(String, u64)>,
    /// The recorder's notes, part by part in read order, each once per part (`HEAD` notes first,
    /// then `META` notes in file order).
    pub notes: Vec<TraceNote>,
    /// The part files read, in read order (native traces; empty for imported ones).
    pub parts: Vec<PartMeta>,
    /// How hardware counters were collected, for a trace recorded with `cutrace profile`.
    pub counters: Option<CounterInfo>,
    /// How PM samples were collected, for a trace recorded with `cutrace sample`.
    pub pm_sampling: Option<PmSamplingInfo>,
    /// How PC samples were collected, for a trace recorded with `cutrace profile --pc-sampling`.
    pub pc_sampling: Option<PcSamplingInfo>,
    /// A trace merged from several parts: the pid of the process behind each part number N, by
    /// N. A process's CUPTI correlation and stream ids are its own (each process counts from
    /// 1), so the merge adds N·2³² to those of part N (N ≥ 1, in read order) to keep processes
    /// apart; [`TraceMeta::id_origin`] takes that back off for display. Empty when the trace is
    /// one part or was imported (its ids are as recorded).
    pub id_parts: Vec<Option<u32>>,
    /// Where the trace sits in a distributed job, when the source says: torch.profiler's
    /// `distributedInfo`, or the `RANK`/`LOCAL_RANK`/`WORLD_SIZE` a native part recorded.
    pub distributed: Option<Distributed>,
}

/// A trace's place in a distributed job. Every field is optional: sources write some of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Distributed {
    /// Global rank (`RANK`, torch's `distributedInfo.rank`).
    pub rank: Option<u32>,
    /// Rank within its host (`LOCAL_RANK`).
    pub local_rank: Option<u32>,
    /// Number of ranks in the job (`WORLD_SIZE`).
    pub world_size: Option<u32>,
    /// Communication backend (`nccl`, `gloo`), when the source names it.
    pub backend: Option<String>,
    /// An id shared by every part of one `cutrace record` run.
    pub run_id: Option<String>,
    /// torch.profiler's `distributedInfo.nccl_version`, when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_version: Option<String>,
    /// The process groups torch.profiler listed (`distributedInfo.pg_config`), in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_groups: Vec<ProcessGroup>,
}

/// One process group as torch.profiler lists it in `distributedInfo.pg_config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessGroup {
    /// `pg_name` (`0`) and `pg_desc` (`default_pg`): what [`Collective::group_name`] and
    /// [`Collective::group_desc`] name.
    pub name: Option<String>,
    pub desc: Option<String>,
    /// `backend_config` (`cuda:nccl`, `cpu:gloo,cuda:gloo`).
    pub backend_config: Option<String>,
    pub size: Option<u32>,
    /// Global ranks in the group.
    pub ranks: Vec<u32>,
}

impl TraceMeta {
    /// An id (correlation or stream) as its own process knows it, and that process's pid:
    /// `(Some(pid), id − N·2³²)` in a merged trace (`pid` `None` only when part N's header was
    /// not read), `(None, id)` otherwise.
    pub fn id_origin(&self, id: u64) -> (Option<u32>, u64) {
        match self.id_parts.get((id >> 32) as usize) {
            Some(&pid) if self.id_parts.len() > 1 => (pid, id & 0xffff_ffff),
            _ => (None, id),
        }
    }

    /// `id` for a person: `7`, or `7 (pid 491)` in a merged trace.
    pub fn show_id(&self, id: u64) -> String {
        show_merged_id(&self.id_parts, id)
    }
}

/// `id` for a person, given a merged trace's [`TraceMeta::id_parts`]: `7 (pid 491)` for part
/// N's `N·2³² + 7`; the id as is when the trace was not merged.
pub fn show_merged_id(id_parts: &[Option<u32>], id: u64) -> String {
    if id_parts.len() > 1 {
        if let Some(&pid) = id_parts.get((id >> 32) as usize) {
            let local = id & 0xffff_ffff;
            return match pid {
                Some(p) => format!("{local} (pid {p})"),
                None => format!("{local} (part {})", id >> 32),
            };
        }
    }
    id.to_string()
}

/// A whole trace: flat vectors of records plus the interned strings they point into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub meta: TraceMeta,
    pub strings: Vec<String>,
    /// The kernels' launch configurations, each once ([`Kernel::launch`] indexes it).
    pub launches: Vec<Launch>,
    pub kernels: Vec<Kernel>,
    pub memcpys: Vec<Memcpy>,
    pub memsets: Vec<Memset>,
    pub api_calls: Vec<ApiCall>,
    pub syncs: Vec<Synchronization>,
    pub ranges: Vec<NvtxRange>,
    pub marks: Vec<NvtxMark>,
    /// Framework operations on host threads (torch.profiler's `cpu_op`, `python_function`,
    /// `Operator`), in the order the source listed them.
    pub host_ops: Vec<HostOp>,
    pub overheads: Vec<Overhead>,
    /// Hardware counter values per kernel (`cutrace profile`), joined by correlation id.
    pub kernel_metrics: Vec<KernelMetric>,
    /// PM Sampling time series (`cutrace sample`), one row per sample and metric.
    pub pm_samples: Vec<PmSample>,
    /// PC Sampling stall counts (`cutrace profile --pc-sampling`), per instruction and reason.
    pub pc_samples: Vec<PcSample>,
    /// Collective and point-to-point communication calls as the source annotated them (torch's
    /// `record_param_comms`), each joined to the kernel that ran it.
    pub collectives: Vec<Collective>,
    /// Allocations and frees, in the order the source listed them (the order a replay uses
    /// for events at the same nanosecond).
    pub memory: Vec<MemoryEvent>,
    /// CUDA memory pools' operations and their state at each (CUPTI's MEMORY_POOL records and
    /// the pool side of MEMORY2 records of pool allocations), in the order written.
    pub memory_pools: Vec<PoolEvent>,
}

impl Trace {
    /// The earliest non-zero start of any record, `None` when there is none. (CUPTI writes 0 for
    /// a timestamp it could not collect; such zeros are not the start of the trace.)
    pub fn earliest_ns(&self) -> Option<Ns> {
        let starts = self.kernels.iter().map(|r| r.start_ns);
        let starts = starts.chain(self.memcpys.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.memsets.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.api_calls.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.syncs.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.ranges.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.marks.iter().map(|r| r.ts_ns));
        let starts = starts.chain(self.overheads.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.host_ops.iter().map(|r| r.start_ns));
        let starts = starts.chain(self.memory.iter().map(|r| r.ts_ns));
        let starts = starts.chain(self.memory_pools.iter().map(|r| r.ts_ns));
        starts.filter(|&t| t != 0).min()
    }

    /// The earliest start and latest end of any timed record (an end before its start counts
    /// as its start); `None` when there is no record.
    pub fn bounds_ns(&self) -> Option<(Ns, Ns)> {
        let spans = self
            .kernels
            .iter()
            // A kernel profiled with kernel replay has no timestamps (CUPTI writes 0 for both):
            // it says nothing about when the trace ran.
            .filter(|r| !r.untimed())
            .map(|r| (r.start_ns, r.end_ns))
            .chain(self.memcpys.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.memsets.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.api_calls.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.syncs.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.ranges.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.overheads.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.host_ops.iter().map(|r| (r.start_ns, r.end_ns)))
            .chain(self.marks.iter().map(|r| (r.ts_ns, r.ts_ns)))
            .chain(self.memory.iter().map(|r| (r.ts_ns, r.ts_ns)))
            .chain(self.memory_pools.iter().map(|r| (r.ts_ns, r.ts_ns)));
        spans.fold(None, |acc, (s, e)| {
            let e = e.max(s);
            Some(match acc {
                None => (s, e),
                Some((lo, hi)) => (lo.min(s), hi.max(e)),
            })
        })
    }

    /// Applies `f` to every timestamp of every record (starts, ends, marks). Used to move a
    /// trace to and from a time base, as `cutrace convert --chrome` writes relative times.
    pub fn map_times(&mut self, f: impl Fn(Ns) -> Ns) {
        macro_rules! both {
            ($v:expr) => {
                for r in $v.iter_mut() {
                    r.start_ns = f(r.start_ns);
                    r.end_ns = f(r.end_ns);
                }
            };
        }
        both!(self.kernels);
        both!(self.memcpys);
        both!(self.memsets);
        both!(self.api_calls);
        both!(self.syncs);
        both!(self.ranges);
        both!(self.overheads);
        both!(self.host_ops);
        both!(self.pm_samples);
        for m in self.marks.iter_mut() {
            m.ts_ns = f(m.ts_ns);
        }
        for m in self.memory.iter_mut() {
            m.ts_ns = f(m.ts_ns);
        }
    }

    /// A kernel's launch configuration; all zero (unknown) for an id outside the table.
    pub fn launch(&self, k: &Kernel) -> Launch {
        self.launches
            .get(k.launch as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The string an id points at; `"?"` for an id outside the table (never a panic).
    pub fn str(&self, id: StrId) -> &str {
        self.strings
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("?")
    }
}

/// A multiply-rotate hash (the rustc "Fx" scheme) for interning: kernel names are long and
/// hashed once per record, and SipHash's DoS resistance buys nothing for names in a trace file.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// Interns strings while a trace is being built.
#[derive(Debug, Default)]
pub struct Interner {
    strings: Vec<String>,
    index: std::collections::HashMap<String, StrId, FxBuild>,
}

impl Interner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts from an existing table (ids are kept).
    pub fn from_strings(strings: Vec<String>) -> Self {
        let index = strings
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i as StrId))
            .collect();
        Interner { strings, index }
    }

    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.strings.len() as StrId;
        self.strings.push(s.to_owned());
        self.index.insert(s.to_owned(), id);
        id
    }

    pub fn into_strings(self) -> Vec<String> {
        self.strings
    }

    /// The strings interned so far, by id.
    pub fn as_slice(&self) -> &[String] {
        &self.strings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interner_returns_same_id_for_same_string() {
        let mut i = Interner::new();
        let a = i.intern("gemm");
        let b = i.intern("allreduce");
        assert_eq!(i.intern("gemm"), a);
        assert_ne!(a, b);
        let t = Trace {
            strings: i.into_strings(),
            ..Trace::default()
        };
        assert_eq!(t.str(b), "allreduce");
        assert_eq!(t.str(99), "?");
    }

    #[test]
    fn kernel_and_api_records_stay_small() {
        // Memory per record is what bounds a command on a large trace (docs/FORMAT.md, Limits).
        assert_eq!(std::mem::size_of::<Kernel>(), 48);
        assert_eq!(std::mem::size_of::<ApiCall>(), 48);
        assert_eq!(std::mem::size_of::<HostOp>(), 48);
    }

    #[test]
    fn launches_are_interned_and_unknown_ids_read_as_zero() {
        let mut l = LaunchInterner::default();
        let a = Launch {
            grid: [4, 1, 1],
            block: [256, 1, 1],
            ..Launch::default()
        };
        let b = Launch { graph_id: 3, ..a };
        assert_eq!(l.intern(a), 0);
        assert_eq!(l.intern(b), 1);
        assert_eq!(l.intern(a), 0);
        let t = Trace {
            launches: l.into_launches(),
            ..Trace::default()
        };
        let k = |launch| Kernel {
            device: 0,
            context: 0,
            stream: 0,
            correlation_id: 0,
            start_ns: 0,
            end_ns: 0,
            name: 0,
            launch,
        };
        assert_eq!(t.launch(&k(1)), b);
        assert_eq!(t.launch(&k(7)), Launch::default());
    }
}

/// What cutrace writes about a trace beside its records, and reads back: the `"cutrace"` member
/// of a Chrome export (which the Kineto importer restores, so a report on an export shows the
/// original's data loss) and `cutrace convert`'s `meta.json` (also in every Parquet file). One
/// type for both, so the writer and the reader cannot drift apart. Members marked "(Chrome)" or
/// "(meta.json)" are written by that export only; `None` leaves them out. The field names are a
/// contract (docs/EXPORTS.md, "Top-level members" and "Chrome Trace Event JSON").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ExportMeta {
    /// (Chrome) The cutrace version that wrote the export.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// (Chrome) `native` or `kineto`: what the exported trace was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// (Chrome) The files the exported trace was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_paths: Option<Vec<String>>,
    /// (meta.json) The files the trace was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// An export that does not say is taken as complete.
    #[serde(default = "complete_unless_said")]
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    /// Null when the source does not record drops (a torch.profiler trace): unknown, not 0.
    pub dropped_by_recorder: Option<u64>,
    pub dropped_by_cupti: Option<u64>,
    /// (meta.json) `Some(None)` is written as null: not known. The Chrome export carries these
    /// as Kineto's own top-level members.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cupti_version: Option<Option<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<Option<u32>>,
    pub driver_version: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// (meta.json) The GPUs; the Chrome export carries them as Kineto's `deviceProperties`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceProps>>,
    /// (meta.json) [`TraceMeta::skipped_events`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_events: Option<Vec<(String, u64)>>,
    /// Every part's notes (HEAD and later META chunks), each with its pid and part file.
    pub notes: Vec<TraceNote>,
    /// (Chrome) What the export itself changed or left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export_notes: Option<Vec<String>>,
    /// (Chrome) [`TraceMeta::id_parts`]: the pid behind each part number N of a merged trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_parts: Option<Vec<Option<u32>>>,
    /// (Chrome) The export's `ts` count from this time (ns); the importer adds it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_base_ns: Option<Ns>,
    /// (meta.json) Each part's `HEAD` chunk, in read order (`parts[].notes` holds only what each
    /// header had; `notes` above has them all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<Header>>,
    /// [`TraceMeta::distributed`] whole: torch's `distributedInfo` header (which the Chrome
    /// export also writes, for HTA) has no place for the local rank or the run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<Distributed>,
}

fn complete_unless_said() -> bool {
    true
}

impl ExportMeta {
    /// The members both exports write, from the trace's own metadata.
    pub fn common(m: &TraceMeta) -> ExportMeta {
        ExportMeta {
            complete: m.complete,
            incomplete_reason: m.incomplete_reason.clone(),
            dropped_by_recorder: m.drops_recorded.then_some(m.dropped_by_recorder),
            dropped_by_cupti: m.drops_recorded.then_some(m.dropped_by_cupti),
            driver_version: m.driver_version.clone(),
            host: m.host.clone(),
            pid: m.pid,
            notes: m.notes.clone(),
            distributed: m.distributed.clone(),
            ..ExportMeta::default()
        }
    }

    /// Takes back into `m` what an export said about its trace: whether it was complete, what
    /// was dropped, the recorder's notes, whose ids are whose. What the export does not say is
    /// left as the importer found it.
    pub fn restore(&self, m: &mut TraceMeta) {
        m.complete = self.complete;
        if let Some(r) = &self.incomplete_reason {
            m.incomplete_reason = Some(r.clone());
        }
        if let Some(n) = self.dropped_by_recorder {
            m.dropped_by_recorder = n;
            m.drops_recorded = true;
        }
        if let Some(n) = self.dropped_by_cupti {
            m.dropped_by_cupti = n;
            m.drops_recorded = true;
        }
        if self.host.is_some() {
            m.host = self.host.clone();
        }
        if self.driver_version.is_some() {
            m.driver_version = self.driver_version.clone();
        }
        if self.pid.is_some() {
            m.pid = self.pid;
        }
        if !self.notes.is_empty() {
            m.notes = self.notes.clone();
        }
        if let Some(ids) = &self.id_parts {
            m.id_parts = ids.clone();
        }
        if self.distributed.is_some() {
            m.distributed = self.distributed.clone();
        }
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    /// Merging parts' facts is linear and bounded: lists keep their order and at most
    /// `MAX_LISTED` entries, counts saturate (two parts of 100,000 stall reasons once took
    /// 15 s, and a count near 2^64 from a file could overflow).
    #[test]
    fn merged_lists_are_bounded_and_counts_saturate() {
        let names = |from: usize, n: usize| (from..from + n).map(|i| format!("r{i}")).collect();
        let mut a = PcSamplingInfo {
            stall_reasons: names(0, 100_000),
            samples_total: u64::MAX - 1,
            ..PcSamplingInfo::default()
        };
        let b = PcSamplingInfo {
            stall_reasons: names(50_000, 100_000),
            samples_total: 5,
            ..PcSamplingInfo::default()
        };
        a.merge(&b);
        assert_eq!(
            a.stall_reasons.len(),
            100_000,
            "the first part's own list is kept"
        );
        assert_eq!(a.samples_total, u64::MAX);
        let mut c = PmSamplingInfo {
            metrics: vec!["x".into(), "y".into()],
            ..PmSamplingInfo::default()
        };
        c.merge(&PmSamplingInfo {
            metrics: names(0, 10_000),
            samples: u64::MAX,
            ..PmSamplingInfo::default()
        });
        c.merge(&PmSamplingInfo {
            samples: 1,
            ..PmSamplingInfo::default()
        });
        assert_eq!(c.metrics.len(), MAX_LISTED);
        assert_eq!(&c.metrics[..3], ["x", "y", "r0"]);
        assert_eq!(c.samples, u64::MAX);
    }
}
