//! Kineto (torch.profiler chrome trace) JSON import, streaming, with exact timestamps.

use std::path::Path;

use crate::error::TraceError;
use crate::model::Trace;
use crate::open::Progress;

/// Imports a Kineto JSON trace (`.json` or gzip-compressed).
pub fn import(path: &Path, _progress: Progress<'_>) -> Result<Trace, TraceError> {
    Err(TraceError::Unsupported {
        path: path.into(),
        what: "Kineto import is being written".into(),
    })
}
