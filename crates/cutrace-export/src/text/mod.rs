//! Text for people: the report and the diff as `cutrace report` and `cutrace diff` print them,
//! and the formatting both share.

pub mod counters;
pub mod diff;
mod diff_pm;
pub mod job;
pub mod memory;
pub mod pc;
pub mod pm;
pub mod report;
pub mod verdict;

use std::borrow::Cow;
use std::fmt::Write as _;

pub use cutrace_analysis::fmt_ns;

/// `s` with its control characters (C0, DEL, C1: what a terminal may act on) written as Rust
/// writes them, `\u{1b}`, so that a name from a trace cannot retitle, clear or redraw the
/// terminal it is shown on. Ordinary Unicode is kept as it is. Every text cutrace prints of
/// input (names of kernels, ranges and processes, file names, errors that quote input) goes
/// through this one function.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`] for text of several lines: each line escaped, the line breaks kept.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.split('\n')
            .map(escape_controls)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Escapes (see [`escape_lines`]) what was written to `o` from byte `from` on: the renderers
/// write their text, then make it safe for a terminal in one place.
fn escape_from(o: &mut String, from: usize) {
    if let Cow::Owned(safe) = escape_lines(&o[from..]) {
        o.truncate(from);
        o.push_str(&safe);
    }
}

/// Long template names would swamp a table: keep the start, mark the cut. Control characters
/// are escaped first (a name is one line).
pub fn short_name(name: &str, max: usize) -> String {
    let name = &*escape_controls(name);
    if name.chars().count() <= max {
        return name.to_owned();
    }
    // Keep both ends: template instances of one kernel differ in their arguments, at the end.
    let head = max.saturating_sub(1) / 2;
    let tail = max.saturating_sub(1) - head;
    let chars: Vec<char> = name.chars().collect();
    let mut s: String = chars[..head].iter().collect();
    s.push('…');
    s.extend(&chars[chars.len() - tail..]);
    s
}

/// `N` and the noun, singular for 1: `1 part`, `4 parts`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `a, b, c` or `a, b, c and 4 more`.
pub fn name_some(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        let _ = write!(s, " and {} more", names.len() - SHOWN);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_unicode_is_kept() {
        assert_eq!(
            escape_controls("a\x1b]0;t\x07b\u{9b}c\x7f"),
            "a\\u{1b}]0;t\\u{7}b\\u{9b}c\\u{7f}"
        );
        assert_eq!(escape_controls("gemm<µ, 日本>"), "gemm<µ, 日本>");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(escape_controls("two\nlines"), "two\\u{a}lines");
        assert_eq!(escape_lines("one\x1b[2J\ntwo\n"), "one\\u{1b}[2J\ntwo\n");
        assert_eq!(short_name("x\x1by", 10), "x\\u{1b}y");
    }
}
