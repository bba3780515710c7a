//! The native trace format (writer and reader). See docs/FORMAT.md.
