//! `counter-access` (may this caller read the GPU performance counters?) and `config-drift`
//! (does the running driver carry what the modprobe configuration says?). The rules are the
//! ERR_NVGPUCTRPERM page's
//! (https://developer.nvidia.com/nvidia-development-tools-solutions-ERR_NVGPUCTRPERM-permission-issue-performance-counters) and nv-reg.h's compiled-in default
//! (https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/kernel-open/nvidia/nv-reg.h).

use super::{src, Ctx};
use crate::facts::{
    self, Identity, CAPABILITIES_SINCE, CAP_PERFMON, CAP_PERFMON_SINCE, CAP_SYS_ADMIN,
    DRIVER_PARAMS_FILE, SELF_STATUS_FILE,
};
use crate::report::{Affects, Check, Evidence, Status};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

pub struct Access {
    pub check: Check,
    /// Whether counters are allowed for this caller (None: could not tell).
    pub allowed: Option<bool>,
}

/// The R610+ capabilities named on the ERR_NVGPUCTRPERM page. Their /proc files are read in the
/// layout the MIG user guide documents for nvidia-capabilities (`DeviceFileMinor`,
/// `DeviceFileMode`, node `/dev/nvidia-caps/nvidia-cap<minor>`).
pub const PROFILER_CAPS: [&str; 3] = ["profiler-context", "profiler-device", "trace-device"];

const POLICY: &str = "# policy: keep production nodes restricted; grant counters on a dedicated profiling pool, where serialization and the exclusive counter reservation cost nobody else anything";

/// One nvidia-capability: its proc file, and whether this caller can open its device node.
#[derive(Debug)]
struct CapNode {
    name: &'static str,
    evidence: Vec<Evidence>,
    readable: bool,
}

fn cap_node(ctx: &Ctx, name: &'static str, id: Option<&Identity>) -> Option<CapNode> {
    let proc_file = format!("/proc/driver/nvidia/capabilities/{name}");
    let text = ctx.root.read(&proc_file)?;
    let minor = facts::param(&text, "DeviceFileMinor");
    let proc_mode = facts::param(&text, "DeviceFileMode").and_then(|m| m.parse::<u32>().ok());
    let mut evidence = vec![Evidence::new(
        &proc_file,
        text.lines().map(str::trim).collect::<Vec<_>>().join("; "),
    )];
    let euid = id.map(|i| i.euid);
    let groups: &[u32] = id.map(|i| i.groups.as_slice()).unwrap_or(&[]);
    let root_or_admin = id.is_some_and(|i| i.euid == 0 || i.has_cap(CAP_SYS_ADMIN));
    let mut readable = root_or_admin;
    if let Some(minor) = minor {
        let node = format!("/dev/nvidia-caps/nvidia-cap{minor}");
        match ctx.root.metadata(&node) {
            // A real device node: its owner, group and mode decide.
            Ok(md) if md.file_type().is_char_device() => {
                let mode = md.mode() & 0o777;
                evidence.push(Evidence::new(
                    &node,
                    format!("mode {mode:04o} owner {} group {}", md.uid(), md.gid()),
                ));
                readable |= mode & 0o004 != 0
                    || (Some(md.uid()) == euid && mode & 0o400 != 0)
                    || (groups.contains(&md.gid()) && mode & 0o040 != 0);
            }
            // A fixture tree (or a node not created yet): nvidia-modprobe creates the node
            // root-owned with DeviceFileMode, so only the "other" bits can grant a non-root user.
            Ok(_) | Err(_) => {
                let present = ctx.root.exists(&node);
                evidence.push(Evidence::new(
                    &node,
                    if present {
                        "(present; mode taken from DeviceFileMode)".to_string()
                    } else {
                        "(absent; nvidia-modprobe creates it on first use)".to_string()
                    },
                ));
                if let Some(m) = proc_mode {
                    readable |= m & 0o004 != 0;
                }
            }
        }
    }
    Some(CapNode {
        name,
        evidence,
        readable,
    })
}

fn regkey_fix(ctx: &Ctx) -> Vec<String> {
    let mut v = vec![
        "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee /etc/modprobe.d/nvidia-profiling.conf".to_string(),
    ];
    if ctx.container.inside {
        // The host's distribution is not visible from inside the container.
        v.push("sudo update-initramfs -u -k all     # Debian/Ubuntu host".into());
        v.push("sudo dracut --regenerate-all -f     # Red Hat-like host".into());
    } else {
        v.extend(initramfs_commands(ctx));
    }
    v.push("sudo reboot".into());
    v.push(
        "grep RmProfilingAdminOnly /proc/driver/nvidia/params   # expect: RmProfilingAdminOnly: 0"
            .into(),
    );
    v
}

fn perfmon_fix() -> Vec<String> {
    vec![
        "# or run the profiled program with CAP_PERFMON (driver R565+), e.g. as an ambient capability:".into(),
        "sudo capsh --caps='cap_perfmon,cap_setpcap,cap_setuid,cap_setgid+eip' --keep=1 --user=\"$USER\" --addamb=cap_perfmon -- -c 'ncu ./app'".into(),
    ]
}

/// The `counter-access` check: may this caller read the GPU performance counters (the driver's
/// regkey, the caller's capabilities and, on R610+, the profiler capabilities decide), and how to
/// get access when it is refused.
pub fn counter_access(ctx: &Ctx) -> Access {
    let id = ctx.identity.as_ref();
    let mut evidence = caller_evidence(ctx, id);
    let r610 = ctx.driver.is_some_and(|v| v >= CAPABILITIES_SINCE);
    let caps: Vec<CapNode> = PROFILER_CAPS
        .iter()
        .filter_map(|n| cap_node(ctx, n, id))
        .collect();
    for c in &caps {
        evidence.extend(c.evidence.iter().cloned());
    }
    let sources = &[src::ERR_NVGPUCTRPERM, src::NV_REG_H, src::MIG_CAPS];
    let mk = |status, summary: String| {
        Check::new("counter-access", status, Affects::Counters, summary)
            .evidence(evidence.clone())
            .sources(sources)
    };
    let who = id
        .map(|i| i.describe())
        .unwrap_or_else(|| "this user (identity unreadable)".into());

    if let Some(a) = settled_by_driver(ctx, &mk) {
        return a;
    }
    if let Some(a) = settled_by_caller(ctx, id, &who, &mk) {
        return a;
    }
    if r610 {
        if let Some(a) = granted_by_capability(ctx, &caps, &mk) {
            return a;
        }
    }
    denied(ctx, &who, r610, &mk)
}

/// The evidence every counter-access answer shows: the driver's RmProfilingAdminOnly, this
/// caller's identity and the driver version.
fn caller_evidence(ctx: &Ctx, id: Option<&Identity>) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    match (&ctx.params, ctx.admin_only) {
        (Some(_), Some(v)) => evidence.push(Evidence::new(
            DRIVER_PARAMS_FILE,
            format!("RmProfilingAdminOnly: {v}"),
        )),
        (Some(_), None) => evidence.push(Evidence::new(
            DRIVER_PARAMS_FILE,
            "(no RmProfilingAdminOnly line)",
        )),
        (None, _) => evidence.push(Evidence::absent(DRIVER_PARAMS_FILE)),
    }
    match id {
        Some(i) => evidence.push(Evidence::new(
            SELF_STATUS_FILE,
            format!(
                "Uid: {}; CapEff: {} ({})",
                i.uid_line,
                i.cap_eff_line,
                i.describe()
            ),
        )),
        None => evidence.push(Evidence::absent(SELF_STATUS_FILE)),
    }
    if let Some(v) = ctx.driver {
        evidence.push(Evidence::new(facts::DRIVER_VERSION_FILE, v.to_string()));
    }
    evidence
}

/// The answer when the driver alone decides it: no driver loaded (no counters), or counters
/// open to all users.
fn settled_by_driver(ctx: &Ctx, mk: &impl Fn(Status, String) -> Check) -> Option<Access> {
    if ctx.driver_text.is_none() {
        let c = mk(Status::Fail, "no NVIDIA driver, so no counters".into())
            .explain("Counter access is decided by the nvidia kernel module, which is not loaded (see the driver check).")
            .fix(["# fix the driver check first"]);
        return Some(Access {
            check: c,
            allowed: Some(false),
        });
    }
    if ctx.admin_only == Some(0) {
        let c = mk(Status::Ok, "counters are open to all users (RmProfilingAdminOnly: 0)".into()).explain(
            "The running driver does not restrict the GPU performance counters to admins, so any user can profile. \
             That is the right setting for a dedicated profiling pool; on shared production nodes NVIDIA's default \
             (restricted) is the safer one.",
        );
        return Some(Access {
            check: c,
            allowed: Some(true),
        });
    }
    None
}

/// The answer when the caller's capabilities decide it: CAP_SYS_ADMIN grants access, and
/// CAP_PERFMON does on driver R565+ (and is named as the reason for a refusal on older ones).
fn settled_by_caller(
    ctx: &Ctx,
    id: Option<&Identity>,
    who: &str,
    mk: &impl Fn(Status, String) -> Check,
) -> Option<Access> {
    if id.is_some_and(|i| i.has_cap(CAP_SYS_ADMIN)) {
        let c = mk(Status::Ok, format!("counters are restricted to admins, and this caller is one: {who}"))
            .explain("A process with CAP_SYS_ADMIN may profile whatever RmProfilingAdminOnly says. Programs started by another user will still get ERR_NVGPUCTRPERM / CUPTI_ERROR_INSUFFICIENT_PRIVILEGES.");
        return Some(Access {
            check: c,
            allowed: Some(true),
        });
    }
    if !id.is_some_and(|i| i.has_cap(CAP_PERFMON)) {
        return None;
    }
    match ctx.driver {
        Some(v) if v >= CAP_PERFMON_SINCE => {
            let c = mk(Status::Ok, format!("counters are restricted to admins, and CAP_PERFMON grants access on driver {v} (R565+)"))
                .explain("\"Starting in driver version R565, the CAP_PERFMON capability will also allow access.\" One exception NVIDIA documents: CAP_PERFMON does not work in secure execution mode (a setuid/setgid program) unless profiling within a container.");
            Some(Access {
                check: c,
                allowed: Some(true),
            })
        }
        Some(v) => {
            let mut fix = vec![
                "# CAP_PERFMON needs driver R565 or newer; upgrade the driver, or:".to_string(),
            ];
            fix.extend(regkey_fix(ctx));
            fix.push(POLICY.into());
            let c = mk(Status::Fail, format!("this caller holds CAP_PERFMON, but driver {v} is older than R565, which is the first to honour it"))
                .explain("Counters are restricted to admins (RmProfilingAdminOnly is not 0). CAP_PERFMON only grants counter access from driver R565 on; on this driver only CAP_SYS_ADMIN or the regkey does. Profiling will fail with ERR_NVGPUCTRPERM / CUPTI_ERROR_INSUFFICIENT_PRIVILEGES.")
                .fix(fix);
            Some(Access {
                check: c,
                allowed: Some(false),
            })
        }
        None => None,
    }
}

/// On an R610+ driver, the grant by a profiler capability (other than trace-device) whose device
/// node this caller can open.
fn granted_by_capability(
    ctx: &Ctx,
    caps: &[CapNode],
    mk: &impl Fn(Status, String) -> Check,
) -> Option<Access> {
    let c = caps
        .iter()
        .find(|c| c.name != "trace-device" && c.readable)?;
    let name = c.name;
    let check = mk(Status::Ok, format!("RmProfilingAdminOnly is {} but the {name} capability grants this caller counter access (R610+)",
        ctx.admin_only.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into())))
        .explain("On R610+ drivers the RmProfilingAdminOnly flag \"only reflects the regkey state and does not account for capability-based access grants\". This caller can open the capability's device node, which is the grant. Note that \"Profiling capabilities are granted system-wide and cannot be scoped to individual GPUs.\"");
    Some(Access {
        check,
        allowed: Some(true),
    })
}

/// The answer when nothing grants access: a refusal, or a warning when RmProfilingAdminOnly
/// could not be read.
fn denied(ctx: &Ctx, who: &str, r610: bool, mk: &impl Fn(Status, String) -> Check) -> Access {
    let unknown = ctx.admin_only.is_none();
    let fix = denied_fix(ctx, r610);
    let mut explanation = String::from(
        "The running driver restricts the GPU performance counters to admins, and this caller is not one: counter \
         profiling (ncu, nsys GPU metrics, torch.profiler counters, cutrace doctor --probe) fails with ERR_NVGPUCTRPERM / \
         CUPTI_ERROR_INSUFFICIENT_PRIVILEGES. Tracing is not affected. Admin means CAP_SYS_ADMIN, or CAP_PERFMON on \
         driver R565+. Trust /proc/driver/nvidia/params over the comment in nv-reg.h: the comment says the default is \
         0, the code compiles in 1.",
    );
    if r610 {
        explanation.push_str(
            " On this R610+ driver the flag only reflects the regkey; none of the profiler capabilities found grants this caller access either.",
        );
    }
    if unknown {
        explanation = "RmProfilingAdminOnly could not be read, so whether counters are restricted is unknown; NVIDIA's compiled-in default is 1 (restricted). Run with --probe for CUPTI's real answer.".into();
    }
    let summary = if unknown {
        format!("counter access unknown (no RmProfilingAdminOnly), and {who}")
    } else {
        format!(
            "counters are restricted to admins (RmProfilingAdminOnly: 1) and this caller is {who}"
        )
    };
    let c = mk(if unknown { Status::Warn } else { Status::Fail }, summary)
        .explain(explanation)
        .fix(fix);
    Access {
        check: c,
        allowed: if unknown { None } else { Some(false) },
    }
}

/// The ways to get counter access when none is granted: the regkey, a capability for the
/// profiled program (or the container), and on R610+ a profiler-context grant.
fn denied_fix(ctx: &Ctx, r610: bool) -> Vec<String> {
    let mut fix = Vec::new();
    if ctx.container.inside {
        fix.push(
            "# inside a container only the HOST's setting counts; the host admin runs:".to_string(),
        );
    }
    fix.extend(regkey_fix(ctx));
    if ctx.container.inside {
        fix.push("# or start the container with the capability (as an admin): docker run --cap-add=SYS_ADMIN ...   (driver R565+: --cap-add=PERFMON)".into());
    } else {
        fix.extend(perfmon_fix());
    }
    if r610 {
        fix.push("# or (R610+) grant the profiler-context capability: find its node, then let a group open it".into());
        fix.push("grep DeviceFileMinor /proc/driver/nvidia/capabilities/profiler-context".into());
        fix.push("sudo chgrp profilers /dev/nvidia-caps/nvidia-cap<minor> && sudo chmod 0640 /dev/nvidia-caps/nvidia-cap<minor>".into());
    }
    fix.push(POLICY.into());
    fix
}

/// The initramfs rebuild for the distribution named in /etc/os-release (the ERR_NVGPUCTRPERM page).
pub fn initramfs_commands(ctx: &Ctx) -> Vec<String> {
    let (id, like) = facts::os_ids(ctx.root);
    let all: Vec<&str> = id
        .iter()
        .map(String::as_str)
        .chain(like.iter().map(String::as_str))
        .collect();
    let debian = all.iter().any(|d| matches!(*d, "debian" | "ubuntu"));
    let redhat = all.iter().any(|d| {
        matches!(
            *d,
            "rhel"
                | "fedora"
                | "centos"
                | "rocky"
                | "almalinux"
                | "ol"
                | "amzn"
                | "suse"
                | "opensuse"
                | "sles"
        )
    });
    match (debian, redhat) {
        (true, _) => vec!["sudo update-initramfs -u -k all".into()],
        (false, true) => vec!["sudo dracut --regenerate-all -f".into()],
        _ => vec![
            "sudo update-initramfs -u -k all     # Debian/Ubuntu".into(),
            "sudo dracut --regenerate-all -f     # Red Hat-like".into(),
        ],
    }
}

/// modprobe.d directories, highest priority first: a file name in /etc overrides the same name
/// in /run, which overrides /usr/lib and /lib (modprobe.d(5)).
const MODPROBE_DIRS: [&str; 5] = [
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
];
const REGKEY: &str = "NVreg_RestrictProfilingToAdminUsers";

/// The configured value: (file, value) of the setting that wins, if any.
pub fn configured_regkey(ctx: &Ctx) -> (Option<(String, String)>, Vec<String>) {
    let mut by_name: std::collections::BTreeMap<String, String> = Default::default();
    let mut searched = Vec::new();
    for dir in MODPROBE_DIRS {
        if !ctx.root.exists(dir) {
            continue;
        }
        searched.push(dir.to_string());
        for f in ctx.root.list(dir) {
            if f.ends_with(".conf") && !by_name.contains_key(&f) {
                by_name.insert(f.clone(), format!("{dir}/{f}"));
            }
        }
    }
    // Files are applied in name order; the last value of a repeated parameter wins.
    let mut found = None;
    for path in by_name.values() {
        let text = ctx.root.read(path).unwrap_or_default();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut toks = line.split_whitespace();
            if toks.next() != Some("options") || toks.next() != Some("nvidia") {
                continue;
            }
            for t in toks {
                if let Some(v) = t.strip_prefix(REGKEY).and_then(|r| r.strip_prefix('=')) {
                    found = Some((path.clone(), v.trim_matches('"').to_string()));
                }
            }
        }
    }
    // Options on the kernel command line are applied after the configuration files.
    if let Some(cmdline) = ctx.root.read("/proc/cmdline") {
        for t in cmdline.split_whitespace() {
            if let Some(v) = t
                .strip_prefix("nvidia.")
                .and_then(|r| r.strip_prefix(REGKEY))
                .and_then(|r| r.strip_prefix('='))
            {
                found = Some(("/proc/cmdline".to_string(), v.to_string()));
            }
        }
    }
    (found, searched)
}

pub fn config_drift(ctx: &Ctx) -> Check {
    let (found, searched) = configured_regkey(ctx);
    let running = ctx.admin_only;
    let mut evidence = Vec::new();
    let (id, _) = facts::os_ids(ctx.root);
    let sources = &[src::ERR_NVGPUCTRPERM, src::NV_REG_H];
    let Some((file, value)) = found else {
        evidence.push(Evidence::new(
            if searched.is_empty() {
                "/etc/modprobe.d".to_string()
            } else {
                searched.join(", ")
            },
            format!("(no {REGKEY} set)"),
        ));
        if let Some(r) = running {
            evidence.push(Evidence::new(
                DRIVER_PARAMS_FILE,
                format!("RmProfilingAdminOnly: {r}"),
            ));
        }
        return Check::new("config-drift", Status::Ok, Affects::Counters, "no modprobe setting for the counter restriction; nothing to drift")
            .evidence(evidence)
            .explain("Without a setting the driver uses its compiled-in default, which is 1 (admins only): nv-reg.h's comment says 0, but NV_DEFINE_REG_ENTRY(__NV_RM_PROFILING_ADMIN_ONLY_PARAMETER, 1) is what is compiled.")
            .sources(sources);
    };
    evidence.push(Evidence::new(&file, format!("{REGKEY}={value}")));
    match running {
        Some(r) => evidence.push(Evidence::new(
            DRIVER_PARAMS_FILE,
            format!("RmProfilingAdminOnly: {r}"),
        )),
        None => evidence.push(Evidence::absent(DRIVER_PARAMS_FILE)),
    }
    evidence.push(Evidence::new(
        "/etc/os-release",
        format!("ID={}", id.unwrap_or_else(|| "(unknown)".into())),
    ));
    let configured: Option<u32> = value.parse().ok();
    let Some(r) = running else {
        return Check::new("config-drift", Status::Warn, Affects::None, format!("{file} sets {REGKEY}={value}, but the running value cannot be read"))
            .evidence(evidence)
            .explain("The driver is not loaded or /proc/driver/nvidia/params is hidden, so the configured value cannot be compared with the running one.")
            .sources(sources);
    };
    if configured == Some(r) {
        return Check::new(
            "config-drift",
            Status::Ok,
            Affects::Counters,
            format!("the running driver carries what {file} says ({value})"),
        )
        .evidence(evidence)
        .explain("The configured and the running value agree.")
        .sources(sources);
    }
    let mut fix = initramfs_commands(ctx);
    fix.push("sudo reboot".into());
    fix.push(format!("grep RmProfilingAdminOnly /proc/driver/nvidia/params   # expect: RmProfilingAdminOnly: {value}"));
    if configured == Some(0) && r != 0 {
        Check::new("config-drift", Status::Fail, Affects::Counters, format!("{file} says {REGKEY}=0 but the running driver has RmProfilingAdminOnly: {r}"))
            .evidence(evidence)
            .explain("The .conf file is right but the running module did not get it: the initramfs still carries the old parameters (the nvidia module is loaded from it at boot), or the machine has not been rebooted since the file was written. Counters stay restricted to admins until both are done.")
            .fix(fix)
            .sources(sources)
    } else {
        Check::new("config-drift", Status::Warn, Affects::None, format!("{file} says {REGKEY}={value} but the running driver has RmProfilingAdminOnly: {r}; the next boot will change counter access"))
            .evidence(evidence)
            .explain("The running value differs from the configured one. Today's behaviour follows the running value; after the next reboot (with a rebuilt initramfs) the configured one applies.")
            .fix(fix)
            .sources(sources)
    }
}
