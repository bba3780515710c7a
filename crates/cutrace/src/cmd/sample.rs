//! `cutrace sample`: a time series of device-wide hardware counters (CUPTI PM Sampling) beside
//! the trace. It is `record` plus sampling: the settings go to the injection library in the
//! environment (`cutrace_settings::PmSampling`, read by cutrace-inject's `sampling` module), after the metric
//! list was checked against the chip of the first GPU sampled.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use cutrace_counters::pm;
use cutrace_counters::Profiler;

use super::{profile, record};

/// Counters over time, device-wide, beside the trace (PM Sampling).
///
/// Runs CMD as `cutrace record` does, and has each GPU sample its counters at a fixed interval
/// while the program runs: how busy the GPU really was, over time, without slowing kernels down
/// (no replay, no serialization). `cutrace report` then gives the layered answer per GPU: kernels
/// running, SMs active, tensor pipes active, DRAM busy, for the whole window, each step and the
/// idle gaps. Sampling needs the GPU's profiling permission and no other counter user (as
/// `cutrace profile`); without them tracing carries on and the trace says why the samples are
/// missing; --require-counters makes that fatal instead. Under MPS it refuses to start (on an
/// H200 sampling through MPS collected nothing, and after a profile run broke the program).
#[derive(clap::Args)]
#[command(after_long_help = r#"Examples:
  cutrace sample -o run1 -- ./my_app                         the default set, every 1 ms
  cutrace sample --interval 100us --device 0 -o run1 -- python3 train.py
  cutrace sample --metrics sm__cycles_active.avg.pct_of_peak_sustained_elapsed -- ./app
  cutrace report run1                                        the layered answer per GPU

Default set (one pass on GH100): gr__cycles_active.avg.pct_of_peak_sustained_elapsed (GPU
active), sm__cycles_active.avg.pct_of_peak_sustained_elapsed (SM active),
sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed (tensor pipes),
dram__throughput.avg.pct_of_peak_sustained_elapsed (DRAM), pcie__read_bytes.sum,
pcie__write_bytes.sum, nvlrx__bytes.sum and nvltx__bytes.sum (NVLink, left out on a GPU without
it). PM Sampling reads one pass only: a list that needs more is refused before the program
starts, naming the metric that breaks it (`cutrace profile --list-metrics --chip GH100` lists
names; not every Range Profiler metric can be sampled).

The first sample of each GPU is dropped (CUPTI documents it as a possible outlier); samples the
hardware buffer lost to an overflow are counted, and `cutrace report` shows both. The counters
are device-wide: other programs' kernels on the GPU count too. One process samples a GPU at a
time; another CUDA process of the program on the same GPU is refused (HARDWARE_BUSY) and traced.

Exit status: the program's own; 125 when cutrace itself fails before the program starts (a bad
option, a metric list refused), as for `cutrace record`."#)]
pub struct Args {
    /// Metrics, comma-separated (names with their rollup). Default: the set above.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    metrics: Vec<String>,
    /// Sampling interval: 100us, 1ms, 0.5ms (1us to 1s).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = pm::parse_interval)]
    interval: u64,
    /// GPUs to sample (CUDA device ordinals); default: every GPU the program uses.
    #[arg(long = "device", value_name = "N", num_args = 1..)]
    devices: Vec<u32>,
    /// Stop the program (exit 125) when sampling cannot start, instead of tracing without it.
    #[arg(long)]
    require_counters: bool,
    /// Trace directory (created if missing), as for `cutrace record`.
    #[arg(short, long, default_value = "cutrace-trace")]
    output: PathBuf,
    /// Print nothing of cutrace's own but warnings and errors.
    #[arg(short, long)]
    quiet: bool,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, required = true)]
    command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(seen) = profile::mps_seen(&cutrace_doctor::doctor(&cutrace_doctor::Root::new("/")))
    {
        eprintln!(
            "cutrace: error: MPS is active here ({seen}); cutrace sample refuses to run through \
             it: on an H200, PM Sampling through MPS collected no sample, and after a `cutrace \
             profile` through the same MPS server the sampled program failed (unspecified launch \
             failure; gpu/mps.sh). Sample where no MPS daemon serves the GPU (it stops with \
             `echo quit | nvidia-cuda-mps-control`, for every client), or trace without \
             counters: `cutrace record`. Nothing was run."
        );
        return Ok(125);
    }
    let (metrics, optional) = pm::chosen_metrics(&args.metrics).map_err(anyhow::Error::msg)?;
    // The default set is one pass on GH100 (tests/host.rs) and may lose NVLink where there is
    // none: the injection checks it. A list of the user's is checked here, before the start
    // (this initializes the driver in cutrace itself: about 0.3 s on the H200).
    if optional.is_empty() {
        check_metrics(&metrics, args.devices.first().copied(), args.quiet)?;
    }
    let sessions = record::Sessions {
        counters: None,
        pm_sampling: Some(cutrace_settings::PmSampling {
            metrics,
            interval_ns: Some(args.interval),
            devices: (!args.devices.is_empty()).then(|| args.devices.clone()),
            optional,
        }),
        pc_sampling: None,
        counter_access: profile::doctor_hints(args.require_counters, args.quiet),
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

/// Refuses, before the program starts, a list the chip cannot sample in one pass. Where no
/// libcupti or GPU is at hand here, the injection checks again on the GPU and says so there.
fn check_metrics(metrics: &[String], device: Option<u32>, quiet: bool) -> anyhow::Result<()> {
    let skip = |why: anyhow::Error| {
        if !quiet {
            eprintln!(
                "cutrace: the metrics are checked when the program starts CUDA, not now ({why:#})"
            );
        }
        Ok(())
    };
    let cupti = match profile::load_cupti() {
        Ok(c) => c,
        Err(e) => return skip(e),
    };
    let profiler = Profiler::new(&cupti);
    let chip = match profile::gpu_chip(&profiler, device.unwrap_or(0) as usize) {
        Ok(c) => c,
        Err(e) => return skip(e),
    };
    let names: Vec<&str> = metrics.iter().map(String::as_str).collect();
    pm::check_before_start(&profiler, &chip, &names, &[])
        .with_context(|| format!("the metric list cannot be sampled on {chip}"))?;
    Ok(())
}
