//! Exact decimal parsing of microsecond timestamps into integer nanoseconds.
//!
//! Kineto writes `"ts": 5153875767895.669` (µs). Through f64 that value is
//! 5153875767895.6689453125, and at that magnitude an f64 cannot hold every nanosecond, so a
//! float pipeline invents or hides gaps. We parse the decimal text digit by digit instead.

use std::fmt;

/// Why a number could not be read as an exact time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeParseError {
    Empty,
    Negative,
    NotANumber,
    /// More than three decimals that are not zero: sub-nanosecond precision we would lose.
    SubNanosecond,
    Overflow,
}

impl fmt::Display for TimeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            TimeParseError::Empty => "an empty number",
            TimeParseError::Negative => "a negative time",
            TimeParseError::NotANumber => "not a plain decimal number",
            TimeParseError::SubNanosecond => "a time with sub-nanosecond digits",
            TimeParseError::Overflow => "a time too large for 64-bit nanoseconds",
        };
        f.write_str(s)
    }
}

/// Parses a non-negative decimal number of microseconds (`123`, `123.4`, `123.456`,
/// `1.5e3`) into exact nanoseconds. Digits beyond the third decimal must be zeros.
pub fn parse_us_to_ns(text: &str) -> Result<u64, TimeParseError> {
    parse_us_to_ns_bytes(text.as_bytes())
}

/// [`parse_us_to_ns`] over raw bytes (the importer's input), surrounding whitespace allowed.
pub fn parse_us_to_ns_bytes(b: &[u8]) -> Result<u64, TimeParseError> {
    let b = b.trim_ascii();
    if b.is_empty() {
        return Err(TimeParseError::Empty);
    }
    if b[0] == b'-' {
        return Err(TimeParseError::Negative);
    }
    // Split off an exponent, if any (JSON allows 1.5e3; Kineto never writes it, others might).
    let (mantissa, exp) = match b.iter().position(|&c| c == b'e' || c == b'E') {
        Some(p) => {
            let e = std::str::from_utf8(&b[p + 1..])
                .ok()
                .and_then(|s| s.trim_start_matches('+').parse::<i32>().ok())
                .ok_or(TimeParseError::NotANumber)?;
            (&b[..p], e)
        }
        None => (b, 0),
    };
    let (int_part, frac_part) = match mantissa.iter().position(|&c| c == b'.') {
        Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
        None => (mantissa, &[][..]),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(TimeParseError::NotANumber);
    }
    // The value is digits × 10^(exp - frac_len) µs = digits × 10^(exp - frac_len + 3) ns.
    let mut digits: u128 = 0;
    let mut ndigits = 0usize;
    for &c in int_part.iter().chain(frac_part.iter()) {
        if !c.is_ascii_digit() {
            return Err(TimeParseError::NotANumber);
        }
        ndigits += 1;
        if ndigits > 36 {
            return Err(TimeParseError::Overflow);
        }
        digits = digits * 10 + u128::from(c - b'0');
    }
    let scale = exp as i64 - frac_part.len() as i64 + 3;
    let ns: u128 = if scale >= 0 {
        let mut v = digits;
        for _ in 0..scale {
            v = v.checked_mul(10).ok_or(TimeParseError::Overflow)?;
            if v > u128::from(u64::MAX) {
                return Err(TimeParseError::Overflow);
            }
        }
        v
    } else {
        let div = 10u128
            .checked_pow((-scale) as u32)
            .ok_or(TimeParseError::SubNanosecond)?;
        if !digits.is_multiple_of(div) {
            return Err(TimeParseError::SubNanosecond);
        }
        digits / div
    };
    u64::try_from(ns).map_err(|_| TimeParseError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kineto_timestamp_is_exact() {
        assert_eq!(
            parse_us_to_ns("5153875767895.669"),
            Ok(5_153_875_767_895_669)
        );
        // Recent Kineto writes epoch microseconds (~1.7e15), where an f64's spacing is 0.25 µs:
        // the float route loses hundreds of nanoseconds even with rounding.
        let text = "1732950000123456.789";
        assert_eq!(parse_us_to_ns(text), Ok(1_732_950_000_123_456_789));
        let via_f64 = (text.parse::<f64>().unwrap() * 1000.0).round() as u64;
        assert_ne!(via_f64, 1_732_950_000_123_456_789);
    }

    #[test]
    fn integers_fractions_and_exponents() {
        assert_eq!(parse_us_to_ns("0"), Ok(0));
        assert_eq!(parse_us_to_ns("12"), Ok(12_000));
        assert_eq!(parse_us_to_ns("12.5"), Ok(12_500));
        assert_eq!(parse_us_to_ns("12.50"), Ok(12_500));
        assert_eq!(parse_us_to_ns("12.001"), Ok(12_001));
        assert_eq!(parse_us_to_ns("0.001"), Ok(1));
        assert_eq!(parse_us_to_ns(".5"), Ok(500));
        assert_eq!(parse_us_to_ns("3."), Ok(3_000));
        assert_eq!(parse_us_to_ns("1.5e3"), Ok(1_500_000));
        assert_eq!(parse_us_to_ns("1500E-3"), Ok(1_500));
        assert_eq!(parse_us_to_ns("1.0010"), Ok(1_001));
    }

    #[test]
    fn rejects_what_it_cannot_hold_exactly() {
        assert_eq!(parse_us_to_ns(""), Err(TimeParseError::Empty));
        assert_eq!(parse_us_to_ns("-1"), Err(TimeParseError::Negative));
        assert_eq!(parse_us_to_ns("1.0001"), Err(TimeParseError::SubNanosecond));
        assert_eq!(parse_us_to_ns("abc"), Err(TimeParseError::NotANumber));
        assert_eq!(parse_us_to_ns("."), Err(TimeParseError::NotANumber));
        assert_eq!(parse_us_to_ns("1e400"), Err(TimeParseError::Overflow));
        assert_eq!(
            parse_us_to_ns("99999999999999999999"),
            Err(TimeParseError::Overflow)
        );
    }
}
