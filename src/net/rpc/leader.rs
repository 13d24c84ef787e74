//! [`LeaderLock`]: who reads a client connection (the leader of the
//! leader/follower scheme in `client.rs`), and the request ids its own
//! calls take.
//!
//! Owns: the reader state behind the lock and the leader's id sequence.
//! Must not read or send anything itself.
//!
//! Why not a `Mutex`: the lock is only ever tried, never waited for
//! (followers wait on their own call slots), so it needs no parking; and
//! a small call's round trip takes and releases it once, on the path
//! between one call's answer and the next call's request. Here taking it
//! is one locked instruction and releasing it another, which also orders
//! the release before the leader's look at the waiting followers
//! (`Client::wake_followers`): a mutex's unlock followed by a
//! read-modify-write of the waiting count cost two. Ids likewise: the
//! leader numbers its calls from a plain counter it alone touches (odd
//! ids), other callers from an atomic one (even ids), so a leading call
//! takes no locked instruction for its id.

use crate::net::reader::FrameReader;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The reader state only the leader touches.
pub(crate) struct Leading {
    pub(crate) reader: FrameReader,
    /// The next id a leading call takes (odd).
    next_id: u64,
}

impl Leading {
    /// A request id for a call the leader makes: odd, never one that
    /// [`FollowerIds`] hands out.
    pub(crate) fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 2;
        id
    }
}

pub(crate) struct LeaderLock {
    held: AtomicBool,
    leading: UnsafeCell<Leading>,
}

// SAFETY: `leading` is reached only through a `LeaderGuard`, and `held`
// admits one guard at a time (its `Acquire` swap pairs with the last
// guard's releasing swap), so the state moves between threads, never
// shared.
unsafe impl Sync for LeaderLock {}

impl LeaderLock {
    pub(crate) fn new(reader: FrameReader) -> LeaderLock {
        LeaderLock { held: AtomicBool::new(false), leading: UnsafeCell::new(Leading { reader, next_id: 1 }) }
    }

    /// The lock, if nobody holds it.
    pub(crate) fn try_lock(&self) -> Option<LeaderGuard<'_>> {
        // A plain look first: followers that find it held do not write
        // the line the leader releases.
        if self.held.load(Ordering::Relaxed) || self.held.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(LeaderGuard { lock: self })
    }

    /// Whether a leader holds it now (`SeqCst`: see the module header).
    pub(crate) fn is_locked(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

/// The held lock. Dropping it releases the lock with a `SeqCst` swap,
/// so a `SeqCst` load after the drop (the waiting followers' count) is
/// ordered after the release.
pub(crate) struct LeaderGuard<'a> {
    lock: &'a LeaderLock,
}

impl std::ops::Deref for LeaderGuard<'_> {
    type Target = Leading;
    fn deref(&self) -> &Leading {
        // SAFETY: this guard is the only one (`try_lock`), so nothing else
        // reaches the state while it lives.
        unsafe { &*self.lock.leading.get() }
    }
}

impl std::ops::DerefMut for LeaderGuard<'_> {
    fn deref_mut(&mut self) -> &mut Leading {
        // SAFETY: as `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.lock.leading.get() }
    }
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        let was_held = self.lock.held.swap(false, Ordering::SeqCst);
        debug_assert!(was_held, "a leader guard released an unheld lock");
    }
}

/// Ids for calls made by anyone but the leader: even, never one the
/// leader's [`Leading::next_id`] takes.
pub(crate) struct FollowerIds(AtomicU64);

impl FollowerIds {
    pub(crate) fn new() -> FollowerIds {
        FollowerIds(AtomicU64::new(2))
    }

    pub(crate) fn next(&self) -> u64 {
        self.0.fetch_add(2, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::frame::FrameLimits;

    fn lock() -> LeaderLock {
        LeaderLock::new(FrameReader::new(FrameLimits::default(), 4096, None).unwrap())
    }

    #[test]
    fn one_leader_at_a_time_and_the_lock_comes_back() {
        let lock = lock();
        let guard = lock.try_lock().unwrap();
        assert!(lock.is_locked());
        assert!(lock.try_lock().is_none());
        drop(guard);
        assert!(!lock.is_locked());
        assert!(lock.try_lock().is_some());
    }

    #[test]
    fn leader_and_follower_ids_never_meet() {
        let lock = lock();
        let followers = FollowerIds::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(lock.try_lock().unwrap().next_id()));
            assert!(seen.insert(followers.next()));
        }
    }

    /// Threads take turns leading: each increments a counter in the
    /// state only while it holds the lock, so no increment is lost.
    #[test]
    fn the_state_is_never_shared() {
        let lock = lock();
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    let mut done = 0;
                    while done < rounds {
                        if let Some(mut guard) = lock.try_lock() {
                            guard.next_id();
                            done += 1;
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                });
            }
        });
        assert_eq!(lock.try_lock().unwrap().next_id(), 1 + 2 * 3 * rounds);
    }
}
