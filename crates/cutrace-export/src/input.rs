//! Reading a trace for `report`, `diff` and `convert`: a directory of native parts, or one input
//! (a file, a pipe, a FIFO, `-` for stdin) whose first bytes say what it is (a native part, a
//! torch.profiler JSON, gzip-compressed or not), read once.

use std::path::Path;

use cutrace_trace::{Progress, ReadOptions, Trace, TraceError};

/// Reads the trace at `path`, reporting bytes read to `progress`.
pub fn load(path: &Path, opts: &ReadOptions, progress: Progress<'_>) -> Result<Trace, TraceError> {
    cutrace_trace::open_with(path, opts, progress)
}
