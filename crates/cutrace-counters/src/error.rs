//! Errors of a profiling session: a CUPTI call that failed (with its code), a symbol this CUPTI
//! lacks, a misuse the API could not rule out by its types, or a CUPTI answer refused as
//! implausible.

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
    /// PC Sampling's period is an exponent: 2^N cycles, N in 5..=31 (cupti_pcsampling.h).
    #[error("PC sampling period {0} is outside 5..=31 (CUPTI samples every 2^N cycles)")]
    PcPeriodOutOfRange(u32),
    #[error("a PC sampling buffer of {0} PC records: give 1 to {max}", max = crate::pc::MAX_PC_RECORDS)]
    PcBufferSize(usize),
    /// `cuptiPCSamplingGetNumStallReasons` said 0, or more than cutrace will allocate for.
    #[error("cuptiPCSamplingGetNumStallReasons gave {0} stall reasons for this context: nothing to sample, or more than {max} (refused)", max = crate::pc::MAX_STALL_REASONS)]
    PcStallReasonCount(usize),
    /// `cuptiPCSamplingSetConfigurationAttribute` failed; CUPTI's status for the first
    /// attribute it refused (each attribute has its own).
    #[error("cuptiPCSamplingSetConfigurationAttribute refused {attribute} with {} ({code}): {}", result_name(*.code), explain(*.code).0)]
    PcAttributeRefused {
        attribute: &'static str,
        code: CuptiResult,
    },
    /// `cuptiPCSamplingStart`/`Stop` work only with ENABLE_START_STOP_CONTROL set
    /// (cupti_pcsampling.h); the session was configured without it.
    #[error("{0} needs the session configured with start/stop control; without it sampling runs from configuration to disable")]
    PcStartStopOff(&'static str),
    #[error("{0} before the PC sampling session was configured")]
    PcNotConfigured(&'static str),
    /// CUPTI left a pointer in a PC sampling buffer other than the one cutrace allocated there:
    /// nothing is read through it.
    #[error(
        "the PC sampling buffer's {0} no longer points where cutrace allocated it: not decoded"
    )]
    PcBufferReplaced(&'static str),
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
            CountersError::PcAttributeRefused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The failed call's name, for failed calls.
    pub fn call(&self) -> Option<&'static str> {
        match self {
            CountersError::Call { call, .. } | CountersError::MetricRefused { call, .. } => {
                Some(call)
            }
            CountersError::PcAttributeRefused { .. } => {
                Some("cuptiPCSamplingSetConfigurationAttribute")
            }
            _ => None,
        }
    }

    pub fn refusal(&self) -> Refusal {
        self.code().map_or(Refusal::Other, refusal)
    }
}
