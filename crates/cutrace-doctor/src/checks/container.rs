//! `container`: is this a container? Then the counter setting that matters is the host's, and
//! the container's capabilities (`--cap-add`) are the other lever (ERR_NVGPUCTRPERM page).

use super::{src, Ctx};
use crate::facts::{CAP_PERFMON, CAP_SYS_ADMIN, SELF_STATUS_FILE};
use crate::report::{Affects, Check, Evidence, Status};
use crate::root::Root;

#[derive(Debug, Clone, Default)]
pub struct ContainerInfo {
    pub inside: bool,
    /// Docker, Podman, Kubernetes, ... when a signal names it.
    pub runtime: Option<&'static str>,
    pub evidence: Vec<Evidence>,
}

const CGROUP_MARKERS: [(&str, &str); 6] = [
    ("kubepods", "Kubernetes"),
    ("docker", "Docker"),
    ("libpod", "Podman"),
    ("containerd", "containerd"),
    ("crio", "CRI-O"),
    ("lxc", "LXC"),
];

impl ContainerInfo {
    pub fn detect(root: &Root) -> ContainerInfo {
        let mut info = ContainerInfo::default();
        let hit = |info: &mut ContainerInfo, rt: &'static str, ev: Evidence| {
            info.inside = true;
            info.runtime.get_or_insert(rt);
            info.evidence.push(ev);
        };
        if root.exists("/.dockerenv") {
            hit(
                &mut info,
                "Docker",
                Evidence::new("/.dockerenv", "(present)"),
            );
        }
        if root.exists("/run/.containerenv") {
            hit(
                &mut info,
                "Podman",
                Evidence::new("/run/.containerenv", "(present)"),
            );
        }
        if root.exists("/var/run/secrets/kubernetes.io/serviceaccount") {
            hit(
                &mut info,
                "Kubernetes",
                Evidence::new("/var/run/secrets/kubernetes.io/serviceaccount", "(present)"),
            );
        }
        if let Some(cg) = root.read("/proc/1/cgroup") {
            if let Some((line, rt)) = cg.lines().find_map(|l| {
                CGROUP_MARKERS
                    .iter()
                    .find(|(m, _)| l.contains(m))
                    .map(|(_, rt)| (l, *rt))
            }) {
                hit(&mut info, rt, Evidence::new("/proc/1/cgroup", line.trim()));
            }
        }
        if let Some(env) = root.read_bytes("/proc/1/environ") {
            for kv in env.split(|&b| b == 0) {
                if let Some(v) = kv.strip_prefix(b"container=") {
                    let v = String::from_utf8_lossy(v).into_owned();
                    hit(
                        &mut info,
                        "container",
                        Evidence::new("/proc/1/environ", format!("container={v}")),
                    );
                }
            }
        }
        info
    }
}

pub fn container(ctx: &Ctx, counters_allowed: Option<bool>) -> Check {
    let c = &ctx.container;
    let sources = &[src::ERR_NVGPUCTRPERM];
    if !c.inside {
        return Check::new(
            "container",
            Status::Ok,
            Affects::Counters,
            "not inside a container",
        )
        .evidence(vec![Evidence::new(
            "/.dockerenv, /run/.containerenv, /proc/1/cgroup, /proc/1/environ",
            "(no container marker)",
        )])
        .explain("No container marker was found, so the settings read here are this machine's own.")
        .sources(sources);
    }
    let rt = c.runtime.unwrap_or("container");
    let mut evidence = c.evidence.clone();
    let id = ctx.identity.as_ref();
    if let Some(i) = id {
        evidence.push(Evidence::new(
            SELF_STATUS_FILE,
            format!("CapEff: {} ({})", i.cap_eff_line, i.describe()),
        ));
    }
    let explanation = format!(
        "This is a {rt} container. The GPU counter restriction is the host kernel module's: \"When profiling within a \
         container, access must be enabled on the host, or the container must be started with the appropriate \
         permissions by passing --cap-add=SYS_ADMIN as an admin user.\" Nothing done inside the container (a .conf \
         file, a reboot of the container) changes it. Root inside a container without CAP_SYS_ADMIN is not an admin \
         to the driver."
    );
    // Only a permission denial is the container's business; no driver at all is the driver check's.
    if counters_allowed == Some(false) && ctx.driver_text.is_some() {
        let sys_admin = id.is_some_and(|i| i.has_cap(CAP_SYS_ADMIN));
        let perfmon = id.is_some_and(|i| i.has_cap(CAP_PERFMON));
        return Check::new("container", Status::Fail, Affects::Counters,
            format!("inside a {rt} container without {}; counters are restricted on the host", if sys_admin { "a usable capability" } else if perfmon { "CAP_SYS_ADMIN (CAP_PERFMON needs R565+)" } else { "CAP_SYS_ADMIN or CAP_PERFMON" }))
            .evidence(evidence)
            .explain(explanation)
            .fix([
                "# ask the host admin (only the host's setting counts):".to_string(),
                "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee /etc/modprobe.d/nvidia-profiling.conf   # on the host, then rebuild its initramfs and reboot".to_string(),
                "# or restart this container with the capability:".to_string(),
                "docker run --cap-add=SYS_ADMIN ...        # driver R565+: --cap-add=PERFMON is the narrower grant".to_string(),
                "# Kubernetes: securityContext: { capabilities: { add: [\"SYS_ADMIN\"] } }   (or PERFMON on R565+)".to_string(),
            ])
            .sources(sources);
    }
    let summary = match counters_allowed {
        Some(true) => format!("inside a {rt} container; counter access works from here"),
        _ => format!("inside a {rt} container (counter access not judged here: see driver and counter-access)"),
    };
    Check::new("container", Status::Ok, Affects::Counters, summary)
        .evidence(evidence)
        .explain(explanation)
        .sources(sources)
}
