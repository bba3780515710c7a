//! Which RUNTIME/DRIVER API calls get an activity record (`cutrace record --api`), decided by
//! the API function's name as `cuptiGetCallbackName` spells it. Pure functions: the injection
//! enumerates the callback ids, asks [`keeps`] for each, and enables records only for the ids
//! kept (`cuptiActivityEnableRuntimeApi` / `cuptiActivityEnableDriverApi`).
//!
//! Kernel, memcpy and memset records keep their launching call in every mode: each mode keeps
//! every call that launches a kernel or moves or sets memory, and those are the calls these
//! records point back to by correlation id. Not every record keeps its call, though: `launches`
//! drops the synchronization calls (cudaStreamSynchronize, cudaEventSynchronize, ...) while the
//! sync kind still records the synchronizations, so in that mode synchronization records point
//! to API calls that are not in the trace.

/// `cutrace record --api`: which calls get records (the contract's type; `lean` leaves out the
/// state queries in [`QUERY_CALLS`], the default: BENCHMARKS.md, "Record configurations compared
/// inside one process", 2026-11-30, those records cost 5.6 % of an eager PyTorch op under
/// tracing; `launches` keeps only calls that launch work or move/set memory
/// ([`is_launch_or_copy`]), so synchronization records then have no API call).
pub use cutrace_settings::ApiMode;

/// API calls `lean` does not record. The criterion for a name to be here: the call returns
/// state and launches, moves, allocates, synchronizes, creates or destroys nothing, so no
/// kernel, memcpy, memset or synchronization record can point to it by correlation id. They are
/// most of the records of an eager PyTorch op (measured on CUDA 13.0: 6 cudaGetDevice,
/// 2 cuDevicePrimaryCtxGetState, cudaGetLastError and cuKernelGetName per `t + 1.0`, beside the
/// one cudaLaunchKernel). Names are compared after [`normalize`]. A call that sets state
/// (cudaSetDevice, cuCtxSetCurrent, cuCtxPushCurrent) is not a query: it may create a context.
/// Nor is a query on a function (cudaFuncGetAttributes, cuFuncGetAttribute,
/// cuKernelGetAttribute): with lazy module loading (the default since CUDA 12.2) it can load the
/// module or kernel and JIT its PTX, a cost `lean` must not hide.
/// The first five are the ones measured per eager op (and in each trace's note they come first).
pub const QUERY_CALLS: &[&str] = &[
    "cudaGetDevice",
    "cudaGetLastError",
    "cuDevicePrimaryCtxGetState",
    "cuKernelGetName",
    "cuDeviceGetAttribute",
    // Runtime API.
    "cudaPeekAtLastError",
    "cudaGetDeviceCount",
    "cudaDeviceGetAttribute",
    "cudaGetDeviceProperties",
    "cudaGetDeviceFlags",
    "cudaDeviceGetLimit",
    "cudaDeviceGetStreamPriorityRange",
    "cudaDeviceGetPCIBusId",
    "cudaDriverGetVersion",
    "cudaRuntimeGetVersion",
    "cudaPointerGetAttributes",
    "cudaFuncGetName",
    "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo",
    "cudaStreamGetPriority",
    "cudaStreamGetFlags",
    "cudaStreamGetId",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPointByVersion",
    // Driver API.
    "cuFuncGetName",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuDeviceTotalMem",
    "cuDeviceGetPCIBusId",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxGetFlags",
    "cuCtxGetId",
    "cuCtxGetApiVersion",
    "cuCtxGetLimit",
    "cuCtxGetStreamPriorityRange",
    "cuPointerGetAttribute",
    "cuPointerGetAttributes",
    "cuGetProcAddress",
    "cuDriverGetVersion",
    "cuStreamIsCapturing",
    "cuStreamGetCaptureInfo",
    "cuStreamGetPriority",
    "cuStreamGetFlags",
    "cuStreamGetId",
    "cuStreamGetCtx",
    "cuGetErrorString",
    "cuGetErrorName",
    "cuLibraryGetKernel",
    "cuModuleGetLoadingMode",
];

/// An API name without CUPTI's version and per-thread-stream suffixes, in any order:
/// `cudaLaunchKernel_v7000`, `cudaLaunchKernel_ptsz_v7000` → `cudaLaunchKernel`;
/// `cuMemcpyDtoH_v2` → `cuMemcpyDtoH`; `cuMemcpyHtoDAsync_v2_ptsz` → `cuMemcpyHtoDAsync`.
pub fn normalize(name: &str) -> &str {
    let mut n = name;
    loop {
        let before = n.len();
        if let Some(s) = n.strip_suffix("_ptsz").or_else(|| n.strip_suffix("_ptds")) {
            n = s;
        }
        let stripped = crate::decode::strip_version_suffix(n);
        if !stripped.is_empty() {
            n = stripped;
        }
        if n.len() == before {
            return n;
        }
    }
}

/// `launches`' criterion, on a normalised name: the call launches work (a kernel, a host
/// function, a graph) or moves or sets memory. Graph-building calls (`cudaGraphAddMemcpyNode`)
/// only describe work: of the `Graph` names only the launches count.
pub fn is_launch_or_copy(name: &str) -> bool {
    if name.contains("Graph") {
        return name.contains("GraphLaunch");
    }
    // `cudaLaunch` is the legacy launch (before cudaLaunchKernel); `cudaLaunchKernel` & co.
    // match below.
    name.starts_with("cuLaunch")
        || name == "cudaLaunch"
        || [
            "LaunchKernel",
            "LaunchCooperativeKernel",
            "LaunchHostFunc",
            "Memcpy",
            "Memset",
            "MemPrefetch",
        ]
        .iter()
        .any(|p| name.contains(p))
}

/// A state query `lean` leaves out (normalised name).
pub fn is_query(name: &str) -> bool {
    QUERY_CALLS.contains(&name)
}

/// Whether `mode` records the call named `raw` (as `cuptiGetCallbackName` gives it).
pub fn keeps(mode: ApiMode, raw: &str) -> bool {
    let n = normalize(raw);
    match mode {
        ApiMode::All => true,
        ApiMode::Lean => !is_query(n),
        ApiMode::Launches => is_launch_or_copy(n),
    }
}

/// What filtering did for one API domain, for the trace's notes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Callback ids enabled one by one.
    pub kept: usize,
    /// Normalised names of the ids left out, without repeats, in callback-id order.
    pub dropped_names: Vec<String>,
    /// Callback ids left out.
    pub dropped: usize,
    /// Normalised names of the ids kept, without repeats (for `launches`' note).
    pub kept_names: Vec<String>,
    /// Normalised names of kept ids CUPTI refused to enable (so not recorded either); only
    /// calls that launch or copy nothing are let go that way (see `enable_api_calls`).
    pub refused_names: Vec<String>,
}

/// Splits enumerated `(cbid, raw name)` pairs into the ids to enable (with their normalised
/// names) and the outcome.
pub fn split(mode: ApiMode, names: &[(u32, String)]) -> (Vec<(u32, String)>, Outcome) {
    let mut ids = Vec::new();
    let mut o = Outcome::default();
    for (cbid, raw) in names {
        let n = normalize(raw).to_owned();
        if keeps(mode, raw) {
            ids.push((*cbid, n.clone()));
            o.kept += 1;
            if !o.kept_names.contains(&n) {
                o.kept_names.push(n);
            }
        } else {
            o.dropped += 1;
            if !o.dropped_names.contains(&n) {
                o.dropped_names.push(n);
            }
        }
    }
    (ids, o)
}

/// At most `max` names joined by ", ", then "… (N more)".
pub fn short_list(names: &[String], max: usize) -> String {
    let mut s = names
        .iter()
        .take(max)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        s.push_str(&format!(", … ({} more)", names.len() - max));
    }
    s
}

/// The trace note for a mode that filtered: counts per domain and the names it concerns.
/// `runtime`/`driver` are `None` for a domain that was not filtered.
pub fn note(mode: ApiMode, runtime: Option<&Outcome>, driver: Option<&Outcome>) -> String {
    let count = |o: Option<&Outcome>, f: fn(&Outcome) -> usize, what: &str| {
        o.map(|o| format!("{} {what}", f(o)))
    };
    let join = |a: Option<String>, b: Option<String>| match (a, b) {
        (Some(a), Some(b)) => format!("{a} and {b}"),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => "no".into(),
    };
    let names = |f: fn(&Outcome) -> &Vec<String>| {
        let mut v: Vec<String> = Vec::new();
        for o in [runtime, driver].into_iter().flatten() {
            v.extend(f(o).iter().cloned());
        }
        v
    };
    let refused = names(|o| &o.refused_names);
    let refused = if refused.is_empty() {
        String::new()
    } else {
        format!(
            "; CUPTI refused to enable {} more, not recorded either: {}",
            refused.len(),
            short_list(&refused, 6)
        )
    };
    let text = match mode {
        ApiMode::All => "api records: all".into(),
        ApiMode::Lean => {
            let mut dropped = names(|o| &o.dropped_names);
            // The calls that matter most (QUERY_CALLS' order) first.
            dropped.sort_by_key(|n| QUERY_CALLS.iter().position(|q| q == n));
            let counts = join(
                count(runtime, |o| o.dropped, "runtime"),
                count(driver, |o| o.dropped, "driver"),
            );
            format!(
                "api records: lean — {counts} state-query callbacks not recorded by choice \
                 (they launch, move, allocate and synchronize nothing; `--api all` records \
                 them): {}",
                short_list(&dropped, 12)
            )
        }
        ApiMode::Launches => format!(
            "api records: launches — only {} callbacks that launch work or move/set memory are \
             recorded ({}); the other {} API calls (allocations, synchronizations, queries, \
             creations) are not recorded by choice, so synchronization records have no API call",
            join(
                count(runtime, |o| o.kept, "runtime"),
                count(driver, |o| o.kept, "driver")
            ),
            short_list(&names(|o| &o.kept_names), 8),
            join(
                count(runtime, |o| o.dropped, "runtime"),
                count(driver, |o| o.dropped, "driver")
            ),
        ),
    };
    text + &refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_strips_version_and_per_thread_suffixes() {
        assert_eq!(normalize("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(normalize("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel");
        assert_eq!(normalize("cudaMemcpy_ptds_v7000"), "cudaMemcpy");
        assert_eq!(normalize("cuMemcpyDtoH_v2"), "cuMemcpyDtoH");
        assert_eq!(normalize("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
        assert_eq!(normalize("cuMemcpy_ptds"), "cuMemcpy");
        assert_eq!(normalize("cudaGetDevice_v3020"), "cudaGetDevice");
        assert_eq!(
            normalize("cuDevicePrimaryCtxGetState"),
            "cuDevicePrimaryCtxGetState"
        );
        assert_eq!(normalize("cuLaunchKernel"), "cuLaunchKernel");
        // Not a version: kept as it is.
        assert_eq!(normalize("foo_v"), "foo_v");
        assert_eq!(normalize("_v2"), "_v2");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn lean_drops_the_queries_of_an_eager_op_and_keeps_the_work() {
        for q in [
            "cudaGetDevice_v3020",
            "cudaGetLastError_v3020",
            "cuDevicePrimaryCtxGetState",
            "cuKernelGetName",
            "cuDeviceGetAttribute",
            "cudaStreamGetCaptureInfo_v2_v11030",
            "cudaStreamIsCapturing_ptsz_v10000",
            "cuCtxGetCurrent",
        ] {
            assert!(!keeps(ApiMode::Lean, q), "{q}");
            assert!(keeps(ApiMode::All, q), "{q}");
        }
        for w in [
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernel_ptsz_v7000",
            "cudaMemcpyAsync_v3020",
            "cudaMalloc_v3020",
            "cudaFree_v3020",
            "cudaStreamSynchronize_v3020",
            "cudaDeviceSynchronize_v3020",
            "cudaStreamCreateWithPriority_v5050",
            "cudaEventRecord_v3020",
            "cudaSetDevice_v3020",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuMemAlloc_v2",
            "cuCtxSetCurrent",
            "cuLibraryLoadData",
            "cuModuleLoadData",
            "cudaGraphLaunch_v10000",
            // May load a module and JIT it (lazy loading): not a plain query.
            "cudaFuncGetAttributes_v3020",
            "cuFuncGetAttribute",
            "cuKernelGetAttribute",
        ] {
            assert!(keeps(ApiMode::Lean, w), "{w}");
        }
    }

    #[test]
    fn launches_keeps_only_launch_and_copy_calls() {
        for w in [
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernelExC_v11060",
            "cudaLaunchCooperativeKernel_v9000",
            "cudaLaunchHostFunc_v10000",
            "cudaGraphLaunch_v10000",
            "cudaMemcpyAsync_v3020",
            "cudaMemcpy2DAsync_ptsz_v7000",
            "cudaMemsetAsync_v3020",
            "cudaMemPrefetchAsync_v8000",
            "cuLaunchKernel",
            "cuLaunchKernel_ptsz",
            "cuLaunchGrid",
            "cuGraphLaunch",
            "cuMemcpyHtoD_v2",
            "cuMemsetD8Async",
            "cudaLaunch_v3020",
            "cudaLaunch_ptsz_v7000",
        ] {
            assert!(keeps(ApiMode::Launches, w), "{w}");
        }
        for d in [
            "cudaGetDevice_v3020",
            "cudaMalloc_v3020",
            "cudaStreamSynchronize_v3020",
            "cudaEventRecord_v3020",
            "cudaGraphAddMemcpyNode_v10000",
            "cudaGraphExecMemsetNodeSetParams_v11000",
            "cuGraphInstantiate",
            "cuKernelGetName",
            "cuLibraryGetKernel",
            "cudaLaunchFoo",
        ] {
            assert!(!keeps(ApiMode::Launches, d), "{d}");
        }
    }

    #[test]
    fn no_query_launches_work() {
        // The deny list never touches a call that correlation depends on.
        for q in QUERY_CALLS {
            assert!(!is_launch_or_copy(q), "{q}");
            assert_eq!(normalize(q), *q, "{q} is stored normalised");
        }
    }

    #[test]
    fn modes_parse_and_notes_name_what_is_missing() {
        assert_eq!(ApiMode::parse("lean"), Some(ApiMode::Lean));
        assert_eq!(ApiMode::parse("all"), Some(ApiMode::All));
        assert_eq!(ApiMode::parse("launches"), Some(ApiMode::Launches));
        assert_eq!(ApiMode::parse("some"), None);
        let names: Vec<(u32, String)> = [
            (10, "cudaGetLastError_v3020"),
            (17, "cudaGetDevice_v3020"),
            (41, "cudaMemcpyAsync_v3020"),
            (131, "cudaStreamSynchronize_v3020"),
            (211, "cudaLaunchKernel_v7000"),
            (212, "cudaLaunchKernel_ptsz_v7000"),
        ]
        .iter()
        .map(|&(c, n)| (c, n.to_string()))
        .collect();
        let ids_of = |v: Vec<(u32, String)>| v.into_iter().map(|(c, _)| c).collect::<Vec<_>>();
        let (ids, mut o) = split(ApiMode::Lean, &names);
        assert_eq!(ids_of(ids), vec![41, 131, 211, 212]);
        assert_eq!(o.dropped, 2);
        assert_eq!(o.dropped_names, vec!["cudaGetLastError", "cudaGetDevice"]);
        let n = note(ApiMode::Lean, Some(&o), None);
        assert!(n.starts_with("api records: lean"), "{n}");
        assert!(n.contains("2 runtime"), "{n}");
        assert!(n.contains("cudaGetDevice, cudaGetLastError"), "{n}");
        assert!(!n.contains("refused"), "{n}");
        o.refused_names.push("cudaStreamSynchronize".into());
        let n = note(ApiMode::Lean, Some(&o), None);
        assert!(
            n.ends_with(
                "; CUPTI refused to enable 1 more, not recorded either: cudaStreamSynchronize"
            ),
            "{n}"
        );
        let (ids, o) = split(ApiMode::Launches, &names);
        assert_eq!(ids_of(ids), vec![41, 211, 212]);
        assert_eq!(o.kept_names, vec!["cudaMemcpyAsync", "cudaLaunchKernel"]);
        let n = note(ApiMode::Launches, Some(&o), Some(&Outcome::default()));
        assert!(n.contains("3 runtime and 0 driver"), "{n}");
        let many: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        assert_eq!(short_list(&many[..2], 3), "f0, f1");
        assert!(short_list(&many, 3).ends_with("f2, … (17 more)"));
    }
}
