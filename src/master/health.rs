//! Whether each task of the cluster answers, as this master sees it:
//! heartbeats and the unavailable mark, which steps in flight check.
//!
//! Owns: one heartbeat thread per remote task (while the master has
//! sessions) and each task's up/down state. Must not touch sessions or
//! graphs: a step asks ([`Health::admit`], [`Health::check`]) and the
//! session decides what failing means.
//!
//! A lost connection fails the calls on it at once (the transport's rule);
//! a task that keeps its connection but stops answering (a stopped
//! process, a silent partition) is caught here: a heartbeat without an
//! answer within `timeout` marks it unavailable, and a step waiting on it
//! sees the mark at its next check (its waits check every
//! `net::rpc::client::ABANDON_POLL`, 20 ms), so it learns of a frozen peer
//! at most `interval + timeout` (2 s by default) and a check after it
//! froze. A step checks instead of registering a callback for the
//! heartbeat thread: registering and unregistering took two locks, an
//! allocation and about 250 ns of every remote step's path (TSC stamps,
//! 2 vCPU Intel Xeon 6/207 VM), a check is one load per task.

use crate::error::Status;
use crate::worker::WorkerInterface;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Heartbeat settings.
#[derive(Debug, Clone, Copy)]
pub struct HealthOptions {
    /// Time between heartbeats to one task.
    pub interval: Duration,
    /// Longest a heartbeat may go unanswered before the task is marked
    /// unavailable.
    pub timeout: Duration,
}

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions { interval: Duration::from_millis(500), timeout: Duration::from_millis(1500) }
    }
}

struct TaskState {
    /// Why the task is unavailable, while it is.
    down: Option<Status>,
}

struct Watched {
    name: String,
    worker: Arc<dyn WorkerInterface>,
    state: Mutex<TaskState>,
    /// Mirrors `state.down.is_some()` for the step path's check.
    is_down: AtomicBool,
}

struct Shared {
    tasks: Vec<Watched>,
    options: HealthOptions,
    /// Open sessions: heartbeats run while there is one.
    sessions: AtomicUsize,
    /// Their handles, named in each heartbeat so workers keep them.
    handles: Mutex<Arc<[String]>>,
    stop: AtomicBool,
    wake: (Mutex<()>, Condvar),
}

/// The master's view of its tasks' liveness.
pub struct Health {
    shared: Arc<Shared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    started: AtomicBool,
    /// Whether a task is another process's (only those can freeze apart
    /// from this one, so only they are watched).
    remote: Vec<bool>,
}

impl Health {
    /// Watches `tasks` (index order is the caller's task order); only the
    /// remote ones (`remote[i]`) get heartbeats.
    pub fn new(tasks: Vec<(String, Arc<dyn WorkerInterface>, bool)>, options: HealthOptions) -> Health {
        let watched = tasks
            .iter()
            .map(|(name, worker, _)| Watched {
                name: name.clone(),
                worker: worker.clone(),
                state: Mutex::new(TaskState { down: None }),
                is_down: AtomicBool::new(false),
            })
            .collect();
        let remote: Vec<bool> = tasks.iter().map(|t| t.2).collect();
        Health {
            shared: Arc::new(Shared {
                tasks: watched,
                options,
                sessions: AtomicUsize::new(0),
                handles: Mutex::new(Arc::from(Vec::new())),
                stop: AtomicBool::new(false),
                wake: (Mutex::new(()), Condvar::new()),
            }),
            threads: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            remote,
        }
    }

    pub fn options(&self) -> HealthOptions {
        self.shared.options
    }

    /// The master's open sessions changed: heartbeats run while there is
    /// one (threads start on first use) and name them all.
    pub fn sessions_changed(&self, handles: Vec<String>) {
        self.shared.sessions.store(handles.len(), Ordering::Release);
        *self.shared.handles.lock() = Arc::from(handles);
        if !self.started.swap(true, Ordering::AcqRel) {
            let mut threads = self.threads.lock();
            for task in 0..self.shared.tasks.len() {
                let shared = self.shared.clone();
                let name = format!("rf-heartbeat-{task}");
                match std::thread::Builder::new().name(name).spawn(move || heartbeat_loop(&shared, task)) {
                    Ok(handle) => threads.push(handle),
                    Err(e) => tracing::error!("no heartbeats for {}: {e}", self.shared.tasks[task].name),
                }
            }
        }
        let (lock, condvar) = &self.shared.wake;
        let _held = lock.lock();
        condvar.notify_all();
    }

    /// Admits a step on `tasks`: fails if one is marked unavailable and
    /// does not answer a probe now (it may have come back since its last
    /// heartbeat).
    pub fn admit(&self, tasks: &[usize]) -> Result<(), Status> {
        for &task in tasks {
            if self.remote[task] && self.shared.tasks[task].is_down.load(Ordering::Acquire) {
                self.probe(task)?;
            }
        }
        Ok(())
    }

    /// Why one of `tasks` is marked unavailable now, if one is: what a step
    /// in flight checks between its waits.
    pub fn check(&self, tasks: &[usize]) -> Result<(), Status> {
        for &task in tasks {
            let watched = &self.shared.tasks[task];
            if self.remote[task] && watched.is_down.load(Ordering::Acquire) {
                let why = watched.state.lock().down.clone();
                return Err(why.unwrap_or_else(|| Status::unavailable(format!("task {} is unavailable", watched.name))));
            }
        }
        Ok(())
    }

    /// One heartbeat now, on the caller's thread: marks the task up or down.
    pub fn probe(&self, task: usize) -> Result<(), Status> {
        beat(&self.shared, task)
    }

    /// Whether the task is marked unavailable now.
    pub fn is_down(&self, task: usize) -> bool {
        self.shared.tasks[task].is_down.load(Ordering::Acquire)
    }
}

impl Drop for Health {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let (lock, condvar) = &self.shared.wake;
            let _held = lock.lock();
            condvar.notify_all();
        }
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}

/// One heartbeat of `task`: marks it down or up.
fn beat(shared: &Shared, task: usize) -> Result<(), Status> {
    let watched = &shared.tasks[task];
    let deadline = Instant::now() + shared.options.timeout;
    let sessions = shared.handles.lock().clone();
    match watched.worker.heartbeat(deadline, &sessions) {
        Ok(_) => {
            if watched.is_down.load(Ordering::Acquire) {
                let mut state = watched.state.lock();
                if state.down.take().is_some() {
                    tracing::info!("task {} answers again", watched.name);
                }
                watched.is_down.store(false, Ordering::Release);
            }
            Ok(())
        }
        Err(e) => {
            let status = Status::unavailable(format!(
                "task {} is unavailable: no heartbeat answer within {} ms ({})",
                watched.name,
                shared.options.timeout.as_millis(),
                e.message
            ));
            let mut state = watched.state.lock();
            if state.down.is_none() {
                tracing::warn!("{}", status.message);
            }
            state.down = Some(status.clone());
            watched.is_down.store(true, Ordering::Release);
            Err(status)
        }
    }
}

fn heartbeat_loop(shared: &Shared, task: usize) {
    loop {
        {
            let (lock, condvar) = &shared.wake;
            let mut held = lock.lock();
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            let wait = if shared.sessions.load(Ordering::Acquire) > 0 {
                shared.options.interval
            } else {
                Duration::from_secs(3600)
            };
            condvar.wait_for(&mut held, wait);
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
        }
        if shared.sessions.load(Ordering::Acquire) > 0 {
            let _ = beat(shared, task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Code, Result};
    use crate::graph::GraphSpec;
    use crate::worker::{ClusterInfo, DeviceAttributes, DriveCall, RunGraphDone, RunGraphRequest};

    /// Answers heartbeats while `up`; nothing else is called here.
    struct Heartbeats {
        up: AtomicBool,
    }

    impl WorkerInterface for Heartbeats {
        fn task_name(&self) -> &str {
            "fake"
        }
        fn get_status(&self) -> Result<Vec<DeviceAttributes>> {
            Ok(Vec::new())
        }
        fn incarnation(&self) -> Result<u64> {
            Ok(1)
        }
        fn heartbeat(&self, _deadline: Instant, _sessions: &[String]) -> Result<u64> {
            match self.up.load(Ordering::Acquire) {
                true => Ok(1),
                false => Err(Status::deadline_exceeded("no answer")),
            }
        }
        fn create_worker_session(&self, _: &str, _: &ClusterInfo, _: bool) -> Result<()> {
            Ok(())
        }
        fn delete_worker_session(&self, _: &str) -> Result<()> {
            Ok(())
        }
        fn register_graph(&self, _: &str, _: GraphSpec, _: bool) -> Result<String> {
            Ok(String::new())
        }
        fn deregister_graph(&self, _: &str, _: &str) -> Result<()> {
            Ok(())
        }
        fn run_graph(&self, _: RunGraphRequest, done: RunGraphDone) -> Option<DriveCall> {
            done(Err(Status::unimplemented("not here")));
            None
        }
        fn cleanup_graph(&self, _: &str, _: u64) -> Result<()> {
            Ok(())
        }
        fn cleanup_all(&self, _: &[String]) -> Result<()> {
            Ok(())
        }
        fn reset_session(&self, _: &str, _: &[String]) -> Result<()> {
            Ok(())
        }
        fn abort_step(&self, _: &str, _: u64, _: Status) {}
        fn registered_graphs(&self, _: &str) -> Result<usize> {
            Ok(0)
        }
    }

    /// A step on a task marked unavailable is refused (a probe fails too)
    /// and one in flight learns why at its check; only remote tasks count;
    /// once the task answers a probe again, steps are admitted.
    #[test]
    fn steps_check_the_unavailable_mark_and_admit_after_a_good_probe() {
        let local = Arc::new(Heartbeats { up: AtomicBool::new(false) });
        let remote = Arc::new(Heartbeats { up: AtomicBool::new(true) });
        let health = Health::new(
            vec![
                ("/job:w/task:0".into(), local as Arc<dyn WorkerInterface>, false),
                ("/job:w/task:1".into(), remote.clone() as Arc<dyn WorkerInterface>, true),
            ],
            HealthOptions { interval: Duration::from_secs(3600), timeout: Duration::from_millis(50) },
        );
        assert!(health.admit(&[0, 1]).is_ok() && health.check(&[0, 1]).is_ok());
        remote.up.store(false, Ordering::Release);
        assert!(health.check(&[0, 1]).is_ok(), "not marked until a heartbeat goes unanswered");
        let missed = health.probe(1).unwrap_err();
        let why = health.check(&[0, 1]).unwrap_err();
        assert_eq!((why.code, &why.message), (Code::Unavailable, &missed.message));
        assert!(why.message.contains("task:1") && why.message.contains("heartbeat"), "{why}");
        assert!(health.check(&[0]).is_ok(), "task 0 is this process's: never marked");
        assert_eq!(health.admit(&[1]).unwrap_err().code, Code::Unavailable);
        remote.up.store(true, Ordering::Release);
        assert!(health.admit(&[1]).is_ok(), "a probe that is answered clears the mark");
        assert!(health.check(&[0, 1]).is_ok());
    }
}
