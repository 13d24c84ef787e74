//! MasterSession: a client session's graph and everything cached per step
//! signature. For a (feeds, fetches, targets) signature it prunes, places
//! across every task's devices, partitions per task and registers each
//! partition once; each step then only issues RunGraph to the tasks
//! involved, in parallel, and gathers the fetches.
//!
//! Owns: the session graph and its version, the signature cache, callables,
//! partial runs, step ids. Talks to workers only through
//! [`WorkerInterface`], so the same code serves the in-process session (one
//! local worker) and a cluster (remote workers).

use super::clock::{CLOCK_SAMPLES, TaskClock, align_stats, estimate_task_clock};
use super::health::Health;
use crate::cluster::DeviceName;
use crate::error::{Result, Status};
use crate::executor::{CancellationToken, NodeStats, Notification};
use crate::graph::{ClientGraph, Endpoint, Graph, GraphSpec, PartitionOptions, partition, place, prune};
use crate::tensor::Tensor;
use crate::worker::{
    ClusterInfo, DeviceAttributes, PartialRunFlags, RunGraphRequest, RunGraphResponse, WorkerInterface,
};
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Per-session settings.
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    /// Deadline for every step that does not set its own.
    pub operation_timeout: Option<Duration>,
    /// Keep this session's variables and other resources private. By
    /// default (as TensorFlow's `isolate_session_state = false`) sessions
    /// on a cluster share each task's resource containers, so clients
    /// training one model (between-graph replication) see the same
    /// variables on the ps tasks.
    pub isolate_session_state: bool,
}

/// Per-step settings.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub timeout: Option<Duration>,
    /// Record per-node stats into the RunMetadata.
    pub trace: bool,
    /// Cancelling it from another thread fails the step with Cancelled and
    /// aborts its parts on every task.
    pub cancel: Option<CancellationToken>,
    /// Memory the answer to this step's caller is sent from (its
    /// connection's shared-memory ring): fetched tensors this task makes
    /// are written there (set by the master's service; see
    /// `tensor::placement`).
    #[doc(hidden)]
    pub reply_placement: Option<crate::tensor::placement::SharedPlacement>,
}

#[derive(Debug, Clone, Default)]
pub struct RunMetadata {
    /// Every task's nodes, stamped on the master's clock (see `clocks`).
    pub step_stats: Vec<NodeStats>,
    /// How each task's clock was aligned with the master's (traced steps).
    pub clocks: Vec<TaskClock>,
}

/// A task of the cluster and how to reach its worker.
#[derive(Clone)]
pub struct TaskHandle {
    pub name: String,
    pub worker: Arc<dyn WorkerInterface>,
}

/// A signature's registered partitions.
struct Part {
    task: usize,
    graph_handle: String,
    arg_indices: Vec<u32>,
    retval_indices: Vec<u32>,
}

struct ClientExecution {
    client: ClientGraph,
    parts: Vec<Part>,
    /// The session's generation it was built in: a restarted task makes
    /// every older execution stale (its partitions name the old process).
    generation: u64,
}

/// A callable: its signature, and the execution it runs (rebuilt when a
/// task restarts).
struct Callable {
    feeds: Vec<Endpoint>,
    fetches: Vec<Endpoint>,
    targets: Vec<String>,
    exec: Mutex<Arc<ClientExecution>>,
}

struct PartialRun {
    exec: Arc<ClientExecution>,
    step_id: u64,
    state: Mutex<PartialState>,
}

struct PartialState {
    fed: Vec<bool>,
    fetched: Vec<bool>,
    done: bool,
}

struct GraphState {
    graph: Graph,
    version: u64,
}

pub struct MasterSession {
    /// Shared with each step's abort hook: a step clones the pointer.
    handle: Arc<str>,
    tasks: Arc<[TaskHandle]>,
    /// Every task's devices; a restarted task's are discovered again (new
    /// incarnations).
    devices: Mutex<Vec<DeviceAttributes>>,
    device_names: Vec<DeviceName>,
    default_device: DeviceName,
    config: SessionConfig,
    graph: Mutex<GraphState>,
    signatures: Mutex<HashMap<String, Arc<ClientExecution>>>,
    callables: Mutex<HashMap<u64, Arc<Callable>>>,
    partial_runs: Mutex<HashMap<String, Arc<PartialRun>>>,
    next_id: AtomicU64,
    step_ids: AtomicU64,
    closed: AtomicBool,
    cluster: ClusterInfo,
    /// Each task's process incarnation when this session last set it up.
    incarnations: Vec<AtomicU64>,
    /// Bumped when a task restarts; executions of older generations rebuild.
    generation: AtomicU64,
    /// One recovery at a time.
    recovering: Mutex<()>,
    /// Heartbeats of the master's tasks (`None` in process).
    health: Option<Arc<Health>>,
    /// When a client last used the session, for idle collection.
    last_used: crate::coarse_clock::LastUsed,
    /// Steps running now (a running session is never idle).
    running: AtomicUsize,
    /// Each task's clock against this master's, in `tasks` order: estimated
    /// before the first traced step, so sessions that never trace pay none.
    task_clocks: Mutex<Option<Arc<[TaskClock]>>>,
}

/// Counts a running step for as long as it lives.
struct Running<'a>(&'a MasterSession);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

fn signature_key(feeds: &[Endpoint], fetches: &[Endpoint], targets: &[String]) -> String {
    let mut sorted_targets = targets.to_vec();
    sorted_targets.sort();
    let join = |v: Vec<String>| v.join("\u{1f}");
    format!(
        "{}\u{1e}{}\u{1e}{}",
        join(feeds.iter().map(|e| e.to_string()).collect()),
        join(fetches.iter().map(|e| e.to_string()).collect()),
        join(sorted_targets)
    )
}

fn parse_endpoints(names: &[String]) -> Result<Vec<Endpoint>> {
    names.iter().map(|n| Endpoint::parse(n)).collect()
}

/// Collects RunGraph results until every part answered or one failed. The
/// first failure aborts the step on every part at once, from whichever
/// thread saw it, so a part blocked on a tensor from the failed one (or from
/// a dead task) is released without waiting for anyone's deadline.
struct StepWaiter {
    /// Set with the first error, for drivers polling whether to give up.
    failed: AtomicBool,
    /// One lock for all of it: a part's answer takes it once.
    state: Mutex<WaiterState>,
    ready: Notification,
}

struct WaiterState {
    remaining: usize,
    responses: Vec<Option<RunGraphResponse>>,
    error: Option<Status>,
    abort: Option<AbortHook>,
}

type AbortHook = Box<dyn FnOnce(&Status) + Send>;

/// The tasks a step's parts run on, in part order (a step rarely spans
/// more than four).
type PartTasks = smallvec::SmallVec<[usize; 4]>;

impl StepWaiter {
    fn new(parts: usize, abort: AbortHook) -> Arc<StepWaiter> {
        Arc::new(StepWaiter {
            failed: AtomicBool::new(false),
            state: Mutex::new(WaiterState {
                remaining: parts,
                responses: (0..parts).map(|_| None).collect(),
                error: None,
                abort: Some(abort),
            }),
            ready: Notification::new(),
        })
    }

    fn part_done(&self, part: usize, result: Result<RunGraphResponse>) {
        let response = match result {
            Ok(r) => Some(r),
            Err(e) => {
                self.fail(e);
                None
            }
        };
        let all_done = {
            let mut state = self.state.lock();
            if response.is_some() {
                state.responses[part] = response;
            }
            state.remaining -= 1;
            state.remaining == 0
        };
        if all_done {
            self.ready.notify();
        }
    }

    /// The parts' answers in part order, or the step's first error.
    fn outcome(&self) -> Result<Vec<RunGraphResponse>> {
        let mut state = self.state.lock();
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        state
            .responses
            .iter_mut()
            .map(|r| r.take().ok_or_else(|| Status::internal("a partition answered nothing")))
            .collect()
    }

    fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Whether a driver waiting for a part should give up: the step failed,
    /// or one of its `tasks` is marked unavailable (which fails it, saying
    /// why).
    fn gave_up(&self, health: Option<&Health>, tasks: &[usize]) -> bool {
        if let Some(Err(status)) = health.map(|h| h.check(tasks)) {
            self.fail(status);
        }
        self.has_failed()
    }

    /// Fails the step with `e` unless it already failed: aborts every part
    /// and wakes the waiting client.
    fn fail(&self, e: Status) {
        let abort = {
            let mut state = self.state.lock();
            if state.error.is_some() {
                return;
            }
            state.error = Some(e.clone());
            self.failed.store(true, Ordering::Release);
            state.abort.take()
        };
        // Unlocked: aborting a local part may answer it on this thread.
        if let Some(abort) = abort {
            abort(&e);
        }
        self.ready.notify();
    }
}

/// Threads that wait for RunGraph answers when a step has more remote
/// parts than the calling thread can drive itself.
fn call_drivers() -> &'static crate::executor::ThreadPool {
    static POOL: std::sync::OnceLock<crate::executor::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        crate::executor::ThreadPool::new(crate::executor::PoolOptions {
            name: "rpc-drive".into(),
            threads: 16,
            spin: Duration::from_micros(20),
            pin_first_cpu: None,
            cpus: None,
        })
        .expect("start the RunGraph driver threads")
    })
}

impl MasterSession {
    /// Discovers every task's devices and creates the worker sessions.
    /// Every call to a task on the way is bounded by the session's
    /// operation timeout, when it has one.
    pub fn create(
        handle: String,
        tasks: Vec<TaskHandle>,
        default_task: &str,
        cluster: &ClusterInfo,
        graph: GraphSpec,
        config: SessionConfig,
        health: Option<Arc<Health>>,
    ) -> Result<MasterSession> {
        crate::worker::remote::with_control_timeout(config.operation_timeout, || {
            Self::set_up(handle, tasks, default_task, cluster, graph, config.clone(), health)
        })
    }

    fn set_up(
        handle: String,
        tasks: Vec<TaskHandle>,
        default_task: &str,
        cluster: &ClusterInfo,
        graph: GraphSpec,
        config: SessionConfig,
        health: Option<Arc<Health>>,
    ) -> Result<MasterSession> {
        let graph = Graph::build(graph)?;
        let mut devices = Vec::new();
        let mut incarnations = Vec::with_capacity(tasks.len());
        for task in &tasks {
            incarnations.push(AtomicU64::new(
                task.worker.incarnation().map_err(|e| e.context(format_args!("reaching {}", task.name)))?,
            ));
            let attrs = task
                .worker
                .get_status()
                .map_err(|e| e.context(format_args!("discovering devices of {}", task.name)))?;
            devices.extend(attrs);
        }
        let device_names = devices.iter().map(|d| DeviceName::parse(&d.name)).collect::<Result<Vec<_>>>()?;
        let default_device = DeviceName::parse(&format!("{default_task}/device:CPU:0"))?;
        let mut created = Vec::new();
        for task in &tasks {
            if let Err(e) = task.worker.create_worker_session(&handle, cluster, config.isolate_session_state) {
                for t in &created {
                    let t: &TaskHandle = t;
                    let _ = t.worker.delete_worker_session(&handle);
                }
                return Err(e.context(format_args!("creating the session on {}", task.name)));
            }
            created.push(task.clone());
        }
        let seed = crate::executor::new_incarnation() & 0x0000_ffff_ffff_0000;
        Ok(MasterSession {
            handle: handle.into(),
            tasks: tasks.into(),
            devices: Mutex::new(devices),
            device_names,
            default_device,
            config,
            graph: Mutex::new(GraphState { graph, version: 0 }),
            signatures: Mutex::new(HashMap::new()),
            callables: Mutex::new(HashMap::new()),
            partial_runs: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            step_ids: AtomicU64::new(seed),
            closed: AtomicBool::new(false),
            cluster: cluster.clone(),
            incarnations,
            generation: AtomicU64::new(0),
            recovering: Mutex::new(()),
            health,
            last_used: crate::coarse_clock::LastUsed::now(),
            running: AtomicUsize::new(0),
            task_clocks: Mutex::new(None),
        })
    }

    /// How long no client has used the session.
    pub fn idle_for(&self) -> Duration {
        if self.running.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        self.last_used.idle_for()
    }

    fn touch(&self) {
        self.last_used.touch();
    }

    /// Sets the session up again on every task of `exec` whose process
    /// restarted since this session last set it up there; true if any did
    /// (the caller looks its execution up again). A task that cannot be
    /// reached fails the step here, naming it.
    fn recover_restarted(&self, exec: &ClientExecution) -> Result<bool> {
        let mut restarted = false;
        for part in &exec.parts {
            let task = &self.tasks[part.task];
            let now = task.worker.incarnation()?;
            if now != self.incarnations[part.task].load(Ordering::Acquire) {
                self.recover_task(part.task, now)?;
                restarted = true;
            }
        }
        Ok(restarted || exec.generation != self.generation.load(Ordering::Acquire))
    }

    /// A task came back as a new process: its worker session, graphs and
    /// variables are gone. Re-creates the session there, learns its new
    /// device incarnations and forgets every registered execution, so the
    /// next step partitions and registers again. Its variables stay
    /// uninitialized until the client initializes or restores them:
    /// reading one fails, naming it, rather than returning stale values.
    fn recover_task(&self, task: usize, incarnation: u64) -> Result<()> {
        let _one = self.recovering.lock();
        let before = self.incarnations[task].load(Ordering::Acquire);
        if before == incarnation {
            return Ok(());
        }
        let name = &self.tasks[task].name;
        let worker = &self.tasks[task].worker;
        worker.create_worker_session(&self.handle, &self.cluster, self.config.isolate_session_state).map_err(|e| {
            e.context(format_args!("re-creating session '{}' on {name} after it restarted", self.handle))
        })?;
        let fresh = worker.get_status().map_err(|e| e.context(format_args!("rediscovering {name}")))?;
        {
            let mut devices = self.devices.lock();
            devices.retain(|d| DeviceName::parse(&d.name).map_or(true, |n| n.task_name() != *name));
            devices.extend(fresh);
        }
        let stale: Vec<_> = self.signatures.lock().drain().map(|(_, e)| e).collect();
        for exec in stale {
            let live: Vec<&Part> = exec.parts.iter().filter(|p| p.task != task).collect();
            for p in live {
                let _ = self.tasks[p.task].worker.deregister_graph(&self.handle, &p.graph_handle);
            }
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.incarnations[task].store(incarnation, Ordering::Release);
        tracing::warn!(
            "task {name} restarted (incarnation {before:#x} -> {incarnation:#x}): session '{}' set up there again; \
             its variables on {name} are uninitialized",
            self.handle
        );
        Ok(())
    }

    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// Each task's clock against this master's (see `master::clock`),
    /// estimated on first use.
    fn task_clocks(&self) -> Result<Arc<[TaskClock]>> {
        let mut cached = self.task_clocks.lock();
        if let Some(clocks) = cached.as_ref() {
            return Ok(clocks.clone());
        }
        let clocks: Arc<[TaskClock]> = self
            .tasks
            .iter()
            .map(|t| estimate_task_clock(&t.name, t.worker.as_ref(), CLOCK_SAMPLES))
            .collect::<Result<Vec<_>>>()?
            .into();
        *cached = Some(clocks.clone());
        Ok(clocks)
    }

    pub fn graph_version(&self) -> u64 {
        self.graph.lock().version
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Status::cancelled(format!("session '{}' is closed", self.handle)));
        }
        Ok(())
    }

    /// Adds nodes; `current_version` must be the version the caller last saw.
    pub fn extend(&self, more: GraphSpec, current_version: u64) -> Result<u64> {
        self.check_open()?;
        let mut state = self.graph.lock();
        if state.version != current_version {
            return Err(Status::failed_precondition(format!(
                "graph version mismatch: the session is at version {}, the extension was made against version {current_version}",
                state.version
            )));
        }
        state.graph = state.graph.extended(more)?;
        state.version += 1;
        Ok(state.version)
    }

    pub fn list_devices(&self) -> Vec<DeviceAttributes> {
        self.devices.lock().clone()
    }

    fn build_execution(&self, feeds: &[Endpoint], fetches: &[Endpoint], targets: &[String]) -> Result<ClientExecution> {
        let graph = self.graph.lock().graph.clone();
        let client = prune(&graph, feeds, fetches, targets)?;
        let placed = place(&Graph::build(client.graph.clone())?, &self.device_names, &self.default_device)?;
        let generation = self.generation.load(Ordering::Acquire);
        let devices = self.devices.lock().clone();
        let incarnations: HashMap<&str, u64> = devices.iter().map(|d| (d.name.as_str(), d.incarnation)).collect();
        let per_task = partition(
            &placed,
            &PartitionOptions {
                location_of: &|d: &DeviceName| d.task_name(),
                incarnation_of: &|name: &str| incarnations.get(name).copied().unwrap_or(0),
                feeds_to_consumers: true,
            },
        )?;
        let mut parts = Vec::with_capacity(per_task.len());
        for (task_name, graph) in per_task {
            let task = self
                .tasks
                .iter()
                .position(|t| t.name == task_name)
                .ok_or_else(|| Status::internal(format!("partition for unknown task {task_name}")))?;
            let index_of = |node: &crate::graph::NodeSpec| node.attr_int("index").map(|i| i as u32);
            let arg_indices = graph.nodes.iter().filter(|n| n.op == "_Arg").map(index_of).collect::<Result<_>>()?;
            let retval_indices =
                graph.nodes.iter().filter(|n| n.op == "_Retval").map(index_of).collect::<Result<_>>()?;
            let graph_handle = match self.tasks[task].worker.register_graph(&self.handle, graph, false) {
                Ok(h) => h,
                Err(e) => {
                    self.deregister_parts(&parts);
                    return Err(e);
                }
            };
            parts.push(Part { task, graph_handle, arg_indices, retval_indices });
        }
        Ok(ClientExecution { client, parts, generation })
    }

    fn deregister_parts(&self, parts: &[Part]) {
        for p in parts {
            let _ = self.tasks[p.task].worker.deregister_graph(&self.handle, &p.graph_handle);
        }
    }

    /// The execution of a signature, current with every task it runs on
    /// (set up again on a task that restarted).
    fn execution(
        &self,
        feeds: &[Endpoint],
        fetches: &[Endpoint],
        targets: &[String],
        prefix: &str,
    ) -> Result<Arc<ClientExecution>> {
        self.touch();
        for _ in 0..3 {
            let exec = self.cached_execution(feeds, fetches, targets, prefix)?;
            if !self.recover_restarted(&exec)? {
                return Ok(exec);
            }
        }
        Err(Status::unavailable(format!(
            "session '{}': tasks kept restarting while the step was being set up",
            self.handle
        )))
    }

    /// The cached execution of a signature, built on first use.
    fn cached_execution(
        &self,
        feeds: &[Endpoint],
        fetches: &[Endpoint],
        targets: &[String],
        prefix: &str,
    ) -> Result<Arc<ClientExecution>> {
        let key = format!("{prefix}{}", signature_key(feeds, fetches, targets));
        if let Some(e) = self.signatures.lock().get(&key) {
            return Ok(e.clone());
        }
        let built = Arc::new(crate::worker::remote::with_control_timeout(self.config.operation_timeout, || {
            self.build_execution(feeds, fetches, targets)
        })?);
        let mut cache = self.signatures.lock();
        // Another thread may have built the same signature meanwhile; keep one.
        if let Some(e) = cache.get(&key) {
            self.deregister_parts(&built.parts);
            return Ok(e.clone());
        }
        cache.insert(key, built.clone());
        Ok(built)
    }

    fn check_feeds(exec: &ClientExecution, feeds: &[Tensor]) -> Result<()> {
        if feeds.len() != exec.client.feeds.len() {
            return Err(Status::invalid_argument(format!(
                "expected {} feeds, got {}",
                exec.client.feeds.len(),
                feeds.len()
            )));
        }
        for (i, t) in feeds.iter().enumerate() {
            if t.dtype() != exec.client.feed_types[i] {
                return Err(Status::invalid_argument(format!(
                    "feed '{}' expects {}, got a {} tensor of shape {}",
                    exec.client.feeds[i],
                    exec.client.feed_types[i],
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        Ok(())
    }

    fn deadline(&self, options: &RunOptions) -> Option<Instant> {
        options.timeout.or(self.config.operation_timeout).map(|t| Instant::now() + t)
    }

    fn abort_parts(&self, exec: &ClientExecution, step_id: u64, status: &Status) {
        for part in &exec.parts {
            self.tasks[part.task].worker.abort_step(&self.handle, step_id, status.clone());
        }
    }

    /// Issues RunGraph to every part of `exec` for `step_id`, drives the
    /// remote calls (the last one on this thread), and waits until every
    /// part answered, one failed, `deadline` passed or `cancel` fired. On any
    /// failure the step is aborted on every part.
    #[allow(clippy::too_many_arguments)]
    fn run_parts(
        &self,
        exec: &ClientExecution,
        step_id: u64,
        deadline: Option<Instant>,
        cancel: Option<&CancellationToken>,
        request_for: impl Fn(&Part) -> RunGraphRequest,
        overrun: impl FnOnce() -> Status,
    ) -> Result<Vec<RunGraphResponse>> {
        self.running.fetch_add(1, Ordering::AcqRel);
        let _running = Running(self);
        let tasks = self.tasks.clone();
        let session = self.handle.clone();
        let part_tasks: PartTasks = exec.parts.iter().map(|p| p.task).collect();
        let abort_tasks = part_tasks.clone();
        let waiter = StepWaiter::new(
            exec.parts.len(),
            Box::new(move |status: &Status| {
                for &t in &abort_tasks {
                    tasks[t].worker.abort_step(&session, step_id, status.clone());
                }
            }),
        );
        // Held until the step ends: a cancel after that is a no-op here.
        let _cancel_registration = match cancel {
            Some(token) => {
                let w = waiter.clone();
                let registration = token
                    .register(move || w.fail(Status::cancelled(format!("step {step_id} was cancelled by the client"))));
                if registration.is_none() {
                    // A partial run's parts already exist on the workers.
                    let status = Status::cancelled(format!("step {step_id} was cancelled before it ran"));
                    waiter.fail(status.clone());
                    return Err(status);
                }
                registration
            }
            None => None,
        };
        // A task that stops answering fails the step (heartbeats): the
        // drivers check between their waits.
        if let Some(Err(status)) = self.health.as_ref().map(|h| h.admit(&part_tasks)) {
            waiter.fail(status.clone());
            return Err(status);
        }
        let mut drives = Vec::new();
        for (i, part) in exec.parts.iter().enumerate() {
            let w = waiter.clone();
            if let Some(drive) =
                self.tasks[part.task].worker.run_graph(request_for(part), Box::new(move |r| w.part_done(i, r)))
            {
                drives.push(drive);
            }
        }
        if let Some(last) = drives.pop() {
            for drive in drives {
                let (w, health, tasks) = (waiter.clone(), self.health.clone(), part_tasks.clone());
                call_drivers().spawn(move || drive(deadline, &|| w.gave_up(health.as_deref(), &tasks)));
            }
            last(deadline, &|| waiter.gave_up(self.health.as_deref(), &part_tasks));
        }
        let finished = waiter.ready.wait_until(deadline, crate::executor::notification::DEFAULT_SPIN);
        // A step may also finish late: kernels running inline on this thread
        // cannot be interrupted, but the overrun is still reported.
        if !finished || deadline.is_some_and(|d| Instant::now() > d) {
            let status = overrun();
            self.abort_parts(exec, step_id, &status);
            return Err(status);
        }
        waiter.outcome()
    }

    /// Runs one step of `exec` with `feeds` in the signature's feed order.
    fn run_execution(
        &self,
        exec: &ClientExecution,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        Self::check_feeds(exec, &feeds)?;
        let clocks = if options.trace { Some(self.task_clocks()?) } else { None };
        let step_id = self.step_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = self.deadline(options);
        let responses = self.run_parts(
            exec,
            step_id,
            deadline,
            options.cancel.as_ref(),
            |part| RunGraphRequest {
                session_handle: self.handle.to_string(),
                graph_handle: part.graph_handle.clone(),
                step_id,
                feeds: part.arg_indices.iter().map(|&a| (a, feeds[a as usize].clone())).collect(),
                fetches: Vec::new(),
                partial: None,
                deadline,
                collect_stats: options.trace,
                return_route: None,
                // Only a part that returns fetches writes into it.
                reply_placement: if part.retval_indices.is_empty() { None } else { options.reply_placement.clone() },
            },
            || {
                let timeout = options.timeout.or(self.config.operation_timeout).unwrap_or_default();
                Status::deadline_exceeded(format!("step {step_id} exceeded its deadline of {} ms", timeout.as_millis()))
            },
        )?;
        let mut outputs: Vec<Option<Tensor>> = vec![None; exec.client.fetches.len()];
        let mut metadata = RunMetadata::default();
        for (part, mut response) in exec.parts.iter().zip(responses) {
            for (index, tensor) in response.fetches {
                if let Some(slot) = outputs.get_mut(index as usize) {
                    *slot = Some(tensor);
                }
            }
            if let Some(clock) = clocks.as_ref().and_then(|c| c.get(part.task)) {
                align_stats(&mut response.stats, clock);
            }
            metadata.step_stats.extend(response.stats);
        }
        metadata.clocks = clocks.map(|c| c.to_vec()).unwrap_or_default();
        let outputs = outputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.ok_or_else(|| Status::internal(format!("fetch '{}' was not produced", exec.client.fetches[i])))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((outputs, metadata))
    }

    /// TensorFlow's `Session::Run`.
    pub fn run(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.check_open()?;
        let feed_names: Vec<String> = feeds.iter().map(|(n, _)| n.clone()).collect();
        let exec = self.execution(&parse_endpoints(&feed_names)?, &parse_endpoints(fetches)?, targets, "")?;
        self.run_execution(&exec, feeds.into_iter().map(|(_, t)| t).collect(), options)
    }

    pub fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<u64> {
        self.check_open()?;
        let (feeds, fetches) = (parse_endpoints(feeds)?, parse_endpoints(fetches)?);
        let exec = self.execution(&feeds, &fetches, targets, "")?;
        let handle = self.next_id.fetch_add(1, Ordering::Relaxed);
        let callable = Callable { feeds, fetches, targets: targets.to_vec(), exec: Mutex::new(exec) };
        self.callables.lock().insert(handle, Arc::new(callable));
        Ok(handle)
    }

    pub fn run_callable(
        &self,
        handle: u64,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.check_open()?;
        let callable = self
            .callables
            .lock()
            .get(&handle)
            .cloned()
            .ok_or_else(|| Status::invalid_argument(format!("callable handle {handle} is not valid")))?;
        self.touch();
        let mut exec = callable.exec.lock().clone();
        if self.recover_restarted(&exec)? {
            exec = self.execution(&callable.feeds, &callable.fetches, &callable.targets, "")?;
            *callable.exec.lock() = exec.clone();
        }
        self.run_execution(&exec, feeds, options)
    }

    pub fn release_callable(&self, handle: u64) -> Result<()> {
        self.callables
            .lock()
            .remove(&handle)
            .map(|_| ())
            .ok_or_else(|| Status::invalid_argument(format!("callable handle {handle} is not valid")))
    }

    /// Starts a step whose feeds and fetches arrive over several calls.
    pub fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String> {
        self.check_open()?;
        let exec = self.execution(&parse_endpoints(feeds)?, &parse_endpoints(fetches)?, targets, "partial\u{1d}")?;
        let step_id = self.step_ids.fetch_add(1, Ordering::Relaxed);
        let deadline = self.deadline(&RunOptions::default());
        self.run_parts(
            &exec,
            step_id,
            deadline,
            None,
            |part| RunGraphRequest {
                session_handle: self.handle.to_string(),
                graph_handle: part.graph_handle.clone(),
                step_id,
                feeds: Vec::new(),
                fetches: Vec::new(),
                partial: Some(PartialRunFlags { first: true, last: false }),
                deadline,
                collect_stats: false,
                return_route: None,
                reply_placement: None,
            },
            || Status::deadline_exceeded("starting a partial run exceeded the session's deadline"),
        )?;
        let handle = format!("partial-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (nfeeds, nfetches) = (exec.client.feeds.len(), exec.client.fetches.len());
        self.partial_runs.lock().insert(
            handle.clone(),
            Arc::new(PartialRun {
                exec,
                step_id,
                state: Mutex::new(PartialState {
                    fed: vec![false; nfeeds],
                    fetched: vec![false; nfetches],
                    done: false,
                }),
            }),
        );
        Ok(handle)
    }

    /// Feeds some of a partial run's feeds and fetches some of its fetches.
    pub fn partial_run(
        &self,
        handle: &str,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        options: &RunOptions,
    ) -> Result<Vec<Tensor>> {
        self.check_open()?;
        let run = self.partial_runs.lock().get(handle).cloned().ok_or_else(|| {
            Status::invalid_argument(format!("partial run handle '{handle}' is not valid (finished or never set up)"))
        })?;
        let client = &run.exec.client;
        let mut feed_values: Vec<(u32, Tensor)> = Vec::new();
        let mut fetch_indices = Vec::new();
        let last;
        {
            let mut state = run.state.lock();
            if state.done {
                return Err(Status::invalid_argument(format!("partial run '{handle}' has finished")));
            }
            let mut feeding = state.fed.clone();
            for (name, tensor) in feeds {
                let e = Endpoint::parse(&name)?;
                let i = client.feeds.iter().position(|f| *f == e).ok_or_else(|| {
                    Status::invalid_argument(format!("'{name}' is not one of the feeds declared by partial_run_setup"))
                })?;
                if feeding[i] {
                    return Err(Status::invalid_argument(format!("'{name}' has already been fed in this partial run")));
                }
                if tensor.dtype() != client.feed_types[i] {
                    return Err(Status::invalid_argument(format!(
                        "feed '{name}' expects {}, got {}",
                        client.feed_types[i],
                        tensor.dtype()
                    )));
                }
                feeding[i] = true;
                feed_values.push((i as u32, tensor));
            }
            for name in fetches {
                let e = Endpoint::parse(name)?;
                let i = client.fetches.iter().position(|f| *f == e).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "'{name}' is not one of the fetches declared by partial_run_setup"
                    ))
                })?;
                if state.fetched[i] || fetch_indices.contains(&(i as u32)) {
                    return Err(Status::invalid_argument(format!(
                        "'{name}' has already been fetched in this partial run"
                    )));
                }
                if let Some(&missing) = client.fetch_feed_deps[i].iter().find(|&&f| !feeding[f]) {
                    return Err(Status::invalid_argument(format!(
                        "fetch '{name}' cannot be computed yet: it depends on feed '{}', which has not been fed",
                        client.feeds[missing]
                    )));
                }
                fetch_indices.push(i as u32);
            }
            let mut fetched = state.fetched.clone();
            for &i in &fetch_indices {
                fetched[i as usize] = true;
            }
            last = fetched.iter().all(|&f| f) && feeding.iter().all(|&f| f);
            state.fed = feeding;
            state.fetched = fetched;
            state.done = last;
        }
        let deadline = self.deadline(options);
        let result = self.run_parts(
            &run.exec,
            run.step_id,
            deadline,
            options.cancel.as_ref(),
            |part| RunGraphRequest {
                session_handle: self.handle.to_string(),
                graph_handle: part.graph_handle.clone(),
                step_id: run.step_id,
                feeds: feed_values.iter().filter(|(a, _)| part.arg_indices.contains(a)).cloned().collect(),
                fetches: fetch_indices.iter().copied().filter(|f| part.retval_indices.contains(f)).collect(),
                partial: Some(PartialRunFlags { first: false, last }),
                deadline,
                collect_stats: false,
                return_route: None,
                reply_placement: None,
            },
            || Status::deadline_exceeded(format!("partial run '{handle}' exceeded its deadline")),
        );
        let responses = match result {
            Ok(r) => r,
            Err(e) => {
                self.partial_runs.lock().remove(handle);
                return Err(e);
            }
        };
        if last {
            self.partial_runs.lock().remove(handle);
        }
        let mut by_index: HashMap<u32, Tensor> = HashMap::new();
        for response in responses {
            by_index.extend(response.fetches);
        }
        fetch_indices
            .iter()
            .map(|i| by_index.remove(i).ok_or_else(|| Status::internal(format!("fetch #{i} was not produced"))))
            .collect()
    }

    /// Clears resource containers on every task of this session.
    pub fn reset(&self, containers: &[String]) -> Result<()> {
        for task in self.tasks.iter() {
            task.worker.reset_session(&self.handle, containers).map_err(|e| e.context(&task.name))?;
        }
        Ok(())
    }

    /// Releases every worker's graphs and sessions.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let executions: Vec<_> = self.signatures.lock().drain().map(|(_, e)| e).collect();
        self.callables.lock().clear();
        let partial: Vec<_> = self.partial_runs.lock().drain().map(|(_, p)| p).collect();
        for p in partial {
            self.abort_parts(&p.exec, p.step_id, &Status::cancelled("the session was closed"));
        }
        let mut first_error = None;
        for exec in executions {
            for part in &exec.parts {
                if let Err(e) = self.tasks[part.task].worker.deregister_graph(&self.handle, &part.graph_handle) {
                    first_error.get_or_insert(e);
                }
            }
        }
        for task in self.tasks.iter() {
            if let Err(e) = task.worker.delete_worker_session(&self.handle) {
                first_error.get_or_insert(e.context(&task.name));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    pub fn tasks(&self) -> &[TaskHandle] {
        &self.tasks
    }
}

impl Drop for MasterSession {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
