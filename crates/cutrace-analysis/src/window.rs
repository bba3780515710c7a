//! The time window filter (`--from`, `--to`): parsing its bounds and clipping intervals to it.
//!
//! A bound is either a plain integer, nanoseconds on the trace clock (`5153875767895669`), or a
//! decimal with a unit (`ns`, `us`/`µs`, `ms`, `s`), an offset from the trace start (the earliest
//! start of any record). Decimals are parsed digit by digit, never through f64, so `12.5ms` is
//! exactly 12 500 000 ns.
//!
//! Clipping rule, used by every analysis: an interval `[s, e)` is cut to `[max(s, from),
//! min(e, to))`; a record whose clipped interval is empty is left out, except a zero-length record
//! lying in `[from, to)`, which is kept (it counts, and adds no time).

use cutrace_trace::{Ns, Trace};
use serde::Serialize;

use crate::error::AnalysisError;

/// One bound as the user wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// Nanoseconds on the trace clock.
    Absolute(Ns),
    /// Nanoseconds after the trace start.
    FromStart(Ns),
}

impl TimeArg {
    pub fn resolve(self, trace_start: Ns) -> Ns {
        match self {
            TimeArg::Absolute(t) => t,
            TimeArg::FromStart(d) => trace_start.saturating_add(d),
        }
    }
}

/// Parses `--from`/`--to`: `5153875767895669` (absolute ns) or `12.5ms` (offset from start).
pub fn parse_time_arg(text: &str) -> Result<TimeArg, AnalysisError> {
    let bad = |why| AnalysisError::BadTime {
        text: text.to_owned(),
        why,
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad(if t.starts_with('-') {
            "negative times are not allowed"
        } else {
            "it does not start with a number"
        }));
    }
    let scale_digits = match unit.trim() {
        "" => {
            if num.contains('.') {
                return Err(bad(
                    "a bare number is whole nanoseconds; add a unit for decimals",
                ));
            }
            return num
                .parse::<u64>()
                .map(TimeArg::Absolute)
                .map_err(|_| bad("the number does not fit in 64 bits"));
        }
        "ns" => 0,
        "us" | "µs" => 3,
        "ms" => 6,
        "s" => 9,
        _ => return Err(bad("unknown unit (use ns, us, ms or s)")),
    };
    decimal_scaled(num, scale_digits)
        .map(TimeArg::FromStart)
        .map_err(bad)
}

/// `num * 10^scale_digits` exactly, from decimal text; refuses sub-nanosecond remainders.
fn decimal_scaled(num: &str, scale_digits: u32) -> Result<u64, &'static str> {
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err("malformed decimal number");
    }
    let frac_used = frac_part.len().min(scale_digits as usize);
    if frac_part[frac_used..].bytes().any(|c| c != b'0') {
        return Err("finer than one nanosecond");
    }
    let mut value: u64 = 0;
    for c in int_part.bytes().chain(frac_part[..frac_used].bytes()) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or("too large")?;
    }
    for _ in frac_used..scale_digits as usize {
        value = value.checked_mul(10).ok_or("too large")?;
    }
    Ok(value)
}

/// A resolved window `[from_ns, to_ns)` on the trace clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub from_ns: Ns,
    pub to_ns: Ns,
}

impl Window {
    /// Builds the window from optional bounds; a missing bound is open.
    pub fn resolve(
        from: Option<TimeArg>,
        to: Option<TimeArg>,
        trace_start: Ns,
    ) -> Result<Option<Window>, AnalysisError> {
        if from.is_none() && to.is_none() {
            return Ok(None);
        }
        let from_ns = from.map_or(0, |a| a.resolve(trace_start));
        let to_ns = to.map_or(Ns::MAX, |a| a.resolve(trace_start));
        if from_ns > to_ns {
            return Err(AnalysisError::EmptyWindow { from_ns, to_ns });
        }
        Ok(Some(Window { from_ns, to_ns }))
    }

    /// The interval clipped to the window, or `None` when the record lies outside it.
    #[inline]
    pub fn clip(&self, start: Ns, end: Ns) -> Option<(Ns, Ns)> {
        if end <= start {
            // Zero-length (or inverted) records are points at `start`.
            return (self.from_ns <= start && start < self.to_ns).then_some((start, start));
        }
        let s = start.max(self.from_ns);
        let e = end.min(self.to_ns);
        (s < e).then_some((s, e))
    }
}

/// Clips to an optional window; no window keeps everything as it is.
#[inline]
pub fn clip(window: Option<&Window>, start: Ns, end: Ns) -> Option<(Ns, Ns)> {
    match window {
        None => Some((start, end)),
        Some(w) => w.clip(start, end),
    }
}

/// The earliest start and latest end of any timed record in the trace.
pub fn trace_bounds(trace: &Trace) -> Option<(Ns, Ns)> {
    trace.bounds_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_absolute_and_relative_bounds_exactly() {
        assert_eq!(
            parse_time_arg("5153875767895669"),
            Ok(TimeArg::Absolute(5_153_875_767_895_669))
        );
        assert_eq!(parse_time_arg("12.5ms"), Ok(TimeArg::FromStart(12_500_000)));
        assert_eq!(parse_time_arg("250us"), Ok(TimeArg::FromStart(250_000)));
        assert_eq!(
            parse_time_arg("1.000000001s"),
            Ok(TimeArg::FromStart(1_000_000_001))
        );
        assert_eq!(parse_time_arg("7ns"), Ok(TimeArg::FromStart(7)));
        assert_eq!(parse_time_arg(".5us"), Ok(TimeArg::FromStart(500)));
    }

    #[test]
    fn rejects_what_is_not_a_time() {
        for bad in [
            "",
            "-5",
            "abc",
            "1.5",
            "1.5ns",
            "3 parsecs",
            "1.2.3ms",
            "99999999999999999999",
        ] {
            assert!(parse_time_arg(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn window_clips_and_keeps_points_inside() {
        let w = Window::resolve(
            Some(TimeArg::FromStart(100)),
            Some(TimeArg::Absolute(1_200)),
            1_000,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            w,
            Window {
                from_ns: 1_100,
                to_ns: 1_200
            }
        );
        assert_eq!(w.clip(1_000, 1_150), Some((1_100, 1_150)));
        assert_eq!(w.clip(1_150, 5_000), Some((1_150, 1_200)));
        assert_eq!(w.clip(1_000, 1_100), None, "touching the start is outside");
        assert_eq!(w.clip(1_150, 1_150), Some((1_150, 1_150)));
        assert_eq!(w.clip(1_200, 1_200), None, "the end is exclusive");
        assert!(
            Window::resolve(Some(TimeArg::Absolute(5)), Some(TimeArg::Absolute(4)), 0).is_err()
        );
    }
}
