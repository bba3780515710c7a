//! Which kernels are communication: one table of name rules ([`COMM_RULES`]) for every reader
//! and analysis (the Kineto importer joins collectives to these kernels; the verdict and a job
//! analysis union them as communication time; the monitor counts them).

/// How a rule matches a kernel name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatch {
    /// The name, its `void ` and its Itanium `_Z<len>` prefix taken off, starts with this.
    Prefix(&'static str),
    /// The name contains one of these (the demangled and the mangled spelling of a namespace or
    /// function, which no prefix can match: `void deep_ep::intranode::dispatch<…>`).
    Contains(&'static [&'static str]),
}

/// One rule of the table: what it matches, the library whose kernels those are, and where the
/// names come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommRule {
    /// Stable, for reports and scripts.
    pub rule: &'static str,
    pub library: &'static str,
    pub matches: NameMatch,
    pub source: &'static str,
}

/// The communication kernels cutrace knows, in the order they are tried. RCCL, ROCm's port of
/// NCCL, keeps NCCL's names. NCCL's `oneRankReduce`, which a group of one rank runs for a scaled
/// reduction, moves no data between GPUs and is not here; nor is DeepEP's `deep_ep::layout`,
/// which only counts tokens per rank.
pub const COMM_RULES: [CommRule; 7] = [
    CommRule {
        rule: "nccl_dev_kernel",
        library: "NCCL / RCCL",
        matches: NameMatch::Prefix("ncclDevKernel_"),
        source: "NCCL 2.19+ `ncclDevKernel_<Op>_…` (ncclDevKernel_AllReduce_Sum_f32_RING_LL, \
                 ncclDevKernel_Generic_4)",
    },
    CommRule {
        rule: "nccl_kernel",
        library: "NCCL / RCCL",
        matches: NameMatch::Prefix("ncclKernel_"),
        source: "NCCL before 2.19 (ncclKernel_AllReduce_RING_LL_Sum_float)",
    },
    CommRule {
        rule: "nccl_symmetric",
        library: "NCCL",
        matches: NameMatch::Prefix("ncclSymkDevKernel_"),
        source: "NCCL 2.27+ symmetric-memory kernels (src/device/symmetric/generate.py)",
    },
    CommRule {
        rule: "msccl",
        library: "MSCCL",
        matches: NameMatch::Prefix("mscclKernel_"),
        source: "MSCCL's kernels (mscclKernel_Sum_float_LL)",
    },
    CommRule {
        rule: "deepep",
        library: "DeepEP",
        matches: NameMatch::Contains(&[
            "deep_ep::intranode::",
            "deep_ep::internode::",
            "deep_ep::internode_ll::",
            "7deep_ep9intranode",
            "7deep_ep9internode",
            "7deep_ep12internode_ll",
        ]),
        source: "DeepEP's expert-parallel dispatch and combine (csrc/kernels: namespaces \
                 deep_ep::intranode, internode, internode_ll)",
    },
    CommRule {
        rule: "custom_all_reduce",
        library: "vLLM / SGLang / AIter custom all-reduce",
        matches: NameMatch::Contains(&["cross_device_reduce_1stage", "cross_device_reduce_2stage"]),
        source: "vLLM's csrc/custom_all_reduce.cuh (vllm::cross_device_reduce_1stage, _2stage), \
                 kept by SGLang and AIter",
    },
    CommRule {
        rule: "mscclpp",
        library: "MSCCL++",
        matches: NameMatch::Contains(&["mscclpp::", "6mscclpp"]),
        source: "MSCCL++'s kernels and the kernels that take its device handles name its \
                 namespace, mscclpp",
    },
];

/// The rule that makes `name` (as CUPTI or Kineto reports it: mangled or demangled, with or
/// without its parameter list) a communication kernel; `None` for any other kernel.
pub fn comm_rule(name: &str) -> Option<&'static CommRule> {
    let base = unmangled_start(name.strip_prefix("void ").unwrap_or(name));
    COMM_RULES.iter().find(|r| match r.matches {
        NameMatch::Prefix(p) => base.starts_with(p),
        NameMatch::Contains(words) => words.iter().any(|w| name.contains(w)),
    })
}

/// Whether `name` is a communication kernel: one some rule of [`COMM_RULES`] matches.
pub fn is_comm_kernel(name: &str) -> bool {
    comm_rule(name).is_some()
}

/// The name prefixes of NCCL's and MSCCL's kernels, whose next word is the collective.
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

    /// Beyond NCCL: each rule names its kernels in both spellings, and says which it is.
    #[test]
    fn communication_beyond_nccl_is_told_and_named_by_its_rule() {
        for (name, rule) in [
            (
                "void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*)",
                "deepep",
            ),
            ("void deep_ep::internode_ll::combine<true>(void*)", "deepep"),
            ("_ZN7deep_ep9internode8dispatchILb0ELi2EEEvP4int4", "deepep"),
            (
                "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)",
                "custom_all_reduce",
            ),
            (
                "void sglang::cross_device_reduce_2stage<__half, 4>(sglang::RankData*)",
                "custom_all_reduce",
            ),
            (
                "_ZN4vllm26cross_device_reduce_1stageI6__halfLi2EEEvPNS_8RankDataE",
                "custom_all_reduce",
            ),
            ("ncclDevKernel_SendRecv", "nccl_dev_kernel"),
            ("void mscclpp::allreduce6<float>(float*)", "mscclpp"),
        ] {
            assert_eq!(comm_rule(name).map(|r| r.rule), Some(rule), "{name}");
        }
        for name in [
            "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long*, int*)",
            "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*)",
        ] {
            assert!(comm_rule(name).is_none(), "{name}");
        }
        let mut rules: Vec<&str> = COMM_RULES.iter().map(|r| r.rule).collect();
        rules.sort_unstable();
        rules.dedup();
        assert_eq!(rules.len(), COMM_RULES.len(), "rule names are unique");
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
