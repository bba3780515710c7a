//! Each fixture tree under tests/fixtures is one failure mode of docs/DOCTOR.md (or the healthy
//! H200 machine); each test asserts the verdict, the evidence read, and the fix offered.

use cutrace_doctor::{doctor, Check, Report, Root, Status};
use std::path::PathBuf;

fn run(name: &str) -> Report {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    assert!(dir.is_dir(), "missing fixture {}", dir.display());
    doctor(&Root::new(dir))
}

fn check<'a>(r: &'a Report, id: &str) -> &'a Check {
    r.check(id).unwrap_or_else(|| panic!("no check {id}"))
}

/// The evidence of `c` includes `file` with a value containing `needle`.
#[track_caller]
fn has_evidence(c: &Check, file: &str, needle: &str) {
    assert!(
        c.evidence
            .iter()
            .any(|e| e.file == file && e.value.contains(needle)),
        "{}: no evidence {file} ~ {needle:?} in {:#?}",
        c.id,
        c.evidence
    );
}

#[track_caller]
fn has_fix(c: &Check, needle: &str) {
    assert!(
        c.fix.iter().any(|f| f.contains(needle)),
        "{}: no fix containing {needle:?} in {:#?}",
        c.id,
        c.fix
    );
}

#[track_caller]
fn statuses_other_than(r: &Report, skip: &[&str]) -> Vec<(String, Status)> {
    r.checks
        .iter()
        .filter(|c| !skip.contains(&c.id) && c.status != Status::Ok)
        .map(|c| (c.id.to_string(), c.status))
        .collect()
}

#[test]
fn h200_root_open_is_all_ok() {
    let r = run("h200-root-open");
    assert_eq!(statuses_other_than(&r, &[]), vec![], "{r:#?}");
    assert_eq!(r.exit_status, 0);
    let d = check(&r, "driver");
    has_evidence(d, "/proc/driver/nvidia/version", "580.159.04");
    has_evidence(
        d,
        "/proc/driver/nvidia/gpus/0000:18:00.0/information",
        "NVIDIA H200",
    );
    let a = check(&r, "counter-access");
    has_evidence(a, "/proc/driver/nvidia/params", "RmProfilingAdminOnly: 0");
    let c = check(&r, "cupti-library");
    assert!(
        c.summary.contains("/usr/local/cuda/lib64/libcupti.so.13"),
        "{}",
        c.summary
    );
    has_evidence(c, "/usr/local/cuda/version.json", "cuda_cupti 13.0");
    assert!(c.explanation.contains("MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
}

#[test]
fn admin_only_counters_with_unprivileged_user_fail() {
    let r = run("admin-only-unprivileged");
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Fail);
    has_evidence(a, "/proc/driver/nvidia/params", "RmProfilingAdminOnly: 1");
    has_evidence(
        a,
        "/proc/self/status",
        "uid 1000, holding neither CAP_SYS_ADMIN nor CAP_PERFMON",
    );
    has_fix(a, "options nvidia NVreg_RestrictProfilingToAdminUsers=0");
    has_fix(a, "sudo update-initramfs -u -k all");
    has_fix(a, "--addamb=cap_perfmon");
    has_fix(a, "policy: keep production nodes restricted");
    assert!(a.explanation.contains("compiles in 1"));
    // A CUDA 12 machine: its CUPTI 12 traces for other tools, but record finds no libcupti.so.13.
    let c = check(&r, "cupti-library");
    assert_eq!(c.status, Status::Warn);
    assert!(c.summary.contains("needs libcupti.so.13"), "{}", c.summary);
    assert_eq!(
        statuses_other_than(&r, &["counter-access", "cupti-library"]),
        vec![]
    );
    assert!(r.tracing_available && !r.counters_available);
    assert_eq!(r.exit_status, 1);
}

#[test]
fn cap_perfmon_on_r565_plus_is_allowed() {
    let r = run("perfmon-r570");
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Ok, "{a:#?}");
    has_evidence(a, "/proc/self/status", "holding CAP_PERFMON");
    has_evidence(a, "/proc/driver/nvidia/version", "570.86.15");
    assert!(a.summary.contains("R565+"));
    assert!(a.explanation.contains("secure execution mode"));
    assert!(a.fix.is_empty());
    assert_eq!(r.exit_status, 0);
}

#[test]
fn cap_perfmon_before_r565_is_not_enough() {
    let r = run("perfmon-r550");
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Fail);
    has_evidence(a, "/proc/self/status", "holding CAP_PERFMON");
    has_evidence(a, "/proc/driver/nvidia/version", "550.54.14");
    assert!(a.summary.contains("older than R565"));
    has_fix(a, "R565");
    has_fix(a, "NVreg_RestrictProfilingToAdminUsers=0");
    assert_eq!(r.exit_status, 1);
}

#[test]
fn r610_capability_node_grants_access_while_flag_says_1() {
    let r = run("r610-capability-grant");
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Ok, "{a:#?}");
    has_evidence(a, "/proc/driver/nvidia/params", "RmProfilingAdminOnly: 1");
    has_evidence(
        a,
        "/proc/driver/nvidia/capabilities/profiler-context",
        "DeviceFileMode: 292",
    );
    has_evidence(a, "/dev/nvidia-caps/nvidia-cap3", "present");
    assert!(a.summary.contains("profiler-context"));
    assert!(a.explanation.contains("only reflects the regkey state"));
    assert_eq!(r.exit_status, 0);
}

#[test]
fn conf_says_0_running_says_1_debian() {
    let r = run("conf-drift-debian");
    let c = check(&r, "config-drift");
    assert_eq!(c.status, Status::Fail);
    has_evidence(
        c,
        "/etc/modprobe.d/nvidia-profiling.conf",
        "NVreg_RestrictProfilingToAdminUsers=0",
    );
    has_evidence(c, "/proc/driver/nvidia/params", "RmProfilingAdminOnly: 1");
    has_evidence(c, "/etc/os-release", "ID=ubuntu");
    assert_eq!(c.fix[0], "sudo update-initramfs -u -k all");
    has_fix(c, "sudo reboot");
    has_fix(c, "grep RmProfilingAdminOnly /proc/driver/nvidia/params");
    assert!(!c.fix.iter().any(|f| f.contains("dracut")));
    assert!(c.explanation.contains("initramfs"));
    assert_eq!(r.exit_status, 1);
}

#[test]
fn conf_says_0_running_says_1_redhat() {
    let r = run("conf-drift-redhat");
    let c = check(&r, "config-drift");
    assert_eq!(c.status, Status::Fail);
    has_evidence(c, "/etc/os-release", "ID=rhel");
    assert_eq!(c.fix[0], "sudo dracut --regenerate-all -f");
    assert!(!c.fix.iter().any(|f| f.contains("update-initramfs")));
}

#[test]
fn nv_hostengine_is_named_as_counter_holder() {
    let r = run("dcgm-hostengine");
    let c = check(&r, "counter-holders");
    assert_eq!(c.status, Status::Warn);
    has_evidence(c, "/proc/4242/cmdline", "/usr/bin/nv-hostengine -n");
    has_evidence(c, "/proc/4242/cmdline", "DCGM host engine");
    has_fix(c, "dcgmi profile --pause");
    has_fix(c, "dcgmi profile --resume");
    assert!(c.explanation.contains("BLANK"));
    assert!(c.explanation.contains("CUPTI_ERROR_HARDWARE_BUSY"));
    // A static check cannot know DCGM watches profiling metrics: a warning, not a verdict.
    assert_eq!(r.exit_status, 0);
}

/// Another `cutrace profile` (the program it runs, known by its environment, and a
/// `--pause-dcgm` parent) and a `cutrace sample` program hold the counters; the doctor's own
/// parent (a `cutrace profile --pause-dcgm` that runs this one) does not count.
#[test]
fn other_cutrace_profile_and_sample_runs_are_named_as_counter_holders() {
    let r = run("profile-running");
    let c = check(&r, "counter-holders");
    assert_eq!(c.status, Status::Warn);
    has_evidence(
        c,
        "/proc/5150/cmdline",
        "python3 train.py (a program under cutrace profile)",
    );
    has_evidence(
        c,
        "/proc/5160/cmdline",
        "/usr/local/bin/cutrace profile --pause-dcgm -o /runs/b -- ./bench (cutrace profile)",
    );
    has_evidence(
        c,
        "/proc/5170/cmdline",
        "./sampled (a program under cutrace sample)",
    );
    assert!(
        !c.evidence.iter().any(|e| e.file.contains("6000")),
        "{c:#?}"
    );
    assert!(
        c.summary
            .contains("a program under cutrace profile (pid 5150)"),
        "{}",
        c.summary
    );
    has_fix(c, "wait for pid 5150");
    assert!(c.explanation.contains("CUPTI_ERROR_HARDWARE_BUSY"));
}

#[test]
fn mig_with_shared_compute_instances_warns_nan() {
    let r = run("mig-shared");
    let c = check(&r, "mig");
    assert_eq!(c.status, Status::Warn);
    has_evidence(
        c,
        "/proc/driver/nvidia/capabilities/gpu0/mig/gi1",
        "2 compute instance(s): ci0, ci1",
    );
    assert!(c.explanation.contains("NaN"));
    assert!(c.explanation.contains("Tracing works"));
    has_fix(c, "nvidia-smi mig -lci");
    has_fix(c, "-cci");
}

#[test]
fn mps_daemon_and_sanitizer_are_found() {
    let r = run("mps-daemon");
    let m = check(&r, "mps");
    assert_eq!(m.status, Status::Warn);
    has_evidence(m, "/proc/3100/cmdline", "nvidia-cuda-mps-control -d");
    has_evidence(m, "/tmp/nvidia-mps/control", "present");
    assert!(m
        .explanation
        .contains("NVIDIA states no such limit for the Range Profiling API"));
    has_fix(m, "echo quit | nvidia-cuda-mps-control");
    let t = check(&r, "tool-conflicts");
    assert_eq!(t.status, Status::Warn);
    has_evidence(t, "/proc/3200/cmdline", "compute-sanitizer --tool memcheck");
    has_fix(t, "run one tool at a time");
}

#[test]
fn container_without_sys_admin_points_at_the_host() {
    let r = run("container-no-sysadmin");
    let c = check(&r, "container");
    assert_eq!(c.status, Status::Fail);
    has_evidence(c, "/.dockerenv", "present");
    has_evidence(c, "/proc/1/cgroup", "docker");
    has_evidence(
        c,
        "/proc/self/status",
        "root (uid 0), holding neither CAP_SYS_ADMIN nor CAP_PERFMON",
    );
    has_fix(c, "--cap-add=SYS_ADMIN");
    has_fix(c, "host");
    assert!(c.explanation.contains("host"));
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Fail);
    has_fix(a, "HOST");
    // The host's distribution is unknown from inside: both initramfs commands, labelled.
    has_fix(a, "update-initramfs -u -k all     # Debian/Ubuntu host");
    has_fix(a, "dracut --regenerate-all -f     # Red Hat-like host");
    assert_eq!(r.exit_status, 1);
}

#[test]
fn cupti_13_on_a_12x_driver_is_not_initialized() {
    let r = run("cupti13-driver12");
    let c = check(&r, "cupti-library");
    assert_eq!(c.status, Status::Fail);
    has_evidence(c, "/usr/local/cuda/extras/CUPTI/lib64", "libcupti.so.13");
    has_evidence(c, "/usr/local/cuda/version.json", "cuda_cupti 13.0");
    has_evidence(c, "/proc/driver/nvidia/version", "570.86.15");
    assert!(c.summary.contains("CUPTI_ERROR_NOT_INITIALIZED"));
    has_fix(c, "580.65.06");
    assert!(!r.tracing_available);
    assert_eq!(r.exit_status, 2);
}

#[test]
fn no_driver_means_no_tracing() {
    let r = run("no-driver");
    let d = check(&r, "driver");
    assert_eq!(d.status, Status::Fail);
    has_evidence(d, "/proc/driver/nvidia/version", "(absent)");
    has_fix(d, "modprobe nvidia");
    // No driver is not a container problem.
    assert_eq!(check(&r, "container").status, Status::Ok);
    assert_eq!(r.exit_status, 2);
}

#[test]
fn json_has_the_documented_shape() {
    let r = run("admin-only-unprivileged");
    let v = serde_json::to_value(&r).expect("serializes");
    let checks = v["checks"].as_array().expect("checks array");
    let ids: Vec<&str> = checks.iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "driver",
            "counter-access",
            "config-drift",
            "counter-holders",
            "mig",
            "mps",
            "tool-conflicts",
            "cupti-library",
            "container"
        ]
    );
    for c in checks {
        for key in ["id", "status", "evidence", "explanation", "fix"] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
    }
    assert_eq!(checks[1]["status"], "fail");
    assert_eq!(
        checks[1]["evidence"][0]["file"],
        "/proc/driver/nvidia/params"
    );
    assert_eq!(v["exit_status"], 1);
}

#[test]
fn conf_says_1_running_says_0_warns_about_the_next_boot() {
    let r = run("conf-drift-reverse");
    let c = check(&r, "config-drift");
    assert_eq!(c.status, Status::Warn);
    // /etc overrides the same file name in /usr/lib.
    has_evidence(
        c,
        "/etc/modprobe.d/nvidia-profiling.conf",
        "NVreg_RestrictProfilingToAdminUsers=1",
    );
    has_evidence(c, "/proc/driver/nvidia/params", "RmProfilingAdminOnly: 0");
    assert!(c.summary.contains("next boot"));
    has_fix(c, "update-initramfs");
    assert_eq!(r.exit_status, 0);
}

#[test]
fn r610_without_a_grant_says_the_flag_is_only_the_regkey() {
    let r = run("r610-no-grant");
    let a = check(&r, "counter-access");
    assert_eq!(a.status, Status::Fail);
    has_evidence(
        a,
        "/proc/driver/nvidia/capabilities/profiler-context",
        "DeviceFileMode: 256",
    );
    assert!(a.explanation.contains("only reflects the regkey"));
    has_fix(
        a,
        "grep DeviceFileMinor /proc/driver/nvidia/capabilities/profiler-context",
    );
    assert_eq!(r.exit_status, 1);
}
