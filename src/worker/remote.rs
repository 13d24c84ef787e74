//! The wire side of the WorkerService, client end: [`RemoteWorker`] is a
//! [`WorkerInterface`] whose calls are RPCs, and [`NetTransport`] pushes a
//! step's tensors and aborts to the tasks that need them.
//!
//! Owns: converting between the worker's plain structs and the rkyv
//! messages, and naming the task in transport errors. Must not know graphs
//! beyond handing a `GraphSpec` to the wire.

use super::interface::{
    ClusterInfo, DeviceAttributes, DriveCall, RunGraphDone, RunGraphRequest, RunGraphResponse, WorkerInterface,
};
use super::rendezvous_mgr::{RemoteSend, RemoteTransport, ReturnRoute};
use crate::error::{Code, Result, Status};
use crate::executor::{NodeStats, RendezvousKey};
use crate::graph::GraphSpec;
use crate::net::message::{self as msg, PayloadList};
use crate::net::{BackChannel, ChannelCache, Client, Response};
use crate::tensor::Tensor;
use crate::tensor::placement::SharedPlacement;
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long control-plane calls (register, status, cleanup) may take.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

thread_local! {
    /// A tighter bound for control calls made on this thread (see
    /// [`with_control_timeout`]).
    static CONTROL_BOUND: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's control calls (status, session creation,
/// registration) bounded by `timeout` when it is tighter than the
/// default: a session's operation timeout, or a step's, reaches the
/// calls made on its behalf.
pub fn with_control_timeout<T>(timeout: Option<Duration>, f: impl FnOnce() -> T) -> T {
    let before = CONTROL_BOUND.with(|b| b.replace(timeout.or(CONTROL_BOUND.with(|b| b.get()))));
    let result = f();
    CONTROL_BOUND.with(|b| b.set(before));
    result
}

fn control_timeout() -> Duration {
    CONTROL_BOUND.with(|b| b.get()).map_or(CONTROL_TIMEOUT, |t| t.min(CONTROL_TIMEOUT))
}

/// Gives transport failures the task's name; errors a worker reported
/// (they already name their node or graph) pass through unchanged.
fn name_task(task: &str, address: &str, status: Status) -> Status {
    match status.code {
        Code::Unavailable | Code::DeadlineExceeded => status.context(format_args!("task {task} ({address})")),
        _ => status,
    }
}

/// Converts wire stats into the executor's.
pub fn stats_from_wire(stats: &msg::ArchivedStepStats) -> Vec<NodeStats> {
    stats
        .nodes
        .iter()
        .map(|n| NodeStats {
            node: n.node.to_string(),
            op: n.op.to_string(),
            device: n.device.to_string(),
            start_us: n.start_us.to_native(),
            end_us: n.end_us.to_native(),
            thread: n.thread.to_native(),
            frame: n.frame.to_string(),
            iter: n.iter.to_native(),
            rendezvous_key: n.rendezvous_key.to_string(),
            bytes: n.bytes.to_native(),
        })
        .collect()
}

pub fn stats_to_wire(stats: &[NodeStats]) -> msg::StepStats {
    msg::StepStats {
        nodes: stats
            .iter()
            .map(|n| msg::NodeStats {
                node: n.node.clone(),
                op: n.op.clone(),
                device: n.device.clone(),
                start_us: n.start_us,
                end_us: n.end_us,
                thread: n.thread,
                frame: n.frame.clone(),
                iter: n.iter,
                rendezvous_key: n.rendezvous_key.clone(),
                bytes: n.bytes,
            })
            .collect(),
        clocks: Vec::new(),
    }
}

/// Devices as the wire carries them, back into the worker's struct.
pub fn devices_from_wire(devices: &rkyv::vec::ArchivedVec<msg::ArchivedDeviceAttributes>) -> Vec<DeviceAttributes> {
    devices
        .iter()
        .map(|d| DeviceAttributes {
            name: d.name.to_string(),
            device_type: d.device_type.to_string(),
            incarnation: d.incarnation.to_native(),
            memory_limit: d.memory_limit.to_native(),
        })
        .collect()
}

pub fn devices_to_wire(devices: Vec<DeviceAttributes>) -> Vec<msg::DeviceAttributes> {
    devices
        .into_iter()
        .map(|d| msg::DeviceAttributes {
            name: d.name,
            device_type: d.device_type,
            incarnation: d.incarnation,
            memory_limit: d.memory_limit,
        })
        .collect()
}

/// `ClusterInfo` as the wire's job list.
pub fn cluster_to_wire(cluster: &ClusterInfo) -> Vec<msg::JobDef> {
    let mut jobs: Vec<msg::JobDef> = Vec::new();
    for (task, address) in &cluster.tasks {
        let Ok(name) = crate::cluster::DeviceName::parse(task) else { continue };
        let (Some(job), Some(index)) = (name.job, name.task) else { continue };
        let entry = match jobs.iter_mut().find(|j| j.name == job) {
            Some(j) => j,
            None => {
                jobs.push(msg::JobDef { name: job, tasks: Vec::new() });
                jobs.last_mut().expect("just pushed")
            }
        };
        entry.tasks.push(msg::TaskAddr { index, address: address.clone() });
    }
    jobs
}

pub fn cluster_from_wire(jobs: &rkyv::vec::ArchivedVec<msg::ArchivedJobDef>) -> ClusterInfo {
    let mut tasks = Vec::new();
    for job in jobs.iter() {
        for t in job.tasks.iter() {
            tasks.push((format!("/job:{}/replica:0/task:{}", job.name, t.index.to_native()), t.address.to_string()));
        }
    }
    ClusterInfo { tasks }
}

/// A worker in another process, reached over the transport.
pub struct RemoteWorker {
    /// Shared with each step's answer reader, which names the task in its
    /// errors: a step clones the pointers, not the strings.
    task: Arc<str>,
    address: Arc<str>,
    channels: Arc<ChannelCache>,
    /// The live connection, kept so a step does not look it up.
    client: Mutex<Option<Arc<Client>>>,
}

impl RemoteWorker {
    pub fn new(task: &str, address: &str, channels: Arc<ChannelCache>) -> RemoteWorker {
        RemoteWorker { task: task.into(), address: address.into(), channels, client: Mutex::new(None) }
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    fn client(&self) -> Result<Arc<Client>> {
        let mut cached = self.client.lock();
        if let Some(c) = cached.as_ref() {
            if !c.is_dead() {
                return Ok(c.clone());
            }
        }
        let fresh = self.channels.get(&self.address).map_err(|e| name_task(&self.task, &self.address, e))?;
        *cached = Some(fresh.clone());
        Ok(fresh)
    }

    fn call<R>(&self, request: &R, payloads: &[Tensor]) -> Result<Response>
    where
        R: msg::Rpc + msg::Encode,
    {
        let client = self.client()?;
        client
            .call_rpc(request, payloads, Instant::now() + control_timeout())
            .map_err(|e| name_task(&self.task, &self.address, e))
    }

    fn status(&self, session_handle: &str) -> Result<Response> {
        self.call(&msg::GetStatusRequest { session_handle: session_handle.to_string(), keep_alive: Vec::new() }, &[])
    }
}

/// Decodes a RunGraph answer: its tensors point into the receive buffer.
fn run_graph_response(response: &Response) -> Result<RunGraphResponse> {
    let meta = response.meta::<msg::RunGraphResponse>()?;
    let mut fetches = Vec::with_capacity(meta.fetches.len());
    for f in meta.fetches.iter() {
        fetches.push((f.index.to_native(), f.tensor.resolve(&response.payloads)?));
    }
    Ok(RunGraphResponse { fetches, stats: stats_from_wire(&meta.step_stats) })
}

impl WorkerInterface for RemoteWorker {
    fn task_name(&self) -> &str {
        &self.task
    }

    fn get_status(&self) -> Result<Vec<DeviceAttributes>> {
        let response = self.status("")?;
        Ok(devices_from_wire(&response.meta::<msg::GetStatusResponse>()?.devices))
    }

    fn incarnation(&self) -> Result<u64> {
        Ok(self.client()?.peer_incarnation())
    }

    fn heartbeat(&self, deadline: Instant, sessions: &[String]) -> Result<u64> {
        let client = self.client()?;
        let request = msg::GetStatusRequest { session_handle: String::new(), keep_alive: sessions.to_vec() };
        client.call_rpc(&request, &[], deadline).map_err(|e| name_task(&self.task, &self.address, e))?;
        Ok(client.peer_incarnation())
    }

    fn wall_clock_us(&self) -> Result<u64> {
        Ok(self.status("")?.meta::<msg::GetStatusResponse>()?.wall_clock_us.to_native())
    }

    fn create_worker_session(&self, session_handle: &str, cluster: &ClusterInfo, isolate: bool) -> Result<()> {
        self.call(
            &msg::CreateWorkerSessionRequest {
                session_handle: session_handle.to_string(),
                master_task: String::new(),
                cluster: cluster_to_wire(cluster),
                isolate_session_state: isolate,
            },
            &[],
        )
        .map(drop)
    }

    fn delete_worker_session(&self, session_handle: &str) -> Result<()> {
        self.call(&msg::DeleteWorkerSessionRequest { session_handle: session_handle.to_string() }, &[]).map(drop)
    }

    fn register_graph(&self, session_handle: &str, graph: GraphSpec, collect_stats: bool) -> Result<String> {
        let response = self.call(
            &msg::RegisterGraphRequest { session_handle: session_handle.to_string(), graph, collect_stats },
            &[],
        )?;
        Ok(response.meta::<msg::RegisterGraphResponse>()?.graph_handle.to_string())
    }

    fn deregister_graph(&self, session_handle: &str, graph_handle: &str) -> Result<()> {
        self.call(
            &msg::DeregisterGraphRequest {
                session_handle: session_handle.to_string(),
                graph_handle: graph_handle.to_string(),
            },
            &[],
        )
        .map(drop)
    }

    fn run_graph(&self, request: RunGraphRequest, done: RunGraphDone) -> Option<DriveCall> {
        let mut payloads = PayloadList::new();
        let feeds =
            request.feeds.iter().map(|(i, t)| msg::IndexedTensorRef { index: *i, tensor: payloads.add(t) }).collect();
        let mut partial = 0;
        if let Some(flags) = request.partial {
            partial = msg::PARTIAL_RUN;
            if flags.first {
                partial |= msg::PARTIAL_FIRST;
            }
            if flags.last {
                partial |= msg::PARTIAL_LAST;
            }
        }
        let timeout_ms = request
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()).as_millis().max(1) as u64)
            .unwrap_or(0);
        let wire = msg::RunGraphRequest {
            session_handle: request.session_handle,
            graph_handle: request.graph_handle,
            step_id: request.step_id,
            feeds,
            fetches: request.fetches,
            partial,
            timeout_ms,
            collect_stats: request.collect_stats,
        };
        let started = msg::encode(&wire)
            .and_then(|meta| self.client()?.start_call(msg::Method::RunGraph, &meta, payloads.tensors()));
        let call = match started {
            Ok(call) => call,
            Err(e) => {
                done(Err(name_task(&self.task, &self.address, e)));
                return None;
            }
        };
        let (task, address) = (self.task.clone(), self.address.clone());
        Some(Box::new(move |deadline: Option<Instant>, abandoned: &dyn Fn() -> bool| {
            let result = call
                .wait_unless(deadline.unwrap_or_else(crate::executor::deadline::far_future), abandoned)
                .map_err(|e| name_task(&task, &address, e))
                .and_then(|response| run_graph_response(&response));
            done(result)
        }))
    }

    fn cleanup_graph(&self, session_handle: &str, step_id: u64) -> Result<()> {
        self.call(&msg::CleanupGraphRequest { session_handle: session_handle.to_string(), step_id }, &[]).map(drop)
    }

    fn cleanup_all(&self, containers: &[String]) -> Result<()> {
        self.call(&msg::CleanupAllRequest { session_handle: String::new(), containers: containers.to_vec() }, &[])
            .map(drop)
    }

    fn reset_session(&self, session_handle: &str, containers: &[String]) -> Result<()> {
        self.call(
            &msg::CleanupAllRequest { session_handle: session_handle.to_string(), containers: containers.to_vec() },
            &[],
        )
        .map(drop)
    }

    fn abort_step(&self, session_handle: &str, step_id: u64, status: Status) {
        let abort = msg::AbortStep {
            session_handle: session_handle.to_string(),
            step_id,
            code: status.code as u8,
            message: status.into_message(),
        };
        if let Err(e) = self.client().and_then(|c| c.push_msg(&abort, &[])) {
            tracing::warn!("could not abort step {step_id} on {}: {e}", self.task);
        }
    }

    fn registered_graphs(&self, session_handle: &str) -> Result<usize> {
        let response = self.status(session_handle)?;
        Ok(response.meta::<msg::GetStatusResponse>()?.registered_graphs.to_native() as usize)
    }
}

/// Pushes tensors and aborts over the transport, for every session of a
/// worker process.
pub struct NetTransport {
    channels: Arc<ChannelCache>,
}

impl NetTransport {
    pub fn new(channels: Arc<ChannelCache>) -> NetTransport {
        NetTransport { channels }
    }
}

impl RemoteTransport for NetTransport {
    fn for_session(&self, session_handle: &str, cluster: &ClusterInfo) -> Arc<dyn RemoteSend> {
        Arc::new(SessionPeers {
            session_handle: session_handle.to_string(),
            addresses: cluster.tasks.iter().cloned().collect(),
            channels: self.channels.clone(),
            clients: Mutex::new(HashMap::new()),
        })
    }
}

/// One session's view of its peers: task name → address → connection.
struct SessionPeers {
    session_handle: String,
    addresses: HashMap<String, String>,
    channels: Arc<ChannelCache>,
    clients: Mutex<HashMap<String, Arc<Client>>>,
}

impl SessionPeers {
    fn client(&self, task: &str) -> Result<Arc<Client>> {
        if let Some(c) = self.clients.lock().get(task) {
            if !c.is_dead() {
                return Ok(c.clone());
            }
        }
        let address = self.addresses.get(task).ok_or_else(|| {
            Status::internal(format!("task {task} is not in the cluster of session '{}'", self.session_handle))
        })?;
        let client = self.channels.get(address).map_err(|e| name_task(task, address, e))?;
        self.clients.lock().insert(task.to_string(), client.clone());
        Ok(client)
    }
}

fn tensor_push(session_handle: &str, step_id: u64, key: &RendezvousKey, tensor: Option<&Tensor>) -> msg::TensorPush {
    msg::TensorPush {
        session_handle: session_handle.to_string(),
        step_id,
        rendezvous_key: key.as_str().to_string(),
        tensor: tensor.map(|t| msg::TensorRef::describe(t, 0)).unwrap_or_default(),
        dead: tensor.is_none(),
    }
}

fn abort_step(session_handle: &str, step_id: u64, status: &Status) -> msg::AbortStep {
    msg::AbortStep {
        session_handle: session_handle.to_string(),
        step_id,
        code: status.code as u8,
        message: status.message.clone(),
    }
}

impl RemoteSend for SessionPeers {
    fn send_remote(&self, dst_task: &str, step_id: u64, key: &RendezvousKey, tensor: Option<Tensor>) -> Result<()> {
        let push = tensor_push(&self.session_handle, step_id, key, tensor.as_ref());
        let client = self.client(dst_task)?;
        client.push_msg(&push, tensor.as_slice()).map_err(|e| name_task(dst_task, client.peer(), e))
    }

    fn output_placement(&self, dst_task: &str) -> Option<SharedPlacement> {
        self.client(dst_task).ok()?.output_placement()
    }

    fn abort_remote(&self, dst_task: &str, step_id: u64, status: &Status) {
        let abort = abort_step(&self.session_handle, step_id, status);
        if let Err(e) = self.client(dst_task).and_then(|c| c.push_msg(&abort, &[])) {
            tracing::warn!("could not tell {dst_task} that step {step_id} failed: {e}");
        }
    }
}

/// Pushes back over the connection a RunGraph came on, to the task that
/// sent it (see [`ReturnRoute`]).
pub struct ConnectionBack {
    session_handle: String,
    channel: BackChannel,
}

impl ConnectionBack {
    /// The return route of a whole step whose RunGraph came over `channel`
    /// from the task that named itself `channel.peer_name()` in its hello.
    pub fn route(session_handle: &str, channel: BackChannel) -> ReturnRoute {
        ReturnRoute {
            task: channel.peer_name().clone(),
            send: Arc::new(ConnectionBack { session_handle: session_handle.to_string(), channel }),
        }
    }
}

impl RemoteSend for ConnectionBack {
    fn send_remote(&self, dst_task: &str, step_id: u64, key: &RendezvousKey, tensor: Option<Tensor>) -> Result<()> {
        let push = tensor_push(&self.session_handle, step_id, key, tensor.as_ref());
        self.channel.push_msg(&push, tensor.as_slice()).map_err(|e| name_task(dst_task, self.channel.peer(), e))
    }

    fn output_placement(&self, _dst_task: &str) -> Option<SharedPlacement> {
        self.channel.output_placement()
    }

    fn abort_remote(&self, dst_task: &str, step_id: u64, status: &Status) {
        let abort = abort_step(&self.session_handle, step_id, status);
        if let Err(e) = self.channel.push_msg(&abort, &[]) {
            tracing::warn!("could not tell {dst_task} that step {step_id} failed: {e}");
        }
    }
}

#[cfg(test)]
mod control_timeout_tests {
    use super::*;

    #[test]
    fn a_session_timeout_bounds_control_calls_only_where_it_is_tighter_and_only_inside() {
        assert_eq!(control_timeout(), CONTROL_TIMEOUT);
        with_control_timeout(Some(Duration::from_secs(2)), || {
            assert_eq!(control_timeout(), Duration::from_secs(2));
            // No timeout of its own: the enclosing bound stays.
            with_control_timeout(None, || assert_eq!(control_timeout(), Duration::from_secs(2)));
        });
        with_control_timeout(Some(Duration::from_secs(3600)), || assert_eq!(control_timeout(), CONTROL_TIMEOUT));
        assert_eq!(control_timeout(), CONTROL_TIMEOUT);
    }
}
