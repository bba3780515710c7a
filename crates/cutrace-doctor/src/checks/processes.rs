//! `counter-holders` (who may hold the single counter reservation) and `tool-conflicts`
//! (cuda-gdb / Compute Sanitizer, beside which CUPTI cannot run), from /proc/*/comm and cmdline.

use super::{src, Ctx};
use crate::facts::Process;
use crate::report::{Affects, Check, Evidence, Status};

fn evidence_of(procs: &[(&Process, &str)]) -> Vec<Evidence> {
    procs
        .iter()
        .map(|(p, what)| {
            Evidence::new(
                format!("/proc/{}/cmdline", p.pid),
                format!("{} ({what})", p.cmdline()),
            )
        })
        .collect()
}

/// `cutrace doctor --probe` opens a Range Profiler session on each GPU: while it runs it holds
/// the counters (cutrace has no other counter-reading command yet).
fn is_cutrace_counter_session(p: &Process) -> bool {
    p.name() == "cutrace"
        && p.argv.get(1).map(String::as_str) == Some("doctor")
        && p.argv.iter().any(|a| a == "--probe")
}

pub fn counter_holders(ctx: &Ctx) -> Check {
    let mut dcgm = Vec::new();
    let mut tools = Vec::new();
    for p in &ctx.procs {
        if p.is("nv-hostengine") {
            dcgm.push((p, "DCGM host engine"));
        } else if p.is("dcgm-exporter") {
            dcgm.push((p, "DCGM exporter"));
        } else if p.is("ncu") || p.is("nv-nsight-cu-cli") {
            tools.push((p, "Nsight Compute"));
        } else if p.is("nsys") {
            tools.push((p, "Nsight Systems"));
        } else if is_cutrace_counter_session(p) {
            tools.push((p, "another cutrace counter session"));
        }
    }
    let sources = &[src::DCGM, src::NCU, src::CUPTI_MAIN];
    if dcgm.is_empty() && tools.is_empty() {
        return Check::new("counter-holders", Status::Ok, Affects::Counters, "no process that takes the counter reservation is running")
            .evidence(vec![Evidence::new("/proc/*/comm, /proc/*/cmdline", format!("{} processes; no nv-hostengine, dcgm-exporter, ncu, nsys or cutrace doctor --probe", ctx.procs.len()))])
            .explain("Only one client can hold the GPU performance counters at a time. None of the known holders (DCGM, Nsight Compute, Nsight Systems with GPU metrics, another cutrace doctor --probe) is running. A holder in another container or on the host is invisible from here: --probe asks CUPTI directly.")
            .sources(sources);
    }
    let mut all = dcgm.clone();
    all.extend(tools.iter().cloned());
    let mut fix = Vec::new();
    let mut explanation = String::from(
        "Only one client can hold the GPU performance counter reservation at a time; a second one gets \
         CUPTI_ERROR_HARDWARE_BUSY (\"The performance monitoring hardware is currently in use by another client\") \
         or, from Nsight Compute, \"a driver resource was unavailable\". Tracing is not affected.",
    );
    if !dcgm.is_empty() {
        explanation.push_str(
            " DCGM holds the counters while it watches profiling metrics (dcgm-exporter's DCP fields); \
             \"collection of profiling metrics with DCGM will conflict with usage of other developer tools\". \
             While paused, DCGM publishes BLANK values for profiling metrics: utilization panels go blank, and an \
             alert rule that reads blank as zero will fire.",
        );
        fix.push("cutrace dcgm pause --for 30m      # = dcgmi profile --pause, resumed by a watchdog even if cutrace dies".to_string());
        fix.push("# ... profile ...".to_string());
        fix.push("cutrace dcgm resume               # = dcgmi profile --resume".to_string());
    }
    for (p, what) in &tools {
        explanation.push_str(&format!(
            " {what} (pid {}) may hold the reservation while it profiles.",
            p.pid
        ));
        fix.push(format!(
            "# wait for pid {} ({what}) to finish, or stop it: kill {}",
            p.pid, p.pid
        ));
    }
    let names: Vec<String> = all
        .iter()
        .map(|(p, w)| format!("{w} (pid {})", p.pid))
        .collect();
    Check::new(
        "counter-holders",
        Status::Warn,
        Affects::Counters,
        format!("may hold the counter reservation: {}", names.join(", ")),
    )
    .evidence(evidence_of(&all))
    .explain(explanation)
    .fix(fix)
    .sources(sources)
}

pub fn tool_conflicts(ctx: &Ctx) -> Check {
    let mut found = Vec::new();
    for p in &ctx.procs {
        if p.is("cuda-gdb") || p.is("cuda-gdbserver") {
            found.push((p, "cuda-gdb"));
        } else if p.is("compute-sanitizer") {
            found.push((p, "Compute Sanitizer"));
        }
    }
    let sources = &[src::CUPTI_MAIN];
    if found.is_empty() {
        return Check::new("tool-conflicts", Status::Ok, Affects::None, "no cuda-gdb or Compute Sanitizer is running")
            .evidence(vec![Evidence::new("/proc/*/comm, /proc/*/cmdline", "no cuda-gdb, cuda-gdbserver or compute-sanitizer")])
            .explain("\"CUPTI still does not support tracing or profiling along with other NVIDIA Developer Tools like cuda-gdb or Compute Sanitizer.\" None is running.")
            .sources(sources);
    }
    let names: Vec<String> = found
        .iter()
        .map(|(p, w)| format!("{w} (pid {})", p.pid))
        .collect();
    Check::new("tool-conflicts", Status::Warn, Affects::None, format!("running: {}", names.join(", ")))
        .evidence(evidence_of(&found))
        .explain("\"CUPTI still does not support tracing or profiling along with other NVIDIA Developer Tools like cuda-gdb or Compute Sanitizer.\" A program running under these tools cannot be traced or profiled by cutrace at the same time; other programs can.")
        .fix(found.iter().map(|(p, w)| format!("# run one tool at a time: let pid {} ({w}) finish, or trace a program not running under it", p.pid)))
        .sources(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(argv: &[&str]) -> Process {
        Process {
            pid: 1,
            comm: "cutrace".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn only_a_probing_doctor_counts_as_a_cutrace_counter_session() {
        assert!(is_cutrace_counter_session(&p(&[
            "/usr/bin/cutrace",
            "doctor",
            "--probe"
        ])));
        assert!(!is_cutrace_counter_session(&p(&["cutrace", "doctor"])));
        assert!(!is_cutrace_counter_session(&p(&[
            "cutrace", "record", "--", "./app", "--probe"
        ])));
        assert!(!is_cutrace_counter_session(&p(&[
            "cutrace", "report", "t.json"
        ])));
    }
}
