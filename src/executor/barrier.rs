//! ExecutorBarrier: one per step, counts the partitions (one per device),
//! runs one completion callback when the last finishes, keeps the first
//! error, and on that error cancels the step so no Recv waits forever.
//!
//! Owns: the join of a step's partitions. Must not schedule work.

use super::step::StepContext;
use crate::error::{Code, Result, Status};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub type StepDone = Box<dyn FnOnce(Result<()>) + Send>;

pub struct ExecutorBarrier {
    remaining: AtomicUsize,
    first_error: Mutex<Option<Status>>,
    step: Arc<StepContext>,
    done: Mutex<Option<StepDone>>,
}

impl ExecutorBarrier {
    pub fn new(partitions: usize, step: Arc<StepContext>, done: StepDone) -> Arc<ExecutorBarrier> {
        assert!(partitions > 0, "a barrier joins at least one partition");
        Arc::new(ExecutorBarrier {
            remaining: AtomicUsize::new(partitions),
            first_error: Mutex::new(None),
            step,
            done: Mutex::new(Some(done)),
        })
    }

    /// The callback one partition calls when it ends.
    pub fn partition_done(self: &Arc<Self>, result: Result<()>) {
        if let Err(status) = result {
            let mut first = self.first_error.lock();
            // A real error beats the cancellations it caused elsewhere.
            let replace = match &*first {
                None => true,
                Some(old) => old.code == Code::Cancelled && status.code != Code::Cancelled,
            };
            if replace {
                *first = Some(status.clone());
            }
            drop(first);
            self.step.cancel(status);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let result = match self.first_error.lock().take() {
                Some(e) => Err(e),
                None => Ok(()),
            };
            if let Some(done) = self.done.lock().take() {
                done(result);
            }
        }
    }
}
