//! Parsers for what the checks read: the driver's version and parameters, the caller's identity,
//! the process table. Each is a pure function of a `Root`, so fixture trees drive every path.

use crate::root::Root;

pub const DRIVER_VERSION_FILE: &str = "/proc/driver/nvidia/version";
pub const DRIVER_PARAMS_FILE: &str = "/proc/driver/nvidia/params";
pub const SELF_STATUS_FILE: &str = "/proc/self/status";

/// The driver version and its one parser live beside the CUPTI/driver pairing rules, so the
/// doctor and `record` read `/proc/driver/nvidia/version` the same way.
pub use cutrace_cupti::version::{parse_driver_version, DriverVersion};

/// Counter access restricted to admins on Linux since 418.43 (the ERR_NVGPUCTRPERM page, docs/DOCTOR.md).
pub const RESTRICTION_SINCE: DriverVersion = DriverVersion::new(418, 43, 0);
/// "Starting in driver version R565, the CAP_PERFMON capability will also allow access." (ref 6)
pub const CAP_PERFMON_SINCE: DriverVersion = DriverVersion::new(565, 0, 0);
/// R610+: profiler-context / profiler-device / trace-device capabilities; the flag in
/// /proc/driver/nvidia/params "only reflects the regkey state" (ref 6).
pub const CAPABILITIES_SINCE: DriverVersion = DriverVersion::new(610, 0, 0);

/// A `Key: value` from /proc/driver/nvidia/params (`RmProfilingAdminOnly: 1`).
pub fn param(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// Linux capability bit numbers (include/uapi/linux/capability.h).
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;

/// Who is asking: read from /proc/self/status under the root, so a fixture can be "an
/// unprivileged user holding CAP_PERFMON".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub euid: u32,
    pub groups: Vec<u32>,
    pub cap_eff: u64,
    /// The raw lines, for evidence.
    pub uid_line: String,
    pub cap_eff_line: String,
}

impl Identity {
    pub fn has_cap(&self, bit: u32) -> bool {
        self.cap_eff & (1u64 << bit) != 0
    }

    pub fn parse(status: &str) -> Option<Identity> {
        let field = |name: &str| {
            status.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k == name).then(|| v.trim().to_string())
            })
        };
        let uid_line = field("Uid")?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        // Uid: real effective saved fs
        let euid = uid_line.split_whitespace().nth(1)?.parse().ok()?;
        let cap_eff_line = field("CapEff").unwrap_or_default();
        let cap_eff = u64::from_str_radix(cap_eff_line.trim(), 16).unwrap_or(0);
        let groups = field("Groups")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
        Some(Identity {
            euid,
            groups,
            cap_eff,
            uid_line,
            cap_eff_line,
        })
    }

    pub fn describe(&self) -> String {
        let mut caps = Vec::new();
        if self.has_cap(CAP_SYS_ADMIN) {
            caps.push("CAP_SYS_ADMIN");
        }
        if self.has_cap(CAP_PERFMON) {
            caps.push("CAP_PERFMON");
        }
        let who = if self.euid == 0 {
            "root (uid 0)".to_string()
        } else {
            format!("uid {}", self.euid)
        };
        if caps.is_empty() {
            format!("{who}, holding neither CAP_SYS_ADMIN nor CAP_PERFMON")
        } else {
            format!("{who}, holding {}", caps.join(" and "))
        }
    }
}

/// One process from /proc/<pid>: its `comm` and its argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub argv: Vec<String>,
}

impl Process {
    /// The program name: argv[0]'s file name, else comm (truncated to 15 bytes by the kernel).
    pub fn name(&self) -> &str {
        self.argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .filter(|a| !a.is_empty())
            .unwrap_or(&self.comm)
    }

    pub fn cmdline(&self) -> String {
        if self.argv.is_empty() {
            format!("[{}]", self.comm)
        } else {
            self.argv.join(" ")
        }
    }

    /// `name` matched against argv[0]'s file name or against comm, which the kernel truncates to
    /// 15 characters (TASK_COMM_LEN 16 with the NUL): `nvidia-cuda-mps-control` shows up as
    /// `nvidia-cuda-mps`.
    pub fn is(&self, name: &str) -> bool {
        self.name() == name || (!self.comm.is_empty() && self.comm == name[..name.len().min(15)])
    }
}

/// The process table under `<root>/proc`, skipping our own process.
pub fn processes(root: &Root) -> Vec<Process> {
    let own = std::fs::read_link(root.path("/proc/self"))
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()));
    let mut out = Vec::new();
    for name in root.list("/proc") {
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        if Some(pid) == own {
            continue;
        }
        let comm = root
            .read(&format!("/proc/{pid}/comm"))
            .map(|s| s.trim_end_matches('\n').to_string())
            .unwrap_or_default();
        let argv: Vec<String> = root
            .read_bytes(&format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if comm.is_empty() && argv.is_empty() {
            continue;
        }
        out.push(Process { pid, comm, argv });
    }
    out
}

/// `ID` and `ID_LIKE` from /etc/os-release, lower-cased.
pub fn os_ids(root: &Root) -> (Option<String>, Vec<String>) {
    let text = root
        .read("/etc/os-release")
        .or_else(|| root.read("/usr/lib/os-release"))
        .unwrap_or_default();
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_ascii_lowercase())
        })
    };
    let id = get("ID");
    let like = get("ID_LIKE")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (id, like)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_open_and_proprietary_version_lines() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Fri\nGCC version:  gcc version 12\n";
        assert_eq!(
            parse_driver_version(open),
            Some(DriverVersion::new(580, 159, 4))
        );
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  418.40  Fri Feb  1 2019\n";
        let v = parse_driver_version(prop).expect("version");
        assert_eq!(v, DriverVersion::new(418, 40, 0));
        assert!(v < RESTRICTION_SINCE);
        assert_eq!(v.to_string(), "418.40");
        assert_eq!(parse_driver_version("garbage"), None);
    }

    #[test]
    fn identity_reads_effective_uid_and_caps() {
        let s = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t27 44 1000\nCapEff:\t0000004000000000\n";
        let id = Identity::parse(s).expect("identity");
        assert_eq!(id.euid, 1000);
        assert_eq!(id.groups, vec![27, 44, 1000]);
        assert!(id.has_cap(CAP_PERFMON));
        assert!(!id.has_cap(CAP_SYS_ADMIN));
    }

    #[test]
    fn comm_truncation_is_matched() {
        let p = Process {
            pid: 7,
            comm: "nvidia-cuda-mps".into(),
            argv: vec![],
        };
        assert!(p.is("nvidia-cuda-mps-control"));
        assert!(!p.is("nv-hostengine"));
    }
}
