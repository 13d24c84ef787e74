//! Deadlines enforced where a step runs: a worker cancels its part of a step
//! when the step's deadline passes, even if the master that set it is gone
//! and will never send the abort.
//!
//! Owns: one timer thread per process (started on first use) and its table
//! of pending expiries. Must not know what expiring means: callers register
//! a callback, and drop the returned guard when the step ended in time.
//!
//! A registration wakes the timer thread only when the thread would
//! otherwise sleep past it. Steps with the same timeout register ever
//! later deadlines and withdraw each one as they end, so the thread wakes
//! about once a timeout, not once a step (a wake-up is a futex call on the
//! step's path and a thread that takes a core from the step's spinners).

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A deadline far enough away to mean "none" for a wait that needs an
/// instant. The same one every call (ten years past its first use), so a
/// step without a deadline reads no clock for it: on the VMs measured a
/// clock read costs 25-35 ns, about as much as a small kernel.
pub fn far_future() -> Instant {
    static FAR: OnceLock<Instant> = OnceLock::new();
    *FAR.get_or_init(|| Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600))
}

type Expiry = Box<dyn FnOnce() + Send>;

struct Timer {
    table: Mutex<Table>,
    changed: Condvar,
    next: AtomicU64,
    /// Times the thread woke from a wait (for tests).
    wakeups: AtomicU64,
}

struct Table {
    /// By (deadline, registration number): the first entry fires first.
    pending: BTreeMap<(Instant, u64), Expiry>,
    /// Until when the timer thread sleeps; `None` while it runs (it looks
    /// at the table again before it sleeps).
    sleeps_until: Option<SleepsUntil>,
}

#[derive(Clone, Copy)]
enum SleepsUntil {
    At(Instant),
    Forever,
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            table: Mutex::new(Table { pending: BTreeMap::new(), sleeps_until: None }),
            changed: Condvar::new(),
            next: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
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
        let mut table = self.table.lock();
        loop {
            let now = Instant::now();
            match table.pending.first_key_value().map(|(key, _)| *key) {
                Some(key) if key.0 <= now => {
                    if let Some(expiry) = table.pending.remove(&key) {
                        // Unlocked: the callback may register or drop guards.
                        parking_lot::MutexGuard::unlocked(&mut table, expiry);
                    }
                }
                Some((at, _)) => {
                    table.sleeps_until = Some(SleepsUntil::At(at));
                    self.changed.wait_until(&mut table, at);
                    self.woke(&mut table);
                }
                None => {
                    table.sleeps_until = Some(SleepsUntil::Forever);
                    self.changed.wait(&mut table);
                    self.woke(&mut table);
                }
            }
        }
    }

    fn woke(&self, table: &mut Table) {
        table.sleeps_until = None;
        self.wakeups.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `expiry` on the timer thread at `deadline` unless the guard is
/// dropped first.
pub fn call_at(deadline: Instant, expiry: impl FnOnce() + Send + 'static) -> DeadlineGuard {
    let timer = timer();
    let key = (deadline, timer.next.fetch_add(1, Ordering::Relaxed));
    let mut table = timer.table.lock();
    table.pending.insert(key, Box::new(expiry));
    let wake = match table.sleeps_until {
        Some(SleepsUntil::At(at)) => deadline < at,
        Some(SleepsUntil::Forever) => true,
        None => false,
    };
    drop(table);
    if wake {
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
        timer().table.lock().pending.remove(&self.key);
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

    /// Steps with one timeout, each withdrawing its deadline as it ends
    /// (so the table is empty at each registration): the thread sleeps
    /// until the first deadline it saw, not woken once a step.
    #[test]
    fn later_deadlines_do_not_wake_the_timer_thread() {
        let timer = timer();
        let start = Instant::now();
        // The thread sleeps until at most 10 s from now, then the step ends.
        let first = call_at(start + Duration::from_secs(10), || {});
        while !matches!(timer.table.lock().sleeps_until, Some(SleepsUntil::At(_))) {
            assert!(start.elapsed() < Duration::from_secs(10), "the timer thread never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(first);
        let before = timer.wakeups.load(Ordering::Relaxed);
        for i in 0..1000u64 {
            drop(call_at(start + Duration::from_secs(20) + Duration::from_micros(i), || {}));
        }
        let woke = timer.wakeups.load(Ordering::Relaxed) - before;
        // Other tests in this process may register earlier deadlines
        // meanwhile; a wake per registration would be 1000.
        assert!(woke < 50, "1000 later deadlines woke the timer thread {woke} times");
    }
}
