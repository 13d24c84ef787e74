//! Deadlines enforced where a step runs: a worker cancels its part of a step
//! when the step's deadline passes, even if the master that set it is gone
//! and will never send the abort.
//!
//! Owns: one timer thread per process (started on first use) and its table
//! of pending expiries. Must not know what expiring means: callers register
//! a callback, and drop the returned guard when the step ended in time.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

type Expiry = Box<dyn FnOnce() + Send>;

struct Timer {
    /// By (deadline, registration number): the first entry fires first.
    pending: Mutex<BTreeMap<(Instant, u64), Expiry>>,
    changed: Condvar,
    next: AtomicU64,
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            pending: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            next: AtomicU64::new(0),
        }));
        std::thread::Builder::new()
            .name("step-deadlines".into())
            .spawn(move || timer.run())
            .expect("start the step deadline thread");
        timer
    })
}

impl Timer {
    fn run(&self) {
        let mut pending = self.pending.lock();
        loop {
            let now = Instant::now();
            match pending.first_key_value().map(|(key, _)| *key) {
                Some(key) if key.0 <= now => {
                    if let Some(expiry) = pending.remove(&key) {
                        // Unlocked: the callback may register or drop guards.
                        parking_lot::MutexGuard::unlocked(&mut pending, expiry);
                    }
                }
                Some((at, _)) => {
                    self.changed.wait_until(&mut pending, at);
                }
                None => self.changed.wait(&mut pending),
            }
        }
    }
}

/// Runs `expiry` on the timer thread at `deadline` unless the guard is
/// dropped first.
pub fn call_at(deadline: Instant, expiry: impl FnOnce() + Send + 'static) -> DeadlineGuard {
    let timer = timer();
    let key = (deadline, timer.next.fetch_add(1, Ordering::Relaxed));
    let mut pending = timer.pending.lock();
    let earliest = pending.first_key_value().is_none_or(|(first, _)| key < *first);
    pending.insert(key, Box::new(expiry));
    drop(pending);
    if earliest {
        timer.changed.notify_one();
    }
    DeadlineGuard { key }
}

/// Dropping it (the step ended) withdraws the expiry if it has not run.
pub struct DeadlineGuard {
    key: (Instant, u64),
}

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        timer().pending.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn fires_in_deadline_order_unless_withdrawn() {
        let fired = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let record = |tag: u32| {
            let fired = fired.clone();
            move || fired.lock().push(tag)
        };
        let late = call_at(start + Duration::from_millis(60), record(2));
        let early = call_at(start + Duration::from_millis(20), record(1));
        let withdrawn = call_at(start + Duration::from_millis(40), record(99));
        drop(withdrawn);
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let _last = call_at(start + Duration::from_millis(80), move || {
            d.store(1, Ordering::SeqCst);
        });
        while done.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "the timer never fired");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(start.elapsed() >= Duration::from_millis(80));
        assert_eq!(*fired.lock(), vec![1, 2]);
        drop((early, late));
    }
}
