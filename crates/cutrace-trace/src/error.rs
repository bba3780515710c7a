//! Typed errors for reading and writing traces. Every message names the file and, where it
//! applies, the position and what was expected, so a user can act on it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading failed; the OS error is the source (shown beneath, not pasted into this line).
    #[error("reading {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The input is not in a format cutrace can read, or is malformed.
    #[error("{path}: {what} (at byte {offset}); {hint}")]
    Malformed {
        path: PathBuf,
        offset: u64,
        what: String,
        hint: String,
    },
    /// The input claims more than a resource limit allows (see [`crate::Limits`]).
    #[error(
        "{path}: {what} (at byte {offset}), over the limit {limit} = {value}; a genuine trace \
         this large reads with `--limit {limit}=N`"
    )]
    Limit {
        path: PathBuf,
        offset: u64,
        what: String,
        /// The `--limit` name.
        limit: &'static str,
        value: u64,
    },
    /// A well-formed file that is not a trace cutrace understands.
    #[error("{path}: {what}")]
    Unsupported { path: PathBuf, what: String },
}

impl TraceError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}
