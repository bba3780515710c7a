//! Builders for in-memory traces used by the analysis tests.
#![allow(dead_code)]

use cutrace_trace::{ApiCall, ApiKind, Interner, Kernel, Ns, NvtxRange, RangeDomain, Trace};

/// A kernel on `device`/`stream`, named `name` (interned into `strings`).
pub fn kernel(
    i: &mut Interner,
    name: &str,
    device: u32,
    stream: u64,
    corr: u64,
    start: Ns,
    end: Ns,
) -> Kernel {
    Kernel {
        device,
        context: 1,
        stream,
        correlation_id: corr,
        start_ns: start,
        end_ns: end,
        name: i.intern(name),
        grid: [1, 1, 1],
        block: [128, 1, 1],
        registers_per_thread: 32,
        static_shared_bytes: 0,
        dynamic_shared_bytes: 0,
        graph_id: 0,
    }
}

pub fn launch(i: &mut Interner, corr: u64, start: Ns, end: Ns) -> ApiCall {
    ApiCall {
        kind: ApiKind::Runtime,
        name: i.intern("cudaLaunchKernel"),
        cbid: 0,
        process: 1,
        thread: 1,
        correlation_id: corr,
        start_ns: start,
        end_ns: end,
        return_value: 0,
    }
}

/// A runtime API call `name` of `process`/`thread` with no correlation id.
pub fn call(
    i: &mut Interner,
    name: &str,
    process: u32,
    thread: u64,
    start: Ns,
    end: Ns,
) -> ApiCall {
    ApiCall {
        name: i.intern(name),
        process,
        thread,
        correlation_id: 0,
        start_ns: start,
        end_ns: end,
        ..launch(i, 0, start, end)
    }
}

/// A host NVTX range `name` of process 1, thread 1.
pub fn host_range(i: &mut Interner, name: &str, start: Ns, end: Ns) -> NvtxRange {
    NvtxRange {
        domain: RangeDomain::Host,
        name: i.intern(name),
        process: 1,
        thread: 1,
        device: None,
        stream: None,
        start_ns: start,
        end_ns: end,
        nvtx_domain: None,
    }
}

/// The seed's executed example: (correlationId, stream, start, end) kernels and their launches.
pub const SEED_KERNELS: [(u64, u64, Ns, Ns); 5] = [
    (11, 7, 1_000, 5_000),
    (12, 7, 5_200, 9_000),
    (13, 13, 3_000, 4_000),
    (14, 13, 4_000, 6_000),
    (15, 7, 9_000, 9_000),
];
pub const SEED_RUNTIME: [(u64, Ns, Ns); 5] = [
    (11, 900, 950),
    (12, 5_050, 5_100),
    (13, 2_900, 2_950),
    (14, 3_950, 3_990),
    (15, 8_900, 8_950),
];

/// The seed trace on device 0, with the launches whose correlation ids are in `keep_api`.
pub fn seed_trace(keep_api: &[u64]) -> Trace {
    let mut i = Interner::new();
    let kernels = SEED_KERNELS
        .iter()
        .map(|&(c, s, a, b)| {
            kernel(
                &mut i,
                if s == 7 { "gemm" } else { "allreduce" },
                0,
                s,
                c,
                a,
                b,
            )
        })
        .collect();
    let api_calls = SEED_RUNTIME
        .iter()
        .filter(|r| keep_api.contains(&r.0))
        .map(|&(c, a, b)| launch(&mut i, c, a, b))
        .collect();
    complete_trace(i, kernels, api_calls)
}

/// A trace of these records whose recorder finished (`meta.complete`).
pub fn complete_trace(i: Interner, kernels: Vec<Kernel>, api_calls: Vec<ApiCall>) -> Trace {
    let mut t = Trace {
        strings: i.into_strings(),
        kernels,
        api_calls,
        ..Trace::default()
    };
    t.meta.complete = true;
    t
}
