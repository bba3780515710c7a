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
pub const COMM_RULES: [CommRule; 12] = [
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
    // The names below appear whole in the mangled and the demangled spelling alike, whatever
    // namespace (TensorRT-LLM's inline `_v1`, an anonymous one) or `static` surrounds them;
    // the local kernels beside them (rms_norm_kernel, lamport_initialize_kernel, the
    // low-precision preprocess kernels) are not matched.
    CommRule {
        rule: "trtllm_all_reduce",
        library: "TensorRT-LLM / FlashInfer custom and fused all-reduce",
        matches: NameMatch::Contains(&[
            "oneShotAllReduceKernel",
            "twoShotAllReduceKernel",
            "all_reduce_norm_kernel",
            "allreduce_fusion_kernel_",
            "twoshot_allreduce_kernel",
            "twoshotAllreduceKernel",
            "AllreduceFusionKernel",
            "lowPrecisionTwoShot",
        ]),
        source: "TensorRT-LLM cpp/tensorrt_llm/kernels/customAllReduceKernels.cu \
                 (oneShotAllReduceKernel, twoShotAllReduceKernel, reduce_fusion's \
                 one_shot_all_reduce_norm_kernel) and communicationKernels/ (ar_fusion's \
                 allreduce_fusion_kernel_oneshot_lamport, mnnvl's twoshot_allreduce_kernel and \
                 oneshotAllreduceFusionKernel, lowPrecisionTwoShotAllReduceKernel); FlashInfer's \
                 trtllm_allreduce ports keep the names",
    },
    CommRule {
        rule: "moe_all_to_all",
        library: "TensorRT-LLM / FlashInfer MoE all-to-all",
        matches: NameMatch::Contains(&[
            "moeAllToAllKernel",
            "moeA2ADispatchKernel",
            "moeA2ACombineKernel",
            "helixAllToAllKernel",
            "ulysses_a2a_kernel",
        ]),
        source: "TensorRT-LLM kernels::moe_alltoall (moeA2ADispatchKernel, moeA2ACombineKernel), \
                 helixAllToAllKernel; FlashInfer trtllm_alltoall (moeAllToAllKernel), \
                 comm::ulysses (ulysses_a2a_kernel)",
    },
    CommRule {
        rule: "userbuffers",
        library: "userbuffers (Transformer Engine, TensorRT-LLM)",
        matches: NameMatch::Contains(&["userbuffers_", "kuserbuffers_"]),
        source: "Transformer Engine common/comm_gemm_overlap/userbuffers/userbuffers.cu \
                 (userbuffers_fp16_sum_inplace_gpu_rr_rs, kuserbuffers_pushsend …) and \
                 TensorRT-LLM kernels/userbuffers (kernels::ub); not Transformer Engine's \
                 GEMM-overlap producer/consumer kernels",
    },
    CommRule {
        rule: "nvshmem",
        library: "NVSHMEM (host-initiated, on a stream)",
        matches: NameMatch::Contains(&[
            "alltoall_on_stream_kernel",
            "broadcast_on_stream_kernel",
            "fcollect_on_stream_kernel",
            "rdxn_on_stream_kernel",
            "reducescatter_on_stream_kernel",
            "barrier_on_stream_kernel",
            "sync_on_stream_kernel",
            "sync_all_on_stream_kernel",
        ]),
        source: "NVSHMEM src/include/internal/non_abi/nvshmemi_h_to_d_{coll,sync}_defs.cuh; \
                 communication a kernel of the program's own initiates on the device has no \
                 name of NVSHMEM's (DeepEP's kernels are the rule above)",
    },
    CommRule {
        rule: "torch_symmetric_memory",
        library: "PyTorch SymmetricMemory",
        matches: NameMatch::Contains(&[
            "_shot_all_reduce_kernel",
            "multimem_all_reduce_kernel",
            "multimem_one_shot",
            "multimem_all_gather_kernel",
            "symmetric_memory::",
            "16symmetric_memory",
            "nvshmem_extension::",
            "17nvshmem_extension",
        ]),
        source: "PyTorch torch/csrc/distributed/c10d/symm_mem/: CUDASymmetricMemoryOps.cu \
                 (one_shot_all_reduce_kernel, two_shot_all_reduce_kernel, multimem_*), \
                 CUDASymmetricMemory.cu (c10d::symmetric_memory barrier and signal kernels), \
                 nvshmem_extension.cu (allToAllV)",
    },
];

/// A matcher of kernel names the user adds to the table (`cutrace report --comm-kernels REGEX`).
pub type UserMatcher = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// The user's rule, tried after the table; set once per process, before any trace is read.
static USER_RULE: std::sync::OnceLock<UserMatcher> = std::sync::OnceLock::new();

/// The rule reported for kernels the user's matcher classified.
pub static USER_COMM_RULE: CommRule = CommRule {
    rule: "comm_kernels",
    library: "--comm-kernels",
    matches: NameMatch::Contains(&[]),
    source: "the user's --comm-kernels REGEX, matched against the kernel name as recorded",
};

/// Adds the user's matcher after the table, for the rest of the process. `false` when one was
/// set already (it is kept).
pub fn set_user_rule(m: UserMatcher) -> bool {
    USER_RULE.set(m).is_ok()
}

/// The rule that makes `name` (as CUPTI or Kineto reports it: mangled or demangled, with or
/// without its parameter list) a communication kernel: the first of the table's that matches,
/// else the user's ([`set_user_rule`]); `None` for any other kernel.
pub fn comm_rule(name: &str) -> Option<&'static CommRule> {
    let base = unmangled_start(name.strip_prefix("void ").unwrap_or(name));
    COMM_RULES
        .iter()
        .find(|r| match r.matches {
            NameMatch::Prefix(p) => base.starts_with(p),
            NameMatch::Contains(words) => words.iter().any(|w| name.contains(w)),
        })
        .or_else(|| {
            USER_RULE
                .get()
                .filter(|_| user_matches(name))
                .map(|_| &USER_COMM_RULE)
        })
}

/// The user's matcher on `name`, remembered per name for this thread: a trace repeats a few
/// names over many kernels, and a costly REGEX then runs once per name, not per kernel. The
/// memory is bounded (cleared past 4,096 names).
fn user_matches(name: &str) -> bool {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static SEEN: RefCell<HashMap<String, bool>> = RefCell::new(HashMap::new());
    }
    let Some(m) = USER_RULE.get() else {
        return false;
    };
    SEEN.with(|seen| {
        if let Some(&hit) = seen.borrow().get(name) {
            return hit;
        }
        let hit = m(name);
        let mut seen = seen.borrow_mut();
        if seen.len() >= 4096 {
            seen.clear();
        }
        seen.insert(name.to_owned(), hit);
        hit
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
            (
                "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>\
                 (tensorrt_llm::kernels::AllReduceParams)",
                "trtllm_all_reduce",
            ),
            (
                "_ZN12tensorrt_llm3_v17kernelsL22twoShotAllReduceKernelIfLi4EEEvNS1_15AllReduceParamsE",
                "trtllm_all_reduce",
            ),
            (
                "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport\
                 <__nv_bfloat16, 8>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams)",
                "trtllm_all_reduce",
            ),
            (
                "void tensorrt_llm::kernels::moe_alltoall::moeA2ADispatchKernel<8>(void*)",
                "moe_all_to_all",
            ),
            (
                "userbuffers_fp16_sum_inplace_gpu_rr_rs(int, int, int, int, int, void**, int, int)",
                "userbuffers",
            ),
            ("_Z23kuserbuffers_pushsendPiS_", "userbuffers"),
            ("void rdxn_on_stream_kernel<float, (rdxn_ops)0>(int, float*)", "nvshmem"),
            (
                "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>\
                 (c10::BFloat16**, unsigned long, unsigned long)",
                "torch_symmetric_memory",
            ),
            (
                "_ZN4c10d16symmetric_memory14barrier_kernelEPPjiii",
                "torch_symmetric_memory",
            ),
        ] {
            assert_eq!(comm_rule(name).map(|r| r.rule), Some(rule), "{name}");
        }
        for name in [
            "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long*, int*)",
            "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*)",
            // Local kernels beside the communication ones, and generic words.
            "void tensorrt_llm::kernels::reduce_fusion::rms_norm_kernel<__half>(void*)",
            "void tensorrt_llm::kernels::lamport_initialize_kernel<float>(float*, unsigned long)",
            "void transformer_engine::producer_kernel(void*, int, int, int)",
            "void my_allreduce_kernel<float>(float*)",
            "void barrier_kernel(int*)",
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
