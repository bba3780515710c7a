//! Progress on stderr for long work (reading a trace, walking a tree): one line rewritten in
//! place when stderr is a terminal (at most every 100 ms), otherwise a line every 2 s once the
//! work has taken over a second, so a long run is never silent and a short one prints nothing.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub(super) struct ProgressLine {
    started: Instant,
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl ProgressLine {
    pub(super) fn new() -> ProgressLine {
        ProgressLine {
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    /// Whether the progress line is rewritten in place (stderr is a terminal).
    pub(super) fn live(&self) -> bool {
        self.tty
    }

    /// Prints the line `line` makes, when one is due.
    pub(super) fn show(&mut self, line: impl FnOnce() -> String) {
        let now = Instant::now();
        if !self.tty && now.duration_since(self.started) < Duration::from_secs(1) {
            return;
        }
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(2)
        };
        if self.last.is_some_and(|l| now.duration_since(l) < every) {
            return;
        }
        self.last = Some(now);
        self.shown = true;
        if self.tty {
            eprint!("\r{}\x1b[K", line());
        } else {
            eprintln!("{}", line());
        }
    }

    /// Clears a live line; the time the work took, when it was over a second (worth saying).
    pub(super) fn finish(self) -> Option<Duration> {
        if self.shown && self.tty {
            eprint!("\r\x1b[K");
        }
        let took = self.started.elapsed();
        (took > Duration::from_secs(1)).then_some(took)
    }
}
