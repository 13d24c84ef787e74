//! The master: one per server process. Creates MasterSessions over every
//! task of the cluster (its own task through the in-process worker, the
//! others through [`RemoteWorker`]s), and serves TensorFlow's
//! MasterService calls on them by handle ([`service`]).
//!
//! Owns: sessions by handle and their lifetimes. Must not run kernels: it
//! drives workers through `WorkerInterface`.

pub mod clock;
pub mod health;
pub mod service;
pub mod session;

pub use session::{MasterSession, RunMetadata, RunOptions, SessionConfig, TaskHandle};

use crate::error::{Result, Status};
use crate::net::ChannelCache;
use crate::worker::remote::RemoteWorker;
use crate::worker::{ClusterInfo, DeviceAttributes, Worker, WorkerInterface};
use foldhash::{HashMap, HashMapExt};
use parking_lot::RwLock;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live sessions one master keeps at most, unless configured.
pub const MAX_SESSIONS: usize = 1024;

pub struct Master {
    task_name: String,
    tasks: Vec<TaskHandle>,
    default_task: String,
    cluster: ClusterInfo,
    sessions: RwLock<HashMap<String, Arc<MasterSession>>>,
    next_session: AtomicU64,
    incarnation: u64,
    /// Steps remote clients may cancel ([`service`]).
    pub(crate) client_cancels: service::ClientCancels,
    health: Arc<health::Health>,
    max_sessions: std::sync::atomic::AtomicUsize,
}

impl Master {
    /// A master for `cluster`, where `task_name` is this process's task;
    /// `local_worker` (if this process also serves the WorkerService) is
    /// reached by direct calls, every other task over `channels`.
    pub fn new(
        task_name: &str,
        local_worker: Option<Arc<Worker>>,
        cluster: ClusterInfo,
        channels: Arc<ChannelCache>,
    ) -> Result<Master> {
        Master::with_health(task_name, local_worker, cluster, channels, health::HealthOptions::default())
    }

    /// Like [`new`](Self::new), with heartbeat settings.
    pub fn with_health(
        task_name: &str,
        local_worker: Option<Arc<Worker>>,
        cluster: ClusterInfo,
        channels: Arc<ChannelCache>,
        health_options: health::HealthOptions,
    ) -> Result<Master> {
        let mut tasks = Vec::with_capacity(cluster.tasks.len());
        for (name, address) in &cluster.tasks {
            let worker: Arc<dyn WorkerInterface> = match (&local_worker, name == task_name) {
                (Some(local), true) => local.clone(),
                (None, true) => continue,
                _ => Arc::new(RemoteWorker::new(name, address, channels.clone())),
            };
            tasks.push(TaskHandle { name: name.clone(), worker });
        }
        let local = |t: &TaskHandle| local_worker.is_some() && t.name == task_name;
        let health = Arc::new(health::Health::new(
            tasks.iter().map(|t| (t.name.clone(), t.worker.clone(), !local(t))).collect(),
            health_options,
        ));
        let default_task = match &local_worker {
            Some(_) => task_name.to_string(),
            None => tasks
                .first()
                .map(|t| t.name.clone())
                .ok_or_else(|| Status::invalid_argument("a master without a worker needs at least one other task"))?,
        };
        Ok(Master {
            task_name: task_name.to_string(),
            tasks,
            default_task,
            cluster,
            sessions: RwLock::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            incarnation: crate::executor::new_incarnation(),
            client_cancels: service::ClientCancels::default(),
            health,
            max_sessions: std::sync::atomic::AtomicUsize::new(MAX_SESSIONS),
        })
    }

    /// Sessions this master keeps at most; past it, CreateSession fails
    /// with ResourceExhausted.
    pub fn set_max_sessions(&self, max: usize) {
        self.max_sessions.store(max.max(1), Ordering::Relaxed);
    }

    pub fn task_name(&self) -> &str {
        &self.task_name
    }

    /// TensorFlow's CreateSession: devices of every task are discovered and
    /// a worker session is made on each.
    pub fn create_session(&self, graph: crate::graph::GraphSpec, config: SessionConfig) -> Result<Arc<MasterSession>> {
        let max = self.max_sessions.load(Ordering::Relaxed);
        if self.sessions.read().len() >= max {
            return Err(Status::resource_exhausted(format!(
                "master {} already has {max} sessions (max_sessions); close some",
                self.task_name
            )));
        }
        let handle =
            format!("s{:x}-{}", self.incarnation & 0xffff_ffff, self.next_session.fetch_add(1, Ordering::Relaxed));
        let session = Arc::new(MasterSession::create(
            handle.clone(),
            self.tasks.clone(),
            &self.default_task,
            &self.cluster,
            graph,
            config,
            Some(self.health.clone()),
        )?);
        self.sessions.write().insert(handle, session.clone());
        self.health.sessions_changed(self.sessions.read().keys().cloned().collect());
        Ok(session)
    }

    pub fn session(&self, handle: &str) -> Result<Arc<MasterSession>> {
        self.sessions.read().get(handle).cloned().ok_or_else(|| {
            Status::aborted(format!(
                "session '{handle}' is not known on master {} (closed, or the master restarted)",
                self.task_name
            ))
        })
    }

    /// Closes a session: every worker's graphs and sessions are released.
    pub fn close_session(&self, handle: &str) -> Result<()> {
        let session = self.sessions.write().remove(handle);
        match session {
            Some(s) => {
                self.health.sessions_changed(self.sessions.read().keys().cloned().collect());
                s.close()
            }
            None => Err(Status::aborted(format!("session '{handle}' is not known on master {}", self.task_name))),
        }
    }

    /// Every device of every task.
    pub fn list_devices(&self) -> Result<Vec<DeviceAttributes>> {
        let mut devices = Vec::new();
        for task in &self.tasks {
            devices.extend(task.worker.get_status().map_err(|e| e.context(&task.name))?);
        }
        Ok(devices)
    }

    /// TensorFlow's Reset: clears the named containers (all when empty) of
    /// every session on every task.
    pub fn reset(&self, containers: &[String]) -> Result<()> {
        for task in &self.tasks {
            task.worker.cleanup_all(containers).map_err(|e| e.context(&task.name))?;
        }
        Ok(())
    }

    /// Closes every session no client has used for `max_idle` (and none
    /// is running a step): its graphs and worker sessions are released on
    /// every task. Returns how many.
    pub fn close_idle_sessions(&self, max_idle: std::time::Duration) -> usize {
        let idle: Vec<String> =
            self.sessions.read().iter().filter(|(_, s)| s.idle_for() > max_idle).map(|(h, _)| h.clone()).collect();
        for handle in &idle {
            tracing::warn!(
                "master {}: closing session '{handle}': no client call for {} s (its client is gone?)",
                self.task_name,
                max_idle.as_secs()
            );
            let _ = self.close_session(handle);
        }
        idle.len()
    }

    pub fn num_sessions(&self) -> usize {
        self.sessions.read().len()
    }
}
