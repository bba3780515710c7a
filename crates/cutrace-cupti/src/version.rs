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
             decodes CUPTI 13 records. Fix: point {} at a CUDA 13.x libcupti.so.13",
            cutrace_settings::var::CUPTI_LIB
        ));
    };
    if cmaj != 13 {
        return Pairing::Refuse(format!(
            "{cupti_path} is CUPTI for CUDA {cmaj}.{cmin} (cuptiGetVersion = {cupti}); this cutrace \
             knows CUPTI 13 record layouts only. Fix: point {} at a CUDA 13.x libcupti.so.13, or \
             use a cutrace built for CUDA {cmaj}",
            cutrace_settings::var::CUPTI_LIB
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
             newer), or set {} to the libcupti of a CUDA {dmaj}.x toolkit",
            cutrace_settings::var::CUPTI_LIB
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

/// A Linux driver (kernel module) version such as 580.159.04 (the third part is absent on some
/// branches). Ordered by (major, minor, patch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl DriverVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        DriverVersion {
            major,
            minor,
            patch,
        }
    }

    /// `580.159.04`, `570.86`.
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(DriverVersion::new(major, minor, patch))
    }
}

impl std::fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:02}", self.major, self.minor)?;
        if self.patch != 0 {
            write!(f, ".{:02}", self.patch)?;
        }
        Ok(())
    }
}

/// The version token of `/proc/driver/nvidia/version` text, as written there (`580.159.04`):
/// on the `NVRM version:` line, the first token that parses as a [`DriverVersion`].
/// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  …" or, for the open modules,
/// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build …".
/// The one parser of that file: the doctor and the trace metadata both use it.
pub fn driver_version_token(text: &str) -> Option<&str> {
    let line = text.lines().find(|l| l.starts_with("NVRM"))?;
    line.split_whitespace().find(|tok| {
        tok.chars().next().is_some_and(|c| c.is_ascii_digit())
            && tok.contains('.')
            && DriverVersion::parse(tok).is_some()
    })
}

/// The driver version from `/proc/driver/nvidia/version` text.
pub fn parse_driver_version(text: &str) -> Option<DriverVersion> {
    driver_version_token(text).and_then(DriverVersion::parse)
}

/// The kernel module version from `/proc/driver/nvidia/version` text, as written there.
pub fn parse_kernel_module_version(text: &str) -> Option<String> {
    driver_version_token(text).map(str::to_owned)
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
        assert_eq!(
            parse_driver_version(open),
            Some(DriverVersion::new(580, 159, 4))
        );
        assert!(DriverVersion::new(570, 86, 15) < DriverVersion::new(580, 65, 6));
        assert_eq!(DriverVersion::new(580, 65, 6).to_string(), "580.65.06");
        assert_eq!(DriverVersion::parse("1.2.3.4"), None);
    }
}
