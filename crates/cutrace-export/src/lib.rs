//! cutrace's writers: a trace as Chrome Trace Event JSON (Kineto's shape), Perfetto's protobuf,
//! Parquet and CSV tables with their `meta.json`; and what a person reads of a report or a diff,
//! as text or as one self-contained HTML page. Every writer returns its errors: nothing here
//! prints, reads the environment or decides where output goes (that is the command line's job).

pub mod chrome;
pub mod convert;
pub mod counter_tracks;
pub mod csv;
pub mod files;
pub mod html;
pub mod input;
pub mod job;
pub mod meta;
pub mod outputs;
pub mod parquet;
pub mod perfetto;
pub mod pprof;
mod rows;
pub mod staged;
pub mod tables;
pub mod text;
mod timeline_model;
