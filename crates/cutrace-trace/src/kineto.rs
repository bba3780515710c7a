//! Kineto (torch.profiler `export_chrome_trace`) JSON import: streaming, exact timestamps.
//!
//! The file is read in chunks; each element of `traceEvents` is parsed on its own, borrowed from
//! the chunk, so memory is the size of the records kept, not of the JSON. `ts` and `dur` are read
//! as decimal text and converted to integer nanoseconds exactly (see `timeparse`).

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

use crate::error::TraceError;
use crate::limits::{Limits, ReadOptions};
use crate::model::*;
use crate::progress::Progress;
use crate::timeparse::{parse_us_exact, TimeParseError};

mod comms;
mod parallel;
mod scan;
mod top;
pub mod vocab;
use parallel::RunEnd;
use scan::{Args, Event};
use vocab::{copy_kind, sync_kind};

const CHUNK: usize = 4 << 20;
/// Blocks smaller than this are scanned on one thread (spawning costs more than it saves).
const PARALLEL_MIN: usize = 256 << 10;
const PROGRESS_EVERY: u64 = 16 << 20;

/// Imports a Kineto JSON trace (`.json` or gzip-compressed) with the default [`Limits`], on up
/// to 8 threads (one per core).
pub fn import(path: &Path, progress: Progress<'_>) -> Result<Trace, TraceError> {
    import_on_threads(path, progress, None)
}

/// [`import`] on `threads` threads (1 = sequential; `None`: up to 8, one per core).
pub fn import_on_threads(
    path: &Path,
    progress: Progress<'_>,
    threads: Option<usize>,
) -> Result<Trace, TraceError> {
    let mut file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let total = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let mut magic = Vec::with_capacity(2);
    (&mut file)
        .take(2)
        .read_to_end(&mut magic)
        .map_err(|e| TraceError::io(path, e))?;
    let gz = magic == [0x1f, 0x8b];
    let whole = std::io::Cursor::new(magic).chain(file);
    let opts = ReadOptions {
        import_threads: threads,
        limits: Limits::default(),
    };
    import_stream(path, whole, gz, total, &opts, progress)
}

/// Imports a Kineto JSON trace from `input`, read once from start to end (`gz`: it is
/// gzip-compressed; `total`: its length, when known, for progress). `path` names it in messages.
pub fn import_stream(
    path: &Path,
    input: impl Read,
    gz: bool,
    total: Option<u64>,
    opts: &ReadOptions,
    progress: Progress<'_>,
) -> Result<Trace, TraceError> {
    let limits = &opts.limits;
    // No BufReader for plain JSON: `Input` reads large chunks itself.
    let mut counting = CountingReader {
        inner: input,
        count: 0,
        total,
        next_report: PROGRESS_EVERY,
        progress,
    };
    let trailing = std::cell::Cell::new(false);
    let reader: Box<dyn Read + '_> = if gz {
        Box::new(GzMembers::new(
            std::io::BufReader::with_capacity(1 << 16, &mut counting),
            &trailing,
        ))
    } else {
        Box::new(&mut counting)
    };
    let threads = opts
        .import_threads
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
        .min(crate::limits::MAX_THREADS);
    let mut imp = Importer::new(path, reader, CHUNK, threads);
    imp.limits = *limits;
    // A refill may hold a whole chunk of events not yet consumed: the limit is never below that.
    imp.input.max_value = usize::try_from(limits.event_bytes)
        .unwrap_or(usize::MAX)
        .max(2 * CHUNK);
    imp.sink.string_bytes = limits.string_bytes;
    imp.gzip_size = if gz { Some(total.unwrap_or(0)) } else { None };
    imp.run()?;
    let mut trace = imp.finish()?;
    trace.meta.paths = vec![path.display().to_string()];
    if trailing.get() {
        trace.meta.notes.push(TraceNote {
            pid: None,
            part: Some(path.display().to_string()),
            text: "the file goes on after the end of its gzip stream (bytes that are not another \
                   gzip member); they were ignored"
                .into(),
        });
    }
    Ok(trace)
}

/// Gzip members one after another (as `gzip` concatenates them); bytes after the last member
/// that do not start another one end the stream, and are flagged, rather than read as a member
/// cut off.
struct GzMembers<'t, R: std::io::BufRead> {
    inner: Option<R>,
    member: Option<flate2::bufread::GzDecoder<R>>,
    trailing: &'t std::cell::Cell<bool>,
}

impl<'t, R: std::io::BufRead> GzMembers<'t, R> {
    fn new(inner: R, trailing: &'t std::cell::Cell<bool>) -> Self {
        GzMembers {
            member: Some(flate2::bufread::GzDecoder::new(inner)),
            inner: None,
            trailing,
        }
    }
}

impl<R: std::io::BufRead> Read for GzMembers<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(m) = &mut self.member {
                let n = m.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.inner = self.member.take().map(|m| m.into_inner());
            }
            let Some(mut inner) = self.inner.take() else {
                return Ok(0);
            };
            let next = inner.fill_buf()?;
            if next.is_empty() {
                return Ok(0);
            }
            if next.len() >= 2 && next[..2] == [0x1f, 0x8b] {
                self.member = Some(flate2::bufread::GzDecoder::new(inner));
            } else {
                self.trailing.set(true);
                return Ok(0);
            }
        }
    }
}

/// Counts compressed bytes read, for progress.
struct CountingReader<'p, R> {
    inner: R,
    count: u64,
    total: Option<u64>,
    next_report: u64,
    progress: Progress<'p>,
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        if self.count >= self.next_report || n == 0 {
            (self.progress)(self.count, self.total);
            self.next_report = self.count + PROGRESS_EVERY;
        }
        Ok(n)
    }
}

/// A chunked window over the input with absolute byte offsets for error messages.
struct Input<R> {
    reader: R,
    /// Always initialized up to its length; `buf[..end]` holds input.
    buf: Vec<u8>,
    end: usize,
    pos: usize,
    /// Absolute offset of `buf[0]` in the (decompressed) stream.
    base: u64,
    eof: bool,
    /// Bytes read per refill (tests make it tiny so values straddle every boundary).
    chunk: usize,
    /// Most bytes one value may hold in the buffer (the `event-bytes` limit).
    max_value: usize,
}

impl<R: Read> Input<R> {
    /// Reads more input, keeping `buf[pos..]`. Returns false at end of input.
    fn refill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.end - self.pos > self.max_value {
            // One event (or top-level value) longer than the limit: refuse it before the buffer
            // grows to hold it (a gigabyte string in a small gzip).
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "one JSON value is longer than the event-bytes limit",
            ));
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        let old = self.end;
        // Never more than one byte past the limit, so an oversized value is refused at the
        // next refill rather than read whole.
        let target = (old + self.chunk.max(old)).min(self.max_value.max(old) + 1);
        while self.end < target {
            // The buffer stays initialized: it is zeroed only where it grows (by at most 1 MiB
            // ahead of the data), never again per read.
            if self.buf.len() == self.end {
                let grow = (target - self.end).min(1 << 20);
                self.buf.resize(self.end + grow, 0);
            }
            let stop = self.buf.len().min(target);
            match self.reader.read(&mut self.buf[self.end..stop]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end > old)
    }

    /// The bytes read and not yet consumed.
    fn rest(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
}

struct Importer<R> {
    input: Input<R>,
    sink: Sink,
    /// Threads that scan a block at once (1 = sequential).
    threads: usize,
    /// Blocks smaller than this are scanned on one thread.
    parallel_min: usize,
    /// Speculative parts merged, and thrown away (their cut was not proven); for tests.
    parts: (u64, u64),
    /// Emptied part sinks, kept for the next block.
    spares: Vec<Sink>,
    /// `"cutrace": {"time_base_ns": …}` of a `cutrace convert --chrome` export: its `ts` are
    /// relative to this, and it is added back so the trace has its original clock. (torch.profiler's
    /// own `baseTimeNanoseconds` is not applied: its traces are reported on their own clock.)
    time_base_ns: Ns,
    /// The compressed file's size when the input is gzip: a gzip stream that ends early is a file
    /// cut off there.
    gzip_size: Option<u64>,
    limits: Limits,
    /// Where the `"cutrace"` member was, for an error about its `time_base_ns`.
    time_base_at: u64,
}

/// Where parsed events go; kept apart from the input so events can borrow the input's buffer.
struct Sink {
    path: PathBuf,
    /// The `string-bytes` limit: the longest name kept.
    string_bytes: u64,
    strings: Interner,
    /// Kernels' launch configurations, as `strings` holds names.
    launches: LaunchInterner,
    trace: Trace,
    events: u64,
    skipped: std::collections::BTreeMap<String, u64>,
    /// `ts` and `dur` values with digits below the nanosecond, rounded to the nearest ns.
    rounded: u64,
    /// NVTX domain names seen, shared by the ranges and marks that carry them.
    domains: Vec<std::sync::Arc<str>>,
    /// Values not read in fields cutrace does not compute from, by category and key: how many,
    /// and the first one's raw text.
    unread: std::collections::BTreeMap<String, (u64, String)>,
    /// `record_param_comms` ops and communication kernels, joined at the end.
    comm_ops: Vec<comms::CommOp>,
    comm_kernels: Vec<comms::CommKernel>,
}

/// A kernel, copy or memset event's placement and timing.
struct GpuEvent {
    start: Ns,
    end: Ns,
    device: u32,
    context: u32,
    stream: u64,
    correlation_id: u64,
    args: GpuArgs,
}

/// The typed view of [`Args`] for one GPU or API event.
#[derive(Default)]
struct GpuArgs {
    device: Option<u32>,
    context: Option<u32>,
    stream: Option<u64>,
    correlation: Option<u64>,
    registers: Option<u32>,
    shared_memory: Option<u32>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    bytes: Option<u64>,
    cbid: Option<u32>,
    graph_id: Option<u32>,
}

/// The typed view of `a`. A value that does not read (a negative stream, a string that is not a
/// number, a grid that is not three integers) is left `None` and named in `unread`, with its raw
/// text, for the caller to count: it never refuses the event.
fn typed<'a>(a: &Args<'a>, unread: &mut Vec<(&'static str, &'a [u8])>) -> GpuArgs {
    let mut int = |v: Option<&'a [u8]>, key: &'static str| -> Option<u64> {
        let r = v?;
        match lenient_uint::<u64>(r) {
            Ok(n) => n,
            Err(()) => {
                unread.push((key, r));
                None
            }
        }
    };
    let device = int(a.device, "device");
    let context = int(a.context, "context");
    let stream = int(a.stream, "stream");
    let correlation = int(a.correlation, "correlation");
    let registers = int(a.registers, "registers per thread");
    let shared_memory = int(a.shared_memory, "shared memory");
    let bytes = int(a.bytes, "bytes");
    let cbid = int(a.cbid, "cbid");
    let graph_id = int(a.graph_id, "graph id");
    let mut narrow = |v: Option<u64>, raw: Option<&'a [u8]>, key: &'static str| -> Option<u32> {
        let n = v?;
        match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                unread.extend(raw.map(|r| (key, r)));
                None
            }
        }
    };
    let out = GpuArgs {
        device: narrow(device, a.device, "device"),
        context: narrow(context, a.context, "context"),
        stream,
        correlation,
        registers: narrow(registers, a.registers, "registers per thread"),
        shared_memory: narrow(shared_memory, a.shared_memory, "shared memory"),
        grid: None,
        block: None,
        bytes,
        cbid: narrow(cbid, a.cbid, "cbid"),
        graph_id: narrow(graph_id, a.graph_id, "graph id"),
    };
    let mut dim = |v: Option<&'a [u8]>, key: &'static str| -> Option<[u32; 3]> {
        let r = v?;
        let d = dim3(r);
        if d.is_none() {
            unread.push((key, r));
        }
        d
    };
    GpuArgs {
        grid: dim(a.grid, "grid"),
        block: dim(a.block, "block"),
        ..out
    }
}

/// `[x, y, z]` of non-negative 32-bit integers.
fn dim3(r: &[u8]) -> Option<[u32; 3]> {
    let inner = r.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let mut out = [0u32; 3];
    let mut parts = inner.split(|&c| c == b',');
    for slot in out.iter_mut() {
        *slot = parse_uint(parts.next()?.trim_ascii())?;
    }
    parts.next().is_none().then_some(out)
}

/// A non-negative integer as torch.profiler writes one on CUDA (`7`) or on ROCm, where ids can
/// be hex strings (`"0x1a"`); a decimal string (`"7"`) reads too. `Ok(None)`: `null`, absent.
/// `Err`: anything else (`-1`, `"Spans"`, `1.5`, an object).
fn lenient_uint<T: TryFrom<u64>>(r: &[u8]) -> Result<Option<T>, ()> {
    if r == b"null" {
        return Ok(None);
    }
    let t = unquote_b(r).trim_ascii();
    let v = match t.strip_prefix(b"0x").or_else(|| t.strip_prefix(b"0X")) {
        Some(hex) if r.starts_with(b"\"") => parse_hex(hex),
        _ => parse_uint::<u64>(t),
    };
    v.and_then(|v| T::try_from(v).ok()).map(Some).ok_or(())
}

/// Hex digits (at most 16), no sign.
fn parse_hex(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    u64::from_str_radix(s, 16).ok()
}

impl<R: Read> Importer<R> {
    fn new(path: &Path, reader: R, chunk: usize, threads: usize) -> Self {
        let mut trace = Trace::default();
        trace.meta.source = SourceFormat::Kineto;
        trace.meta.complete = true;
        Importer {
            input: Input {
                reader,
                buf: Vec::new(),
                end: 0,
                pos: 0,
                base: 0,
                eof: false,
                chunk,
                max_value: Limits::default().event_bytes as usize,
            },
            sink: Sink {
                path: path.to_path_buf(),
                string_bytes: Limits::default().string_bytes,
                strings: Interner::new(),
                launches: Default::default(),
                trace,
                events: 0,
                skipped: Default::default(),
                rounded: 0,
                domains: Vec::new(),
                unread: Default::default(),
                comm_ops: Vec::new(),
                comm_kernels: Vec::new(),
            },
            threads: threads.clamp(1, crate::limits::MAX_THREADS),
            parallel_min: PARALLEL_MIN,
            parts: (0, 0),
            spares: Vec::new(),
            time_base_ns: 0,
            gzip_size: None,
            limits: Limits::default(),
            time_base_at: 0,
        }
    }

    fn finish(self) -> Result<Trace, TraceError> {
        let mut trace = self.sink.trace;
        if self.time_base_ns != 0 {
            let base = self.time_base_ns;
            // A base that pushes a time past 2^64 ns would saturate every time to one value
            // (a 1 ms kernel read as 0 ns): refused, not clamped.
            if let Some((_, last)) = trace.bounds_ns() {
                if last.checked_add(base).is_none() {
                    return Err(malformed(
                        &self.sink.path,
                        self.time_base_at,
                        format!(
                            "\"cutrace\": {{\"time_base_ns\": {base}}} puts the trace's times past \
                             2^64 ns (its last time is {last} ns before the base is added)"
                        ),
                    ));
                }
            }
            // 0 is "not collected" in the export (see `cutrace convert --chrome`): left as is.
            trace.map_times(|t| if t == 0 { 0 } else { t.saturating_add(base) });
        }
        let mut strings = self.sink.strings;
        let unjoined = comms::join(
            &mut trace,
            &mut strings,
            &self.sink.comm_ops,
            &self.sink.comm_kernels,
        );
        trace.strings = strings.into_strings();
        trace.launches = self.sink.launches.into_launches();
        trace.meta.skipped_events = self.sink.skipped.into_iter().collect();
        let part = Some(self.sink.path.display().to_string());
        if unjoined > 0 {
            trace.meta.notes.push(TraceNote {
                pid: None,
                part: part.clone(),
                text: format!(
                    "{unjoined} of {} collective annotations (record_param_comms) launched no \
                     NCCL kernel in this trace (a CPU backend such as gloo, a group of one rank, \
                     or kernels not captured): they are not among the collectives",
                    self.sink.comm_ops.len()
                ),
            });
        }
        for (what, (n, example)) in &self.sink.unread {
            trace.meta.notes.push(TraceNote {
                pid: None,
                part: part.clone(),
                text: format!(
                    "{n} {what} value{} did not read (first: {example}) and {} left unknown; \
                     cutrace does not compute from {}, so the rest was read",
                    if *n == 1 { "" } else { "s" },
                    if *n == 1 { "was" } else { "were" },
                    if *n == 1 { "it" } else { "them" },
                ),
            });
        }
        trace.meta.unread_values = self
            .sink
            .unread
            .into_iter()
            .map(|(k, (n, _))| (k, n))
            .collect();
        if self.sink.rounded > 0 {
            // After the "cutrace" member's notes were restored, so it is kept beside them.
            let n = self.sink.rounded;
            trace.meta.notes.push(TraceNote {
                pid: None,
                part: Some(self.sink.path.display().to_string()),
                text: format!(
                    "{n} \"ts\"/\"dur\" value{} had digits below the nanosecond and {} rounded to \
                     the nearest nanosecond (ties to even; an event's end is its exact ts + dur, \
                     rounded once)",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "was" } else { "were" },
                ),
            });
        }
        Ok(trace)
    }

    fn malformed(&self, offset: u64, what: impl Into<String>) -> TraceError {
        self.sink.malformed(offset, what)
    }

    fn io(&self, e: std::io::Error) -> TraceError {
        if e.kind() == std::io::ErrorKind::OutOfMemory {
            return TraceError::Limit {
                path: self.sink.path.clone(),
                offset: self.input.offset(),
                what: "one JSON value (an event, or a top-level value) does not end within the \
                       limit"
                    .into(),
                limit: "event-bytes",
                value: self.limits.event_bytes,
            };
        }
        if let (Some(size), std::io::ErrorKind::UnexpectedEof) = (self.gzip_size, e.kind()) {
            // flate2 says "incomplete deflate stream" or "unexpected end of file": the file
            // stops inside its gzip stream (header, data or trailer).
            return TraceError::Malformed {
                path: self.sink.path.clone(),
                offset: size,
                what: format!(
                    "the gzip stream is cut off: the file ends before its gzip stream does, after \
                     {} bytes of JSON were decompressed",
                    self.input.base + self.input.end as u64
                ),
                hint: "the trace was probably still being written, or was copied only in part; \
                       copy it again once complete, or export it again with \
                       export_chrome_trace"
                    .into(),
            };
        }
        if e.kind() == std::io::ErrorKind::InvalidInput
            || e.kind() == std::io::ErrorKind::InvalidData
        {
            return self.malformed(self.input.offset(), format!("corrupt gzip stream: {e}"));
        }
        TraceError::io(&self.sink.path, e)
    }

    /// Next non-whitespace byte, without consuming it; None at end of input.
    fn peek(&mut self) -> Result<Option<u8>, TraceError> {
        loop {
            while self.input.pos < self.input.end {
                let c = self.input.buf[self.input.pos];
                if c.is_ascii_whitespace() {
                    self.input.pos += 1;
                } else {
                    return Ok(Some(c));
                }
            }
            if !self.input.refill().map_err(|e| self.io(e))? {
                return Ok(None);
            }
        }
    }

    fn expect(&mut self, want: u8, context: &str) -> Result<(), TraceError> {
        match self.peek()? {
            Some(c) if c == want => {
                self.input.pos += 1;
                Ok(())
            }
            Some(c) => Err(self.unexpected(&format!("'{}' {context}", want as char), c)),
            None => Err(self.truncated(context)),
        }
    }

    /// "expected X, found 'c'" at the cursor.
    fn unexpected(&self, expected: &str, found: u8) -> TraceError {
        self.malformed(
            self.input.offset(),
            format!(
                "expected {expected}, found '{}'",
                (found as char).escape_default()
            ),
        )
    }

    fn truncated(&self, context: &str) -> TraceError {
        self.malformed(
            self.input.offset(),
            format!(
                "the JSON ends early {context} after {} events: the file is truncated (was the \
                 profiler or the copy interrupted?)",
                self.sink.events
            ),
        )
    }

    /// Parses one JSON value at the cursor with `parse`, which borrows from the buffer and may
    /// hand what it parsed to the sink. Refills and retries when the value is cut by the chunk
    /// boundary; `parse` returns `Ok(None)` for "need more input".
    fn with_value<O>(
        &mut self,
        context: &str,
        mut parse: impl FnMut(&[u8], bool, u64, &mut Sink) -> Result<Option<(O, usize)>, ParseFail>,
    ) -> Result<O, TraceError> {
        self.peek()?;
        loop {
            let start = self.input.offset();
            let slice = self.input.rest();
            match parse(slice, self.input.eof, start, &mut self.sink) {
                Ok(Some((v, used))) => {
                    self.input.pos += used;
                    return Ok(v);
                }
                Ok(None) => {
                    if !self.input.refill().map_err(|e| self.io(e))? {
                        if self.input.eof && !self.input.rest().is_empty() {
                            // One more pass with eof set reports the real error.
                            match parse(self.input.rest(), true, start, &mut self.sink) {
                                Ok(Some((v, used))) => {
                                    self.input.pos += used;
                                    return Ok(v);
                                }
                                Ok(None) => return Err(self.truncated(context)),
                                Err(ParseFail::Json(e, at)) => {
                                    return Err(self.malformed(at, format!("{context}: {e}")))
                                }
                                Err(ParseFail::Trace(e)) => return Err(e),
                            }
                        }
                        return Err(self.truncated(context));
                    }
                }
                Err(ParseFail::Json(e, at)) => {
                    return Err(self.malformed(at, format!("{context}: {e}")))
                }
                Err(ParseFail::Trace(e)) => return Err(e),
            }
        }
    }

    fn parse_owned<T: DeserializeOwned>(&mut self, context: &str) -> Result<T, TraceError> {
        self.with_value(context, |slice, eof, start, _| step::<T>(slice, eof, start))
    }

    fn run(&mut self) -> Result<(), TraceError> {
        match self.peek()? {
            None => {
                return Err(self.malformed(0, "the file is empty"));
            }
            Some(b'[') => {
                // The bare-array flavour of the Chrome trace format.
                self.events_array()?;
            }
            Some(b'{') => {
                self.input.pos += 1;
                let mut saw_events = false;
                if self.peek()? == Some(b'}') {
                    self.input.pos += 1;
                } else {
                    loop {
                        let key: String = self.parse_owned("reading a top-level key")?;
                        self.expect(b':', "after a top-level key")?;
                        self.top_level_value(&key)?;
                        saw_events |= key == "traceEvents";
                        match self.peek()? {
                            Some(b',') => self.input.pos += 1,
                            Some(b'}') => {
                                self.input.pos += 1;
                                break;
                            }
                            Some(_) => {
                                return Err(self.malformed(
                                    self.input.offset(),
                                    "expected ',' or '}' between top-level keys",
                                ))
                            }
                            None => return Err(self.truncated("in the top-level object")),
                        }
                    }
                }
                if !saw_events {
                    return Err(TraceError::Unsupported {
                        path: self.sink.path.clone(),
                        what: "this JSON is not a Kineto/Chrome trace: it has no \"traceEvents\" \
                               array; expected torch.profiler's export_chrome_trace output"
                            .into(),
                    });
                }
            }
            Some(c) => return Err(self.unexpected("a JSON object with \"traceEvents\"", c)),
        }
        if let Some(c) = self.peek()? {
            return Err(self.malformed(
                self.input.offset(),
                format!(
                    "unexpected '{}' after the end of the trace",
                    (c as char).escape_default()
                ),
            ));
        }
        if self.sink.events == 0 {
            return Err(self.malformed(
                self.input.offset(),
                "the trace is empty: \"traceEvents\" holds no events (was the profiler stopped \
                 before any step ran?)",
            ));
        }
        Ok(())
    }

    fn top_level_value(&mut self, key: &str) -> Result<(), TraceError> {
        match key {
            "traceEvents" => self.events_array(),
            "deviceProperties" => {
                let v: serde_json::Value = self.parse_owned("reading \"deviceProperties\"")?;
                self.sink.trace.meta.devices = top::devices(&v, &mut self.sink);
                Ok(())
            }
            "cupti_version" | "cuda_driver_version" => {
                let v: serde_json::Value = self.parse_owned("reading a version")?;
                let n = top::version(&v, key, &mut self.sink);
                let m = &mut self.sink.trace.meta;
                if key == "cupti_version" {
                    m.cupti_version = n;
                } else {
                    m.cuda_driver_version = n;
                }
                Ok(())
            }
            "distributedInfo" => {
                let v: serde_json::Value = self.parse_owned("reading \"distributedInfo\"")?;
                self.sink.trace.meta.distributed = top::distributed(&v, &mut self.sink);
                Ok(())
            }
            "INFO" | "WARNING" | "ERROR" => {
                // Kineto's own log lines for the capture (written when it logs to the trace).
                let v: serde_json::Value = self.parse_owned("reading Kineto's log lines")?;
                top::log_lines(&v, key, &mut self.sink);
                Ok(())
            }
            "cutrace" => {
                self.time_base_at = self.input.offset();
                let v: crate::model::ExportMeta = self.parse_owned("reading \"cutrace\"")?;
                v.restore(&mut self.sink.trace.meta);
                self.time_base_ns = v.time_base_ns.unwrap_or(0);
                Ok(())
            }
            _ => self
                .parse_owned::<IgnoredAny>("skipping a top-level value")
                .map(|_| ()),
        }
    }

    fn events_array(&mut self) -> Result<(), TraceError> {
        self.expect(b'[', "at the start of \"traceEvents\"")?;
        if self.peek()? == Some(b']') {
            self.input.pos += 1;
            return Ok(());
        }
        let mut need_separator = false;
        let mut stalled = false;
        loop {
            if need_separator {
                match self.peek()? {
                    Some(b',') => self.input.pos += 1,
                    Some(b']') => {
                        self.input.pos += 1;
                        return Ok(());
                    }
                    Some(c) => return Err(self.unexpected("',' or ']' between events", c)),
                    None => return Err(self.truncated("inside \"traceEvents\"")),
                }
                need_separator = false;
            }
            if self.peek()?.is_none() {
                return Err(self.truncated("inside \"traceEvents\""));
            }
            let short = self.input.end - self.input.pos < self.input.chunk;
            if (short || stalled) && !self.input.eof {
                self.input.refill().map_err(|e| self.io(e))?;
            } else if stalled {
                return Err(self.truncated("inside \"traceEvents\""));
            }
            let (end, used) = self.scan_block()?;
            self.input.pos += used;
            stalled = used == 0;
            match end {
                RunEnd::ArrayEnd => return Ok(()),
                RunEnd::NeedSeparator => need_separator = true,
                RunEnd::Stop | RunEnd::NeedEvent => {}
            }
        }
    }

    /// Scans the buffered block from the cursor (at an event), on several threads when the block
    /// can be cut (see `parallel`). Returns how the proven prefix ended and its length.
    fn scan_block(&mut self) -> Result<(RunEnd, usize), TraceError> {
        let base = self.input.offset();
        let block = self.input.rest();
        let cuts = if self.threads > 1 && block.len() >= self.parallel_min {
            parallel::cuts(block, 0, self.threads)
        } else {
            Vec::new()
        };
        let path = self.sink.path.clone();
        let string_bytes = self.sink.string_bytes;
        let main = &mut self.sink;
        let counts = &mut self.parts;
        let spares = &mut self.spares;
        // Part sinks are reused from block to block so their vectors keep their capacity.
        let mut sinks: Vec<Sink> = cuts
            .iter()
            .map(|_| {
                spares
                    .pop()
                    .unwrap_or_else(|| parallel::part_sink(&path, string_bytes))
            })
            .collect();
        // Part 0 (from the cursor to the first cut) goes into the main sink, part k into the
        // k-th part sink; each part's run is kept beside it.
        let mut runs: Vec<Option<std::thread::Result<parallel::Run>>> =
            (0..=cuts.len()).map(|_| None).collect();
        let mut parts: Vec<(&mut Sink, &mut Option<_>)> = std::iter::once(&mut *main)
            .chain(sinks.iter_mut())
            .zip(runs.iter_mut())
            .collect();
        crate::parallel::for_each(&mut parts, cuts.len() + 1, |k, (sink, run)| {
            let start = if k == 0 { 0 } else { cuts[k - 1] };
            let stop = cuts.get(k).copied();
            let mut scan = || parallel::run(block, start, stop, base, sink);
            // A speculative part that panics is thrown away, like one whose cut is not proven;
            // the first part is no speculation, and its panic is the importer's.
            **run = Some(if k == 0 {
                Ok(scan())
            } else {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(scan))
            });
        });
        drop(parts);
        let mut runs = runs.into_iter().map(|r| r.expect("every part was run"));
        let mut cur = match runs.next() {
            Some(Ok(r)) => r,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => unreachable!("there is always a first part"),
        };
        let total = sinks.len() as u64;
        let mut merged = 0;
        let mut proven = true;
        for (k, (part, mut sink)) in runs.zip(sinks).enumerate() {
            // A part counts only if the one before it ended exactly at its cut; otherwise it and
            // every part after it are thrown away (a panicking part too, and its sink).
            proven &= cur.error.is_none() && cur.end == RunEnd::Stop && cur.pos == cuts[k];
            let Ok(r) = part else {
                proven = false;
                continue;
            };
            if proven {
                main.absorb(&mut sink);
                merged += 1;
                cur = r;
            }
            sink.reset();
            spares.push(sink);
        }
        counts.0 += merged;
        counts.1 += total - merged;
        match cur.error {
            Some(e) => Err(e),
            None => Ok((cur.end, cur.pos)),
        }
    }
}

fn malformed(path: &Path, offset: u64, what: impl Into<String>) -> TraceError {
    TraceError::Malformed {
        path: path.to_path_buf(),
        offset,
        what: what.into(),
        hint: "expected a torch.profiler (Kineto) trace as written by export_chrome_trace".into(),
    }
}

impl Sink {
    fn malformed(&self, offset: u64, what: impl Into<String>) -> TraceError {
        malformed(&self.path, offset, what)
    }

    /// A kept string over the `string-bytes` limit is an error at its event.
    fn check_string(&self, s: &str, what: &str, at: u64) -> Result<(), TraceError> {
        if s.len() as u64 > self.string_bytes {
            return Err(TraceError::Limit {
                path: self.path.clone(),
                offset: at,
                what: format!("an event's {what} is {} bytes long", s.len()),
                limit: "string-bytes",
                value: self.string_bytes,
            });
        }
        Ok(())
    }

    fn skip(&mut self, label: &str) {
        match self.skipped.get_mut(label) {
            Some(n) => *n += 1,
            None => {
                self.skipped.insert(label.to_owned(), 1);
            }
        }
    }

    fn event<'a>(&mut self, ev: &Event<'a>, at: u64) -> Result<(), TraceError> {
        let cat_text = self.text(ev.cat, "event", "cat");
        // A modelled category in any ASCII case ("Kernel") is read as its lowercase spelling;
        // any other keeps its own, for the skipped count.
        let cat = scan::modelled(cat_text.as_ref()).unwrap_or(cat_text.as_ref());
        if !ev.ph.is_some_and(|p| p.bytes_eq("X")) {
            if ev.ph.is_some_and(|p| p.bytes_eq("i")) && cat == "user_annotation" {
                // An NVTX mark, as `cutrace convert --chrome` writes one.
                if let Some(raw) = ev.odd_name {
                    self.unread(cat, "name", raw);
                }
                let name = self.text(ev.name, cat, "name");
                return self.mark(ev, name.as_ref(), at);
            }
            // Labelled by phase: the scanner stops reading them after `ph`. An event skipped
            // on its category before its `ph` was read (keys in another order) is labelled by
            // its category.
            let label = match ev.ph {
                None if !cat.is_empty() => cat.to_owned(),
                None => "(no ph)".to_owned(),
                Some(_) => format!("ph={}", self.text(ev.ph, "event", "ph")),
            };
            self.skip(&label);
            return Ok(());
        }
        if cat == "cpu_op" && ev.name.is_some_and(|n| n.bytes_eq(scan::PARAM_COMMS)) {
            self.param_comms(ev, at);
            return Ok(());
        }
        if scan::MODELLED.contains(&cat) {
            // Older Kineto wrote negative durations (pytorch/kineto#646): such an event is
            // counted and left out, and the rest of the trace is read.
            if ev
                .dur
                .is_some_and(|d| unquote_b(d).trim_ascii_start().starts_with(b"-"))
            {
                self.skip(&format!("{cat} with negative dur"));
                return Ok(());
            }
            // A pid past 32 bits would wrap onto another process or GPU.
            if raw_u64(ev.pid).is_some_and(|p| p > u64::from(u32::MAX)) {
                self.skip(&format!("{cat} with pid over 32 bits"));
                return Ok(());
            }
        }
        // Names are decoded (and UTF-8 checked) only for events that are kept.
        if let (Some(raw), true) = (ev.odd_name, scan::MODELLED.contains(&cat)) {
            self.unread(cat, "name", raw);
        }
        let name_text = if scan::MODELLED.contains(&cat) {
            self.text(ev.name, cat, "name")
        } else {
            Cow::Borrowed("")
        };
        self.check_string(&name_text, "name", at)?;
        let name_str = name_text.as_ref();
        match cat {
            "kernel" => {
                // A kernel's device and times are what every number is computed from: they
                // must read, or the trace is refused at this event.
                let Some(g) = self.gpu_event(ev, at, cat, true)? else {
                    return Ok(());
                };
                // `cutrace convert --chrome` writes the demangled name and keeps CUPTI's in
                // "mangled": the model holds the name as CUPTI reported it.
                let mangled = ev
                    .args
                    .and_then(|a| a.mangled)
                    .map(|m| self.text(Some(m), cat, "mangled"));
                if let Some(m) = &mangled {
                    self.check_string(m, "mangled name", at)?;
                }
                let full = mangled.as_deref().unwrap_or(name_str);
                let name = self.strings.intern(full);
                if crate::comm::is_comm_kernel(full) {
                    self.comm_kernel(ev, &g);
                }
                self.trace.kernels.push(Kernel {
                    device: g.device,
                    context: g.context,
                    stream: g.stream,
                    correlation_id: g.correlation_id,
                    start_ns: g.start,
                    end_ns: g.end,
                    name,
                    launch: self.launches.intern(Launch {
                        grid: g.args.grid.unwrap_or_default(),
                        block: g.args.block.unwrap_or_default(),
                        registers_per_thread: g.args.registers.unwrap_or(0),
                        // Kineto writes a single "shared memory" figure; keep it as static.
                        static_shared_bytes: g.args.shared_memory.unwrap_or(0),
                        dynamic_shared_bytes: 0,
                        graph_id: g.args.graph_id.unwrap_or(0),
                    }),
                });
            }
            "gpu_memcpy" => {
                let Some(g) = self.gpu_event(ev, at, cat, false)? else {
                    return Ok(());
                };
                self.trace.memcpys.push(Memcpy {
                    kind: copy_kind(name_str),
                    bytes: g.args.bytes.unwrap_or(0),
                    device: g.device,
                    context: g.context,
                    stream: g.stream,
                    correlation_id: g.correlation_id,
                    start_ns: g.start,
                    end_ns: g.end,
                });
            }
            "gpu_memset" => {
                let Some(g) = self.gpu_event(ev, at, cat, false)? else {
                    return Ok(());
                };
                self.trace.memsets.push(Memset {
                    bytes: g.args.bytes.unwrap_or(0),
                    value: 0,
                    device: g.device,
                    context: g.context,
                    stream: g.stream,
                    correlation_id: g.correlation_id,
                    start_ns: g.start,
                    end_ns: g.end,
                });
            }
            "cuda_runtime" | "cuda_driver" => {
                let Some((start, end)) = self.soft_interval(ev, at, cat) else {
                    return Ok(());
                };
                let a = self.args(ev, cat);
                let name = self.strings.intern(name_str);
                self.trace.api_calls.push(ApiCall {
                    kind: if cat == "cuda_runtime" {
                        ApiKind::Runtime
                    } else {
                        ApiKind::Driver
                    },
                    name,
                    cbid: ApiCall::cbid_of(a.cbid.unwrap_or(0).into()),
                    process: raw_u64(ev.pid).unwrap_or(0) as u32,
                    thread: raw_u64(ev.tid).unwrap_or(0),
                    correlation_id: a.correlation.unwrap_or(0),
                    start_ns: start,
                    end_ns: end,
                    return_value: 0,
                });
            }
            "cuda_sync" => {
                let Some((start, end)) = self.soft_interval(ev, at, cat) else {
                    return Ok(());
                };
                let a = self.args(ev, cat);
                // Kineto names the kind in `name` and, since 2024, in args "cuda_sync_kind".
                let kind = sync_kind(name_str);
                self.trace.syncs.push(Synchronization {
                    kind,
                    device: a
                        .device
                        .or_else(|| raw_u64(ev.pid).map(|v| v as u32))
                        .unwrap_or(0),
                    context: a.context.unwrap_or(0),
                    // A device-wide synchronize has "stream": -1 (read as none).
                    stream: a.stream.filter(|_| kind != SyncKind::ContextSynchronize),
                    correlation_id: a.correlation.unwrap_or(0),
                    start_ns: start,
                    end_ns: end,
                });
            }
            "user_annotation" | "gpu_user_annotation" => {
                let Some((start, end)) = self.soft_interval(ev, at, cat) else {
                    return Ok(());
                };
                let name = self.strings.intern(name_str);
                let gpu = cat == "gpu_user_annotation";
                // A GPU range's device and stream: its args where given as integers (cutrace's
                // export writes them: its row may not be the stream's), else its pid and tid, as
                // torch writes. Nothing else in these args is read, so nothing there can fail.
                let arg = |v: Option<&[u8]>| v.and_then(|r| lenient_uint::<u64>(r).ok().flatten());
                let (a_device, a_stream) = match (&ev.args, gpu) {
                    (Some(a), true) => (arg(a.device), arg(a.stream)),
                    _ => (None, None),
                };
                let nvtx_domain = self.nvtx_domain(ev, at, cat)?;
                self.trace.ranges.push(NvtxRange {
                    domain: if gpu {
                        RangeDomain::Gpu
                    } else {
                        RangeDomain::Host
                    },
                    name,
                    process: if gpu {
                        0
                    } else {
                        raw_u64(ev.pid).unwrap_or(0) as u32
                    },
                    thread: if gpu { 0 } else { raw_u64(ev.tid).unwrap_or(0) },
                    device: if gpu {
                        a_device.or(raw_u64(ev.pid)).map(|v| v as u32)
                    } else {
                        None
                    },
                    stream: if gpu {
                        a_stream.or(raw_u64(ev.tid))
                    } else {
                        None
                    },
                    start_ns: start,
                    end_ns: end,
                    // Kineto's JSON does not carry the NVTX domain; cutrace's export does.
                    nvtx_domain,
                });
            }
            "overhead" => {
                let Some((start, end)) = self.soft_interval(ev, at, cat) else {
                    return Ok(());
                };
                let kind = self.strings.intern(name_str);
                self.trace.overheads.push(Overhead {
                    kind,
                    process: raw_u64(ev.pid).unwrap_or(0) as u32,
                    thread: raw_u64(ev.tid).unwrap_or(0),
                    start_ns: start,
                    end_ns: end,
                });
            }
            other => {
                let label = if other.is_empty() { "(no cat)" } else { other };
                self.skip(label);
            }
        }
        Ok(())
    }

    /// A string field's text. One that does not decode (bad UTF-8, a broken escape) is read
    /// lossily and counted under `cat` and `key`: no string decides whether a trace reads.
    fn text<'a>(&mut self, s: Option<scan::JStr<'a>>, cat: &str, key: &str) -> Cow<'a, str> {
        let Some(j) = s else {
            return Cow::Borrowed("");
        };
        match j.decode() {
            Ok(t) => t,
            Err(_) => {
                self.unread(cat, key, j.raw());
                Cow::Owned(String::from_utf8_lossy(j.raw()).into_owned())
            }
        }
    }

    /// Counts a value cutrace could not read in a field it does not compute from (the value is
    /// left unknown), by category and key; the first raw value of each is kept as an example.
    fn unread(&mut self, cat: &str, key: &str, raw: &[u8]) {
        let label = format!("{cat} \"{key}\"");
        let e = self
            .unread
            .entry(label)
            .or_insert_with(|| (0, example(raw)));
        e.0 += 1;
    }

    fn mark(&mut self, ev: &Event<'_>, name: &str, at: u64) -> Result<(), TraceError> {
        // A mark's time is not what any number is computed from: one that does not read is
        // counted and the mark left out.
        let ts_ns = ev.ts.and_then(|ts| {
            let exact = parse_us_exact(unquote_b(ts)).ok()?;
            let ns = exact.round_ns().ok()?;
            Some((ns, exact.is_whole()))
        });
        let Some((ts_ns, whole)) = ts_ns else {
            self.skip("user_annotation mark with unreadable ts");
            return Ok(());
        };
        self.rounded += u64::from(!whole);
        let name = self.strings.intern(name);
        let nvtx_domain = self.nvtx_domain(ev, at, "user_annotation")?;
        self.trace.marks.push(NvtxMark {
            name,
            process: raw_u64(ev.pid).unwrap_or(0) as u32,
            thread: raw_u64(ev.tid).unwrap_or(0),
            ts_ns,
            nvtx_domain,
        });
        Ok(())
    }

    /// The `"domain"` arg of an NVTX range or mark (`cutrace convert --chrome` writes it for
    /// ranges and marks outside NVTX's default domain), one shared name per domain.
    fn nvtx_domain(
        &mut self,
        ev: &Event<'_>,
        at: u64,
        cat: &str,
    ) -> Result<Option<std::sync::Arc<str>>, TraceError> {
        let Some(raw) = ev.args.as_ref().and_then(|a| a.domain) else {
            return Ok(None);
        };
        let d = self.text(Some(raw), cat, "domain");
        self.check_string(&d, "NVTX domain", at)?;
        if let Some(x) = self.domains.iter().find(|x| ***x == *d) {
            return Ok(Some(x.clone()));
        }
        let x: std::sync::Arc<str> = std::sync::Arc::from(&*d);
        self.domains.push(x.clone());
        Ok(Some(x))
    }

    /// An event's start and end in whole nanoseconds. `ts` and `dur` are read exactly; when
    /// either has digits below the nanosecond, the start and the exact end (`ts + dur`) are each
    /// rounded to the nearest ns, ties to even, and counted. Rounding both ends (rather than
    /// `dur`) keeps the order of every two times, so touching events still touch.
    fn interval(&mut self, ev: &Event<'_>, at: u64) -> Result<(Ns, Ns), TraceError> {
        let what = cat_or_event(ev);
        let ts = ev
            .ts
            .ok_or_else(|| self.malformed(at, format!("a \"{what}\" event has no \"ts\"")))?;
        let bad_ts = |e: TimeParseError| {
            self.malformed(
                at,
                format!("\"ts\" of a \"{what}\" event is {e}: {}", raw_text(ts)),
            )
        };
        let start = parse_us_exact(unquote_b(ts)).map_err(bad_ts)?;
        let start_ns = start.round_ns().map_err(bad_ts)?;
        let dur = match ev.dur {
            Some(d) => parse_us_exact(unquote_b(d)).map_err(|e| {
                self.malformed(
                    at,
                    format!("\"dur\" of a \"{what}\" event is {e}: {}", raw_text(d)),
                )
            })?,
            None => return Err(self.malformed(at, format!("a \"{what}\" event has no \"dur\""))),
        };
        let overflow = || self.malformed(at, "\"ts\" + \"dur\" overflows 64-bit nanoseconds");
        let end_ns = start
            .checked_add(dur)
            .ok_or_else(overflow)?
            .round_ns()
            .map_err(|_| overflow())?;
        self.rounded += u64::from(!start.is_whole()) + u64::from(!dur.is_whole());
        Ok((start_ns, end_ns))
    }

    /// [`Sink::interval`] for an event other than a kernel: times that do not read leave the
    /// event out, counted as skipped, and the rest of the trace is read.
    fn soft_interval(&mut self, ev: &Event<'_>, at: u64, cat: &str) -> Option<(Ns, Ns)> {
        match self.interval(ev, at) {
            Ok(v) => Some(v),
            Err(_) => {
                self.skip(&format!("{cat} with unreadable ts/dur"));
                None
            }
        }
    }

    /// Where and when a device-side event ran: `args` first, then Kineto's `pid` (device) and
    /// `tid` (stream) lanes. `strict` (kernels): times or a device that do not read refuse the
    /// trace at this event; otherwise (copies, memsets) the event is counted and left out
    /// (`None`), and a device that does not read falls back to the `pid` lane.
    fn gpu_event(
        &mut self,
        ev: &Event<'_>,
        at: u64,
        cat: &str,
        strict: bool,
    ) -> Result<Option<GpuEvent>, TraceError> {
        let (start, end) = if strict {
            self.interval(ev, at)?
        } else {
            match self.soft_interval(ev, at, cat) {
                Some(v) => v,
                None => return Ok(None),
            }
        };
        let args = self.args(ev, cat);
        let raw_device = ev
            .args
            .as_ref()
            .and_then(|a| a.device)
            .filter(|r| *r != b"null");
        if strict && args.device.is_none() {
            if let Some(raw) = raw_device {
                return Err(self.malformed(
                    at,
                    format!(
                        "the \"device\" of a \"{}\" event should be a non-negative integer (or a \
                         hex string such as \"0x0\"), found {}: the kernel cannot be placed on \
                         a GPU",
                        cat_or_event(ev),
                        raw_text(raw)
                    ),
                ));
            }
        }
        Ok(Some(GpuEvent {
            start,
            end,
            device: args
                .device
                .or_else(|| raw_u64(ev.pid).and_then(|v| u32::try_from(v).ok()))
                .unwrap_or(0),
            context: args.context.unwrap_or(0),
            stream: args.stream.or_else(|| raw_u64(ev.tid)).unwrap_or(0),
            correlation_id: args.correlation.unwrap_or(0),
            args,
        }))
    }

    /// The typed args of a GPU or API event; values that do not read are counted (see
    /// [`typed`]). A negative stream on a `cuda_sync` event is Kineto's "no stream" (a
    /// device-wide synchronize writes -1): read as none, not counted.
    fn args(&mut self, ev: &Event<'_>, cat: &str) -> GpuArgs {
        let Some(a) = &ev.args else {
            return GpuArgs::default();
        };
        let mut unread = Vec::new();
        let g = typed(a, &mut unread);
        for (key, raw) in unread {
            if cat == "cuda_sync" && key == "stream" && raw.trim_ascii().starts_with(b"-") {
                continue;
            }
            self.unread(cat, key, raw);
        }
        g
    }
}

/// The start of a raw value, for a note (at most 40 bytes, lossily decoded).
fn example(raw: &[u8]) -> String {
    let cut = &raw[..raw.len().min(40)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if raw.len() > 40 {
        s.push('…');
    }
    s
}

/// Why `parse` in `with_value` failed.
enum ParseFail {
    Json(serde_json::Error, u64),
    Trace(TraceError),
}

impl From<TraceError> for ParseFail {
    fn from(e: TraceError) -> Self {
        ParseFail::Trace(e)
    }
}

/// Deserializes one value from the front of `slice`; `Ok(None)` when the slice ends inside it
/// (or right after it, where a longer read might extend a number) and more input may follow.
fn step<'de, T: Deserialize<'de>>(
    slice: &'de [u8],
    eof: bool,
    start: u64,
) -> Result<Option<(T, usize)>, ParseFail> {
    let mut stream = serde_json::Deserializer::from_slice(slice).into_iter::<T>();
    let parsed = stream.next();
    let used = stream.byte_offset();
    match parsed {
        Some(Ok(v)) if used < slice.len() || eof => Ok(Some((v, used))),
        Some(Err(e)) if !e.is_eof() => {
            let rel = line_col_to_offset(slice, e.line(), e.column());
            // A number cut by the chunk boundary ("5153875767895." then nothing) is reported as
            // an invalid number, not as end of input: near the end, ask for more input first.
            if !eof && rel + 64 >= slice.len() as u64 {
                return Ok(None);
            }
            Err(ParseFail::Json(e, start + rel))
        }
        _ => Ok(None),
    }
}

fn cat_or_event(ev: &Event<'_>) -> String {
    ev.cat
        .and_then(|c| c.decode().ok())
        .map(|c| c.into_owned())
        .unwrap_or_else(|| "event".into())
}

/// An integer `pid`/`tid` (decimal, or a hex string as on ROCm); Kineto also writes strings such
/// as "Spans" there, which are not ids.
fn raw_u64(v: Option<&[u8]>) -> Option<u64> {
    v.and_then(|r| lenient_uint(r).ok().flatten())
}

fn unquote_b(b: &[u8]) -> &[u8] {
    b.strip_prefix(b"\"")
        .and_then(|b| b.strip_suffix(b"\""))
        .unwrap_or(b)
}

/// A plain non-negative decimal integer that fits `T`, straight from bytes.
fn parse_uint<T: TryFrom<u64>>(b: &[u8]) -> Option<T> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    T::try_from(v).ok()
}

fn raw_text(v: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(v)
}

/// serde_json reports 1-based line and column; turn them back into a byte offset in `slice`.
fn line_col_to_offset(slice: &[u8], line: usize, column: usize) -> u64 {
    let mut offset = 0usize;
    let mut l = 1;
    while l < line {
        match slice[offset..].iter().position(|&c| c == b'\n') {
            Some(p) => offset += p + 1,
            None => break,
        }
        l += 1;
    }
    (offset + column.saturating_sub(1)).min(slice.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import_with_chunk(bytes: &[u8], chunk: usize) -> Result<Trace, TraceError> {
        import_with(bytes, chunk, 1)
    }

    fn import_with(bytes: &[u8], chunk: usize, threads: usize) -> Result<Trace, TraceError> {
        import_counting(bytes, chunk, threads).map(|(t, _)| t)
    }

    /// The trace, and how many speculative parts were merged and thrown away.
    fn import_counting(
        bytes: &[u8],
        chunk: usize,
        threads: usize,
    ) -> Result<(Trace, (u64, u64)), TraceError> {
        let mut imp = Importer::new(Path::new("mem.json"), bytes, chunk, threads);
        imp.parallel_min = 0;
        imp.run()?;
        let parts = imp.parts;
        Ok((imp.finish()?, parts))
    }

    fn fixture(name: &str) -> Vec<u8> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/kineto")
            .join(name);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// Scanning on several threads gives exactly the sequential trace, for any block size.
    #[test]
    fn parallel_scan_equals_sequential_on_real_traces() {
        for name in [
            "launch_bound.json.gz",
            "train_step.json.gz",
            "copy_overlap.json.gz",
        ] {
            let bytes = fixture(name);
            let seq = import_with(&bytes, 1 << 30, 1).unwrap();
            for threads in [2, 3, 8] {
                for chunk in [4 << 10, 64 << 10, 1 << 30] {
                    let (par, (merged, _)) = import_counting(&bytes, chunk, threads).unwrap();
                    assert_eq!(par, seq, "{name}, {threads} threads, chunk {chunk}");
                    assert!(merged > 0, "{name}: no part was scanned in parallel");
                }
            }
        }
    }

    /// Text that looks like an event start (`,` newline `{`) inside an event's args must not
    /// fool the cut: the speculative part is thrown away and the result is still sequential's.
    #[test]
    fn false_cuts_inside_events_are_detected() {
        let mut events = Vec::new();
        for i in 0..300 {
            events.push(format!(
                "  {{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k{}\", \"ts\": {}.5, \"dur\": 1,
    \"args\": {{\"device\": 0, \"stream\": 7, \"correlation\": {i}, \"nested\": [1,
  {{\"a\": [2,
  {{\"b\": 3}}]}}]}}}}",
                i % 7,
                1000 + i
            ));
        }
        let json = format!("{{\"traceEvents\": [\n{}\n]}}", events.join(",\n"));
        let seq = import_with(json.as_bytes(), 1 << 30, 1).unwrap();
        assert_eq!(seq.kernels.len(), 300);
        for threads in [2, 4, 7] {
            for chunk in [1 << 10, 8 << 10, 1 << 30] {
                let (par, (_, rejected)) =
                    import_counting(json.as_bytes(), chunk, threads).unwrap();
                assert_eq!(par, seq, "{threads} threads, chunk {chunk}");
                assert!(rejected > 0, "no false cut was tried");
            }
        }
        // An error after a cut is reported exactly as the sequential scan reports it.
        let bad = json.replacen(
            "\"device\": 0, \"stream\": 7, \"correlation\": 250,",
            "\"device\": \"x\", \"stream\": 7, \"correlation\": 250,",
            1,
        );
        let seq_err = import_with(bad.as_bytes(), 1 << 30, 1)
            .unwrap_err()
            .to_string();
        for threads in [2, 4, 7] {
            let par_err = import_with(bad.as_bytes(), 8 << 10, threads)
                .unwrap_err()
                .to_string();
            assert_eq!(par_err, seq_err);
        }
    }

    /// What `cutrace convert --chrome` adds to Kineto's shape reads back: CUPTI's kernel name in
    /// args "mangled", NVTX marks as `user_annotation` instant events, and the "cutrace" member's
    /// facts about the exported trace. Other instant events are still skipped.
    #[test]
    fn cutrace_exports_read_back() {
        let json = r#"{"cutrace": {"complete": false, "incomplete_reason": "no TAIL chunk",
            "dropped_by_cupti": 3, "dropped_by_recorder": 4, "host": "h", "pid": 7,
            "notes": [{"pid": 7, "part": "h-7.cutrace", "text": "a note"}], "future": [1]},
          "traceEvents": [
          {"ph": "X", "cat": "kernel", "name": "foo(int)", "pid": 0, "tid": 7, "ts": 1.5,
           "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 1, "mangled": "_Z3fooi"}},
          {"ph": "X", "cat": "kernel", "name": "bar", "pid": 0, "tid": 7, "ts": 4, "dur": 1,
           "args": {"device": 0, "stream": 7, "correlation": 2}},
          {"ph": "i", "cat": "user_annotation", "name": "checkpoint", "pid": 7, "tid": 9,
           "ts": 5.001, "s": "t"},
          {"name": "Iteration Start", "ph": "i", "s": "g", "pid": "Traces", "tid": "T", "ts": 1}
        ]}"#;
        let t = import_with(json.as_bytes(), 1 << 20, 1).unwrap();
        assert_eq!(t.str(t.kernels[0].name), "_Z3fooi");
        assert_eq!(t.str(t.kernels[1].name), "bar");
        assert_eq!(t.marks.len(), 1);
        let m = &t.marks[0];
        assert_eq!(
            (t.str(m.name), m.process, m.thread, m.ts_ns),
            ("checkpoint", 7, 9, 5_001)
        );
        assert!(!t.meta.complete);
        assert_eq!(t.meta.incomplete_reason.as_deref(), Some("no TAIL chunk"));
        assert_eq!(
            (t.meta.dropped_by_cupti, t.meta.dropped_by_recorder),
            (3, 4)
        );
        assert_eq!((t.meta.host.as_deref(), t.meta.pid), (Some("h"), Some(7)));
        assert_eq!(t.meta.notes[0].text, "a note");
        assert_eq!(t.meta.skipped_events, vec![("ph=i".to_owned(), 1)]);
        // Marks found by a part scanned on another thread keep their names.
        let mut events = String::new();
        for i in 0..400 {
            events.push_str(&format!(
                ",\n{{\"ph\": \"i\", \"cat\": \"user_annotation\", \"name\": \"m{}\", \
                 \"pid\": 1, \"tid\": 1, \"ts\": {i}}}",
                i % 5
            ));
        }
        let json = format!("{{\"traceEvents\": [{}]}}", &events[1..]);
        let seq = import_with(json.as_bytes(), 1 << 20, 1).unwrap();
        let par = import_with(json.as_bytes(), 2 << 10, 4).unwrap();
        assert_eq!(seq.marks.len(), 400);
        let names = |t: &Trace| {
            t.marks
                .iter()
                .map(|m| t.str(m.name).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&par), names(&seq));
    }

    /// Times rounded on other threads are counted like the sequential scan counts them, and
    /// capitalised categories are read there too.
    #[test]
    fn parallel_scan_counts_rounded_times_and_reads_any_case() {
        let mut events = Vec::new();
        for i in 0..300 {
            events.push(format!(
                "  {{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"k\", \"ts\": {}.{}, \"dur\": 1,
    \"args\": {{\"device\": 0, \"stream\": 7, \"correlation\": {i}}}}}",
                if i % 2 == 0 { "Kernel" } else { "KERNEL" },
                1000 + i,
                if i % 3 == 0 { "0004" } else { "5" }
            ));
        }
        let json = format!("{{\"traceEvents\": [\n{}\n]}}", events.join(",\n"));
        let seq = import_with(json.as_bytes(), 1 << 30, 1).unwrap();
        assert_eq!(seq.kernels.len(), 300);
        assert!(seq.meta.notes[0].text.starts_with("100 "));
        for threads in [2, 4] {
            let (par, (merged, _)) = import_counting(json.as_bytes(), 2 << 10, threads).unwrap();
            assert!(merged > 0);
            assert_eq!(par, seq, "{threads} threads");
        }
    }

    /// Values cut by a chunk boundary at every possible position must parse the same as whole.
    #[test]
    fn every_chunk_boundary_position_gives_the_same_trace() {
        let events: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    r#"{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7,
                    "ts": 5153875767895.{:03}, "dur": 12.5, "args": {{"device": 0, "stream": 7,
                    "correlation": {}, "grid": [1, 2, 3]}}}}"#,
                    i * 7,
                    100 + i
                )
            })
            .collect();
        let json = format!(
            r#"{{"cupti_version": 130001, "traceEvents": [{}]}}"#,
            events.join(", ")
        );
        let whole = import_with_chunk(json.as_bytes(), 1 << 20).unwrap();
        assert_eq!(whole.kernels.len(), 40);
        for chunk in 1..=97 {
            let t = import_with_chunk(json.as_bytes(), chunk)
                .unwrap_or_else(|e| panic!("chunk {chunk}: {e}"));
            assert_eq!(t, whole, "chunk size {chunk}");
        }
    }
}

#[cfg(test)]
mod gpu_range_tests {
    use super::*;

    fn import(text: &str) -> Trace {
        let mut imp = Importer::new(Path::new("mem.json"), text.as_bytes(), 1 << 30, 1);
        imp.run().unwrap();
        imp.finish().unwrap()
    }

    /// A GPU range's device and stream come from its args when they are integers (cutrace's
    /// export), else from pid/tid (torch); args that are not integers are ignored, never fatal.
    #[test]
    fn gpu_range_stream_from_args_else_tid() {
        let ev = |args: &str| {
            format!(
                "{{\"traceEvents\": [{{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \
                 \"name\": \"r\", \"pid\": 1, \"tid\": 7, \"ts\": 10.0, \"dur\": 5.0, \
                 \"args\": {args}}}]}}"
            )
        };
        let r = |args: &str| {
            let t = import(&ev(args));
            (t.ranges[0].device, t.ranges[0].stream)
        };
        assert_eq!(r("{\"External id\": 3}"), (Some(1), Some(7)));
        assert_eq!(r("{\"device\": 0, \"stream\": 13}"), (Some(0), Some(13)));
        assert_eq!(
            r("{\"device\": -1, \"stream\": \"x13\"}"),
            (Some(1), Some(7))
        );
        // A decimal or hex string (ROCm) reads as the number.
        assert_eq!(
            r("{\"device\": \"0x0\", \"stream\": \"13\"}"),
            (Some(0), Some(13))
        );
        assert_eq!(
            r("{\"stream\": 13, \"bytes\": \"lots\"}"),
            (Some(1), Some(13))
        );
    }
    /// Each kind of value that does not read is counted by category and key, with a note
    /// naming its first value; the events themselves are read.
    #[test]
    fn values_that_do_not_read_are_counted_never_fatal() {
        let t = import(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": 7, "pid": 0, "tid": 7, "ts": 1, "dur": 2,
             "args": {"device": "0x1", "stream": -3, "correlation": "c9", "grid": [1, 2],
                      "mangled": 5}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 9,
             "ts": 4, "dur": 1, "args": {"device": -1, "stream": "0xA", "bytes": 1.5}},
            {"ph": "X", "cat": "gpu_memset", "name": "Memset", "pid": 0, "tid": 9,
             "ts": "later", "dur": 1},
            {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 1,
             "ts": 6, "dur": 1, "args": {"stream": -1, "device": 0}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": [],
             "dur": {}},
            {"ph": ["X"], "cat": "kernel", "ts": 1, "dur": 1}
            ], "cupti_version": "new", "deviceProperties": {"id": 0}}"#,
        );
        let k = &t.kernels[0];
        // Hex device reads; the stream falls back to the tid lane; the grid and correlation
        // are unknown.
        assert_eq!(
            (k.device, k.stream, k.correlation_id, t.launch(k).grid),
            (1, 7, 0, [0; 3])
        );
        assert_eq!(t.str(k.name), "");
        let m = &t.memcpys[0];
        assert_eq!((m.device, m.stream, m.bytes), (0, 10, 0));
        assert!(t.memsets.is_empty());
        assert_eq!(t.syncs[0].stream, None);
        let unread: std::collections::BTreeMap<&str, u64> = t
            .meta
            .unread_values
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(
            unread,
            [
                ("gpu_memcpy \"bytes\"", 1),
                ("gpu_memcpy \"device\"", 1),
                ("kernel \"correlation\"", 1),
                ("kernel \"grid\"", 1),
                ("kernel \"name\"", 1),
                ("kernel \"stream\"", 1),
                ("top-level \"cupti_version\"", 1),
                ("top-level \"deviceProperties\"", 1),
            ]
            .into_iter()
            .collect()
        );
        let skipped: std::collections::BTreeMap<&str, u64> = t
            .meta
            .skipped_events
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(skipped.get("gpu_memset with unreadable ts/dur"), Some(&1));
        assert_eq!(skipped.get("cpu_op"), Some(&1));
        // The kernel whose `ph` is not a string is not read as a kernel, and is counted.
        assert_eq!(t.kernels.len(), 1);
        assert_eq!(skipped.get("(no ph)"), Some(&1));
        assert!(t.meta.notes.iter().any(|n| n.text
            == "1 kernel \"stream\" value did not read (first: -3) and was left unknown; \
                cutrace does not compute from it, so the rest was read"));
    }
}
