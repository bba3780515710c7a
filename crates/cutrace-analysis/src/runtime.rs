//! Which GPU runtime a trace's API calls belong to, so a report names them as their users do.
//!
//! Kineto files HIP calls under the categories `cuda_runtime` and `cuda_driver` on ROCm, so the
//! category does not tell; the names do: HIP's all start with `hip` (`hipLaunchKernel`,
//! `hipMemcpyAsync`, `hipExtModuleLaunchKernel`), CUDA's with `cuda` or `cu`.

use cutrace_trace::Trace;

/// `hip` when more of the trace's API calls are named `hip*` than `cu*`, `cuda` when any are
/// CUDA's and no more are HIP's; `None` without API calls of either. One byte per string.
pub fn api_runtime(trace: &Trace) -> Option<&'static str> {
    // Per string: 0 not looked at, 1 HIP, 2 CUDA, 3 neither.
    let mut seen = vec![0u8; trace.strings.len()];
    let (mut hip, mut cuda) = (0u64, 0u64);
    for c in &trace.api_calls {
        let Some(s) = seen.get_mut(c.name as usize) else {
            continue;
        };
        if *s == 0 {
            let name = trace.str(c.name);
            *s = if name.starts_with("hip") {
                1
            } else if name.starts_with("cu") {
                2
            } else {
                3
            };
        }
        hip += u64::from(*s == 1);
        cuda += u64::from(*s == 2);
    }
    if hip > cuda {
        Some("hip")
    } else if cuda > 0 {
        Some("cuda")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use cutrace_testkit::records::{call, complete_trace};
    use cutrace_trace::Interner;

    use super::*;

    fn of(names: &[&str]) -> Option<&'static str> {
        let mut i = Interner::new();
        let calls = names.iter().map(|n| call(&mut i, n, 1, 1, 0, 1)).collect();
        api_runtime(&complete_trace(i, Vec::new(), calls))
    }

    #[test]
    fn the_runtime_is_the_one_most_calls_are_named_for() {
        assert_eq!(
            of(&["hipLaunchKernel", "hipMemcpyAsync", "cudaGetDevice"]),
            Some("hip")
        );
        assert_eq!(
            of(&["cudaLaunchKernel", "cuLaunchKernel", "hipMalloc"]),
            Some("cuda")
        );
        assert_eq!(of(&["cudaLaunchKernel", "hipLaunchKernel"]), Some("cuda"));
        assert_eq!(of(&["ncclAllReduce"]), None);
        assert_eq!(of(&[]), None);
    }
}
