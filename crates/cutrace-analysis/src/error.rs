//! Typed errors of the analysis crate: only bad user options can fail; records never do.

/// Why an analysis could not run as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    /// A `--from`/`--to` value that is not a time.
    #[error("`{text}` is not a time: {why}; expected nanoseconds on the trace clock (`5153875767895669`) or an offset from the trace start with a unit (`250us`, `12.5ms`, `2s`)")]
    BadTime { text: String, why: &'static str },
    /// A window whose end is before its start.
    #[error("the time window is empty: from {from_ns} ns is after to {to_ns} ns")]
    EmptyWindow { from_ns: u64, to_ns: u64 },
    /// More records of one kind than the compact 32-bit indices used in the hot path can name.
    #[error("{what}: {count} records is more than the 4294967295 that one analysis handles")]
    TooManyRecords { what: &'static str, count: usize },
}
