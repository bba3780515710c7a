//! `cutrace profile`: per-kernel hardware counters (CUPTI Range Profiling) beside the trace, and
//! `--list-metrics`, which asks CUPTI's host library what a chip can count (no GPU needed).
//!
//! Profiling is `record` plus counters: the same injection library and trace directory, with the
//! counter settings passed in the environment (`cutrace_settings::Counters`, read by cutrace-inject's
//! `counters` module).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use cutrace_counters::listing::{type_word, write_listing, Listing, MetricRow};
use cutrace_counters::{sets, MetricType, Profiler, ProfilerKind};
use cutrace_settings::{CounterAccess, Counters};

use super::record;

/// The long help's examples and notes.
fn after_help() -> String {
    format!(
        r#"Examples:
  cutrace profile --list-metrics --chip GH100                 every Range Profiler metric of the chip
  cutrace profile --list-metrics --chip GH100 --set sol       a set's metrics and its pass count
  cutrace profile --list-metrics --metrics sm__ctas_launched.sum,dram__bytes_read.sum --format json
  cutrace profile -o run1 -- ./my_app                         the basic set (one pass on GH100)
  cutrace profile --set sol --kernels 'gemm|conv' -o run1 -- python3 train.py
  cutrace profile --pause-dcgm -o run1 -- ./my_app            DCGM paused while it runs, then resumed
  cutrace profile --pc-sampling -o run2 -- ./my_app           where warps stall, per kernel and line
  cutrace report run1                                         counters per kernel name, GPU and step

Sets: basic (one pass on GH100): gpu__time_duration.sum, sm__ctas_launched.sum,
smsp__warps_launched.sum, smsp__inst_executed.sum, dram__bytes_read.sum, dram__bytes_write.sum,
sm__cycles_active.avg, gpc__cycles_elapsed.max, sm__warps_active.avg.pct_of_peak_sustained_active,
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active.
sol (9 passes on GH100): Nsight Compute's GPU Speed Of Light Throughput section.

Launches covered: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel (and their _ptsz
forms), which every runtime launch goes through. Kernels inside CUDA graphs (cuGraphLaunch) are
traced but get no counters: a graph launch is one API call for many kernels, so no range can
start and stop around each of them; `cutrace report` counts such graph launches, and launches
made while a stream is being captured into a graph (no range is opened during a capture).
CUPTI writes no timestamps in the kernel records of the kernels it profiles, so the report takes
their durations from gpu__time_duration.sum and says so.

Cost: each profiled kernel takes milliseconds per pass, whatever its size (about 15 ms each in a
PyTorch step on an H200, spent in CUPTI's replay of the kernel): choose kernels with --kernels
(matched against the name as CUPTI reports it, mangled), --max-kernels or --every.
{timing}=1 prints where the time went at exit.

Who holds the counters: one client at a time. A second `cutrace profile` (or `cutrace sample`,
DCGM, Nsight Compute) running fails the counters with CUPTI_ERROR_HARDWARE_BUSY; the message
names the likely holder (the doctor's counter-holders check). Under MPS, Range Profiling gave
exact counters on an H200 (gpu/mps.sh), but a kernel's counters may include other MPS clients'
work beside it; a note says so when an MPS daemon is active. (`cutrace sample` refuses MPS.)

PC sampling (--pc-sampling): CUPTI's PC Sampling API in continuous mode samples each SM's warps
every 2^N cycles (--pc-interval N; default CUPTI's, by SM count) and counts, per instruction,
the warp state it found (long_scoreboard: waiting on an L1TEX load; barrier; selected: issuing;
not_selected: eligible, another warp issued; …). Kernels are not serialized or replayed, so the
program runs as it would: on an H200 three test kernels took 1.005x their untraced time after
a one-time start of 0.3 s, and a PyTorch training step 1.045x, against Nsight Compute's 118x on
the same kernels (BENCHMARKS.md). `cutrace report` gives each kernel's stall
mix and hottest source lines (build with `nvcc -lineinfo` for lines); `cutrace convert --pprof`
writes a pprof profile. Continuous mode cannot name the launch a sample came from, so samples
are per kernel name, not per launch, and PC samples carry no time (the whole run, whatever
--from/--to say). PC sampling worked under MPS on the H200; it needs the same profiling
permission as counters, and fails with the same messages when another profiler holds the GPU.

Exit status: the program's own; 125 when cutrace itself fails before the program starts (a bad
option or set, --list-metrics errors), as for `cutrace record`. A metric the GPU does not have is
refused when the program creates its first CUDA context: one line names it and tracing carries
on, or, with --require-counters, the program stops with exit 125."#,
        timing = cutrace_settings::var::COUNTERS_TIMING
    )
}

/// Per-kernel hardware counters beside the trace (Range Profiling), where warps stall
/// (--pc-sampling), or the metrics a chip has.
///
/// Runs CMD as `cutrace record` does, and reads the chosen metrics for each kernel: one range per
/// kernel, with kernel replay, started and stopped in the kernel's launch callback, so each
/// kernel's values carry its correlation id exactly. While profiling, every profiled kernel is
/// serialized (the context is synchronized after it) and replayed once per pass: the program
/// runs slower and its kernels do not overlap. Counters need the GPU's profiling permission
/// (`cutrace doctor` says whether this machine has it) and no other counter user (DCGM's
/// profiling metrics, Nsight Compute, another profiler). Without them tracing carries on and the
/// trace says why the counters are missing; --require-counters makes that fatal instead.
/// With --pc-sampling no counter is read and nothing is serialized or replayed: CUPTI samples
/// where each warp is and why it waits (see below); --set, --metrics, --kernels, --max-kernels
/// and --every do not apply and are refused beside it.
#[derive(clap::Args)]
#[command(after_long_help = after_help())]
pub struct Args {
    /// List metrics instead of profiling: every Range Profiler metric of the chip, or, with --set
    /// or --metrics, those metrics and the number of replay passes they need. Uses CUPTI's host
    /// library only (libcupti.so.13 and libnvperf_host.so; no GPU, no driver).
    #[arg(long)]
    list_metrics: bool,
    /// The chip for --list-metrics (GH100 for H100/H200, GA100, AD102, ...). Default: the chip
    /// of GPU 0.
    #[arg(long, value_name = "NAME", requires = "list_metrics")]
    chip: Option<String>,
    /// A named metric set: basic or sol.
    #[arg(long, value_name = "SET", conflicts_with = "metrics")]
    set: Option<String>,
    /// Metrics, comma-separated (names with their rollup: sm__ctas_launched.sum, ...).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    metrics: Vec<String>,
    /// Output format of --list-metrics.
    #[arg(long, value_enum, default_value_t = Format::Text, requires = "list_metrics")]
    format: Format,
    /// Profile only kernels whose name matches this regular expression (others are traced only);
    /// matched against the name as CUPTI reports it (mangled: `_Z4gemmPf` matches `gemm`).
    #[arg(long, value_name = "REGEX")]
    kernels: Option<String>,
    /// Profile at most N kernels per process (the first N that match).
    #[arg(long, value_name = "N", conflicts_with = "every")]
    max_kernels: Option<u64>,
    /// Profile every Nth matching kernel (1 = all).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    every: Option<u64>,
    /// Stop the program (exit 125 from the injection's first failure) when counters (or, with
    /// --pc-sampling, PC samples) cannot be read, instead of tracing without them.
    #[arg(long)]
    require_counters: bool,
    /// Pause DCGM's profiling metrics (`dcgmi profile --pause`) while the program runs and
    /// resume them when it ends, however it ends: `cutrace dcgm run`'s guard, whose watchdog
    /// resumes even if cutrace is killed. For a machine where DCGM holds the counters
    /// (CUPTI_ERROR_HARDWARE_BUSY; `cutrace doctor`'s counter-holders check names it).
    #[arg(long)]
    pause_dcgm: bool,
    /// Sample where warps stall instead of reading counters (CUPTI PC Sampling, continuous mode):
    /// every kernel runs as it would, not serialized and not replayed, and `cutrace report`
    /// shows the stall reasons per kernel and the hottest source lines (from the cubin's line
    /// information: build with `nvcc -lineinfo`).
    #[arg(long, conflicts_with_all = ["set", "metrics", "kernels", "max_kernels", "every"])]
    pc_sampling: bool,
    /// PC sampling period: one sample every 2^N cycles per SM, N from 5 to 31 (default: CUPTI's,
    /// chosen by the GPU's SM count). Smaller N gives more samples and more cost; too small
    /// overflows the hardware buffer, which the report counts as dropped samples.
    #[arg(long, value_name = "N", requires = "pc_sampling",
          value_parser = clap::value_parser!(u32).range(5..=31))]
    pc_interval: Option<u32>,
    /// Trace directory (created if missing), as for `cutrace record`.
    #[arg(short, long, default_value = "cutrace-trace")]
    output: PathBuf,
    /// Print nothing of cutrace's own but warnings and errors.
    #[arg(short, long)]
    quiet: bool,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, required_unless_present = "list_metrics")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The metrics chosen by --set / --metrics (the basic set when neither is given), and the set's
/// name when one was named.
fn chosen_metrics(args: &Args) -> anyhow::Result<(Option<&'static str>, Vec<String>)> {
    if let Some(name) = &args.set {
        let Some(set) = sets::by_name(name) else {
            let known: Vec<&str> = sets::ALL.iter().map(|s| s.name).collect();
            bail!(
                "unknown metric set '{name}'; known sets: {}",
                known.join(", ")
            );
        };
        return Ok((
            Some(set.name),
            set.metrics.iter().map(|m| m.to_string()).collect(),
        ));
    }
    let list: Vec<String> = args
        .metrics
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if list.is_empty() && !args.metrics.is_empty() {
        bail!(
            "--metrics names no metric; give metric names separated by commas \
             (--metrics sm__ctas_launched.sum,dram__bytes_read.sum), or leave --metrics out for \
             the basic set"
        );
    }
    if list.is_empty() {
        return Ok((
            Some(sets::BASIC.name),
            sets::BASIC.metrics.iter().map(|m| m.to_string()).collect(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = list.iter().find(|m| !seen.insert(m.as_str())) {
        bail!("--metrics names {dup} twice");
    }
    Ok((None, list))
}

pub fn run(args: Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    if let Some(re) = &args.kernels {
        regex_lite::Regex::new(re).with_context(|| format!("--kernels {re:?} is not a regex"))?;
    }
    if args.list_metrics {
        return list_metrics(&args, out);
    }
    let (_, metrics) = chosen_metrics(&args)?;
    if args.pause_dcgm {
        return run_paused(&args);
    }
    let sessions = record::Sessions {
        counters: (!args.pc_sampling).then(|| Counters {
            metrics,
            kernels: args.kernels.clone(),
            max_kernels: args.max_kernels,
            every: args.every,
        }),
        pm_sampling: None,
        pc_sampling: args.pc_sampling.then_some(cutrace_settings::PcSampling {
            period: args.pc_interval,
        }),
        counter_access: doctor_hints(args.require_counters, args.quiet),
    };
    let rec = record::Args {
        output: args.output,
        kinds: cutrace_settings::default_kinds(),
        buffer_size: 8,
        api: None,
        memory: false,
        serialize_kernels: false,
        record_cmdline: false,
        no_preload: false,
        quiet: args.quiet,
        discard: false,
        command: args.command,
    };
    record::run_with(rec, sessions)
}

/// `--pause-dcgm`: this same profile, without the flag, as a child of DCGM's guard
/// (`cutrace_dcgm::run_paused`: pause, run, resume on every exit, signals passed on).
fn run_paused(args: &Args) -> anyhow::Result<i32> {
    use cutrace_dcgm as dcgm;
    let Some(prog) = args.command.first() else {
        bail!("no command given: cutrace profile [OPTIONS] -- CMD ARGS...");
    };
    // Before pausing anything: a command that cannot start is answered like a shell.
    if let Err((code, msg)) = super::dcgm::resolve_program(&prog.to_string_lossy()) {
        eprintln!("cutrace: {msg} (nothing was paused)");
        return Ok(code);
    }
    let exe = std::env::current_exe().context("finding the cutrace binary to run paused")?;
    let shown: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let label = format!("cutrace profile -- {}", shown.join(" "));
    let opts = dcgm::PauseOptions {
        dcgmi: Some(dcgm::find_dcgmi().context("--pause-dcgm")?),
        deadline: None,
        state_dir: None,
        label: Some(label.clone()),
        ..dcgm::PauseOptions::default()
    };
    let mut argv: Vec<OsString> = vec![exe.clone().into()];
    argv.extend(child_args(args));
    eprintln!(
        "cutrace: pausing DCGM profiling metrics while `{label}` runs; {}.",
        dcgm::BLANK_WARNING
    );
    let outcome = match dcgm::run_paused(&opts, &exe, &argv) {
        Ok(o) => o,
        Err(dcgm::RunError::Spawn(e)) => bail!("could not run cutrace again under the pause: {e}"),
        Err(e) => return Err(e.into()),
    };
    super::dcgm::say_release(&outcome);
    Ok(outcome.exit_code)
}

/// The command line of `args` without `--pause-dcgm` (values attached with `=`, so none is read
/// as an option).
fn child_args(args: &Args) -> Vec<OsString> {
    let opt = |name: &str, v: &std::ffi::OsStr| {
        let mut o = OsString::from(format!("--{name}="));
        o.push(v);
        o
    };
    let mut v: Vec<OsString> = vec!["profile".into()];
    if let Some(s) = &args.set {
        v.push(opt("set", s.as_ref()));
    }
    if !args.metrics.is_empty() {
        v.push(opt("metrics", args.metrics.join(",").as_ref()));
    }
    if let Some(k) = &args.kernels {
        v.push(opt("kernels", k.as_ref()));
    }
    if let Some(n) = args.max_kernels {
        v.push(opt("max-kernels", n.to_string().as_ref()));
    }
    if let Some(n) = args.every {
        v.push(opt("every", n.to_string().as_ref()));
    }
    if args.pc_sampling {
        v.push("--pc-sampling".into());
    }
    if let Some(n) = args.pc_interval {
        v.push(opt("pc-interval", n.to_string().as_ref()));
    }
    if args.require_counters {
        v.push("--require-counters".into());
    }
    if args.quiet {
        v.push("--quiet".into());
    }
    v.push(opt("output", args.output.as_os_str()));
    v.push("--".into());
    v.extend(args.command.iter().cloned());
    v
}

/// Where MPS was seen to be active (the doctor's `mps` check's evidence), when it is.
pub(crate) fn mps_seen(report: &cutrace_doctor::Report) -> Option<String> {
    let c = report
        .checks
        .iter()
        .find(|c| c.id == "mps" && c.status != cutrace_doctor::Status::Ok)?;
    let seen: Vec<String> = c
        .evidence
        .iter()
        .map(|e| format!("{}: {}", e.file, e.value))
        .collect();
    Some(seen.join("; "))
}

/// The doctor's counter-access and counter-holders verdicts, read before the program starts
/// (cheap, pure file reads), for the injection to quote if CUPTI refuses the counters
/// (INSUFFICIENT_PRIVILEGES, HARDWARE_BUSY). A failed counter-access check is said up front, and
/// so is MPS, with what was seen of Range Profiling under it (`gpu/mps.sh`, runs 32–34).
pub(crate) fn doctor_hints(require: bool, quiet: bool) -> CounterAccess {
    let report = cutrace_doctor::doctor(&cutrace_doctor::Root::new("/"));
    let mps = mps_seen(&report).map(|seen| {
        format!(
            "MPS is active here ({seen}). Range Profiling through MPS gave exact counters on an \
             H200 (gpu/mps.sh), but a profiled kernel's counters may include other MPS clients' \
             work that runs beside it, and after a profile run `cutrace sample` through the same \
             MPS server made its program fail. If counters fail, tracing carries on and the \
             trace says why; `cutrace doctor --probe` asks CUPTI directly."
        )
    });
    if let (Some(m), false) = (&mps, quiet) {
        eprintln!("cutrace: note: {m}");
    }
    let hint_of = |id: &str| -> Option<String> {
        let c = report.checks.iter().find(|c| c.id == id)?;
        let fix = if c.fix.is_empty() {
            String::new()
        } else {
            format!(" Fix: {}", c.fix.join("; "))
        };
        let mut hint = format!(
            "The doctor's {id} check ({}): {}.{fix}",
            c.status.as_str(),
            c.summary
        );
        if id == "counter-access" && c.status == cutrace_doctor::Status::Fail && !quiet {
            eprintln!("cutrace: warning: counters will probably be refused here. {hint}");
        }
        if let Some(m) = &mps {
            hint.push(' ');
            hint.push_str(m);
        }
        Some(hint)
    };
    CounterAccess {
        require,
        access_hint: hint_of("counter-access"),
        holders_hint: hint_of("counter-holders"),
    }
}

/// The libcupti to use, with libnvperf_host made findable beside it.
pub(crate) fn load_cupti() -> anyhow::Result<cutrace_cupti::Cupti> {
    let cupti = cutrace_cupti::Cupti::load(&cutrace_cupti::locate::candidates_here(&|k| std::env::var(k).ok()))
        .context("checking metrics needs libcupti.so.13 and libnvperf_host.so (CUDA 13 toolkit, or `pip install nvidia-cuda-cupti`)")?;
    cutrace_counters::preload_nvperf_host(std::path::Path::new(&cupti.path));
    Ok(cupti)
}

fn list_metrics(args: &Args, out: &mut dyn Write) -> anyhow::Result<i32> {
    let cupti = load_cupti()?;
    let profiler = Profiler::new(&cupti);
    let known = profiler.supported_chips().context(
        "CUPTI's host library did not answer (is libnvperf_host.so beside libcupti.so.13?)",
    )?;
    let chip = match &args.chip {
        Some(c) => c.clone(),
        None => gpu_chip(&profiler, 0).with_context(|| {
            format!(
                "no GPU to take the chip from; name one with --chip (this CUPTI knows: {})",
                known.join(", ")
            )
        })?,
    };
    if !known.contains(&chip) {
        bail!(
            "unknown chip '{chip}'; this CUPTI knows: {} (GH100 is H100/H200)",
            known.join(", ")
        );
    }
    let asked = args.set.is_some() || !args.metrics.is_empty();
    let host = profiler.host(ProfilerKind::RangeProfiler, &chip, None)?;
    let (set, names, passes) = if asked {
        let (set, names) = chosen_metrics(args)?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let plan = cutrace_counters::plan(&profiler, &chip, None, &refs)?;
        (set, names, Some(plan.passes))
    } else {
        let mut names = Vec::new();
        for kind in [
            MetricType::Counter,
            MetricType::Ratio,
            MetricType::Throughput,
        ] {
            names.extend(host.base_metrics(kind)?);
        }
        names.sort();
        names.dedup();
        (None, names, None)
    };
    let mut metrics = Vec::with_capacity(names.len());
    for name in names {
        let p = host
            .metric_properties(&name)
            .with_context(|| format!("reading the properties of {name}"))?;
        metrics.push(MetricRow {
            kind: type_word(p.kind),
            hw_unit: p.hw_unit,
            dim_unit: p.dim_unit,
            description: p.description,
            name,
        });
    }
    let listing = Listing {
        chip,
        set,
        metrics,
        passes,
    };
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &listing)?;
            writeln!(out)?;
        }
        Format::Text => write_listing(&listing, out)?,
    }
    Ok(0)
}

/// The chip of a GPU (`cuptiDeviceGetChipName`), which needs the driver.
pub(crate) fn gpu_chip(profiler: &Profiler<'_>, device: usize) -> anyhow::Result<String> {
    // cuptiProfilerInitialize answers CUPTI_ERROR_UNKNOWN until the driver is initialized.
    let driver = cutrace_cupti::driver::CudaDriver::load()?;
    let r = driver.init(0);
    anyhow::ensure!(r == 0, "cuInit returned {}", driver.error_name(r));
    profiler.initialize()?;
    let chip = profiler.chip_name(device)?;
    profiler.deinitialize();
    chip.with_context(|| format!("CUPTI named no chip for GPU {device}"))
}
