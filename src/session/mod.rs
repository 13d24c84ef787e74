//! The client's API: a [`Session`] with TensorFlow's surface (run, partial
//! runs, callables, extend, list_devices, reset, close), and
//! [`create_session`], which picks the implementation from the target:
//! `""` runs in this process, `ringflow://host:port` talks to a server
//! ([`remote::RemoteSession`]), or directly to that server's master when it
//! runs in this same process ([`local::LocalSession`]); `grpc://host:port`
//! speaks TensorFlow's MasterService over gRPC ([`crate::grpc::GrpcSession`]).
//!
//! Owns: the trait and the factory. Must not implement graph execution: the
//! implementations delegate to a master session.

pub mod local;
pub mod remote;
pub mod saved_model;

pub use crate::master::{RunMetadata, RunOptions, SessionConfig};
pub use crate::worker::DeviceAttributes;

use crate::error::{Result, Status};
use crate::executor::PoolOptions;
use crate::graph::GraphSpec;
use crate::tensor::Tensor;
use std::time::Duration;

/// How to create a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// `""` (in process), `ringflow://host:port` or `grpc://host:port`.
    pub target: String,
    pub config: SessionConfig,
    /// In-process sessions: how many CPU devices.
    pub cpu_devices: usize,
    /// In-process sessions: threads per device pool.
    pub threads_per_device: usize,
    /// In-process sessions: pin pool threads to cores.
    pub pin_threads: bool,
    /// How long idle pool threads spin before parking.
    pub spin: Duration,
    /// Reach a master served by this very process without a socket.
    pub local_shortcut: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let pool = PoolOptions::default();
        SessionOptions {
            target: String::new(),
            config: SessionConfig::default(),
            cpu_devices: 1,
            threads_per_device: pool.threads,
            pin_threads: false,
            spin: pool.spin,
            local_shortcut: true,
        }
    }
}

impl SessionOptions {
    pub fn pool_options(&self) -> PoolOptions {
        PoolOptions {
            name: "cpu".into(),
            threads: self.threads_per_device.max(1),
            spin: self.spin,
            pin_first_cpu: self.pin_threads.then_some(0),
            cpus: None,
        }
    }
}

/// A handle to a callable made by [`Session::make_callable`].
pub type CallableHandle = u64;

/// TensorFlow's session surface.
pub trait Session: Send + Sync {
    /// The graph version the session is at (0 after creation).
    fn graph_version(&self) -> Result<u64>;

    /// Adds nodes; fails with FailedPrecondition if `current_version` is stale.
    fn extend(&self, graph: GraphSpec, current_version: u64) -> Result<u64>;

    /// Runs one step.
    fn run(
        &self,
        options: &RunOptions,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<(Vec<Tensor>, RunMetadata)>;

    fn partial_run_setup(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<String>;

    fn partial_run(&self, handle: &str, feeds: Vec<(String, Tensor)>, fetches: &[String]) -> Result<Vec<Tensor>>;

    /// Pre-resolves a signature: `run_callable` then does no name lookups.
    fn make_callable(&self, feeds: &[String], fetches: &[String], targets: &[String]) -> Result<CallableHandle>;

    /// Runs a callable; `feeds` in the order given to `make_callable`.
    fn run_callable(
        &self,
        handle: CallableHandle,
        feeds: Vec<Tensor>,
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata)>;

    fn release_callable(&self, handle: CallableHandle) -> Result<()>;

    fn list_devices(&self) -> Result<Vec<DeviceAttributes>>;

    /// Clears resource containers (all when `containers` is empty): variables
    /// are uninitialised afterwards.
    fn reset(&self, containers: &[String]) -> Result<()>;

    /// Releases every graph and worker session; later calls fail.
    fn close(&self) -> Result<()>;
}

/// Shorthands for the common calls.
pub trait SessionExt: Session {
    /// Runs a step with default options, taking `&str` names.
    fn run_simple(&self, feeds: &[(&str, Tensor)], fetches: &[&str], targets: &[&str]) -> Result<Vec<Tensor>> {
        let feeds = feeds.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
        let fetches: Vec<String> = fetches.iter().map(|s| s.to_string()).collect();
        let targets: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
        self.run(&RunOptions::default(), feeds, &fetches, &targets).map(|(t, _)| t)
    }
}

impl<S: Session + ?Sized> SessionExt for S {}

/// Creates a session on `options.target` with `graph`.
pub fn create_session(graph: GraphSpec, options: &SessionOptions) -> Result<Box<dyn Session>> {
    if options.target.is_empty() {
        return Ok(Box::new(local::LocalSession::direct(graph, options)?));
    }
    if let Some(address) = parse_grpc_target(&options.target) {
        return Ok(Box::new(crate::grpc::GrpcSession::create(address?, graph, options)?));
    }
    let address = parse_target(&options.target)?;
    if options.local_shortcut {
        if let Some(master) = crate::server::local_master(address) {
            return Ok(Box::new(local::LocalSession::on_master(master, graph, options.config.clone())?));
        }
    }
    Ok(Box::new(remote::RemoteSession::create(address, graph, options)?))
}

/// `grpc://host:port` → `Some(Ok(host:port))`; `None` for other schemes.
pub fn parse_grpc_target(target: &str) -> Option<Result<&str>> {
    let address = target.strip_prefix("grpc://")?;
    Some(if address.contains(':') {
        Ok(address)
    } else {
        Err(Status::invalid_argument(format!("session target '{target}': use grpc://host:port")))
    })
}

/// `ringflow://host:port` → `host:port`.
pub fn parse_target(target: &str) -> Result<&str> {
    match target.strip_prefix("ringflow://") {
        Some(address) if address.contains(':') => Ok(address),
        _ => Err(Status::invalid_argument(format!(
            "unknown session target '{target}': use \"\" (in process), ringflow://host:port or grpc://host:port"
        ))),
    }
}

#[cfg(test)]
mod control_flow_tests;
#[cfg(test)]
mod tests;
