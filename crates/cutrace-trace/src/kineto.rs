//! Kineto (torch.profiler chrome trace) JSON import.
