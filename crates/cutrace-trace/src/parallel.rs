//! The one work queue: a few threads share a list of items, each taking the next index from an
//! atomic counter as it comes free, so one slow item (a large rank, a dense block) does not hold
//! back the items behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::limits::MAX_THREADS;

/// Calls `f(i, &mut items[i])` once for every item, on up to `threads` threads (at least one, at
/// most one per item and at most [`MAX_THREADS`]); the calling thread is one of them. With one
/// thread the items are done in order on the calling thread. A panic in `f` reaches the caller
/// once every thread has stopped, as in [`std::thread::scope`].
pub fn for_each<T: Send>(items: &mut [T], threads: usize, f: impl Fn(usize, &mut T) + Sync) {
    let threads = threads.clamp(1, items.len().clamp(1, MAX_THREADS));
    if threads == 1 {
        items.iter_mut().enumerate().for_each(|(i, x)| f(i, x));
        return;
    }
    // One lock per item, taken once by the thread that drew its index: never contended, it only
    // lets each thread reach its own item.
    let slots: Vec<Mutex<&mut T>> = items.iter_mut().map(Mutex::new).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = slots.get(i) else { break };
        let mut item = slot.lock().unwrap_or_else(PoisonError::into_inner);
        f(i, &mut item);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::thread::ThreadId;

    #[test]
    fn every_item_is_done_once_with_its_own_index() {
        for threads in [0, 1, 2, 3, 8, 1000] {
            for n in [0, 1, 2, 7, 100] {
                let mut items: Vec<(usize, u32)> = (0..n).map(|i| (i, 0)).collect();
                for_each(&mut items, threads, |i, (own, times)| {
                    assert_eq!(i, *own);
                    *times += 1;
                });
                assert!(items.iter().all(|&(_, t)| t == 1), "{threads} threads, {n}");
            }
        }
    }

    #[test]
    fn threads_are_capped_by_the_items_and_the_limit() {
        let used = |n: usize, threads: usize| {
            let ids = Mutex::new(HashSet::<ThreadId>::new());
            let calls = AtomicUsize::new(0);
            let mut items = vec![(); n];
            for_each(&mut items, threads, |_, _| {
                ids.lock().unwrap().insert(std::thread::current().id());
                // Hold each item a moment, so that the threads started do take items.
                calls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(5));
            });
            assert_eq!(calls.load(Ordering::Relaxed), n);
            ids.into_inner().unwrap().len()
        };
        assert_eq!(used(5, 1), 1);
        assert!(used(3, 64) <= 3);
        assert!(used(MAX_THREADS + 10, MAX_THREADS * 4) <= MAX_THREADS);
    }

    #[test]
    fn one_thread_runs_in_order_on_the_caller() {
        let me = std::thread::current().id();
        let order = Mutex::new(Vec::new());
        let mut items = vec![(); 6];
        for_each(&mut items, 1, |i, _| {
            assert_eq!(std::thread::current().id(), me);
            order.lock().unwrap().push(i);
        });
        assert_eq!(order.into_inner().unwrap(), (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn a_slow_item_does_not_hold_back_the_others() {
        // Item 0 waits until every other item is done: with a shared queue the other thread
        // takes them all, where a fixed split of 0..n would wait forever on its half.
        let done = AtomicUsize::new(0);
        let mut items = vec![(); 9];
        for_each(&mut items, 2, |i, _| {
            if i == 0 {
                while done.load(Ordering::Acquire) < 8 {
                    std::thread::yield_now();
                }
            } else {
                done.fetch_add(1, Ordering::Release);
            }
        });
        assert_eq!(done.into_inner(), 8);
    }

    // The payload is the item's own on the calling thread, the scope's on another.
    #[test]
    #[should_panic]
    fn a_panic_reaches_the_caller() {
        let mut items = vec![(); 8];
        for_each(&mut items, 4, |i, _| assert!(i != 3, "item {i}"));
    }
}
