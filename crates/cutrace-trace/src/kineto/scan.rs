//! A purpose-built scanner for one Kineto event object: finds the fields cutrace models and skips
//! the rest without building anything.
//!
//! serde_json spent ~37 instructions per input byte here (UTF-8 validation of every borrowed
//! string, a second pass over `args`); this scanner touches each byte about once and validates
//! only what is kept. It checks the structure of everything it reads (strings closed, brackets
//! balanced, `:` and `,` where they belong, number characters); inside a skipped nested value it
//! checks only that strings close and brackets balance.

use std::borrow::Cow;

use super::vocab::{arg, cat};

/// The `args` keys read, as bytes to match a key's raw text against.
mod key {
    use super::arg;
    pub const DEVICE: &[u8] = arg::DEVICE.as_bytes();
    pub const CONTEXT: &[u8] = arg::CONTEXT.as_bytes();
    pub const STREAM: &[u8] = arg::STREAM.as_bytes();
    pub const CORRELATION: &[u8] = arg::CORRELATION.as_bytes();
    pub const REGISTERS_PER_THREAD: &[u8] = arg::REGISTERS_PER_THREAD.as_bytes();
    pub const SHARED_MEMORY: &[u8] = arg::SHARED_MEMORY.as_bytes();
    pub const GRID: &[u8] = arg::GRID.as_bytes();
    pub const BLOCK: &[u8] = arg::BLOCK.as_bytes();
    pub const BYTES: &[u8] = arg::BYTES.as_bytes();
    pub const CBID: &[u8] = arg::CBID.as_bytes();
    pub const GRAPH_ID: &[u8] = arg::GRAPH_ID.as_bytes();
    pub const WAIT_ON_STREAM: &[u8] = arg::WAIT_ON_STREAM.as_bytes();
    pub const WAIT_ON_EVENT_RECORD: &[u8] = arg::WAIT_ON_EVENT_RECORD.as_bytes();
    pub const EXTERNAL_ID: &[u8] = arg::EXTERNAL_ID.as_bytes();
    pub const COLLECTIVE_NAME: &[u8] = arg::COLLECTIVE_NAME.as_bytes();
    pub const GROUP_NAME: &[u8] = arg::GROUP_NAME.as_bytes();
    pub const GROUP_DESC: &[u8] = arg::GROUP_DESC.as_bytes();
    pub const GROUP_SIZE: &[u8] = arg::GROUP_SIZE.as_bytes();
    pub const SEQ: &[u8] = arg::SEQ.as_bytes();
    pub const IN_NELEMS: &[u8] = arg::IN_NELEMS.as_bytes();
    pub const OUT_NELEMS: &[u8] = arg::OUT_NELEMS.as_bytes();
    pub const DTYPE: &[u8] = arg::DTYPE.as_bytes();
    pub const MANGLED: &[u8] = arg::MANGLED.as_bytes();
    pub const DOMAIN: &[u8] = arg::DOMAIN.as_bytes();
    pub const ADDR: &[u8] = arg::ADDR.as_bytes();
    pub const MEM_BYTES: &[u8] = arg::MEM_BYTES.as_bytes();
    pub const TOTAL_ALLOCATED: &[u8] = arg::TOTAL_ALLOCATED.as_bytes();
    pub const TOTAL_RESERVED: &[u8] = arg::TOTAL_RESERVED.as_bytes();
    pub const DEVICE_ID: &[u8] = arg::DEVICE_ID.as_bytes();
    pub const DEVICE_TYPE: &[u8] = arg::DEVICE_TYPE.as_bytes();
    pub const MEMORY_LEVEL: &[u8] = arg::MEMORY_LEVEL.as_bytes();
}

/// Why a scan stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum ScanError {
    /// The slice ended inside the value: more input may complete it.
    NeedMore,
    /// Invalid JSON at this offset (relative to the slice start).
    Bad(usize, String),
}

/// A JSON string as it appears between its quotes.
#[derive(Debug, Clone, Copy)]
pub struct JStr<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> JStr<'a> {
    /// The text between the quotes, escapes undecoded.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    pub fn bytes_eq(&self, s: &str) -> bool {
        !self.escaped && self.raw == s.as_bytes()
    }

    /// The modelled category this string names, ignoring ASCII case (see [`modelled`]).
    pub fn modelled(&self) -> Option<&'static str> {
        if self.escaped {
            return self.decode().ok().and_then(|c| modelled(&c));
        }
        MODELLED
            .iter()
            .copied()
            .find(|m| self.raw.eq_ignore_ascii_case(m.as_bytes()))
            .or_else(|| {
                LEGACY
                    .iter()
                    .find(|(old, _)| self.raw.eq_ignore_ascii_case(old.as_bytes()))
                    .map(|&(_, new)| new)
            })
    }

    /// The decoded text; borrowed when there are no escapes.
    pub fn decode(&self) -> Result<Cow<'a, str>, String> {
        if !self.escaped {
            return std::str::from_utf8(self.raw)
                .map(Cow::Borrowed)
                .map_err(|e| format!("a string is not valid UTF-8 ({e})"));
        }
        let mut out = Vec::with_capacity(self.raw.len());
        let mut i = 0;
        let b = self.raw;
        while i < b.len() {
            if b[i] != b'\\' {
                out.push(b[i]);
                i += 1;
                continue;
            }
            let esc = *b.get(i + 1).ok_or("a string ends in a lone backslash")?;
            i += 2;
            match esc {
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'/' => out.push(b'/'),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'u' => {
                    let hi = hex4(b, i)?;
                    i += 4;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
                            return Err("a \\u surrogate pair is incomplete".into());
                        }
                        let lo = hex4(b, i + 2)?;
                        i += 6;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return Err("a \\u surrogate pair is invalid".into());
                        }
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    } else {
                        hi
                    };
                    let ch = char::from_u32(c).ok_or("a \\u escape is not a character")?;
                    let mut tmp = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                other => {
                    return Err(format!(
                        "a string has an invalid escape '\\{}'",
                        (other as char).escape_default()
                    ))
                }
            }
        }
        String::from_utf8(out)
            .map(Cow::Owned)
            .map_err(|e| format!("a string is not valid UTF-8 ({e})"))
    }
}

fn hex4(b: &[u8], i: usize) -> Result<u32, String> {
    let h = b.get(i..i + 4).ok_or("a \\u escape is cut short")?;
    let s = std::str::from_utf8(h).map_err(|_| "a \\u escape is not hex")?;
    u32::from_str_radix(s, 16).map_err(|_| "a \\u escape is not hex".into())
}

/// Position of the next `"` or `\\` at or after `from`. Most strings are short keys and
/// categories: they are searched 8 bytes at a time in a register (SWAR); past 32 bytes the search
/// goes to memchr (SIMD), which wins on long kernel names but costs more to set up.
#[inline]
fn find_quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // High bit set in the first byte of `w` equal to `c` (bits above it may be spurious).
    let eq = |w: u64, c: u8| {
        let x = w ^ (ONES * u64::from(c));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    let mut j = from;
    while let Some(chunk) = b.get(j..j + 8) {
        let w = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let m = eq(w, b'"') | eq(w, b'\\');
        if m != 0 {
            return Some(j + (m.trailing_zeros() / 8) as usize);
        }
        j += 8;
        if j - from >= 32 {
            return memchr::memchr2(b'"', b'\\', &b[j..]).map(|off| j + off);
        }
    }
    b[j.min(b.len())..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|off| j + off)
}

/// The raw text of the `args` fields cutrace models.
#[derive(Debug, Default, Clone, Copy)]
pub struct Args<'a> {
    pub device: Option<&'a [u8]>,
    pub context: Option<&'a [u8]>,
    pub stream: Option<&'a [u8]>,
    pub correlation: Option<&'a [u8]>,
    pub registers: Option<&'a [u8]>,
    pub shared_memory: Option<&'a [u8]>,
    pub grid: Option<&'a [u8]>,
    pub block: Option<&'a [u8]>,
    pub bytes: Option<&'a [u8]>,
    pub cbid: Option<&'a [u8]>,
    pub graph_id: Option<&'a [u8]>,
    /// A `cuda_sync` event's `wait_on_stream` and `wait_on_cuda_event_record_corr_id`.
    pub wait_on_stream: Option<&'a [u8]>,
    pub wait_on_event_record: Option<&'a [u8]>,
    /// The kernel's name as CUPTI reported it, when `name` holds a demangled one (written by
    /// `cutrace convert --chrome`; torch.profiler does not write it).
    pub mangled: Option<JStr<'a>>,
    /// An NVTX range's or mark's domain (written by `cutrace convert --chrome`); a value that is
    /// not a string is ignored, as any other key this reader does not model.
    pub domain: Option<JStr<'a>>,
    /// Kineto's link from a GPU event or runtime call to the CPU op that launched it (the op's
    /// own `External id`).
    pub external_id: Option<&'a [u8]>,
    /// A collective's annotation, on a `record_param_comms` CPU op and (newer torch) on the
    /// kernels it launched: raw values, read leniently (see `comms`).
    pub comm: CommArgs<'a>,
    /// A `[memory]` event's args.
    pub mem: MemArgs<'a>,
}

/// The raw args of torch.profiler's `[memory]` event (torch's names in the comments).
#[derive(Debug, Default, Clone, Copy)]
pub struct MemArgs<'a> {
    /// "Addr"
    pub addr: Option<&'a [u8]>,
    /// "Bytes": positive for an allocation, negative for a free.
    pub bytes: Option<&'a [u8]>,
    /// "Total Allocated", "Total Reserved"
    pub total_allocated: Option<&'a [u8]>,
    pub total_reserved: Option<&'a [u8]>,
    /// "Device Id" (-1 for the CPU), "Device Type" (0 CPU, 1 CUDA)
    pub device_id: Option<&'a [u8]>,
    pub device_type: Option<&'a [u8]>,
    /// *cutrace*'s "level", raw (`"driver"` with its quotes).
    pub level: Option<&'a [u8]>,
}

/// The raw `record_param_comms` args cutrace reads (torch's names in the comments).
#[derive(Debug, Default, Clone, Copy)]
pub struct CommArgs<'a> {
    /// "Collective name"
    pub name: Option<&'a [u8]>,
    /// "Process Group Name", "Process Group Description"
    pub group_name: Option<&'a [u8]>,
    pub group_desc: Option<&'a [u8]>,
    /// "Group size"
    pub group_size: Option<&'a [u8]>,
    /// "Seq" (the process group's sequence number; torch writes it in some versions only)
    pub seq: Option<&'a [u8]>,
    /// "In msg nelems", "Out msg nelems", "dtype"
    pub in_nelems: Option<&'a [u8]>,
    pub out_nelems: Option<&'a [u8]>,
    pub dtype: Option<&'a [u8]>,
}

/// One event's fields, as raw text borrowed from the input.
#[derive(Debug, Default, Clone, Copy)]
pub struct Event<'a> {
    pub ph: Option<JStr<'a>>,
    pub cat: Option<JStr<'a>>,
    pub name: Option<JStr<'a>>,
    pub pid: Option<&'a [u8]>,
    pub tid: Option<&'a [u8]>,
    pub ts: Option<&'a [u8]>,
    pub dur: Option<&'a [u8]>,
    pub args: Option<Args<'a>>,
    /// A `name` that is not a string, as written (the event then has no `name`).
    pub odd_name: Option<&'a [u8]>,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

type R<T> = Result<T, ScanError>;

impl<'a> Scanner<'a> {
    fn bad<T>(&self, what: impl Into<String>) -> R<T> {
        Err(ScanError::Bad(self.i, what.into()))
    }

    #[inline]
    fn ws(&mut self) -> R<u8> {
        while let Some(&c) = self.b.get(self.i) {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                self.i += 1;
            } else {
                return Ok(c);
            }
        }
        Err(ScanError::NeedMore)
    }

    fn expect(&mut self, want: u8, context: &str) -> R<()> {
        let c = self.ws()?;
        if c != want {
            return self.bad(format!(
                "expected '{}' {context}, found '{}'",
                want as char,
                (c as char).escape_default()
            ));
        }
        self.i += 1;
        Ok(())
    }

    /// A string starting at the cursor (which is on its opening quote). Control characters
    /// inside strings are not rejected: finding the closing quote with SIMD is what makes this
    /// fast, and a stray control character cannot change what cutrace reads.
    #[inline]
    fn string(&mut self) -> R<JStr<'a>> {
        let start = self.i + 1;
        let mut j = start;
        let mut escaped = false;
        loop {
            let Some(at) = find_quote_or_backslash(self.b, j) else {
                return Err(ScanError::NeedMore);
            };
            j = at;
            if self.b[j] == b'"' {
                break;
            }
            escaped = true;
            j += 2;
        }
        self.i = j + 1;
        Ok(JStr {
            raw: &self.b[start..j],
            escaped,
        })
    }

    /// Skips any value; returns its raw text.
    fn value(&mut self) -> R<&'a [u8]> {
        let c = self.ws()?;
        let start = self.i;
        match c {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => self.nested()?,
            b'-' | b'0'..=b'9' => {
                while let Some(&c) = self.b.get(self.i) {
                    if c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                if self.i == self.b.len() {
                    return Err(ScanError::NeedMore);
                }
            }
            b't' | b'f' | b'n' => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                let end = self.i + word.len();
                match self.b.get(self.i..end) {
                    None if word.starts_with(&self.b[self.i..]) => return Err(ScanError::NeedMore),
                    Some(w) if w == word => self.i = end,
                    _ => return self.bad("expected a JSON value"),
                }
            }
            other => {
                return self.bad(format!(
                    "expected a JSON value, found '{}'",
                    (other as char).escape_default()
                ))
            }
        }
        Ok(&self.b[start..self.i])
    }

    /// Skips a nested object or array, checking that strings close and brackets balance. The
    /// open brackets are a bit stack (1 = object), so skipping allocates nothing.
    fn nested(&mut self) -> R<()> {
        let mut stack: u128 = 0;
        let mut depth = 0u32;
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return Err(ScanError::NeedMore);
            };
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => {
                    if depth == 128 {
                        return self.bad("values nested more than 128 deep");
                    }
                    stack = (stack << 1) | u128::from(c == b'{');
                    depth += 1;
                }
                b'}' | b']' => {
                    if depth == 0 || (stack & 1 == 1) != (c == b'}') {
                        return self.bad(format!("unbalanced '{}'", c as char));
                    }
                    stack >>= 1;
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    fn object_keys(&mut self, mut on_key: impl FnMut(&mut Self, JStr<'a>) -> R<()>) -> R<()> {
        self.expect(b'{', "at the start of an object")?;
        if self.ws()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            if self.ws()? != b'"' {
                return self.bad("expected a quoted key");
            }
            let key = self.string()?;
            self.expect(b':', "after a key")?;
            on_key(self, key)?;
            match self.ws()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                c => {
                    return self.bad(format!(
                        "expected ',' or '}}' in an object, found '{}'",
                        (c as char).escape_default()
                    ))
                }
            }
        }
    }

    fn args(&mut self, out: &mut Option<Args<'a>>) -> R<()> {
        if self.ws()? != b'{' {
            self.value()?;
            *out = None;
            return Ok(());
        }
        // Filled in place: an `Args` is some 400 bytes, and returning it by value copied it
        // for every kernel and runtime call.
        let a = out.insert(Args::default());
        self.object_keys(|s, key| {
            let slot = match key.raw {
                key::DEVICE => &mut a.device,
                key::CONTEXT => &mut a.context,
                key::STREAM => &mut a.stream,
                key::CORRELATION => &mut a.correlation,
                key::REGISTERS_PER_THREAD => &mut a.registers,
                key::SHARED_MEMORY => &mut a.shared_memory,
                key::GRID => &mut a.grid,
                key::BLOCK => &mut a.block,
                key::BYTES => &mut a.bytes,
                key::CBID => &mut a.cbid,
                key::GRAPH_ID => &mut a.graph_id,
                key::WAIT_ON_STREAM => &mut a.wait_on_stream,
                key::WAIT_ON_EVENT_RECORD => &mut a.wait_on_event_record,
                key::EXTERNAL_ID => &mut a.external_id,
                key::COLLECTIVE_NAME => &mut a.comm.name,
                key::GROUP_NAME => &mut a.comm.group_name,
                key::GROUP_DESC => &mut a.comm.group_desc,
                key::GROUP_SIZE => &mut a.comm.group_size,
                // Some torch versions write it in lower case.
                key::SEQ | b"seq" => &mut a.comm.seq,
                key::IN_NELEMS => &mut a.comm.in_nelems,
                key::OUT_NELEMS => &mut a.comm.out_nelems,
                key::DTYPE => &mut a.comm.dtype,
                key::ADDR => &mut a.mem.addr,
                key::MEM_BYTES => &mut a.mem.bytes,
                key::TOTAL_ALLOCATED => &mut a.mem.total_allocated,
                key::TOTAL_RESERVED => &mut a.mem.total_reserved,
                key::DEVICE_ID => &mut a.mem.device_id,
                key::DEVICE_TYPE => &mut a.mem.device_type,
                key::MEMORY_LEVEL => &mut a.mem.level,
                key::MANGLED => {
                    // A value that is not a string is ignored, as an unknown key is.
                    if s.ws()? == b'"' {
                        a.mangled = Some(s.string()?);
                    } else {
                        s.value()?;
                    }
                    return Ok(());
                }
                key::DOMAIN => {
                    if s.ws()? == b'"' {
                        a.domain = Some(s.string()?);
                    } else {
                        s.value()?;
                    }
                    return Ok(());
                }
                _ => {
                    s.value()?;
                    return Ok(());
                }
            };
            *slot = Some(s.value()?);
            Ok(())
        })?;
        Ok(())
    }
}

/// Event categories whose fields cutrace reads; any other event is skipped as soon as its `ph`
/// or `cat` says so. They are matched ignoring ASCII case: Kineto has written "Kernel" as well
/// as "kernel" over its versions (pytorch/kineto#659).
pub const MODELLED: [&str; 12] = [
    cat::KERNEL,
    cat::GPU_MEMCPY,
    cat::GPU_MEMSET,
    cat::CUDA_RUNTIME,
    cat::CUDA_DRIVER,
    cat::CUDA_SYNC,
    cat::USER_ANNOTATION,
    cat::GPU_USER_ANNOTATION,
    cat::OVERHEAD,
    cat::CPU_OP,
    cat::PYTHON_FUNCTION,
    cat::OPERATOR,
];

/// Older Kineto spellings (the PyTorch 1.8-era chrome traces wrote `Kernel`, `Memcpy`, `Memset`
/// and `Runtime`; analyzers of those traces, such as AMD's TraceLens, still accept `memcpy` and
/// `runtime` beside `gpu_memcpy` and `cuda_runtime`) and the category each means today.
pub const LEGACY: [(&str, &str); 3] = [
    ("memcpy", cat::GPU_MEMCPY),
    ("memset", cat::GPU_MEMSET),
    ("runtime", cat::CUDA_RUNTIME),
];

/// The modelled category `cat` names, in the spelling of [`MODELLED`], matched ignoring ASCII
/// case (and [`LEGACY`] spellings mapped to today's); `None` for a category cutrace does not
/// model.
pub fn modelled(cat: &str) -> Option<&'static str> {
    MODELLED
        .iter()
        .copied()
        .find(|m| m.eq_ignore_ascii_case(cat))
        .or_else(|| {
            LEGACY
                .iter()
                .find(|(old, _)| old.eq_ignore_ascii_case(cat))
                .map(|&(_, new)| new)
        })
}

impl Scanner<'_> {
    /// Skips the rest of an object whose first keys were read: only strings and braces matter
    /// for finding its end, so this jumps between them (SIMD) instead of reading every value.
    /// Inside a skipped remainder, JSON syntax other than strings and braces is not checked.
    fn skip_rest_of_object(&mut self) -> R<()> {
        let mut depth = 1u32;
        loop {
            let Some(off) = memchr::memchr3(b'"', b'{', b'}', &self.b[self.i..]) else {
                return Err(ScanError::NeedMore);
            };
            self.i += off;
            match self.b[self.i] {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' => depth += 1,
                _ => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                }
            }
            self.i += 1;
        }
    }
}

/// The categories of which cutrace reads one event name only, and that name: the
/// `cpu_instant_event` `[memory]`.
fn only_name(cat: JStr<'_>) -> Option<&'static str> {
    if cat.bytes_eq(cat::CPU_INSTANT_EVENT) {
        Some(super::vocab::MEMORY)
    } else {
        None
    }
}

/// Scans one event object at the front of `b` into `ev` (reused from event to event: it is
/// some 600 bytes, too many to return by value); returns the bytes it took. Events that
/// cutrace does not model (`ph` other than "X" or "i", or a `cat` not in [`MODELLED`]; of
/// `cpu_instant_event`s, all but `[memory]`) are
/// skipped after those keys, and come back with the
/// fields read so far. A `ph`, `cat` or `name` that is not a string is read as absent (and the
/// event is then not modelled, or unnamed): it never makes the event unreadable.
pub fn event<'a>(b: &'a [u8], ev: &mut Event<'a>) -> Result<usize, ScanError> {
    let mut s = Scanner { b, i: 0 };
    *ev = Event::default();
    s.expect(b'{', "at the start of an object")?;
    if s.ws()? == b'}' {
        s.i += 1;
        return Ok(s.i);
    }
    // A `cpu_instant_event` is kept only if its name is `[memory]`: decided once both are
    // read.
    let mut only: Option<&'static str> = None;
    loop {
        if s.ws()? != b'"' {
            return s.bad("expected a quoted key");
        }
        let key = s.string()?;
        s.expect(b':', "after a key")?;
        // Whether the rest can be skipped is decided when `ph`, `cat` or `name` is read.
        let mut skip_rest = false;
        match key.raw {
            b"ph" => {
                let ph = s.maybe_str()?;
                // "i": instant events; those of `user_annotation` are NVTX marks.
                skip_rest = !ph.is_some_and(|ph| ph.bytes_eq("X") || ph.bytes_eq("i"));
                ev.ph = ph;
            }
            b"cat" => {
                let cat = s.maybe_str()?;
                only = cat.and_then(only_name);
                skip_rest = if let Some(want) = only {
                    ev.name.is_some_and(|n| !n.bytes_eq(want))
                } else {
                    cat.is_none_or(|c| c.modelled().is_none())
                };
                ev.cat = cat;
            }
            b"name" => {
                let start = s.ws().map(|_| s.i)?;
                let name = s.maybe_str()?;
                if name.is_none() {
                    ev.odd_name = Some(&s.b[start..s.i]);
                }
                skip_rest = only.is_some_and(|want| !name.is_some_and(|n| n.bytes_eq(want)));
                ev.name = name;
            }
            b"pid" => ev.pid = Some(s.value()?),
            b"tid" => ev.tid = Some(s.value()?),
            b"ts" => ev.ts = Some(s.value()?),
            b"dur" => ev.dur = Some(s.value()?),
            b"args" => s.args(&mut ev.args)?,
            _ => {
                s.value()?;
            }
        }
        match s.ws()? {
            b',' => s.i += 1,
            b'}' => {
                s.i += 1;
                return Ok(s.i);
            }
            c => {
                return s.bad(format!(
                    "expected ',' or '}}' in an object, found '{}'",
                    (c as char).escape_default()
                ))
            }
        }
        if skip_rest {
            s.skip_rest_of_object()?;
            return Ok(s.i);
        }
    }
}

impl<'a> Scanner<'a> {
    /// A string value, or `None` after skipping a value of any other type.
    fn maybe_str(&mut self) -> R<Option<JStr<'a>>> {
        if self.ws()? == b'"' {
            return self.string().map(Some);
        }
        self.value()?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event scanned into a fresh `Event`.
    fn one(b: &[u8]) -> Result<(Event<'_>, usize), ScanError> {
        let mut ev = Event::default();
        event(b, &mut ev).map(|used| (ev, used))
    }

    #[test]
    fn a_reused_event_keeps_nothing_of_the_previous_one() {
        let src = br#"{"ph": "X", "cat": "kernel", "name": "k", "args": {"device": 3}},{"ph": "X", "cat": "cuda_runtime"}"#;
        let mut ev = Event::default();
        let used = event(src, &mut ev).unwrap();
        assert_eq!(ev.args.unwrap().device, Some(&b"3"[..]));
        event(&src[used + 1..], &mut ev).unwrap();
        assert!(ev.cat.unwrap().bytes_eq("cuda_runtime"));
        assert!(ev.name.is_none() && ev.args.is_none(), "{ev:?}");
    }

    #[test]
    fn finds_fields_and_skips_the_rest() {
        let src = br#"{"ph": "X", "x": {"a": [1, {"b": "}"}]}, "cat": "kernel", "name": "a\"b\u00e9",
            "ts": 12.5, "dur": 3, "pid": "Spans", "args": {"device": 0, "grid": [1, 2, 3], "q": null}} ,"#;
        let (ev, used) = one(src).unwrap();
        assert_eq!(&src[used..], b" ,");
        assert!(ev.ph.unwrap().bytes_eq("X"));
        assert!(ev.cat.unwrap().bytes_eq("kernel"));
        assert_eq!(ev.name.unwrap().decode().unwrap(), "a\"b\u{e9}");
        assert_eq!(ev.ts, Some(&b"12.5"[..]));
        assert_eq!(ev.pid, Some(&b"\"Spans\""[..]));
        let a = ev.args.unwrap();
        assert_eq!(a.grid, Some(&b"[1, 2, 3]"[..]));
        assert_eq!(a.device, Some(&b"0"[..]));
    }

    #[test]
    fn quote_search_finds_the_first_quote_or_backslash_anywhere() {
        for len in 0..80 {
            for at in 0..=len {
                for c in [b'"', b'\\'] {
                    let mut v = vec![b'a'; len];
                    if at < len {
                        v[at] = c;
                        // A later quote must not be found first.
                        if at + 1 < len {
                            v[at + 1] = b'"';
                        }
                    }
                    let want = if at < len { Some(at) } else { None };
                    for from in 0..=at.min(len) {
                        assert_eq!(find_quote_or_backslash(&v, from), want, "{len} {at} {from}");
                    }
                }
            }
        }
        // Bytes that differ from a quote only in the high bit, and 0x21/0x23 next to it.
        let v = [0xa2u8, 0x21, 0x23, 0xdc, b'x', b'"'];
        assert_eq!(find_quote_or_backslash(&v, 0), Some(5));
    }

    #[test]
    fn every_prefix_needs_more_and_never_panics() {
        let src = br#"{"ph": "X", "cat": "kernel", "name": "k\n", "ts": 1.5, "dur": 2,
            "args": {"device": 0, "grid": [1, 2, 3], "f": false, "t": true}, "z": null}"#;
        for cut in 0..src.len() {
            assert_eq!(
                one(&src[..cut]).err(),
                Some(ScanError::NeedMore),
                "cut {cut}"
            );
        }
        assert!(one(src).is_ok());
    }

    #[test]
    fn malformed_objects_are_bad_not_need_more() {
        for src in [
            &br#"{"ph" "X"}"#[..],
            br#"{"ph": "X" "cat": 1}"#,
            br#"{ph: 1}"#,
            br#"{"a": [1, 2}}"#,
            br#"{"a": tru }"#,
            br#"{"a": @}"#,
        ] {
            match one(src) {
                Err(ScanError::Bad(_, _)) => {}
                other => panic!("{}: {other:?}", String::from_utf8_lossy(src)),
            }
        }
    }
}
