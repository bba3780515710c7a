//! `driver`: is an NVIDIA kernel driver loaded, which version, which GPUs, and where the version
//! sits against the thresholds of the permission model (418.43, R565, R610).

use super::{src, Ctx};
use crate::facts::{
    DriverVersion, CAPABILITIES_SINCE, CAP_PERFMON_SINCE, DRIVER_VERSION_FILE, RESTRICTION_SINCE,
};
use crate::report::{Affects, Check, Evidence, Status};

/// `Model:` of each GPU under /proc/driver/nvidia/gpus/<bus id>/information.
pub fn gpus(ctx: &Ctx) -> Vec<(String, String)> {
    ctx.root
        .list("/proc/driver/nvidia/gpus")
        .into_iter()
        .map(|bus| {
            let info = ctx
                .root
                .read(&format!("/proc/driver/nvidia/gpus/{bus}/information"))
                .unwrap_or_default();
            let model =
                crate::facts::param(&info, "Model").unwrap_or_else(|| "(unknown model)".into());
            (bus, model)
        })
        .collect()
}

pub fn thresholds(v: DriverVersion) -> String {
    let mut s = Vec::new();
    if v >= RESTRICTION_SINCE {
        s.push("418.43+: counter access is restricted to admins unless configured otherwise");
    } else {
        s.push("older than 418.43: counters were not yet restricted to admins");
    }
    if v >= CAP_PERFMON_SINCE {
        s.push("R565+: CAP_PERFMON grants counter access as well as CAP_SYS_ADMIN");
    } else {
        s.push("before R565: only CAP_SYS_ADMIN (or the regkey) grants counter access; CAP_PERFMON does not");
    }
    if v >= CAPABILITIES_SINCE {
        s.push("R610+: the profiler-context / profiler-device / trace-device capabilities apply, RmProfilingAdminOnly reflects only the regkey, and NVIDIA has announced the regkey's removal");
    } else {
        s.push("before R610: no profiler capabilities; the regkey is the switch");
    }
    s.join("; ")
}

/// The version file exists but could not be read: that says nothing about the driver.
pub fn unreadable(err: &std::io::Error) -> Check {
    let why = match err.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => err.to_string(),
    };
    Check::new(
        "driver",
        Status::Warn,
        Affects::None,
        format!("whether an NVIDIA driver is loaded cannot be told: {DRIVER_VERSION_FILE}: {why}"),
    )
    .evidence(vec![Evidence::new(
        DRIVER_VERSION_FILE,
        format!("(cannot be read: {why})"),
    )])
    .explain(
        "The file is there but could not be read, so neither the driver's presence nor its \
         version (and the permission thresholds that depend on it) could be checked. A hardened \
         /proc (hidepid, an LSM profile, a container's masked paths) can do this.",
    )
    .fix([
        "ls -l /proc/driver/nvidia/version && cat /proc/driver/nvidia/version",
        "nvidia-smi --query-gpu=driver_version --format=csv",
    ])
}

pub fn driver(ctx: &Ctx) -> Check {
    let Some(text) = &ctx.driver_text else {
        match ctx.root.try_read_bytes(DRIVER_VERSION_FILE) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return unreadable(&e),
            _ => {}
        }
        return Check::new(
            "driver",
            Status::Fail,
            Affects::Tracing,
            "no NVIDIA kernel driver is loaded",
        )
        .evidence(vec![Evidence::absent(DRIVER_VERSION_FILE)])
        .explain(
            "/proc/driver/nvidia/version exists whenever the nvidia kernel module is loaded. Without \
             it, CUDA cannot run, so neither tracing nor counters are possible. Inside a container \
             this usually means the container was started without the GPU runtime.",
        )
        .fix([
            "lsmod | grep nvidia          # is the module loaded?",
            "sudo modprobe nvidia && nvidia-smi",
            "# in a container: docker run --gpus all ... (NVIDIA Container Toolkit)",
        ])
        .sources(&[src::ERR_NVGPUCTRPERM]);
    };
    let first = text.lines().next().unwrap_or("").trim().to_string();
    let gpus = gpus(ctx);
    let mut evidence = vec![Evidence::new(DRIVER_VERSION_FILE, first.clone())];
    for (bus, model) in &gpus {
        evidence.push(Evidence::new(
            format!("/proc/driver/nvidia/gpus/{bus}/information"),
            format!("Model: {model}"),
        ));
    }
    let Some(v) = ctx.driver else {
        return Check::new(
            "driver",
            Status::Warn,
            Affects::None,
            "an NVIDIA driver is loaded but its version could not be read",
        )
        .evidence(evidence)
        .explain("The version line did not have the expected `NVRM version: ... <x.y.z>` shape, so the version thresholds below could not be applied.")
        .fix(["cat /proc/driver/nvidia/version", "nvidia-smi --query-gpu=driver_version --format=csv"]);
    };
    if gpus.is_empty() {
        evidence.push(Evidence::new(
            "/proc/driver/nvidia/gpus",
            "(no GPU directories)",
        ));
        return Check::new(
            "driver",
            Status::Warn,
            Affects::None,
            format!("driver {v} is loaded but no GPU is visible"),
        )
        .evidence(evidence)
        .explain(format!(
            "The driver lists each GPU it drives under /proc/driver/nvidia/gpus; none is listed here. \
             In a container the GPUs may be hidden; otherwise the GPU may be excluded or failed. {}.",
            thresholds(v)
        ))
        .fix(["nvidia-smi -L", "sudo dmesg | grep -i -E 'NVRM|Xid'"]);
    }
    let models: Vec<&str> = gpus.iter().map(|(_, m)| m.as_str()).collect();
    Check::new(
        "driver",
        Status::Ok,
        Affects::Tracing,
        format!("driver {v}, {} GPU(s): {}", gpus.len(), models.join(", ")),
    )
    .evidence(evidence)
    .explain(format!("{}.", thresholds(v)))
    .sources(&[src::ERR_NVGPUCTRPERM])
}

#[cfg(test)]
mod tests {
    /// Defect: an unreadable version file read as "no NVIDIA kernel driver is loaded". (As
    /// root, the tests cannot make a file unreadable: the error itself is given here.)
    #[test]
    fn permission_denied_is_said_as_such() {
        let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let c = super::unreadable(&e);
        assert!(c.summary.contains("permission denied"), "{}", c.summary);
        assert!(
            !c.summary.contains("no NVIDIA kernel driver"),
            "{}",
            c.summary
        );
    }
}
