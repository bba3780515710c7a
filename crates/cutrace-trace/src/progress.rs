//! The progress callback every reader takes (kept apart so readers and `open` need not import
//! each other).

/// Progress callback: (bytes consumed so far, total bytes if known).
pub type Progress<'a> = &'a mut dyn FnMut(u64, Option<u64>);
