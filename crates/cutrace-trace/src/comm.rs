//! Which kernels are communication: NCCL's and RCCL's collective and point-to-point kernels.
//!
//! One definition for every reader and analysis (the Kineto importer joins collectives to these
//! kernels; a job analysis unions them as communication time).

/// Whether `name` (as CUPTI or Kineto reports it: mangled or demangled, with or without its
/// parameter list) is a communication kernel of NCCL or RCCL (ROCm's port, which keeps NCCL's
/// names) or of MSCCL. NCCL names its kernels `ncclDevKernel_<Op>_…` since 2.19 and
/// `ncclKernel_<Op>_…` before (e.g. `ncclDevKernel_AllReduce_Sum_f32_RING_LL`,
/// `ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclDevKernel_Generic_4`); its symmetric-memory
/// kernels (2.27+, `src/device/symmetric/generate.py`) `ncclSymkDevKernel_<Coll>_<Algo>…`;
/// MSCCL's are `mscclKernel_…`. (NCCL's `oneRankReduce`, which a group of one rank runs for a
/// scaled reduction, moves no data between GPUs and is not counted.)
pub fn is_comm_kernel(name: &str) -> bool {
    let base = unmangled_start(name.strip_prefix("void ").unwrap_or(name));
    COMM_PREFIXES.iter().any(|p| base.starts_with(p))
}

/// The name prefixes of communication kernels ([`is_comm_kernel`]).
pub const COMM_PREFIXES: [&str; 4] = [
    "ncclDevKernel_",
    "ncclKernel_",
    "ncclSymkDevKernel_",
    "mscclKernel_",
];

/// The name with an Itanium mangling prefix taken off: `_Z` and the length of the first name
/// (`_Z32ncclDevKernel_AllReduce…` → `ncclDevKernel_AllReduce…`); `_ZN` names (in a namespace)
/// are kept whole, as NCCL's kernels are not in one. Any other name is returned as is.
fn unmangled_start(name: &str) -> &str {
    let Some(rest) = name.strip_prefix("_Z") else {
        return name;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return name;
    }
    &rest[digits..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_and_rccl_kernel_names_are_communication() {
        for name in [
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_SendRecv",
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllGather_RING_LL_Sum_int8_t",
            "_Z32ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            "_Z24ncclDevKernel_Generic_424ncclDevKernelArgsStorageILm4096EE",
            "mscclKernel_Sum_float_LL",
            "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_f32(ncclSymkDevWorkArgs4K)",
        ] {
            assert!(is_comm_kernel(name), "{name}");
        }
    }

    #[test]
    fn other_kernels_are_not_communication() {
        for name in [
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma",
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
            // The word appears, but not as NCCL's kernel prefix.
            "my_ncclDevKernel_lookalike",
            "ncclMemcpy",
            "_Z",
            "_Zx",
            "_Z12",
            "",
            "Memcpy DtoD (Device -> Device)",
        ] {
            assert!(!is_comm_kernel(name), "{name}");
        }
    }
}
