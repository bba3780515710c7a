//! Text for people: the report and the diff as `cutrace report` and `cutrace diff` print them,
//! and the formatting both share.

pub mod counters;
pub mod critical_path;
pub mod diff;
mod diff_pm;
pub mod job;
pub mod job_path_diff;
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

/// The columns the text fits, unless `--wide` asks for the long form.
pub const WIDTH: usize = 120;

/// How the text of one report writes durations and times: one unit per figure or per column,
/// no digits below the trace's resolution, and points in time as offsets from the trace's start
/// (as `--from` and `--to` take them; the JSON keeps the absolute times).
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// The long form: no wrapping, names in full.
    pub wide: bool,
    /// The clock's resolution (1, 10, 100 or 1000 ns).
    pub res_ns: u64,
    /// What times are offsets from: the trace's first record. `None`: absolute ns.
    pub origin_ns: Option<u64>,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            wide: false,
            res_ns: 1,
            origin_ns: None,
        }
    }
}

/// A unit for a column of durations, chosen from its largest value, and the decimals the
/// trace's resolution allows in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    div: u64,
    /// `ns`, `µs`, `ms` or `s`.
    pub unit: &'static str,
    decimals: u32,
}

impl Col {
    /// The unit a value of `max` ns reads best in: ns below 1 µs, µs below 1 ms, ms below 1 s,
    /// else s; with three decimals at most, and none below `res_ns`.
    pub fn for_max(max: u64, res_ns: u64) -> Col {
        let (div, unit) = match max {
            0..=999 => (1, "ns"),
            1_000..=999_999 => (1_000, "µs"),
            1_000_000..=999_999_999 => (1_000_000, "ms"),
            _ => (1_000_000_000, "s"),
        };
        let digits = |x: u64| x.max(1).ilog10();
        let decimals = digits(div).saturating_sub(digits(res_ns)).min(3);
        Col {
            div,
            unit,
            decimals,
        }
    }

    /// `v` in this column's unit, without the unit: rounded half up, in integers.
    pub fn num(&self, v: u64) -> String {
        let scale = 10u128.pow(self.decimals);
        let div = u128::from(self.div);
        let q = (u128::from(v) * scale + div / 2) / div;
        if self.decimals == 0 {
            q.to_string()
        } else {
            format!(
                "{}.{:0w$}",
                q / scale,
                q % scale,
                w = self.decimals as usize
            )
        }
    }

    /// [`Col::num`] of a signed value.
    pub fn signed(&self, v: i64) -> String {
        if v < 0 {
            format!("-{}", self.num(v.unsigned_abs()))
        } else {
            self.num(v as u64)
        }
    }

    /// `v` with its unit: `12.345 ms`.
    pub fn with_unit(&self, v: u64) -> String {
        format!("{} {}", self.num(v), self.unit)
    }
}

impl Style {
    /// The style of one report: its resolution and its start.
    pub fn of(r: &cutrace_analysis::Report, wide: bool) -> Style {
        Style {
            wide,
            res_ns: r.trace.resolution_ns.max(1),
            origin_ns: r.trace.first_ns,
        }
    }

    /// A duration in its own unit, to the resolution: `897 ns`, `12.345 µs`, `5.580 ms`.
    pub fn ns(&self, v: u64) -> String {
        Col::for_max(v, self.res_ns).with_unit(v)
    }

    /// A signed duration, as [`Style::ns`].
    pub fn signed(&self, v: i64) -> String {
        if v < 0 {
            format!("-{}", self.ns(v.unsigned_abs()))
        } else {
            self.ns(v as u64)
        }
    }

    /// The unit for a column holding `values`.
    pub fn col(&self, values: impl IntoIterator<Item = u64>) -> Col {
        Col::for_max(values.into_iter().max().unwrap_or(0), self.res_ns)
    }

    /// A point in time: `+12.345 ms` from the trace's start (`-…` before it), or `T ns` on the
    /// trace clock when there is no start to count from.
    pub fn at(&self, t: u64) -> String {
        match self.origin_ns {
            Some(o) if t >= o => format!("+{}", self.ns(t - o)),
            Some(o) => format!("-{}", self.ns(o - t)),
            None => format!("{t} ns"),
        }
    }

    /// A name inside a sentence: simplified unless wide (the line is wrapped as a whole).
    pub fn name(&self, name: &str) -> String {
        if self.wide {
            escape_controls(name).into_owned()
        } else {
            simple_name(name)
        }
    }
}

/// A demangled C++ name as a table shows it: without the leading `void`, without parameter
/// lists at any depth (the kernel's own, and those of the functions and lambdas named in its
/// template arguments: `operator()(TensorIterator&)`, `{lambda(float, float)#1}`), and without
/// namespace and enclosing-scope qualifiers (`at::native::(anonymous namespace)::`, `std::`,
/// `normal_kernel<…>(…)::{lambda()#1}::`), which repeat on every row. What tells one template
/// instance from another, its template arguments, is kept; when the name is still longer than
/// [`LONG_NAME`], arguments nested two deep are shown as `…`. Control characters are escaped.
pub fn simple_name(name: &str) -> String {
    simplify(name, true)
}

/// [`simple_name`] with every template argument kept, however long.
pub fn simple_name_whole(name: &str) -> String {
    simplify(name, false)
}

fn simplify(name: &str, elide: bool) -> String {
    let name = &*escape_controls(name);
    let s = name.strip_prefix("void ").unwrap_or(name);
    let s = drop_parameter_lists(s);
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(p) = rest.find("::") {
        out.push_str(&rest[..p]);
        drop_qualifier(&mut out);
        rest = &rest[p + 2..];
    }
    out.push_str(rest);
    if elide && out.chars().count() > LONG_NAME {
        out = elide_deep_arguments(&out);
    }
    if out.trim().is_empty() {
        name.to_owned()
    } else {
        out
    }
}

/// Names longer than this (after [`simple_name`]'s other steps) have their arguments nested two
/// deep elided.
pub const LONG_NAME: usize = 100;

const ANON: &str = "(anonymous namespace)";

/// `s` without its `( … )` groups (balanced; `(anonymous namespace)` kept, as a qualifier
/// [`drop_qualifier`] removes) and the ` const` that follows a member function's list.
fn drop_parameter_lists(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with(ANON) {
            out.push_str(ANON);
            rest = &rest[ANON.len()..];
            continue;
        }
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    rest = &rest[1..];
                    // `operator()() const`: the qualifier goes with the list.
                    if let Some(r) = rest.strip_prefix(" const") {
                        if !r.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                            rest = r;
                        }
                    }
                    continue;
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    if depth > 0 {
        // Unbalanced: the name is kept as it was.
        return s.to_owned();
    }
    out
}

/// `f<a, g<b<c>>, d>` as `f<a, g<…>, d>`: template arguments nested two deep or more replaced
/// by `…` (the brackets kept, so the shape still shows).
fn elide_deep_arguments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth <= 2 {
                    out.push(c);
                }
                if depth == 2 {
                    out.push('…');
                }
            }
            '>' => {
                if depth <= 2 {
                    out.push(c);
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth < 2 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Removes the qualifier that ends `out` (the part before a `::`): an identifier with its
/// template arguments, a `{lambda…}` or other braced scope, or `(anonymous namespace)`.
fn drop_qualifier(out: &mut String) {
    if out.ends_with(ANON) {
        out.truncate(out.len() - ANON.len());
        return;
    }
    for (open, close) in [('<', '>'), ('{', '}')] {
        if out.ends_with(close) {
            let mut depth = 0usize;
            let mut cut = None;
            for (i, c) in out.char_indices().rev() {
                if c == close {
                    depth += 1;
                } else if c == open {
                    depth -= 1;
                    if depth == 0 {
                        cut = Some(i);
                        break;
                    }
                }
            }
            match cut {
                Some(i) => out.truncate(i),
                None => return,
            }
            if close == '}' {
                return;
            }
        }
    }
    let keep = out
        .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_')
        .len();
    out.truncate(keep);
}

/// `name` on lines of `width` characters at most, broken after a space where it can be, else
/// after a `<`, `_` or `,`, else where the width ends.
pub fn wrap_name(name: &str, width: usize) -> Vec<String> {
    let width = width.max(8);
    let chars: Vec<char> = name.chars().collect();
    let mut lines = Vec::new();
    let mut at = 0;
    while chars.len() - at > width {
        let head = &chars[at..at + width];
        let after = |pred: &dyn Fn(char) -> bool| {
            head.iter()
                .rposition(|&c| pred(c))
                .filter(|&i| i >= width / 3)
                .map(|i| i + 1)
        };
        let cut = after(&|c| c == ' ')
            .or_else(|| after(&|c| matches!(c, '<' | '_' | ',')))
            .unwrap_or(width);
        let line: String = chars[at..at + cut].iter().collect();
        lines.push(line.trim_end().to_owned());
        at += cut;
        while chars.get(at) == Some(&' ') {
            at += 1;
        }
    }
    lines.push(chars[at..].iter().collect());
    lines
}

/// Whether `word` is a unit that belongs with the number before it (`µs`, `ms)`, `%,`): a line
/// is never broken between them.
fn is_unit(word: &str) -> bool {
    let w = word.trim_end_matches([')', ']', ',', ';', ':', '.']);
    matches!(
        w,
        "ns" | "µs" | "ms" | "s" | "%" | "B" | "KiB" | "MiB" | "GiB" | "GB/s"
    )
}

/// Wraps every line of `text` longer than [`WIDTH`] at spaces, its continuation lines indented
/// four more than it; a word longer than a line is broken where the line ends.
pub fn fit(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.chars().count() <= WIDTH {
            out.push_str(line);
            continue;
        }
        let indent = body.len() - body.trim_start_matches(' ').len();
        let cont = " ".repeat((indent + 4).min(WIDTH / 2));
        // A line indented past half the width starts its words at half the width.
        let first = " ".repeat(indent.min(WIDTH / 2));
        let mut cur = first.clone();
        let mut cur_len = first.len();
        let mut first_word = true;
        // Words, each unit kept with its number.
        let mut words: Vec<String> = Vec::new();
        for w in body[indent..].split(' ') {
            match words.last_mut() {
                Some(last) if is_unit(w) && !last.is_empty() => {
                    last.push(' ');
                    last.push_str(w);
                }
                _ => words.push(w.to_owned()),
            }
        }
        for word in &words {
            let wl = word.chars().count();
            if !first_word && cur_len + 1 + wl > WIDTH {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = cont.clone();
                cur_len = cont.len();
                first_word = true;
            }
            if !first_word {
                cur.push(' ');
                cur_len += 1;
            }
            // A word longer than what is left of a fresh line: broken where the line ends.
            let mut w: Vec<char> = word.chars().collect();
            while cur_len + w.len() > WIDTH && first_word && w.len() > WIDTH - cur_len {
                let room = WIDTH - cur_len;
                cur.extend(&w[..room]);
                out.push_str(&cur);
                out.push('\n');
                w.drain(..room);
                cur = cont.clone();
                cur_len = cont.len();
            }
            cur.extend(&w);
            cur_len += w.len();
            first_word = false;
        }
        out.push_str(cur.trim_end());
        out.push_str(nl);
    }
    out
}

/// Three columns of durations that changed, in one unit: `base (ms)`, `new (ms)` and
/// `change (ms)`, each diff table's first three.
pub struct Changes {
    pub col: Col,
    heads: [String; 3],
    /// A rise written `+1.234` (else `1.234`).
    plus: bool,
}

impl Changes {
    /// Over every row's `(base, new, new − base)`.
    pub fn new(st: &Style, rows: impl IntoIterator<Item = (u64, u64, i64)>, plus: bool) -> Self {
        let col = st.col(
            rows.into_iter()
                .flat_map(|(b, n, d)| [b, n, d.unsigned_abs()]),
        );
        let heads = ["base", "new", "change"].map(|h| format!("{h} ({})", col.unit));
        Changes { col, heads, plus }
    }

    pub fn columns(&self) -> [Column<'_>; 3] {
        [
            num(&self.heads[0]),
            num(&self.heads[1]),
            num(&self.heads[2]),
        ]
    }

    /// A change in the column's unit.
    pub fn change(&self, d: i64) -> String {
        if self.plus && d > 0 {
            format!("+{}", self.col.num(d as u64))
        } else {
            self.col.signed(d)
        }
    }

    /// A row's three cells.
    pub fn cells(&self, base: u64, new: u64, d: i64) -> [String; 3] {
        [self.col.num(base), self.col.num(new), self.change(d)]
    }
}

/// A column of a [`table`]: its heading, and whether its cells are aligned right (numbers) or
/// left (labels).
pub struct Column<'a> {
    pub head: &'a str,
    pub right: bool,
}

/// A right-aligned column (numbers).
pub fn num(head: &str) -> Column<'_> {
    Column { head, right: true }
}

/// A left-aligned column (labels).
pub fn label(head: &str) -> Column<'_> {
    Column { head, right: false }
}

/// Writes a table indented by two: each column as wide as its widest cell or heading, two spaces
/// apart, and when `names` is given, a last column of names that takes the rest of [`WIDTH`]
/// and wraps a long name onto lines of its own below, under the name column (`--wide`: in full
/// on one line). Names that simplify alike ([`simple_name`]) but differ are shown as recorded.
pub fn table(
    o: &mut String,
    st: &Style,
    cols: &[Column<'_>],
    rows: &[Vec<String>],
    names: Option<(&str, &[String])>,
) {
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([c.head.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for ((c, w), cell) in cols.iter().zip(&widths).zip(cells) {
            l.push_str("  ");
            if c.right {
                let _ = write!(l, "{cell:>w$}");
            } else {
                let _ = write!(l, "{cell:<w$}");
            }
        }
        l
    };
    let used = line(&mut cols.iter().map(|c| c.head)).chars().count() + 2;
    let name_width = WIDTH.saturating_sub(used).max(24);
    let shown: Vec<Vec<String>> = match names {
        None => Vec::new(),
        Some((_, names)) => {
            // Each name as short as it can be while the rows' names stay apart: simplified,
            // else simplified with every argument, else as recorded.
            let simple: Vec<String> = names.iter().map(|n| simple_name(n)).collect();
            let whole: Vec<String> = names.iter().map(|n| simple_name_whole(n)).collect();
            // Per shown form, the distinct names that take it: a clash is a form with two.
            let takers = |v: &[String]| {
                let mut m: std::collections::HashMap<&str, std::collections::HashSet<&str>> =
                    std::collections::HashMap::new();
                for (shown, name) in v.iter().zip(names) {
                    m.entry(shown.as_str()).or_default().insert(name.as_str());
                }
                m.into_iter()
                    .filter(|(_, n)| n.len() > 1)
                    .map(|(k, _)| k.to_owned())
                    .collect::<std::collections::HashSet<String>>()
            };
            let (simple_clashes, whole_clashes) = (takers(&simple), takers(&whole));
            let clash = |v: &[String], i: usize| {
                let c = if std::ptr::eq(v, simple.as_slice()) {
                    &simple_clashes
                } else {
                    &whole_clashes
                };
                c.contains(&v[i])
            };
            (0..names.len())
                .map(|i| {
                    if st.wide {
                        return vec![escape_controls(&names[i]).into_owned()];
                    }
                    let shown = if !clash(&simple, i) {
                        &simple[i]
                    } else if !clash(&whole, i) {
                        &whole[i]
                    } else {
                        return wrap_name(&escape_controls(&names[i]), name_width);
                    };
                    wrap_name(shown, name_width)
                })
                .collect()
        }
    };
    let head = line(&mut cols.iter().map(|c| c.head));
    match names {
        Some((h, _)) => {
            let _ = writeln!(o, "{head}  {h}");
        }
        None => {
            let _ = writeln!(o, "{}", head.trim_end());
        }
    }
    for (i, r) in rows.iter().enumerate() {
        let l = line(&mut r.iter().map(String::as_str));
        match shown.get(i) {
            Some(name) => {
                let _ = writeln!(o, "{l}  {}", name[0]);
                for more in &name[1..] {
                    let _ = writeln!(o, "{:used$}{more}", "");
                }
            }
            None => {
                let _ = writeln!(o, "{}", l.trim_end());
            }
        }
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

    #[test]
    fn a_column_takes_its_unit_from_its_largest_value_and_its_digits_from_the_resolution() {
        let c = Col::for_max(5_580_155, 1);
        assert_eq!(
            (c.unit, c.num(5_580_155), c.num(897)),
            ("ms", "5.580".into(), "0.001".into())
        );
        let us = Col::for_max(999_999, 1);
        assert_eq!(
            (us.unit, us.num(4_639), us.num(999_999)),
            ("µs", "4.639".into(), "999.999".into())
        );
        // Integer-µs traces: no decimals in µs, three in ms.
        assert_eq!(Col::for_max(4_027_000, 1000).num(4_027_000), "4.027");
        assert_eq!(Col::for_max(402_000, 1000).num(402_000), "402");
        assert_eq!(Col::for_max(402_000, 100).num(402_300), "402.3");
        assert_eq!(Col::for_max(12, 1).with_unit(12), "12 ns");
        assert_eq!(
            Col::for_max(3_000_000_000, 1).with_unit(3_000_000_000),
            "3.000 s"
        );
        assert_eq!(Col::for_max(1_000, 1).signed(-1_500), "-1.500");
        let st = Style {
            origin_ns: Some(1_000_000),
            ..Style::default()
        };
        assert_eq!(st.at(1_250_000), "+250.000 µs");
        assert_eq!(st.at(999_000), "-1.000 µs");
        assert_eq!(Style::default().at(42), "42 ns");
    }

    #[test]
    fn a_simple_name_drops_what_repeats_and_keeps_the_template_arguments() {
        let multi = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::\
                     (anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::\
                     PointwiseOpScalarFunctor<float, 4, 4, 3>, std::multiplies<float>, float>\
                     (at::native::(anonymous namespace)::TensorListMetadata<4>, float)";
        let whole =
            "multi_tensor_apply_kernel<TensorListMetadata<4>, PointwiseOpScalarFunctor<float, \
                     4, 4, 3>, multiplies<float>, float>";
        assert_eq!(simple_name_whole(multi), whole);
        // Over LONG_NAME characters: arguments two deep are elided.
        assert!(whole.chars().count() > LONG_NAME);
        assert_eq!(
            simple_name(multi),
            "multi_tensor_apply_kernel<TensorListMetadata<…>, PointwiseOpScalarFunctor<…>, \
             multiplies<…>, float>"
        );
        assert_eq!(
            simple_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)"),
            "Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"
        );
        // Parameter lists at any depth, `const` after them, and scopes of lambdas go.
        assert_eq!(
            simple_name(
                "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel\
                 <float, 4, at::native::templates::cuda::normal_and_transform<float, float, \
                 at::CUDAGeneratorImpl*, at::native::templates::cuda::normal_kernel<at::\
                 CUDAGeneratorImpl*>(at::TensorBase const&, double, double, at::CUDAGeneratorImpl*)\
                 ::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::\
                 {lambda(float)#1}>(at::TensorIteratorBase&, at::CUDAGeneratorImpl*, \
                 at::native::templates::cuda::normal_and_transform<float, float>::{lambda(float)#1})\
                 ::{lambda(curandStatePhilox4_32_10*)#2}>(long, at::PhiloxCudaState, \
                 at::native::templates::cuda::normal_and_transform<float>::{lambda(float)#1})"
            ),
            "distribution_elementwise_grid_stride_kernel<float, 4, {lambda#2}>"
        );
        let reduce = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, \
                      at::native::func_wrapper_t<float, at::native::sum_functor<float, float, \
                      float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, \
                      unsigned int, float, 4, 4> >(at::native::ReduceOp<float, int, unsigned int, \
                      float, 4, 4>)";
        assert_eq!(simple_name(reduce), "reduce_kernel<128, 4, ReduceOp<…> >");
        assert_eq!(
            simple_name_whole(reduce),
            "reduce_kernel<128, 4, ReduceOp<float, func_wrapper_t<float, {lambda#1}>, unsigned int, \
             float, 4, 4> >"
        );
        // A qualifier with template arguments goes whole.
        assert_eq!(
            simple_name("ns::Outer<int>::inner_kernel(int)"),
            "inner_kernel"
        );
        // Plain names, names that are all qualifier, and unbalanced ones are kept.
        assert_eq!(
            simple_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
        assert_eq!(simple_name("cudaLaunchKernel"), "cudaLaunchKernel");
        assert_eq!(simple_name("::"), "::");
        assert_eq!(simple_name("f(int"), "f(int");
        assert_eq!(simple_name("x\x1by"), "x\\u{1b}y");
    }

    #[test]
    fn long_lines_wrap_at_spaces_and_keep_units_with_their_numbers() {
        let line = format!(
            "  {}",
            ["word"; 40].join(" ").replace("word word", "12.5 µs")
        );
        let out = fit(&format!("{line}\nshort\n"));
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(!out.contains("12.5\n") && out.ends_with("short\n"), "{out}");
        let cont: Vec<&str> = out.lines().skip(1).take_while(|l| *l != "short").collect();
        assert!(
            !cont.is_empty() && cont.iter().all(|l| l.starts_with("      ")),
            "{out}"
        );
        // The words, in order, are all there.
        let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&out), words(&format!("{line} short")));
        // A line indented past the width (a name of spaces) starts at half of it.
        let deep = format!("{}{}", " ".repeat(200), "y".repeat(150));
        let out = fit(&deep);
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert_eq!(out.replace(['\n', ' '], ""), "y".repeat(150));
        // A word longer than a line is broken where the line ends.
        let long = "x".repeat(300);
        let out = fit(&long);
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert_eq!(out.replace(['\n', ' '], ""), long);
    }

    #[test]
    fn a_table_fits_and_wraps_a_long_name_under_its_column() {
        let st = Style::default();
        let long = format!("kernel<{}>", ["Functor_float_3_3_0"; 8].join(", "));
        let names = vec!["short".to_string(), long.clone()];
        let rows = vec![
            vec!["1".to_string(), "0.5".to_string()],
            vec!["22".to_string(), "12.25".to_string()],
        ];
        let mut o = String::new();
        table(
            &mut o,
            &st,
            &[label("id"), num("time (ms)")],
            &rows,
            Some(("name", &names)),
        );
        let lines: Vec<&str> = o.lines().collect();
        assert_eq!(lines[0], "  id  time (ms)  name");
        assert_eq!(lines[1], "  1         0.5  short");
        assert!(
            lines[2].starts_with("  22      12.25  kernel<Functor_float_3_3_0,"),
            "{o}"
        );
        assert!(
            lines.len() > 3 && lines[3..].iter().all(|l| l.starts_with(&" ".repeat(17))),
            "{o}"
        );
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{o}");
        let joined: String = lines[2..]
            .iter()
            .map(|l| l[17..].trim())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(joined.replace(' ', ""), long.replace(' ', ""));
        // Wide: one line, the name as recorded.
        let mut w = String::new();
        let wide = Style { wide: true, ..st };
        table(
            &mut w,
            &wide,
            &[label("id"), num("time (ms)")],
            &rows,
            Some(("name", &names)),
        );
        assert_eq!(w.lines().count(), 3);
        assert!(w.contains(&long));
        // Two names alike once simplified are shown as recorded.
        let twins = vec!["a::f(int)".to_string(), "b::f(int)".to_string()];
        let mut t = String::new();
        table(&mut t, &st, &[num("n")], &rows, Some(("name", &twins)));
        assert!(t.contains("a::f(int)") && t.contains("b::f(int)"), "{t}");
    }
}
