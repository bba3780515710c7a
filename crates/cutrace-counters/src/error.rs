//! Errors of a profiling session: a CUPTI call that failed (with its code), a symbol this CUPTI
//! lacks, or a misuse the API could not rule out by its types.

use cutrace_cupti::error::{
    explain, result_name, CuptiResult, CUPTI_ERROR_HARDWARE_BUSY,
    CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_NOT_INITIALIZED, CUPTI_ERROR_NOT_SUPPORTED,
};

#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    #[error("{call} returned {} ({code}): {}; fix: {}", result_name(*.code), explain(*.code).0, explain(*.code).1)]
    Call {
        call: &'static str,
        code: CuptiResult,
    },
    #[error("this libcupti lacks {0} (a CUPTI older than CUDA 13.0)")]
    MissingSymbol(&'static str),
    #[error("{what} contains a NUL byte: {text:?}")]
    Nul { what: &'static str, text: String },
    #[error("set_config needs a counter-data image: call initialize_counter_data first")]
    NoCounterData,
    /// `call` failed with `code` for this metric alone (CUPTI does not say which name of a
    /// list it refused; `plan` finds it).
    #[error("chip {chip} has no {} metric {metric:?} ({call} returned {}); `cutrace profile --list-metrics --chip {chip}` lists the base names it has", kind_words(*.kind), result_name(*.code))]
    MetricRefused {
        metric: String,
        chip: String,
        kind: crate::ProfilerKind,
        call: &'static str,
        code: CuptiResult,
    },
    /// PM Sampling reads one pass only; `metric` is where the list stops fitting (`alone`: it
    /// needs more than one pass by itself).
    #[error("PM Sampling on chip {chip} reads counters in one pass, and {}{metric:?} needs {passes}; drop it or choose another metric (`cutrace profile --list-metrics --chip {chip}`)", if *.alone { "" } else { "the list up to " })]
    TooManyPasses {
        metric: String,
        passes: usize,
        alone: bool,
        chip: String,
    },
    #[error(transparent)]
    Load(#[from] cutrace_cupti::CuptiError),
}

fn kind_words(k: crate::ProfilerKind) -> &'static str {
    match k {
        crate::ProfilerKind::RangeProfiler => "Range Profiler",
        crate::ProfilerKind::PmSampling => "PM Sampling",
    }
}

/// What a failure means for "can this process read the counters?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: counters are restricted to admins.
    Denied,
    /// CUPTI_ERROR_HARDWARE_BUSY: another client holds the counters.
    Busy,
    /// CUPTI_ERROR_NOT_SUPPORTED: this device or configuration cannot profile.
    Unsupported,
    /// CUPTI_ERROR_NOT_INITIALIZED: usually a CUPTI newer than the driver.
    NotInitialized,
    /// Anything else.
    Other,
}

/// The [`Refusal`] a CUPTI result code stands for.
pub fn refusal(code: CuptiResult) -> Refusal {
    match code {
        CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => Refusal::Denied,
        CUPTI_ERROR_HARDWARE_BUSY => Refusal::Busy,
        CUPTI_ERROR_NOT_SUPPORTED => Refusal::Unsupported,
        CUPTI_ERROR_NOT_INITIALIZED => Refusal::NotInitialized,
        _ => Refusal::Other,
    }
}

impl CountersError {
    /// The CUPTI result code, for failed calls.
    pub fn code(&self) -> Option<CuptiResult> {
        match self {
            CountersError::Call { code, .. } => Some(*code),
            CountersError::MetricRefused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The failed call's name, for failed calls.
    pub fn call(&self) -> Option<&'static str> {
        match self {
            CountersError::Call { call, .. } | CountersError::MetricRefused { call, .. } => {
                Some(call)
            }
            _ => None,
        }
    }

    pub fn refusal(&self) -> Refusal {
        self.code().map_or(Refusal::Other, refusal)
    }
}
