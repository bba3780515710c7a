//! `mig` and `mps`: GPU sharing modes that change what counter profiling can do.

use super::{src, Ctx};
use crate::report::{Affects, Check, Evidence, Status};

/// MIG instances as the driver exposes them through nvidia-capabilities (MIG user guide, "Device
/// Nodes and Capabilities"): /proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/ci<C>/access.
/// Each GPU instance with its compute instances.
fn mig_instances(ctx: &Ctx) -> Vec<(String, String, Vec<String>)> {
    let base = "/proc/driver/nvidia/capabilities";
    let mut out = Vec::new();
    for gpu in ctx
        .root
        .list(base)
        .into_iter()
        .filter(|g| g.starts_with("gpu"))
    {
        let mig = format!("{base}/{gpu}/mig");
        for gi in ctx
            .root
            .list(&mig)
            .into_iter()
            .filter(|g| g.starts_with("gi"))
        {
            let cis: Vec<String> = ctx
                .root
                .list(&format!("{mig}/{gi}"))
                .into_iter()
                .filter(|c| c.starts_with("ci"))
                .collect();
            out.push((gpu.clone(), gi, cis));
        }
    }
    out
}

pub fn mig(ctx: &Ctx) -> Check {
    let instances = mig_instances(ctx);
    let visible = ctx.env("NVIDIA_VISIBLE_DEVICES");
    let sources = &[src::CUPTI_SPECIAL, src::MIG_CAPS];
    let mut evidence: Vec<Evidence> = instances
        .iter()
        .map(|(gpu, gi, cis)| {
            Evidence::new(
                format!("/proc/driver/nvidia/capabilities/{gpu}/mig/{gi}"),
                format!("{} compute instance(s): {}", cis.len(), cis.join(", ")),
            )
        })
        .collect();
    let mig_visible = visible.as_deref().is_some_and(|v| v.contains("MIG-"));
    if let Some(v) = &visible {
        evidence.push(Evidence::new(
            "/proc/self/environ",
            format!("NVIDIA_VISIBLE_DEVICES={v}"),
        ));
    }
    if instances.is_empty() && !mig_visible {
        if evidence.is_empty() {
            evidence.push(Evidence::new(
                "/proc/driver/nvidia/capabilities/gpu*/mig",
                "(no gi* directories)",
            ));
        }
        return Check::new("mig", Status::Ok, Affects::Counters, "no MIG instances visible")
            .evidence(evidence)
            .explain("No MIG GPU instance is exposed under /proc/driver/nvidia/capabilities. MIG mode can still be enabled with no instance created; that is only visible to nvidia-smi or the probe.")
            .fix(["nvidia-smi --query-gpu=index,mig.mode.current --format=csv   # to confirm"])
            .sources(sources);
    }
    let shared: Vec<&(String, String, Vec<String>)> = instances
        .iter()
        .filter(|(_, _, cis)| cis.len() > 1)
        .collect();
    let list_cmds = [
        "nvidia-smi mig -lgi      # GPU instances".to_string(),
        "nvidia-smi mig -lci      # compute instances: more than one in a GPU instance means they share its units".to_string(),
    ];
    if !shared.is_empty() {
        let names: Vec<String> = shared
            .iter()
            .map(|(g, gi, cis)| format!("{g}/{gi} ({} CIs)", cis.len()))
            .collect();
        let mut fix = list_cmds.to_vec();
        fix.push("# give the profiled job a GPU instance with a single compute instance spanning it, e.g.:".into());
        fix.push("sudo nvidia-smi mig -i <gpu> -gi <gi> -dci && sudo nvidia-smi mig -i <gpu> -gi <gi> -cci   # one CI over the whole GI".into());
        return Check::new("mig", Status::Warn, Affects::Counters, format!("MIG is on and compute instances share a GPU instance: {}", names.join(", ")))
            .evidence(evidence)
            .explain("On a shared compute instance \"collecting profiling data from shared units is not permitted. Attempts to collect metrics from a shared unit will result in NaN values.\" cutrace reports such values as unavailable, never as 0. Tracing works on shared compute instances; profiling works on an isolated one.")
            .fix(fix)
            .sources(sources);
    }
    Check::new("mig", Status::Ok, Affects::Counters, "MIG is on; every GPU instance visible has a single compute instance (isolated)")
        .evidence(evidence)
        .explain("Tracing and profiling both work on an isolated compute instance. Which instance a process runs on depends on the devices it is given (NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES).")
        .fix(list_cmds)
        .sources(sources)
}

pub fn mps(ctx: &Ctx) -> Check {
    let daemons: Vec<_> = ctx
        .procs
        .iter()
        .filter(|p| p.is("nvidia-cuda-mps-control") || p.is("nvidia-cuda-mps-server"))
        .collect();
    let pipe_dir = ctx
        .env("CUDA_MPS_PIPE_DIRECTORY")
        .unwrap_or_else(|| "/tmp/nvidia-mps".into());
    let control = format!("{}/control", pipe_dir.trim_end_matches('/'));
    let pipe = ctx.root.exists(&control);
    let sources = &[src::CUPTI_MAIN];
    let mut evidence: Vec<Evidence> = daemons
        .iter()
        .map(|p| Evidence::new(format!("/proc/{}/cmdline", p.pid), p.cmdline()))
        .collect();
    evidence.push(Evidence::new(
        &control,
        if pipe { "(present)" } else { "(absent)" },
    ));
    evidence.extend(ctx.procs_left_out_evidence());
    if daemons.is_empty() && !pipe {
        return Check::new("mps", Status::Ok, Affects::None, "no MPS daemon")
            .evidence(evidence)
            .explain("No nvidia-cuda-mps-control / -server process and no MPS control pipe.")
            .sources(sources);
    }
    Check::new("mps", Status::Warn, Affects::None, "an MPS control daemon is active")
        .evidence(evidence)
        .explain("NVIDIA documents that the (deprecated) Profiling API is \"not supported under MPS (Multi-Process Service), Confidential Compute, or SLI configured systems\". That sentence is in the Profiling API section; NVIDIA states no such limit for the Range Profiling API that cutrace uses, so counters under MPS are not ruled out: verify on this driver with --probe. Tracing works under MPS.")
        .fix([
            "cutrace doctor --probe          # CUPTI's real answer on this machine",
            "echo quit | nvidia-cuda-mps-control   # only if you must rule MPS out (stops MPS for every client)",
        ])
        .sources(sources)
}
