//! A bounded pool of pre-zeroed activity buffers.
//!
//! CUPTI asks for buffers on the application's threads, so taking one must be quick: a short
//! mutex and a pop. Buffers are zeroed by the writer thread before they come back (CUPTI is told
//! so, and skips zeroing them itself on the application's thread). When the bound is reached,
//! the request is refused and counted: CUPTI then drops records and counts them too.

use std::alloc::{alloc_zeroed, Layout};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// CUPTI requires 8-byte aligned buffers.
const ALIGN: usize = 8;

pub struct Pool {
    size: usize,
    max: usize,
    free: Mutex<Vec<usize>>,
    allocated: AtomicUsize,
    pub refused: AtomicU64,
}

impl Pool {
    pub fn new(size: usize, max: usize) -> Pool {
        Pool {
            size,
            max,
            free: Mutex::new(Vec::with_capacity(max)),
            allocated: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    pub fn buffer_size(&self) -> usize {
        self.size
    }

    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    fn alloc(&self) -> Option<*mut u8> {
        let n = self.allocated.fetch_add(1, Ordering::AcqRel);
        if n >= self.max {
            self.allocated.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let layout = Layout::from_size_align(self.size, ALIGN).ok()?;
        // SAFETY: size is non-zero (≥ 1 MiB).
        let p = unsafe { alloc_zeroed(layout) };
        if p.is_null() {
            self.allocated.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(p)
    }

    /// Allocates `n` buffers ahead and touches every page, so first use costs no page faults on
    /// the application's threads. Called from the writer thread.
    pub fn prefill(&self, n: usize) {
        for _ in 0..n {
            let Some(p) = self.alloc() else { return };
            // SAFETY: p points to `size` bytes just allocated.
            unsafe {
                let mut off = 0;
                while off < self.size {
                    std::ptr::write_volatile(p.add(off), 0);
                    off += 4096;
                }
            }
            self.give(p);
        }
    }

    /// A zeroed buffer, or `None` when the pool is at its bound (counted).
    pub fn take(&self) -> Option<*mut u8> {
        if let Ok(mut f) = self.free.lock() {
            if let Some(p) = f.pop() {
                return Some(p as *mut u8);
            }
        }
        let p = self.alloc();
        if p.is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    /// Returns a buffer whose first `dirty` bytes were written; they are zeroed here.
    ///
    /// # Safety
    /// `p` must come from this pool's `take` and not be in use by CUPTI any more.
    pub unsafe fn put_back(&self, p: *mut u8, dirty: usize) {
        // SAFETY: `p` is one of this pool's buffers of `self.size` bytes, no longer CUPTI's.
        unsafe { std::ptr::write_bytes(p, 0, dirty.min(self.size)) };
        self.give(p);
    }

    fn give(&self, p: *mut u8) {
        // A poisoned lock means a panic elsewhere: leak rather than risk a double use.
        if let Ok(mut f) = self.free.lock() {
            f.push(p as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_reused() {
        let pool = Pool::new(1 << 20, 2);
        pool.prefill(1);
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert!(pool.take().is_none());
        assert_eq!(pool.refused.load(Ordering::Relaxed), 1);
        // SAFETY: byte 10 of a 1 MiB buffer this test took from the pool.
        unsafe { *a.add(10) = 7 };
        // SAFETY: `a` came from this pool's `take` and no CUPTI holds it.
        unsafe { pool.put_back(a, 64) };
        let c = pool.take().unwrap();
        assert_eq!(c, a);
        // SAFETY: as above, a byte of a buffer this test holds.
        assert_eq!(unsafe { *c.add(10) }, 0, "returned buffers are zeroed");
        let _ = b;
    }
}
