//! `ringflow server`: serve one task of a cluster until SIGINT or SIGTERM.
//!
//! Owns: turning flags (or `TF_CONFIG`, or Slurm's environment) into
//! `ServerOptions`, and waiting for the stop signal. The server itself is
//! `crate::server`.

use super::cluster_cmd::{ClusterArgs, resolve};
use crate::cluster::{ClusterSpec, TaskId};
use crate::error::{Result, Status};
use crate::server::{Role, Server, ServerOptions};

pub struct ServerArgs {
    pub cluster: ClusterArgs,
    pub role: String,
    pub cpu_devices: usize,
    pub threads: usize,
    pub listen: Option<String>,
    pub exit_on_stdin_eof: bool,
    /// `--cpus LIST`: pool threads pinned to these CPUs.
    pub cpus: Option<String>,
    /// `--metrics-port P`: Prometheus text on `http://host:P/metrics`.
    pub metrics_port: Option<u16>,
    pub limits: LimitArgs,
    /// `auto`, `shm-copy` (shared memory, every sent tensor copied into
    /// the ring) or `tcp` (see `net::shm`).
    pub transport: String,
    /// `--shm-hugetlb`: rings this server offers on hugetlbfs pages.
    pub shm_hugetlb: bool,
    pub models: ModelArgs,
}

/// The models a server serves, as TensorFlow Serving takes them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Serve a model: NAME=BASE_PATH, numbered version directories under
    /// BASE_PATH (the newest is loaded), as TensorFlow Serving lays them
    /// out. Repeatable.
    #[arg(long = "model", value_name = "NAME=BASE_PATH")]
    pub models: Vec<String>,
    /// TensorFlow Serving's model config file (a text ModelServerConfig
    /// with a model_config_list: names, base paths, version policies,
    /// version labels).
    #[arg(long = "model_config_file", alias = "model-config-file", value_name = "FILE")]
    pub model_config_file: Option<std::path::PathBuf>,
    /// Serve TensorFlow Serving's REST API (/v1/models/...) on this port
    /// (0: not served).
    #[arg(long = "rest_api_port", alias = "rest-api-port", default_value_t = 0, value_name = "P")]
    pub rest_api_port: u16,
    /// Each predict's deadline, in ms (REST, and gRPC calls that set no
    /// deadline of their own).
    #[arg(long = "rest_api_timeout_in_ms", alias = "rest-api-timeout-in-ms", default_value_t = 30000)]
    pub rest_api_timeout_in_ms: u64,
}

impl ModelArgs {
    /// Every model named by `--model` and the config file.
    pub fn configs(&self) -> Result<Vec<crate::serving::ModelConfig>> {
        let mut configs =
            self.models.iter().map(|flag| crate::serving::parse_model_flag(flag)).collect::<Result<Vec<_>>>()?;
        if let Some(file) = &self.model_config_file {
            configs.extend(crate::serving::parse_model_config_file(file)?);
        }
        Ok(configs)
    }
}

/// `ringflow serve`: TensorFlow Serving's `tensorflow_model_server`
/// flags, one task serving on `--port`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// gRPC port (TensorFlow Serving's PredictionService and ModelService,
    /// and ringflow's own services).
    #[arg(long, default_value_t = 8500)]
    pub port: u16,
    /// The model's name in requests.
    #[arg(long = "model_name", alias = "model-name", default_value = "default")]
    pub model_name: String,
    /// The model's base path: numbered version directories, the newest served.
    #[arg(long = "model_base_path", alias = "model-base-path", value_name = "DIR")]
    pub model_base_path: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub models: ModelArgs,
    /// Threads per device pool (default: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// CPU devices this server offers.
    #[arg(long, default_value_t = 1)]
    pub cpu_devices: usize,
    /// Exit when standard input closes (a launcher's lifeline).
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
    /// Serve Prometheus text on http://0.0.0.0:P/metrics.
    #[arg(long, value_name = "P")]
    pub metrics_port: Option<u16>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Serves models as `tensorflow_model_server` does, until SIGINT/SIGTERM:
/// a one-task cluster listening on all interfaces at `--port`.
pub fn serve_models(args: &ServeArgs) -> Result<()> {
    let mut models = args.models.clone();
    if let Some(base) = &args.model_base_path {
        models.models.insert(0, format!("{}={}", args.model_name, base.display()));
    }
    if models.models.is_empty() && models.model_config_file.is_none() {
        return Err(Status::invalid_argument(
            "no model to serve: give --model_base_path (and --model_name), --model NAME=PATH or --model_config_file",
        ));
    }
    let mut cluster = ClusterSpec::default();
    cluster.cluster.insert("serving".to_string(), vec![format!("localhost:{}", args.port)]);
    let server_args = ServerArgs {
        cluster: super::cluster_cmd::ClusterArgs {
            cluster: None,
            tf_config: false,
            cluster_from: None,
            job: None,
            task: None,
            base_port: None,
        },
        role: "both".into(),
        cpu_devices: args.cpu_devices,
        threads: args.threads,
        listen: Some(format!("0.0.0.0:{}", args.port)),
        exit_on_stdin_eof: args.exit_on_stdin_eof,
        cpus: None,
        metrics_port: args.metrics_port,
        limits: args.limits.clone(),
        transport: "auto".into(),
        shm_hugetlb: false,
        models,
    };
    serve_task(&server_args, cluster, TaskId { job: "serving".into(), index: 0 })
}

/// Failure detection, collection and limits of a server.
#[derive(clap::Args, Debug, Clone)]
pub struct LimitArgs {
    /// Milliseconds between heartbeats from this task's master to each task.
    #[arg(long, default_value_t = 500, env = "RINGFLOW_HEARTBEAT_MS")]
    pub heartbeat_ms: u64,
    /// A task whose heartbeat goes unanswered this long (ms) is marked
    /// unavailable, failing its steps.
    #[arg(long, default_value_t = 1500)]
    pub heartbeat_timeout_ms: u64,
    /// Close master sessions no client used for this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub session_idle_timeout_s: u64,
    /// Release worker sessions no master used or heartbeat named for this
    /// many seconds (0: never).
    #[arg(long, default_value_t = 600)]
    pub worker_idle_timeout_s: u64,
    /// Connections served at once (past their handshake).
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
    /// Close a connection that has not finished its handshake in this many ms.
    #[arg(long, default_value_t = 3000)]
    pub handshake_timeout_ms: u64,
    /// Sessions the master (and the worker) keep at most.
    #[arg(long, default_value_t = 1024)]
    pub max_sessions: usize,
    /// Requests outstanding on one connection.
    #[arg(long, default_value_t = 4096)]
    pub max_in_flight: usize,
    /// Largest frame accepted, in MiB.
    #[arg(long, default_value_t = 8192)]
    pub max_frame_mib: u64,
}

/// The cluster and this task, from whichever source the flags name.
fn resolve_task(args: &ServerArgs) -> Result<(ClusterSpec, TaskId)> {
    let resolved = resolve(&args.cluster)?;
    let task = resolved.task.ok_or_else(|| {
        Status::invalid_argument(
            "which task is this? give --job NAME --task N (or a TF_CONFIG task, or run under srun)",
        )
    })?;
    Ok((resolved.spec, task))
}

/// `--cpus`, checked against this process's affinity mask.
fn pinned_cpus(list: &str) -> Result<std::sync::Arc<[usize]>> {
    use crate::executor::cpu_list;
    let cpus = cpu_list::parse_cpu_list(list)?;
    cpu_list::check_allowed(&cpus, cpu_list::allowed_cpus().as_deref())?;
    Ok(cpus.into())
}

/// Serves until SIGINT/SIGTERM, then shuts down cleanly.
pub fn serve(args: &ServerArgs) -> Result<()> {
    let (cluster, task) = resolve_task(args)?;
    serve_task(args, cluster, task)
}

fn serve_task(args: &ServerArgs, cluster: ClusterSpec, task: TaskId) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let model_configs = args.models.configs()?;
    let cpus = args.cpus.as_deref().map(pinned_cpus).transpose()?;
    // Blocked before any thread starts, so only `wait` below sees them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block().map_err(|e| Status::internal(format!("blocking signals: {e}")))?;
    let mut options = ServerOptions::new(cluster, task);
    options.role = Role::parse(&args.role)?;
    options.cpu_devices = args.cpu_devices.max(1);
    if args.threads > 0 {
        options.pool.threads = args.threads;
    }
    if let Some(cpus) = cpus {
        if args.threads == 0 {
            // One thread per listed CPU, shared among the devices.
            options.pool.threads = (cpus.len() / options.cpu_devices).max(1);
        }
        options.pool.cpus = Some(cpus);
    }
    options.listen = args.listen.clone();
    let limits = &args.limits;
    options.health.interval = std::time::Duration::from_millis(limits.heartbeat_ms.max(1));
    options.health.timeout = std::time::Duration::from_millis(limits.heartbeat_timeout_ms.max(1));
    let seconds = |s: u64| (s > 0).then(|| std::time::Duration::from_secs(s));
    options.session_idle_timeout = seconds(limits.session_idle_timeout_s);
    options.worker_idle_timeout = seconds(limits.worker_idle_timeout_s);
    options.transport.max_connections = limits.max_connections.max(1);
    options.transport.handshake_timeout_ms = limits.handshake_timeout_ms.max(1);
    options.transport.max_frame_bytes = limits.max_frame_mib.max(1) << 20;
    options.transport.max_in_flight = limits.max_in_flight.max(1);
    options.max_sessions = limits.max_sessions.max(1);
    options.metrics_port = args.metrics_port;
    match args.transport.trim().to_ascii_lowercase().as_str() {
        "auto" | "shm" => {}
        "shm-copy" => options.transport.shm.write_in_place = false,
        "tcp" => options.transport.shm.enabled = false,
        other => {
            return Err(crate::error::Status::invalid_argument(format!(
                "--transport {other}: expected auto, shm-copy or tcp"
            )));
        }
    }
    options.transport.shm.hugetlb |= args.shm_hugetlb;
    let listen_host = options.listen.clone().unwrap_or_else(|| server_address_host(&cluster_address(&options)));
    let mut server = Server::start(options)?;
    println!("ringflow server {} listening on {}", server.task_name(), server.address());
    if !model_configs.is_empty() {
        let rest = (args.models.rest_api_port > 0)
            .then(|| format!("{}:{}", server_address_host(&listen_host), args.models.rest_api_port));
        let timeout = std::time::Duration::from_millis(args.models.rest_api_timeout_in_ms.max(1));
        server.serve_models(&model_configs, rest.as_deref(), Some(timeout))?;
        for config in &model_configs {
            println!(
                "ringflow server {} serving model '{}' from {}",
                server.task_name(),
                config.name,
                config.base_path.display()
            );
        }
        if let Some(address) = server.rest_address() {
            println!("ringflow server {} REST API on http://{address}/v1/models", server.task_name());
        }
    }
    if let Some(address) = server.metrics_address() {
        println!("ringflow server {} metrics on http://{address}/metrics", server.task_name());
    }
    // A launcher reading our first lines (tests, scripts) sees them now.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // Whatever asks us to stop says why on this channel: a signal, or the
    // launcher's end of our stdin closing (however the launcher died).
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<String>();
    let signal_tx = stop_tx.clone();
    std::thread::spawn(move || {
        let reason = match signals.wait() {
            Ok(signal) => format!("{signal:?}"),
            Err(e) => format!("waiting for a signal failed ({e})"),
        };
        let _ = signal_tx.send(reason);
    });
    if args.exit_on_stdin_eof {
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            let _ = stop_tx.send("standard input closed: the launcher is gone".into());
        });
    } else {
        drop(stop_tx);
    }
    let reason = stop_rx.recv().unwrap_or_else(|_| "every stop source is gone".into());
    tracing::info!("{reason}: shutting down {}", server.task_name());
    server.shutdown();
    Ok(())
}

/// The address the spec gives this task.
fn cluster_address(options: &ServerOptions) -> String {
    options.cluster.address_of(&options.task).map(str::to_string).unwrap_or_default()
}

/// `host` of `host:port` (`[::1]` kept bracketed).
fn server_address_host(address: &str) -> String {
    address.rsplit_once(':').map_or(address, |(host, _)| host).to_string()
}
