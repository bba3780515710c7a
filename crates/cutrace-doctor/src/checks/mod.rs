//! The doctor's checks. Each is a pure function of a `Ctx` (facts read once from a `Root`) to a
//! `Check`; the rules they apply come from NVIDIA's pages (see `sources` on each check, and
//! docs/DOCTOR.md).

mod access;
mod container;
mod cupti_library;
mod driver;
mod gpu_modes;
mod processes;

use crate::facts::{self, DriverVersion, Identity, Process};
use crate::report::{Check, Evidence};
use crate::root::Root;

pub use container::ContainerInfo;
pub use cupti_library::{find_cupti, CuptiCandidate};

/// NVIDIA pages the rules come from.
pub mod src {
    pub const ERR_NVGPUCTRPERM: &str = "https://developer.nvidia.com/nvidia-development-tools-solutions-ERR_NVGPUCTRPERM-permission-issue-performance-counters";
    pub const NV_REG_H: &str =
        "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/kernel-open/nvidia/nv-reg.h";
    pub const DCGM: &str =
        "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html";
    pub const NCU: &str = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html";
    pub const CUPTI_MAIN: &str = "https://docs.nvidia.com/cupti/main/main.html";
    pub const CUPTI_SPECIAL: &str =
        "https://docs.nvidia.com/cupti/special-configurations/special-configurations.html";
    pub const MIG_CAPS: &str =
        "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/device-nodes-and-capabilities.html";
    pub const CUDA_DRIVER_TABLE: &str =
        "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html";
}

/// Facts read once and shared by the checks.
pub struct Ctx<'a> {
    pub root: &'a Root,
    pub driver_text: Option<String>,
    pub driver: Option<DriverVersion>,
    pub params: Option<String>,
    /// RmProfilingAdminOnly from /proc/driver/nvidia/params.
    pub admin_only: Option<u32>,
    pub identity: Option<Identity>,
    /// The processes examined: at most `facts::PROCESSES_MAX`, each command line bounded.
    pub procs: Vec<Process>,
    /// Processes not examined because of `facts::PROCESSES_MAX` (said in the evidence).
    pub procs_left_out: usize,
    pub container: ContainerInfo,
}

impl<'a> Ctx<'a> {
    pub fn read(root: &'a Root) -> Self {
        let driver_text = root.read(facts::DRIVER_VERSION_FILE);
        let driver = driver_text.as_deref().and_then(facts::parse_driver_version);
        let params = root.read(facts::DRIVER_PARAMS_FILE);
        let admin_only = params
            .as_deref()
            .and_then(|p| facts::param(p, "RmProfilingAdminOnly"))
            .and_then(|v| v.parse().ok());
        let identity = root
            .read(facts::SELF_STATUS_FILE)
            .as_deref()
            .and_then(Identity::parse);
        let facts::Processes {
            list: procs,
            left_out: procs_left_out,
        } = facts::processes(root);
        let container = ContainerInfo::detect(root);
        Ctx {
            root,
            driver_text,
            driver,
            params,
            admin_only,
            identity,
            procs,
            procs_left_out,
            container,
        }
    }

    /// Evidence that some processes were not examined, when there were too many.
    pub fn procs_left_out_evidence(&self) -> Option<Evidence> {
        (self.procs_left_out > 0).then(|| {
            Evidence::new(
                "/proc",
                format!(
                    "{} more processes not examined: the doctor examines at most {} (the lowest pids)",
                    self.procs_left_out,
                    facts::PROCESSES_MAX
                ),
            )
        })
    }

    /// An environment variable of the caller, from /proc/self/environ under the root.
    pub fn env(&self, key: &str) -> Option<String> {
        crate::cupti_search::env_var(self.root, key)
    }
}

/// All checks, in the order they are printed.
pub fn run_all(root: &Root) -> Vec<Check> {
    let ctx = Ctx::read(root);
    let access = access::counter_access(&ctx);
    vec![
        driver::driver(&ctx),
        access.check,
        access::config_drift(&ctx),
        processes::counter_holders(&ctx),
        gpu_modes::mig(&ctx),
        gpu_modes::mps(&ctx),
        processes::tool_conflicts(&ctx),
        cupti_library::cupti_library(&ctx),
        container::container(&ctx, access.allowed),
    ]
}
