//! What a golden shows of a file a command wrote, below the line with its size and CRC-32: CSV as
//! its text, JSON with sorted keys and one item a line, a Perfetto trace as its packets decoded,
//! a gzip file as what it holds; Parquet only as that line (no Parquet reader is a dependency of
//! the workspace). Each shows at most a few dozen lines, so a golden stays small however big the
//! file; the CRC-32 covers the rest.

mod json;
mod protobuf;

/// Lines of a CSV file shown before the rest is only counted.
const MAX_CSV_LINES: usize = 12;
/// Chrome JSON events and Perfetto packets shown: the first of each kind, and at most so many.
const PER_KIND: usize = 2;
const MAX_ITEMS: usize = 40;

/// The files already shown in one golden, by content: a file written twice (meta.json beside
/// the CSV and the Parquet tables) is shown once.
#[derive(Default)]
pub struct Shown(Vec<(u32, String)>);

impl Shown {
    /// The name an earlier file of these very bytes was shown under, or records this one.
    fn earlier(&mut self, bytes: &[u8], name: &str) -> Option<String> {
        let crc = crc32fast::hash(bytes);
        if let Some((_, n)) = self.0.iter().find(|(c, _)| *c == crc) {
            return Some(n.clone());
        }
        self.0.push((crc, name.to_string()));
        None
    }
}

/// Text lines of `bytes`, at most `max`, then how many more there are.
fn text_lines(bytes: &[u8], max: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = all.iter().take(max).map(|l| l.to_string()).collect();
    if all.len() > max {
        out.push(format!(
            "… {} more lines, covered by the CRC-32 above",
            all.len() - max
        ));
    }
    out
}

/// What the golden shows of the file `name` holding `bytes`: lines to print under its size and
/// CRC-32 line, each indented by two spaces.
pub fn describe(name: &str, bytes: &[u8], shown: &mut Shown) -> String {
    let lines = lines_of(name, bytes, shown);
    lines.iter().map(|l| format!("  {l}\n")).collect()
}

fn lines_of(name: &str, bytes: &[u8], shown: &mut Shown) -> Vec<String> {
    if name.ends_with(".parquet") {
        return Vec::new();
    }
    if let Some(earlier) = shown.earlier(bytes, name) {
        return vec![format!("(the same bytes as {earlier} above)")];
    }
    if let Some(inner) = name.strip_suffix(".gz") {
        use std::io::Read as _;
        let mut plain = Vec::new();
        if let Err(e) = flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut plain) {
            return vec![format!("(not gzip: {e})")];
        }
        let mut out = vec![format!(
            "(gzip of {} bytes, crc32 {:08x})",
            plain.len(),
            crc32fast::hash(&plain)
        )];
        out.extend(lines_of(inner, &plain, shown));
        return out;
    }
    let ext = name.rsplit('.').next().unwrap_or("");
    match ext {
        "csv" => text_lines(bytes, MAX_CSV_LINES),
        "json" => json::lines(bytes, PER_KIND, MAX_ITEMS),
        "pftrace" => protobuf::lines(bytes, PER_KIND, MAX_ITEMS),
        _ => text_lines(bytes, MAX_CSV_LINES),
    }
}

#[test]
fn a_file_seen_before_is_named_not_shown_again() {
    let mut shown = Shown::default();
    let csv = b"a,b\n1,2\n";
    assert_eq!(describe("x/t.csv", csv, &mut shown), "  a,b\n  1,2\n");
    assert_eq!(
        describe("y/t.csv", csv, &mut shown),
        "  (the same bytes as x/t.csv above)\n"
    );
    assert_eq!(describe("p.parquet", b"PAR1", &mut shown), "");
    let many: String = (0..20).map(|i| format!("{i}\n")).collect();
    let got = describe("m.csv", many.as_bytes(), &mut shown);
    assert_eq!(got.lines().count(), MAX_CSV_LINES + 1);
    assert!(got.ends_with("  … 8 more lines, covered by the CRC-32 above\n"));
}
