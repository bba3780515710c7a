//! cutrace-trace owns the record model, the native on-disk trace format, and importers.
//! It knows nothing about CUDA: everything here builds and is tested on a machine without a GPU.

pub mod kineto;
pub mod model;
pub mod native;
pub mod timeparse;

pub use model::*;
