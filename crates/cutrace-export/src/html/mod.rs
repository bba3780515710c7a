//! The report and the diff as one self-contained HTML page (`cutrace report --html`, `cutrace
//! diff --html`): the numbers of the JSON report as tables, charts as SVG written here, and a
//! timeline drawn and zoomed by a small inline script from levels of detail computed in Rust
//! ([`lod`]), so that the file's size does not grow with the trace. Nothing is fetched when the
//! page is viewed: no fonts, no libraries, no network. Every text that comes from the trace goes
//! through [`escape`], and the page's Content-Security-Policy runs only its own script and style
//! sheet, by their hashes ([`content_security_policy`]).

pub mod diff;
pub mod job;
pub mod job_lod;
pub mod lod;
pub mod memory;
pub mod path;
pub mod report;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;

use cutrace_analysis::fmt_ns;
use serde::Serialize;

use crate::files::OutFile;
pub use lod::{timeline_lod, TimelineLod};

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// `s` with the characters that mean something to HTML (`& < > " '`) written as entities, for
/// text and attribute values alike. Control characters are written as [`crate::text`] writes
/// them for a terminal, so that a name shows the same in both.
pub fn escape(s: &str) -> Cow<'_, str> {
    let s = crate::text::escape_controls(s);
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON that is safe inside `<script type="application/json">`: a `<` (only ever inside a JSON
/// string) is written `\u003c`, so no `</script>` or `<!--` in a name can end the element.
fn script_json(v: &impl Serialize) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c")
}

/// The page's data for its script: the timelines to draw.
#[derive(Serialize)]
struct PageData<'a> {
    timelines: Vec<TimelineData<'a>>,
}

#[derive(Serialize)]
struct TimelineData<'a> {
    id: String,
    lod: &'a TimelineLod,
    /// The report's largest gaps per GPU, relative to the timeline's start, with their reading.
    gaps: Vec<GapMark>,
}

#[derive(Serialize)]
struct GapMark {
    device: u32,
    from_ns: u64,
    to_ns: u64,
    /// Its length and reading, in words: the tooltip's first line.
    reading: String,
    /// What the host was doing in it, one line each ([`report::gap_context`]): the tooltip's
    /// other lines, as the largest gaps table shows them.
    context: Vec<String>,
}

/// The page's Content-Security-Policy. Nothing may be fetched (`default-src 'none'`), and the
/// only style sheet and script that may run are the page's own, named by the SHA-256 of their
/// exact text: a `<script>`, `<style>`, event handler attribute (`onclick=`) or `style=`
/// attribute that got into the page some other way is not run, so escaping ([`escape`]) is not
/// the page's only defence against a hostile name. The script attaches its handlers with
/// `addEventListener` and sets styles through the CSSOM, both of which the policy allows.
fn content_security_policy() -> String {
    format!(
        "default-src 'none'; style-src {}; script-src {}; img-src data:; base-uri 'none'; \
         form-action 'none'",
        csp_hash(CSS),
        csp_hash(JS)
    )
}

/// A CSP hash source for an inline element whose text is `text`, exactly: `'sha256-BASE64'`.
fn csp_hash(text: &str) -> String {
    use sha2::{Digest as _, Sha256};
    format!("'sha256-{}'", base64(&Sha256::digest(text.as_bytes())))
}

/// `bytes` in base64 with the standard alphabet and `=` padding (RFC 4648 §4), as CSP hashes
/// are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn page_start(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        content_security_policy(),
        escape(title)
    );
}

fn page_end(o: &mut String, data: &PageData<'_>) {
    // The script element holds `JS` exactly, the text whose hash the policy names; the data
    // block before it is JSON (`type="application/json"`), which no policy runs.
    let _ = write!(
        o,
        "<footer>Written by cutrace {}. Self-contained: nothing on this page is fetched from \
         the network.</footer>\n<script type=\"application/json\" id=\"cutrace-data\">{}</script>\n\
         <script>{JS}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        script_json(data)
    );
}

/// Writes `html` to `dest` as every cutrace output is written: a new file beside it (exclusive
/// create, no link followed, permission bits `mode`), renamed into place once complete. An
/// existing `dest` is not replaced (`AlreadyExists`).
pub fn write_file(dest: &Path, html: &str, mode: u32, force: bool) -> io::Result<()> {
    if force {
        // As `convert --force`: only a regular file is replaced, never a link or a directory.
        if let Ok(m) = std::fs::symlink_metadata(dest) {
            if !m.file_type().is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a regular file (a link, a directory or a device); \
                         --force replaces only regular files: remove it or choose another name",
                        dest.display()
                    ),
                ));
            }
        }
    }
    let mut f = OutFile::create(dest, mode)?;
    f.file().write_all(html.as_bytes())?;
    f.commit(force).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists && !force {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists: choose a new name, or --force to replace it (nothing written)",
                    dest.display()
                ),
            )
        } else {
            e
        }
    })
}

/// `--html DEST`: [`write_file`], or `stdout` when `dest` is `-` (as for every cutrace output).
pub fn write_to(
    dest: &Path,
    html: &str,
    stdout: &mut dyn io::Write,
    mode: u32,
    force: bool,
) -> io::Result<()> {
    if dest.as_os_str() == "-" {
        stdout.write_all(html.as_bytes())
    } else {
        write_file(dest, html, mode, force)
    }
}

/// A number with the marks the tests read: `data-check` names what it is (a JSON report
/// field), `data-value` holds the exact value.
fn checked(
    o: &mut String,
    tag: &str,
    check: &str,
    extra: &str,
    value: impl std::fmt::Display,
    text: &str,
) {
    let _ = write!(
        o,
        "<{tag} class=\"num\" data-check=\"{check}\"{extra} data-value=\"{value}\">{}</{tag}>",
        escape(text)
    );
}

/// A change of duration with its sign: `+1.500 ms`, `−20 µs`.
fn signed_change(v: i64) -> String {
    let sign = if v < 0 { "−" } else { "+" };
    format!("{sign}{}", fmt_ns(v.unsigned_abs()))
}

fn pct(v: f64) -> String {
    format!("{v:.2} %")
}

/// A table whose columns sort on a click (the script reads `data-sort` of each cell).
struct Table<'a> {
    o: &'a mut String,
}

impl<'a> Table<'a> {
    fn new(o: &'a mut String, class: &str, heads: &[(&str, bool)]) -> Self {
        let _ = write!(o, "<table class=\"sortable {class}\"><thead><tr>");
        for (h, numeric) in heads {
            let _ = write!(
                o,
                "<th data-type=\"{}\" tabindex=\"0\">{}</th>",
                if *numeric { "num" } else { "text" },
                escape(h)
            );
        }
        o.push_str("</tr></thead><tbody>");
        Table { o }
    }
    fn row(&mut self, cells: &[Cell]) {
        self.row_with("", cells);
    }
    /// A row whose `<tr>` carries `attrs` (the page's own, nothing from the trace unescaped).
    fn row_with(&mut self, attrs: &str, cells: &[Cell]) {
        let _ = write!(self.o, "<tr{attrs}>");
        for c in cells {
            match c {
                Cell::Text(t) => {
                    let _ = write!(self.o, "<td>{}</td>", escape(t));
                }
                Cell::Name(t) => {
                    let _ = write!(
                        self.o,
                        "<td class=\"name\" title=\"{0}\">{0}</td>",
                        escape(t)
                    );
                }
                Cell::Ns(v) => {
                    let _ = write!(
                        self.o,
                        "<td class=\"num\" data-sort=\"{v}\">{}</td>",
                        fmt_ns(*v)
                    );
                }
                Cell::Int(v) => {
                    let _ = write!(self.o, "<td class=\"num\" data-sort=\"{v}\">{v}</td>");
                }
                Cell::Pct(v) => {
                    let _ = write!(
                        self.o,
                        "<td class=\"num\" data-sort=\"{v}\">{}</td>",
                        pct(*v)
                    );
                }
                Cell::Raw(sort, html) => {
                    let _ = write!(self.o, "<td class=\"num\" data-sort=\"{sort}\">{html}</td>");
                }
                Cell::Context(html) => {
                    let _ = write!(self.o, "<td class=\"context\">{html}</td>");
                }
            }
        }
        self.o.push_str("</tr>");
    }
    fn end(self) {
        self.o.push_str("</tbody></table>\n");
    }
}

enum Cell {
    Text(String),
    /// A name from the trace: escaped, shown cut by CSS, whole in its tooltip.
    Name(String),
    Ns(u64),
    Int(u64),
    Pct(f64),
    /// Sort key and ready HTML.
    Raw(f64, String),
    /// Ready HTML of lines from the trace, each already escaped: shown whole, wrapped.
    Context(String),
}

/// A bar chart as SVG: one bar per `(label, value, tooltip)`, values ≥ 0.
fn bar_chart(o: &mut String, class: &str, bars: &[(String, f64, String)], unit: &str) {
    let w = 640.0;
    let h = 180.0;
    let left = 40.0;
    let bottom = 40.0;
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max);
    let _ = write!(
        o,
        "<svg class=\"chart {class}\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-label=\"{}\">",
        escape(unit)
    );
    let _ = write!(
        o,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{w}\" y2=\"{}\" class=\"axis\"/>",
        h - bottom,
        h - bottom
    );
    let n = bars.len().max(1) as f64;
    let slot = (w - left) / n;
    for (i, (label, v, tip)) in bars.iter().enumerate() {
        let bh = if max > 0.0 {
            v / max * (h - bottom - 10.0)
        } else {
            0.0
        };
        // A zero bar keeps one pixel, so a chart of zeros is drawn, not blank.
        let bh = bh.max(1.0);
        let x = left + i as f64 * slot + slot * 0.1;
        let _ = write!(
            o,
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\">\
             <title>{}</title></rect>",
            h - bottom - bh,
            slot * 0.8,
            escape(tip)
        );
        if bars.len() <= 24 || i % (bars.len() / 12 + 1) == 0 {
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                x + slot * 0.4,
                h - bottom + 14.0,
                escape(label)
            );
        }
    }
    let _ = write!(
        o,
        "<text x=\"2\" y=\"12\" class=\"tick\">{}</text></svg>",
        escape(unit)
    );
}

/// The timeline's frame of one trace (or one side of a diff): buttons, the range shown, the SVG
/// the script draws into, the legend.
fn timeline_frame(o: &mut String, id: &str, lod: &TimelineLod) {
    if lod.lanes.is_empty() {
        o.push_str("<p class=\"muted\">No kernels in the trace (or its window): no timeline.</p>");
        return;
    }
    timeline_open(
        o,
        id,
        lod,
        "<span class=\"sw busy\"></span>busy \
         <span class=\"sw host\"></span>idle: waiting for the host \
         <span class=\"sw queued\"></span>idle: launched, not started \
         <span class=\"sw unknown\"></span>idle: unknown (no launch call) \
         <span class=\"sw stream\"></span>stream busy \
         <span class=\"sw copy\"></span>copies: memcpy \
         <span class=\"sw memset\"></span>memset \
         <span class=\"sw hostop\"></span>host thread: in CPU ops \
         <span class=\"sw hostcall\"></span>in CUDA calls \
         <span class=\"gapmark\">▼</span> a largest gap (hover it for its reading and what the \
         host was doing).",
    );
    let has_path = lod.path_drawn.is_some();
    if has_path {
        let _ = write!(o, "<p class=\"legend\">{}</p>", path::legend());
    }
    let _ = write!(
        o,
        "<p class=\"muted\">Times are offsets from the {}; host threads and copies are drawn \
         within the span. Finest detail: {} per bucket on a GPU lane, {} on a stream, copies or \
         host lane{}.</p></div>",
        if has_path {
            "start of the span drawn: the first kernel start, or the critical path's start where \
             it begins earlier (the span ends at the last kernel end or the path's end)"
        } else {
            "first kernel start (the span drawn ends at the last kernel end)"
        },
        fmt_ns(lod.gpu_bucket_ns),
        fmt_ns(lod.stream_bucket_ns),
        [
            (lod.streams_not_drawn, "streams"),
            (lod.host_threads_not_drawn, "host threads")
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("; {n} {what} have no lane (the busiest are drawn)"))
        .collect::<String>()
    );
}

/// A timeline's controls, the SVG the script draws `lod` into, and `legend` (the page's own
/// HTML, nothing from the trace), in an open `<div class="timeline">` the caller closes after its
/// notes.
fn timeline_open(o: &mut String, id: &str, lod: &TimelineLod, legend: &str) {
    let _ = write!(
        o,
        "<div class=\"timeline\" id=\"{id}\"><div class=\"tl-controls\">\
         <button type=\"button\" class=\"tl-in\">Zoom in</button>\
         <button type=\"button\" class=\"tl-out\">Zoom out</button>\
         <button type=\"button\" class=\"tl-reset\">Whole span</button>\
         <span class=\"tl-range\" data-from=\"0\" data-to=\"{}\"></span>\
         <span class=\"tl-level muted\"></span></div>\
         <svg class=\"tl-svg\" viewBox=\"0 0 1000 100\" preserveAspectRatio=\"none\"></svg>\
         <p class=\"legend\">{legend} Drag across the strip to zoom to a range; the mouse wheel \
         zooms around the pointer.</p>",
        lod.span_ns
    );
}
