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
    use nix::sys::signal::{SigSet, Signal};
    let (cluster, task) = resolve_task(args)?;
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
    options.metrics_port = args.metrics_port;
    let server = Server::start(options)?;
    println!("ringflow server {} listening on {}", server.task_name(), server.address());
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
