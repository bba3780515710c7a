//! Who a sender is, by the kernel's word: its pid as the monitor sees it (`SO_PEERCRED`), its
//! pid inside its own pid namespace (a container's), and its container and pod, from
//! `/proc/PID/status` and `/proc/PID/cgroup`. Nothing here trusts what the sender says.

use std::path::Path;

/// A connection's sender.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// Its pid in the monitor's pid namespace.
    pub pid: u32,
    /// Its uid (`SO_PEERCRED`).
    pub uid: u32,
    /// Its pid in its own, innermost pid namespace, when that is another one (a container's).
    pub ns_pid: Option<u32>,
    /// Its container's id (64 hex digits, as Docker, containerd, CRI-O and Podman name them).
    pub container_id: Option<String>,
    /// Its Kubernetes pod's uid.
    pub pod_uid: Option<String>,
    /// Its mount namespace (`/proc/PID/ns/mnt`, as `mnt:[INODE]`): where a path it is given
    /// resolves.
    pub mnt_ns: Option<String>,
}

/// The mount namespace of process `pid` (`self` for this one) in `proc`.
fn mnt_ns(proc: &Path, pid: &str) -> Option<String> {
    std::fs::read_link(proc.join(pid).join("ns/mnt"))
        .ok()
        .map(|l| l.to_string_lossy().into_owned())
}

impl Peer {
    /// A sender seen only by its pid (no /proc to read).
    pub fn pid_only(pid: u32) -> Peer {
        Peer {
            pid,
            uid: rustix::process::getuid().as_raw(),
            mnt_ns: mnt_ns(Path::new("/proc"), "self"),
            ..Peer::default()
        }
    }

    /// Reads `proc` (`/proc`) for `pid`; what cannot be read stays unknown.
    pub fn read(proc: &Path, pid: u32, uid: u32) -> Peer {
        let dir = proc.join(pid.to_string());
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
        let (container_id, pod_uid) = container_of(&cgroup);
        Peer {
            pid,
            uid,
            ns_pid: innermost_pid(&status).filter(|&p| p != pid),
            container_id,
            pod_uid,
            mnt_ns: mnt_ns(proc, &pid.to_string()),
        }
    }

    /// Whether a hello naming `pid` speaks for this sender: its pid here, or in its own
    /// namespace.
    pub fn is(&self, pid: u32) -> bool {
        pid == self.pid || Some(pid) == self.ns_pid
    }
}

/// The supplementary groups of process `pid` (`Groups:` of `/proc/PID/status`); none when it
/// cannot be read.
pub fn groups(proc: &Path, pid: u32) -> Vec<u32> {
    let status =
        std::fs::read_to_string(proc.join(pid.to_string()).join("status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The last pid of the `NSpid:` line of `/proc/PID/status` (its pid in its innermost pid
/// namespace), when the line has more than one.
fn innermost_pid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let pids: Vec<u32> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (pids.len() > 1).then(|| *pids.last().unwrap_or(&0))
}

/// The container id and pod uid in a `/proc/PID/cgroup` text, from the cgroup v2 line (`0::`)
/// when it names one, else from any line; both as the runtimes and the kubelet write them:
/// `…/docker/ID`, `docker-ID.scope`, `cri-containerd-ID.scope`, `crio-ID.scope`,
/// `libpod-ID.scope`, `…/pod<uid>/ID` (cgroupfs driver) and `…-pod<uid_with_underscores>.slice`
/// (systemd driver).
pub fn container_of(cgroup: &str) -> (Option<String>, Option<String>) {
    let paths: Vec<&str> = cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .collect();
    let v2 = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .into_iter();
    let mut container = None;
    let mut pod = None;
    for path in v2.chain(paths) {
        for seg in path.split('/') {
            container = container.or_else(|| container_segment(seg));
            pod = pod.or_else(|| pod_segment(seg));
        }
        if container.is_some() {
            break;
        }
    }
    (container, pod)
}

fn container_segment(seg: &str) -> Option<String> {
    let seg = seg.strip_suffix(".scope").unwrap_or(seg);
    let id = [
        "docker-",
        "cri-containerd-",
        "crio-",
        "libpod-",
        "containerd-",
    ]
    .iter()
    .find_map(|p| seg.strip_prefix(p))
    .unwrap_or(seg);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

fn pod_segment(seg: &str) -> Option<String> {
    let seg = seg.strip_suffix(".slice").unwrap_or(seg);
    let at = seg.rfind("pod")?;
    let uid = seg[at + 3..].replace('_', "-");
    let ok = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    ok.then(|| uid.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";
    const POD: &str = "0b6f1a2c-3d4e-4f50-8a9b-0c1d2e3f4a5b";

    #[test]
    fn containers_and_pods_as_the_runtimes_name_them() {
        let pod_sd = POD.replace('-', "_");
        for (text, want_pod) in [
            (format!("0::/system.slice/docker-{ID}.scope\n"), None),
            (format!("12:memory:/docker/{ID}\n11:cpu:/docker/{ID}\n0::/\n"), None),
            (
                format!(
                    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_sd}.slice/cri-containerd-{ID}.scope\n"
                ),
                Some(POD),
            ),
            (format!("0::/kubepods/besteffort/pod{POD}/{ID}\n"), Some(POD)),
            (
                format!("0::/kubepods.slice/kubepods-pod{pod_sd}.slice/crio-{ID}.scope\n"),
                Some(POD),
            ),
            (format!("0::/user.slice/user-1000.slice/user@1000.service/app.slice/libpod-{ID}.scope/container\n"), None),
        ] {
            let (c, p) = container_of(&text);
            assert_eq!(c.as_deref(), Some(ID), "{text}");
            assert_eq!(p.as_deref(), want_pod, "{text}");
        }
        // Not in a container: a session scope, the root, garbage.
        for text in [
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            "0::/\n",
            "",
            "::::\n\0\n",
            "0::/pod123/abc\n",
        ] {
            assert_eq!(container_of(text), (None, None), "{text:?}");
        }
    }

    #[test]
    fn the_innermost_pid_namespace_pid() {
        assert_eq!(innermost_pid("Name:\tx\nNSpid:\t4242\t7\n"), Some(7));
        assert_eq!(innermost_pid("NSpid:\t4242\t7\t1\n"), Some(1));
        assert_eq!(innermost_pid("NSpid:\t4242\n"), None);
        assert_eq!(innermost_pid("NSpid:\tx 1\n"), None);
        assert_eq!(innermost_pid(""), None);
        let me = Peer::read(Path::new("/proc"), std::process::id(), 0);
        assert_eq!(me.pid, std::process::id());
        assert!(me.is(std::process::id()));
        assert!(!Peer::pid_only(5).is(6));
    }
}
