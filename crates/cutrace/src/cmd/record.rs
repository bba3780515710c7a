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

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The injection library's file name, installed next to the `cutrace` binary.
pub const INJECT_LIB_NAME: &str = "libcutrace_inject.so";

/// The variables `cutrace profile` sets for the injection's counters.
pub const COUNTER_VARS: [&str; 7] = [
    "CUTRACE_COUNTERS",
    "CUTRACE_COUNTERS_KERNELS",
    "CUTRACE_COUNTERS_MAX_KERNELS",
    "CUTRACE_COUNTERS_EVERY",
    "CUTRACE_COUNTERS_REQUIRE",
    "CUTRACE_COUNTERS_ACCESS_HINT",
    "CUTRACE_COUNTERS_HOLDERS_HINT",
];

/// The kinds recorded when `--kinds` is not given.
pub const DEFAULT_KINDS: &str = "kernel,runtime,driver,memcpy,memset,sync,nvtx,overhead";

/// Activity kinds `--kinds` accepts (the injection reads the same names).
pub const KINDS: &[(&str, &str)] = &[
    (
        "kernel",
        "kernel executions (CONCURRENT_KERNEL; KERNEL with --serialize-kernels)",
    ),
    (
        "runtime",
        "CUDA runtime API calls (needed to join kernels to their launch)",
    ),
    ("driver", "CUDA driver API calls"),
    ("memcpy", "memory copies"),
    ("memset", "memsets"),
    ("sync", "synchronizations (stream/event/context)"),
    ("nvtx", "NVTX ranges and marks"),
    ("overhead", "time CUPTI itself spent"),
];

/// Which CUDA runtime/driver API calls get a record (`--api`; the injection reads `CUTRACE_API`).
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
    /// The value of `CUTRACE_API`.
    pub fn env_value(self) -> &'static str {
        match self {
            ApiRecords::All => "all",
            ApiRecords::Lean => "lean",
            ApiRecords::Launches => "launches",
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
    /// overhead.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = DEFAULT_KINDS
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

/// Finds the injection library: `CUTRACE_INJECT_LIB`, else next to the cutrace binary, else in
/// `../lib` or `../lib/cutrace` beside it. The result is absolute.
pub fn find_inject_lib(env_value: Option<OsString>, exe: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = env_value.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "CUTRACE_INJECT_LIB={} is not a file; point it at {INJECT_LIB_NAME}",
                p.display()
            );
        }
        if !is_elf(&p) {
            bail!(
                "CUTRACE_INJECT_LIB={} is not a shared library (no ELF header); point it at \
                 {INJECT_LIB_NAME}",
                p.display()
            );
        }
        return std::fs::canonicalize(&p).with_context(|| format!("resolving {}", p.display()));
    }
    let mut tried = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        for cand in [
            dir.join(INJECT_LIB_NAME),
            dir.join("../lib").join(INJECT_LIB_NAME),
            dir.join("../lib/cutrace").join(INJECT_LIB_NAME),
        ] {
            if cand.is_file() {
                return std::fs::canonicalize(&cand)
                    .with_context(|| format!("resolving {}", cand.display()));
            }
            tried.push(cand.display().to_string());
        }
    }
    bail!(
        "cannot find {INJECT_LIB_NAME} (tried {}); install it next to the cutrace binary or set \
         CUTRACE_INJECT_LIB",
        tried.join(", ")
    )
}

/// The injection library built into release binaries (build.rs; empty in debug builds), for a
/// binary installed alone (`cargo install`), which has no library beside it.
const EMBEDDED_INJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcutrace_inject.so"));

/// Writes the embedded library out once, content-addressed, into the user's own cache directory
/// (`$XDG_CACHE_HOME/cutrace` or `~/.cache/cutrace`, mode 0700), and returns its path. An existing
/// file is used only if its bytes are exactly the embedded ones. None when nothing is embedded
/// or it cannot be written: the caller then reports why the library was not found.
fn write_embedded_inject() -> Option<PathBuf> {
    if EMBEDDED_INJECT.is_empty() {
        return None;
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| Path::new(p).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    let dir = cache.join(format!("cutrace/{}", env!("CUTRACE_EMBEDDED_INJECT_ID")));
    let path = dir.join(INJECT_LIB_NAME);
    if std::fs::read(&path).is_ok_and(|b| b == EMBEDDED_INJECT) {
        return Some(path);
    }
    let mut private = std::fs::DirBuilder::new();
    private.recursive(true).mode(0o700).create(&dir).ok()?;
    // Written beside, then renamed into place: a concurrent `record` never loads half a file.
    let tmp = dir.join(format!(".{INJECT_LIB_NAME}.{}", std::process::id()));
    std::fs::write(&tmp, EMBEDDED_INJECT).ok()?;
    std::fs::rename(&tmp, &path).ok()?;
    Some(path)
}

fn is_elf(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Why a program cannot be started, found before anything is created: the exit status a shell
/// would give (126 found but not runnable, 127 not found) and the message.
#[derive(Debug)]
pub struct CannotRun {
    pub code: i32,
    pub message: String,
}

/// Finds `prog` as `execvp` will: a name with a `/` is a path; any other name is looked up in
/// `path` (`PATH`'s value). The checks `exec` would fail on are made here, so that a failed
/// start leaves no trace directory and says why in the user's terms.
pub fn resolve_program(
    prog: &OsStr,
    path: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, CannotRun> {
    use std::os::unix::fs::PermissionsExt;
    let shown = Path::new(prog).display().to_string();
    let runnable = |p: &Path| -> Result<(), CannotRun> {
        let md = std::fs::metadata(p).map_err(|e| CannotRun {
            code: 127,
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!("{shown}: No such file or directory")
            } else {
                format!("{shown}: {e}")
            },
        })?;
        if md.is_dir() {
            return Err(CannotRun {
                code: 126,
                message: format!("{shown}: a directory, not a program"),
            });
        }
        if md.permissions().mode() & 0o111 == 0 {
            return Err(CannotRun {
                code: 126,
                message: format!(
                    "{shown}: Permission denied: not executable; `chmod +x {shown}`, or run it \
                     through its interpreter (e.g. `python3 {shown}`)"
                ),
            });
        }
        if let Some(interp) = missing_interpreter(p) {
            if interp.starts_with('/') && !Path::new(&interp).exists() {
                return Err(CannotRun {
                    code: 126,
                    message: format!(
                        "{shown}: its interpreter {interp} (the #! line) does not exist; install \
                         it or fix the #! line"
                    ),
                });
            }
        }
        Ok(())
    };
    let bytes = prog.as_bytes();
    if bytes.is_empty() {
        return Err(CannotRun {
            code: 127,
            message: "the program's name is empty".into(),
        });
    }
    if bytes.contains(&b'/') {
        runnable(Path::new(prog))?;
        return Ok(PathBuf::from(prog));
    }
    let mut cannot = None;
    for dir in path
        .map(OsStr::as_bytes)
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin")
        .split(|&b| b == b':')
    {
        // An empty PATH entry means the current directory.
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            PathBuf::from(OsStr::from_bytes(dir))
        };
        let cand = dir.join(prog);
        if cand.is_file() {
            match runnable(&cand) {
                Ok(()) => return Ok(cand),
                // As a shell: the first match that cannot run is the answer if none can.
                Err(e) => {
                    cannot.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = cannot {
        return Err(e);
    }
    let here = cwd.join(prog);
    let message = if here.is_file() {
        format!(
            "{shown}: command not found in PATH; there is a file {shown} here: run it as \
             ./{shown}, or through its interpreter (e.g. `python3 {shown}`)"
        )
    } else {
        format!("{shown}: command not found in PATH")
    };
    Err(CannotRun { code: 127, message })
}

/// Why `exec` of a file that exists failed with ENOENT: its `#!` interpreter is missing.
fn missing_interpreter(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interp = String::from_utf8_lossy(line)
        .split_whitespace()
        .next()?
        .to_string();
    Some(interp)
}

/// `p` as it can be pasted into a shell.
pub fn shell_quote(p: &str) -> String {
    let plain = !p.is_empty()
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./-+:,@%=".contains(&b));
    if plain {
        p.to_string()
    } else {
        format!("'{}'", p.replace('\'', "'\\''"))
    }
}

/// The environment `record` gives the program (names and values), pure for tests.
pub fn injection_env(
    inject: &Path,
    out_dir: &Path,
    kinds: &[String],
    buffer_mib: u32,
    serialize: bool,
    record_cmdline: bool,
    discard: bool,
) -> Vec<(String, OsString)> {
    let mut env = vec![
        (
            "CUDA_INJECTION64_PATH".to_string(),
            inject.as_os_str().to_owned(),
        ),
        (
            "CUTRACE_OUTPUT_DIR".to_string(),
            out_dir.as_os_str().to_owned(),
        ),
        ("CUTRACE_KINDS".to_string(), kinds.join(",").into()),
        (
            "CUTRACE_BUFFER_BYTES".to_string(),
            (u64::from(buffer_mib) << 20).to_string().into(),
        ),
    ];
    if serialize {
        env.push(("CUTRACE_SERIALIZE_KERNELS".into(), "1".into()));
    }
    if record_cmdline {
        env.push(("CUTRACE_RECORD_CMDLINE".into(), "1".into()));
    }
    if discard {
        env.push(("CUTRACE_DISCARD".into(), "1".into()));
    }
    env
}

/// `LD_PRELOAD` for the program: the injection library first, then the entries already there
/// (the dynamic loader splits on spaces and colons). `None` when the library's path holds a
/// space or colon, which `LD_PRELOAD` cannot carry.
pub fn preload_value(inject: &Path, existing: Option<&OsStr>) -> Option<OsString> {
    let lib = inject.as_os_str().as_bytes();
    if lib.is_empty() || lib.iter().any(|&b| b == b' ' || b == b':') {
        return None;
    }
    let mut value = lib.to_vec();
    let rest = existing.map(OsStr::as_bytes).unwrap_or_default();
    for entry in rest.split(|&b| b == b' ' || b == b':') {
        // A nested `cutrace record` does not preload the library twice.
        if !entry.is_empty() && entry != lib {
            value.push(b':');
            value.extend_from_slice(entry);
        }
    }
    Some(OsString::from_vec(value))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    run_with(args, Vec::new())
}

/// `record`, with `extra` added to the program's environment (`cutrace profile`'s counter
/// settings, which the injection reads as it reads record's own).
pub fn run_with(mut args: Args, extra: Vec<(String, OsString)>) -> anyhow::Result<i32> {
    // `--kinds "kernel, runtime"`: the spaces are not part of the names.
    args.kinds = args
        .kinds
        .iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
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
                api.env_value()
            );
        }
    }
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
    let inject = find_inject_lib(std::env::var_os("CUTRACE_INJECT_LIB"), exe.as_deref())
        .or_else(|e| write_embedded_inject().ok_or(e))?;
    let (out_dir, created) = prepare_output(&args.output)?;
    let earlier = std::fs::read_dir(&out_dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "cutrace"))
                .count()
        })
        .unwrap_or(0);
    let mut env = injection_env(
        &inject,
        &out_dir,
        &args.kinds,
        args.buffer_size,
        args.serialize_kernels,
        args.record_cmdline,
        args.discard,
    );
    // Always set, so a CUTRACE_API left in the environment does not choose for the user.
    env.push(("CUTRACE_API".into(), api.env_value().into()));
    env.extend(extra);
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
    // Counter settings left in the environment must not turn a plain `record` into a profile.
    for var in COUNTER_VARS {
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

/// Creates (or reuses) the trace directory and checks, before the program starts, that parts
/// can be created in it: a failure found later would only show once the program starts CUDA,
/// perhaps hours into a run.
/// The directory, and whether this call created it.
fn prepare_output(dir: &Path) -> anyhow::Result<(PathBuf, bool)> {
    if let Ok(md) = std::fs::symlink_metadata(dir) {
        let what = if md.file_type().is_symlink() && std::fs::metadata(dir).is_err() {
            Some("a link to nothing")
        } else if !dir.is_dir() {
            Some("not a directory")
        } else {
            None
        };
        if let Some(what) = what {
            bail!(
                "-o {} exists and is {what}: the trace is a directory (one part per process); \
                 pass -o a new or existing directory",
                dir.display()
            );
        }
    }
    let existed = dir.is_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the trace directory {}", dir.display()))?;
    let out_dir =
        std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
    let probe = out_dir.join(format!(".cutrace-probe-{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match made {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
        }
        Err(e) => {
            if !existed {
                let _ = std::fs::remove_dir(&out_dir);
            }
            bail!(
                "cannot create trace parts in {} ({e}); choose a directory you can write with -o",
                out_dir.display()
            );
        }
    }
    Ok((out_dir, !existed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_holds_absolute_paths_and_settings() {
        let env = injection_env(
            Path::new("/opt/cutrace/libcutrace_inject.so"),
            Path::new("/tmp/t"),
            &["kernel".into(), "runtime".into()],
            4,
            false,
            true,
            false,
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("CUDA_INJECTION64_PATH").unwrap(),
            "/opt/cutrace/libcutrace_inject.so"
        );
        assert_eq!(get("CUTRACE_KINDS").unwrap(), "kernel,runtime");
        assert_eq!(get("CUTRACE_BUFFER_BYTES").unwrap(), "4194304");
        assert_eq!(get("CUTRACE_RECORD_CMDLINE").unwrap(), "1");
        assert!(get("CUTRACE_DISCARD").is_none());
    }

    #[test]
    fn api_modes_reach_the_injection_by_their_names() {
        use clap::ValueEnum;
        // The injection parses these names (cutrace-inject's ApiMode::parse).
        for m in ApiRecords::value_variants() {
            let shown = m.to_possible_value().unwrap();
            assert_eq!(shown.get_name(), m.env_value());
        }
        assert_eq!(ApiRecords::Lean.env_value(), "lean");
        assert_eq!(ApiRecords::Launches.env_value(), "launches");
    }

    #[test]
    fn preload_puts_the_library_first_and_keeps_the_rest() {
        let lib = Path::new("/opt/cutrace/libcutrace_inject.so");
        let v = |e: Option<&str>| preload_value(lib, e.map(OsStr::new));
        assert_eq!(v(None).unwrap(), "/opt/cutrace/libcutrace_inject.so");
        assert_eq!(v(Some("")).unwrap(), "/opt/cutrace/libcutrace_inject.so");
        assert_eq!(
            v(Some("libjemalloc.so.2 /x/libfoo.so:/y/libbar.so")).unwrap(),
            "/opt/cutrace/libcutrace_inject.so:libjemalloc.so.2:/x/libfoo.so:/y/libbar.so"
        );
        assert_eq!(
            v(Some("/opt/cutrace/libcutrace_inject.so:/x/libfoo.so")).unwrap(),
            "/opt/cutrace/libcutrace_inject.so:/x/libfoo.so"
        );
        assert!(preload_value(Path::new("/my tools/libcutrace_inject.so"), None).is_none());
        assert!(preload_value(Path::new("/a:b/libcutrace_inject.so"), None).is_none());
    }

    #[test]
    fn inject_lib_is_found_next_to_the_binary_or_refused() {
        let dir = std::env::temp_dir().join(format!("cutrace-rec-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let exe = dir.join("bin/cutrace");
        assert!(find_inject_lib(None, Some(&exe)).is_err());
        std::fs::write(dir.join("bin").join(INJECT_LIB_NAME), b"").unwrap();
        let p = find_inject_lib(None, Some(&exe)).unwrap();
        assert!(p.is_absolute());
        assert!(find_inject_lib(Some("/nonexistent.so".into()), Some(&exe)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn paths_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(shell_quote("/tmp/run1"), "/tmp/run1");
        assert_eq!(shell_quote("/tmp/my run"), "'/tmp/my run'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn programs_are_found_as_execvp_finds_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cutrace-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let tool = dir.join("bin/tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", dir.join("bin").display()));
        assert_eq!(
            resolve_program(OsStr::new("tool"), Some(&path), &dir).unwrap(),
            tool
        );
        // An empty PATH entry is the current directory.
        let here = OsString::from("/nonexistent:");
        assert_eq!(
            resolve_program(OsStr::new("tool"), Some(&here), &dir.join("bin")).unwrap(),
            tool
        );
        let e = resolve_program(OsStr::new("tool"), Some(OsStr::new("/nonexistent")), &dir)
            .unwrap_err();
        assert_eq!(e.code, 127);
        assert!(resolve_program(OsStr::new(""), None, &dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
