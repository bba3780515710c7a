//! A table (`tables.rs`) as CSV: a header line of column names, one line per row, RFC 4180
//! quoting where a text field needs it, a null as an empty field.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::tables::{Table, Values};

/// A text field as CSV: quoted (with its quotes doubled) when it holds a comma, a quote or a
/// line break.
fn q(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Rows whose values are made at once: a batch's columns are all a writer holds.
const BATCH_ROWS: usize = 1 << 16;

/// Writes `tb` to `w` as CSV.
pub fn write(w: &mut impl Write, tb: &Table) -> io::Result<()> {
    write_header(w, tb, &[])?;
    write_body(w, tb, "")
}

/// The header line of `tb`, with `more` column names after its own (a job's `rank`).
pub fn write_header(w: &mut impl Write, tb: &Table, more: &[&str]) -> io::Result<()> {
    let mut header: Vec<&str> = tb.columns.iter().map(|c| c.name).collect();
    header.extend_from_slice(more);
    writeln!(w, "{}", header.join(","))
}

/// The rows of `tb`, each line ending with `tail` (`,3`: a job's rank column), no header.
pub fn write_body(w: &mut impl Write, tb: &Table, tail: &str) -> io::Result<()> {
    let mut line = String::new();
    let mut a = 0;
    while a < tb.rows() {
        let b = (a + BATCH_ROWS).min(tb.rows());
        let batch: Vec<Values> = tb.columns.iter().map(|c| c.values(a..b)).collect();
        write_rows(w, &batch, (b - a, tail), &mut line)?;
        a = b;
    }
    Ok(())
}

fn write_rows(
    w: &mut impl Write,
    batch: &[Values],
    (rows, tail): (usize, &str),
    line: &mut String,
) -> io::Result<()> {
    for row in 0..rows {
        line.clear();
        for (i, values) in batch.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            // `write!` into a String cannot fail.
            let _ = match values {
                Values::U32(v) => write!(line, "{}", v[row]),
                Values::U64(v) => write!(line, "{}", v[row]),
                Values::I32(v) => write!(line, "{}", v[row]),
                Values::OptU64(v) => v[row].map_or(Ok(()), |x| write!(line, "{x}")),
                Values::OptU32(v) => v[row].map_or(Ok(()), |x| write!(line, "{x}")),
                Values::Str(v) => write!(line, "{}", q(&v[row])),
                Values::OptStr(v) => v[row].as_ref().map_or(Ok(()), |x| write!(line, "{}", q(x))),
                // Shortest text that reads back as the same f64.
                Values::OptF64(v) => v[row].map_or(Ok(()), |x| write!(line, "{x:?}")),
            };
        }
        line.push_str(tail);
        line.push('\n');
        w.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::Column;

    #[test]
    fn text_that_needs_quotes_gets_them_and_nulls_are_empty() {
        let names = [
            "a,b".to_string(),
            "say \"hi\"".to_string(),
            "plain".to_string(),
        ];
        let tb = Table {
            name: "t",
            columns: vec![
                Column::held(
                    "name",
                    Values::Str(names.iter().map(|s| s.as_str().into()).collect()),
                ),
                Column::held("n", Values::OptU64(vec![Some(1), None, Some(3)])),
            ],
            rows: 3,
        };
        let mut out = Vec::new();
        write(&mut out, &tb).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "name,n\n\"a,b\",1\n\"say \"\"hi\"\"\",\nplain,3\n"
        );
    }
}
