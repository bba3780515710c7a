//! cutrace-doctor's integration tests in one binary (one link instead of one per file): each module
//! is one former test file.

mod doctor_fixtures;
mod hardening;
