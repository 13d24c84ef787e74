//! A cluster of servers on loopback (`/job:worker/task:0..N-1`, or any
//! jobs, e.g. `ps=1,worker=2`), each a child process of this binary: what
//! `verify --local-cluster`, the demo, the remote benchmarks and the
//! integration tests run against.
//!
//! Owns: choosing ports, starting the children (each dies with its
//! parent), waiting until every one answers, and stopping them. Must not
//! run steps: callers create sessions on [`LocalCluster::target`].

use crate::cluster::ClusterSpec;
use crate::error::{Result, Status};
use crate::net::message as msg;
use crate::net::{Client, TransportOptions};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
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
    /// `(job, task index)` of each child, in `children`'s order.
    tasks: Vec<(String, usize)>,
    spec: ClusterSpec,
    spec_file: PathBuf,
    exe: PathBuf,
    options: LocalClusterOptions,
}

/// Jobs and their task counts, as `--local-cluster` takes them: `N` (N
/// worker tasks) or `ps=1,worker=2`.
pub fn parse_jobs(text: &str) -> Result<Vec<(String, usize)>> {
    let bad = || Status::invalid_argument(format!("'{text}' is not a task count (N) or a job list (ps=1,worker=2)"));
    if let Ok(n) = text.trim().parse::<usize>() {
        return if n == 0 { Err(bad()) } else { Ok(vec![("worker".to_string(), n)]) };
    }
    let mut jobs = Vec::new();
    for part in text.split(',') {
        let (job, count) = part.split_once('=').ok_or_else(bad)?;
        let job = job.trim();
        let count: usize = count.trim().parse().map_err(|_| bad())?;
        if job.is_empty() || count == 0 || !job.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad());
        }
        if jobs.iter().any(|(j, _): &(String, usize)| j == job) {
            return Err(Status::invalid_argument(format!("job '{job}' is listed twice in '{text}'")));
        }
        jobs.push((job.to_string(), count));
    }
    Ok(jobs)
}

/// Extra arguments for every server.
#[derive(Debug, Clone, Default)]
pub struct LocalClusterOptions {
    pub cpu_devices: usize,
    pub threads_per_device: usize,
    /// More `ringflow server` flags for every task (e.g. heartbeat settings).
    pub extra_args: Vec<String>,
    /// Start the servers with `--transport tcp` (no shared memory).
    pub force_tcp: bool,
    /// The CPU that task i (its index in its job) and every thread it
    /// starts are held to: `task_cpus[i]`, for benchmarks that place
    /// processes. Empty: the kernel places them.
    pub task_cpus: Vec<usize>,
}

/// `n` distinct free loopback ports (reserved together, then released).
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>> {
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
    /// Starts `tasks` worker servers from the binary at `exe`.
    pub fn start(exe: &Path, tasks: usize, options: &LocalClusterOptions) -> Result<LocalCluster> {
        LocalCluster::start_jobs(exe, &[("worker".to_string(), tasks)], options)
    }

    /// Starts the tasks of every job in `jobs` from the binary at `exe`.
    pub fn start_jobs(exe: &Path, jobs: &[(String, usize)], options: &LocalClusterOptions) -> Result<LocalCluster> {
        if jobs.iter().map(|(_, n)| n).sum::<usize>() == 0 {
            return Err(Status::invalid_argument("a local cluster needs at least one task"));
        }
        let mut last_error = None;
        // A port taken between reserving and binding fails one attempt.
        for _ in 0..3 {
            match LocalCluster::try_start(exe, jobs, options) {
                Ok(c) => return Ok(c),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| Status::internal("local cluster did not start")))
    }

    fn try_start(exe: &Path, jobs: &[(String, usize)], options: &LocalClusterOptions) -> Result<LocalCluster> {
        let total = jobs.iter().map(|(_, n)| n).sum();
        let mut ports = free_ports(total)?.into_iter();
        let mut spec = ClusterSpec::default();
        for (job, n) in jobs {
            spec.cluster.insert(job.clone(), ports.by_ref().take(*n).map(|p| format!("127.0.0.1:{p}")).collect());
        }
        let first_port = spec.cluster.values().flatten().next().cloned().unwrap_or_default();
        let spec_file = std::env::temp_dir().join(format!(
            "ringflow-cluster-{}-{}.toml",
            std::process::id(),
            first_port.replace([':', '.'], "_")
        ));
        std::fs::write(&spec_file, spec.to_toml())
            .map_err(|e| Status::permission_denied(format!("cannot write {}: {e}", spec_file.display())))?;
        // Children in the spec's task order, which `wait_ready` follows.
        let tasks: Vec<(String, usize)> =
            spec.cluster.iter().flat_map(|(job, addrs)| (0..addrs.len()).map(move |i| (job.clone(), i))).collect();
        let mut cluster = LocalCluster {
            children: Vec::with_capacity(total),
            tasks: tasks.clone(),
            spec,
            spec_file,
            exe: exe.to_path_buf(),
            options: options.clone(),
        };
        for (job, task) in tasks {
            let child = cluster.spawn(&job, task)?;
            cluster.children.push(child);
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn spawn(&self, job: &str, task: usize) -> Result<Child> {
        let options = &self.options;
        let mut command = Command::new(&self.exe);
        command
            .arg("server")
            .arg("--cluster")
            .arg(&self.spec_file)
            .arg("--job")
            .arg(job)
            .arg("--task")
            .arg(task.to_string())
            .arg("--exit-on-stdin-eof")
            .args(&options.extra_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if options.cpu_devices > 0 {
            command.arg("--cpu-devices").arg(options.cpu_devices.to_string());
        }
        if options.threads_per_device > 0 {
            command.arg("--threads").arg(options.threads_per_device.to_string());
        }
        if options.force_tcp {
            command.arg("--transport").arg("tcp");
        }
        if let Some(&cpu) = options.task_cpus.get(task) {
            let mut set = nix::sched::CpuSet::new();
            set.set(cpu).map_err(|e| Status::invalid_argument(format!("task {task} on CPU {cpu}: {e}")))?;
            // SAFETY: between fork and exec the hook makes one system call
            // on a set built before the fork; it allocates nothing and
            // takes no lock.
            unsafe {
                command.pre_exec(move || {
                    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(std::io::Error::from)
                });
            }
        }
        if let Some(path) = crate::net::SecretSetting::process_default().file() {
            command.arg("--secret-file").arg(path);
        }
        command.spawn().map_err(|e| {
            Status::internal(format!("cannot start {} for /job:{job}/task:{task}: {e}", self.exe.display()))
        })
    }

    /// Starts worker task `task` again on its port (after [`kill`](Self::kill)),
    /// as a new process, and waits until it answers.
    pub fn restart(&mut self, task: usize) -> Result<()> {
        let i = self.index_of(task).ok_or_else(|| Status::invalid_argument(format!("no worker task {task}")))?;
        let _ = self.children[i].kill();
        let _ = self.children[i].wait();
        self.children[i] = self.spawn("worker", task)?;
        self.wait_ready()
    }

    /// The process id of worker task `task` (to stop or signal it).
    pub fn pid(&self, task: usize) -> Option<u32> {
        self.index_of(task).map(|i| self.children[i].id())
    }

    fn index_of(&self, task: usize) -> Option<usize> {
        self.tasks.iter().position(|(j, t)| j == "worker" && *t == task)
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
                // A server that refuses us for want of the cluster secret is up.
                if answered.as_ref().is_ok() || answered.is_err_and(|e| e.code == crate::error::Code::Unauthenticated) {
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

    /// The address of worker task `i`.
    pub fn address(&self, task: usize) -> &str {
        &self.spec.cluster["worker"][task]
    }

    /// `ringflow://` target of worker task `i`'s master.
    pub fn target(&self, task: usize) -> String {
        format!("ringflow://{}", self.address(task))
    }

    /// `ringflow://` target of `/job:{job}/task:{task}`'s master, if it exists.
    pub fn target_of(&self, job: &str, task: usize) -> Option<String> {
        self.spec.cluster.get(job)?.get(task).map(|a| format!("ringflow://{a}"))
    }

    /// The target a client of the whole cluster uses: worker task 0, or
    /// the first task of the first job when there is no worker job.
    pub fn default_target(&self) -> String {
        self.target_of("worker", 0)
            .or_else(|| self.tasks.first().and_then(|(job, i)| self.target_of(job, *i)))
            .unwrap_or_default()
    }

    /// How many tasks job `job` has here.
    pub fn tasks_of(&self, job: &str) -> usize {
        self.spec.cluster.get(job).map_or(0, Vec::len)
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Kills worker task `i` (to test failures).
    pub fn kill(&mut self, task: usize) {
        if let Some(i) = self.index_of(task) {
            let _ = self.children[i].kill();
            let _ = self.children[i].wait();
        }
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
        self.tasks.clear();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_lists_parse() {
        assert_eq!(parse_jobs("3").unwrap(), vec![("worker".to_string(), 3)]);
        assert_eq!(parse_jobs("ps=1,worker=2").unwrap(), vec![("ps".to_string(), 1), ("worker".to_string(), 2)]);
        for bad in ["0", "ps=0", "ps", "=2", "ps=1,ps=2", "p s=1", ""] {
            assert!(parse_jobs(bad).is_err(), "{bad}");
        }
    }
}
