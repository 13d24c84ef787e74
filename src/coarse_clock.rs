//! The coarse monotonic clock, for times on a step's path that need
//! milliseconds at most: when a session was last used (released after
//! minutes without a step), when a client pings its master next (every
//! second a step runs). On the 2 vCPU Intel Xeon 6/207 VM a coarse read
//! takes 6-8 ns against 25-28 ns for `Instant::now()`, and these times
//! would cost a remote step four precise reads.
//!
//! Owns: reading `CLOCK_MONOTONIC_COARSE`. Must not know what is stamped
//! or when an idle thing is released.

use nix::time::{ClockId, clock_gettime};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The coarse monotonic clock in milliseconds (it moves every 1-10 ms,
/// the kernel's tick). Where it cannot be read (never on Linux since
/// 2.6.32), the precise clock since first use.
pub fn now_ms() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE) {
        Ok(t) => (t.tv_sec() as u64).saturating_mul(1000).saturating_add(t.tv_nsec() as u64 / 1_000_000),
        Err(_) => {
            static EPOCH: OnceLock<Instant> = OnceLock::new();
            EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
        }
    }
}

/// The last time something was used, to a few milliseconds.
#[derive(Debug)]
pub struct LastUsed {
    at_ms: AtomicU64,
}

impl LastUsed {
    /// Used now.
    pub fn now() -> LastUsed {
        LastUsed { at_ms: AtomicU64::new(now_ms()) }
    }

    /// Marks it used now. Concurrent stamps may land in either order: they
    /// differ by less than the clock's resolution.
    pub fn touch(&self) {
        self.at_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// How long since it was last used (zero if a stamp is newer than this
    /// read of the clock).
    pub fn idle_for(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.at_ms.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_in_milliseconds() {
        let before = now_ms();
        std::thread::sleep(Duration::from_millis(60));
        let after = now_ms();
        assert!((40..10_000).contains(&(after - before)), "60 ms asleep: {before} -> {after}");
    }

    #[test]
    fn idle_time_grows_until_touched() {
        let used = LastUsed::now();
        assert!(used.idle_for() < Duration::from_millis(500), "just stamped: {:?}", used.idle_for());
        std::thread::sleep(Duration::from_millis(60));
        let idle = used.idle_for();
        // The coarse clock ticks every 1-10 ms (the kernel's HZ).
        assert!(idle >= Duration::from_millis(40), "60 ms asleep read as {idle:?}");
        used.touch();
        assert!(used.idle_for() < idle, "touched, yet idle for {:?} (was {idle:?})", used.idle_for());
    }
}
