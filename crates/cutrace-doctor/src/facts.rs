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

/// At most this much of one `/proc/PID/cmdline` is read (64 KiB). The kernel shows the whole
/// argument area, which may be megabytes; the checks need the program name and its first
/// arguments.
pub const CMDLINE_READ_MAX: u64 = 64 << 10;
/// Arguments kept of one command line, at most; the rest are marked as left out.
pub const ARGS_KEPT_MAX: usize = 32;
/// Bytes kept of one command line's arguments, at most (argv[0] included).
pub const ARGV_BYTES_KEPT_MAX: usize = 2048;
/// At most this much of one `/proc/PID/comm` is read and kept (the kernel's is 15 bytes and a
/// newline).
pub const COMM_READ_MAX: u64 = 64;
/// Processes examined at most, the lowest pids first; the others are counted and said to be
/// left out. With the bounds above, what is kept of them stays under about 60 MB, however many
/// processes there are and whatever their files hold.
pub const PROCESSES_MAX: usize = 16384;

/// One process from /proc/<pid>: its `comm` and its argv, bounded ([`ARGS_KEPT_MAX`],
/// [`ARGV_BYTES_KEPT_MAX`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub argv: Vec<String>,
    /// Arguments or bytes of the command line were left out (it was longer than what is kept).
    pub argv_cut: bool,
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

    /// The command line as kept; a cut one ends in `[…]`.
    pub fn cmdline(&self) -> String {
        if self.argv.is_empty() {
            format!("[{}]", self.comm)
        } else if self.argv_cut {
            format!("{} […]", self.argv.join(" "))
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

/// The arguments of a `/proc/PID/cmdline` (NUL-separated), at most [`ARGS_KEPT_MAX`] of them and
/// [`ARGV_BYTES_KEPT_MAX`] bytes in all (an argument over the budget is cut at a character
/// boundary); and whether anything was left out.
pub fn parse_cmdline(raw: &[u8]) -> (Vec<String>, bool) {
    let mut argv = Vec::new();
    let mut left = ARGV_BYTES_KEPT_MAX;
    for a in raw.split(|&c| c == 0).filter(|a| !a.is_empty()) {
        if argv.len() == ARGS_KEPT_MAX || left == 0 {
            return (argv, true);
        }
        let taken = a.len().min(left);
        let mut arg = String::from_utf8_lossy(&a[..taken]).into_owned();
        // Invalid bytes become U+FFFD, three bytes each: the text may outgrow the budget.
        let mut shortened = taken < a.len();
        if arg.len() > left {
            let mut end = left;
            while !arg.is_char_boundary(end) {
                end -= 1;
            }
            arg.truncate(end);
            shortened = true;
        }
        left -= arg.len();
        argv.push(arg);
        if shortened {
            return (argv, true);
        }
    }
    (argv, false)
}

/// The process table under `<root>/proc`, skipping our own process: at most [`PROCESSES_MAX`]
/// processes (the lowest pids), each with a bounded command line.
#[derive(Debug, Clone, Default)]
pub struct Processes {
    pub list: Vec<Process>,
    /// Process directories not examined because of [`PROCESSES_MAX`].
    pub left_out: usize,
}

/// The process table under `<root>/proc` (see [`Processes`]).
pub fn processes(root: &Root) -> Processes {
    processes_within(root, PROCESSES_MAX)
}

/// [`processes`], examining at most `max` processes.
fn processes_within(root: &Root, max: usize) -> Processes {
    let own = std::fs::read_link(root.path("/proc/self"))
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()));
    // The lowest `max` pids, kept in a max-heap while the directory is listed: memory stays
    // bounded however many entries /proc has.
    let mut lowest: std::collections::BinaryHeap<u32> = std::collections::BinaryHeap::new();
    let mut left_out = 0usize;
    if let Ok(entries) = std::fs::read_dir(root.path("/proc")) {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if Some(pid) == own {
                continue;
            }
            lowest.push(pid);
            if lowest.len() > max {
                lowest.pop();
                left_out += 1;
            }
        }
    }
    let pids = lowest.into_sorted_vec();
    let mut list = Vec::new();
    for &pid in &pids {
        let comm = root
            .read_bytes_at_most(&format!("/proc/{pid}/comm"), COMM_READ_MAX)
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .trim_end_matches('\n')
                    .to_string()
            })
            .unwrap_or_default();
        let (argv, argv_cut) = root
            .read_bytes_at_most(&format!("/proc/{pid}/cmdline"), CMDLINE_READ_MAX)
            .map(|b| {
                let (argv, cut) = parse_cmdline(&b);
                // Read up to the cap: there may be more than was read.
                (argv, cut || b.len() as u64 >= CMDLINE_READ_MAX)
            })
            .unwrap_or_default();
        if comm.is_empty() && argv.is_empty() {
            continue;
        }
        list.push(Process {
            pid,
            comm,
            argv,
            argv_cut,
        });
    }
    Processes { list, left_out }
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
    fn command_lines_are_kept_bounded_and_marked_when_cut() {
        assert_eq!(
            parse_cmdline(b"nv-hostengine\0-n\0\0"),
            (vec!["nv-hostengine".to_string(), "-n".to_string()], false)
        );
        // Many arguments: the first ARGS_KEPT_MAX.
        let many = b"a\0".repeat(100_000);
        let (argv, cut) = parse_cmdline(&many);
        assert_eq!((argv.len(), cut), (ARGS_KEPT_MAX, true));
        // One long argument: cut at the byte budget.
        let long = [b"/bin/x\0".as_slice(), &[b'y'; 10_000]].concat();
        let (argv, cut) = parse_cmdline(&long);
        assert!(cut);
        assert_eq!(
            argv.iter().map(String::len).sum::<usize>(),
            ARGV_BYTES_KEPT_MAX
        );
        // Invalid bytes grow threefold as U+FFFD: still within the budget, on a char boundary.
        let (argv, cut) = parse_cmdline(&[0xffu8; 5000]);
        assert!(cut);
        assert!(argv[0].len() <= ARGV_BYTES_KEPT_MAX, "{}", argv[0].len());
        let p = Process {
            pid: 1,
            comm: "x".into(),
            argv,
            argv_cut: cut,
        };
        assert!(p.cmdline().ends_with(" […]"));
    }

    /// Past the cap, the lowest pids are examined and the others counted.
    #[test]
    fn processes_past_the_cap_are_counted_not_examined() {
        struct Scratch(std::path::PathBuf);
        impl Drop for Scratch {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let s = Scratch(
            std::env::temp_dir().join(format!("cutrace-doctor-facts-procs-{}", std::process::id())),
        );
        let _ = std::fs::remove_dir_all(&s.0);
        for pid in [30, 7, 100, 12, 9, 1000, 8] {
            let d = s.0.join(format!("proc/{pid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), format!("p{pid}\n")).unwrap();
        }
        std::fs::create_dir_all(s.0.join("proc/self")).unwrap();
        let t = processes_within(&Root::new(&s.0), 4);
        let pids: Vec<u32> = t.list.iter().map(|p| p.pid).collect();
        assert_eq!((pids, t.left_out), (vec![7, 8, 9, 12], 3));
        assert_eq!(t.list[0].comm, "p7");
    }

    #[test]
    fn comm_truncation_is_matched() {
        let p = Process {
            pid: 7,
            comm: "nvidia-cuda-mps".into(),
            argv: vec![],
            argv_cut: false,
        };
        assert!(p.is("nvidia-cuda-mps-control"));
        assert!(!p.is("nv-hostengine"));
    }
}
