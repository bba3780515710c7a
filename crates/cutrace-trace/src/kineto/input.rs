//! The bytes of a Kineto file: gzip members one after another, a count of bytes read for
//! progress, and a chunked window over the stream with absolute offsets for messages.

use std::io::Read;

use super::PROGRESS_EVERY;
use crate::progress::Progress;

/// Gzip members one after another (as `gzip` concatenates them); bytes after the last member
/// that do not start another one end the stream, and are flagged, rather than read as a member
/// cut off.
pub(super) struct GzMembers<'t, R: std::io::BufRead> {
    inner: Option<R>,
    member: Option<flate2::bufread::GzDecoder<R>>,
    trailing: &'t std::cell::Cell<bool>,
}

impl<'t, R: std::io::BufRead> GzMembers<'t, R> {
    pub(super) fn new(inner: R, trailing: &'t std::cell::Cell<bool>) -> Self {
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
pub(super) struct CountingReader<'p, R> {
    pub(super) inner: R,
    pub(super) count: u64,
    pub(super) total: Option<u64>,
    pub(super) next_report: u64,
    pub(super) progress: Progress<'p>,
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
pub(super) struct Input<R> {
    pub(super) reader: R,
    /// Always initialized up to its length; `buf[..end]` holds input.
    pub(super) buf: Vec<u8>,
    pub(super) end: usize,
    pub(super) pos: usize,
    /// Absolute offset of `buf[0]` in the (decompressed) stream.
    pub(super) base: u64,
    pub(super) eof: bool,
    /// Bytes read per refill (tests make it tiny so values straddle every boundary).
    pub(super) chunk: usize,
    /// Most bytes one value may hold in the buffer (the `event-bytes` limit).
    pub(super) max_value: usize,
}

impl<R: Read> Input<R> {
    /// Reads more input, keeping `buf[pos..]`. Returns false at end of input.
    pub(super) fn refill(&mut self) -> std::io::Result<bool> {
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
    pub(super) fn rest(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
}
