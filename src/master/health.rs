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
