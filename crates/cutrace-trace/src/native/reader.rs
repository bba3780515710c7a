//! Reader of the native format: keeps every chunk whose checksum holds, resynchronising after
//! damaged bytes at the next good chunk; never panics, never allocates by what a length claims.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::codec::{column_holds, get_varint, ColumnCursor};
use super::{
    codec_id, marker_flags, tag, Header, MarkerEvent, Meta, Table, Tail, CHUNK_HEADER_LEN,
    FORMAT_VERSION, MAGIC, MAX_CHUNK_BYTES, PART_EXTENSION,
};
use crate::error::TraceError;
use crate::limits::Limits;
use crate::model::*;
use crate::progress::Progress;

/// Reads a native trace with the default [`Limits`]; see [`read_with`].
pub fn read(path: &Path, progress: Progress<'_>) -> Result<Trace, TraceError> {
    read_with(path, &Limits::default(), progress)
}

/// Reads a native trace: one part file, or a directory of parts written by `cutrace record`
/// (one per CUDA process), merged into one trace.
pub fn read_with(
    path: &Path,
    limits: &Limits,
    progress: Progress<'_>,
) -> Result<Trace, TraceError> {
    if path.is_dir() {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| TraceError::io(path, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file() && p.extension().and_then(|x| x.to_str()) == Some(PART_EXTENSION)
            })
            .collect();
        parts.sort();
        if parts.is_empty() {
            return Err(TraceError::Unsupported {
                path: path.into(),
                what: format!(
                    "the directory holds no *.{PART_EXTENSION} parts, nor torch.profiler traces \
                     (*.json, *.json.gz) or directories of them: if it is a `cutrace record` \
                     directory, no CUDA process wrote a trace (did the program use the GPU? is \
                     CUDA_INJECTION64_PATH reaching it? `cutrace doctor` checks the driver and \
                     CUPTI on this machine)"
                ),
            });
        }
        return read_parts_with(&parts, limits, progress);
    }
    read_file_with(path, limits, progress).map(|(t, _)| t)
}

/// Reads several part files and merges them into one trace, with the default [`Limits`].
pub fn read_parts(paths: &[PathBuf], progress: Progress<'_>) -> Result<Trace, TraceError> {
    read_parts_with(paths, &Limits::default(), progress)
}

/// Reads several part files and merges them into one trace.
///
/// A file that cannot be read (no permission, an I/O error) or whose first bytes are not the
/// magic (not a part at all, or one whose start was overwritten) is left out while the others
/// are read, and the trace is incomplete with a reason that names it; only when no file is read
/// is that an error. A format version this reader does not know, or a limit exceeded, stops the
/// read.
pub fn read_parts_with(
    paths: &[PathBuf],
    limits: &Limits,
    progress: Progress<'_>,
) -> Result<Trace, TraceError> {
    // The first part waits for a second: a trace of one part is kept as it is.
    let mut first: Option<Trace> = None;
    let mut merger: Option<Merger> = None;
    let mut left_out: Vec<(String, TraceError)> = Vec::new();
    for p in paths {
        let part = match File::open(p) {
            Ok(f) => {
                let total = f.metadata().ok().map(|m| m.len());
                read_part(p, f, total, limits, &mut *progress)
            }
            Err(e) => Err(TraceError::io(p, e)),
        };
        match part {
            Ok(Part::Read(read)) => match (&mut merger, first.take()) {
                (Some(m), _) => m.add(read.0),
                (None, None) => first = Some(read.0),
                (None, Some(one)) => {
                    let mut m = Merger::default();
                    m.add(one);
                    m.add(read.0);
                    merger = Some(m);
                }
            },
            Ok(Part::NotNative(e)) => left_out.push((
                format!(
                    "{}: left out, not a cutrace part (its first bytes are not the magic \
                     \\x89CUTRACE)",
                    p.display()
                ),
                e,
            )),
            Err(e @ TraceError::Io { .. }) => {
                left_out.push((format!("{}: left out, unreadable ({e})", p.display()), e))
            }
            Err(e) => return Err(e),
        }
    }
    let mut t = match (merger, first) {
        (Some(m), _) => m.finish(),
        (None, Some(one)) => one,
        (None, None) if !left_out.is_empty() => return Err(left_out.swap_remove(0).1),
        (None, None) => Merger::default().finish(),
    };
    if !left_out.is_empty() {
        let mut reasons: Vec<String> = t.meta.incomplete_reason.take().into_iter().collect();
        reasons.extend(left_out.into_iter().map(|(why, _)| why));
        t.meta.complete = false;
        t.meta.incomplete_reason = Some(reasons.join("; "));
    }
    Ok(t)
}

/// Reads one part file with the default [`Limits`]; see [`read_file_with`].
pub fn read_file(path: &Path, progress: Progress<'_>) -> Result<(Trace, Header), TraceError> {
    read_file_with(path, &Limits::default(), progress)
}

/// Reads one part file; also returns its header (default when the header chunk was lost).
///
/// A file shorter than the 8-byte magic whose bytes begin it (an empty file among them: a writer
/// killed between creating its file and its first write) is an empty, incomplete part. A file
/// whose first bytes are not the magic is refused with an error that names it.
pub fn read_file_with(
    path: &Path,
    limits: &Limits,
    progress: Progress<'_>,
) -> Result<(Trace, Header), TraceError> {
    let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let total = file.metadata().ok().map(|m| m.len());
    match read_part(path, file, total, limits, progress)? {
        Part::Read(read) => Ok(*read),
        Part::NotNative(e) => Err(e),
    }
}

/// Reads one part from `input`, once from start to end (a pipe, a FIFO, stdin); `path` names it
/// in messages, `total` is its length when known.
pub fn read_stream(
    path: &Path,
    input: impl Read,
    total: Option<u64>,
    limits: &Limits,
    progress: Progress<'_>,
) -> Result<Trace, TraceError> {
    match read_part(path, input, total, limits, progress)? {
        Part::Read(read) => Ok(read.0),
        Part::NotNative(e) => Err(e),
    }
}

/// A file read as a part, or found not to be one (the error says so, naming the file).
enum Part {
    Read(Box<(Trace, Header)>),
    NotNative(TraceError),
}

/// The input, read once, with the bytes since the start of the chunk being read kept: when a
/// chunk turns out damaged, the search for the next one goes back to one byte after its start,
/// without reading the input twice. Holds at most one chunk and one read ahead.
struct Source<R> {
    buf: Vec<u8>,
    pos: usize,
    /// Start of the chunk being read: bytes before it may be dropped.
    mark: usize,
    inner: R,
    eof: bool,
}

impl<R: Read> Source<R> {
    /// The next `n` bytes (fewer at the end of the input), consumed.
    fn take(&mut self, n: usize) -> std::io::Result<&[u8]> {
        while self.buf.len() - self.pos < n && !self.eof {
            if self.mark > (1 << 20) && self.mark * 2 > self.buf.len() {
                self.buf.drain(..self.mark);
                self.pos -= self.mark;
                self.mark = 0;
            }
            let want = (n - (self.buf.len() - self.pos)).max(1 << 16) as u64;
            // Grows with what arrives, never by what a length field claims.
            match (&mut self.inner).take(want).read_to_end(&mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let end = self.buf.len().min(self.pos + n);
        let start = self.pos;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    fn mark(&mut self) {
        self.mark = self.pos;
    }

    /// Goes back to `k` bytes after the mark.
    fn rewind(&mut self, k: usize) {
        self.pos = self.mark + k;
    }
}

/// Bytes of candidate chunks one part's searches may check and decode, in all.
const SEARCH_BUDGET: u64 = 256 << 20;

/// Why a chunk at some offset was not taken.
enum Bad {
    /// The input ends before a whole chunk header (after this many bytes).
    End(u64),
    /// The search after damage spent its budget.
    GiveUp,
    /// The input ends inside it: cut off (a writer killed mid-write), not damaged.
    Cut(String),
    /// Its bytes are wrong; the search for the next good chunk starts one byte after its start.
    Damaged(String),
}

fn read_part(
    path: &Path,
    input: impl Read,
    total: Option<u64>,
    limits: &Limits,
    progress: Progress<'_>,
) -> Result<Part, TraceError> {
    let mut r = Source {
        buf: Vec::new(),
        pos: 0,
        mark: 0,
        inner: input,
        eof: false,
    };
    let mut start = [0u8; 12];
    let n = {
        let got = r.take(12).map_err(|e| TraceError::io(path, e))?;
        start[..got.len()].copy_from_slice(got);
        got.len()
    };
    let m = n.min(MAGIC.len());
    if start[..m] != MAGIC[..m] {
        return Ok(Part::NotNative(TraceError::Malformed {
            path: path.into(),
            offset: 0,
            what: "not a native cutrace trace (bad magic)".into(),
            hint: "expected a file written by `cutrace record`".into(),
        }));
    }
    let mut b = PartBuilder {
        limits: *limits,
        ..Default::default()
    };
    if n < MAGIC.len() {
        b.incomplete(if n == 0 {
            "the file is empty (0 bytes): the writer was killed before its first write, or the \
             file was truncated; no records"
                .to_string()
        } else {
            format!(
                "the file is {n} bytes long, inside the {}-byte magic: the writer was killed \
                 mid-write, or the file was truncated; no records",
                MAGIC.len()
            )
        });
        return Ok(Part::Read(Box::new(b.finish(path))));
    }
    if n < 12 {
        b.incomplete("the file ends inside its 12-byte preamble".into());
        return Ok(Part::Read(Box::new(b.finish(path))));
    }
    let version = u32::from_le_bytes([start[8], start[9], start[10], start[11]]);
    if version != FORMAT_VERSION {
        return Err(TraceError::Unsupported {
            path: path.into(),
            what: format!(
                "native format version {version}; this cutrace reads version {FORMAT_VERSION} \
                 (upgrade cutrace)"
            ),
        });
    }
    let mut offset = 12u64;
    let mut index = 0u64;
    // Where the damaged bytes being skipped began, and why, while searching for a good chunk.
    // `cut`: the search began where the input seemed to end inside a chunk; if no good chunk
    // follows, that was a cut (a writer killed mid-write), not damage.
    let mut damage: Option<(u64, String, bool)> = None;
    // Bytes a search may check and decode: candidates overlap, so a crafted file could
    // otherwise make the search quadratic (a hang).
    let mut search_budget: u64 = SEARCH_BUDGET;
    loop {
        r.mark();
        let searching = damage.is_some().then_some(&mut search_budget);
        let chunk = read_chunk(&mut r, index, offset, searching, limits, &mut b)
            .map_err(|e| TraceError::io(path, e))?;
        match chunk {
            Err(Bad::GiveUp) => {
                let (from, why, _) = damage.take().unwrap_or_default();
                b.damaged(
                    from,
                    offset,
                    &format!(
                        "{why}; the search for a good chunk gave up after checking {} MB of \
                         candidates, and nothing after byte {offset} was read",
                        SEARCH_BUDGET >> 20
                    ),
                    None,
                );
                break;
            }
            Ok(len) => {
                if let Some((from, why, cut)) = damage.take() {
                    let why = if cut {
                        format!("the chunk at byte {from} claims more bytes than follow it")
                    } else {
                        why
                    };
                    b.damaged(from, offset, &why, Some(index));
                }
                offset += len;
                index += 1;
                progress(offset, total);
            }
            Err(Bad::End(got)) => {
                let end = offset + got;
                match damage.take() {
                    Some((_, why, true)) => b.incomplete(why),
                    Some((from, why, false)) => b.damaged(from, end, &why, None),
                    None if got > 0 => b.incomplete(format!(
                        "the file ends inside the header of chunk {index} at byte {offset}: the \
                         writer was killed mid-write or the file was truncated"
                    )),
                    None => {}
                }
                if b.tail.is_none() {
                    b.incomplete(format!(
                        "no TAIL chunk after {index} chunks ({end} bytes): the recorder did not \
                         finish (killed, crashed, or still running)"
                    ));
                }
                break;
            }
            Err(bad) => {
                // Searching resumes one byte after this chunk's start: a length field may be
                // what was damaged, so a chunk that seems to run past the end is searched too.
                let (why, cut) = match bad {
                    Bad::Cut(why) => (why, true),
                    Bad::Damaged(why) => (why, false),
                    Bad::End(_) | Bad::GiveUp => (String::new(), false),
                };
                damage.get_or_insert((offset, why, cut));
                r.rewind(1);
                offset += 1;
            }
        }
    }
    Ok(Part::Read(Box::new(b.finish(path))))
}

/// Reads the chunk at the cursor and hands it to the builder; returns its length with header.
/// While searching (after damage), only a header of a known tag and codec is tried, and the
/// bytes it costs come out of the search's budget.
/// The most a `HEAD`, `META` or `TAIL` chunk may inflate to per byte stored: cutrace writes
/// them uncompressed, and JSON deflates about 4 to 1.
const JSON_BYTES_PER_STORED_BYTE: u64 = 8;

fn read_chunk<R: Read>(
    r: &mut Source<R>,
    index: u64,
    offset: u64,
    searching: Option<&mut u64>,
    limits: &Limits,
    b: &mut PartBuilder,
) -> std::io::Result<Result<u64, Bad>> {
    let hb = r.take(CHUNK_HEADER_LEN)?;
    if hb.len() < CHUNK_HEADER_LEN {
        return Ok(Err(Bad::End(hb.len() as u64)));
    }
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h.copy_from_slice(hb);
    let ctag = [h[0], h[1], h[2], h[3]];
    let codec = h[4];
    let stored = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    let raw_len = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    let crc = u32::from_le_bytes([h[16], h[17], h[18], h[19]]);
    let known = [tag::HEAD, tag::STRS, tag::RECS, tag::META, tag::TAIL].contains(&ctag)
        && codec <= codec_id::DEFLATE
        && h[5..8] == [0, 0, 0];
    if searching.is_some() && !known {
        return Ok(Err(Bad::Damaged(String::new())));
    }
    let at = format!("chunk {index} at byte {offset}");
    let max = limits.chunk_bytes.min(u64::from(MAX_CHUNK_BYTES));
    if u64::from(stored) > max || u64::from(raw_len) > max {
        return Ok(Err(Bad::Damaged(format!(
            "{at} claims {} bytes, over the chunk-bytes limit of {max} (damaged, or larger than \
             any recorder writes: `--limit chunk-bytes=N` reads it)",
            stored.max(raw_len)
        ))));
    }
    // A JSON chunk (HEAD, META, TAIL) is written stored, not deflated: one that inflates past
    // a few bytes per stored byte is a bomb (a 61 KB part once held a 60 MiB HEAD, and eight of
    // them took a report to 989 MB).
    if [tag::HEAD, tag::META, tag::TAIL].contains(&ctag)
        && u64::from(raw_len) > JSON_BYTES_PER_STORED_BYTE * u64::from(stored) + 64
    {
        return Ok(Err(Bad::Damaged(format!(
            "{at} ({}) claims {raw_len} bytes of JSON in {stored} stored, over \
             {JSON_BYTES_PER_STORED_BYTE} per stored byte (cutrace writes them uncompressed)",
            String::from_utf8_lossy(&ctag)
        ))));
    }
    let payload = r.take(stored as usize)?;
    if payload.len() < stored as usize {
        return Ok(Err(Bad::Cut(format!(
            "the file ends inside {at} ({} of {stored} bytes): the writer was killed mid-write \
             or the file was truncated",
            payload.len()
        ))));
    }
    if let Some(budget) = searching {
        let cost = u64::from(stored) + u64::from(raw_len);
        if cost > *budget {
            return Ok(Err(Bad::GiveUp));
        }
        *budget -= cost;
    }
    if crc32fast::hash(payload) != crc {
        return Ok(Err(Bad::Damaged(format!("{at} fails its checksum"))));
    }
    let raw = match codec {
        codec_id::NONE => std::borrow::Cow::Borrowed(payload),
        codec_id::DEFLATE => match inflate(payload, raw_len as usize) {
            Some(raw) => std::borrow::Cow::Owned(raw),
            None => return Ok(Err(Bad::Damaged(format!("{at} does not decompress")))),
        },
        other => {
            return Ok(Err(Bad::Damaged(format!(
                "{at} uses unknown codec {other}"
            ))))
        }
    };
    if let Err(what) = b.chunk(ctag, &raw, u64::from(stored)) {
        return Ok(Err(Bad::Damaged(format!("{at}: {what}"))));
    }
    Ok(Ok(CHUNK_HEADER_LEN as u64 + u64::from(stored)))
}

fn inflate(stored: &[u8], raw_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw_len);
    let dec = flate2::read::DeflateDecoder::new(stored);
    dec.take(raw_len as u64 + 1).read_to_end(&mut out).ok()?;
    (out.len() == raw_len).then_some(out)
}

/// Columns of the widest table this reader knows (the kernel table).
const MAX_COLUMNS: usize = 17;

#[derive(Default)]
struct PartBuilder {
    limits: Limits,
    /// Bytes skipped as damaged, and the stretches they were in.
    damaged_bytes: u64,
    damaged_regions: u64,
    /// Bytes of the chunks read so far as they are stored, and the rows, strings and string
    /// bytes they held: the part's budgets (`Limits::rows_backed_by_part`) are on the whole
    /// part, so that many chunks of the free allowance each cannot add up.
    stored_total: u64,
    rows_total: u64,
    string_bytes_total: u64,
    header: Option<Header>,
    meta: Meta,
    tail: Option<Tail>,
    strings: Vec<String>,
    launches: LaunchInterner,
    trace: Trace,
    markers: Vec<MarkerEvent>,
    skipped: HashMap<String, u64>,
    incomplete_reason: Option<String>,
}

impl PartBuilder {
    fn incomplete(&mut self, reason: String) {
        if self.incomplete_reason.is_none() {
            self.incomplete_reason = Some(reason);
        }
    }

    /// Bytes `from..to` were damaged and skipped (`resumed`: the chunk read after them).
    fn damaged(&mut self, from: u64, to: u64, why: &str, resumed: Option<u64>) {
        self.damaged_bytes += to - from;
        self.damaged_regions += 1;
        let after = match resumed {
            Some(i) => format!("resumed at byte {to} (chunk {i})"),
            None => format!("nothing good followed up to the end, byte {to}"),
        };
        self.incomplete(format!(
            "damaged: {why}; bytes {from}..{to} skipped, {after}"
        ));
    }

    fn chunk(&mut self, t: [u8; 4], raw: &[u8], stored: u64) -> Result<(), String> {
        self.stored_total = self.stored_total.saturating_add(stored);
        match t {
            tag::HEAD => {
                let mut h: Header =
                    serde_json::from_slice(raw).map_err(|e| format!("bad HEAD JSON: {e}"))?;
                if h.api_records.is_none() {
                    h.api_records = api_records_of_old_part(&h.notes);
                }
                self.header = Some(h);
            }
            tag::META => {
                let m: Meta =
                    serde_json::from_slice(raw).map_err(|e| format!("bad META JSON: {e}"))?;
                if !m.devices.is_empty() {
                    self.meta.devices = m.devices;
                }
                if m.dropped_by_cupti.is_some() {
                    self.meta.dropped_by_cupti = m.dropped_by_cupti;
                }
                if m.dropped_by_recorder.is_some() {
                    self.meta.dropped_by_recorder = m.dropped_by_recorder;
                }
                self.meta.notes.extend(m.notes);
                if m.counters.is_some() {
                    self.meta.counters = m.counters;
                }
                if m.pm_sampling.is_some() {
                    self.meta.pm_sampling = m.pm_sampling;
                }
                if m.pc_sampling.is_some() {
                    self.meta.pc_sampling = m.pc_sampling;
                }
            }
            tag::TAIL => {
                let t: Tail =
                    serde_json::from_slice(raw).map_err(|e| format!("bad TAIL JSON: {e}"))?;
                self.tail = Some(t);
            }
            tag::STRS => self.strings_chunk(raw, stored)?,
            tag::RECS => self.recs_chunk(raw, stored)?,
            _ => *self.skipped.entry("unknown_chunk".into()).or_default() += 1,
        }
        Ok(())
    }

    /// Counts `n` more rows (or strings) against the part's budget.
    fn take_rows(&mut self, n: u64, what: &str) -> Result<(), String> {
        let backed = self.limits.rows_backed_by_part(self.stored_total);
        let total = self.rows_total.saturating_add(n);
        if total > backed {
            return Err(format!(
                "the part's chunks claim {total} {what} and rows in {} stored bytes, over the \
                 limit of {backed} (rows-per-byte)",
                self.stored_total
            ));
        }
        self.rows_total = total;
        Ok(())
    }

    fn strings_chunk(&mut self, raw: &[u8], stored: u64) -> Result<(), String> {
        let mut pos = 0;
        let bad = || "bad STRS chunk".to_string();
        let first = get_varint(raw, &mut pos).ok_or_else(bad)?;
        let count = get_varint(raw, &mut pos).ok_or_else(bad)?;
        let have = self.strings.len() as u64;
        // Strings of a damaged STRS chunk are lost: later chunks start past them, and the
        // gap is filled with placeholders, as many as the damaged bytes could have held.
        let lost = first.saturating_sub(have);
        if first < have || lost > self.limits.rows_backed_by(self.damaged_bytes) {
            return Err(format!(
                "STRS chunk starts at string {first}, expected {have}"
            ));
        }
        let backed = self.limits.rows_backed_by(stored);
        if count > backed {
            return Err(format!(
                "STRS chunk claims {count} strings in {stored} bytes, over the limit of {backed} \
                 (chunk-rows, rows-per-byte)"
            ));
        }
        self.take_rows(count, "strings")?;
        let string_budget = self.limits.string_bytes_backed_by_part(self.stored_total);
        let mut new = Vec::with_capacity(count.min(raw.len() as u64) as usize);
        for _ in 0..count {
            let len = get_varint(raw, &mut pos).ok_or_else(bad)?;
            if len > self.limits.string_bytes {
                return Err(format!(
                    "a string of {len} bytes, over the string-bytes limit of {}",
                    self.limits.string_bytes
                ));
            }
            let end = pos
                .checked_add(len as usize)
                .filter(|&e| e <= raw.len())
                .ok_or_else(bad)?;
            self.string_bytes_total += len;
            if self.string_bytes_total > string_budget {
                return Err(format!(
                    "the part's strings reach {} bytes in {} stored bytes, over the limit of \
                     {string_budget} (string-bytes, {} per stored byte)",
                    self.string_bytes_total,
                    self.stored_total,
                    crate::limits::STRING_BYTES_PER_STORED_BYTE
                ));
            }
            new.push(String::from_utf8_lossy(&raw[pos..end]).into_owned());
            pos = end;
        }
        self.strings
            .extend((0..lost).map(|_| "(name lost: damaged chunk)".to_string()));
        self.strings.extend(new);
        Ok(())
    }

    fn recs_chunk(&mut self, raw: &[u8], stored: u64) -> Result<(), String> {
        let bad = || "bad RECS chunk".to_string();
        let table_id = *raw.first().ok_or_else(bad)?;
        let mut pos = 1;
        let nrows = get_varint(raw, &mut pos).ok_or_else(bad)?;
        let ncols = get_varint(raw, &mut pos).ok_or_else(bad)? as usize;
        // Every row is at least one byte in every column, so rows without columns are backed
        // by nothing; and a chunk holds no more rows than its bytes in the file can encode.
        let backed = self.limits.rows_backed_by(stored);
        if nrows > backed {
            return Err(format!(
                "RECS chunk claims {nrows} rows in {stored} bytes, over the limit of {backed} \
                 (chunk-rows, rows-per-byte)"
            ));
        }
        self.take_rows(nrows, "rows")?;
        let nrows = nrows as usize;
        if nrows > raw.len() || ncols > raw.len() || (nrows > 0 && ncols == 0) {
            return Err(bad());
        }
        let cols = recs_columns(raw, pos, nrows, ncols)?;
        let Some(table) = Table::from_id(table_id) else {
            *self
                .skipped
                .entry(format!("native_table_{table_id}"))
                .or_default() += nrows as u64;
            return Ok(());
        };
        self.recs_rows(table, cols, nrows)
    }

    /// Reads `nrows` rows of `table` from its checked columns, side by side, and adds each
    /// row's record to the part.
    fn recs_rows(
        &mut self,
        table: Table,
        mut cols: Vec<ColumnCursor<'_>>,
        nrows: usize,
    ) -> Result<(), String> {
        let bad = || "bad RECS chunk".to_string();
        let t = &mut self.trace;
        // Missing trailing columns read as 0.
        let mut row = [0u64; MAX_COLUMNS];
        for _ in 0..nrows {
            for (x, c) in row.iter_mut().zip(cols.iter_mut()) {
                *x = c.next_value().ok_or_else(bad)?;
            }
            match table {
                Table::Kernel => t.kernels.push(kernel_row(&row, &mut self.launches)),
                Table::Memcpy => t.memcpys.push(memcpy_row(&row)),
                Table::Memset => t.memsets.push(memset_row(&row)),
                Table::Api => t.api_calls.push(api_row(&row)),
                Table::Sync => t.syncs.push(sync_row(&row)),
                Table::Marker => self.markers.push(marker_row(&row)),
                Table::Overhead => t.overheads.push(overhead_row(&row)),
                Table::KernelMetric => t.kernel_metrics.push(kernel_metric_row(&row)),
                Table::PmSample => t.pm_samples.push(pm_sample_row(&row)),
                Table::PcSample => t.pc_samples.push(pc_sample_row(&row)),
                Table::Memory => t.memory.push(memory_row(&row)),
                Table::MemoryPool => t.memory_pools.push(memory_pool_row(&row)),
            }
        }
        Ok(())
    }

    fn finish(mut self, path: &Path) -> (Trace, Header) {
        self.pair_markers();
        // Synchronization records carry a context, not a device.
        let mut ctx_dev: HashMap<u32, u32> = HashMap::new();
        for k in &self.trace.kernels {
            ctx_dev.entry(k.context).or_insert(k.device);
        }
        for m in &self.trace.memcpys {
            ctx_dev.entry(m.context).or_insert(m.device);
        }
        for m in &self.trace.memsets {
            ctx_dev.entry(m.context).or_insert(m.device);
        }
        for s in &mut self.trace.syncs {
            if s.device == u32::MAX {
                s.device = ctx_dev.get(&s.context).copied().unwrap_or(0);
            }
        }
        let header = self.header.unwrap_or_default();
        let mut t = self.trace;
        t.strings = self.strings;
        t.launches = self.launches.into_launches();
        let m = &mut t.meta;
        m.source = SourceFormat::Native;
        m.paths = vec![path.display().to_string()];
        m.cupti_version = header.cupti_version;
        m.cuda_driver_version = header.cuda_driver_version;
        m.driver_version = header.driver_version.clone();
        m.host = header.host.clone();
        m.pid = header.pid;
        m.distributed = header.distributed.clone();
        m.devices = self.meta.devices.clone();
        m.counters = self.meta.counters.take();
        m.pm_sampling = self.meta.pm_sampling.take();
        m.pc_sampling = self.meta.pc_sampling.take();
        let (cupti_drops, rec_drops) = match &self.tail {
            Some(t) => (t.dropped_by_cupti, t.dropped_by_recorder),
            None => (
                self.meta.dropped_by_cupti.unwrap_or(0),
                self.meta.dropped_by_recorder.unwrap_or(0),
            ),
        };
        m.dropped_by_cupti = cupti_drops;
        m.dropped_by_recorder = rec_drops;
        m.drops_recorded = true;
        if let Some(reason) = self.tail.as_ref().and_then(|t| t.incomplete_reason.clone()) {
            self.incomplete_reason.get_or_insert(reason);
        }
        m.complete = self.incomplete_reason.is_none();
        m.incomplete_reason = self.incomplete_reason;
        m.damaged_bytes = self.damaged_bytes;
        m.damaged_regions = self.damaged_regions;
        let bounds = t.bounds_ns();
        let m = &mut t.meta;
        m.parts = vec![PartMeta {
            path: path.display().to_string(),
            host: header.host.clone(),
            pid: header.pid,
            first_ns: bounds.map(|b| b.0),
            last_ns: bounds.map(|b| b.1),
            complete: m.complete,
            header: header.clone(),
        }];
        let mut skipped: Vec<(String, u64)> = self.skipped.into_iter().collect();
        skipped.sort();
        m.skipped_events = skipped;
        let part = path.display().to_string();
        for text in header.notes.iter().chain(&self.meta.notes) {
            // A note repeated (one per failed buffer, say) is shown once.
            if !m.notes.iter().any(|n| &n.text == text) {
                m.notes.push(TraceNote {
                    pid: header.pid,
                    part: Some(part.clone()),
                    text: text.clone(),
                });
            }
        }
        (t, header)
    }

    fn pair_markers(&mut self) {
        let mut markers = std::mem::take(&mut self.markers);
        markers.sort_by_key(|m| m.ts_ns);
        let mut open: HashMap<u32, MarkerEvent> = HashMap::new();
        // The marker's NVTX domain (a string id; the empty string is NVTX's default domain, whose
        // name CUPTI reports as null), as shared text: one allocation per domain.
        let strings = &self.strings;
        let mut domains: HashMap<StrId, Option<std::sync::Arc<str>>> = HashMap::new();
        let mut domain = |id: StrId| -> Option<std::sync::Arc<str>> {
            domains
                .entry(id)
                .or_insert_with(|| {
                    strings
                        .get(id as usize)
                        .filter(|s| !s.is_empty())
                        .map(|s| std::sync::Arc::from(s.as_str()))
                })
                .clone()
        };
        for m in markers {
            if m.flags & marker_flags::INSTANTANEOUS != 0 {
                self.trace.marks.push(NvtxMark {
                    name: m.name,
                    process: m.process,
                    thread: m.thread,
                    ts_ns: m.ts_ns,
                    nvtx_domain: domain(m.domain),
                });
            } else if m.flags & marker_flags::START != 0 {
                if open.insert(m.id, m).is_some() {
                    *self
                        .skipped
                        .entry("nvtx_range_without_end".into())
                        .or_default() += 1;
                }
            } else if m.flags & marker_flags::END != 0 {
                match open.remove(&m.id) {
                    Some(s) => self.trace.ranges.push(NvtxRange {
                        domain: RangeDomain::Host,
                        name: s.name,
                        process: s.process,
                        thread: s.thread,
                        device: None,
                        stream: None,
                        start_ns: s.ts_ns,
                        end_ns: m.ts_ns,
                        // The start's domain; the end's where the start has none.
                        nvtx_domain: domain(s.domain).or_else(|| domain(m.domain)),
                    }),
                    None => {
                        *self
                            .skipped
                            .entry("nvtx_end_without_start".into())
                            .or_default() += 1
                    }
                }
            } else {
                *self.skipped.entry("nvtx_other_marker".into()).or_default() += 1;
            }
        }
        if !open.is_empty() {
            *self
                .skipped
                .entry("nvtx_range_without_end".into())
                .or_default() += open.len() as u64;
        }
    }
}

/// The cursors of a RECS chunk's columns, from `pos` on. Every column is checked whole first,
/// so a bad one adds no record; then the columns are read side by side, a row at a time.
fn recs_columns(
    raw: &[u8],
    mut pos: usize,
    nrows: usize,
    ncols: usize,
) -> Result<Vec<ColumnCursor<'_>>, String> {
    let bad = || "bad RECS chunk".to_string();
    let mut cols = Vec::with_capacity(ncols.min(MAX_COLUMNS));
    for i in 0..ncols {
        let len = get_varint(raw, &mut pos).ok_or_else(bad)? as usize;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= raw.len())
            .ok_or_else(bad)?;
        if !column_holds(&raw[pos..end], nrows) {
            return Err(bad());
        }
        // Columns past the ones this reader knows are checked and left.
        if i < MAX_COLUMNS {
            cols.push(ColumnCursor::new(&raw[pos..end]));
        }
        pos = end;
    }
    Ok(cols)
}

// One function per table: a row's columns as its record. They run once per row, so they are
// `#[inline]`, to compile as the one loop they were split from.

/// A kernel table row (its launch configuration interned).
#[inline]
fn kernel_row(v: &[u64; MAX_COLUMNS], launches: &mut LaunchInterner) -> Kernel {
    Kernel {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        correlation_id: v[2],
        device: v[3] as u32,
        context: v[4] as u32,
        stream: v[5],
        name: v[6] as StrId,
        launch: launches.intern(Launch {
            grid: [v[7] as u32, v[8] as u32, v[9] as u32],
            block: [v[10] as u32, v[11] as u32, v[12] as u32],
            registers_per_thread: v[13] as u32,
            static_shared_bytes: v[14] as u32,
            dynamic_shared_bytes: v[15] as u32,
            graph_id: v[16] as u32,
        }),
    }
}

/// A memcpy table row.
#[inline]
fn memcpy_row(v: &[u64; MAX_COLUMNS]) -> Memcpy {
    Memcpy {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        correlation_id: v[2],
        device: v[3] as u32,
        context: v[4] as u32,
        stream: v[5],
        kind: copy_kind_from_code(v[6]),
        bytes: v[7],
    }
}

/// A memset table row.
#[inline]
fn memset_row(v: &[u64; MAX_COLUMNS]) -> Memset {
    Memset {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        correlation_id: v[2],
        device: v[3] as u32,
        context: v[4] as u32,
        stream: v[5],
        bytes: v[6],
        value: v[7] as u32,
    }
}

/// An API call table row.
#[inline]
fn api_row(v: &[u64; MAX_COLUMNS]) -> ApiCall {
    ApiCall {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        correlation_id: v[2],
        kind: if v[3] == 1 {
            ApiKind::Driver
        } else {
            ApiKind::Runtime
        },
        cbid: ApiCall::cbid_of(v[4]),
        name: v[5] as StrId,
        process: v[6] as u32,
        thread: v[7],
        return_value: v[8] as u32 as i32,
    }
}

/// A synchronization table row.
#[inline]
fn sync_row(v: &[u64; MAX_COLUMNS]) -> Synchronization {
    Synchronization {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        correlation_id: v[2],
        kind: sync_kind_from_code(v[3]),
        context: v[4] as u32,
        stream: v[5].checked_sub(1),
        // Resolved from the context in `finish` when 0 (unknown).
        device: v[6].wrapping_sub(1) as u32,
        // CUPTI's records do not say which stream an event was recorded on.
        wait_on_stream: None,
        event_record_correlation: None,
    }
}

/// A marker table row.
#[inline]
fn marker_row(v: &[u64; MAX_COLUMNS]) -> MarkerEvent {
    MarkerEvent {
        ts_ns: v[0],
        id: v[1] as u32,
        flags: v[2] as u32,
        name: v[3] as StrId,
        domain: v[4] as StrId,
        process: v[5] as u32,
        thread: v[6],
    }
}

/// An overhead table row.
#[inline]
fn overhead_row(v: &[u64; MAX_COLUMNS]) -> Overhead {
    Overhead {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        kind: v[2] as StrId,
        process: v[3] as u32,
        thread: v[4],
    }
}

/// A kernel metric table row.
#[inline]
fn kernel_metric_row(v: &[u64; MAX_COLUMNS]) -> KernelMetric {
    KernelMetric {
        correlation_id: v[0],
        device: v[1] as u32,
        process: v[2] as u32,
        metric: v[3] as StrId,
        value: f64::from_bits(v[4]),
    }
}

/// A PM sample table row.
#[inline]
fn pm_sample_row(v: &[u64; MAX_COLUMNS]) -> PmSample {
    PmSample {
        start_ns: v[0],
        end_ns: v[0].wrapping_add(v[1]),
        device: v[2] as u32,
        process: v[3] as u32,
        metric: v[4] as StrId,
        value: f64::from_bits(v[5]),
    }
}

/// A `pc_sample` row (table 10). The source file is stored as its string id + 1, 0 for none.
#[inline]
fn pc_sample_row(v: &[u64; MAX_COLUMNS]) -> PcSample {
    PcSample {
        device: v[0] as u32,
        process: v[1] as u32,
        correlation_id: v[2],
        function: v[3] as StrId,
        pc_offset: v[4],
        cubin_crc: v[5],
        stall_reason: v[6] as StrId,
        samples: v[7],
        function_index: v[8] as u32,
        source_file: v[9].checked_sub(1).map(|f| f as StrId),
        source_line: v[10] as u32,
    }
}

/// A `memory` row (table 11; see `Writer::push_memory`). An op code it does not know reads as
/// unknown.
#[inline]
fn memory_row(v: &[u64; MAX_COLUMNS]) -> MemoryEvent {
    let known = |bit: u32, x: u64| (v[11] >> bit & 1 == 1).then_some(x);
    MemoryEvent {
        ts_ns: v[0],
        process: v[1] as u32,
        thread: v[2],
        device: v[3] as u32,
        place: super::memory_place_from_code(v[4]),
        level: if v[5] == 1 {
            MemoryLevel::Driver
        } else {
            MemoryLevel::Framework
        },
        op: match v[6] {
            1 => MemoryOp::Alloc,
            2 => MemoryOp::Free,
            _ => MemoryOp::Unknown,
        },
        address: known(0, v[7]),
        bytes: known(1, v[8]),
        total_allocated: known(2, v[9]),
        total_reserved: known(3, v[10]),
        correlation_id: v[12],
    }
}

/// A `memory_pool` row (table 12; see `Writer::push_memory_pool`).
#[inline]
fn memory_pool_row(v: &[u64; MAX_COLUMNS]) -> PoolEvent {
    PoolEvent {
        ts_ns: v[0],
        process: v[1] as u32,
        device: v[2] as u32,
        op: super::pool_op_from_code(v[3]),
        pool_type: super::pool_type_from_code(v[4]),
        address: v[5],
        size: v[6],
        utilized: v[7],
        release_threshold: v[8],
        min_bytes_to_keep: v[9],
        managed: v[10] == 1,
        block_address: v[11],
        block_bytes: v[12],
        correlation_id: v[13],
    }
}

fn copy_kind_from_code(c: u64) -> CopyKind {
    match c {
        1 => CopyKind::HtoD,
        2 => CopyKind::DtoH,
        8 => CopyKind::DtoD,
        9 => CopyKind::HtoH,
        10 => CopyKind::PtoP,
        _ => CopyKind::Unknown,
    }
}

fn sync_kind_from_code(c: u64) -> SyncKind {
    match c {
        1 => SyncKind::EventSynchronize,
        2 => SyncKind::StreamWaitEvent,
        3 => SyncKind::StreamSynchronize,
        4 => SyncKind::ContextSynchronize,
        _ => SyncKind::Unknown,
    }
}

/// Merges per-process traces into one, re-interning strings (see [`Merger`]); one trace is
/// returned as it is.
/// A part written before its header said which API calls it kept (cutrace 0.1 before
/// 2026-12-02) said so only in a note, `api records: lean — …` or `api records: launches — …`:
/// the mode that note names. Other notes (`api records: all`, a mode not applied) mean every call.
fn api_records_of_old_part(notes: &[String]) -> Option<crate::ApiRecords> {
    notes.iter().find_map(|n| {
        let rest = n.strip_prefix("api records: ")?;
        let mode = ["lean", "launches", "all"]
            .into_iter()
            .find(|m| rest.starts_with(m))?;
        Some(crate::ApiRecords {
            mode: mode.into(),
            ..crate::ApiRecords::default()
        })
    })
}

#[cfg(test)]
fn merge(mut traces: Vec<Trace>) -> Trace {
    if traces.len() == 1 {
        return traces.pop().unwrap_or_default();
    }
    let mut m = Merger::default();
    for t in traces {
        m.add(t);
    }
    m.finish()
}

/// Merges parts one at a time, as they are read: a part's records move into the merged trace and
/// the part is dropped before the next is read, so a directory of parts never holds its records
/// twice.
#[derive(Default)]
pub struct Merger {
    out: Trace,
    /// Parts added so far (the next one's number N).
    parts: usize,
    interner: Interner,
    launches: LaunchInterner,
    reasons: Vec<String>,
    /// Some part was incomplete.
    incomplete: bool,
    skipped: HashMap<String, u64>,
    // GPUs by UUID: a process sees its GPUs as ordinals 0, 1, … of its own
    // (CUDA_VISIBLE_DEVICES, one GPU per worker), so the same ordinal in two parts may be two
    // GPUs, and one GPU may have two ordinals. Each GPU keeps its ordinal unless another GPU
    // has it already; then it gets the next free one.
    by_uuid: HashMap<String, u32>,
    taken: Vec<u32>,
}

impl Merger {
    /// Adds the next part (part N, N counted from 0 in the order added). Only for a trace of
    /// two parts or more: one part is kept as it is, ids and all.
    pub fn add(&mut self, t: Trace) {
        let part = self.parts;
        self.parts += 1;
        let mut all_complete = !self.incomplete;
        let complete = &mut all_complete;
        let Merger {
            out,
            interner,
            launches,
            reasons,
            skipped,
            by_uuid,
            taken,
            ..
        } = self;
        // A part with GPU work but no device records (CUPTI's DEVICE kind refused, or its
        // record lost): nothing says which GPU its ordinals are, so they are taken as they
        // are, and the reader is told.
        let unidentified = t.meta.devices.is_empty()
            && !(t.kernels.is_empty() && t.memcpys.is_empty() && t.memsets.is_empty());
        let map: Vec<StrId> = t.strings.iter().map(|s| interner.intern(s)).collect();
        let re = |id: StrId| -> StrId { map.get(id as usize).copied().unwrap_or(u32::MAX) };
        let launch_map: Vec<LaunchId> = t.launches.iter().map(|l| launches.intern(*l)).collect();
        let relaunch =
            |id: LaunchId| -> LaunchId { launch_map.get(id as usize).copied().unwrap_or(u32::MAX) };
        // CUPTI's correlation and stream ids are per process (32-bit, from 1 in each): the
        // parts of a multi-process trace reuse them. Part N (N ≥ 1, in read order) gets N·2³²
        // added, so a kernel never joins another process's launch call and two processes'
        // streams on one GPU stay two streams; the first part keeps its own ids.
        // Id 0 means "none" (no correlation id; the NULL stream is recorded by its own id): it
        // stays 0, so it never joins anything and never names a part.
        let corr = |id: u64| {
            if id == 0 {
                0
            } else {
                id.wrapping_add((part as u64) << 32)
            }
        };
        let stream = |id: u64| id.wrapping_add((part as u64) << 32);
        let devices = merged_ordinals(&t.meta.devices, by_uuid, taken);
        let dev = |d: u32| devices.get(&d).copied().unwrap_or(d);
        // Each record moves over with its names re-interned, its correlation and stream ids
        // offset and its device renumbered.
        macro_rules! adopt {
            ($field:ident, $r:ident => $($fix:expr);*) => {
                out.$field.extend(t.$field.into_iter().map(|mut $r| {
                    $($fix;)*
                    $r
                }))
            };
        }
        adopt!(kernels, r => r.name = re(r.name); r.launch = relaunch(r.launch);
            r.correlation_id = corr(r.correlation_id);
            r.stream = stream(r.stream); r.device = dev(r.device));
        adopt!(api_calls, r => r.name = re(r.name); r.correlation_id = corr(r.correlation_id));
        adopt!(ranges, r => r.name = re(r.name); r.stream = r.stream.map(stream);
            r.device = r.device.map(dev));
        adopt!(marks, r => r.name = re(r.name));
        adopt!(overheads, r => r.kind = re(r.kind));
        adopt!(kernel_metrics, r => r.metric = re(r.metric);
            r.correlation_id = corr(r.correlation_id); r.device = dev(r.device));
        adopt!(pm_samples, r => r.metric = re(r.metric); r.device = dev(r.device));
        adopt!(pc_samples, r => r.function = re(r.function);
            r.stall_reason = re(r.stall_reason); r.source_file = r.source_file.map(re);
            r.correlation_id = corr(r.correlation_id); r.device = dev(r.device));
        adopt!(memcpys, r => r.correlation_id = corr(r.correlation_id);
            r.stream = stream(r.stream); r.device = dev(r.device));
        adopt!(memsets, r => r.correlation_id = corr(r.correlation_id);
            r.stream = stream(r.stream); r.device = dev(r.device));
        adopt!(syncs, r => r.correlation_id = corr(r.correlation_id);
            r.stream = r.stream.map(stream); r.device = dev(r.device);
            r.wait_on_stream = r.wait_on_stream.map(stream);
            r.event_record_correlation = r.event_record_correlation.map(corr));
        adopt!(memory, r => r.correlation_id = corr(r.correlation_id);
            if r.place == MemoryPlace::Gpu { r.device = dev(r.device) });
        adopt!(memory_pools, r => r.correlation_id = corr(r.correlation_id);
            r.device = dev(r.device));
        let mut m = t.meta;
        if unidentified {
            m.notes.push(TraceNote {
                pid: m.pid,
                part: m.paths.first().cloned(),
                text: "this part has no device records, so nothing tells which GPU its device \
                       numbers are: its work is counted on the GPU of the same number, which \
                       may be another process's GPU"
                    .into(),
            });
        }
        out.meta.id_parts.push(m.pid);
        out.meta.paths.extend(m.paths.iter().cloned());
        out.meta.parts.extend(m.parts);
        out.meta.dropped_by_cupti += m.dropped_by_cupti;
        out.meta.dropped_by_recorder += m.dropped_by_recorder;
        out.meta.damaged_bytes += m.damaged_bytes;
        out.meta.damaged_regions += m.damaged_regions;
        out.meta.drops_recorded |= m.drops_recorded;
        if let Some(c) = &m.counters {
            out.meta
                .counters
                .get_or_insert_with(Default::default)
                .merge(c);
        }
        if let Some(p) = &m.pm_sampling {
            let mut p = p.clone();
            for d in &mut p.devices {
                *d = dev(*d);
            }
            out.meta
                .pm_sampling
                .get_or_insert_with(Default::default)
                .merge(&p);
        }
        if let Some(p) = &m.pc_sampling {
            let mut p = p.clone();
            for d in &mut p.devices {
                *d = dev(*d);
            }
            out.meta
                .pc_sampling
                .get_or_insert_with(Default::default)
                .merge(&p);
        }
        out.meta.cupti_version = out.meta.cupti_version.or(m.cupti_version);
        out.meta.cuda_driver_version = out.meta.cuda_driver_version.or(m.cuda_driver_version);
        out.meta.driver_version = out.meta.driver_version.take().or(m.driver_version);
        out.meta.host = out.meta.host.take().or(m.host);
        for mut d in m.devices {
            d.device = dev(d.device);
            if !out.meta.devices.iter().any(|x| x.device == d.device) {
                out.meta.devices.push(d);
            }
        }
        if !m.complete {
            *complete = false;
            if let Some(r) = m.incomplete_reason {
                reasons.push(format!("{}: {r}", m.paths.join(",")));
            }
        }
        for (k, v) in m.skipped_events {
            *skipped.entry(k).or_default() += v;
        }
        // Each part's notes stay its own (tagged with its pid and file), in part order.
        out.meta.notes.extend(m.notes);
        self.incomplete = !all_complete;
    }

    pub fn finish(self) -> Trace {
        let mut out = self.out;
        out.strings = self.interner.into_strings();
        out.launches = self.launches.into_launches();
        out.meta.distributed = common_distributed(&out.meta.parts);
        out.meta.source = SourceFormat::Native;
        out.meta.complete = !self.incomplete;
        out.meta.incomplete_reason = (!self.reasons.is_empty()).then(|| self.reasons.join("; "));
        let mut skipped: Vec<(String, u64)> = self.skipped.into_iter().collect();
        skipped.sort();
        out.meta.skipped_events = skipped;
        out
    }
}

/// The merged trace's ordinal of each of a part's GPUs, by the part's own ordinal: a GPU whose
/// UUID was seen before keeps the ordinal it got; a new one keeps its own unless another GPU has
/// it, and then gets the next free one; one without a UUID keeps its own unless a GPU of this part
/// already went there. `by_uuid` and `taken` carry this over the parts.
fn merged_ordinals(
    part_devices: &[DeviceProps],
    by_uuid: &mut HashMap<String, u32>,
    taken: &mut Vec<u32>,
) -> HashMap<u32, u32> {
    let mut devices: HashMap<u32, u32> = HashMap::new();
    let mut this_part: Vec<u32> = Vec::new();
    let next_free = |taken: &[u32]| (0..).find(|g| !taken.contains(g)).unwrap_or(u32::MAX);
    for d in part_devices {
        let global = match d.uuid.as_deref().filter(|u| !u.is_empty()) {
            Some(u) => match by_uuid.get(u) {
                Some(&g) => g,
                None => {
                    let g = if taken.contains(&d.device) {
                        next_free(taken)
                    } else {
                        d.device
                    };
                    by_uuid.insert(u.to_string(), g);
                    g
                }
            },
            // Without a UUID nothing tells GPUs of two processes apart: the ordinal is kept,
            // unless a GPU of this same process already went there.
            None if this_part.contains(&d.device) => next_free(taken),
            None => d.device,
        };
        if !taken.contains(&global) {
            taken.push(global);
        }
        this_part.push(global);
        devices.insert(d.device, global);
    }
    devices
}

/// What the parts' headers say of the job, field by field, where every part that says agrees
/// (a run id shared by all parts of one `cutrace record`; a rank only when one rank wrote them
/// all). Each part's own is in [`PartMeta::distributed`].
fn common_distributed(parts: &[PartMeta]) -> Option<Distributed> {
    fn agreed<T: PartialEq + Clone>(vals: impl Iterator<Item = Option<T>>) -> Option<T> {
        let mut out: Option<T> = None;
        for v in vals.flatten() {
            match &out {
                None => out = Some(v),
                Some(o) if *o == v => {}
                Some(_) => return None,
            }
        }
        out
    }
    let ds: Vec<&Distributed> = parts.iter().filter_map(PartMeta::distributed).collect();
    if ds.is_empty() {
        return None;
    }
    Some(Distributed {
        rank: agreed(ds.iter().map(|d| d.rank)),
        local_rank: agreed(ds.iter().map(|d| d.local_rank)),
        world_size: agreed(ds.iter().map(|d| d.world_size)),
        backend: agreed(ds.iter().map(|d| d.backend.clone())),
        run_id: agreed(ds.iter().map(|d| d.run_id.clone())),
        ..Distributed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceProps, Kernel, TraceMeta};

    /// One process's trace: one kernel on `device` (whose GPU has `uuid`), stream 7, corr 5.
    fn part(pid: u32, device: u32, uuid: Option<&str>) -> Trace {
        let mut t = Trace {
            strings: vec!["k".into()],
            meta: TraceMeta {
                pid: Some(pid),
                devices: vec![DeviceProps {
                    device,
                    name: "H200".into(),
                    uuid: uuid.map(str::to_owned),
                    ..Default::default()
                }],
                complete: true,
                ..Default::default()
            },
            ..Default::default()
        };
        t.kernels.push(Kernel {
            device,
            context: 1,
            stream: 7,
            correlation_id: 5,
            start_ns: 100,
            end_ns: 200,
            name: 0,
            launch: 0,
        });
        t
    }

    #[test]
    fn processes_keep_their_own_streams_and_gpus_are_told_apart_by_uuid() {
        // Workers with one GPU each (CUDA_VISIBLE_DEVICES): all call theirs device 0. Worker
        // 12 shares worker 10's GPU; worker 13 sees that GPU as its device 1.
        let t = merge(vec![
            part(10, 0, Some("GPU-a")),
            part(11, 0, Some("GPU-b")),
            part(12, 0, Some("GPU-a")),
            part(13, 1, Some("GPU-a")),
        ]);
        let devices: Vec<u32> = t.kernels.iter().map(|k| k.device).collect();
        assert_eq!(devices, [0, 1, 0, 0]);
        let mut gpus: Vec<(u32, Option<String>)> = t
            .meta
            .devices
            .iter()
            .map(|d| (d.device, d.uuid.clone()))
            .collect();
        gpus.sort();
        assert_eq!(gpus, [(0, Some("GPU-a".into())), (1, Some("GPU-b".into()))]);
        // Stream 7 of each process is its own stream; the ids say whose.
        let streams: Vec<u64> = t.kernels.iter().map(|k| k.stream).collect();
        assert_eq!(streams, [7, 7 + (1 << 32), 7 + (2 << 32), 7 + (3 << 32)]);
        assert_eq!(t.meta.id_parts, [Some(10), Some(11), Some(12), Some(13)]);
        assert_eq!(t.meta.id_origin(t.kernels[2].stream), (Some(12), 7));
        assert_eq!(t.meta.id_origin(t.kernels[2].correlation_id), (Some(12), 5));
        assert_eq!(t.meta.show_id(t.kernels[3].correlation_id), "5 (pid 13)");
    }

    /// A wait's event stream and record call move with the part, as its own stream and
    /// correlation id do: they still name the stream's work and the call after the merge.
    #[test]
    fn an_event_waits_stream_and_record_call_move_with_its_part() {
        let with_wait = |pid| {
            let mut t = part(pid, 0, Some("GPU-a"));
            t.syncs.push(Synchronization {
                kind: SyncKind::StreamWaitEvent,
                device: 0,
                context: 1,
                stream: Some(9),
                correlation_id: 6,
                start_ns: 100,
                end_ns: 110,
                wait_on_stream: Some(7),
                event_record_correlation: Some(4),
            });
            t
        };
        let t = merge(vec![with_wait(10), with_wait(11)]);
        let s = &t.syncs[1];
        assert_eq!(s.wait_on_stream, Some(t.kernels[1].stream));
        assert_eq!(s.event_record_correlation, Some(4 + (1 << 32)));
        assert_eq!(s.stream, Some(9 + (1 << 32)));
    }

    #[test]
    fn correlation_id_0_means_none_in_every_part() {
        let mut b = part(11, 0, Some("GPU-b"));
        b.kernels[0].correlation_id = 0;
        let t = merge(vec![part(10, 0, Some("GPU-a")), b]);
        assert_eq!(
            t.kernels[1].correlation_id, 0,
            "0 is no id: it gets no offset"
        );
        assert_eq!(t.meta.id_origin(t.kernels[1].stream), (Some(11), 7));
    }

    #[test]
    fn a_gpu_without_uuid_does_not_land_on_one_its_own_process_renumbered() {
        // Part 1: GPU-c at 0 (moved: GPU-a has 0) and a GPU without UUID at 1.
        let mut b = part(11, 0, Some("GPU-c"));
        b.meta.devices.push(DeviceProps {
            device: 1,
            name: "H200".into(),
            ..Default::default()
        });
        let mut k = b.kernels[0].clone();
        k.device = 1;
        b.kernels.push(k);
        let t = merge(vec![part(10, 0, Some("GPU-a")), b]);
        let devices: Vec<u32> = t.kernels.iter().map(|k| k.device).collect();
        assert_eq!(devices, [0, 1, 2], "three GPUs stay three");
    }

    #[test]
    fn a_part_without_device_records_is_noted() {
        let mut b = part(11, 0, None);
        b.meta.devices.clear();
        let t = merge(vec![part(10, 0, Some("GPU-a")), b]);
        assert_eq!(t.kernels[1].device, 0);
        let notes: Vec<(Option<u32>, &str)> = t
            .meta
            .notes
            .iter()
            .map(|n| (n.pid, n.text.as_str()))
            .collect();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].0, Some(11));
        assert!(notes[0].1.contains("no device records"), "{notes:?}");
        // One part alone: nothing to confuse it with.
        let mut c = part(12, 0, None);
        c.meta.devices.clear();
        assert!(merge(vec![c]).meta.notes.is_empty());
    }

    #[test]
    fn without_uuids_ordinals_are_kept_and_one_part_is_left_as_recorded() {
        let t = merge(vec![part(10, 0, None), part(11, 0, None)]);
        assert_eq!(
            t.kernels[1].device, 0,
            "no UUID: nothing to tell GPUs apart by"
        );
        assert_eq!(t.meta.id_origin(t.kernels[1].stream), (Some(11), 7));
        let one = merge(vec![part(10, 3, Some("GPU-a"))]);
        assert_eq!((one.kernels[0].device, one.kernels[0].stream), (3, 7));
        assert!(one.meta.id_parts.is_empty());
        assert_eq!(one.meta.show_id(7), "7");
    }
}
