//! Durations for people: exact integer arithmetic, never through floats.

/// `1234567` → `1.235 ms`: exact integer arithmetic, three decimals, unit chosen by size (ns
/// below 1 µs, µs below 1 ms, ms below 1 s, else s).
pub fn fmt_ns(ns: u64) -> String {
    let (div, unit): (u64, &str) = match ns {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => (1_000, "µs"),
        1_000_000..=999_999_999 => (1_000_000, "ms"),
        _ => (1_000_000_000, "s"),
    };
    // Round to 3 decimals of the unit, half up.
    let milli = (u128::from(ns) * 1000 + u128::from(div) / 2) / u128::from(div);
    format!("{}.{:03} {unit}", milli / 1000, milli % 1000)
}

/// `new − base` as a signed duration, clamped to `i64` (a change of two durations near 2^64 ns,
/// from corrupt records, neither wraps nor panics).
pub fn delta_ns(base: u64, new: u64) -> i64 {
    (i128::from(new) - i128::from(base)).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}
