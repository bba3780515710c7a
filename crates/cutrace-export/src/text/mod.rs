//! Text for people: the report and the diff as `cutrace report` and `cutrace diff` print them,
//! and the formatting both share.

pub mod diff;
pub mod report;

pub use cutrace_analysis::fmt_ns;

/// Long template names would swamp a table: keep the start, mark the cut.
pub fn short_name(name: &str, max: usize) -> String {
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
