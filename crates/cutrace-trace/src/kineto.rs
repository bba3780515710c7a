//! Kineto (torch.profiler `export_chrome_trace`) JSON import: streaming, exact timestamps.
//!
//! The file is read in chunks (`input.rs`); each element of `traceEvents` is cut out and its
//! fields found by a tokenizer (`scan.rs`), borrowed from the chunk, so memory is the size of the
//! records kept, not of the JSON; blocks are cut on several threads by speculation
//! (`parallel.rs`). Each event then goes to the handler of its category (`handlers.rs`: kernels,
//! copies, memsets, API calls, synchronizations, ranges, marks, overhead; collectives in
//! `comms.rs`), which share one sink of records and counts (`sink.rs`) and one typed view of
//! `args` (`args.rs`). The top-level members other than `traceEvents` are read here and in
//! `top.rs`. The names of categories and arguments are one vocabulary (`vocab.rs`) that
//! `cutrace convert --chrome` writes. `ts` and `dur` are read as decimal text and converted to
//! integer nanoseconds exactly (see `timeparse`).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

use crate::error::TraceError;
use crate::limits::{Limits, ReadOptions};
use crate::model::*;
use crate::progress::Progress;

mod args;
mod comms;
mod handlers;
mod input;
mod parallel;
mod scan;
mod sink;
mod top;
pub mod vocab;
use args::{lenient_uint, raw_u64};
use input::{CountingReader, GzMembers, Input};
use parallel::RunEnd;
use sink::{GpuEvent, Sink};

const CHUNK: usize = 4 << 20;
/// Blocks smaller than this are scanned on one thread (spawning costs more than it saves).
const PARALLEL_MIN: usize = 256 << 10;
const PROGRESS_EVERY: u64 = 16 << 20;

/// Imports a Kineto JSON trace (`.json` or gzip-compressed) with the default [`Limits`], on one
/// thread per core, up to 8 ([`crate::limits::import_threads`]).
pub fn import(path: &Path, progress: Progress<'_>) -> Result<Trace, TraceError> {
    import_on_threads(path, progress, None)
}

/// [`import`] on `threads` threads (1 = sequential; `None`: one per core, up to 8).
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
    let threads = crate::limits::import_threads(opts.import_threads);
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
    /// Whether the `"cutrace"` member was read: the file is cutrace's own export, whose notes
    /// it restored (the collective annotations' note among them, not to be added twice).
    from_export: bool,
    /// Where the `"cutrace"` member was, for an error about its `time_base_ns`.
    time_base_at: u64,
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
            from_export: false,
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
        // An export writes its collectives on their kernels, and the source's note with them;
        // its `record_param_comms` ops are host ops like any other.
        if unjoined > 0 && !self.from_export {
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

    fn unsupported(&self, what: String) -> TraceError {
        TraceError::Unsupported {
            path: self.sink.path.clone(),
            what,
        }
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
                    let mut first = true;
                    loop {
                        let key: String = self.parse_owned("reading a top-level key")?;
                        if std::mem::take(&mut first) {
                            if let Some(what) = top::other_format(&key) {
                                return Err(self.unsupported(what));
                            }
                        }
                        self.expect(b':', "after a top-level key")?;
                        match self.top_level_value(&key) {
                            Err(TraceError::Limit {
                                limit: "event-bytes",
                                value,
                                ..
                            }) if !saw_events && !top::is_kineto_member(&key) => {
                                return Err(self.unsupported(top::no_events_before(&key, value)))
                            }
                            r => r?,
                        }
                        saw_events |= key == vocab::top::TRACE_EVENTS;
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
                    return Err(self.unsupported(
                        "this JSON is not a Kineto/Chrome trace: it has no \"traceEvents\" \
                         array; fix: give torch.profiler's export_chrome_trace output"
                            .into(),
                    ));
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
        use vocab::top::{
            CUDA_DRIVER_VERSION, CUPTI_VERSION, CUTRACE, DEVICE_PROPERTIES, DISTRIBUTED_INFO,
            LOG_ERROR, LOG_INFO, LOG_WARNING, TRACE_EVENTS,
        };
        match key {
            TRACE_EVENTS => self.events_array(),
            DEVICE_PROPERTIES => {
                let v: serde_json::Value = self.parse_owned("reading \"deviceProperties\"")?;
                self.sink.trace.meta.devices = top::devices(&v, &mut self.sink);
                Ok(())
            }
            CUPTI_VERSION | CUDA_DRIVER_VERSION => {
                let v: serde_json::Value = self.parse_owned("reading a version")?;
                let n = top::version(&v, key, &mut self.sink);
                let m = &mut self.sink.trace.meta;
                if key == CUPTI_VERSION {
                    m.cupti_version = n;
                } else {
                    m.cuda_driver_version = n;
                }
                Ok(())
            }
            DISTRIBUTED_INFO => {
                let v: serde_json::Value = self.parse_owned("reading \"distributedInfo\"")?;
                self.sink.trace.meta.distributed = top::distributed(&v, &mut self.sink);
                Ok(())
            }
            LOG_INFO | LOG_WARNING | LOG_ERROR => {
                // Kineto's own log lines for the capture (written when it logs to the trace).
                let v: serde_json::Value = self.parse_owned("reading Kineto's log lines")?;
                top::log_lines(&v, key, &mut self.sink);
                Ok(())
            }
            CUTRACE => {
                self.time_base_at = self.input.offset();
                let v: crate::model::ExportMeta = self.parse_owned("reading \"cutrace\"")?;
                v.restore(&mut self.sink.trace.meta);
                self.from_export = true;
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
    /// torch.profiler's `[memory]` events (`profile_memory=True`) become allocations and frees
    /// with the allocator's totals; CPU memory (`Device Id` -1) is device 0 of the CPU; a value
    /// that does not read is left unknown and counted; other instant events are still skipped.
    #[test]
    fn memory_events_read_as_allocations_and_frees() {
        let json = r#"{"traceEvents": [
          {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 5,
           "tid": 6, "ts": 10.5, "args": {"Ev Idx": 1, "Device Type": 1, "Device Id": 2,
           "Addr": 139926520725504, "Bytes": 5242880, "Total Allocated": 5435638784,
           "Total Reserved": 12782141440}},
          {"name": "[memory]", "ph": "i", "cat": "cpu_instant_event", "pid": 5, "tid": 6,
           "ts": 11.0001, "args": {"Device Type": 1, "Device Id": 2, "Addr": 139926520725504,
           "Bytes": -5242880, "Total Allocated": 5430395904, "Total Reserved": 12782141440}},
          {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 5,
           "tid": 7, "ts": 12, "args": {"Device Type": 0, "Device Id": -1, "Addr": 64,
           "Bytes": "x", "Total Allocated": -3}},
          {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 5,
           "tid": 7, "ts": 13, "args": {"Device Type": "cuda", "Bytes": 4}},
          {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": 5,
           "tid": 7, "ts": 14, "args": {"Bytes": 4}}
        ]}"#;
        let t = import_with(json.as_bytes(), 1 << 20, 1).unwrap();
        assert_eq!(t.memory.len(), 3, "{:?}", t.memory);
        let a = t.memory[0];
        assert_eq!(
            (a.ts_ns, a.process, a.thread, a.place, a.device, a.op),
            (10_500, 5, 6, MemoryPlace::Gpu, 2, MemoryOp::Alloc)
        );
        assert_eq!(
            (a.address, a.bytes, a.total_allocated, a.total_reserved),
            (
                Some(139926520725504),
                Some(5242880),
                Some(5435638784),
                Some(12782141440)
            )
        );
        assert_eq!(a.level, MemoryLevel::Framework);
        let f = t.memory[1];
        assert_eq!(
            (f.ts_ns, f.op, f.bytes),
            (11_000, MemoryOp::Free, Some(5242880))
        );
        let u = t.memory[2];
        assert_eq!(
            (u.place, u.device, u.op, u.bytes, u.total_allocated),
            (MemoryPlace::Cpu, 0, MemoryOp::Unknown, None, None)
        );
        assert_eq!(
            t.meta.unread_values,
            vec![
                ("cpu_instant_event \"Bytes\"".to_owned(), 1),
                ("cpu_instant_event \"Total Allocated\"".to_owned(), 1)
            ]
        );
        assert_eq!(
            t.meta.skipped_events,
            vec![
                ("[memory] with unreadable Device Type".to_owned(), 1),
                ("ph=i".to_owned(), 1)
            ]
        );
        // The rounded ts (11.0001 µs) is counted as any other.
        assert!(t.meta.notes.iter().any(|n| n.text.contains("rounded")));
        // Parts scanned on other threads give the same events in the same order.
        let mut events = String::new();
        for i in 0..600u64 {
            let bytes = if i % 3 == 2 { -512 } else { 512 };
            events.push_str(&format!(
                ",\n{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \
                 \"name\": \"[memory]\", \"pid\": 1, \"tid\": {}, \"ts\": {i}, \"args\": \
                 {{\"Device Type\": 1, \"Device Id\": 0, \"Addr\": {}, \"Bytes\": {bytes}}}}}",
                i % 4,
                i / 3
            ));
        }
        let json = format!("{{\"traceEvents\": [{}]}}", &events[1..]);
        let seq = import_with(json.as_bytes(), 1 << 20, 1).unwrap();
        let par = import_with(json.as_bytes(), 1 << 12, 4).unwrap();
        assert_eq!(seq.memory.len(), 600);
        assert_eq!(seq.memory, par.memory);
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
    /// torch.profiler's event waits name the stream the event was recorded on and the
    /// `cudaEventRecord` call that recorded it; -1 is unknown (read as none, not as unread).
    #[test]
    fn event_waits_keep_the_events_stream_and_record_call() {
        let t = import(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 24,
             "ts": 10, "dur": 2, "args": {"cuda_sync_kind": "Stream Wait Event",
             "wait_on_stream": 20, "wait_on_cuda_event_record_corr_id": 1385,
             "wait_on_cuda_event_id": 19, "stream": 24, "correlation": 1389, "device": 0,
             "context": 1}},
            {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": -1,
             "ts": 20, "dur": 4, "args": {"cuda_sync_kind": "Event Sync", "wait_on_stream": -1,
             "wait_on_cuda_event_record_corr_id": -1, "wait_on_cuda_event_id": 9,
             "stream": -1, "correlation": 24, "device": 0, "context": 1}}
            ]}"#,
        );
        let w = &t.syncs[0];
        assert_eq!(
            (
                w.kind,
                w.stream,
                w.wait_on_stream,
                w.event_record_correlation
            ),
            (SyncKind::StreamWaitEvent, Some(24), Some(20), Some(1385))
        );
        let e = &t.syncs[1];
        assert_eq!(
            (
                e.kind,
                e.stream,
                e.wait_on_stream,
                e.event_record_correlation
            ),
            (SyncKind::EventSynchronize, None, None, None)
        );
        assert!(
            t.meta.unread_values.is_empty(),
            "{:?}",
            t.meta.unread_values
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
        // A host op is read now: one whose times do not read is counted and left out.
        assert_eq!(skipped.get("cpu_op with unreadable ts/dur"), Some(&1));
        assert!(t.host_ops.is_empty());
        // The kernel whose `ph` is not a string is not read as a kernel, and is counted.
        assert_eq!(t.kernels.len(), 1);
        assert_eq!(skipped.get("(no ph)"), Some(&1));
        assert!(t.meta.notes.iter().any(|n| n.text
            == "1 kernel \"stream\" value did not read (first: -3) and was left unknown; \
                cutrace does not compute from it, so the rest was read"));
    }
}
