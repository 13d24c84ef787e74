//! A ringflow server: one process serving the MasterService and the
//! WorkerService on one port. Whichever server a client targets is that
//! session's master; every server is a worker (unless started as master
//! only).
//!
//! Owns: starting a task from a cluster spec, routing each RPC to the
//! master or the worker handler, and the process-wide registry of servers
//! that lets a client in the same process reach its master without a socket
//! (TensorFlow's LocalMaster). Must not implement either service itself.

pub mod local_cluster;
pub mod metrics_http;
pub mod stats;

use crate::cluster::{ClusterSpec, TaskId};
use crate::error::{Result, Status};
use crate::executor::PoolOptions;
use crate::master::Master;
use crate::master::health::HealthOptions;
use crate::net::{ChannelCache, Reply, Request, Service, SmallCall, SmallReply, TransportOptions};
use crate::worker::remote::NetTransport;
use crate::worker::{ClusterInfo, Worker, WorkerOptions};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

/// Which services a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Both,
    Master,
    Worker,
}

impl Role {
    pub fn parse(text: &str) -> Result<Role> {
        match text {
            "both" => Ok(Role::Both),
            "master" => Ok(Role::Master),
            "worker" => Ok(Role::Worker),
            other => Err(Status::invalid_argument(format!("unknown role '{other}': use both, master or worker"))),
        }
    }
}

#[derive(Clone)]
pub struct ServerOptions {
    pub cluster: ClusterSpec,
    pub task: TaskId,
    pub role: Role,
    pub cpu_devices: usize,
    pub pool: PoolOptions,
    pub transport: TransportOptions,
    /// Address to bind instead of the task's address in the spec (e.g.
    /// `0.0.0.0:2222` behind NAT).
    pub listen: Option<String>,
    /// Heartbeats from this task's master to every task.
    pub health: HealthOptions,
    /// The master closes sessions no client used for this long (`None`:
    /// never).
    pub session_idle_timeout: Option<Duration>,
    /// The worker releases sessions no master used or named in a heartbeat
    /// for this long (their master is gone).
    pub worker_idle_timeout: Option<Duration>,
    /// Sessions the master keeps at most.
    pub max_sessions: usize,
    /// Serve Prometheus text on this port (`GET /metrics`), bound on the
    /// host of the serving address.
    pub metrics_port: Option<u16>,
}

impl ServerOptions {
    pub fn new(cluster: ClusterSpec, task: TaskId) -> ServerOptions {
        ServerOptions {
            cluster,
            task,
            role: Role::Both,
            cpu_devices: 1,
            pool: PoolOptions::default(),
            transport: TransportOptions::default(),
            listen: None,
            health: HealthOptions::default(),
            session_idle_timeout: None,
            worker_idle_timeout: Some(Duration::from_secs(600)),
            max_sessions: crate::master::MAX_SESSIONS,
            metrics_port: None,
        }
    }
}

/// Routes each request to the service that answers it.
struct Dispatch {
    master: Option<Arc<Master>>,
    worker: Option<Arc<Worker>>,
    stats: Arc<stats::StatsSource>,
}

impl Service for Dispatch {
    fn handle(&self, request: Request, reply: Reply) {
        let method = request.method();
        if crate::master::service::is_master_method(method) {
            match &self.master {
                Some(m) => crate::master::service::handle(m, request, reply),
                None => reply.err(Status::unimplemented(format!("{method}: this server is a worker only"))),
            }
        } else if crate::worker::service::is_worker_method(method) {
            match &self.worker {
                Some(w) => crate::worker::service::handle(w, request, reply),
                None => reply.err(Status::unimplemented(format!("{method}: this server is a master only"))),
            }
        } else if method == crate::net::message::Method::Ping {
            reply.ok(request.meta_bytes(), &request.payloads);
        } else if method == crate::net::message::Method::GetStats {
            self.stats.handle(&request, reply);
        } else {
            reply.err(Status::unimplemented(format!("{method} is not served here")));
        }
    }

    /// A `Ping` (the transport's echo, as `handle` answers it) is answered
    /// where it lies; every other method goes to `handle`.
    fn handle_small(&self, call: &SmallCall<'_>) -> Option<SmallReply> {
        match call.method() {
            crate::net::message::Method::Ping => SmallReply::ok(call.meta_bytes()),
            _ => None,
        }
    }
}

pub struct Server {
    address: String,
    task_name: String,
    master: Option<Arc<Master>>,
    worker: Option<Arc<Worker>>,
    transport: Option<crate::net::Server>,
    collector: Option<Collector>,
    metrics: Option<metrics_http::MetricsEndpoint>,
    /// The gRPC front end (a master's), which serves models once loaded.
    grpc: Option<Arc<crate::grpc::GrpcMasterService>>,
    models: Option<Arc<crate::serving::Models>>,
    rest: Option<crate::serving::rest::RestEndpoint>,
}

/// Releases idle sessions: the master's whose client is gone, the
/// worker's whose master is gone. Checks every twentieth of the shorter
/// timeout (1 to 30 s: a session goes at most 5% late), and never when
/// neither timeout is set, so an idle server does not wake for it.
struct Collector {
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    fn start(
        master: Option<Arc<Master>>,
        worker: Option<Arc<Worker>>,
        session_idle: Option<Duration>,
        worker_idle: Option<Duration>,
    ) -> Result<Collector> {
        let stop = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rf-collector".into())
            .spawn(move || {
                let (lock, condvar) = &*stopping;
                let mut stopped = lock.lock();
                let tick = collector_tick(session_idle, worker_idle);
                while !*stopped {
                    match tick {
                        Some(tick) => drop(condvar.wait_for(&mut stopped, tick)),
                        None => condvar.wait(&mut stopped),
                    }
                    if let (Some(master), Some(idle)) = (&master, session_idle) {
                        master.close_idle_sessions(idle);
                    }
                    if let (Some(worker), Some(idle)) = (&worker, worker_idle) {
                        worker.release_idle(idle);
                    }
                }
            })
            .map_err(|e| Status::internal(format!("starting the session collector: {e}")))?;
        Ok(Collector { stop, thread: Some(thread) })
    }
}

/// How often the collector looks: a twentieth of the shorter idle
/// timeout, 1 to 30 s; never without one.
fn collector_tick(session_idle: Option<Duration>, worker_idle: Option<Duration>) -> Option<Duration> {
    let shortest = session_idle.into_iter().chain(worker_idle).min()?;
    Some((shortest / 20).clamp(Duration::from_secs(1), Duration::from_secs(30)))
}

impl Drop for Collector {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Master>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Weak<Master>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The master served by this process at `address`, if any: a client in the
/// same process talks to it directly.
pub fn local_master(address: &str) -> Option<Arc<Master>> {
    registry().lock().get(address).and_then(Weak::upgrade)
}

impl Server {
    /// Starts the task `options.task` of `options.cluster`.
    pub fn start(options: ServerOptions) -> Result<Server> {
        let address = options.cluster.address_of(&options.task)?.to_string();
        let task_name = options.task.task_name();
        let cluster = ClusterInfo { tasks: options.cluster.tasks() };
        let channels =
            Arc::new(ChannelCache::new(TransportOptions { name: task_name.clone(), ..options.transport.clone() }));
        let worker = match options.role {
            Role::Master => None,
            Role::Both | Role::Worker => {
                let worker = Worker::new(&WorkerOptions {
                    job: options.task.job.clone(),
                    task: options.task.index,
                    cpu_devices: options.cpu_devices.max(1),
                    pool: options.pool.clone(),
                    max_sessions: options.max_sessions,
                })?;
                worker.set_remote(Arc::new(NetTransport::new(channels.clone())));
                Some(worker)
            }
        };
        let master = match options.role {
            Role::Worker => None,
            Role::Both | Role::Master => Some(Arc::new(Master::with_health(
                &task_name,
                worker.clone(),
                cluster,
                channels.clone(),
                options.health,
            )?)),
        };
        if let Some(m) = &master {
            m.set_max_sessions(options.max_sessions);
        }
        let bind = options.listen.clone().unwrap_or_else(|| address.clone());
        let stats = Arc::new(stats::StatsSource {
            task_name: task_name.clone(),
            started: std::time::Instant::now(),
            master: master.clone(),
            worker: worker.clone(),
        });
        let metrics = match options.metrics_port {
            Some(port) => Some(metrics_http::MetricsEndpoint::start(&metrics_bind(&bind, port), stats.clone())?),
            None => None,
        };
        let dispatch: Arc<dyn Service> = Arc::new(Dispatch { master: master.clone(), worker: worker.clone(), stats });
        // Peers answer our RunGraphs' tensors over the connection we opened.
        channels.serve_pushes_with(Arc::downgrade(&dispatch));
        let shm_enabled = options.transport.shm.enabled;
        let transport = crate::net::Server::bind(
            &bind,
            dispatch,
            TransportOptions { name: task_name.clone(), ..options.transport },
        )
        .map_err(|e| e.context(format_args!("starting {task_name} on {bind}")))?;
        let mut grpc = None;
        if let Some(m) = &master {
            // TensorFlow's client speaks gRPC to the same port.
            let front = Arc::new(crate::grpc::GrpcMasterService::new(m.clone()));
            transport.hand_http2_to(front.clone());
            grpc = Some(front);
            registry().lock().insert(address.clone(), Arc::downgrade(m));
        }
        tracing::info!("{task_name} serving on {bind} ({:?})", options.role);
        if shm_enabled {
            log_shm_page_policy();
        }
        let collector = Collector::start(
            master.clone(),
            worker.clone(),
            options.session_idle_timeout,
            options.worker_idle_timeout,
        )?;
        Ok(Server {
            address,
            task_name,
            master,
            worker,
            transport: Some(transport),
            collector: Some(collector),
            metrics,
            grpc,
            models: None,
            rest: None,
        })
    }

    /// Where `/metrics` is served, when it is.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.address())
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn task_name(&self) -> &str {
        &self.task_name
    }

    pub fn master(&self) -> Option<&Arc<Master>> {
        self.master.as_ref()
    }

    pub fn worker(&self) -> Option<&Arc<Worker>> {
        self.worker.as_ref()
    }

    /// Connections other processes (or this one's clients) have open to us.
    pub fn connections(&self) -> usize {
        self.transport.as_ref().map_or(0, |t| t.connections())
    }

    /// Loads `configs` (TensorFlow Serving's model layout) into sessions
    /// on this server's master and serves them: TensorFlow Serving's gRPC
    /// services on this server's port, and its REST API on `rest_address`
    /// when given. A predict whose call sets no deadline runs within
    /// `timeout`.
    pub fn serve_models(
        &mut self,
        configs: &[crate::serving::ModelConfig],
        rest_address: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let Some(grpc) = &self.grpc else {
            return Err(Status::failed_precondition(format!(
                "{}: only a task with a master serves models (role both or master)",
                self.task_name
            )));
        };
        if self.models.is_some() {
            return Err(Status::failed_precondition("this server already serves models"));
        }
        let options = crate::session::SessionOptions {
            target: format!("ringflow://{}", self.address),
            ..crate::session::SessionOptions::default()
        };
        let models = Arc::new(load_models_when_the_cluster_is_up(configs, &options)?.with_default_timeout(timeout));
        if let Some(address) = rest_address {
            self.rest = Some(crate::serving::rest::RestEndpoint::start(address, models.clone())?);
        }
        grpc.serve_models(models.clone());
        self.models = Some(models);
        Ok(())
    }

    /// Where the REST API is served, when it is.
    pub fn rest_address(&self) -> Option<std::net::SocketAddr> {
        self.rest.as_ref().map(|r| r.address())
    }

    /// Stops serving: the port is closed and its threads joined.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.rest = None;
        if let Some(models) = self.models.take() {
            models.close();
        }
        registry().lock().remove(&self.address);
        if let Some(t) = self.transport.take() {
            t.shutdown();
        }
        self.collector.take();
        self.metrics = None;
    }
}

/// How long a server waits for the other tasks of its cluster to come up
/// before the models it serves load (servers start in any order).
pub const MODEL_LOAD_WAIT: Duration = Duration::from_secs(60);

/// [`crate::serving::Models::load`], retried while a task it needs is
/// unreachable, up to [`MODEL_LOAD_WAIT`].
fn load_models_when_the_cluster_is_up(
    configs: &[crate::serving::ModelConfig],
    options: &crate::session::SessionOptions,
) -> Result<crate::serving::Models> {
    let deadline = std::time::Instant::now() + MODEL_LOAD_WAIT;
    let mut pause = Duration::from_millis(20);
    let mut logged = false;
    loop {
        match crate::serving::Models::load(configs, options) {
            Err(e) if e.code == crate::error::Code::Unavailable && std::time::Instant::now() < deadline => {
                if !logged {
                    tracing::info!("waiting for the cluster before loading models: {e}");
                    logged = true;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(e) if e.code == crate::error::Code::Unavailable => {
                return Err(e.context(format_args!("the cluster was not up within {MODEL_LOAD_WAIT:?}")));
            }
            other => return other,
        }
    }
}

/// The serving address's host with the metrics port (`[::1]:P` for IPv6).
fn metrics_bind(bind: &str, port: u16) -> String {
    let host = bind.rsplit_once(':').map_or(bind, |(host, _)| host);
    format!("{host}:{port}")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One line, once per process, when the kernel keeps shared-memory rings
/// on 4 KiB pages: a 64 MiB transfer then runs at about two thirds of
/// memcpy where 2 MiB pages reach nine tenths (README figures).
fn log_shm_page_policy() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(policy) = crate::net::shm::region::shmem_huge_policy()
            && !crate::net::shm::region::huge_policy_takes_advice(&policy)
        {
            tracing::info!(
                "shared-memory rings use 4 KiB pages: /sys/kernel/mm/transparent_hugepage/shmem_enabled is \
                 {policy}; `advise` gives them 2 MiB pages, which large tensors cross faster"
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::collector_tick;
    use std::time::Duration;

    #[test]
    fn the_collector_looks_at_a_twentieth_of_the_shorter_timeout_within_1_to_30_s() {
        let s = Duration::from_secs;
        assert_eq!(collector_tick(None, Some(s(600))), Some(s(30)), "the default worker timeout");
        assert_eq!(collector_tick(Some(s(100)), Some(s(600))), Some(s(5)));
        assert_eq!(collector_tick(Some(s(2)), None), Some(s(1)), "short test timeouts keep the 1 s tick");
        assert_eq!(collector_tick(None, None), None, "nothing to release: it never wakes");
    }
}
