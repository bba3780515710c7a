//! Pairing the loaded CUPTI with the driver, and with the record layouts this build decodes.

/// The CUDA version a `cuptiGetVersion` value belongs to, as (major, minor); CUPTI 13 reports
/// `MMmmpp` (130001 = CUDA 13.0). Older CUPTIs report small API numbers (CUDA 12.x: ≤ 28).
pub fn cupti_cuda_version(v: u32) -> Option<(u32, u32)> {
    (v >= 100_000).then_some((v / 10_000, (v / 100) % 100))
}

/// A `cuDriverGetVersion` value (13000 = CUDA 13.0) as (major, minor).
pub fn driver_cuda_version(v: u32) -> (u32, u32) {
    (v / 1000, (v % 1000) / 10)
}

/// What to do with a CUPTI/driver pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pairing {
    Ok,
    /// Trace, but say this (it explains a later CUPTI_ERROR_NOT_INITIALIZED).
    Warn(String),
    /// Do not trace; the program runs untraced. The text names both versions and the fix.
    Refuse(String),
}

/// Decides whether a CUPTI (`cuptiGetVersion`) can trace under a driver (`cuDriverGetVersion`).
pub fn check_pairing(cupti: u32, driver: Option<u32>, cupti_path: &str) -> Pairing {
    let Some((cmaj, cmin)) = cupti_cuda_version(cupti) else {
        return Pairing::Refuse(format!(
            "{cupti_path} is a CUPTI older than CUDA 13 (cuptiGetVersion = {cupti}); this cutrace \
             decodes CUPTI 13 records. Fix: point CUTRACE_CUPTI_LIB at a CUDA 13.x libcupti.so.13"
        ));
    };
    if cmaj != 13 {
        return Pairing::Refuse(format!(
            "{cupti_path} is CUPTI for CUDA {cmaj}.{cmin} (cuptiGetVersion = {cupti}); this cutrace \
             knows CUPTI 13 record layouts only. Fix: point CUTRACE_CUPTI_LIB at a CUDA 13.x \
             libcupti.so.13, or use a cutrace built for CUDA {cmaj}"
        ));
    }
    let Some(d) = driver else {
        return Pairing::Warn(format!(
            "could not read the driver's CUDA version; CUPTI is {cmaj}.{cmin} ({cupti_path})"
        ));
    };
    let (dmaj, dmin) = driver_cuda_version(d);
    if dmaj < cmaj {
        return Pairing::Refuse(format!(
            "CUPTI {cmaj}.{cmin} ({cupti_path}) is newer than the driver, which supports CUDA \
             {dmaj}.{dmin} (cuDriverGetVersion = {d}); CUPTI would fail with \
             CUPTI_ERROR_NOT_INITIALIZED. Fix: install a driver for CUDA {cmaj}.x (r580 or \
             newer), or set CUTRACE_CUPTI_LIB to the libcupti of a CUDA {dmaj}.x toolkit"
        ));
    }
    if dmaj == cmaj && dmin < cmin {
        return Pairing::Warn(format!(
            "CUPTI {cmaj}.{cmin} is newer than the driver's CUDA {dmaj}.{dmin}; if CUPTI reports \
             CUPTI_ERROR_NOT_INITIALIZED, use the CUDA {dmaj}.{dmin} toolkit's libcupti"
        ));
    }
    Pairing::Ok
}

/// The kernel module version from `/proc/driver/nvidia/version` text (`580.159.04`).
pub fn parse_kernel_module_version(text: &str) -> Option<String> {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  …" or, for the open modules,
    // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build …".
    let line = text.lines().find(|l| l.contains("Kernel Module"))?;
    let after = line.split("Kernel Module").nth(1)?;
    after
        .split_whitespace()
        .find(|v| {
            v.contains('.')
                && v.chars().next().is_some_and(|c| c.is_ascii_digit())
                && v.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairing_rules() {
        assert_eq!(check_pairing(130001, Some(13000), "c"), Pairing::Ok);
        assert_eq!(check_pairing(130001, Some(13020), "c"), Pairing::Ok);
        assert!(matches!(
            check_pairing(130202, Some(13000), "c"),
            Pairing::Warn(_)
        ));
        let Pairing::Refuse(m) = check_pairing(130001, Some(12080), "c") else {
            panic!()
        };
        assert!(
            m.contains("CUDA 12.8") && m.contains("CUPTI 13.0") && m.contains("Fix"),
            "{m}"
        );
        assert!(matches!(
            check_pairing(24, Some(13000), "c"),
            Pairing::Refuse(_)
        ));
        assert!(matches!(
            check_pairing(140001, Some(14000), "c"),
            Pairing::Refuse(_)
        ));
        assert!(matches!(check_pairing(130001, None, "c"), Pairing::Warn(_)));
    }

    #[test]
    fn kernel_module_version() {
        let t = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version:";
        assert_eq!(
            parse_kernel_module_version(t).as_deref(),
            Some("580.159.04")
        );
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Oct  2 2025";
        assert_eq!(
            parse_kernel_module_version(open).as_deref(),
            Some("580.159.04")
        );
        assert_eq!(parse_kernel_module_version("nothing"), None);
    }
}
