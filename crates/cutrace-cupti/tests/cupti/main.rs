//! cutrace-cupti's integration tests in one binary (one link instead of one per file): each module
//! is one former test file.

mod decode_fuzz;
mod layouts;
mod pc_probe;
