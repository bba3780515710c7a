//! Column codec of the native format: each column is a sequence of u64 values stored as
//! LEB128 varints of the zigzag-encoded wrapping difference to the previous value.
//!
//! Deltas make sorted timestamps and constant columns (device, grid size) one byte a row, which
//! deflate then squeezes further. Wrapping arithmetic keeps the transform lossless for any input.

// The reader and the writer name the varint functions as the format does.
pub use crate::varint::{get as get_varint, put as put_varint};
use crate::varint::{unzigzag, zigzag};

/// Encodes one column (delta, zigzag, varint).
pub fn encode_column(values: &[u64], out: &mut Vec<u8>) {
    let mut prev = 0u64;
    for &v in values {
        put_varint(out, zigzag(v.wrapping_sub(prev) as i64));
        prev = v;
    }
}

/// Reads one column's values in order, without holding them: a reader decodes a chunk's columns
/// side by side, row by row, so a chunk costs its records and nothing per value.
pub struct ColumnCursor<'a> {
    buf: &'a [u8],
    pos: usize,
    prev: u64,
}

impl<'a> ColumnCursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        ColumnCursor {
            buf,
            pos: 0,
            prev: 0,
        }
    }

    /// The next value; `None` when the bytes end or hold a bad varint.
    pub fn next_value(&mut self) -> Option<u64> {
        let d = unzigzag(get_varint(self.buf, &mut self.pos)?);
        self.prev = self.prev.wrapping_add(d as u64);
        Some(self.prev)
    }
}

/// Whether `buf` holds exactly `rows` values of one column, no more, no fewer.
pub fn column_holds(buf: &[u8], rows: usize) -> bool {
    // A row needs at least one byte.
    if rows > buf.len() {
        return false;
    }
    let mut c = ColumnCursor::new(buf);
    (0..rows).all(|_| c.next_value().is_some()) && c.pos == buf.len()
}

/// Decodes exactly `rows` values of one column; `None` when the bytes do not hold them.
#[cfg(test)]
pub fn decode_column(buf: &[u8], rows: usize) -> Option<Vec<u64>> {
    if !column_holds(buf, rows) {
        return None;
    }
    let mut c = ColumnCursor::new(buf);
    (0..rows).map(|_| c.next_value()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_round_trips_extremes() {
        let vals = vec![0, u64::MAX, 1, 1 << 63, 5, 5, 4, u64::MAX - 1, 0];
        let mut buf = Vec::new();
        encode_column(&vals, &mut buf);
        assert_eq!(decode_column(&buf, vals.len()).unwrap(), vals);
        assert!(decode_column(&buf, vals.len() + 1).is_none());
        assert!(decode_column(&buf[..buf.len() - 1], vals.len()).is_none());
    }
}
