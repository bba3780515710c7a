//! One module per subcommand; each defines its `Args` and a `run` returning the exit status.

pub mod audit;
pub mod chrome;
pub mod convert;
pub mod dcgm;
pub mod diff;
pub mod doctor;
pub mod parquet;
pub mod perfetto;
mod progress;
pub mod record;
pub mod report;
pub mod tables;
