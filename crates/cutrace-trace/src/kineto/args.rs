//! The typed view of the `args` cutrace reads from an event: integers as torch.profiler writes
//! them on CUDA and ROCm (decimal, or hex strings), grid and block triples. A value that does
//! not read is left unknown and named, never fatal.

use super::scan::Args;
use super::vocab::arg;

/// The typed view of [`Args`] for one GPU or API event.
#[derive(Default)]
pub(super) struct GpuArgs {
    pub(super) device: Option<u32>,
    pub(super) context: Option<u32>,
    pub(super) stream: Option<u64>,
    pub(super) correlation: Option<u64>,
    pub(super) registers: Option<u32>,
    pub(super) shared_memory: Option<u32>,
    pub(super) grid: Option<[u32; 3]>,
    pub(super) block: Option<[u32; 3]>,
    pub(super) bytes: Option<u64>,
    pub(super) cbid: Option<u32>,
    pub(super) graph_id: Option<u32>,
    pub(super) wait_on_stream: Option<u64>,
    pub(super) wait_on_event_record: Option<u64>,
}

/// The typed view of `a`. A value that does not read (a negative stream, a string that is not a
/// number, a grid that is not three integers) is left `None` and named in `unread`, with its raw
/// text, for the caller to count: it never refuses the event.
pub(super) fn typed<'a>(a: &Args<'a>, unread: &mut Vec<(&'static str, &'a [u8])>) -> GpuArgs {
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
    let device = int(a.device, arg::DEVICE);
    let context = int(a.context, arg::CONTEXT);
    let stream = int(a.stream, arg::STREAM);
    let correlation = int(a.correlation, arg::CORRELATION);
    let registers = int(a.registers, arg::REGISTERS_PER_THREAD);
    let shared_memory = int(a.shared_memory, arg::SHARED_MEMORY);
    let bytes = int(a.bytes, arg::BYTES);
    let cbid = int(a.cbid, arg::CBID);
    let graph_id = int(a.graph_id, arg::GRAPH_ID);
    let wait_on_stream = int(a.wait_on_stream, arg::WAIT_ON_STREAM);
    let wait_on_event_record = int(a.wait_on_event_record, arg::WAIT_ON_EVENT_RECORD);
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
        device: narrow(device, a.device, arg::DEVICE),
        context: narrow(context, a.context, arg::CONTEXT),
        stream,
        correlation,
        registers: narrow(registers, a.registers, arg::REGISTERS_PER_THREAD),
        shared_memory: narrow(shared_memory, a.shared_memory, arg::SHARED_MEMORY),
        grid: None,
        block: None,
        bytes,
        cbid: narrow(cbid, a.cbid, arg::CBID),
        graph_id: narrow(graph_id, a.graph_id, arg::GRAPH_ID),
        wait_on_stream,
        wait_on_event_record,
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
        grid: dim(a.grid, arg::GRID),
        block: dim(a.block, arg::BLOCK),
        ..out
    }
}

/// `[x, y, z]` of non-negative 32-bit integers.
pub(super) fn dim3(r: &[u8]) -> Option<[u32; 3]> {
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
pub(super) fn lenient_uint<T: TryFrom<u64>>(r: &[u8]) -> Result<Option<T>, ()> {
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

/// A signed decimal integer (`-1`, `5242880`), or one written as a decimal string; `None` for
/// anything else, `null` included.
pub(super) fn lenient_int(r: &[u8]) -> Option<i64> {
    let t = unquote_b(r).trim_ascii();
    match t.strip_prefix(b"-") {
        Some(digits) => {
            let m: u64 = parse_uint(digits)?;
            0i64.checked_sub_unsigned(m)
        }
        None => parse_uint::<i64>(t),
    }
}

/// Hex digits (at most 16), no sign.
pub(super) fn parse_hex(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    u64::from_str_radix(s, 16).ok()
}

/// An integer `pid`/`tid` (decimal, or a hex string as on ROCm); Kineto also writes strings such
/// as "Spans" there, which are not ids.
pub(super) fn raw_u64(v: Option<&[u8]>) -> Option<u64> {
    v.and_then(|r| lenient_uint(r).ok().flatten())
}

pub(super) fn unquote_b(b: &[u8]) -> &[u8] {
    b.strip_prefix(b"\"")
        .and_then(|b| b.strip_suffix(b"\""))
        .unwrap_or(b)
}

/// A plain non-negative decimal integer that fits `T`, straight from bytes.
pub(super) fn parse_uint<T: TryFrom<u64>>(b: &[u8]) -> Option<T> {
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
