//! Exact decimal parsing of microsecond timestamps into integer nanoseconds.
//!
//! Kineto writes `"ts": 5153875767895.669` (µs). Through f64 that value is
//! 5153875767895.6689453125, and at that magnitude an f64 cannot hold every nanosecond, so a
//! float pipeline invents or hides gaps. We parse the decimal text digit by digit instead.
//!
//! A time written with digits below the nanosecond (`1.2345` µs) is read exactly too, as whole
//! nanoseconds plus a remainder ([`UsTime`]); the Kineto importer rounds it to the nearest
//! nanosecond, ties to even, and counts it. Times without such digits are never rounded.

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

/// Digits below the nanosecond that [`UsTime`] keeps exactly.
const SUB_DIGITS: usize = 36;
/// One nanosecond in [`UsTime::sub`] units (10⁻³⁶ ns).
const SUB_ONE: u128 = 10u128.pow(SUB_DIGITS as u32);
/// Half a nanosecond in the same units.
const SUB_HALF: u128 = SUB_ONE / 2;

/// A non-negative time read exactly from decimal µs text: whole nanoseconds and the part below
/// the nanosecond. Two of them add exactly, so an event's end (`ts + dur`) is rounded once, as
/// one sum, and rounding keeps the order of any two times (it never makes touching events
/// overlap or overlapping ones part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsTime {
    ns: u64,
    /// The part below the nanosecond, in units of 10⁻³⁶ ns.
    sub: u128,
    /// Non-zero digits further below than `sub` holds (only ever decide a tie).
    sticky: bool,
}

impl UsTime {
    /// True when the time is a whole number of nanoseconds (nothing to round).
    pub fn is_whole(&self) -> bool {
        self.sub == 0 && !self.sticky
    }

    /// The exact sum; `None` past 64-bit nanoseconds.
    pub fn checked_add(self, other: UsTime) -> Option<UsTime> {
        let mut sub = self.sub + other.sub;
        let mut carry = 0;
        if sub >= SUB_ONE {
            sub -= SUB_ONE;
            carry = 1;
        }
        Some(UsTime {
            ns: self.ns.checked_add(other.ns)?.checked_add(carry)?,
            sub,
            sticky: self.sticky || other.sticky,
        })
    }

    /// The nearest whole nanosecond, ties to even (`0.5` ns → 0, `1.5` ns → 2).
    pub fn round_ns(self) -> Result<u64, TimeParseError> {
        let up = self.sub > SUB_HALF || (self.sub == SUB_HALF && (self.sticky || self.ns % 2 == 1));
        if up {
            self.ns.checked_add(1).ok_or(TimeParseError::Overflow)
        } else {
            Ok(self.ns)
        }
    }
}

/// Parses a non-negative decimal number of microseconds (`123`, `123.4`, `123.456`,
/// `1.5e3`) into exact nanoseconds. Digits beyond the third decimal must be zeros.
pub fn parse_us_to_ns(text: &str) -> Result<u64, TimeParseError> {
    parse_us_to_ns_bytes(text.as_bytes())
}

/// [`parse_us_to_ns`] over raw bytes (the importer's input), surrounding whitespace allowed.
pub fn parse_us_to_ns_bytes(b: &[u8]) -> Result<u64, TimeParseError> {
    let t = parse_us_exact(b)?;
    if !t.is_whole() {
        return Err(TimeParseError::SubNanosecond);
    }
    Ok(t.ns)
}

/// Parses a non-negative decimal number of microseconds exactly, keeping any digits below the
/// nanosecond (see [`UsTime`]); surrounding whitespace allowed.
pub fn parse_us_exact(b: &[u8]) -> Result<UsTime, TimeParseError> {
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
    // The digits, read left to right: the first `whole` of them are whole nanoseconds (µs plus
    // the exponent plus three for ns), the rest lie below the nanosecond.
    let whole = int_part.len() as i64 + i64::from(exp) + 3;
    let ndigits = int_part.len() + frac_part.len();
    let k = whole.clamp(0, ndigits as i64) as usize;
    let mut t = UsTime {
        ns: 0,
        sub: 0,
        sticky: false,
    };
    // Position below the nanosecond of the first digit after the whole ones (0: tenths of a ns).
    let below = (k as i64 - whole) as u64;
    if k <= int_part.len() {
        t.ns = whole_digits(&int_part[..k], 0)?;
        sub_digits(&mut t, &int_part[k..], below)?;
        sub_digits(&mut t, frac_part, below + (int_part.len() - k) as u64)?;
    } else {
        let ns = whole_digits(int_part, 0)?;
        t.ns = whole_digits(&frac_part[..k - int_part.len()], ns)?;
        sub_digits(&mut t, &frac_part[k - int_part.len()..], below)?;
    }
    // Fewer digits than whole nanoseconds: the rest are zeros (`12` µs, `1.5e3` µs).
    if t.ns != 0 {
        for _ in ndigits as i64..whole {
            t.ns = t.ns.checked_mul(10).ok_or(TimeParseError::Overflow)?;
        }
    }
    Ok(t)
}

/// `acc` followed by the decimal `digits`.
#[inline]
fn whole_digits(digits: &[u8], mut acc: u64) -> Result<u64, TimeParseError> {
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(TimeParseError::NotANumber);
        }
        acc = acc
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(TimeParseError::Overflow)?;
    }
    Ok(acc)
}

/// Adds `digits`, the first at position `below` under the nanosecond, to `t`'s remainder.
#[inline]
fn sub_digits(t: &mut UsTime, digits: &[u8], below: u64) -> Result<(), TimeParseError> {
    for (j, &c) in digits.iter().enumerate() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(TimeParseError::NotANumber);
        }
        if d != 0 {
            match below.saturating_add(j as u64) {
                pos if pos < SUB_DIGITS as u64 => {
                    t.sub += u128::from(d) * 10u128.pow(SUB_DIGITS as u32 - 1 - pos as u32)
                }
                _ => t.sticky = true,
            }
        }
    }
    Ok(())
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

    fn rounded(text: &str) -> Result<u64, TimeParseError> {
        parse_us_exact(text.as_bytes())?.round_ns()
    }

    /// Digits below the nanosecond round to the nearest ns, ties to even; whole-ns times are
    /// untouched at any magnitude.
    #[test]
    fn sub_nanosecond_digits_round_to_nearest_ties_to_even() {
        assert_eq!(rounded("1.234567"), Ok(1_235));
        assert_eq!(rounded("1.2344999"), Ok(1_234));
        assert_eq!(rounded("0.0005"), Ok(0));
        assert_eq!(rounded("0.0015"), Ok(2));
        assert_eq!(rounded("0.0025"), Ok(2));
        assert_eq!(
            rounded("0.00250000000000000000000000000000000000001"),
            Ok(3)
        );
        assert_eq!(rounded("0.0004999999999"), Ok(0));
        assert_eq!(
            rounded("1732950000123456.7894"),
            Ok(1_732_950_000_123_456_789)
        );
        assert_eq!(
            rounded("1732950000123456.7895"),
            Ok(1_732_950_000_123_456_790)
        );
        assert_eq!(rounded("12345e-7"), Ok(1));
        assert_eq!(rounded("1e-400"), Ok(0));
        assert_eq!(rounded("0e400"), Ok(0));
        assert_eq!(
            rounded("18446744073709551.6155"),
            Err(TimeParseError::Overflow)
        );
        for whole in ["5153875767895.669", "1.5e3", "0", "12.0010000"] {
            let t = parse_us_exact(whole.as_bytes()).unwrap();
            assert!(t.is_whole(), "{whole}");
            assert_eq!(t.round_ns(), parse_us_to_ns(whole), "{whole}");
        }
        assert!(!parse_us_exact(b"1.0001").unwrap().is_whole());
        assert!(!parse_us_exact(b"1e-400").unwrap().is_whole());
    }

    /// Sums are exact before rounding: two halves make a whole nanosecond.
    #[test]
    fn sums_are_exact_then_rounded_once() {
        let a = parse_us_exact(b"1.0005").unwrap();
        let b = parse_us_exact(b"0.0015").unwrap();
        let s = a.checked_add(b).unwrap();
        assert!(s.is_whole());
        assert_eq!(s.round_ns(), Ok(1_002));
        let max = parse_us_exact(b"18446744073709551.615").unwrap();
        assert!(max.checked_add(parse_us_exact(b"0.001").unwrap()).is_none());
    }
}
