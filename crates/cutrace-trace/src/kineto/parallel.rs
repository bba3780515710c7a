//! Scanning one buffered block of `traceEvents` on several threads, by speculation.
//!
//! JSON strings cannot hold a raw newline, so in pretty-printed traces (Kineto writes one event
//! per `,\n  {`) a newline followed by `{` after a `,` is very likely the start of an event. The
//! block is cut at such places and every part is scanned at once, each into its own [`Sink`]. A
//! cut is trusted only if the part before it, scanned for real, ended exactly there; otherwise
//! that part's successors are thrown away and scanning goes on from where the proof ends. The
//! result is therefore the same as a sequential scan, whatever the input looks like; minified
//! JSON (no newlines) simply has no cuts and is scanned on one thread.

use std::path::Path;

use super::{scan, Sink};
use crate::error::TraceError;
use crate::model::{Interner, LaunchId, StrId};

/// How a run over part of a block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunEnd {
    /// Reached the next part's start, right after a `,` (the cursor is at an event).
    Stop,
    /// Consumed the `]` that closes `traceEvents`.
    ArrayEnd,
    /// The block ended inside an event (cursor at its start) …
    NeedEvent,
    /// … or between an event and its separator (cursor after the event).
    NeedSeparator,
}

pub(super) struct Run {
    pub end: RunEnd,
    /// Position in the block where the run stopped.
    pub pos: usize,
    pub error: Option<TraceError>,
}

/// Scans events from `from` (at an event's `{`) until `stop` (after a `,`), the end of the array,
/// or the end of the block. `base` is the block's absolute offset, for error messages.
pub(super) fn run(b: &[u8], from: usize, stop: Option<usize>, base: u64, sink: &mut Sink) -> Run {
    let mut i = from;
    let mut ev = scan::Event::default();
    let done = |end, pos| Run {
        end,
        pos,
        error: None,
    };
    loop {
        match scan::event(&b[i..], &mut ev) {
            Ok(used) => {
                sink.events += 1;
                if let Err(e) = sink.event(&ev, base + i as u64) {
                    return Run {
                        end: RunEnd::NeedEvent,
                        pos: i,
                        error: Some(e),
                    };
                }
                i += used;
            }
            Err(scan::ScanError::NeedMore) => return done(RunEnd::NeedEvent, i),
            Err(scan::ScanError::Bad(rel, what)) => {
                return Run {
                    end: RunEnd::NeedEvent,
                    pos: i,
                    error: Some(sink.malformed(
                        base + (i + rel) as u64,
                        format!("in \"traceEvents\": {what}"),
                    )),
                }
            }
        }
        let after_event = i;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        match b.get(i) {
            None => return done(RunEnd::NeedSeparator, after_event),
            Some(b']') => return done(RunEnd::ArrayEnd, i + 1),
            Some(b',') => i += 1,
            Some(&c) => {
                return Run {
                    end: RunEnd::NeedSeparator,
                    pos: after_event,
                    error: Some(sink.malformed(
                        base + i as u64,
                        format!(
                            "expected ',' or ']' between events, found '{}'",
                            (c as char).escape_default()
                        ),
                    )),
                }
            }
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return done(RunEnd::NeedEvent, i);
        }
        if stop.is_some_and(|s| i >= s) {
            return done(RunEnd::Stop, i);
        }
    }
}

/// Likely event starts that cut `b[from..]` into up to `parts` pieces: the `{` of a
/// `,` + whitespace-with-a-newline + `{`, searched near each even split point.
pub(super) fn cuts(b: &[u8], from: usize, parts: usize) -> Vec<usize> {
    let len = b.len() - from;
    let mut out: Vec<usize> = Vec::new();
    for k in 1..parts {
        let mut at = from + len * k / parts;
        if out.last().is_some_and(|&l| at <= l) {
            continue;
        }
        let limit = (at + (1 << 16)).min(b.len());
        while let Some(nl) = memchr::memchr(b'\n', &b[at..limit]).map(|o| at + o) {
            at = nl + 1;
            let mut before = nl;
            while before > from && b[before - 1].is_ascii_whitespace() {
                before -= 1;
            }
            let mut after = nl + 1;
            while after < b.len() && b[after].is_ascii_whitespace() {
                after += 1;
            }
            if before > from && b[before - 1] == b',' && b.get(after) == Some(&b'{') {
                out.push(after);
                break;
            }
        }
    }
    out
}

/// A sink for a speculative part, merged into the main one once its cut is proven.
pub(super) fn part_sink(path: &Path, string_bytes: u64) -> Sink {
    Sink {
        path: path.to_path_buf(),
        string_bytes,
        strings: Interner::new(),
        launches: Default::default(),
        trace: Default::default(),
        events: 0,
        skipped: Default::default(),
        rounded: 0,
        domains: Vec::new(),
        unread: Default::default(),
        comm_ops: Vec::new(),
        comm_kernels: Vec::new(),
    }
}

impl Sink {
    /// Moves another sink's records (which came later in the file) to the end of this one's,
    /// re-interning its names. `other` keeps its vectors' capacity for reuse.
    pub(super) fn absorb(&mut self, other: &mut Sink) {
        let map: Vec<StrId> = other
            .strings
            .as_slice()
            .iter()
            .map(|s| self.strings.intern(s))
            .collect();
        let m = |id: StrId| map.get(id as usize).copied().unwrap_or(id);
        let launches: Vec<LaunchId> = other
            .launches
            .as_slice()
            .iter()
            .map(|l| self.launches.intern(*l))
            .collect();
        let t = &mut other.trace;
        for k in &mut t.kernels {
            k.name = m(k.name);
            k.launch = launches.get(k.launch as usize).copied().unwrap_or(k.launch);
        }
        for a in &mut t.api_calls {
            a.name = m(a.name);
        }
        for r in &mut t.ranges {
            r.name = m(r.name);
        }
        for o in &mut t.overheads {
            o.kind = m(o.kind);
        }
        for o in &mut t.host_ops {
            o.name = m(o.name);
        }
        for mk in &mut t.marks {
            mk.name = m(mk.name);
        }
        let me = &mut self.trace;
        me.kernels.append(&mut t.kernels);
        me.memcpys.append(&mut t.memcpys);
        me.memsets.append(&mut t.memsets);
        me.api_calls.append(&mut t.api_calls);
        me.syncs.append(&mut t.syncs);
        me.ranges.append(&mut t.ranges);
        me.marks.append(&mut t.marks);
        me.overheads.append(&mut t.overheads);
        me.host_ops.append(&mut t.host_ops);
        me.memory.append(&mut t.memory);
        self.events += other.events;
        self.rounded += std::mem::take(&mut other.rounded);
        for (k, n) in std::mem::take(&mut other.skipped) {
            *self.skipped.entry(k).or_insert(0) += n;
        }
        // This sink's example of each unread value came earlier in the file: it is kept.
        for (k, (n, example)) in std::mem::take(&mut other.unread) {
            self.unread.entry(k).or_insert((0, example)).0 += n;
        }
        self.comm_ops.append(&mut other.comm_ops);
        self.comm_kernels.append(&mut other.comm_kernels);
    }

    /// Empties a part sink for the next block, keeping its vectors' capacity.
    pub(super) fn reset(&mut self) {
        let t = &mut self.trace;
        t.kernels.clear();
        t.memcpys.clear();
        t.memsets.clear();
        t.api_calls.clear();
        t.syncs.clear();
        t.ranges.clear();
        t.marks.clear();
        t.overheads.clear();
        t.host_ops.clear();
        t.memory.clear();
        self.strings = Interner::new();
        self.launches = Default::default();
        self.events = 0;
        self.rounded = 0;
        self.skipped.clear();
        self.unread.clear();
        self.comm_ops.clear();
        self.comm_kernels.clear();
    }
}
