//! The words for holders and durations: `--for`'s parser and how a holder of the pause is
//! named to the user. Pure: the caller passes the current time.

use std::time::Duration;

use crate::{human, Holder, Role, MAX_DEADLINE};

/// Why a `--for` duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is longer than 7 days, the most --for accepts; for an open-ended pause use `cutrace dcgm pause` without --for, which holds until `cutrace dcgm resume`")]
    TooLong(String),
    #[error("{0:?}: expected a number with a unit, like 90s or 10m")]
    NotANumber(String),
    #[error("{text:?}: unknown unit {unit:?} (use ms, s, m or h)")]
    UnknownUnit { text: String, unit: String },
    #[error("the duration must be more than 0")]
    Zero,
}

/// `90s`, `10m`, `1h`, `500ms`, or plain seconds; more than 0 and at most [`MAX_DEADLINE`].
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let too_long = || DurationError::TooLong(s.to_string());
    let n: u64 = num.parse().map_err(|e: std::num::ParseIntError| {
        if *e.kind() == std::num::IntErrorKind::PosOverflow {
            too_long()
        } else {
            DurationError::NotANumber(s.to_string())
        }
    })?;
    let per: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(DurationError::UnknownUnit {
                text: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    let ms = n.checked_mul(per).ok_or_else(too_long)?;
    if ms == 0 {
        return Err(DurationError::Zero);
    }
    let d = Duration::from_millis(ms);
    if d > MAX_DEADLINE {
        return Err(too_long());
    }
    Ok(d)
}

/// Unix seconds now (0 if the clock is before 1970).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// "watchdog pid 123 of cutrace pid 120 (`ncu ./app`, holding for 42 s, its --for resumes in
/// 5 min)", `now` in Unix seconds.
pub fn describe(h: &Holder, now: u64) -> String {
    let what = match h.role {
        Role::Run => format!("`{}`", h.label),
        Role::Pause => "`cutrace dcgm pause`".to_string(),
    };
    let until = match h.until {
        Some(u) => format!(
            ", its --for resumes in {}",
            human(Duration::from_secs(u.saturating_sub(now)))
        ),
        None => String::new(),
    };
    format!(
        "watchdog pid {} of cutrace pid {} ({what}, holding for {}{until})",
        h.pid,
        h.owner,
        human(Duration::from_secs(now.saturating_sub(h.since).max(1)))
    )
}

/// The holders, one [`describe`] each; a hold with no record left is still named.
pub fn list(holders: &[Holder], now: u64) -> String {
    if holders.is_empty() {
        return "a cutrace session that left no record".into();
    }
    holders
        .iter()
        .map(|h| describe(h, now))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(
            parse_duration("168h"),
            Ok(Duration::from_secs(7 * 24 * 3600))
        );
        assert!(parse_duration("10 parsecs").is_err());
        assert_eq!(parse_duration("0s"), Err(DurationError::Zero));
        assert_eq!(
            parse_duration("5d").unwrap_err().to_string(),
            "\"5d\": unknown unit \"d\" (use ms, s, m or h)"
        );
    }

    #[test]
    fn absurd_durations_are_refused_not_overflowed() {
        for s in [
            "9999999999999999h",
            "99999999999999999999999s",
            "18446744073709551615m",
            "169h",
        ] {
            let e = parse_duration(s).expect_err(s).to_string();
            assert!(e.contains("longer than 7 days"), "{s}: {e}");
        }
    }

    fn holder(role: Role, until: Option<u64>) -> Holder {
        Holder {
            role,
            pid: 123,
            start: 9,
            owner: 120,
            label: "ncu ./app".into(),
            since: 1000,
            until,
            record: PathBuf::new(),
        }
    }

    #[test]
    fn holders_are_named_with_what_they_hold_for() {
        assert_eq!(
            describe(&holder(Role::Run, None), 1042),
            "watchdog pid 123 of cutrace pid 120 (`ncu ./app`, holding for 42 s)"
        );
        assert_eq!(
            describe(&holder(Role::Pause, Some(1342)), 1042),
            "watchdog pid 123 of cutrace pid 120 (`cutrace dcgm pause`, holding for 42 s, its \
             --for resumes in 5 min)"
        );
        // A holder that started this very second has held for 1 s, not 0 ms.
        assert!(describe(&holder(Role::Run, None), 1000).contains("holding for 1 s)"));
        let two = [holder(Role::Run, None), holder(Role::Pause, None)];
        assert_eq!(list(&two, 1042).matches("; ").count(), 1);
        assert_eq!(list(&[], 1042), "a cutrace session that left no record");
    }
}
