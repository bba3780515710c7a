//! The native trace format (writer and reader). See docs/FORMAT.md.

use std::path::Path;

use crate::error::TraceError;
use crate::model::Trace;
use crate::open::Progress;

/// True when `head` (the first bytes of a file) starts like a native cutrace trace.
pub fn looks_native(_head: &[u8]) -> bool {
    false
}

/// Reads a native trace, recovering everything up to the last complete chunk.
pub fn read(path: &Path, _progress: Progress<'_>) -> Result<Trace, TraceError> {
    Err(TraceError::Unsupported {
        path: path.into(),
        what: "native traces are not readable yet".into(),
    })
}
