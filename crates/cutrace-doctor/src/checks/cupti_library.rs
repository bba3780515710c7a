//! `cupti-library`: which libcupti a CUPTI tool would load, its version, and whether it pairs with
//! the running driver. "Attempting to use CUPTI calls with an incompatible CUDA driver version
//! will result in a CUPTI_ERROR_NOT_INITIALIZED error code" (CUPTI Usage, Compatibility).

use super::{src, Ctx};
use crate::facts::{DriverVersion, CAPABILITIES_SINCE};
use crate::report::{Affects, Check, Evidence, Status};

/// Where libcupti is looked for after LD_LIBRARY_PATH: the toolkit layout ("installed ...
/// under /usr/local/cuda-<version>/extras/CUPTI/", CUPTI docs), the toolkit's lib64 (where CUDA
/// 13 puts it), and distribution library directories.
pub const SEARCH_DIRS: [&str; 7] = [
    "/usr/local/cuda/extras/CUPTI/lib64",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/opt/cuda/extras/CUPTI/lib64",
];

/// Minimum Linux driver for each CUDA release, from NVIDIA's "CUDA Toolkit and Corresponding
/// Driver Versions" table (CUDA Toolkit release notes), GA releases.
pub const MIN_DRIVER: [((u32, u32), DriverVersion); 13] = [
    ((13, 1), DriverVersion::new(590, 44, 1)),
    ((13, 0), DriverVersion::new(580, 65, 6)),
    ((12, 9), DriverVersion::new(575, 51, 3)),
    ((12, 8), DriverVersion::new(570, 26, 0)),
    ((12, 6), DriverVersion::new(560, 28, 3)),
    ((12, 5), DriverVersion::new(555, 42, 2)),
    ((12, 4), DriverVersion::new(550, 54, 14)),
    ((12, 3), DriverVersion::new(545, 23, 6)),
    ((12, 2), DriverVersion::new(535, 54, 3)),
    ((12, 1), DriverVersion::new(530, 30, 2)),
    ((12, 0), DriverVersion::new(525, 60, 13)),
    ((11, 8), DriverVersion::new(520, 61, 5)),
    ((11, 0), DriverVersion::new(450, 36, 6)),
];

/// The newest CUDA major a driver supports (the x.0 minimum of each major).
pub fn driver_cuda_major(v: DriverVersion) -> Option<u32> {
    MIN_DRIVER
        .iter()
        .filter(|((_, minor), min)| *minor == 0 && v >= *min)
        .map(|((major, _), _)| *major)
        .max()
}

pub fn min_driver_for(major: u32, minor: Option<u32>) -> Option<DriverVersion> {
    let minor = minor.unwrap_or(0);
    MIN_DRIVER
        .iter()
        .filter(|((ma, mi), _)| *ma == major && *mi <= minor)
        .map(|(_, d)| *d)
        .max()
}

#[derive(Debug, Clone)]
pub struct CuptiCandidate {
    /// As an admin would type it (absolute, not under the root).
    pub path: String,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    pub evidence: Vec<Evidence>,
}

fn parse_major_from_name(name: &str) -> Option<u32> {
    // libcupti.so.13 / libcupti.so.12.8.90 (the 13.x real file, libcupti.so.2025.x, is year-versioned
    // and says nothing about CUDA; the SONAME link beside it does).
    let rest = name.strip_prefix("libcupti.so.")?;
    let major: u32 = rest.split('.').next()?.parse().ok()?;
    (major < 100).then_some(major)
}

/// `"cuda_cupti": {"version": "13.0.85"}` from a toolkit's version.json.
fn version_json(ctx: &Ctx, dir: &str) -> Option<(String, u32, u32)> {
    let mut d = std::path::PathBuf::from(dir);
    for _ in 0..4 {
        let f = format!("{}/version.json", d.display());
        if let Some(text) = ctx.root.read(&f) {
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            let s = v.get("cuda_cupti")?.get("version")?.as_str()?.to_string();
            let mut it = s.split('.');
            let major = it.next()?.parse().ok()?;
            let minor = it.next()?.parse().ok()?;
            return Some((f, major, minor));
        }
        if !d.pop() {
            break;
        }
    }
    None
}

fn candidate_in(ctx: &Ctx, dir: &str) -> Option<CuptiCandidate> {
    let names: Vec<String> = ctx
        .root
        .list(dir)
        .into_iter()
        .filter(|n| n.starts_with("libcupti.so"))
        .collect();
    // Prefer the SONAME-style link (libcupti.so.N); then the dev link; then anything.
    let pick = names
        .iter()
        .filter(|n| parse_major_from_name(n).is_some())
        .max_by_key(|n| parse_major_from_name(n))
        .or_else(|| names.iter().find(|n| *n == "libcupti.so"))
        .or_else(|| names.first())?;
    let path = format!("{}/{pick}", dir.trim_end_matches('/'));
    let mut evidence = vec![Evidence::new(dir, names.join(", "))];
    let host_path = ctx.root.path(&path);
    let mut major = None;
    if crate::elf::has_elf_magic(&host_path) {
        if let Ok(syms) = crate::elf::read_symbols(&host_path) {
            if let Some(so) = &syms.soname {
                evidence.push(Evidence::new(&path, format!("SONAME {so}")));
                major = parse_major_from_name(so);
            }
        }
        if let Some(rel) = crate::elf::cuda_release_string(&host_path) {
            evidence.push(Evidence::new(&path, rel));
        }
    }
    let major = major.or_else(|| parse_major_from_name(pick));
    let mut minor = None;
    if let Some((f, ma, mi)) = version_json(ctx, dir) {
        if major.is_none() || major == Some(ma) {
            evidence.push(Evidence::new(f, format!("cuda_cupti {ma}.{mi}")));
            minor = Some(mi);
        }
    }
    Some(CuptiCandidate {
        path,
        major,
        minor,
        evidence,
    })
}

/// The libcupti a tool would load: LD_LIBRARY_PATH first, then the usual places.
pub fn find_cupti(ctx: &Ctx) -> (Option<CuptiCandidate>, Vec<String>) {
    let mut dirs: Vec<String> = ctx
        .env("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    dirs.extend(SEARCH_DIRS.iter().map(|d| d.to_string()));
    for d in &dirs {
        if let Some(c) = candidate_in(ctx, d) {
            return (Some(c), dirs);
        }
    }
    (None, dirs)
}

pub fn cupti_library(ctx: &Ctx) -> Check {
    let (found, searched) = find_cupti(ctx);
    let sources = &[src::CUPTI_MAIN, src::CUDA_DRIVER_TABLE];
    let Some(c) = found else {
        return Check::new("cupti-library", Status::Fail, Affects::Tracing, "no libcupti found")
            .evidence(vec![Evidence::new(searched.join(":"), "(no libcupti.so*)")])
            .explain("CUPTI ships with the CUDA Toolkit, not the driver, and is not added to LD_LIBRARY_PATH for you. Without it nothing can be traced or profiled.")
            .fix([
                "sudo apt-get install cuda-cupti-13-0          # from NVIDIA's CUDA repository; match your toolkit",
                "export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64:$LD_LIBRARY_PATH",
            ])
            .sources(sources);
    };
    let mut evidence = c.evidence.clone();
    let ver = match (c.major, c.minor) {
        (Some(ma), Some(mi)) => format!("{ma}.{mi}"),
        (Some(ma), None) => format!("{ma}.x"),
        _ => "unknown version".into(),
    };
    let Some(drv) = ctx.driver else {
        return Check::new("cupti-library", Status::Warn, Affects::None, format!("{} (CUPTI {ver}); no driver version to pair it with", c.path))
            .evidence(evidence)
            .explain("The driver version is unknown (see the driver check), so the CUPTI/driver pairing cannot be judged.")
            .sources(sources);
    };
    evidence.push(Evidence::new(
        crate::facts::DRIVER_VERSION_FILE,
        drv.to_string(),
    ));
    let Some(major) = c.major else {
        return Check::new("cupti-library", Status::Warn, Affects::None, format!("{}: version unknown", c.path))
            .evidence(evidence)
            .explain("Neither the SONAME nor the file name nor a toolkit version.json gives this libcupti's version; --probe asks cuptiGetVersion.")
            .fix(["cutrace doctor --probe"])
            .sources(sources);
    };
    let drv_major = driver_cuda_major(drv);
    let multi = major > 13 || (major == 13 && c.minor.is_some_and(|m| m >= 3));
    let multi_txt = if multi && drv >= CAPABILITIES_SINCE {
        "Several tracing subscribers can run at once (CUDA 13.3+ with driver r610+; Activity API only)."
    } else {
        "Only one tracing subscriber per process: a second one (torch.profiler, nsys, a CUDA_INJECTION64_PATH tracer) gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; that needs CUDA 13.3+ and driver r610+."
    };
    if drv_major.is_some_and(|dm| major > dm) {
        let need = min_driver_for(major, c.minor)
            .map(|d| d.to_string())
            .unwrap_or_else(|| "a newer driver".into());
        return Check::new("cupti-library", Status::Fail, Affects::Tracing,
            format!("{} is CUPTI {ver}, newer than driver {drv} supports (CUDA {}.x): CUPTI_ERROR_NOT_INITIALIZED", c.path, drv_major.unwrap_or(0)))
            .evidence(evidence)
            .explain(format!(
                "CUPTI follows CUDA's driver compatibility: an older CUPTI works on a newer driver, not the reverse. \
                 CUPTI {ver} needs driver {need} or newer; on driver {drv} every CUPTI call returns \
                 CUPTI_ERROR_NOT_INITIALIZED, and a tracer that ignores it collects nothing. {multi_txt}"))
            .fix([
                format!("# upgrade the driver to {need} or newer, or use the CUPTI of the CUDA {}.x toolkit:", drv_major.unwrap_or(0)),
                format!("export LD_LIBRARY_PATH=/usr/local/cuda-{}.<minor>/extras/CUPTI/lib64:$LD_LIBRARY_PATH", drv_major.unwrap_or(0)),
            ])
            .sources(sources);
    }
    if let (Some(minor), Some(need)) = (c.minor, min_driver_for(major, c.minor)) {
        if drv < need {
            return Check::new("cupti-library", Status::Warn, Affects::None,
                format!("{} is CUPTI {major}.{minor}; its toolkit asks for driver {need}, this is {drv}", c.path))
                .evidence(evidence)
                .explain(format!("Same CUDA major, older driver: CUDA's minor-version compatibility may let it run, but features newer than the driver are missing and may fail with CUPTI_ERROR_NOT_INITIALIZED. {multi_txt}"))
                .fix([format!("# upgrade the driver to {need} or newer")])
                .sources(sources);
        }
    }
    Check::new("cupti-library", Status::Ok, Affects::Tracing, format!("{} (CUPTI {ver}) pairs with driver {drv}", c.path))
        .evidence(evidence)
        .explain(format!("A CUPTI no newer than the driver's CUDA works (\"A profiling tool based on an older version of CUPTI can still operate with a more recent CUDA driver\"). {multi_txt}"))
        .sources(sources)
}
