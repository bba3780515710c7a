//! cutrace-cupti: loading libcupti/libcuda at run time, typed wrappers, explained errors.
