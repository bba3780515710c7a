//! The safe API against real and absent libraries, no GPU needed.
//!
//! `host_side_metrics_without_a_gpu` needs CUPTI's host library: the `nvidia-cuda-cupti==13.0.*`
//! wheel (`pip install nvidia-cuda-cupti-cu13` or `pip download` and unzip) has both
//! libcupti.so.13 and libnvperf_host.so. It is ignored by default; run it with
//! `CUTRACE_CUPTI_LIB=/path/to/nvidia/cu13/lib/libcupti.so.13 cargo test -p cutrace-counters
//! --test host -- --ignored`, where it fails if the library is not there.

use cutrace_counters::{preload_nvperf_host, CountersError, MetricType, Profiler, ProfilerKind};
use cutrace_cupti::{Cupti, CuptiError};

#[test]
fn an_absent_libcupti_is_a_typed_error() {
    let e = Cupti::load_one("/nonexistent/libcupti.so.13", "test")
        .err()
        .unwrap();
    assert!(matches!(e, CuptiError::Load { .. }), "{e}");
    let e = CountersError::from(e);
    assert!(e.to_string().contains("/nonexistent/libcupti.so.13"), "{e}");
}

#[test]
fn a_library_that_is_not_cupti_is_a_typed_error() {
    // libc loads but has no CUPTI symbol: refused at load, not at the first call.
    let e = Cupti::load_one("libc.so.6", "test").err().unwrap();
    assert!(
        matches!(
            e,
            CuptiError::MissingSymbol {
                symbol: "cuptiGetVersion",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
#[ignore = "needs libcupti.so.13 and libnvperf_host.so (the nvidia-cuda-cupti wheel): set CUTRACE_CUPTI_LIB"]
fn host_side_metrics_without_a_gpu() {
    let path = std::env::var("CUTRACE_CUPTI_LIB")
        .expect("CUTRACE_CUPTI_LIB must name the wheel's libcupti.so.13");
    assert!(
        preload_nvperf_host(std::path::Path::new(&path)),
        "no libnvperf_host.so beside {path}"
    );
    let cupti = Cupti::load_one(&path, "CUTRACE_CUPTI_LIB").unwrap();
    let profiler = Profiler::new(&cupti);
    let chips = profiler.supported_chips().unwrap();
    assert!(chips.iter().any(|c| c == "GH100"), "{chips:?}");

    // No counter-availability image: the host assumes every counter is there.
    let host = profiler
        .host(ProfilerKind::RangeProfiler, "GH100", None)
        .unwrap();
    let base = host.base_metrics(MetricType::Counter).unwrap();
    assert!(
        base.iter().any(|m| m == "sm__ctas_launched"),
        "{} metrics",
        base.len()
    );

    let metrics = ["sm__ctas_launched.sum", "smsp__inst_executed.sum"];
    host.add_metrics(&metrics).unwrap();
    let config = host.config_image().unwrap();
    assert!(!config.is_empty());
    assert_eq!(host.passes(&config).unwrap(), 1);

    // A name only Nsight Compute knows is refused by CUPTI, as a typed error with its code.
    let bad = profiler
        .host(ProfilerKind::RangeProfiler, "GH100", None)
        .unwrap();
    let e = bad.add_metrics(&["launch__grid_size"]).unwrap_err();
    assert_eq!(e.call(), Some("cuptiProfilerHostConfigAddMetrics"));
    assert_eq!(e.code(), Some(1), "{e}");

    // An unknown chip is refused too.
    let e = profiler
        .host(ProfilerKind::RangeProfiler, "NOPE100", None)
        .err()
        .unwrap();
    assert_eq!(e.call(), Some("cuptiProfilerHostInitialize"), "{e}");

    let calls = profiler.calls();
    assert_eq!(calls[0].call, "cuptiProfilerHostGetSupportedChips");
    assert!(calls.iter().any(|c| c.code != 0));
}
