//! The doorbell: a futex word in shared memory that the producer bumps when
//! the consumer said it may sleep.
//!
//! Owns: the two futex calls (shared, not `FUTEX_PRIVATE`: the word lies in
//! a mapping two processes share). Must not decide when to sleep: the
//! channel spins first, under the same rules as the socket path
//! (`io::spin_pause`). A reader sleeps without a timeout: its own
//! connection's closing rings its doorbell, and so does the hang-up watch
//! (`hangup.rs`) when the peer's socket ends.
//!
//! Why no wake-up is lost: the consumer stores `sleeping = 1`, issues a
//! `SeqCst` fence, then looks for work; the producer publishes its
//! descriptor, issues a `SeqCst` fence, then reads `sleeping`. Of two
//! threads that each store then fence then load, at least one sees the
//! other's store: either the consumer sees the descriptor (and does not
//! sleep), or the producer sees `sleeping` and bumps `seq` before waking.
//! The consumer sleeps only while `seq` still holds the value it read
//! before it said it may sleep, so a bump between its check and its sleep
//! makes `FUTEX_WAIT` return at once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `timeout` (`None`: until
/// woken).
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let timespec = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let timespec_ptr = timespec.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the call's duration;
    // FUTEX_WAIT only reads it. A spurious or early return is harmless: the
    // caller re-checks its condition.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            timespec_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Bumps `word` and wakes whoever sleeps on it (in any process).
pub fn ring(word: &AtomicU32) {
    word.fetch_add(1, Ordering::Release);
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not access
    // memory beyond looking up its waiters.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, std::ptr::null::<u8>(), 0u32, 0u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_sleeper_and_a_stale_value_does_not_sleep() {
        let word = Arc::new(AtomicU32::new(0));
        let started = Instant::now();
        wait(&word, 1, None); // value differs: returns at once
        assert!(started.elapsed() < Duration::from_secs(1));
        let sleeper = {
            let word = word.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                while word.load(Ordering::Acquire) == 0 {
                    wait(&word, 0, None);
                }
                started.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        ring(&word);
        assert!(sleeper.join().unwrap() < Duration::from_secs(4));
    }
}
