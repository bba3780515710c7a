//! cutrace-analysis's integration tests in one binary (one link instead of one per file): each module
//! is one former test file.

mod critical_path;
mod diff;
mod edges;
mod gap_host;
mod memory;
mod properties;
mod seed_example;
mod steps;
