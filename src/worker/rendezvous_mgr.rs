//! Per-step rendezvous on a worker, and the remote kind that forwards a
//! Send whose receiver lives in another task.
//!
//! Owns: [`RendezvousMgr`] (step id → rendezvous, created by whichever comes
//! first: the local RunGraph or a tensor pushed by a peer) and
//! [`WorkerRendezvous`]. The tensor exchange is push: the sender's task
//! sends the tensor as soon as it exists, so a Recv costs no request
//! round trip (see ARCHITECTURE.md for the measurement behind the choice).
//! Must not know the wire format: it calls a [`RemoteSend`].

use crate::cluster::task_of;
use crate::error::{Result, Status};
use crate::executor::{LocalRendezvous, Rendezvous, RendezvousKey};
use crate::ops::Value;
use crate::tensor::Tensor;
use crate::tensor::placement::SharedPlacement;
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Reaches the other tasks of one session: tensors pushed to the task
/// that will receive them, and aborts of a failed step.
pub trait RemoteSend: Send + Sync {
    /// `dst_task` is `/job:J/replica:R/task:T`; `tensor` is `None` for a
    /// dead value.
    fn send_remote(&self, dst_task: &str, step_id: u64, key: &RendezvousKey, tensor: Option<Tensor>) -> Result<()>;

    /// Tells `dst_task` that `step_id` failed here (best effort: the master
    /// aborts the step everywhere too).
    fn abort_remote(&self, dst_task: &str, step_id: u64, status: &Status);

    /// Memory that a tensor later sent to `dst_task` may be written into
    /// so that it crosses without a copy (a shared-memory ring), if any.
    fn output_placement(&self, _dst_task: &str) -> Option<SharedPlacement> {
        None
    }
}

/// Makes a session's [`RemoteSend`] from the cluster its master described.
pub trait RemoteTransport: Send + Sync {
    fn for_session(&self, session_handle: &str, cluster: &super::ClusterInfo) -> Arc<dyn RemoteSend>;
}

/// The way back to the task whose RunGraph started this step here: the
/// connection that request came on. Tensors for that task go back over it
/// instead of over a connection of our own to it, so its waiting thread
/// (which reads that connection for our answer anyway) receives them, and
/// no thread of its own has to be awake for ours.
#[derive(Clone)]
pub struct ReturnRoute {
    /// `/job:J/replica:R/task:T` of the requester.
    pub task: Arc<str>,
    pub send: Arc<dyn RemoteSend>,
}

/// A step's rendezvous on a worker: local table, plus forwarding of sends
/// addressed to other tasks.
pub struct WorkerRendezvous {
    local: LocalRendezvous,
    step_id: u64,
    task_name: Arc<str>,
    remote: Option<Arc<dyn RemoteSend>>,
    /// Set by the RunGraph of a whole step before it runs (never for
    /// partial runs: their later calls may find no one reading).
    return_route: OnceLock<ReturnRoute>,
    created: Instant,
}

impl WorkerRendezvous {
    /// Sends to `route.task` go over `route` for the rest of this step.
    pub fn set_return_route(&self, route: ReturnRoute) {
        let _ = self.return_route.set(route);
    }

    /// A tensor a peer pushed for this step (`None`: a dead value).
    pub fn deliver(&self, key: &RendezvousKey, tensor: Option<Tensor>) -> Result<()> {
        self.local.send(key, tensor.map_or(Value::Dead, Value::Tensor))
    }

    pub fn is_aborted(&self) -> bool {
        self.local.aborted().is_some()
    }
}

impl Rendezvous for WorkerRendezvous {
    fn send(&self, key: &RendezvousKey, value: Value) -> Result<()> {
        let Some(dst_task) = key.dst_device().map(task_of) else {
            return self.local.send(key, value);
        };
        if dst_task == &*self.task_name {
            return self.local.send(key, value);
        }
        let remote = self
            .remote
            .as_ref()
            .ok_or_else(|| Status::internal(format!("no transport to send '{}' to {dst_task}", key.as_str())))?;
        let tensor = match value {
            Value::Dead => None,
            value => Some(value.into_tensor()?),
        };
        match self.return_route.get() {
            Some(route) if &*route.task == dst_task => route.send.send_remote(dst_task, self.step_id, key, tensor),
            _ => remote.send_remote(dst_task, self.step_id, key, tensor),
        }
    }

    fn recv_async(&self, key: &RendezvousKey, done: crate::executor::rendezvous::RecvCallback) {
        self.local.recv_async(key, done)
    }

    fn output_placement(&self, recv_device: &str) -> Option<SharedPlacement> {
        let dst_task = task_of(recv_device);
        if dst_task == &*self.task_name {
            return None;
        }
        match self.return_route.get() {
            Some(route) if &*route.task == dst_task => route.send.output_placement(dst_task),
            _ => self.remote.as_ref()?.output_placement(dst_task),
        }
    }

    fn abort(&self, status: Status) {
        self.local.abort(status)
    }
}

/// Step id → rendezvous, for one worker session.
pub struct RendezvousMgr {
    task_name: Arc<str>,
    remote: Option<Arc<dyn RemoteSend>>,
    steps: Mutex<HashMap<u64, Arc<WorkerRendezvous>>>,
}

/// A rendezvous nobody cleaned up is dropped after this long (a step whose
/// master died before CleanupGraph).
const ABANDONED_AFTER: Duration = Duration::from_secs(600);

impl RendezvousMgr {
    pub fn new(task_name: &str, remote: Option<Arc<dyn RemoteSend>>) -> RendezvousMgr {
        RendezvousMgr { task_name: Arc::from(task_name), remote, steps: Mutex::new(HashMap::new()) }
    }

    /// The rendezvous of `step_id`, created if this is its first mention.
    pub fn find_or_create(&self, step_id: u64) -> Arc<WorkerRendezvous> {
        let mut steps = self.steps.lock();
        if steps.len() > 1024 {
            steps.retain(|_, r| r.created.elapsed() < ABANDONED_AFTER);
        }
        steps
            .entry(step_id)
            .or_insert_with(|| {
                Arc::new(WorkerRendezvous {
                    local: LocalRendezvous::new(),
                    step_id,
                    task_name: self.task_name.clone(),
                    remote: self.remote.clone(),
                    return_route: OnceLock::new(),
                    created: Instant::now(),
                })
            })
            .clone()
    }

    pub fn cleanup(&self, step_id: u64) {
        let removed = self.steps.lock().remove(&step_id);
        if let Some(r) = removed {
            r.abort(Status::cancelled(format!("step {step_id} was cleaned up")));
        }
    }

    /// Forgets a finished step's rendezvous (every Recv of it completed).
    pub fn remove(&self, step_id: u64) {
        self.steps.lock().remove(&step_id);
    }

    pub fn abort(&self, step_id: u64, status: Status) {
        self.find_or_create(step_id).abort(status);
    }

    pub fn abort_all(&self, status: Status) {
        let steps: Vec<_> = self.steps.lock().drain().map(|(_, r)| r).collect();
        for r in steps {
            r.abort(status.clone());
        }
    }

    pub fn len(&self) -> usize {
        self.steps.lock().len()
    }

    pub fn remote(&self) -> Option<&Arc<dyn RemoteSend>> {
        self.remote.as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
