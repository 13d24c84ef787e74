//! Client-side cancellation: a [`CancellationToken`] the caller keeps, hands
//! to a step through its run options, and may trigger from any thread while
//! the step runs (TensorFlow's CancellationManager, reduced to one token per
//! caller).
//!
//! Owns: the token and its callback registry. Must not know what a callback
//! does: the master registers one that aborts every part of the step, the
//! remote session one that asks its master to do so.

use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

type Callback = Box<dyn FnOnce() + Send>;

/// Cancels the steps it was given to. Clones share one state; a cancelled
/// token stays cancelled, so a step started with it fails at once.
#[derive(Clone, Default)]
pub struct CancellationToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    next_key: AtomicU64,
    callbacks: Mutex<Vec<(u64, Callback)>>,
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancellationToken {
    pub fn new() -> CancellationToken {
        CancellationToken::default()
    }

    /// Cancels every step registered now and any started later with this
    /// token. Callbacks run on this thread, each once.
    pub fn cancel(&self) {
        let callbacks = {
            let mut callbacks = self.inner.callbacks.lock();
            // Set under the lock: a registration either sees the flag or
            // lands in the list taken here, never neither.
            self.inner.cancelled.store(true, Ordering::Release);
            std::mem::take(&mut *callbacks)
        };
        for (_, callback) in callbacks {
            callback();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Runs `callback` when the token is cancelled, unless the returned
    /// registration is dropped first. Returns None without keeping the
    /// callback if the token is already cancelled: the caller fails at once.
    pub fn register(&self, callback: impl FnOnce() + Send + 'static) -> Option<CancelRegistration> {
        let mut callbacks = self.inner.callbacks.lock();
        if self.inner.cancelled.load(Ordering::Acquire) {
            return None;
        }
        let key = self.inner.next_key.fetch_add(1, Ordering::Relaxed);
        callbacks.push((key, Box::new(callback)));
        Some(CancelRegistration { token: self.clone(), key })
    }
}

/// Keeps a callback registered; dropping it (the step ended) removes it.
pub struct CancelRegistration {
    token: CancellationToken,
    key: u64,
}

impl Drop for CancelRegistration {
    fn drop(&mut self) {
        self.token.inner.callbacks.lock().retain(|(key, _)| *key != self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn runs_live_callbacks_once_and_refuses_late_registrations() {
        let token = CancellationToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let live = {
            let calls = calls.clone();
            token.register(move || {
                calls.fetch_add(1, Ordering::SeqCst);
            })
        };
        let dropped = {
            let calls = calls.clone();
            token.register(move || {
                calls.fetch_add(100, Ordering::SeqCst);
            })
        };
        drop(dropped);
        token.clone().cancel();
        token.cancel();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "only the live callback runs, once");
        assert!(token.is_cancelled());
        assert!(token.register(|| {}).is_none(), "a cancelled token refuses new steps");
        drop(live);
    }
}
