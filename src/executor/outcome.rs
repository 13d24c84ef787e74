//! How one partition's run of a step ends: the first error recorded, and
//! the completion callback, called once when nothing is left to run.
//!
//! Owns: [`Outcome`]. Shared by the plain run loop (`run.rs`) and the
//! control-flow one (`control_flow.rs`); must not schedule anything.

use super::barrier::StepDone;
use super::step::StepContext;
use crate::error::Status;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) struct Outcome {
    failed: AtomicBool,
    status: Mutex<Option<Status>>,
    done: Mutex<Option<StepDone>>,
}

impl Outcome {
    pub fn new(done: StepDone) -> Outcome {
        Outcome { failed: AtomicBool::new(false), status: Mutex::new(None), done: Mutex::new(Some(done)) }
    }

    /// Whether some node failed: nothing more should run.
    #[inline]
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Records a failure; the first one is the step's error, and aborts
    /// the step's rendezvous at once: a `_Recv` of this partition waiting
    /// for a peer that waits for this partition's sends would otherwise
    /// keep the step from ending (TensorFlow's executor aborts the same way).
    pub fn fail(&self, status: Status, step: &StepContext) {
        let first = {
            let mut recorded = self.status.lock();
            let first = recorded.is_none() && !self.failed.load(Ordering::Acquire);
            if recorded.is_none() {
                *recorded = Some(status.clone());
            }
            first
        };
        self.failed.store(true, Ordering::Release);
        if first {
            // Outside the lock: aborting runs waiting receivers' callbacks,
            // which may fail here again.
            step.rendezvous.abort(status);
        }
    }

    /// Calls the completion callback (once) with the step's result: its
    /// first error, else its cancellation, else success.
    pub fn finish(&self, step: &StepContext) {
        let status = self.status.lock().take();
        let result = match (status, step.cancel_status()) {
            (Some(e), _) => Err(e),
            (None, Some(c)) => Err(c.clone()),
            (None, None) => Ok(()),
        };
        if let Some(done) = self.done.lock().take() {
            done(result);
        }
    }
}
