//! The injected library's state in this process, as one value: where it is in its life
//! ([`Phase`]) and what happened to it on the way (forked into a child, its buffer callbacks
//! taken by another tool, CUPTI's subscriber slot held or given back). One atomic word holds it
//! all, so every callback reads one consistent state with one load, and every change is one
//! compare-and-swap.
//!
//! ```text
//!   NotStarted ──InitializeInjection──▶ Starting ──writer running──▶ Tracing
//!                                          │                           │ the writer gave up
//!                                          └────── start failed ──────▶ Untraced
//! ```
//! Beside the phase: `forked` (a child after fork(): it records nothing, the trace file is the
//! parent's), `callbacks_taken` (another tool registered its buffer callbacks: CUPTI's buffers
//! are its now), `subscribed` (cutrace holds the subscriber slot) and what a failed start did
//! with that slot ([`Release`]).

use std::sync::atomic::{AtomicU32, Ordering};

/// Where the library is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `InitializeInjection` has not run.
    NotStarted,
    /// It runs: CUPTI is being set up.
    Starting,
    /// CUPTI set up and the writer thread running: records are kept.
    Tracing,
    /// The start failed, or the writer could not open the part: nothing is recorded.
    Untraced,
}

/// What a start that failed after subscribing did with CUPTI's subscriber slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Nothing to give back (the start did not fail after subscribing).
    None,
    /// Given back: the program's own CUPTI tools work as without cutrace.
    Done,
    /// `cuptiUnsubscribe` failed: the program's tools get MULTIPLE_SUBSCRIBERS.
    Failed,
}

const PHASE_MASK: u32 = 0b11;
const FORKED: u32 = 1 << 2;
const CALLBACKS_TAKEN: u32 = 1 << 3;
const SUBSCRIBED: u32 = 1 << 4;
const RELEASE_SHIFT: u32 = 5;
const RELEASE_MASK: u32 = 0b11 << RELEASE_SHIFT;

fn phase_bits(p: Phase) -> u32 {
    match p {
        Phase::NotStarted => 0,
        Phase::Starting => 1,
        Phase::Tracing => 2,
        Phase::Untraced => 3,
    }
}

/// The state, one word.
pub struct Lifecycle(AtomicU32);

impl Lifecycle {
    pub const fn new() -> Lifecycle {
        Lifecycle(AtomicU32::new(0))
    }

    fn word(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// Applies `f` to the word until it sticks; returns the word before.
    fn update(&self, f: impl Fn(u32) -> u32) -> u32 {
        match self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| Some(f(w)))
        {
            Ok(w) | Err(w) => w,
        }
    }

    pub fn phase(&self) -> Phase {
        match self.word() & PHASE_MASK {
            0 => Phase::NotStarted,
            1 => Phase::Starting,
            2 => Phase::Tracing,
            _ => Phase::Untraced,
        }
    }

    /// `NotStarted` → `Starting`; false when the library had started already (the driver
    /// calls `InitializeInjection` once per process, but nothing stops a second call).
    pub fn begin(&self) -> bool {
        let want = phase_bits(Phase::Starting);
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                (w & PHASE_MASK == phase_bits(Phase::NotStarted))
                    .then_some((w & !PHASE_MASK) | want)
            })
            .is_ok()
    }

    /// `Starting` → `Tracing`: CUPTI is set up and the writer runs.
    pub fn traced(&self) {
        let to = phase_bits(Phase::Tracing);
        self.update(|w| {
            if w & PHASE_MASK == phase_bits(Phase::Starting) {
                (w & !PHASE_MASK) | to
            } else {
                w
            }
        });
    }

    /// Any phase → `Untraced`: the start failed, or the writer gave up.
    pub fn untraced(&self) {
        let to = phase_bits(Phase::Untraced);
        self.update(|w| (w & !PHASE_MASK) | to);
    }

    /// cutrace is recording in this process: tracing, and not a forked child.
    pub fn is_tracing(&self) -> bool {
        let w = self.word();
        w & PHASE_MASK == phase_bits(Phase::Tracing) && w & FORKED == 0
    }

    /// In a child after fork(). (Read in every CUPTI callback: a relaxed load.)
    pub fn is_forked(&self) -> bool {
        self.0.load(Ordering::Relaxed) & FORKED != 0
    }

    pub fn set_forked(&self) {
        self.update(|w| w | FORKED);
    }

    /// Another tool's buffer callbacks replaced cutrace's.
    pub fn callbacks_taken(&self) -> bool {
        self.word() & CALLBACKS_TAKEN != 0
    }

    pub fn set_callbacks_taken(&self) {
        self.update(|w| w | CALLBACKS_TAKEN);
    }

    /// cutrace holds this process's CUPTI subscriber slot.
    pub fn subscribed(&self) -> bool {
        self.word() & SUBSCRIBED != 0
    }

    pub fn set_subscribed(&self, held: bool) {
        self.update(|w| {
            if held {
                w | SUBSCRIBED
            } else {
                w & !SUBSCRIBED
            }
        });
    }

    pub fn release(&self) -> Release {
        match (self.word() & RELEASE_MASK) >> RELEASE_SHIFT {
            1 => Release::Done,
            2 => Release::Failed,
            _ => Release::None,
        }
    }

    /// What a failed start did with the slot; `Done` also clears `subscribed`.
    pub fn set_release(&self, r: Release) {
        let bits = match r {
            Release::None => 0,
            Release::Done => 1,
            Release::Failed => 2,
        } << RELEASE_SHIFT;
        self.update(|w| {
            let w = (w & !RELEASE_MASK) | bits;
            if r == Release::Done {
                w & !SUBSCRIBED
            } else {
                w
            }
        });
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_runs_once_and_ends_tracing_or_untraced() {
        let l = Lifecycle::new();
        assert_eq!(l.phase(), Phase::NotStarted);
        assert!(!l.is_tracing());
        assert!(l.begin());
        assert!(!l.begin(), "a second start is refused");
        assert_eq!(l.phase(), Phase::Starting);
        assert!(!l.is_tracing());
        l.traced();
        assert_eq!(l.phase(), Phase::Tracing);
        assert!(l.is_tracing());
        // The writer gave up: untraced for good, even if `traced` came again.
        l.untraced();
        l.traced();
        assert_eq!(l.phase(), Phase::Untraced);
        assert!(!l.is_tracing());
    }

    #[test]
    fn a_forked_child_is_not_tracing_and_keeps_the_rest() {
        let l = Lifecycle::new();
        assert!(l.begin());
        l.set_subscribed(true);
        l.traced();
        l.set_forked();
        assert!(l.is_forked());
        assert!(!l.is_tracing());
        assert_eq!(l.phase(), Phase::Tracing);
        assert!(l.subscribed());
        assert!(!l.callbacks_taken());
        l.set_callbacks_taken();
        assert!(l.callbacks_taken() && l.is_forked() && l.subscribed());
    }

    #[test]
    fn giving_the_slot_back_clears_the_subscription() {
        let l = Lifecycle::new();
        l.set_subscribed(true);
        assert_eq!(l.release(), Release::None);
        l.set_release(Release::Failed);
        assert_eq!(l.release(), Release::Failed);
        assert!(l.subscribed());
        l.set_release(Release::Done);
        assert_eq!(l.release(), Release::Done);
        assert!(!l.subscribed());
        // The phase is untouched by any of it.
        assert_eq!(l.phase(), Phase::NotStarted);
    }
}
