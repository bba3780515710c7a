//! cutrace-cupti: finding and loading libcupti/libcuda at run time, typed non-panicking
//! wrappers, CUPTI 13 record decoding, and CUPTI errors explained.

pub mod activity;
pub mod api;
pub mod error;
pub mod locate;
pub mod version;

pub use api::Cupti;
pub use error::{check, explain, result_name, CuptiError, CuptiResult};
