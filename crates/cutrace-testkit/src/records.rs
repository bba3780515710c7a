//! Records written by hand: in-memory traces for the analysis tests, native trace parts for the
//! reader and CLI tests, and the committed native traces found on disk.

use std::io::Cursor;
use std::path::Path;

use cutrace_trace::native::Writer;
use cutrace_trace::{
    ApiCall, ApiKind, Interner, Kernel, Launch, Ns, NvtxRange, RangeDomain, Trace,
};

/// Every committed native trace under `tests/fixtures/native`, as paths relative to it: a folder
/// holding `.cutrace` parts is a trace, any other folder is searched (`lean/two_streams`).
pub fn native_fixtures(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let subdirs: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if subdirs
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "cutrace"))
        {
            out.push(rel.to_string());
            return;
        }
        for p in subdirs.iter().filter(|p| p.is_dir()) {
            let name = p.file_name().unwrap().to_string_lossy();
            let rel = if rel.is_empty() {
                name.into_owned()
            } else {
                format!("{rel}/{name}")
            };
            walk(p, &rel, out);
        }
    }
    let mut out = Vec::new();
    walk(&root.join("tests/fixtures/native"), "", &mut out);
    out.sort();
    out
}

/// A `cudaLaunchKernel` call of process `pid` at `t0` (100 ns long) and the kernel it launched,
/// `gemm` on device 0 stream 7, from `t0 + 1,000` to `t0 + 4,000` ns; both with correlation id 1.
pub fn push_launch_and_kernel(w: &mut Writer<Cursor<Vec<u8>>>, pid: u32, t0: u64) {
    let k = w.intern("_Z4gemmPf");
    let a = w.intern("cudaLaunchKernel");
    w.push_api(&ApiCall {
        kind: ApiKind::Runtime,
        name: a,
        cbid: 211,
        process: pid,
        thread: 1,
        correlation_id: 1,
        start_ns: t0,
        end_ns: t0 + 100,
        return_value: 0,
    });
    w.push_kernel(
        &Kernel {
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: 1,
            start_ns: t0 + 1_000,
            end_ns: t0 + 4_000,
            name: k,
            launch: 0,
        },
        &Launch {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            ..Launch::default()
        },
    );
}

/// The launch configuration of [`kernel`]'s kernels: launch 0 of a [`complete_trace`].
pub const KERNEL_LAUNCH: Launch = Launch {
    grid: [1, 1, 1],
    block: [128, 1, 1],
    registers_per_thread: 32,
    static_shared_bytes: 0,
    dynamic_shared_bytes: 0,
    graph_id: 0,
};

/// A kernel on `device`/`stream`, named `name` (interned into `strings`), launched as
/// [`KERNEL_LAUNCH`] (launch 0).
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
        launch: 0,
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

/// The worked example that shows why summed kernel time overstates busy time: five kernels on
/// two streams, (correlationId, stream, start, end), union 8,000 ns against a sum of 10,800 ns,
/// and their launches.
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

/// The worked example's trace on device 0, with the launches whose correlation ids are in `keep_api`.
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

/// A trace of these records whose recorder finished (`meta.complete`); launch 0 is
/// [`KERNEL_LAUNCH`].
pub fn complete_trace(i: Interner, kernels: Vec<Kernel>, api_calls: Vec<ApiCall>) -> Trace {
    let mut t = Trace {
        strings: i.into_strings(),
        launches: vec![KERNEL_LAUNCH],
        kernels,
        api_calls,
        ..Trace::default()
    };
    t.meta.complete = true;
    t
}
