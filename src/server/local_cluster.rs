//! A cluster of `/job:worker/task:0..N-1` servers on loopback, each a child
//! process of this binary: what `verify --local-cluster`, the demo, the
//! remote benchmarks and the integration tests run against.
//!
//! Owns: choosing ports, starting the children (each dies with its
//! parent), waiting until every one answers, and stopping them. Must not
//! run steps: callers create sessions on [`LocalCluster::target`].

use crate::cluster::ClusterSpec;
use crate::error::{Result, Status};
use crate::net::message as msg;
use crate::net::{Client, TransportOptions};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the children may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long stopped children may take to shut down before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub struct LocalCluster {
    /// Each child's stdin stays open while we live: a child exits when it
    /// reads end-of-file, which the kernel delivers however we die.
    children: Vec<Child>,
    spec: ClusterSpec,
    spec_file: PathBuf,
}

/// Extra arguments for every server.
#[derive(Debug, Clone, Default)]
pub struct LocalClusterOptions {
    pub cpu_devices: usize,
    pub threads_per_device: usize,
}

fn free_ports(n: usize) -> Result<Vec<u16>> {
    // Held open together so the kernel hands out distinct ports.
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Status::unavailable(format!("cannot reserve loopback ports: {e}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Status::unavailable(format!("cannot reserve loopback ports: {e}")))
}

impl LocalCluster {
    /// Starts `tasks` servers from the binary at `exe`.
    pub fn start(exe: &Path, tasks: usize, options: &LocalClusterOptions) -> Result<LocalCluster> {
        if tasks == 0 {
            return Err(Status::invalid_argument("a local cluster needs at least one task"));
        }
        let mut last_error = None;
        // A port taken between reserving and binding fails one attempt.
        for _ in 0..3 {
            match LocalCluster::try_start(exe, tasks, options) {
                Ok(c) => return Ok(c),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| Status::internal("local cluster did not start")))
    }

    fn try_start(exe: &Path, tasks: usize, options: &LocalClusterOptions) -> Result<LocalCluster> {
        let ports = free_ports(tasks)?;
        let spec = ClusterSpec::workers(ports.iter().map(|p| format!("127.0.0.1:{p}")).collect());
        let spec_file = std::env::temp_dir().join(format!("ringflow-cluster-{}-{}.toml", std::process::id(), ports[0]));
        std::fs::write(&spec_file, spec.to_toml())
            .map_err(|e| Status::permission_denied(format!("cannot write {}: {e}", spec_file.display())))?;
        let mut cluster = LocalCluster { children: Vec::with_capacity(tasks), spec, spec_file };
        for task in 0..tasks {
            let mut command = Command::new(exe);
            command
                .arg("server")
                .arg("--cluster")
                .arg(&cluster.spec_file)
                .arg("--job")
                .arg("worker")
                .arg("--task")
                .arg(task.to_string())
                .arg("--exit-on-stdin-eof")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            if options.cpu_devices > 0 {
                command.arg("--cpu-devices").arg(options.cpu_devices.to_string());
            }
            if options.threads_per_device > 0 {
                command.arg("--threads").arg(options.threads_per_device.to_string());
            }
            let child = command
                .spawn()
                .map_err(|e| Status::internal(format!("cannot start {} for task {task}: {e}", exe.display())))?;
            cluster.children.push(child);
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let options =
            TransportOptions { connect_timeout_ms: 500, name: "launcher".into(), ..TransportOptions::default() };
        for (i, (task, address)) in self.spec.tasks().into_iter().enumerate() {
            loop {
                if let Ok(Some(status)) = self.children[i].try_wait() {
                    return Err(Status::unavailable(format!("{task} exited during start-up ({status})")));
                }
                let answered = Client::connect(&address, options.clone()).and_then(|c| {
                    c.call_rpc(&msg::GetStatusRequest::default(), &[], Instant::now() + Duration::from_secs(2))
                });
                if answered.is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(Status::deadline_exceeded(format!(
                        "{task} at {address} did not answer within {} s",
                        START_TIMEOUT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The address of task `i`.
    pub fn address(&self, task: usize) -> &str {
        &self.spec.cluster["worker"][task]
    }

    /// `ringflow://` target of task `i`'s master.
    pub fn target(&self, task: usize) -> String {
        format!("ringflow://{}", self.address(task))
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Kills task `i` (to test failures).
    pub fn kill(&mut self, task: usize) {
        let _ = self.children[task].kill();
        let _ = self.children[task].wait();
    }

    /// Stops every server.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Closes every child's stdin (each then shuts down cleanly, so
    /// profilers running it can write their data), waits up to
    /// [`STOP_GRACE`] for them all, and kills whoever is still there.
    fn stop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        let deadline = Instant::now() + STOP_GRACE;
        for child in &mut self.children {
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
        let _ = std::fs::remove_file(&self.spec_file);
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// This binary, for starting children (tests pass the built binary instead).
pub fn current_binary() -> Result<PathBuf> {
    std::env::current_exe().map_err(|e| Status::internal(format!("cannot locate this binary: {e}")))
}
