//! Intra-op parallelism: a kernel's chunks spread over its device's pool
//! ([`IntraOpPool`] for [`ThreadPool`]), so one large MatMul can use every
//! thread and a step's last branch does not leave the others idle.
//!
//! Owns: the chunk-claiming protocol. Must not know what a chunk computes.
//!
//! The calling thread and up to `threads - 1` helper jobs claim chunk
//! indices from one counter; a chunk runs on whichever thread claimed it,
//! so nothing waits in a queue on behalf of the caller. The caller runs
//! chunks until none is left to claim, then waits only for chunks other
//! threads already claimed and are running: the wait is bounded by one
//! chunk's time and cannot deadlock, even when every pool thread is busy
//! (helpers that start late find nothing to claim and return). `f` borrows
//! the caller's stack; a helper touches it only after claiming a chunk,
//! and the caller does not return before every claimed chunk is done.

use super::notification::{DEFAULT_SPIN, Notification};
use super::pool::ThreadPool;
use crate::ops::IntraOpPool;
use parking_lot::Mutex;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

type ChunkFn = dyn Fn(usize) + Sync;

struct Chunks {
    total: usize,
    next: AtomicUsize,
    finished: AtomicUsize,
    all_finished: Notification,
    /// The caller's closure with its lifetime erased; see the module header
    /// for why it is alive whenever it is called.
    f: *const ChunkFn,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `f` points at a `Sync` closure that is only called (never moved
// or dropped) through a shared reference, and only while the caller of
// `run_chunks` is blocked waiting for every claimed chunk (module header).
// Every other field is Send + Sync.
unsafe impl Send for Chunks {}
// SAFETY: as above.
unsafe impl Sync for Chunks {}

impl Chunks {
    /// Claims and runs chunks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.total {
                return;
            }
            // SAFETY: chunk `i` is claimed and not yet counted finished, so
            // the caller of `run_chunks` is still waiting and `f` is alive.
            let f = unsafe { &*self.f };
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                self.panic.lock().get_or_insert(panic);
            }
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.total {
                self.all_finished.notify();
            }
        }
    }
}

impl IntraOpPool for ThreadPool {
    fn threads(&self) -> usize {
        self.size()
    }

    fn run_chunks(&self, chunks: usize, f: &(dyn Fn(usize) + Sync)) {
        if chunks == 0 {
            return;
        }
        let helpers = (chunks - 1).min(self.size().saturating_sub(1));
        if helpers == 0 {
            (0..chunks).for_each(f);
            return;
        }
        // SAFETY: only the lifetime is erased (same fat pointer layout);
        // see `Chunks::f`.
        let f: *const ChunkFn = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static ChunkFn>(f) };
        let state = Arc::new(Chunks {
            total: chunks,
            next: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            all_finished: Notification::new(),
            f,
            panic: Mutex::new(None),
        });
        for _ in 0..helpers {
            let state = state.clone();
            self.spawn(move || state.work());
        }
        state.work();
        // Only chunks already running elsewhere remain: no deadline needed,
        // each ends by itself.
        while !state.all_finished.wait_until(None, DEFAULT_SPIN) {}
        debug_assert_eq!(state.finished.load(Ordering::Acquire), chunks);
        if let Some(panic) = state.panic.lock().take() {
            resume_unwind(panic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::PoolOptions;
    use std::time::Duration;

    fn pool(threads: usize) -> ThreadPool {
        ThreadPool::new(PoolOptions {
            name: "intra".into(),
            threads,
            spin: Duration::from_micros(20),
            pin_first_cpu: None,
            cpus: None,
        })
        .unwrap()
    }

    #[test]
    fn every_chunk_runs_exactly_once() {
        let p = pool(4);
        for chunks in [0, 1, 2, 3, 7, 64, 1000] {
            let hits: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
            p.run_chunks(chunks, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "{chunks} chunks");
        }
    }

    #[test]
    fn chunks_really_run_on_several_threads_at_once() {
        // Each chunk waits (up to 10 s) for the other to arrive: both must be
        // running at the same time for either to see it.
        let p = pool(2);
        let arrived = AtomicUsize::new(0);
        let met = AtomicUsize::new(0);
        p.run_chunks(2, &|_| {
            arrived.fetch_add(1, Ordering::SeqCst);
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while arrived.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < until {
                std::thread::yield_now();
            }
            if arrived.load(Ordering::SeqCst) == 2 {
                met.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eq!(met.load(Ordering::SeqCst), 2, "the two chunks never ran at the same time");
    }

    #[test]
    fn a_panicking_chunk_is_reraised_after_every_chunk_finished() {
        let p = pool(3);
        let ran = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            p.run_chunks(16, &|i| {
                ran.fetch_add(1, Ordering::Relaxed);
                if i == 5 {
                    panic!("chunk 5 broke");
                }
            })
        }));
        assert!(result.is_err());
        assert_eq!(ran.load(Ordering::Relaxed), 16);
        // The pool still serves.
        let after = AtomicUsize::new(0);
        p.run_chunks(8, &|_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 8);
    }

    #[test]
    fn nested_use_from_busy_pool_threads_does_not_deadlock() {
        // Every pool thread is inside run_chunks at once: helpers queue
        // behind them, and each caller must finish its chunks alone.
        let p = Arc::new(pool(2));
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let (p2, tx) = (p.clone(), tx.clone());
            p.spawn(move || {
                let sum = AtomicUsize::new(0);
                p2.run_chunks(32, &|i| {
                    sum.fetch_add(i, Ordering::Relaxed);
                });
                tx.send(sum.load(Ordering::Relaxed)).unwrap();
            });
        }
        for _ in 0..4 {
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), (0..32).sum::<usize>());
        }
    }
}
