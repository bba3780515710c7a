//! Where the events of one block go ([`Sink`]): the records read so far and what was counted
//! on the way (skipped events, unread values, rounded times), with the helpers every handler
//! shares: text decoding, exact intervals, a GPU event's placement and typed args, limits.

use std::borrow::Cow;
use std::path::PathBuf;

use super::args::{raw_u64, typed, unquote_b, GpuArgs};
use super::comms;
use super::malformed;
use super::scan::{self, Event};
use super::vocab::{self, arg};
use crate::error::TraceError;
use crate::model::*;
use crate::timeparse::{parse_us_exact, TimeParseError};

/// Where parsed events go; kept apart from the input so events can borrow the input's buffer.
pub(super) struct Sink {
    pub(super) path: PathBuf,
    /// The `string-bytes` limit: the longest name kept.
    pub(super) string_bytes: u64,
    pub(super) strings: Interner,
    /// Kernels' launch configurations, as `strings` holds names.
    pub(super) launches: LaunchInterner,
    pub(super) trace: Trace,
    pub(super) events: u64,
    pub(super) skipped: std::collections::BTreeMap<String, u64>,
    /// `ts` and `dur` values with digits below the nanosecond, rounded to the nearest ns.
    pub(super) rounded: u64,
    /// NVTX domain names seen, shared by the ranges and marks that carry them.
    pub(super) domains: Vec<std::sync::Arc<str>>,
    /// Values not read in fields cutrace does not compute from, by category and key: how many,
    /// and the first one's raw text.
    pub(super) unread: std::collections::BTreeMap<String, (u64, String)>,
    /// `record_param_comms` ops and communication kernels, joined at the end.
    pub(super) comm_ops: Vec<comms::CommOp>,
    pub(super) comm_kernels: Vec<comms::CommKernel>,
}

/// A kernel, copy or memset event's placement and timing.
pub(super) struct GpuEvent {
    pub(super) start: Ns,
    pub(super) end: Ns,
    pub(super) device: u32,
    pub(super) context: u32,
    pub(super) stream: u64,
    pub(super) correlation_id: u64,
    pub(super) args: GpuArgs,
}

impl Sink {
    pub(super) fn malformed(&self, offset: u64, what: impl Into<String>) -> TraceError {
        malformed(&self.path, offset, what)
    }

    /// A kept string over the `string-bytes` limit is an error at its event.
    pub(super) fn check_string(&self, s: &str, what: &str, at: u64) -> Result<(), TraceError> {
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

    pub(super) fn skip(&mut self, label: &str) {
        match self.skipped.get_mut(label) {
            Some(n) => *n += 1,
            None => {
                self.skipped.insert(label.to_owned(), 1);
            }
        }
    }

    /// A string field's text. One that does not decode (bad UTF-8, a broken escape) is read
    /// lossily and counted under `cat` and `key`: no string decides whether a trace reads.
    pub(super) fn text<'a>(
        &mut self,
        s: Option<scan::JStr<'a>>,
        cat: &str,
        key: &str,
    ) -> Cow<'a, str> {
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
    pub(super) fn unread(&mut self, cat: &str, key: &str, raw: &[u8]) {
        let label = format!("{cat} \"{key}\"");
        let e = self
            .unread
            .entry(label)
            .or_insert_with(|| (0, example(raw)));
        e.0 += 1;
    }

    /// The `"domain"` arg of an NVTX range or mark (`cutrace convert --chrome` writes it for
    /// ranges and marks outside NVTX's default domain), one shared name per domain.
    pub(super) fn nvtx_domain(
        &mut self,
        ev: &Event<'_>,
        at: u64,
        cat: &str,
    ) -> Result<Option<std::sync::Arc<str>>, TraceError> {
        let Some(raw) = ev.args.as_ref().and_then(|a| a.domain) else {
            return Ok(None);
        };
        let d = self.text(Some(raw), cat, arg::DOMAIN);
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
    pub(super) fn interval(&mut self, ev: &Event<'_>, at: u64) -> Result<(Ns, Ns), TraceError> {
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
    pub(super) fn soft_interval(&mut self, ev: &Event<'_>, at: u64, cat: &str) -> Option<(Ns, Ns)> {
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
    pub(super) fn gpu_event(
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
    /// device-wide synchronize writes -1), as is a negative `wait_on_stream` or
    /// `wait_on_cuda_event_record_corr_id` "unknown": read as none, not counted.
    pub(super) fn args(&mut self, ev: &Event<'_>, cat: &str) -> GpuArgs {
        let Some(a) = &ev.args else {
            return GpuArgs::default();
        };
        let mut unread = Vec::new();
        let g = typed(a, &mut unread);
        for (key, raw) in unread {
            if cat == vocab::cat::CUDA_SYNC
                && [arg::STREAM, arg::WAIT_ON_STREAM, arg::WAIT_ON_EVENT_RECORD].contains(&key)
                && raw.trim_ascii().starts_with(b"-")
            {
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

pub(super) fn cat_or_event(ev: &Event<'_>) -> String {
    ev.cat
        .and_then(|c| c.decode().ok())
        .map(|c| c.into_owned())
        .unwrap_or_else(|| "event".into())
}

pub(super) fn raw_text(v: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(v)
}
