//! Reading and writing a stream within one deadline for a whole exchange, not per call: a peer
//! that sends (or takes) one byte just before each read's timeout would otherwise hold its
//! connection, and a thread, for ever.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A stream whose calls can be given a timeout.
pub trait Timeouts {
    fn set_read(&self, d: Option<Duration>) -> io::Result<()>;
    fn set_write(&self, d: Option<Duration>) -> io::Result<()>;
}

impl Timeouts for TcpStream {
    fn set_read(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn set_write(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
}

impl Timeouts for UnixStream {
    fn set_read(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn set_write(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
}

/// `stream`, every read and write of which must end by `until`; past it they fail with
/// `TimedOut`.
pub struct Deadline<'a, S> {
    stream: &'a S,
    until: Instant,
}

impl<'a, S: Timeouts> Deadline<'a, S> {
    pub fn new(stream: &'a S, within: Duration) -> Self {
        Deadline {
            stream,
            until: Instant::now() + within,
        }
    }

    /// The time left, or `TimedOut` when none is.
    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer took longer than its deadline",
            ));
        }
        Ok(left)
    }
}

/// A socket timeout reads as `WouldBlock` on Unix: it is the deadline's `TimedOut`.
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, e),
        _ => e,
    }
}

impl<S: Timeouts> Read for Deadline<'_, S>
where
    for<'b> &'b S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read(Some(self.left()?))?;
        let mut s = self.stream;
        s.read(buf).map_err(timed_out)
    }
}

impl<S: Timeouts> Write for Deadline<'_, S>
where
    for<'b> &'b S: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write(Some(self.left()?))?;
        let mut s = self.stream;
        s.write(buf).map_err(timed_out)
    }
    fn flush(&mut self) -> io::Result<()> {
        let mut s = self.stream;
        s.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that trickles a byte every 100 ms never lets a read time out, but the deadline
    /// still ends the exchange.
    #[test]
    fn a_trickling_peer_is_cut_off_at_the_deadline() {
        let (a, b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut b = b;
            for _ in 0..40 {
                if b.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let start = Instant::now();
        let mut d = Deadline::new(&a, Duration::from_millis(600));
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        let err = loop {
            match d.read(&mut buf) {
                Ok(0) => panic!("the peer ended first"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        let took = start.elapsed();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(!got.is_empty(), "some bytes came before the deadline");
        assert!(
            took >= Duration::from_millis(550) && took < Duration::from_secs(2),
            "{took:?}"
        );
        drop(a);
        t.join().unwrap();
    }
}
