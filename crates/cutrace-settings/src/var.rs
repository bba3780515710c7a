//! The name of every `CUTRACE_*` environment variable cutrace reads, and the only place they
//! are spelled in its production Rust code: everything else refers to these constants (and the
//! typed settings of this crate encode and decode them). Test harnesses have a few of their own
//! (`CUTRACE_BLESS`, `CUTRACE_FUZZ_*`, `CUTRACE_CUPTI_INCLUDE`), which the product never reads.

// What `cutrace record` tells the injected library.
/// Directory the parts are written into.
pub const OUTPUT_DIR: &str = "CUTRACE_OUTPUT_DIR";
/// Activity kinds by cutrace's names, comma-separated.
pub const KINDS: &str = "CUTRACE_KINDS";
/// The id of one `cutrace record` run, inherited by every process it starts.
pub const RUN_ID: &str = "CUTRACE_RUN_ID";
/// Bytes of one activity buffer.
pub const BUFFER_BYTES: &str = "CUTRACE_BUFFER_BYTES";
/// Which API calls get records: `all`, `lean`, `launches`.
pub const API: &str = "CUTRACE_API";
/// `1`: the serializing KERNEL kind instead of CONCURRENT_KERNEL.
pub const SERIALIZE_KERNELS: &str = "CUTRACE_SERIALIZE_KERNELS";
/// `1`: the part's header keeps the program's command line.
pub const RECORD_CMDLINE: &str = "CUTRACE_RECORD_CMDLINE";
/// `1`: enable the same kinds and discard every record (the overhead floor).
pub const DISCARD: &str = "CUTRACE_DISCARD";
/// `cutrace monitor`'s Unix socket: summaries go there instead of a trace.
pub const MONITOR_SOCKET: &str = "CUTRACE_MONITOR_SOCKET";
/// The uid the monitor's socket must be served by (`cutrace agent env` prints the agent's):
/// the injected library sends to no other listener.
pub const MONITOR_UID: &str = "CUTRACE_MONITOR_UID";
/// Monitor mode's duty cycle, `ON_MS/PERIOD_MS`: records on for the first ON_MS of each period.
pub const MONITOR_DUTY: &str = "CUTRACE_MONITOR_DUTY";
/// The monitor's `--stuck-after` in seconds: a process that delivered no record for half of it
/// has CUPTI hand over its buffers, unfinished kernels' records included (a forced flush).
pub const MONITOR_STUCK_AFTER: &str = "CUTRACE_MONITOR_STUCK_AFTER";
/// Runtime callback ids that get records, comma-separated (a benchmark knob).
pub const RUNTIME_CBIDS: &str = "CUTRACE_RUNTIME_CBIDS";
/// CUPTI's per-context device buffer for kernel records, in bytes (a benchmark knob).
pub const DEVICE_BUFFER_BYTES: &str = "CUTRACE_DEVICE_BUFFER_BYTES";
/// Most activity buffers the pool holds.
pub const MAX_BUFFERS: &str = "CUTRACE_MAX_BUFFERS";
/// Buffers allocated and touched up front.
pub const PREALLOC_BUFFERS: &str = "CUTRACE_PREALLOC_BUFFERS";
/// How long the exit handler waits for the writer, in ms.
pub const EXIT_DEADLINE_MS: &str = "CUTRACE_EXIT_DEADLINE_MS";
/// How often the writer asks CUPTI for completed buffers, in ms.
pub const FLUSH_PERIOD_MS: &str = "CUTRACE_FLUSH_PERIOD_MS";
/// `0`: no CUPTI subscription (benchmarks only).
pub const SUBSCRIBE: &str = "CUTRACE_SUBSCRIBE";
/// `1`: the overhead benchmarks' switch.
pub const BENCH_HOOK: &str = "CUTRACE_BENCH_HOOK";

// `cutrace profile`: hardware counters per kernel.
/// Metrics, comma-separated; set only by `cutrace profile`.
pub const COUNTERS: &str = "CUTRACE_COUNTERS";
/// Only kernels whose mangled name matches this regex.
pub const COUNTERS_KERNELS: &str = "CUTRACE_COUNTERS_KERNELS";
/// At most this many profiled kernels.
pub const COUNTERS_MAX_KERNELS: &str = "CUTRACE_COUNTERS_MAX_KERNELS";
/// Every Nth matching kernel.
pub const COUNTERS_EVERY: &str = "CUTRACE_COUNTERS_EVERY";
/// Keep the counter-data images of the first N profiled kernels beside the part (tests).
pub const COUNTERS_KEEP_IMAGES: &str = "CUTRACE_COUNTERS_KEEP_IMAGES";
/// `1`: print where the profiled launches' time went, at exit.
pub const COUNTERS_TIMING: &str = "CUTRACE_COUNTERS_TIMING";
/// `1`: the program fails when counters cannot be read (profile and sample).
pub const COUNTERS_REQUIRE: &str = "CUTRACE_COUNTERS_REQUIRE";
/// The doctor's counter-access verdict, for a failure message (profile and sample).
pub const COUNTERS_ACCESS_HINT: &str = "CUTRACE_COUNTERS_ACCESS_HINT";
/// The doctor's counter-holders verdict, likewise.
pub const COUNTERS_HOLDERS_HINT: &str = "CUTRACE_COUNTERS_HOLDERS_HINT";

// `cutrace sample`: PM sampling.
/// Metrics, comma-separated; set only by `cutrace sample`.
pub const PM_METRICS: &str = "CUTRACE_PM_METRICS";
/// Sampling interval, in ns.
pub const PM_INTERVAL_NS: &str = "CUTRACE_PM_INTERVAL_NS";
/// Devices to sample, comma-separated (all when unset).
pub const PM_DEVICES: &str = "CUTRACE_PM_DEVICES";
/// Metrics that may be left out where the device lacks them.
pub const PM_OPTIONAL: &str = "CUTRACE_PM_OPTIONAL";

// `cutrace profile --pc-sampling`: PC sampling.
/// `1`: PC sampling (stall reasons per instruction) on every context.
pub const PC_SAMPLING: &str = "CUTRACE_PC_SAMPLING";
/// CUPTI's sampling period exponent: a sample every 2^N cycles per SM (5 to 31).
pub const PC_PERIOD: &str = "CUTRACE_PC_PERIOD";

// Read by cutrace itself, from the user.
/// The injection library to load instead of the one found.
pub const INJECT_LIB: &str = "CUTRACE_INJECT_LIB";
/// The libcupti to load: [`CUPTI_LIB`] as a literal, for messages built with `concat!`.
#[macro_export]
macro_rules! cupti_lib_var {
    () => {
        "CUTRACE_CUPTI_LIB"
    };
}
/// The libcupti to load.
pub const CUPTI_LIB: &str = cupti_lib_var!();
/// Threads of the trace importers.
pub const IMPORT_THREADS: &str = "CUTRACE_IMPORT_THREADS";
/// Seconds `dcgmi` may take before it counts as hung.
pub const DCGMI_TIMEOUT: &str = "CUTRACE_DCGMI_TIMEOUT";
/// Read by the `cutrace` crate's build script: `0` embeds no injection library, `1` embeds it
/// in any profile.
pub const EMBED_INJECT: &str = "CUTRACE_EMBED_INJECT";

/// Set by `cutrace record` for the process it becomes (exec keeps the pid): that pid and its pid
/// namespace (`PID pid:[INODE]`), the
/// number of parts the output directory held before the run, and `1` when record created the
/// directory. At that process's exit the library says so when no part was written, and removes
/// the directory if it made it and it is empty (crates/cutrace-inject/src/root_exit.rs).
pub const ROOT_PID: &str = "CUTRACE_ROOT_PID";
pub const ROOT_PARTS: &str = "CUTRACE_ROOT_PARTS";
pub const ROOT_CREATED: &str = "CUTRACE_ROOT_CREATED";

/// Every variable the injected library reads: `cutrace record` sets those it means and removes
/// the rest from the program's environment, so one left there from elsewhere does not choose
/// for the user.
pub const INJECTION: [&str; 38] = [
    OUTPUT_DIR,
    KINDS,
    RUN_ID,
    BUFFER_BYTES,
    API,
    SERIALIZE_KERNELS,
    RECORD_CMDLINE,
    DISCARD,
    MONITOR_SOCKET,
    MONITOR_DUTY,
    MONITOR_UID,
    MONITOR_STUCK_AFTER,
    RUNTIME_CBIDS,
    DEVICE_BUFFER_BYTES,
    MAX_BUFFERS,
    PREALLOC_BUFFERS,
    EXIT_DEADLINE_MS,
    FLUSH_PERIOD_MS,
    SUBSCRIBE,
    BENCH_HOOK,
    COUNTERS,
    COUNTERS_KERNELS,
    COUNTERS_MAX_KERNELS,
    COUNTERS_EVERY,
    COUNTERS_KEEP_IMAGES,
    COUNTERS_TIMING,
    COUNTERS_REQUIRE,
    COUNTERS_ACCESS_HINT,
    COUNTERS_HOLDERS_HINT,
    PM_METRICS,
    PM_INTERVAL_NS,
    PM_DEVICES,
    PM_OPTIONAL,
    PC_SAMPLING,
    PC_PERIOD,
    ROOT_PID,
    ROOT_PARTS,
    ROOT_CREATED,
];
