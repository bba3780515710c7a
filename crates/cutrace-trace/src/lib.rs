//! cutrace-trace owns the record model, the native on-disk trace format, and importers.
//! It knows nothing about CUDA: everything here builds and is tested on a machine without a GPU.

pub mod classify;
pub mod comm;
pub mod error;
pub mod kineto;
pub mod limits;
pub mod model;
pub mod native;
pub mod open;
pub mod parallel;
pub mod progress;
pub mod timeparse;
pub mod varint;

pub use comm::{comm_rule, is_comm_kernel, CommRule, COMM_RULES};
pub use error::TraceError;
pub use limits::Limits;
pub use limits::ReadOptions;
pub use model::*;
pub use open::{open, open_with};
pub use progress::Progress;
