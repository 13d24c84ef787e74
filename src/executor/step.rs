//! Step state shared by every partition of one step in this process: its
//! id, its rendezvous, the values handed in and out (the call frame), its
//! cancellation, and optional per-node stats.
//!
//! Owns: [`StepContext`], [`CallFrame`], [`Retvals`], [`NodeStats`]. Must
//! not schedule anything; executors read and write it.

use super::rendezvous::{LocalRendezvous, Rendezvous, RendezvousKey};
use crate::error::{Result, Status};
use crate::ops::Value;
use crate::tensor::placement::SharedPlacement;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where `_Arg` nodes get their values.
pub enum Args {
    /// All feeds are known when the step starts (by feed index; indices
    /// this process does not use may be empty).
    Ready(Vec<Option<Value>>),
    /// Feeds arrive later through the step's rendezvous under
    /// [`arg_key`] (partial runs).
    Partial,
}

/// The key under which a partial run delivers feed `index`.
pub fn arg_key(index: usize) -> RendezvousKey {
    RendezvousKey::raw(&format!("_arg;{index}"))
}

/// Where `_Retval` nodes leave their values; callers may wait on one.
pub struct Retvals {
    state: Mutex<RetvalState>,
    cond: Condvar,
}

struct RetvalState {
    values: Vec<Option<Value>>,
    failed: Option<Status>,
}

impl Retvals {
    pub fn new(count: usize) -> Retvals {
        Retvals { state: Mutex::new(RetvalState { values: vec![None; count], failed: None }), cond: Condvar::new() }
    }

    pub fn len(&self) -> usize {
        self.state.lock().values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn set(&self, index: usize, value: Value) -> Result<()> {
        let mut state = self.state.lock();
        let slot = state
            .values
            .get_mut(index)
            .ok_or_else(|| Status::internal(format!("retval index {index} out of range")))?;
        if slot.is_some() {
            return Err(Status::internal(format!("retval {index} set twice")));
        }
        *slot = Some(value);
        drop(state);
        self.cond.notify_all();
        Ok(())
    }

    /// Marks the step failed; waiters for values not yet set get `status`.
    pub fn fail(&self, status: Status) {
        let mut state = self.state.lock();
        if state.failed.is_none() {
            state.failed = Some(status);
        }
        drop(state);
        self.cond.notify_all();
    }

    /// Takes every value (after the step completed).
    pub fn take_all(&self) -> Vec<Option<Value>> {
        std::mem::take(&mut self.state.lock().values)
    }

    /// Waits for value `index` and takes it.
    pub fn wait_take(&self, index: usize, deadline: Option<Instant>) -> Result<Value> {
        let mut state = self.state.lock();
        loop {
            if let Some(v) = state.values.get_mut(index).and_then(Option::take) {
                return Ok(v);
            }
            if let Some(status) = &state.failed {
                return Err(status.clone());
            }
            match deadline {
                Some(d) => {
                    if self.cond.wait_until(&mut state, d).timed_out() {
                        return Err(Status::deadline_exceeded("timed out waiting for a partial-run fetch"));
                    }
                }
                None => {
                    self.cond.wait_for(&mut state, std::time::Duration::from_secs(1));
                }
            }
        }
    }
}

/// The values a step takes in and gives out.
pub struct CallFrame {
    pub args: Args,
    pub retvals: Retvals,
    /// Memory the step's caller will be answered from (the requester's
    /// shared-memory ring): a kernel whose output a `_Retval` returns may
    /// write it there, so the answer carries it without a copy.
    pub retval_placement: Option<SharedPlacement>,
}

/// The wall clock, µs since the Unix epoch: what step stats are stamped with.
pub fn wall_clock_us() -> u64 {
    epoch_us()
}

fn epoch_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The bytes a `_Recv` got, for its stats: a tensor's size, 0 for a dead
/// value or a failure.
pub(crate) fn received_bytes(result: &Result<Value>) -> u64 {
    match result {
        Ok(Value::Tensor(t)) => t.byte_len() as u64,
        _ => 0,
    }
}

/// Per-node timing for RunMetadata, recorded when a step asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStats {
    pub node: String,
    pub op: String,
    pub device: String,
    /// Microseconds since the Unix epoch (TensorFlow's `all_start_micros`),
    /// so the stats of one step's parts in different processes on a host
    /// line up: a tensor's crossing is its `_Recv`'s end minus its
    /// `_Send`'s start.
    pub start_us: u64,
    pub end_us: u64,
    pub thread: u32,
    /// The loop frame the node ran in ("" outside loops) and its iteration.
    pub frame: String,
    pub iter: u64,
    /// `_Send`/`_Recv` only (empty elsewhere): the rendezvous key, which a
    /// send and its receive share, so a trace can pair them across tasks.
    pub rendezvous_key: String,
    /// `_Send`/`_Recv` only: the tensor's bytes (0 for a dead value).
    pub bytes: u64,
}

/// One step, as seen by every executor in this process that runs part of it.
pub struct StepContext {
    pub step_id: u64,
    pub rendezvous: Arc<dyn Rendezvous>,
    pub frame: CallFrame,
    cancelled: AtomicBool,
    cancelled_from_outside: AtomicBool,
    cancel_status: OnceLock<Status>,
    stats: Option<Mutex<Vec<NodeStats>>>,
    /// When a step that collects stats started: the monotonic clock and the
    /// wall clock (microseconds since the Unix epoch). Read only for such
    /// steps: a clock read costs about as much as a small kernel.
    stats_started: Option<(Instant, u64)>,
}

impl StepContext {
    pub fn new(
        step_id: u64,
        rendezvous: Arc<dyn Rendezvous>,
        args: Args,
        num_retvals: usize,
        collect_stats: bool,
    ) -> StepContext {
        StepContext {
            step_id,
            rendezvous,
            frame: CallFrame { args, retvals: Retvals::new(num_retvals), retval_placement: None },
            cancelled: AtomicBool::new(false),
            cancelled_from_outside: AtomicBool::new(false),
            cancel_status: OnceLock::new(),
            stats: collect_stats.then(|| Mutex::new(Vec::new())),
            stats_started: collect_stats.then(|| (Instant::now(), epoch_us())),
        }
    }

    /// Lets kernels whose outputs are fetched write them into `placement`
    /// (see [`CallFrame::retval_placement`]).
    pub fn with_retval_placement(mut self, placement: Option<SharedPlacement>) -> StepContext {
        self.frame.retval_placement = placement;
        self
    }

    /// Now, for stats: the wall clock at the step's start plus the
    /// monotonic time since, so times within a step never run backwards.
    /// 0 for a step that collects none.
    pub fn stats_clock_us(&self) -> u64 {
        self.stats_started.map_or(0, |(started, epoch_us)| epoch_us + started.elapsed().as_micros() as u64)
    }

    /// A step with a fresh local rendezvous.
    pub fn local(step_id: u64, args: Args, num_retvals: usize, collect_stats: bool) -> StepContext {
        StepContext::new(step_id, Arc::new(LocalRendezvous::new()), args, num_retvals, collect_stats)
    }

    /// Stops the step: no further node starts, every Recv wakes with
    /// `status`. The first cancellation's status wins.
    pub fn cancel(&self, status: Status) {
        if self.cancel_status.set(status.clone()).is_ok() {
            self.cancelled.store(true, Ordering::Release);
            self.rendezvous.abort(status.clone());
            self.frame.retvals.fail(status);
        }
    }

    /// Cancels because someone else (the master, a peer task) said so: this
    /// process need not tell anyone else.
    pub fn cancel_from_outside(&self, status: Status) {
        self.cancelled_from_outside.store(true, Ordering::Release);
        self.cancel(status);
    }

    /// Whether the step was cancelled by [`StepContext::cancel_from_outside`].
    pub fn was_cancelled_from_outside(&self) -> bool {
        self.cancelled_from_outside.load(Ordering::Acquire)
    }

    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    pub fn cancel_status(&self) -> Option<&Status> {
        self.cancel_status.get()
    }

    pub fn collects_stats(&self) -> bool {
        self.stats.is_some()
    }

    pub fn record(&self, stats: NodeStats) {
        if let Some(s) = &self.stats {
            s.lock().push(stats);
        }
    }

    pub fn take_stats(&self) -> Vec<NodeStats> {
        self.stats.as_ref().map(|s| std::mem::take(&mut *s.lock())).unwrap_or_default()
    }
}
