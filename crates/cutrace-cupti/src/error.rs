//! CUPTI result codes: their names, what they mean for a tracer, and what fixes them.

/// A `CUptiResult` code as returned by every CUPTI call.
pub type CuptiResult = u32;

pub const CUPTI_SUCCESS: CuptiResult = 0;
pub const CUPTI_ERROR_INVALID_OPERATION: CuptiResult = 7;
pub const CUPTI_ERROR_OUT_OF_MEMORY: CuptiResult = 8;
pub const CUPTI_ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;
pub const CUPTI_ERROR_NOT_INITIALIZED: CuptiResult = 15;
pub const CUPTI_ERROR_INVALID_KIND: CuptiResult = 21;
pub const CUPTI_ERROR_HARDWARE_BUSY: CuptiResult = 26;
pub const CUPTI_ERROR_NOT_SUPPORTED: CuptiResult = 27;
pub const CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: CuptiResult = 35;
pub const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CuptiResult = 39;

/// The name of a CUPTI result code (the header's spelling).
pub fn result_name(code: CuptiResult) -> &'static str {
    match code {
        0 => "CUPTI_SUCCESS",
        1 => "CUPTI_ERROR_INVALID_PARAMETER",
        2 => "CUPTI_ERROR_INVALID_DEVICE",
        3 => "CUPTI_ERROR_INVALID_CONTEXT",
        7 => "CUPTI_ERROR_INVALID_OPERATION",
        8 => "CUPTI_ERROR_OUT_OF_MEMORY",
        9 => "CUPTI_ERROR_HARDWARE",
        10 => "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT",
        11 => "CUPTI_ERROR_API_NOT_IMPLEMENTED",
        12 => "CUPTI_ERROR_MAX_LIMIT_REACHED",
        13 => "CUPTI_ERROR_NOT_READY",
        14 => "CUPTI_ERROR_NOT_COMPATIBLE",
        15 => "CUPTI_ERROR_NOT_INITIALIZED",
        18 => "CUPTI_ERROR_QUEUE_EMPTY",
        19 => "CUPTI_ERROR_INVALID_HANDLE",
        20 => "CUPTI_ERROR_INVALID_STREAM",
        21 => "CUPTI_ERROR_INVALID_KIND",
        23 => "CUPTI_ERROR_DISABLED",
        26 => "CUPTI_ERROR_HARDWARE_BUSY",
        27 => "CUPTI_ERROR_NOT_SUPPORTED",
        32 => "CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED",
        33 => "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED",
        34 => "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
        35 => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        36 => "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED",
        38 => "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
        39 => "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
        40 => "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES",
        41 => "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED",
        42 => "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED",
        43 => "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED",
        44 => "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED",
        45 => "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED",
        46 => "CUPTI_ERROR_INVALID_CHIP_NAME",
        999 => "CUPTI_ERROR_UNKNOWN",
        _ => "CUPTI_ERROR_(unnamed)",
    }
}

/// What a result code means when a tracer hits it, and the fix, where one is known.
pub fn explain(code: CuptiResult) -> (&'static str, &'static str) {
    match code {
        CUPTI_ERROR_NOT_INITIALIZED => (
            "CUPTI could not initialize: most often this libcupti is newer than the installed \
             driver supports",
            concat!(
                "use the libcupti of the CUDA toolkit that matches the driver (set ",
                cutrace_settings::cupti_lib_var!(),
                "), or upgrade the driver"
            ),
        ),
        CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => (
            "another CUPTI client already holds this process (torch.profiler, Nsight Systems, \
             compute-sanitizer); before CUDA 13.3 with driver r610 only one may subscribe",
            "run the program under one tracer at a time: drop torch.profiler/nsys for this run, \
             or drop `cutrace record`",
        ),
        CUPTI_ERROR_HARDWARE_BUSY => (
            "the performance monitors are held by another client (often dcgm-exporter)",
            "dcgmi profile --pause; run; dcgmi profile --resume",
        ),
        CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => (
            "this user may not use the GPU performance counters",
            "see `cutrace doctor`: NVreg_RestrictProfilingToAdminUsers=0 or CAP_PERFMON",
        ),
        38 => (
            "the Event/Metric API was dropped in CUDA 13.0",
            "port to the Range Profiling API",
        ),
        27 | 33 | 41 | 42 | 43 | 44 | 45 => (
            "CUPTI does not support this feature on this device or configuration",
            "trace on a supported configuration (not a shared MIG instance, vGPU without \
             profiling, confidential computing)",
        ),
        21 => (
            "this CUPTI does not know the activity kind (an older CUPTI than the records assume)",
            "use CUPTI 13 (CUDA 13.x toolkit) or drop that kind with --kinds",
        ),
        _ => (
            "CUPTI refused the call",
            "run `cutrace doctor` for the machine's state",
        ),
    }
}

/// Errors from finding, loading or calling CUPTI.
#[derive(Debug, thiserror::Error)]
pub enum CuptiError {
    #[error("libcupti not found (tried: {tried}); set {var} to the path of libcupti.so.13, or CUDA_HOME to the toolkit", var = cutrace_settings::var::CUPTI_LIB)]
    NotFound { tried: String },
    #[error("could not load {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("{path} lacks the required symbol {symbol} (not a CUPTI library, or far too old)")]
    MissingSymbol { path: String, symbol: &'static str },
    #[error("{call} returned {} ({code}): {}; fix: {}", result_name(*.code), explain(*.code).0, explain(*.code).1)]
    Call {
        call: &'static str,
        code: CuptiResult,
    },
    #[error("{0}")]
    Version(String),
}

impl CuptiError {
    /// The CUPTI result code, for call errors.
    pub fn code(&self) -> Option<CuptiResult> {
        match self {
            CuptiError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Turns a result code into `Ok` or a named error.
pub fn check(call: &'static str, code: CuptiResult) -> Result<(), CuptiError> {
    if code == CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(CuptiError::Call { call, code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_and_explain() {
        let e = check("cuptiSubscribe", 39).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
            "{s}"
        );
        assert!(s.contains("fix:"), "{s}");
        assert!(check("x", 0).is_ok());
        assert_eq!(result_name(15), "CUPTI_ERROR_NOT_INITIALIZED");
    }
}
