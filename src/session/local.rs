//! Sessions that reach their master session by direct calls: the
//! in-process session (TensorFlow's DirectSession: a master over one private
//! worker, devices `/job:localhost/replica:0/task:0/device:CPU:N`), and a
//! session on a server running in this same process (TensorFlow's
//! LocalMaster: no socket, no serialisation).
//!
//! Owns: [`LocalSession`]. Everything else is the master session's.

use super::{CallableHandle, DeviceAttributes, RunMetadata, RunOptions, Session, SessionConfig, SessionOptions};
use crate::error::Result;
use crate::graph::GraphSpec;
use crate::master::{Master, MasterSession, TaskHandle};
use crate::tensor::Tensor;
use crate::worker::{ClusterInfo, Worker, WorkerInterface, WorkerOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct LocalSession {
    session: Arc<MasterSession>,
    /// The server's master, when the session lives on one (closing goes
    /// through it so it forgets the handle).
    master: Option<Arc<Master>>,
}

impl LocalSession {
    /// An in-process session with a private worker.
    pub fn direct(graph: GraphSpec, options: &SessionOptions) -> Result<LocalSession> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let worker = Worker::new(&WorkerOptions {
            job: "localhost".into(),
            task: 0,
            cpu_devices: options.cpu_devices.max(1),
            pool: options.pool_options(),
            max_sessions: 1,
        })?;
        let task = TaskHandle { name: worker.task_name().to_string(), worker };
        let session = MasterSession::create(
            format!("direct-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
            vec![task],
            "/job:localhost/replica:0/task:0",
            &ClusterInfo::default(),
            graph,
            options.config.clone(),
            None,
        )?;
        Ok(LocalSession { session: Arc::new(session), master: None })
    }

    /// A session on a master served by this process.
    pub fn on_master(master: Arc<Master>, graph: GraphSpec, config: SessionConfig) -> Result<LocalSession> {
        let session = master.create_session(graph, config)?;
        Ok(LocalSession { session, master: Some(master) })
    }

    /// Graphs registered for this session across its tasks (zero after close).
    pub fn registered_graphs(&self) -> usize {
        self.session.tasks().iter().map(|t| t.worker.registered_graphs(self.session.handle()).unwrap_or(0)).sum()
    }

    pub fn handle(&self) -> &str {
        self.session.handle()
    }
}

impl Session for LocalSession {
    fn graph_version(&self) -> Result<u64> {
        Ok(self.session.graph_version())
    }

    fn extend(&self, graph: GraphSpec, current_version: u64) -> Result<u64> {
        self.session.extend(graph, current_version)
    }

    fn run(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.session.run(options, feeds, fetches, targets)
    }

    fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String> {
        self.session.partial_run_setup(feeds, fetches, targets)
    }

    fn partial_run(&self, handle: &str, feeds: Vec<(String, Tensor)>, fetches: &[String]) -> Result<Vec<Tensor>> {
        self.session.partial_run(handle, feeds, fetches, &RunOptions::default())
    }

    fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<CallableHandle> {
        self.session.make_callable(feeds, fetches, targets)
    }

    fn run_callable(
        &self,
        handle: CallableHandle,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.session.run_callable(handle, feeds, options)
    }

    fn release_callable(&self, handle: CallableHandle) -> Result<()> {
        self.session.release_callable(handle)
    }

    fn list_devices(&self) -> Result<Vec<DeviceAttributes>> {
        Ok(self.session.list_devices())
    }

    fn reset(&self, containers: &[String]) -> Result<()> {
        self.session.reset(containers)
    }

    fn close(&self) -> Result<()> {
        match &self.master {
            Some(m) => m.close_session(self.session.handle()).or_else(|e| {
                // Already closed through the master: nothing left to release.
                if e.code == crate::error::Code::Aborted { Ok(()) } else { Err(e) }
            }),
            None => self.session.close(),
        }
    }
}
