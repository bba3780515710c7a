//! cutrace-trace's integration tests in one binary (one link instead of one per file): each module
//! is one former test file.

mod export_meta;
mod hostile_input;
mod kernel_metrics;
mod kineto_dist;
mod kineto_fuzz;
mod kineto_import;
mod kineto_variants;
mod memory_table;
mod native_fixtures;
mod native_format;
mod native_ranks;
mod other_json;
mod pc_samples;
