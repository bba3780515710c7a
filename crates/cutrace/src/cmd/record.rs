//! `cutrace record`: run a program with cutrace's CUPTI injection library, no code change.
//!
//! cutrace sets the environment and then *becomes* the program (exec), so stdin, stdout,
//! stderr, signals and the exit status are the program's own, exactly. Every CUDA process the
//! program starts (fork+exec, multiprocessing, torchrun workers) inherits the environment and
//! writes its own part `HOST-PID.cutrace` into the output directory, created exclusively.
//!
//! The injection library is also put first in `LD_PRELOAD`, so that it stands in front of
//! libcupti for the program's own CUPTI users: a profiler the program starts itself
//! (torch.profiler) cannot share CUPTI with cutrace before CUDA 13.3, and is then told so in one
//! line instead of failing silently (cutrace-inject's `interpose.rs`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cutrace_launch::{
    cache, cleared_vars, find_inject_lib, injection_env, missing_interpreter, preload_value,
    prepare_output, resolve_program, shell_quote, LaunchError, INJECT_LIB_NAME,
};

pub use cutrace_settings::KINDS;
use cutrace_settings::{var, ApiMode, CounterAccess, Counters, PmSampling, Settings};

/// The benchmark knobs of cutrace's own environment, to pass on; a library variable there whose
/// value does not parse is named, since record does not pass it on.
pub(crate) fn inherited_knobs() -> cutrace_settings::Knobs {
    let (own, problems) = Settings::from_process_env();
    for p in problems {
        eprintln!("cutrace: warning: {p}: not passed on to the program");
    }
    own.knobs
}

/// `--kinds`' default as the flag takes it: every kind, comma-separated.
fn default_kinds_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| cutrace_settings::default_kinds().join(","))
}

/// What `profile` and `sample` add to a trace: their sessions' settings, which the injection
/// reads beside record's own.
#[derive(Debug, Clone, Default)]
pub struct Sessions {
    pub counters: Option<Counters>,
    pub pm_sampling: Option<PmSampling>,
    pub pc_sampling: Option<cutrace_settings::PcSampling>,
    pub counter_access: CounterAccess,
}

/// Which CUDA runtime/driver API calls get a record (`--api`; the injection's `ApiMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiRecords {
    /// Every API call, state queries included.
    All,
    /// Every call except ~55 state queries that launch, move, allocate and synchronize nothing
    /// (cudaGetDevice, cudaGetLastError, cuDevicePrimaryCtxGetState, cuKernelGetName, ...): most
    /// of an eager PyTorch op's API records, and 5.6 % of its time under tracing (BENCHMARKS.md).
    /// The default, as Nsight Systems leaves out "non-critical" calls by default. The trace notes
    /// list what was left out.
    Lean,
    /// Only calls that launch work (kernels, host functions, graphs) or copy, set or prefetch
    /// memory; allocations, synchronizations, creations and queries are not recorded (so
    /// synchronization records have no API call).
    Launches,
}

impl ApiRecords {
    /// The mode the injection applies.
    pub fn mode(self) -> ApiMode {
        match self {
            ApiRecords::All => ApiMode::All,
            ApiRecords::Lean => ApiMode::Lean,
            ApiRecords::Launches => ApiMode::Launches,
        }
    }
}

/// Trace a CUDA program with no code change.
///
/// The trace is a directory: each CUDA process writes its own part, HOST-PID.cutrace (never
/// overwriting another). Read it with `cutrace report DIR`. The program's output, signals and
/// exit status are passed through unchanged.
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace record -o run1 -- ./my_app --size 4096            a CUDA C++ program
  cutrace record -o run1 -- python3 train.py                 PyTorch, no code change
  cutrace record -o run1 -- torchrun --nproc-per-node 8 train.py   one part per worker process
  cutrace record --api all -o run1 -- python3 train.py       every API call, state queries too
  cutrace report run1                                        then read it

Exit status: the program's own, exactly (cutrace becomes the program). Before the program
starts: 125 when cutrace itself fails (a bad option or output directory, no injection library),
126 when the program is found but cannot be run (a directory, not executable, its #! interpreter
missing), 127 when it is not found.

The runtime kind is what joins kernels launched through the CUDA runtime to their launch call
(with the driver kind alone, every such kernel is an orphan); the driver kind adds programs that
launch through the driver API (Triton, JAX, CuPy raw kernels). A program that starts its own
CUPTI tool (torch.profiler, Nsight) while traced: cutrace keeps tracing and says so once; if
that tool takes CUPTI's activity buffers, cutrace's trace ends there (it keeps what it had
recorded) and says so once."#)]
pub struct Args {
    /// Trace directory (created if missing); one part per CUDA process is written into it.
    #[arg(short, long, default_value = "cutrace-trace")]
    pub(crate) output: PathBuf,
    /// Activity kinds, comma-separated: kernel, runtime, driver, memcpy, memset, sync, nvtx,
    /// overhead; and memory (off by default, see --memory).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = default_kinds_text()
    )]
    pub(crate) kinds: Vec<String>,
    /// CUPTI activity buffer size in MiB (1–10).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) buffer_size: u32,
    /// Which API calls of the runtime/driver kinds are recorded. In every mode kernels, memcpys
    /// and memsets keep their launching call (joined by correlation id); in `launches` mode
    /// synchronization records have no API call.
    /// [default: lean]
    #[arg(long, value_enum)]
    pub(crate) api: Option<ApiRecords>,
    /// Also record CUDA's allocations and frees (CUPTI's MEMORY2 kind: cudaMalloc, cudaFree, …
    /// with address, size and the call that made them) and its memory pools (MEMORY_POOL:
    /// cudaMallocAsync's pools created, trimmed and destroyed, and each pool's reserved and used
    /// bytes as its blocks come and go), for the report's memory section. Off by default: where
    /// every temporary is a cudaMalloc it costs about 8 % over plain record (BENCHMARKS.md).
    #[arg(long)]
    pub(crate) memory: bool,
    /// Use the KERNEL kind, which serializes every kernel (changes the program's concurrency).
    #[arg(long)]
    pub(crate) serialize_kernels: bool,
    /// Store the program's command line in the trace (off by default: it can hold secrets).
    #[arg(long)]
    pub(crate) record_cmdline: bool,
    /// Do not interpose CUPTI entry points; a profiler started inside the program then fails
    /// silently. Without it every child process loads the injection library (through
    /// LD_PRELOAD; it needs libgcc_s.so.1), and each 32-bit program, or child in another root or
    /// mount namespace, prints one ld.so "cannot be preloaded" line: use --no-preload for those.
    #[arg(long)]
    pub(crate) no_preload: bool,
    /// Print nothing of cutrace's own but warnings and errors (no "recording into" line, no
    /// notes).
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// Benchmark floor: enable the same kinds but discard every record (writes no trace).
    #[arg(long, hide = true)]
    pub(crate) discard: bool,
    /// The program and its arguments (after `--`).
    /// An option of cutrace's that comes after the program's name is the program's.
    #[arg(required = true, trailing_var_arg = true)]
    pub(crate) command: Vec<OsString>,
}

/// The injection library built into release binaries, zlib-compressed (build.rs; empty in debug
/// builds), for a binary installed alone (`cargo install`), which has no library beside it.
const EMBEDDED_INJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcutrace_inject.so.zz"));

/// The embedded library's bytes, inflated.
fn embedded_inject() -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut lib = Vec::new();
    flate2::read::ZlibDecoder::new(EMBEDDED_INJECT)
        .read_to_end(&mut lib)
        .context("inflating the injection library built into cutrace")?;
    Ok(lib)
}

/// The injection library to load: the user's [`var::INJECT_LIB`] when set (a path the user named and that
/// is not a library is an error, never replaced by another), else one installed beside the
/// binary, else the embedded one, unpacked into the user's cache (`cutrace_launch::cache`).
pub(crate) fn inject_lib(exe: Option<&Path>) -> anyhow::Result<PathBuf> {
    let missing = match find_inject_lib(std::env::var_os(var::INJECT_LIB), exe) {
        Ok(p) => return Ok(p),
        Err(e @ LaunchError::InjectMissing { .. }) if !EMBEDDED_INJECT.is_empty() => e,
        Err(e) => return Err(e.into()),
    };
    let base = cache::cache_base(
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
    .ok_or(cache::CacheError::NoBase);
    let lib = embedded_inject()?;
    base.and_then(|b| {
        cache::unpack(
            &b,
            include_str!(concat!(env!("OUT_DIR"), "/inject-id")),
            INJECT_LIB_NAME,
            &lib,
        )
    })
    .map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "the injection library is built into cutrace, but it could not be unpacked into \
             the cache ({missing})"
        ))
    })
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_with(args, Sessions::default())
}

/// `--kinds` trimmed and checked, with a warning for each choice that defeats itself (kernels
/// without the API kinds that join them to their launches, a `--serialize-kernels` or `--api`
/// with nothing to act on).
fn check_kinds(args: &mut Args) -> anyhow::Result<()> {
    // `--kinds "kernel, runtime"`: the spaces are not part of the names.
    args.kinds = args
        .kinds
        .iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    if args.memory && !args.kinds.iter().any(|k| k == "memory") {
        args.kinds.push("memory".into());
    }
    if args.kinds.is_empty() {
        let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
        bail!(
            "--kinds names no activity kind; name at least one of: {}",
            names.join(", ")
        );
    }
    for k in &args.kinds {
        if !KINDS.iter().any(|(n, _)| n == k) {
            let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
            bail!(
                "unknown activity kind '{k}'; known kinds: {}",
                names.join(", ")
            );
        }
    }
    let has = |k: &str| args.kinds.iter().any(|x| x == k);
    let api_kinds = has("runtime") || has("driver");
    if !api_kinds && (has("kernel") || has("memcpy") || has("memset")) {
        eprintln!(
            "cutrace: warning: neither 'runtime' nor 'driver' is recorded, so the kernels, copies \
             and memsets recorded cannot be joined to their launch calls (each will be an orphan)"
        );
    }
    if args.serialize_kernels {
        if has("kernel") {
            eprintln!(
                "cutrace: warning: --serialize-kernels records the KERNEL kind, which serializes \
                 every kernel on the GPU: the program's concurrency (and so its timing) changes"
            );
        } else {
            eprintln!(
                "cutrace: warning: --serialize-kernels has no effect: the 'kernel' kind is not \
                 recorded"
            );
        }
    }
    // Only when asked for: the default (lean) with kinds that have no API records is no mistake.
    if let (Some(api), false) = (args.api, api_kinds) {
        if api != ApiRecords::All {
            eprintln!(
                "cutrace: warning: --api {} has no effect: neither 'runtime' nor 'driver' is \
                 recorded",
                api.mode().as_str()
            );
        }
    }
    Ok(())
}

/// `record`, with the counter or sampling sessions of `profile` and `sample`.
pub fn run_with(mut args: Args, sessions: Sessions) -> anyhow::Result<i32> {
    check_kinds(&mut args)?;
    let api = args.api.unwrap_or(ApiRecords::Lean);
    let (prog, rest) = args
        .command
        .split_first()
        .context("no command given: cutrace record [OPTIONS] -- CMD ARGS...")?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if let Err(e) = resolve_program(prog, std::env::var_os("PATH").as_deref(), &cwd) {
        eprintln!("cutrace: cannot run {}", e.message);
        return Ok(e.code);
    }
    let exe = std::env::current_exe().ok();
    let inject = inject_lib(exe.as_deref())?;
    let (out_dir, created) = prepare_output(&args.output)?;
    let earlier = std::fs::read_dir(&out_dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "cutrace"))
                .count()
        })
        .unwrap_or(0);
    let settings = Settings {
        output_dir: Some(out_dir.clone()),
        kinds: Some(args.kinds.clone()),
        // One id for the run, inherited by every process the program starts, so the parts are
        // known to be one run whatever their timing (docs/FORMAT.md, "How parts are produced").
        run_id: Some(cutrace_launch::new_run_id()),
        buffer_bytes: Some(u64::from(args.buffer_size) << 20),
        // Always set, so the injection's default does not choose for the user.
        api: Some(api.mode()),
        serialize_kernels: args.serialize_kernels,
        record_cmdline: args.record_cmdline,
        discard: args.discard,
        monitor_socket: None,
        monitor_duty: None,
        monitor_uid: None,
        monitor_stuck_after_s: None,
        // Benchmark knobs pass through from cutrace's own environment.
        knobs: inherited_knobs(),
        counters: sessions.counters,
        pm_sampling: sessions.pm_sampling,
        pc_sampling: sessions.pc_sampling,
        counter_access: sessions.counter_access,
    };
    let inherited = Settings {
        knobs: settings.knobs.clone(),
        ..Settings::default()
    }
    .to_env();
    if !inherited.is_empty() && !args.quiet {
        let list: Vec<String> = inherited
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_string_lossy()))
            .collect();
        eprintln!(
            "cutrace: note: benchmark settings passed on from the environment: {} (they change \
             how the trace is recorded; unset them for a plain trace)",
            list.join(" ")
        );
    }
    let mut env = injection_env(&inject, &settings);
    // The process record becomes (exec keeps the pid) says at its exit when nothing was traced.
    let ns = cutrace_settings::pid_namespace();
    env.push((
        var::ROOT_PID.into(),
        format!("{} {ns}", std::process::id()).into(),
    ));
    env.push((var::ROOT_PARTS.into(), earlier.to_string().into()));
    env.push((
        var::ROOT_CREATED.into(),
        if created { "1" } else { "0" }.into(),
    ));
    if args.kinds.iter().any(|k| k == "nvtx") && std::env::var_os("NVTX_INJECTION64_PATH").is_none()
    {
        // NVTX calls reach CUPTI only when NVTX's loader is pointed at libcupti. The bare
        // soname, when the loader resolves it, makes NVTX share the copy the program (or the
        // injection) already loaded instead of mapping a second CUPTI into the process.
        let soname = cutrace_cupti::locate::CUPTI_SONAME;
        let value = if cutrace_cupti::Cupti::load_one(soname, "probe").is_ok() {
            Some(OsString::from(soname))
        } else {
            cutrace_cupti::locate::candidates_here(&|k| std::env::var(k).ok())
                .into_iter()
                .find(|c| c.path.is_absolute())
                .map(|c| c.path.into_os_string())
        };
        if let Some(v) = value {
            env.push(("NVTX_INJECTION64_PATH".into(), v));
        }
    }
    if !args.no_preload {
        match preload_value(&inject, std::env::var_os("LD_PRELOAD").as_deref()) {
            Some(v) => env.push(("LD_PRELOAD".into(), v)),
            None => eprintln!(
                "cutrace: warning: {} cannot go in LD_PRELOAD (its path holds a space or colon), \
                 so CUPTI entry points are not interposed: a profiler started inside the program \
                 fails silently. Fix: install cutrace under a path without spaces or colons",
                inject.display()
            ),
        }
    }
    if let Some(prev) = std::env::var_os("CUDA_INJECTION64_PATH") {
        if prev != inject.as_os_str() {
            eprintln!(
                "cutrace: warning: CUDA_INJECTION64_PATH was already set to {} (another tracer?); \
                 cutrace replaces it for this run",
                Path::new(&prev).display()
            );
        }
    }
    if earlier > 0 && !args.quiet {
        eprintln!(
            "cutrace: note: {} already holds {earlier} part(s) from earlier runs; `cutrace report` \
             on it reads them together (use a fresh -o to keep runs apart)",
            out_dir.display()
        );
    }
    if !args.quiet {
        eprintln!(
            "cutrace: recording into {} (one HOST-PID.cutrace part per CUDA process); then run \
             `cutrace report {}`",
            out_dir.display(),
            shell_quote(&out_dir.display().to_string())
        );
    }
    let mut command = std::process::Command::new(prog);
    // The injection's settings are these and no others: one left in the environment (counters,
    // sampling) must not turn a plain `record` into a profile.
    for var in cleared_vars(&env) {
        command.env_remove(var);
    }
    let err = command
        .args(rest)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())))
        .exec();
    // exec only returns on failure; exit like a shell does.
    let code = if err.kind() == std::io::ErrorKind::NotFound && !Path::new(prog).exists() {
        127
    } else {
        126
    };
    const ENOEXEC: i32 = 8;
    let interp = (err.kind() == std::io::ErrorKind::NotFound)
        .then(|| missing_interpreter(Path::new(prog)))
        .flatten();
    let why = match interp {
        Some(interp) => format!(
            "its interpreter {interp} (the #! line) was not found; install it or fix the #! line"
        ),
        None if err.raw_os_error() == Some(ENOEXEC) => {
            "not a program this machine can run (exec format error)".into()
        }
        None => err.to_string(),
    };
    eprintln!("cutrace: cannot run {}: {why}", Path::new(prog).display());
    if created {
        // Nothing ran: the directory this run made goes too (it is empty).
        let _ = std::fs::remove_dir(&out_dir);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_modes_reach_the_injection_by_their_names() {
        use clap::ValueEnum;
        // `--api NAME` is the injection's mode of the same name.
        for m in ApiRecords::value_variants() {
            let shown = m.to_possible_value().unwrap();
            assert_eq!(shown.get_name(), m.mode().as_str());
        }
        assert_eq!(ApiRecords::value_variants().len(), ApiMode::ALL.len());
    }
}
