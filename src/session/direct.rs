//! The in-process session (TensorFlow's DirectSession): a master session
//! over one worker living in this process, reached by direct calls. No
//! sockets, no serialisation; devices `/job:localhost/replica:0/task:0/device:CPU:N`.
//!
//! Owns: the private worker and its devices. Everything else is the master
//! session's.

use super::{CallableHandle, DeviceAttributes, RunMetadata, RunOptions, Session, SessionOptions};
use crate::error::Result;
use crate::graph::GraphSpec;
use crate::master::{MasterSession, TaskHandle};
use crate::tensor::Tensor;
use crate::worker::{ClusterInfo, Worker, WorkerInterface, WorkerOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct DirectSession {
    master: MasterSession,
    worker: Arc<Worker>,
}

impl DirectSession {
    pub fn new(graph: GraphSpec, options: &SessionOptions) -> Result<DirectSession> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let worker = Worker::new(&WorkerOptions {
            job: "localhost".into(),
            task: 0,
            cpu_devices: options.cpu_devices.max(1),
            pool: options.pool_options(),
            max_sessions: 1,
        })?;
        let task = TaskHandle { name: worker.task_name().to_string(), worker: worker.clone() };
        let master = MasterSession::create(
            format!("direct-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
            vec![task],
            "/job:localhost/replica:0/task:0",
            &ClusterInfo::default(),
            graph,
            options.config.clone(),
        )?;
        Ok(DirectSession { master, worker })
    }

    /// Graphs registered on the private worker (zero after close).
    pub fn registered_graphs(&self) -> usize {
        self.worker.registered_graphs(self.master.handle()).unwrap_or(0)
    }
}

impl Session for DirectSession {
    fn graph_version(&self) -> Result<u64> {
        Ok(self.master.graph_version())
    }

    fn extend(&self, graph: GraphSpec, current_version: u64) -> Result<u64> {
        self.master.extend(graph, current_version)
    }

    fn run(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.master.run(options, feeds, fetches, targets)
    }

    fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String> {
        self.master.partial_run_setup(feeds, fetches, targets)
    }

    fn partial_run(&self, handle: &str, feeds: Vec<(String, Tensor)>, fetches: &[String]) -> Result<Vec<Tensor>> {
        self.master.partial_run(handle, feeds, fetches, &RunOptions::default())
    }

    fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<CallableHandle> {
        self.master.make_callable(feeds, fetches, targets)
    }

    fn run_callable(
        &self,
        handle: CallableHandle,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)> {
        self.master.run_callable(handle, feeds, options)
    }

    fn release_callable(&self, handle: CallableHandle) -> Result<()> {
        self.master.release_callable(handle)
    }

    fn list_devices(&self) -> Result<Vec<DeviceAttributes>> {
        Ok(self.master.list_devices())
    }

    fn reset(&self, containers: &[String]) -> Result<()> {
        self.master.reset(containers)
    }

    fn close(&self) -> Result<()> {
        self.master.close()
    }
}
