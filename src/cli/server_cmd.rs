//! `ringflow server`: serve one task of a cluster until SIGINT or SIGTERM.
//!
//! Owns: turning flags (or `TF_CONFIG`) into `ServerOptions`, and waiting
//! for the stop signal. The server itself is `crate::server`.

use crate::cluster::{ClusterSpec, TaskId};
use crate::error::{Result, Status};
use crate::server::{Role, Server, ServerOptions};
use std::path::PathBuf;

pub struct ServerArgs {
    pub cluster: Option<PathBuf>,
    pub tf_config: bool,
    pub job: Option<String>,
    pub task: Option<u32>,
    pub role: String,
    pub cpu_devices: usize,
    pub threads: usize,
    pub listen: Option<String>,
    pub exit_on_stdin_eof: bool,
    /// `auto` or `tcp` (see `net::shm`).
    pub transport: String,
}

/// The cluster and this task, from `--cluster` or `TF_CONFIG`.
fn resolve(args: &ServerArgs) -> Result<(ClusterSpec, TaskId)> {
    let (spec, from_config) = match (&args.cluster, args.tf_config) {
        (Some(path), false) => (ClusterSpec::from_file(path)?, None),
        (None, true) => {
            let json = std::env::var("TF_CONFIG")
                .map_err(|_| Status::invalid_argument("--tf-config: the TF_CONFIG environment variable is not set"))?;
            ClusterSpec::from_tf_config(&json)?
        }
        (Some(_), true) => return Err(Status::invalid_argument("give --cluster FILE or --tf-config, not both")),
        (None, false) => return Err(Status::invalid_argument("give --cluster FILE or --tf-config")),
    };
    let job = args.job.clone().or_else(|| from_config.as_ref().map(|t| t.job.clone()));
    let index = args.task.or_else(|| from_config.as_ref().map(|t| t.index));
    let (Some(job), Some(index)) = (job, index) else {
        return Err(Status::invalid_argument("which task is this? give --job NAME --task N (or a TF_CONFIG task)"));
    };
    let task = TaskId { job, index };
    spec.address_of(&task)?;
    Ok((spec, task))
}

/// Serves until SIGINT/SIGTERM, then shuts down cleanly.
pub fn serve(args: &ServerArgs) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let (cluster, task) = resolve(args)?;
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
    options.listen = args.listen.clone();
    match args.transport.trim().to_ascii_lowercase().as_str() {
        "auto" | "shm" => {}
        "tcp" => options.transport.shm.enabled = false,
        other => {
            return Err(crate::error::Status::invalid_argument(format!("--transport {other}: expected auto or tcp")));
        }
    }
    let server = Server::start(options)?;
    println!("ringflow server {} listening on {}", server.task_name(), server.address());
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
