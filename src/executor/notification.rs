//! A one-shot event a thread can wait on with a deadline: spin for a bounded
//! time (a step that ends within microseconds is seen without a wake-up),
//! then park.
//!
//! Owns: [`Notification`]. The protocol is the pool's (see README.md): the
//! waiter registers under the lock, then re-checks; the notifier publishes,
//! then looks for registered waiters.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Default bounded spin before parking.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

pub struct Notification {
    done: AtomicBool,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Default for Notification {
    fn default() -> Self {
        Notification::new()
    }
}

impl Notification {
    pub const fn new() -> Notification {
        Notification {
            done: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cond: Condvar::new(),
        }
    }

    pub fn notify(&self) {
        self.done.store(true, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.cond.notify_all();
        }
    }

    pub fn is_notified(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits until notified or `deadline` passes (None: no deadline). Returns
    /// whether it was notified.
    pub fn wait_until(&self, deadline: Option<Instant>, spin: Duration) -> bool {
        // Often notified already (a master that drove its step's last part
        // itself): then no clock is read.
        if self.is_notified() {
            return true;
        }
        let spin_until = Instant::now() + spin;
        let mut rounds = 0u32;
        while Instant::now() < spin_until {
            if self.is_notified() {
                return true;
            }
            std::hint::spin_loop();
            rounds += 1;
            if rounds % 256 == 0 {
                std::thread::yield_now();
            }
        }
        let mut guard = self.lock.lock();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            if self.done.load(Ordering::SeqCst) {
                break;
            }
            match deadline {
                Some(d) => {
                    if Instant::now() >= d || self.cond.wait_until(&mut guard, d).timed_out() {
                        break;
                    }
                }
                None => {
                    // Re-check now and then; the protocol needs no timeout.
                    self.cond.wait_for(&mut guard, Duration::from_secs(1));
                }
            }
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        self.done.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn wakes_a_parked_waiter_and_honours_deadlines() {
        let n = Arc::new(Notification::new());
        let n2 = n.clone();
        let t =
            std::thread::spawn(move || n2.wait_until(Some(Instant::now() + Duration::from_secs(10)), Duration::ZERO));
        std::thread::sleep(Duration::from_millis(20));
        n.notify();
        assert!(t.join().unwrap());
        let never = Notification::new();
        let start = Instant::now();
        assert!(!never.wait_until(Some(start + Duration::from_millis(20)), Duration::from_micros(10)));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }
}
