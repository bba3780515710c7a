//! The synthetic trace the benchmarks share (`bench_analysis`, `bench_html`): N kernels over 2
//! devices × 4 streams, 64 kernel names, durations of 1–50 µs, launched by one host thread (one
//! cudaLaunchKernel record per kernel), with queueing and idle gaps; deterministic.

use cutrace_trace::{ApiCall, ApiKind, Kernel, Launch, NvtxRange, RangeDomain, Trace};

/// xorshift64*: deterministic, good enough for synthetic timings.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// N kernels in completion order (as CUPTI writes them) and their launch calls.
pub fn synthetic(n: usize) -> Trace {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut strings: Vec<String> = (0..64)
        .map(|i| format!("_ZN7cutlass6KernelINS_4gemm{i}EEEvNT_6ParamsE"))
        .collect();
    let launch_name = strings.len() as u32;
    strings.push("cudaLaunchKernel".into());
    // One host thread launches every kernel: it calls cudaLaunchKernel every 1–11 µs (the call
    // takes 2–5 µs); the kernel starts 1–5 µs after the call returns, or when its stream is free.
    let mut host = 1_700_000_000_000_000_000u64;
    let mut stream_free = [[0u64; 4]; 2];
    let mut kernels = Vec::with_capacity(n);
    let mut api_calls = Vec::with_capacity(n);
    for i in 0..n {
        let device = rng.below(2) as u32;
        let stream = rng.below(4) as usize;
        host += 1_000 + rng.below(10_000);
        let api_end = host + 2_000 + rng.below(3_000);
        let free = &mut stream_free[device as usize][stream];
        let start = (api_end + 1_000 + rng.below(4_000)).max(*free);
        let end = start + 1_000 + rng.below(49_000);
        *free = end;
        let correlation_id = i as u64 + 1;
        kernels.push(Kernel {
            device,
            context: 1,
            stream: 7 + stream as u64,
            correlation_id,
            start_ns: start,
            end_ns: end,
            name: rng.below(64) as u32,
            launch: 0,
        });
        api_calls.push(ApiCall {
            kind: ApiKind::Runtime,
            name: launch_name,
            cbid: 211,
            process: 1,
            thread: 1,
            correlation_id,
            start_ns: host,
            end_ns: api_end,
            return_value: 0,
        });
    }
    // CUPTI writes a kernel record when the kernel completes: buffer order is completion order,
    // streams interleaved.
    kernels.sort_unstable_by_key(|k| k.end_ns);
    Trace {
        strings,
        // Every kernel: 128 blocks of 256 threads, 64 registers.
        launches: vec![Launch {
            grid: [128, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 64,
            ..Launch::default()
        }],
        kernels,
        api_calls,
        ..Trace::default()
    }
}

/// Host ranges `ProfilerStep#0..steps` splitting the kernels' span evenly.
pub fn add_steps(trace: &mut Trace, steps: u64) {
    let first = trace.kernels.iter().map(|k| k.start_ns).min().unwrap_or(0);
    let last = trace.kernels.iter().map(|k| k.end_ns).max().unwrap_or(0);
    let len = (last - first) / steps.max(1);
    for i in 0..steps {
        let name = trace.strings.len() as u32;
        trace.strings.push(format!("ProfilerStep#{i}"));
        trace.ranges.push(NvtxRange {
            domain: RangeDomain::Host,
            name,
            process: 1,
            thread: 1,
            device: None,
            stream: None,
            start_ns: first + i * len,
            end_ns: first + (i + 1) * len,
            nvtx_domain: None,
        });
    }
}
