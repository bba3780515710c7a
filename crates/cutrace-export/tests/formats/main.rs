//! The export formats end to end, in process: every fixture is exported with the library's
//! writers and read back or decoded independently of them. One test binary for all formats.

mod chrome;
mod perfetto;
mod pprof;
mod tables;
