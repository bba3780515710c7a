//! The benches' clock.

/// This thread's CPU time so far, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`): on a shared
/// machine wall time would also count time the core spent on someone else's work.
///
/// Not `/proc/thread-self/schedstat`: the kernel prints the run time it last accounted, which
/// for a running thread is brought up to date only at the scheduler's tick (4 ms at 250 Hz).
/// Read from the thread itself it lags by up to a tick, so a 16 ms measurement was off by up
/// to a quarter, and the best of several rounds favoured the shorter sizes (a loop of pure
/// arithmetic timed 2.32× for twice the iterations; with this clock, 1.99×).
pub fn thread_cpu_ns() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    let s = u64::try_from(t.tv_sec()).ok()?;
    let ns = u64::try_from(t.tv_nsec()).ok()?;
    Some(s * 1_000_000_000 + ns)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_clock_counts_work_done_since_the_last_tick() {
        let a = super::thread_cpu_ns().expect("Linux has a thread CPU clock");
        let mut x = 1u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
        let b = super::thread_cpu_ns().unwrap();
        // The work took at least 0.1 ms of this thread's time (about 1 ms optimised, several
        // in a debug build); a reading brought up to date only at the tick would mostly show
        // no time at all.
        assert!(b >= a + 100_000, "{a} -> {b} after {x}");
    }
}
