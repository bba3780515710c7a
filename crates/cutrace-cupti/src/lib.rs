//! cutrace-cupti: finding and loading libcupti/libcuda at run time, typed non-panicking
//! wrappers, CUPTI 13 record decoding, and CUPTI errors explained. The one FFI layer: every
//! CUPTI symbol family cutrace uses (activity and callbacks, profiler target and host, Range
//! Profiler, PM Sampling and PC Sampling entries) is resolved by `api::Cupti`'s loader, with the
//! parameter structs in `sys`.

pub mod activity;
pub mod api;
pub mod driver;
pub mod error;
pub mod locate;
pub mod symbols;
pub mod sys;
pub mod version;

pub use api::Cupti;
pub use error::{check, explain, result_name, CuptiError, CuptiResult};
