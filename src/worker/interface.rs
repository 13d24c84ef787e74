//! What a master asks of a worker: TensorFlow's WorkerService, as a Rust
//! trait. The in-process worker implements it with direct calls; the remote
//! one with RPCs. The master cannot tell which it talks to.
//!
//! Owns: [`WorkerInterface`] and its plain request/response structs. Values
//! are addressed by feed/fetch index (the `_Arg`/`_Retval` index of the
//! client graph), never by name, so a step does no string lookups.

use crate::error::Result;
use crate::executor::NodeStats;
use crate::graph::GraphSpec;
use crate::tensor::Tensor;
use std::time::Instant;

/// A device as the cluster sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttributes {
    pub name: String,
    pub device_type: String,
    pub incarnation: u64,
    pub memory_limit: u64,
}

/// A partial run's position in its sequence of RunGraph calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialRunFlags {
    /// The first call starts the step.
    pub first: bool,
    /// The last call waits for the step to end and releases it.
    pub last: bool,
}

pub struct RunGraphRequest {
    pub session_handle: String,
    pub graph_handle: String,
    pub step_id: u64,
    /// (feed index, value) for the `_Arg` nodes of this partition.
    pub feeds: Vec<(u32, Tensor)>,
    /// For partial runs: the fetch indices this call waits for. Ordinary
    /// runs return every `_Retval` of the partition.
    pub fetches: Vec<u32>,
    pub partial: Option<PartialRunFlags>,
    pub deadline: Option<Instant>,
    pub collect_stats: bool,
    /// How this step's tensors for the requesting task go back to it (set
    /// by the wire service for whole steps; `None`: the session's peers).
    pub return_route: Option<super::ReturnRoute>,
    /// Memory this call will be answered from (the requester's
    /// shared-memory ring, for whole steps): the partition's fetched
    /// tensors are written there. An in-process worker takes it from its
    /// master's caller; a remote worker's service sets its own from the
    /// connection the request came on (it never crosses the wire).
    pub reply_placement: Option<crate::tensor::placement::SharedPlacement>,
}

#[derive(Default)]
pub struct RunGraphResponse {
    /// (fetch index, value).
    pub fetches: Vec<(u32, Tensor)>,
    pub stats: Vec<NodeStats>,
}

pub type RunGraphDone = Box<dyn FnOnce(Result<RunGraphResponse>) + Send>;

/// A RunGraph call in flight whose answer nobody is reading yet: whoever
/// runs it waits for the answer (up to the deadline, or forever with none)
/// and calls the request's `done`. The transport has no receiver thread, so
/// a caller with nothing better to do drives the call itself, which saves
/// a thread wake-up on the critical path.
///
/// The driver also stops, failing the call with Cancelled, once its second
/// argument says the step was abandoned: a step that failed elsewhere never
/// waits on a frozen task.
pub type DriveCall = Box<dyn FnOnce(Option<Instant>, &dyn Fn() -> bool) + Send>;

/// The jobs and task addresses of a cluster, as a master tells a worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// (task name `/job:J/replica:0/task:T`, address `host:port`).
    pub tasks: Vec<(String, String)>,
}

/// TensorFlow's WorkerService.
pub trait WorkerInterface: Send + Sync {
    /// The task this worker is, e.g. `/job:worker/replica:0/task:1`.
    fn task_name(&self) -> &str;

    fn get_status(&self) -> Result<Vec<DeviceAttributes>>;

    /// The incarnation of the process serving this task now: a change means
    /// it restarted and lost its sessions. Reconnects if the connection died;
    /// fails (Unavailable, naming the task) when the task cannot be reached.
    fn incarnation(&self) -> Result<u64>;

    /// A round trip to the task, answered by `deadline`; returns its
    /// incarnation. What heartbeats send: `sessions` are the master's open
    /// sessions, which the worker then keeps from idle collection.
    fn heartbeat(&self, deadline: Instant, sessions: &[String]) -> Result<u64>;
    /// This task's wall clock, µs since the Unix epoch: a master's round
    /// trips with it align step stats across tasks. A worker in the
    /// caller's process shares its clock.
    fn wall_clock_us(&self) -> Result<u64> {
        Ok(crate::executor::wall_clock_us())
    }

    /// Creates the session's state on this task; `isolate` gives it
    /// resource containers of its own instead of the task's shared ones.
    fn create_worker_session(&self, session_handle: &str, cluster: &ClusterInfo, isolate: bool) -> Result<()>;

    fn delete_worker_session(&self, session_handle: &str) -> Result<()>;

    /// Registers one partition (every node placed on this task); returns
    /// its handle.
    fn register_graph(&self, session_handle: &str, graph: GraphSpec, collect_stats: bool) -> Result<String>;

    fn deregister_graph(&self, session_handle: &str, graph_handle: &str) -> Result<()>;

    /// Runs a registered partition for one step; `done` runs once. A remote
    /// worker returns the call to drive (see [`DriveCall`]); an in-process
    /// one returns `None` and calls `done` itself.
    fn run_graph(&self, request: RunGraphRequest, done: RunGraphDone) -> Option<DriveCall>;

    /// Releases what a step left behind (its rendezvous).
    fn cleanup_graph(&self, session_handle: &str, step_id: u64) -> Result<()>;

    /// Clears resource containers of every session on this worker (all
    /// containers when `containers` is empty).
    fn cleanup_all(&self, containers: &[String]) -> Result<()>;

    /// Clears resource containers of one session.
    fn reset_session(&self, session_handle: &str, containers: &[String]) -> Result<()>;

    /// Cancels a running step: its Recvs wake, no node starts.
    fn abort_step(&self, session_handle: &str, step_id: u64, status: crate::error::Status);

    /// How many graphs the session has registered (for checks after close).
    fn registered_graphs(&self, session_handle: &str) -> Result<usize>;
}
