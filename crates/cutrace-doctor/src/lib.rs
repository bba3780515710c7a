//! cutrace-doctor: admin checks over a filesystem root (why can't I profile here?) and the live
//! Range Profiler probe. (The ELF audit is `cutrace-audit`; the DCGM pause guard `cutrace-dcgm`.)
//!
//! The rules every check applies come from NVIDIA's pages (CUPTI's guide, the ERR_NVGPUCTRPERM
//! page, the DCGM overview, nv-reg.h); each `Check` carries its `sources`, and docs/DOCTOR.md
//! quotes them.

pub mod checks;
pub mod cupti_search;
pub mod elf;
pub mod facts;
pub mod probe;
pub mod report;
pub mod root;

pub use report::{Affects, Check, Evidence, Report, Status};
pub use root::Root;

/// Run every check against `root` (`/` for this machine).
pub fn doctor(root: &Root) -> Report {
    Report::new(root.base().display().to_string(), checks::run_all(root))
}
