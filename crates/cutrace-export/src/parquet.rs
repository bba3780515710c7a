//! Apache Parquet files from the tables (`cutrace convert --parquet`), written directly: the
//! format's subset a flat table of integers and strings needs, without an Arrow dependency.
//!
//! Layout (Apache Parquet format specification, `parquet.thrift`): `PAR1`, then per row group
//! and column one column chunk of data pages (v1, PLAIN values, GZIP-compressed; RLE definition
//! levels only for a nullable column), then the `FileMetaData` in Thrift's compact protocol, its
//! length (u32 LE) and `PAR1`. Unsigned columns carry the UINT_32/UINT_64 converted type and the
//! INTEGER(bits, unsigned) logical type, so pandas, pyarrow, DuckDB and Polars read them as
//! unsigned; strings are UTF8/STRING. The trace's metadata (meta.json's content) is stored under
//! the key `cutrace.meta`. No statistics are written. A distributed job's tables, one file per
//! rank and table in hive-style partitions, are written by [`job`].

pub mod job;

use std::io::Write;

use cutrace_trace::varint;

use crate::tables::{Table, Values};

/// Rows per row group (a reader's unit of parallelism and of skipping).
const ROWS_PER_GROUP: usize = 1 << 20;
/// A data page holds at most about this many bytes of values before compression.
const PAGE_BYTES: usize = 8 << 20;

// Thrift compact protocol type ids.
const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_STRUCT: u8 = 12;

// parquet.thrift enums.
const TYPE_INT32: i32 = 1;
const TYPE_INT64: i32 = 2;
const TYPE_DOUBLE: i32 = 5;
const TYPE_BYTE_ARRAY: i32 = 6;
const REQUIRED: i32 = 0;
const OPTIONAL: i32 = 1;
const CONVERTED_UTF8: i32 = 0;
const CONVERTED_UINT_32: i32 = 13;
const CONVERTED_UINT_64: i32 = 14;
const ENC_PLAIN: i32 = 0;
const ENC_RLE: i32 = 3;
const CODEC_GZIP: i32 = 2;
const PAGE_DATA: i32 = 0;

/// Thrift compact protocol, writing only. Field ids are delta-encoded against the previous field
/// of the same struct, hence the stack.
struct Thrift {
    buf: Vec<u8>,
    last: Vec<i16>,
}

impl Thrift {
    fn new() -> Thrift {
        Thrift {
            buf: Vec::new(),
            last: vec![0],
        }
    }
    fn varint(&mut self, v: u64) {
        varint::put(&mut self.buf, v);
    }
    fn zigzag(&mut self, v: i64) {
        self.varint(varint::zigzag(v));
    }
    fn field(&mut self, id: i16, ty: u8) {
        let last = self.last.last_mut().expect("inside a struct");
        let delta = id - *last;
        *last = id;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | ty);
        } else {
            self.buf.push(ty);
            self.zigzag(id as i64);
        }
    }
    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, T_I32);
        self.zigzag(v as i64);
    }
    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, T_I64);
        self.zigzag(v);
    }
    fn byte(&mut self, id: i16, v: i8) {
        self.field(id, T_BYTE);
        self.buf.push(v as u8);
    }
    fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { T_TRUE } else { T_FALSE });
    }
    fn binary(&mut self, id: i16, b: &[u8]) {
        self.field(id, T_BINARY);
        self.raw_binary(b);
    }
    fn raw_binary(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
    fn list(&mut self, id: i16, elem: u8, n: usize) {
        self.field(id, T_LIST);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem);
        } else {
            self.buf.push(0xf0 | elem);
            self.varint(n as u64);
        }
    }
    /// A struct as a field (`Some(id)`) or as a list element (`None`).
    fn begin(&mut self, id: Option<i16>) {
        if let Some(id) = id {
            self.field(id, T_STRUCT);
        }
        self.last.push(0);
    }
    fn end(&mut self) {
        self.buf.push(0);
        self.last.pop();
    }
}

/// Where one column chunk landed, for the footer.
struct Chunk {
    offset: u64,
    uncompressed: u64,
    compressed: u64,
    values: u64,
}

/// Physical type and repetition of a column.
fn physical(v: &Values) -> (i32, i32) {
    match v {
        Values::U32(_) | Values::I32(_) => (TYPE_INT32, REQUIRED),
        Values::U64(_) => (TYPE_INT64, REQUIRED),
        Values::OptU32(_) => (TYPE_INT32, OPTIONAL),
        Values::OptU64(_) => (TYPE_INT64, OPTIONAL),
        Values::Str(_) => (TYPE_BYTE_ARRAY, REQUIRED),
        Values::OptStr(_) => (TYPE_BYTE_ARRAY, OPTIONAL),
        Values::OptF64(_) => (TYPE_DOUBLE, OPTIONAL),
    }
}

/// Definition levels of a nullable column's page (1: a value, 0: null) as RLE runs of bit width
/// 1, after their length (u32 LE).
fn levels<T>(x: &[Option<T>], out: &mut Vec<u8>) {
    let mut l = Thrift::new();
    let mut i = 0;
    while i < x.len() {
        let present = x[i].is_some();
        let run = x[i..].iter().take_while(|y| y.is_some() == present).count();
        l.varint((run as u64) << 1);
        l.buf.push(present as u8);
        i += run;
    }
    out.extend((l.buf.len() as u32).to_le_bytes());
    out.extend(&l.buf);
}

/// PLAIN-encoded bytes of rows `a..b` (non-null values only) and, for a nullable column, the
/// definition levels (RLE runs, bit width 1).
fn encode(v: &Values, a: usize, b: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
    match v {
        Values::U32(x) => x[a..b].iter().for_each(|y| out.extend(y.to_le_bytes())),
        Values::I32(x) => x[a..b].iter().for_each(|y| out.extend(y.to_le_bytes())),
        Values::U64(x) => x[a..b].iter().for_each(|y| out.extend(y.to_le_bytes())),
        Values::OptU32(x) => {
            levels(&x[a..b], out);
            x[a..b]
                .iter()
                .flatten()
                .for_each(|y| out.extend(y.to_le_bytes()));
        }
        Values::OptU64(x) => {
            levels(&x[a..b], out);
            x[a..b]
                .iter()
                .flatten()
                .for_each(|y| out.extend(y.to_le_bytes()));
        }
        Values::Str(x) => {
            for s in &x[a..b] {
                out.extend(fits_u32(s.len())?.to_le_bytes());
                out.extend(s.as_bytes());
            }
        }
        Values::OptStr(x) => {
            levels(&x[a..b], out);
            for s in x[a..b].iter().flatten() {
                out.extend(fits_u32(s.len())?.to_le_bytes());
                out.extend(s.as_bytes());
            }
        }
        Values::OptF64(x) => {
            levels(&x[a..b], out);
            x[a..b]
                .iter()
                .flatten()
                .for_each(|y| out.extend(y.to_le_bytes()));
        }
    }
    Ok(())
}

/// Parquet's lengths and page sizes are 32-bit: a value or page beyond that is refused, never
/// wrapped into a corrupt file.
fn fits_u32(n: usize) -> std::io::Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|&v| v <= i32::MAX as u32)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{n} bytes exceed Parquet's 2 GiB limit for a value or page"),
            )
        })
}

/// Bytes a row takes in a page, to cut pages near [`PAGE_BYTES`].
fn row_bytes(v: &Values, i: usize) -> usize {
    match v {
        Values::U32(_) | Values::I32(_) => 4,
        Values::OptU32(_) => 4,
        Values::U64(_) | Values::OptU64(_) | Values::OptF64(_) => 8,
        Values::Str(x) => 4 + x[i].len(),
        Values::OptStr(x) => 4 + x[i].as_ref().map_or(0, |s| s.len()),
    }
}

fn gzip(b: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b)?;
    e.finish()
}

/// Writes the rows `a..b` of one column as a column chunk of data pages; returns its place.
fn write_chunk(
    w: &mut impl Write,
    pos: &mut u64,
    v: &Values,
    (a, b): (usize, usize),
    page_bytes: usize,
) -> std::io::Result<Chunk> {
    let mut chunk = Chunk {
        offset: *pos,
        uncompressed: 0,
        compressed: 0,
        values: (b - a) as u64,
    };
    let mut body = Vec::new();
    let mut start = a;
    while start < b {
        let mut end = start;
        let mut bytes = 0;
        while end < b && (end == start || bytes < page_bytes) {
            bytes += row_bytes(v, end);
            end += 1;
        }
        body.clear();
        encode(v, start, end, &mut body)?;
        let packed = gzip(&body)?;
        let mut h = Thrift::new();
        h.i32(1, PAGE_DATA);
        h.i32(2, fits_u32(body.len())? as i32);
        h.i32(3, fits_u32(packed.len())? as i32);
        h.begin(Some(5));
        h.i32(1, fits_u32(end - start)? as i32);
        h.i32(2, ENC_PLAIN);
        h.i32(3, ENC_RLE);
        h.i32(4, ENC_RLE);
        h.end();
        h.buf.push(0);
        w.write_all(&h.buf)?;
        w.write_all(&packed)?;
        let n = h.buf.len() as u64;
        chunk.uncompressed += n + body.len() as u64;
        chunk.compressed += n + packed.len() as u64;
        *pos += n + packed.len() as u64;
        start = end;
    }
    Ok(chunk)
}

/// Writes `table` as one Parquet file to `w`, with `meta` (JSON text) under `cutrace.meta`.
pub fn write(w: &mut impl Write, table: &Table, meta: &str) -> std::io::Result<()> {
    write_with(w, table, meta, ROWS_PER_GROUP, PAGE_BYTES)
}

fn write_with(
    w: &mut impl Write,
    table: &Table,
    meta: &str,
    rows_per_group: usize,
    page_bytes: usize,
) -> std::io::Result<()> {
    w.write_all(b"PAR1")?;
    let mut pos = 4u64;
    let rows = table.rows();
    let mut groups: Vec<(usize, Vec<Chunk>)> = Vec::new();
    let mut a = 0;
    while a < rows {
        let b = (a + rows_per_group).min(rows);
        let mut chunks = Vec::new();
        // One column of one row group is made at a time.
        for c in &table.columns {
            let values = c.values(a..b);
            chunks.push(write_chunk(w, &mut pos, &values, (0, b - a), page_bytes)?);
        }
        groups.push((b - a, chunks));
        a = b;
    }
    // Each column's type, from no values of it.
    let kinds: Vec<Values> = table.columns.iter().map(|c| c.kind()).collect();

    let mut f = Thrift::new();
    f.i32(1, 1);
    f.list(2, T_STRUCT, table.columns.len() + 1);
    f.begin(None);
    f.binary(4, b"schema");
    f.i32(5, table.columns.len() as i32);
    f.end();
    for (c, kind) in table.columns.iter().zip(&kinds) {
        let (ty, rep) = physical(kind);
        f.begin(None);
        f.i32(1, ty);
        f.i32(3, rep);
        f.binary(4, c.name.as_bytes());
        let unsigned = match kind {
            Values::U32(_) | Values::OptU32(_) => Some(32i8),
            Values::U64(_) | Values::OptU64(_) => Some(64),
            _ => None,
        };
        match (kind, unsigned) {
            (Values::Str(_) | Values::OptStr(_), _) => {
                f.i32(6, CONVERTED_UTF8);
                f.begin(Some(10));
                f.begin(Some(1)); // StringType
                f.end();
                f.end();
            }
            (_, Some(bits)) => {
                f.i32(
                    6,
                    if bits == 32 {
                        CONVERTED_UINT_32
                    } else {
                        CONVERTED_UINT_64
                    },
                );
                f.begin(Some(10));
                f.begin(Some(10)); // IntType
                f.byte(1, bits);
                f.bool(2, false);
                f.end();
                f.end();
            }
            _ => {}
        }
        f.end();
    }
    f.i64(3, rows as i64);
    f.list(4, T_STRUCT, groups.len());
    for (n, chunks) in &groups {
        f.begin(None);
        f.list(1, T_STRUCT, chunks.len());
        for ((c, kind), k) in table.columns.iter().zip(&kinds).zip(chunks) {
            f.begin(None);
            f.i64(2, k.offset as i64);
            f.begin(Some(3));
            f.i32(1, physical(kind).0);
            f.list(2, T_I32, 2);
            f.zigzag(ENC_PLAIN as i64);
            f.zigzag(ENC_RLE as i64);
            f.list(3, T_BINARY, 1);
            f.raw_binary(c.name.as_bytes());
            f.i32(4, CODEC_GZIP);
            f.i64(5, k.values as i64);
            f.i64(6, k.uncompressed as i64);
            f.i64(7, k.compressed as i64);
            f.i64(9, k.offset as i64);
            f.end();
            f.end();
        }
        f.i64(2, chunks.iter().map(|k| k.uncompressed as i64).sum());
        f.i64(3, *n as i64);
        f.i64(5, chunks[0].offset as i64);
        f.i64(6, chunks.iter().map(|k| k.compressed as i64).sum());
        f.end();
    }
    f.list(5, T_STRUCT, 1);
    f.begin(None);
    f.binary(1, b"cutrace.meta");
    f.binary(2, meta.as_bytes());
    f.end();
    f.binary(
        6,
        format!("cutrace version {}", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    f.buf.push(0);
    w.write_all(&f.buf)?;
    w.write_all(&(f.buf.len() as u32).to_le_bytes())?;
    w.write_all(b"PAR1")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Read back with a small independent reader (Thrift compact decoding, page walking, GZIP,
    //! RLE definition levels, PLAIN values) and compare with the table, over several row groups
    //! and pages. pyarrow's reading of real exports is checked in tests/parquet_export.rs.
    use super::*;
    use crate::tables::Column;
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::io::Read;

    #[derive(Debug, Clone)]
    enum V {
        Bool(bool),
        Int(i64),
        Bin(Vec<u8>),
        List(Vec<V>),
        Struct(BTreeMap<i16, V>),
    }

    impl V {
        fn get(&self, id: i16) -> &V {
            match self {
                V::Struct(m) => m.get(&id).unwrap_or_else(|| panic!("no field {id}")),
                _ => panic!("not a struct"),
            }
        }
        fn has(&self, id: i16) -> bool {
            matches!(self, V::Struct(m) if m.contains_key(&id))
        }
        fn int(&self) -> i64 {
            match self {
                V::Int(i) => *i,
                _ => panic!("not an int: {self:?}"),
            }
        }
        fn bin(&self) -> &[u8] {
            match self {
                V::Bin(b) => b,
                _ => panic!("not binary"),
            }
        }
        fn list(&self) -> &[V] {
            match self {
                V::List(l) => l,
                _ => panic!("not a list"),
            }
        }
    }

    struct R<'a> {
        b: &'a [u8],
        p: usize,
    }

    impl R<'_> {
        fn byte(&mut self) -> u8 {
            self.p += 1;
            self.b[self.p - 1]
        }
        fn varint(&mut self) -> u64 {
            varint::get(self.b, &mut self.p).expect("a whole varint")
        }
        fn zz(&mut self) -> i64 {
            varint::unzigzag(self.varint())
        }
        fn value(&mut self, ty: u8) -> V {
            match ty {
                1 => V::Bool(true),
                2 => V::Bool(false),
                3 => V::Int(self.byte() as i8 as i64),
                4..=6 => V::Int(self.zz()),
                8 => {
                    let n = self.varint() as usize;
                    self.p += n;
                    V::Bin(self.b[self.p - n..self.p].to_vec())
                }
                9 => {
                    let h = self.byte();
                    let mut n = (h >> 4) as usize;
                    if n == 15 {
                        n = self.varint() as usize;
                    }
                    V::List((0..n).map(|_| self.value(h & 0xf)).collect())
                }
                12 => self.strukt(),
                t => panic!("type {t}"),
            }
        }
        fn strukt(&mut self) -> V {
            let mut m = BTreeMap::new();
            let mut last = 0i16;
            loop {
                let h = self.byte();
                if h == 0 {
                    return V::Struct(m);
                }
                let d = (h >> 4) as i16;
                let id = if d != 0 { last + d } else { self.zz() as i16 };
                last = id;
                m.insert(id, self.value(h & 0xf));
            }
        }
    }

    #[derive(Debug, PartialEq)]
    enum Cell {
        I(i64),
        S(String),
        /// A double, by its bits.
        F(u64),
    }

    /// A column read back: its values (None: null) and its logical type's (bit width, signed).
    type ReadColumn = (Vec<Option<Cell>>, i64, bool);

    /// Every column of the file, by name, and the footer.
    fn read_back(file: &[u8]) -> (BTreeMap<String, ReadColumn>, V) {
        assert_eq!(&file[..4], b"PAR1");
        assert_eq!(&file[file.len() - 4..], b"PAR1");
        let n = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap());
        let start = file.len() - 8 - n as usize;
        let mut r = R { b: file, p: start };
        let meta = r.strukt();
        assert_eq!(r.p, file.len() - 8, "footer length");
        assert_eq!(meta.get(1).int(), 1, "FileMetaData.version");
        assert!(meta.get(6).bin().starts_with(b"cutrace version "));
        // Row groups: rows add up; their sizes are their chunks'; they follow each other.
        let groups = meta.get(4).list();
        let rows: i64 = groups.iter().map(|g| g.get(3).int()).sum();
        assert_eq!(rows, meta.get(3).int(), "num_rows");
        let mut next = 4;
        for g in groups {
            let cols = g.get(1).list();
            let sum = |id| cols.iter().map(|c| c.get(3).get(id).int()).sum::<i64>();
            assert_eq!(g.get(2).int(), sum(6), "RowGroup.total_byte_size");
            assert_eq!(g.get(6).int(), sum(7), "RowGroup.total_compressed_size");
            assert_eq!(g.get(5).int(), cols[0].get(2).int(), "RowGroup.file_offset");
            for c in cols {
                assert_eq!(
                    c.get(2).int(),
                    next,
                    "ColumnChunk.file_offset: chunks back to back"
                );
                assert_eq!(c.get(3).get(9).int(), next, "data_page_offset");
                next += c.get(3).get(7).int();
            }
        }
        assert_eq!(next as usize, start, "the footer follows the last chunk");
        let schema = meta.get(2).list();
        assert_eq!(schema[0].get(5).int() as usize, schema.len() - 1);
        let mut out = BTreeMap::new();
        for (i, el) in schema[1..].iter().enumerate() {
            let name = String::from_utf8(el.get(4).bin().to_vec()).unwrap();
            let ty = el.get(1).int();
            let optional = el.get(3).int() == 1;
            let (bits, signed) = if el.has(10) && el.get(10).has(10) {
                let it = el.get(10).get(10);
                (it.get(1).int(), matches!(it.get(2), V::Bool(true)))
            } else {
                (0, true)
            };
            // The converted type agrees with the logical one (older readers use only it).
            let converted = el.has(6).then(|| el.get(6).int());
            match (ty, bits) {
                (6, _) => {
                    assert_eq!(converted, Some(0), "{name}: UTF8");
                    assert!(el.get(10).has(1), "{name}: STRING");
                }
                (_, 32) => assert_eq!(converted, Some(13), "{name}: UINT_32"),
                (_, 64) => assert_eq!(converted, Some(14), "{name}: UINT_64"),
                _ => assert_eq!(converted, None, "{name}: plain signed"),
            }
            let mut cells = Vec::new();
            for rg in meta.get(4).list() {
                let cm = rg.get(1).list()[i].get(3);
                assert_eq!(cm.get(1).int(), ty);
                assert_eq!(cm.get(3).list()[0].bin(), name.as_bytes());
                assert_eq!(cm.get(4).int(), 2, "GZIP");
                let enc: Vec<i64> = cm.get(2).list().iter().map(V::int).collect();
                assert_eq!(enc, [0, 3], "{name}: encodings PLAIN, RLE");
                let mut raw_total = 0;
                let mut p = cm.get(9).int() as usize;
                let end = p + cm.get(7).int() as usize;
                let mut values = 0;
                while p < end {
                    let mut pr = R { b: file, p };
                    let h = pr.strukt();
                    assert_eq!(h.get(1).int(), 0, "data page");
                    let (raw, packed) = (h.get(2).int() as usize, h.get(3).int() as usize);
                    let mut body = Vec::new();
                    flate2::read::GzDecoder::new(&file[pr.p..pr.p + packed])
                        .read_to_end(&mut body)
                        .unwrap();
                    assert_eq!(body.len(), raw);
                    assert_eq!(h.get(5).get(2).int(), 0, "PLAIN");
                    assert_eq!(h.get(5).get(3).int(), 3, "RLE definition levels");
                    raw_total += (pr.p - p) + raw;
                    p = pr.p + packed;
                    let nv = h.get(5).get(1).int() as usize;
                    values += nv;
                    let mut b = R { b: &body, p: 0 };
                    let mut present = vec![true; nv];
                    if optional {
                        let len = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
                        b.p = 4;
                        let mut k = 0;
                        while b.p < 4 + len {
                            let h = b.varint();
                            assert_eq!(h & 1, 0, "RLE runs only");
                            let v = b.byte() == 1;
                            for _ in 0..h >> 1 {
                                present[k] = v;
                                k += 1;
                            }
                        }
                        assert_eq!(k, nv);
                    }
                    for &here in &present {
                        if !here {
                            cells.push(None);
                            continue;
                        }
                        let mut take = |n: usize| {
                            b.p += n;
                            &body[b.p - n..b.p]
                        };
                        cells.push(Some(match ty {
                            1 => Cell::I(i32::from_le_bytes(take(4).try_into().unwrap()) as i64),
                            2 => Cell::I(i64::from_le_bytes(take(8).try_into().unwrap())),
                            5 => Cell::F(u64::from_le_bytes(take(8).try_into().unwrap())),
                            6 => {
                                let n = u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
                                Cell::S(String::from_utf8(take(n).to_vec()).unwrap())
                            }
                            t => panic!("type {t}"),
                        }));
                    }
                    assert_eq!(b.p, body.len(), "page fully consumed");
                }
                assert_eq!(p, end);
                assert_eq!(values as i64, cm.get(5).int());
                assert_eq!(raw_total as i64, cm.get(6).int(), "total_uncompressed_size");
            }
            out.insert(name, (cells, bits, signed));
        }
        (out, meta)
    }

    fn sample() -> Table<'static> {
        let n = 1000;
        let names = ["gemm", "", "a,b \"quoted\"", "ünïcode ✓", "x"];
        Table {
            name: "kernels",
            columns: vec![
                Column::held(
                    "small",
                    Values::U32((0..n as u32).map(|i| i * 4_000_037).collect()),
                ),
                Column::held(
                    "big",
                    Values::U64((0..n as u64).map(|i| u64::MAX - i * 977).collect()),
                ),
                Column::held(
                    "signed",
                    Values::I32((0..n as i32).map(|i| i - 500).collect()),
                ),
                Column::held(
                    "maybe",
                    Values::OptU64(
                        (0..n as u64)
                            .map(|i| (i % 7 > 2 || i > 900).then_some(i << 40))
                            .collect(),
                    ),
                ),
                Column::held(
                    "maybe32",
                    Values::OptU32(
                        (0..n as u32)
                            .map(|i| (i % 5 != 1).then_some(u32::MAX - i))
                            .collect(),
                    ),
                ),
                Column::held(
                    "name",
                    Values::Str(
                        (0..n)
                            .map(|i| Cow::Owned(names[i % names.len()].repeat(i % 3)))
                            .collect(),
                    ),
                ),
                Column::held(
                    "maybe_value",
                    Values::OptF64(
                        (0..n)
                            .map(|i| (i % 6 != 0).then_some(i as f64 * 0.37 - 100.0))
                            .collect(),
                    ),
                ),
                Column::held(
                    "maybe_name",
                    Values::OptStr(
                        (0..n)
                            .map(|i| {
                                (i % 4 != 3).then(|| Cow::Owned(names[i % names.len()].into()))
                            })
                            .collect(),
                    ),
                ),
            ],
            rows: n,
        }
    }

    #[test]
    fn reads_back_every_value_over_several_row_groups_and_pages() {
        let t = sample();
        let mut file = Vec::new();
        write_with(&mut file, &t, "{\"complete\":true}", 300, 200).unwrap();
        let (cols, meta) = read_back(&file);
        assert_eq!(meta.get(3).int(), 1000);
        assert_eq!(meta.get(4).list().len(), 4, "1000 rows in groups of 300");
        let kv = &meta.get(5).list()[0];
        assert_eq!(kv.get(1).bin(), b"cutrace.meta");
        assert_eq!(kv.get(2).bin(), b"{\"complete\":true}");
        for c in &t.columns {
            let (got, bits, signed) = &cols[c.name];
            let values = c.values(0..t.rows());
            let want: Vec<Option<Cell>> = match &values {
                Values::U32(v) => v.iter().map(|&x| Some(Cell::I(x as i32 as i64))).collect(),
                Values::U64(v) => v.iter().map(|&x| Some(Cell::I(x as i64))).collect(),
                Values::I32(v) => v.iter().map(|&x| Some(Cell::I(x as i64))).collect(),
                Values::OptU64(v) => v.iter().map(|x| x.map(|x| Cell::I(x as i64))).collect(),
                Values::OptU32(v) => v
                    .iter()
                    .map(|x| x.map(|x| Cell::I(x as i32 as i64)))
                    .collect(),
                Values::Str(v) => v.iter().map(|x| Some(Cell::S(x.to_string()))).collect(),
                Values::OptStr(v) => v
                    .iter()
                    .map(|x| x.as_ref().map(|x| Cell::S(x.to_string())))
                    .collect(),
                Values::OptF64(v) => v.iter().map(|x| x.map(|x| Cell::F(x.to_bits()))).collect(),
            };
            assert_eq!(got, &want, "{}", c.name);
            let logical = match values {
                Values::U32(_) | Values::OptU32(_) => (32, false),
                Values::U64(_) | Values::OptU64(_) => (64, false),
                _ => (0, true),
            };
            assert_eq!((*bits, *signed), logical, "{}", c.name);
        }
        assert_eq!(
            cols["maybe"].0.iter().filter(|c| c.is_none()).count(),
            (0..1000).filter(|i| !(i % 7 > 2 || *i > 900)).count()
        );
        assert_eq!(
            cols["maybe_name"].0.iter().filter(|c| c.is_none()).count(),
            250
        );
    }

    #[test]
    fn an_empty_table_is_a_valid_file_with_its_schema() {
        let mut t = sample();
        t.rows = 0;
        let mut file = Vec::new();
        write(&mut file, &t, "{}").unwrap();
        let (cols, meta) = read_back(&file);
        assert_eq!(meta.get(3).int(), 0);
        assert!(meta.get(4).list().is_empty());
        assert_eq!(cols.len(), 8);
        assert!(cols.values().all(|c| c.0.is_empty()));
    }

    /// The `kernel_metrics` table of a `cutrace profile` trace: one row per kernel and metric,
    /// the kernel named by its correlation id, and the unavailable (NaN) value null, never 0.
    #[test]
    fn kernel_metrics_keep_an_unavailable_value_null() {
        let t = cutrace_testkit::counters::counter_trace();
        let table = crate::tables::build(&t, crate::tables::COUNTERS);
        let mut file = Vec::new();
        write(&mut file, &table, "{}").unwrap();
        let (cols, _) = read_back(&file);
        let value = &cols["value"].0;
        assert_eq!(value.len(), t.kernel_metrics.len());
        for (m, v) in t.kernel_metrics.iter().zip(value) {
            if m.value.is_nan() {
                assert_eq!(v, &None);
            } else {
                assert_eq!(v, &Some(Cell::F(m.value.to_bits())));
            }
        }
        assert_eq!(value.iter().filter(|v| v.is_none()).count(), 1);
        let kernel = &cols["kernel"].0;
        assert_eq!(kernel[0], Some(Cell::S("gemm".into())));
        let mut csv = Vec::new();
        crate::csv::write(&mut csv, &table).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "correlation_id,device,process,kernel,metric,value"
        );
        assert!(
            lines.contains(&"3,1,1,copy,sm__warps_active.avg.pct_of_peak_sustained_active,"),
            "{csv}"
        );
        assert!(
            lines.contains(&"3,1,1,copy,sm__ctas_launched.sum,10.0"),
            "{csv}"
        );
    }
}
