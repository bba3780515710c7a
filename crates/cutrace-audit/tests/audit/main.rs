//! cutrace-audit's integration tests in one binary (one link instead of one per file): each module
//! is one former test file.

mod audit_cases;
mod audit_elf;
mod elf_edit;
mod fuzz;
mod hardening;
