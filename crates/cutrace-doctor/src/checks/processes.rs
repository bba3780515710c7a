//! `counter-holders` (who may hold the single counter reservation) and `tool-conflicts`
//! (cuda-gdb / Compute Sanitizer, beside which CUPTI cannot run), from /proc/*/comm and cmdline.

use super::{src, Ctx};
use crate::facts::Process;
use crate::report::{Affects, Check, Evidence, Status};
use cutrace_settings::CounterRun;

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

// A process is a cutrace counter session when its environment holds `cutrace profile`'s or
// `cutrace sample`'s metric list (`cutrace_settings::counter_run`): the program holds the
// counters from its first CUDA context on (the command itself becomes the program, so its
// command line is the program's). `cutrace record` removes both, so a plain trace is not taken
// for one.

/// Which cutrace counter session `p` is, if any: a probing doctor (`cutrace doctor --probe` opens
/// a Range Profiler session on each GPU), a `cutrace profile` or `cutrace sample` command still
/// running as itself (`--pause-dcgm` keeps it as the parent of the profiled program), or a
/// program started by one (its environment, readable for one's own processes or as root).
/// `environ` is `/proc/PID/environ` when it could be read.
fn cutrace_counter_session(p: &Process, environ: Option<&[u8]>) -> Option<&'static str> {
    if p.name() == "cutrace" {
        match p.argv.get(1).map(String::as_str) {
            Some("doctor") if p.argv.iter().any(|a| a == "--probe") => {
                return Some("cutrace doctor --probe")
            }
            Some("profile") if !p.argv.iter().any(|a| a == "--list-metrics") => {
                return Some("cutrace profile")
            }
            Some("sample") => return Some("cutrace sample"),
            _ => {}
        }
    }
    let vars = environ?.split(|&c| c == 0);
    vars.filter_map(cutrace_settings::counter_run)
        .map(|run| match run {
            CounterRun::Profile => "a program under cutrace profile",
            CounterRun::Sample => "a program under cutrace sample",
        })
        .next()
}

/// The parent of the process running the doctor (`/proc/self/stat`'s fourth field): a `cutrace
/// profile --pause-dcgm` runs a second `cutrace profile` under DCGM's pause, and that one reads
/// the holders before its program starts; its own parent is not a holder.
fn own_parent(ctx: &Ctx) -> Option<u32> {
    let stat = ctx.root.read("/proc/self/stat")?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub fn counter_holders(ctx: &Ctx) -> Check {
    let mut dcgm = Vec::new();
    let mut tools = Vec::new();
    let parent = own_parent(ctx);
    for p in &ctx.procs {
        if p.is("nv-hostengine") {
            dcgm.push((p, "DCGM host engine"));
        } else if p.is("dcgm-exporter") {
            dcgm.push((p, "DCGM exporter"));
        } else if p.is("ncu") || p.is("nv-nsight-cu-cli") {
            tools.push((p, "Nsight Compute"));
        } else if p.is("nsys") {
            tools.push((p, "Nsight Systems"));
        } else if Some(p.pid) != parent {
            let environ = ctx.root.read_bytes(&format!("/proc/{}/environ", p.pid));
            if let Some(what) = cutrace_counter_session(p, environ.as_deref()) {
                tools.push((p, what));
            }
        }
    }
    let sources = &[src::DCGM, src::NCU, src::CUPTI_MAIN];
    if dcgm.is_empty() && tools.is_empty() {
        let mut evidence = vec![Evidence::new("/proc/*/comm, /proc/*/cmdline, /proc/*/environ", format!("{} processes; no nv-hostengine, dcgm-exporter, ncu, nsys, cutrace doctor --probe, cutrace profile or cutrace sample (nor a program they run)", ctx.procs.len()))];
        evidence.extend(ctx.procs_left_out_evidence());
        return Check::new("counter-holders", Status::Ok, Affects::Counters, "no process that takes the counter reservation is running")
            .evidence(evidence)
            .explain("Only one client can hold the GPU performance counters at a time. None of the known holders (DCGM, Nsight Compute, Nsight Systems with GPU metrics, another cutrace doctor --probe, cutrace profile or cutrace sample, or a program one of them runs) is running. A holder in another container or on the host is invisible from here: --probe asks CUPTI directly.")
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
        // A sentence: its first letter upper-case ("a program under cutrace profile").
        let mut chars = what.chars();
        let what_cap: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        explanation.push_str(&format!(
            " {what_cap} (pid {}) may hold the reservation while it profiles.",
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
    .evidence(
        evidence_of(&all)
            .into_iter()
            .chain(ctx.procs_left_out_evidence())
            .collect(),
    )
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
        let mut evidence = vec![Evidence::new(
            "/proc/*/comm, /proc/*/cmdline",
            "no cuda-gdb, cuda-gdbserver or compute-sanitizer",
        )];
        evidence.extend(ctx.procs_left_out_evidence());
        return Check::new("tool-conflicts", Status::Ok, Affects::None, "no cuda-gdb or Compute Sanitizer is running")
            .evidence(evidence)
            .explain("\"CUPTI still does not support tracing or profiling along with other NVIDIA Developer Tools like cuda-gdb or Compute Sanitizer.\" None is running.")
            .sources(sources);
    }
    let names: Vec<String> = found
        .iter()
        .map(|(p, w)| format!("{w} (pid {})", p.pid))
        .collect();
    Check::new("tool-conflicts", Status::Warn, Affects::None, format!("running: {}", names.join(", ")))
        .evidence(evidence_of(&found).into_iter().chain(ctx.procs_left_out_evidence()).collect())
        .explain("\"CUPTI still does not support tracing or profiling along with other NVIDIA Developer Tools like cuda-gdb or Compute Sanitizer.\" A program running under these tools cannot be traced or profiled by cutrace at the same time; other programs can.")
        .fix(found.iter().map(|(p, w)| format!("# run one tool at a time: let pid {} ({w}) finish, or trace a program not running under it", p.pid)))
        .sources(sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutrace_settings::var;

    fn p(argv: &[&str]) -> Process {
        Process {
            pid: 1,
            comm: "cutrace".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_cut: false,
        }
    }

    /// Processes left out because of the cap are said in the evidence of every check that looks
    /// at processes, whatever its verdict.
    #[test]
    fn processes_left_out_are_said() {
        let base =
            std::env::temp_dir().join(format!("cutrace-doctor-left-out-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let root = crate::Root::new(&base);
        let mut ctx = Ctx::read(&root);
        let _ = std::fs::remove_dir_all(&base);
        let said = |c: &Check| {
            c.evidence
                .iter()
                .any(|e| e.file == "/proc" && e.value.starts_with("3 more processes not examined"))
        };
        for check in [counter_holders(&ctx), tool_conflicts(&ctx)] {
            assert!(!said(&check), "{check:?}");
        }
        ctx.procs_left_out = 3;
        for check in [
            counter_holders(&ctx),
            tool_conflicts(&ctx),
            super::super::gpu_modes::mps(&ctx),
        ] {
            assert!(said(&check), "{check:?}");
        }
        ctx.procs = vec![Process {
            pid: 9,
            comm: "nv-hostengine".into(),
            argv: vec![],
            argv_cut: false,
        }];
        assert!(said(&counter_holders(&ctx)));
    }

    #[test]
    fn cutrace_counter_sessions_by_command_line_or_environment() {
        let session = |argv: &[&str]| cutrace_counter_session(&p(argv), None);
        assert_eq!(
            session(&["/usr/bin/cutrace", "doctor", "--probe"]),
            Some("cutrace doctor --probe")
        );
        assert_eq!(session(&["cutrace", "doctor"]), None);
        assert_eq!(
            session(&["cutrace", "record", "--", "./app", "--probe"]),
            None
        );
        assert_eq!(session(&["cutrace", "report", "t.json"]), None);
        assert_eq!(
            session(&["cutrace", "profile", "--pause-dcgm", "--", "./app"]),
            Some("cutrace profile")
        );
        assert_eq!(session(&["cutrace", "profile", "--list-metrics"]), None);
        assert_eq!(
            session(&["cutrace", "sample", "--", "./app"]),
            Some("cutrace sample")
        );
        // The program `cutrace profile` became: its command line is its own.
        let app = |env: &[u8]| cutrace_counter_session(&p(&["python3", "train.py"]), Some(env));
        let environ = |vars: &[(&str, &str)]| -> Vec<u8> {
            vars.iter()
                .flat_map(|(k, v)| format!("{k}={v}\0").into_bytes())
                .collect()
        };
        assert_eq!(
            app(&environ(&[
                ("HOME", "/root"),
                (var::COUNTERS, "sm__ctas_launched.sum")
            ])),
            Some("a program under cutrace profile")
        );
        // What `cutrace sample` sets (it once looked for a name sample never set).
        assert_eq!(
            app(&environ(&[(var::PM_METRICS, "x")])),
            Some("a program under cutrace sample")
        );
        assert_eq!(
            app(&environ(&[(var::COUNTERS, ""), (var::OUTPUT_DIR, "/t")])),
            None
        );
        assert_eq!(app(b"PATH=/bin\0"), None);
    }
}
