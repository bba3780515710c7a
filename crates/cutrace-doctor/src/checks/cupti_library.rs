//! `cupti-library`: which libcupti `cutrace record` would load (found with record's own search,
//! `crate::cupti_search`), its version, and whether it pairs with the running driver, decided by
//! record's own rule (`cutrace_cupti::version::check_pairing`). "Attempting to use CUPTI calls
//! with an incompatible CUDA driver version will result in a CUPTI_ERROR_NOT_INITIALIZED error
//! code" (CUPTI Usage, Compatibility).

use super::{src, Ctx};
use crate::cupti_search::Search;
use crate::elf::BuildString;
use crate::facts::{DriverVersion, CAPABILITIES_SINCE};
use crate::report::{Affects, Check, Evidence, Status};
use cutrace_cupti::version::{check_pairing, Pairing};

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

/// The newest CUDA release a driver supports, as `cuDriverGetVersion` spells it (13000 for
/// 13.0), from the minimum-driver table; `None` for a driver older than the table.
pub fn driver_cuda_version(v: DriverVersion) -> Option<u32> {
    MIN_DRIVER
        .iter()
        .filter(|(_, min)| v >= *min)
        .map(|((major, minor), _)| major * 1000 + minor * 10)
        .max()
}

/// A size in bytes, in words: `16 GiB`, `4.0 MiB` (one decimal when not exact), `812 bytes`.
fn size(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if n >= unit {
            // (Units are powers of two.)
            return if n & (unit - 1) == 0 {
                format!("{} {name}", n / unit)
            } else {
                format!("{:.1} {name}", n as f64 / unit as f64)
            };
        }
    }
    format!("{n} bytes")
}

/// What is known of one libcupti file without loading it.
fn describe(ctx: &Ctx, path: &str) -> CuptiCandidate {
    let dir = path.rsplit_once('/').map_or("/", |(d, _)| d);
    let file = path.rsplit('/').next().unwrap_or(path);
    let mut names: Vec<String> = ctx
        .root
        .list(dir)
        .into_iter()
        .filter(|n| n.starts_with("libcupti.so"))
        .collect();
    names.sort();
    let mut evidence = vec![Evidence::new(dir, names.join(", "))];
    let host_path = ctx.root.path(path);
    let mut major = None;
    if let Some(lib) = crate::elf::inspect(&host_path) {
        if let Some(so) = &lib.soname {
            evidence.push(Evidence::new(path, format!("SONAME {so}")));
            major = parse_major_from_name(so);
        }
        match lib.build {
            BuildString::Found(rel) => evidence.push(Evidence::new(path, rel)),
            BuildString::NotInRead { read, len } => evidence.push(Evidence::new(
                path,
                format!(
                    "(no nvcc build string in the first {} of its {}: the doctor reads at most {} of a file)",
                    size(read),
                    size(len),
                    size(crate::elf::MAX_READ)
                ),
            )),
            BuildString::Absent => {}
        }
    }
    let major = major.or_else(|| parse_major_from_name(file));
    let mut minor = None;
    if let Some((f, ma, mi)) = version_json(ctx, dir) {
        if major.is_none() || major == Some(ma) {
            evidence.push(Evidence::new(f, format!("cuda_cupti {ma}.{mi}")));
            minor = Some(mi);
        }
    }
    CuptiCandidate {
        path: path.to_string(),
        major,
        minor,
        evidence,
    }
}

/// The libcupti `cutrace record` would load, and the places its search looked at.
pub fn find_cupti(ctx: &Ctx) -> (Option<CuptiCandidate>, Vec<String>) {
    find_with(ctx, &Search::new(ctx.root))
}

fn find_with(ctx: &Ctx, search: &Search) -> (Option<CuptiCandidate>, Vec<String>) {
    let searched = search.places_searched();
    let found = search.record_would_load().map(|p| describe(ctx, &p.path));
    (found, searched)
}

pub fn cupti_library(ctx: &Ctx) -> Check {
    // The loader's directories are read once, for every step below.
    let search = Search::new(ctx.root);
    let mut check = judge(ctx, &search);
    // A search cut short says so: what it did not look at may hold a libcupti.
    check.evidence.extend(
        search
            .loader
            .left_out
            .iter()
            .map(|why| Evidence::new("/etc/ld.so.conf.d", why.clone())),
    );
    check
}

fn judge(ctx: &Ctx, search: &Search) -> Check {
    let (found, searched) = find_with(ctx, search);
    let sources = &[src::CUPTI_MAIN, src::CUDA_DRIVER_TABLE];
    let Some(c) = found else {
        let others = search.other_sonames();
        if let Some(other) = others.first() {
            // Another CUDA major's CUPTI: other tools trace with it, record cannot.
            let c = describe(ctx, other);
            let ver = match (c.major, c.minor) {
                (Some(ma), Some(mi)) => format!("{ma}.{mi}"),
                (Some(ma), None) => format!("{ma}.x"),
                _ => "unknown version".into(),
            };
            let mut evidence = c.evidence;
            evidence.push(Evidence::new(
                searched.join(":"),
                format!("(no {})", cutrace_cupti::locate::CUPTI_SONAME),
            ));
            return Check::new("cupti-library", Status::Warn, Affects::None, format!("{other} (CUPTI {ver}) is the only libcupti; cutrace record needs libcupti.so.13"))
                .evidence(evidence)
                .explain(concat!("CUPTI tools built for this CUPTI can trace with it, but cutrace decodes CUPTI 13 records and looks only for libcupti.so.13 (", cutrace_settings::cupti_lib_var!(), ", CUDA_HOME, /usr/local/cuda, the loader's path). CUDA 13 needs driver 580.65.06 or newer."))
                .fix([
                    "sudo apt-get install cuda-cupti-13-0          # from NVIDIA's CUDA repository, with a driver for CUDA 13",
                    concat!("export ", cutrace_settings::cupti_lib_var!(), "=/path/to/libcupti.so.13"),
                ])
                .sources(sources);
        }
        return Check::new("cupti-library", Status::Fail, Affects::Tracing, "no libcupti found")
            .evidence(vec![Evidence::new(searched.join(":"), format!("(no {})", cutrace_cupti::locate::CUPTI_SONAME))])
            .explain("CUPTI ships with the CUDA Toolkit, not the driver, and is not added to LD_LIBRARY_PATH for you. Without it nothing can be traced or profiled.")
            .fix([
                "sudo apt-get install cuda-cupti-13-0          # from NVIDIA's CUDA repository; match your toolkit",
                "export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64:$LD_LIBRARY_PATH",
                concat!("export ", cutrace_settings::cupti_lib_var!(), "=/path/to/libcupti.so.13      # or name it for cutrace alone"),
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
    // record's own rule, on what can be known without loading anything: cuptiGetVersion spells
    // CUDA 13.0 as 130000+, cuDriverGetVersion as 13000.
    let cupti_version = major * 10_000 + c.minor.unwrap_or(0) * 100;
    let pairing = check_pairing(cupti_version, driver_cuda_version(drv), &c.path);
    let newer_than_driver = drv_major.is_some_and(|dm| major > dm);
    match pairing {
        Pairing::Refuse(_) if newer_than_driver => {
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
        Pairing::Refuse(why) => {
            return Check::new(
                "cupti-library",
                Status::Fail,
                Affects::Tracing,
                format!("{} is CUPTI {ver}: cutrace record refuses it", c.path),
            )
            .evidence(evidence)
            .explain(why)
            .fix([concat!(
                "export ",
                cutrace_settings::cupti_lib_var!(),
                "=/path/to/libcupti.so.13   # a CUDA 13.x CUPTI"
            )])
            .sources(sources);
        }
        Pairing::Warn(_) => {
            let need = min_driver_for(major, c.minor)
                .map(|d| d.to_string())
                .unwrap_or_else(|| "a newer driver".into());
            let minor = c.minor.unwrap_or(0);
            return Check::new("cupti-library", Status::Warn, Affects::None,
                format!("{} is CUPTI {major}.{minor}; its toolkit asks for driver {need}, this is {drv}", c.path))
                .evidence(evidence)
                .explain(format!("Same CUDA major, older driver: CUDA's minor-version compatibility may let it run, but features newer than the driver are missing and may fail with CUPTI_ERROR_NOT_INITIALIZED. {multi_txt}"))
                .fix([format!("# upgrade the driver to {need} or newer")])
                .sources(sources);
        }
        Pairing::Ok => {}
    }
    Check::new("cupti-library", Status::Ok, Affects::Tracing, format!("{} (CUPTI {ver}) pairs with driver {drv}", c.path))
        .evidence(evidence)
        .explain(format!("A CUPTI no newer than the driver's CUDA works (\"A profiling tool based on an older version of CUPTI can still operate with a more recent CUDA driver\"). {multi_txt}"))
        .sources(sources)
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_in_words() {
        assert_eq!(size(4 << 20), "4 MiB");
        assert_eq!(size((4 << 20) - 140), "4.0 MiB");
        assert_eq!(size(16 << 30), "16 GiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(812), "812 bytes");
    }
}
