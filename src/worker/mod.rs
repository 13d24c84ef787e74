//! The worker: one per server process. Owns the process's devices (and
//! their thread pools) and a SessionMgr of worker sessions, each with its
//! own GraphMgr, resource containers and step rendezvous.
//!
//! Owns: TensorFlow's WorkerService behaviour ([`Worker`] implements
//! [`WorkerInterface`] directly for in-process masters; `service` adapts it
//! to RPCs). Must not partition client graphs across tasks: that is the
//! master's job; a worker only splits its own partition by local device.

pub mod graph_mgr;
pub mod interface;
pub mod remote;
pub mod rendezvous_mgr;
pub mod service;

pub use graph_mgr::{GraphMgr, RegisteredGraph};
pub use interface::{
    ClusterInfo, DeviceAttributes, DriveCall, PartialRunFlags, RunGraphDone, RunGraphRequest, RunGraphResponse,
    WorkerInterface,
};
pub use rendezvous_mgr::{RemoteSend, RemoteTransport, RendezvousMgr, ReturnRoute, WorkerRendezvous};

use crate::error::{Result, Status};
use crate::executor::{Device, PoolOptions, new_incarnation};
use crate::ops::ResourceMgr;
use foldhash::{HashMap, HashMapExt};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;

/// How a worker is built.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub job: String,
    pub task: u32,
    pub cpu_devices: usize,
    pub pool: PoolOptions,
    /// At most this many live worker sessions.
    pub max_sessions: usize,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            job: "localhost".into(),
            task: 0,
            cpu_devices: 1,
            pool: PoolOptions::default(),
            max_sessions: 1024,
        }
    }
}

/// One master session's state on this worker.
pub struct WorkerSession {
    pub handle: String,
    pub graph_mgr: Arc<GraphMgr>,
    pub cluster: ClusterInfo,
    /// When its master last used it or named it in a heartbeat.
    last_used: crate::coarse_clock::LastUsed,
}

pub struct Worker {
    task_name: String,
    devices: Vec<Arc<Device>>,
    sessions: RwLock<HashMap<String, Arc<WorkerSession>>>,
    /// Per device: the resource containers sessions share unless created
    /// isolated. They live as long as the process; Reset clears them.
    shared_resources: Vec<Arc<ResourceMgr>>,
    remote: RwLock<Option<Arc<dyn RemoteTransport>>>,
    incarnation: u64,
    max_sessions: usize,
}

impl Worker {
    pub fn new(options: &WorkerOptions) -> Result<Arc<Worker>> {
        let devices = Device::cpus(&options.job, options.task, options.cpu_devices.max(1), &options.pool)?;
        Ok(Arc::new(Worker {
            task_name: format!("/job:{}/replica:0/task:{}", options.job, options.task),
            shared_resources: devices.iter().map(|_| Arc::new(ResourceMgr::default())).collect(),
            devices,
            sessions: RwLock::new(HashMap::new()),
            remote: RwLock::new(None),
            incarnation: new_incarnation(),
            max_sessions: options.max_sessions,
        }))
    }

    /// Installs the transport that carries tensors to other tasks.
    pub fn set_remote(&self, remote: Arc<dyn RemoteTransport>) {
        *self.remote.write() = Some(remote);
    }

    pub fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }

    /// Changes every time the process starts.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Marks a session used now (its master's heartbeat names it).
    pub fn keep_alive(&self, handle: &str) {
        if let Some(session) = self.sessions.read().get(handle) {
            session.last_used.touch();
        }
    }

    /// Releases every session no master has used or named in a heartbeat
    /// for `max_idle` (its master is gone): graphs, steps' leftovers and
    /// its own resources. Returns their handles.
    pub fn release_idle(&self, max_idle: Duration) -> Vec<String> {
        let idle: Vec<String> = self
            .sessions
            .read()
            .values()
            .filter(|s| s.last_used.idle_for() > max_idle)
            .map(|s| s.handle.clone())
            .collect();
        for handle in &idle {
            let graphs = self.sessions.read().get(handle).map_or(0, |s| s.graph_mgr.len());
            if self.sessions.write().remove(handle).is_some() {
                tracing::warn!(
                    "{}: released session '{handle}' and its {graphs} graphs: no master used it for {} s",
                    self.task_name,
                    max_idle.as_secs()
                );
            }
        }
        idle
    }

    pub fn session(&self, handle: &str) -> Result<Arc<WorkerSession>> {
        let found = self.sessions.read().get(handle).cloned();
        if let Some(session) = &found {
            session.last_used.touch();
        }
        found.ok_or_else(|| {
            Status::aborted(format!("session '{handle}' is not known on {} (was the task restarted?)", self.task_name))
        })
    }

    /// Delivers a tensor a peer pushed for `step_id`.
    pub fn deliver(
        &self,
        session_handle: &str,
        step_id: u64,
        key: &crate::executor::RendezvousKey,
        tensor: Option<crate::tensor::Tensor>,
    ) -> Result<()> {
        let session = self.session(session_handle)?;
        session.graph_mgr.rendezvous.find_or_create(step_id).deliver(key, tensor)
    }

    pub fn num_sessions(&self) -> usize {
        self.sessions.read().len()
    }
}

impl WorkerInterface for Worker {
    fn task_name(&self) -> &str {
        &self.task_name
    }

    fn get_status(&self) -> Result<Vec<DeviceAttributes>> {
        Ok(self
            .devices
            .iter()
            .map(|d| DeviceAttributes {
                name: d.name_str.clone(),
                device_type: "CPU".into(),
                incarnation: d.incarnation,
                memory_limit: 0,
            })
            .collect())
    }

    fn create_worker_session(&self, session_handle: &str, cluster: &ClusterInfo, isolate: bool) -> Result<()> {
        let mut sessions = self.sessions.write();
        if sessions.contains_key(session_handle) {
            return Ok(());
        }
        if sessions.len() >= self.max_sessions {
            return Err(Status::resource_exhausted(format!(
                "{} already has {} sessions (the limit)",
                self.task_name, self.max_sessions
            )));
        }
        let remote = self.remote.read().as_ref().map(|t| t.for_session(session_handle, cluster));
        let rendezvous = RendezvousMgr::new(&self.task_name, remote);
        let resources = if isolate {
            self.devices.iter().map(|_| Arc::new(ResourceMgr::default())).collect()
        } else {
            self.shared_resources.clone()
        };
        sessions.insert(
            session_handle.to_string(),
            Arc::new(WorkerSession {
                handle: session_handle.to_string(),
                graph_mgr: Arc::new(GraphMgr::new(&self.task_name, self.devices.clone(), resources, rendezvous)),
                cluster: cluster.clone(),
                last_used: crate::coarse_clock::LastUsed::now(),
            }),
        );
        Ok(())
    }

    fn delete_worker_session(&self, session_handle: &str) -> Result<()> {
        let removed = self.sessions.write().remove(session_handle);
        if let Some(session) = removed {
            session.graph_mgr.abort_all(Status::cancelled(format!("session '{session_handle}' was closed")));
        }
        Ok(())
    }

    fn register_graph(
        &self,
        session_handle: &str,
        graph: crate::graph::GraphSpec,
        _collect_stats: bool,
    ) -> Result<String> {
        self.session(session_handle)?
            .graph_mgr
            .register(graph)
            .map_err(|e| e.context(format_args!("registering a graph on {}", self.task_name)))
    }

    fn deregister_graph(&self, session_handle: &str, graph_handle: &str) -> Result<()> {
        self.session(session_handle)?.graph_mgr.deregister(graph_handle)
    }

    fn incarnation(&self) -> Result<u64> {
        Ok(self.incarnation)
    }

    fn heartbeat(&self, _deadline: std::time::Instant, sessions: &[String]) -> Result<u64> {
        for handle in sessions {
            self.keep_alive(handle);
        }
        Ok(self.incarnation)
    }

    fn run_graph(&self, request: RunGraphRequest, done: RunGraphDone) -> Option<DriveCall> {
        let started = std::time::Instant::now();
        let done: RunGraphDone = Box::new(move |result| {
            crate::counters::record_graph_run(started, result.is_ok());
            done(result)
        });
        match self.session(&request.session_handle) {
            Ok(session) => session.graph_mgr.run(request, done),
            Err(e) => done(Err(e)),
        }
        None
    }

    fn cleanup_graph(&self, session_handle: &str, step_id: u64) -> Result<()> {
        if let Ok(session) = self.session(session_handle) {
            session.graph_mgr.rendezvous.cleanup(step_id);
        }
        Ok(())
    }

    fn cleanup_all(&self, containers: &[String]) -> Result<()> {
        for session in self.sessions.read().values() {
            session.graph_mgr.clear_resources(containers);
        }
        for resources in &self.shared_resources {
            resources.clear(containers);
        }
        Ok(())
    }

    fn reset_session(&self, session_handle: &str, containers: &[String]) -> Result<()> {
        self.session(session_handle)?.graph_mgr.clear_resources(containers);
        Ok(())
    }

    fn abort_step(&self, session_handle: &str, step_id: u64, status: Status) {
        if let Ok(session) = self.session(session_handle) {
            session.graph_mgr.abort_step(step_id, status);
        }
    }

    fn registered_graphs(&self, session_handle: &str) -> Result<usize> {
        Ok(self.session(session_handle)?.graph_mgr.len())
    }
}

#[cfg(test)]
mod tests;
