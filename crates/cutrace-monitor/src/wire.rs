//! The message an injected process sends to the monitor: a versioned, length-prefixed frame
//! holding a hello (who the process is) or a batch (what its GPUs did since the last batch).
//!
//! A frame is `MAGIC` (4 bytes), the version (u16), the kind (u16), the payload's length (u32)
//! and the payload; every integer little-endian. Strings are a u32 length and UTF-8 bytes; lists
//! a u32 count. The decoder is bounded: a frame states at most [`MAX_PAYLOAD`] bytes, a string at
//! most [`MAX_STR`], and every count is checked against the bytes left before anything is
//! allocated, so garbage is an error value, never a panic or a large allocation. A stream that
//! fails once cannot be resynchronised: the monitor closes it.

use std::io::Read;

use cutrace_trace::Ns;

/// First bytes of every frame.
pub const MAGIC: [u8; 4] = *b"CTMN";
/// The frame layout's version; a monitor refuses any other.
pub const VERSION: u16 = 2;
/// Bytes of a frame's header.
pub const HEADER_LEN: usize = 12;
/// Most bytes one frame's payload may hold (a batch over this is split by the sender).
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Most bytes of one string (a command line is cut to this by the sender).
pub const MAX_STR: usize = 4096;
/// Most devices one batch may name.
pub const MAX_DEVICES: usize = 64;
/// Upper bounds (ns) of the launch-to-start latency histogram's buckets; the last bucket,
/// `+Inf`, is implied.
pub const LATENCY_BOUNDS_NS: [Ns; 12] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];
/// Buckets of the histogram: one per bound and `+Inf`.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

const KIND_HELLO: u16 = 1;
const KIND_BATCH: u16 = 2;
const KIND_UNTRACED: u16 = 3;
const KIND_CAPTURE: u16 = 4;
const KIND_CAPTURE_REQUEST: u16 = 5;
const KIND_CAPTURE_REPLY: u16 = 6;

/// Most seconds one capture may last.
pub const MAX_CAPTURE_SECONDS: u32 = 3600;

/// Monitor → process: write an ordinary trace part into `dir` for the next `seconds`, or, with
/// `last`, of the records it kept from just before (its flight recorder).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capture {
    pub dir: String,
    pub seconds: u32,
    pub last: bool,
}

/// `cutrace capture` → monitor: have process `pid` (every process of the requester's user, when
/// `None`) capture.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureRequest {
    pub pid: Option<u32>,
    pub capture: Capture,
}

/// Monitor → `cutrace capture`: the processes told, and why the others (named) were not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureReply {
    pub told: Vec<u32>,
    pub refused: Option<String>,
}

/// Who a process is, sent once, first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hello {
    pub pid: u32,
    pub host: String,
    /// The program's name (its `comm`, or its first argument), never its arguments.
    pub command: String,
    /// From the launcher's environment (`RANK`, `LOCAL_RANK`), when set.
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    /// The job (`SLURM_JOB_ID`, else torchrun's run id), when known.
    pub job: Option<String>,
}

/// What a process's GPUs did since its previous batch. Counts and runs are this batch's; the
/// `*_total` fields and `traced_ns` are the process's totals so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    /// 1 for the first batch, rising by one each batch sent (a gap means batches were lost).
    pub seq: u64,
    /// How long tracing has been on in this process.
    pub traced_ns: Ns,
    /// Records CUPTI dropped (its buffers were full), in total.
    pub dropped_by_cupti_total: u64,
    /// Records cutrace folded but could not send (the monitor was slow or gone), in total.
    pub dropped_by_cutrace_total: u64,
    /// Kernel launches (the calls) whose kernel has not completed, now.
    pub launches_pending: u64,
    /// How long ago the oldest of them returned, on CUPTI's clock; 0 when none is pending. A
    /// kernel that never ends (a hung collective) makes this grow.
    pub oldest_pending_ns: Ns,
    /// The name of that oldest launch's kernel, when CUPTI handed over the kernel's record
    /// before it ended (a forced flush while the process was silent).
    pub oldest_pending_kernel: Option<String>,
    /// Kernels whose record CUPTI handed over before they ended and that ended since, in
    /// total: their time is in no busy figure.
    pub unfinished_ended_total: u64,
    pub devices: Vec<DeviceBatch>,
}

/// One GPU's share of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceBatch {
    /// CUPTI's device id in the process.
    pub device: u32,
    /// `GPU-…`, when CUPTI's device record was seen.
    pub uuid: Option<String>,
    pub kernels: u64,
    /// Sum of kernel durations (a sum, not busy: concurrent kernels count twice).
    pub kernel_sum_ns: Ns,
    /// Merged intervals of communication kernels (NCCL), across streams.
    pub comm_runs: Vec<(Ns, Ns)>,
    /// Merged intervals of every other kernel, across streams (communication is exposed where
    /// none of these runs).
    pub compute_runs: Vec<(Ns, Ns)>,
    pub copies: u64,
    pub copy_bytes: u64,
    pub latency: Latency,
    /// Merged kernel intervals, per stream.
    pub streams: Vec<StreamRuns>,
}

/// Merged kernel intervals `[start, end)` of one stream, sorted, disjoint, not touching.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamRuns {
    pub stream: u32,
    pub runs: Vec<(Ns, Ns)>,
}

/// Launch-to-start latency (kernel start − end of its launch call), as a histogram over
/// [`LATENCY_BOUNDS_NS`]; a negative latency (host and GPU clocks disagreeing) counts as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    /// Count per bucket (not cumulative).
    pub buckets: [u64; LATENCY_BUCKETS],
    pub sum_ns: Ns,
}

impl Latency {
    pub fn add(&mut self, latency_ns: i64) {
        let v = latency_ns.max(0) as Ns;
        let i = LATENCY_BOUNDS_NS
            .iter()
            .position(|&b| v <= b)
            .unwrap_or(LATENCY_BOUNDS_NS.len());
        self.buckets[i] += 1;
        self.sum_ns = self.sum_ns.saturating_add(v);
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    pub fn merge(&mut self, o: &Latency) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a = a.saturating_add(b);
        }
        self.sum_ns = self.sum_ns.saturating_add(o.sum_ns);
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    Batch(Batch),
    /// The process runs untraced, and why (CUPTI missing, another tool holds it).
    Untraced(String),
    Capture(Capture),
    CaptureRequest(CaptureRequest),
    CaptureReply(CaptureReply),
}

/// Why a frame was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("not a cutrace monitor frame (bad magic)")]
    BadMagic,
    #[error("frame version {0}, this monitor reads version {VERSION}")]
    Version(u16),
    #[error("unknown frame kind {0}")]
    Kind(u16),
    #[error("a frame of {0} bytes, over the {MAX_PAYLOAD}-byte limit")]
    TooLong(u64),
    #[error("the stream ended inside a frame")]
    Truncated,
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    #[error("reading the socket failed: {0}")]
    Io(String),
}

impl WireError {
    /// A short name for the monitor's rejected-frames counter.
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::BadMagic => "bad_magic",
            WireError::Version(_) => "version",
            WireError::Kind(_) => "kind",
            WireError::TooLong(_) => "too_long",
            WireError::Truncated => "truncated",
            WireError::Malformed(_) => "malformed",
            WireError::Io(_) => "io",
        }
    }
}

// ---- encoding ----

struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A string cut to [`MAX_STR`] bytes at a character boundary.
    fn str(&mut self, s: &str) {
        let mut n = s.len().min(MAX_STR);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.u32(n as u32);
        self.0.extend_from_slice(&s.as_bytes()[..n]);
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        self.u8(u8::from(v.is_some()));
        self.u32(v.unwrap_or(0));
    }
    fn opt_str(&mut self, v: Option<&str>) {
        self.u8(u8::from(v.is_some()));
        self.str(v.unwrap_or(""));
    }
    fn runs(&mut self, runs: &[(Ns, Ns)]) {
        self.u32(runs.len() as u32);
        for &(s, e) in runs {
            self.u64(s);
            self.u64(e);
        }
    }
}

/// The frame of `m`, header included. A batch whose payload would pass [`MAX_PAYLOAD`] must be
/// split by the caller ([`Batch::encoded_len`] says how big it is).
pub fn encode(m: &Message) -> Vec<u8> {
    let mut e = Enc(Vec::with_capacity(256));
    e.0.extend_from_slice(&MAGIC);
    e.0.extend_from_slice(&VERSION.to_le_bytes());
    let kind = match m {
        Message::Hello(_) => KIND_HELLO,
        Message::Batch(_) => KIND_BATCH,
        Message::Untraced(_) => KIND_UNTRACED,
        Message::Capture(_) => KIND_CAPTURE,
        Message::CaptureRequest(_) => KIND_CAPTURE_REQUEST,
        Message::CaptureReply(_) => KIND_CAPTURE_REPLY,
    };
    e.0.extend_from_slice(&kind.to_le_bytes());
    e.u32(0);
    match m {
        Message::Hello(h) => {
            e.u32(h.pid);
            e.str(&h.host);
            e.str(&h.command);
            e.opt_u32(h.rank);
            e.opt_u32(h.local_rank);
            e.opt_str(h.job.as_deref());
        }
        Message::Batch(b) => encode_batch(&mut e, b),
        Message::Untraced(why) => e.str(why),
        Message::Capture(c) => encode_capture(&mut e, c),
        Message::CaptureRequest(r) => {
            e.opt_u32(r.pid);
            encode_capture(&mut e, &r.capture);
        }
        Message::CaptureReply(r) => {
            e.u32(r.told.len() as u32);
            for &p in &r.told {
                e.u32(p);
            }
            e.opt_str(r.refused.as_deref());
        }
    }
    let len = (e.0.len() - HEADER_LEN) as u32;
    e.0[8..12].copy_from_slice(&len.to_le_bytes());
    e.0
}

fn encode_capture(e: &mut Enc, c: &Capture) {
    e.str(&c.dir);
    e.u32(c.seconds);
    e.u32(u32::from(c.last));
}

fn decode_capture(c: &mut Cur<'_>) -> Result<Capture, WireError> {
    Ok(Capture {
        dir: c.str()?,
        seconds: c.u32()?,
        last: match c.u32()? {
            0 => false,
            1 => true,
            _ => return Err(WireError::Malformed("a flag that is neither 0 nor 1")),
        },
    })
}

fn encode_batch(e: &mut Enc, b: &Batch) {
    e.u64(b.seq);
    e.u64(b.traced_ns);
    e.u64(b.dropped_by_cupti_total);
    e.u64(b.dropped_by_cutrace_total);
    e.u64(b.launches_pending);
    e.u64(b.oldest_pending_ns);
    e.opt_str(b.oldest_pending_kernel.as_deref());
    e.u64(b.unfinished_ended_total);
    e.u32(b.devices.len() as u32);
    for d in &b.devices {
        e.u32(d.device);
        e.opt_str(d.uuid.as_deref());
        e.u64(d.kernels);
        e.u64(d.kernel_sum_ns);
        e.runs(&d.comm_runs);
        e.runs(&d.compute_runs);
        e.u64(d.copies);
        e.u64(d.copy_bytes);
        for c in d.latency.buckets {
            e.u64(c);
        }
        e.u64(d.latency.sum_ns);
        e.u32(d.streams.len() as u32);
        for s in &d.streams {
            e.u32(s.stream);
            e.runs(&s.runs);
        }
    }
}

impl Batch {
    /// Bytes of this batch's payload, without encoding it.
    pub fn encoded_len(&self) -> usize {
        let runs = |r: &[(Ns, Ns)]| 4 + 16 * r.len();
        let fixed = 8 * 6
            + 5
            + self
                .oldest_pending_kernel
                .as_ref()
                .map_or(0, |k| k.len().min(MAX_STR))
            + 8
            + 4;
        let devices: usize = self
            .devices
            .iter()
            .map(|d| {
                4 + 5
                    + d.uuid.as_ref().map_or(0, |u| u.len().min(MAX_STR))
                    + 16
                    + runs(&d.comm_runs)
                    + runs(&d.compute_runs)
                    + 16
                    + 8 * (LATENCY_BUCKETS + 1)
                    + 4
                    + d.streams.iter().map(|s| 4 + runs(&s.runs)).sum::<usize>()
            })
            .sum();
        fixed + devices
    }
}

// ---- decoding ----

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(WireError::Malformed("a field runs past the frame's end"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of items of at least `min_bytes` each, checked against what is left.
    fn count(&mut self, min_bytes: usize, max: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n > max || n.saturating_mul(min_bytes) > self.b.len() - self.at {
            return Err(WireError::Malformed(
                "a count larger than the frame can hold",
            ));
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        if n > MAX_STR {
            return Err(WireError::Malformed("a string over the length limit"));
        }
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::Malformed("a string not UTF-8"))
    }
    fn flag(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Malformed("an option flag other than 0 or 1")),
        }
    }
    fn opt_u32(&mut self) -> Result<Option<u32>, WireError> {
        let some = self.flag()?;
        let v = self.u32()?;
        Ok(some.then_some(v))
    }
    fn opt_str(&mut self) -> Result<Option<String>, WireError> {
        let some = self.flag()?;
        let v = self.str()?;
        Ok(some.then_some(v))
    }
    /// Runs, each non-empty, sorted and disjoint.
    fn runs(&mut self) -> Result<Vec<(Ns, Ns)>, WireError> {
        let n = self.count(16, usize::MAX)?;
        let mut v = Vec::with_capacity(n);
        let mut last_end = 0;
        for i in 0..n {
            let (s, e) = (self.u64()?, self.u64()?);
            if e <= s || (i > 0 && s <= last_end) {
                return Err(WireError::Malformed(
                    "runs not sorted, disjoint and non-empty",
                ));
            }
            last_end = e;
            v.push((s, e));
        }
        Ok(v)
    }
}

/// Decodes one frame's payload of kind `kind`; every byte must be used.
pub fn decode_payload(kind: u16, payload: &[u8]) -> Result<Message, WireError> {
    let mut c = Cur { b: payload, at: 0 };
    let m = match kind {
        KIND_HELLO => Message::Hello(Hello {
            pid: c.u32()?,
            host: c.str()?,
            command: c.str()?,
            rank: c.opt_u32()?,
            local_rank: c.opt_u32()?,
            job: c.opt_str()?,
        }),
        KIND_BATCH => Message::Batch(decode_batch(&mut c)?),
        KIND_UNTRACED => Message::Untraced(c.str()?),
        KIND_CAPTURE => Message::Capture(decode_capture(&mut c)?),
        KIND_CAPTURE_REQUEST => Message::CaptureRequest(CaptureRequest {
            pid: c.opt_u32()?,
            capture: decode_capture(&mut c)?,
        }),
        KIND_CAPTURE_REPLY => {
            let n = c.u32()? as usize;
            if n > payload.len() / 4 {
                return Err(WireError::Malformed("more pids than bytes"));
            }
            let mut told = Vec::with_capacity(n);
            for _ in 0..n {
                told.push(c.u32()?);
            }
            Message::CaptureReply(CaptureReply {
                told,
                refused: c.opt_str()?,
            })
        }
        k => return Err(WireError::Kind(k)),
    };
    if c.at != payload.len() {
        return Err(WireError::Malformed("bytes left after the message"));
    }
    Ok(m)
}

fn decode_batch(c: &mut Cur<'_>) -> Result<Batch, WireError> {
    let mut b = Batch {
        seq: c.u64()?,
        traced_ns: c.u64()?,
        dropped_by_cupti_total: c.u64()?,
        dropped_by_cutrace_total: c.u64()?,
        launches_pending: c.u64()?,
        oldest_pending_ns: c.u64()?,
        oldest_pending_kernel: c.opt_str()?,
        unfinished_ended_total: c.u64()?,
        devices: Vec::new(),
    };
    // A device takes at least its fixed fields.
    let n = c.count(
        4 + 5 + 16 + 4 + 4 + 16 + 8 * (LATENCY_BUCKETS + 1) + 4,
        MAX_DEVICES,
    )?;
    for _ in 0..n {
        let mut d = DeviceBatch {
            device: c.u32()?,
            uuid: c.opt_str()?,
            kernels: c.u64()?,
            kernel_sum_ns: c.u64()?,
            comm_runs: c.runs()?,
            compute_runs: c.runs()?,
            copies: c.u64()?,
            copy_bytes: c.u64()?,
            ..DeviceBatch::default()
        };
        for slot in d.latency.buckets.iter_mut() {
            *slot = c.u64()?;
        }
        d.latency.sum_ns = c.u64()?;
        let streams = c.count(8, usize::MAX)?;
        d.streams.reserve(streams);
        for _ in 0..streams {
            d.streams.push(StreamRuns {
                stream: c.u32()?,
                runs: c.runs()?,
            });
        }
        b.devices.push(d);
    }
    Ok(b)
}

/// The first whole frame at the start of `buf` and the bytes it took; `None` while `buf` holds
/// less than a frame (a non-blocking reader keeps the bytes and waits for more).
pub fn split_frame(buf: &[u8]) -> Option<Result<(Message, usize), WireError>> {
    if buf.len() < HEADER_LEN {
        return None;
    }
    if buf[0..4] != MAGIC {
        return Some(Err(WireError::BadMagic));
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]);
    if version != VERSION {
        return Some(Err(WireError::Version(version)));
    }
    let kind = u16::from_le_bytes([buf[6], buf[7]]);
    let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if len > MAX_PAYLOAD {
        return Some(Err(WireError::TooLong(len as u64)));
    }
    let end = HEADER_LEN + len;
    if buf.len() < end {
        return None;
    }
    Some(decode_payload(kind, &buf[HEADER_LEN..end]).map(|m| (m, end)))
}

/// Reads frames from a stream, one at a time, into a buffer it reuses (at most
/// [`MAX_PAYLOAD`] bytes).
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// The next message; `Ok(None)` at a clean end of the stream (between frames).
    pub fn next(&mut self, r: &mut impl Read) -> Result<Option<Message>, WireError> {
        let mut head = [0u8; HEADER_LEN];
        match read_full(r, &mut head)? {
            0 => return Ok(None),
            n if n < HEADER_LEN => return Err(WireError::Truncated),
            _ => {}
        }
        if head[0..4] != MAGIC {
            return Err(WireError::BadMagic);
        }
        let version = u16::from_le_bytes([head[4], head[5]]);
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let kind = u16::from_le_bytes([head[6], head[7]]);
        let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(WireError::TooLong(len as u64));
        }
        self.buf.clear();
        self.buf.resize(len, 0);
        if read_full(r, &mut self.buf)? < len {
            return Err(WireError::Truncated);
        }
        decode_payload(kind, &self.buf).map(Some)
    }
}

/// Reads until `buf` is full or the stream ends; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, WireError> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WireError::Io(e.to_string())),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests;
