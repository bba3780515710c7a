//! cutrace-fuzz: runs the real `cutrace` binary (report and convert) on generated hostile inputs
//! for a fixed time, and fails on a panic, a signal, a hang, or a peak RSS above 256 MB beyond
//! what the command wrote. The committed regression inputs under `tests/fuzz-regressions/` are
//! replayed first; every new failure's input is written there, to be committed with its fix.
//!
//! Inputs are reproducible: case K of seed S is generated from `Rng::new(S ^ K·φ)`, so
//! `--seed S --case K` reruns one case.

#![forbid(unsafe_code)]

mod rng;
mod run;
mod targets;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use rng::Rng;
use run::{run_case, Scratch, Verdict};
use targets::Case;

#[derive(Parser)]
#[command(about = "Fuzz cutrace's readers through the real binary")]
struct Args {
    /// Time budget for generated cases (the regression inputs run first, outside it).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Seed of the run (default: the clock, printed so a failure can be replayed).
    #[arg(long)]
    seed: Option<u64>,
    /// Run only case K of the seed.
    #[arg(long, value_name = "K")]
    case: Option<u64>,
    /// The cutrace binary (default: `cutrace` beside this program).
    #[arg(long)]
    cutrace: Option<PathBuf>,
    /// The repository root (fixtures, regression inputs).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Seconds one command may run before it counts as a hang.
    #[arg(long, default_value_t = 20)]
    deadline: u64,
    /// Leave out the large genuine traces (about 10 MB each, run through every main command at
    /// the start of the budget).
    #[arg(long)]
    no_large: bool,
    /// Do not write failing inputs under tests/fuzz-regressions/.
    #[arg(long)]
    no_keep: bool,
    /// Write the large genuine native part that run --seed S reads (the same recording and chunk
    /// size) to PATH and exit: to replay a large-trace failure, or measure a command by hand.
    #[arg(long, value_name = "PATH")]
    write_large: Option<PathBuf>,
    /// Write the parts of the many-devices and distinct-names shapes under DIR and exit.
    #[arg(long, value_name = "DIR")]
    write_shapes: Option<PathBuf>,
    /// Size of the part --write-large writes, in bytes.
    #[arg(long, default_value_t = targets::large::PART_BYTES)]
    large_bytes: u64,
    /// Internal: serve as the small process that starts cutrace (see `run::Launcher`).
    #[arg(long, hide = true)]
    launcher: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.launcher {
        return Ok(run::launcher_main()?);
    }
    if let Some(dir) = &args.write_shapes {
        // The two largest shapes, for measuring by hand.
        for (name, part) in [
            ("many-devices", targets::shapes::many_devices_part()?),
            ("distinct-names", targets::shapes::distinct_names_part()?),
        ] {
            let d = dir.join(name);
            std::fs::create_dir_all(&d)?;
            std::fs::write(d.join("fuzz-4242.cutrace"), &part)?;
            println!("{}: {} bytes", d.display(), part.len());
        }
        return Ok(());
    }
    if let Some(path) = &args.write_large {
        let t = targets::large::LargeNative::load(&args.repo).context("loading the fixtures")?;
        let mut part = Vec::new();
        let records = t.write(&mut part, args.seed.unwrap_or(0), args.large_bytes)?;
        std::fs::write(path, &part).with_context(|| format!("writing {}", path.display()))?;
        println!(
            "{}: {} bytes, {records} records",
            path.display(),
            part.len()
        );
        return Ok(());
    }
    // Each child is started by a small launcher of its own: children inherit their starter's
    // peak RSS.
    let mut launcher = run::Launcher::start().context("finding the launcher")?;
    let bin = match &args.cutrace {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("no directory for this program")?
            .join("cutrace"),
    };
    anyhow::ensure!(
        bin.is_file(),
        "{}: no cutrace binary there (--cutrace)",
        bin.display()
    );
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let regressions = args.repo.join("tests/fuzz-regressions");
    let scratch_root = std::env::temp_dir().join(format!("cutrace-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&scratch_root)?;
    let result = fuzz(
        &args,
        &mut launcher,
        &bin,
        seed,
        &regressions,
        &scratch_root,
    );
    let _ = std::fs::remove_dir_all(&scratch_root);
    let (passed, failed) = result?;
    println!("fuzz: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn fuzz(
    args: &Args,
    launcher: &mut run::Launcher,
    bin: &Path,
    seed: u64,
    regressions: &Path,
    scratch_root: &Path,
) -> anyhow::Result<(u64, u64)> {
    let deadline = Duration::from_secs(args.deadline);
    let targets = targets::all(&args.repo).context("loading the fixtures")?;
    let mut passed = 0;
    let mut failed = 0;
    let mut highest = (0u64, String::new());
    let mut judge = |case: &Case, label: &str, keep: bool| -> anyhow::Result<()> {
        let out =
            run_case(launcher, bin, case, deadline).with_context(|| format!("running {label}"))?;
        if out.peak_rss > highest.0 {
            highest = (out.peak_rss, format!("{label}: {}", case.what));
        }
        if out.verdict == Verdict::Pass {
            passed += 1;
            return Ok(());
        }
        failed += 1;
        println!("FAIL {label}: {:?}", out.verdict);
        println!("  input: {}", case.what);
        println!("  cutrace {}", show_args(case));
        println!("  peak RSS: {} MB", out.peak_rss >> 20);
        for line in out
            .stderr_tail
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            println!("  | {line}");
        }
        if keep && !case.input.is_empty() {
            std::fs::create_dir_all(regressions)?;
            let p =
                regressions.join(format!("{label}-{}", case.input_name).replace([' ', '/'], "-"));
            std::fs::write(&p, &case.input)?;
            println!("  kept as {} (commit it with the fix)", p.display());
        }
        Ok(())
    };
    // Regression inputs first: each once as report and once as convert.
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(regressions)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    inputs.retain(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"));
    inputs.sort();
    if args.case.is_none() {
        for input in &inputs {
            let s = Scratch::new(scratch_root)?;
            for case in targets::replay_cases(input, &s.0)? {
                let label = format!("regression {}", input.display());
                judge(&case, &label, false)?;
            }
        }
        println!(
            "fuzz: {} regression inputs replayed; seed {seed}",
            inputs.len()
        );
    }
    // The fixed hostile shapes (targets/shapes.rs), each once.
    if args.case.is_none() {
        let s = Scratch::new(scratch_root)?;
        let cases = targets::shapes::cases(&s.0)?;
        for case in &cases {
            judge(case, "shape", false)?;
        }
        println!("fuzz: {} fixed hostile shapes run", cases.len());
    }
    let start = Instant::now();
    // Large genuine traces first, within the budget: the ceiling holds for what a real trace of
    // the largest size covered holds, not only for hostile small ones.
    if args.case.is_none() && !args.no_large {
        let large =
            targets::large::LargeNative::load(&args.repo).context("loading the fixtures")?;
        let s = Scratch::new(scratch_root)?;
        let cases = large.cases(&mut Rng::new(seed), &s.0)?;
        let label = format!("seed-{seed}-large (cutrace-fuzz --write-large PATH --seed {seed})");
        for case in &cases {
            judge(case, &label, false)?;
        }
        println!(
            "fuzz: {} large-trace cases in {:.0} s",
            cases.len(),
            start.elapsed().as_secs_f64()
        );
    }
    let mut k: u64 = args.case.unwrap_or(0);
    loop {
        if args.case.is_none() && start.elapsed() >= Duration::from_secs(args.seconds) {
            break;
        }
        let target = &targets[(k % targets.len() as u64) as usize];
        let mut rng = Rng::new(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let s = Scratch::new(scratch_root)?;
        let case = target
            .generate(&mut rng, &s.0)
            .with_context(|| format!("generating case {k} of {}", target.name()))?;
        let label = format!("seed-{seed}-case-{k}-{}", target.name());
        judge(&case, &label, !args.no_keep)?;
        drop(s);
        if args.case.is_some() {
            break;
        }
        k += 1;
    }
    println!(
        "fuzz: highest peak RSS {} MB ({})",
        highest.0 >> 20,
        highest.1
    );
    Ok((passed, failed))
}

fn show_args(case: &Case) -> String {
    case.args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
