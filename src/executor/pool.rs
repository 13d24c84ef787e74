//! A device's thread pool: crossbeam-deque work stealing with an injector
//! for outside submitters, and idle threads that spin for a bounded time
//! before parking (so a 2-core machine is not burned, and a job that arrives
//! within the spin window sees no wake-up latency).
//!
//! Owns: the threads, their deques, and the sleep protocol. Who may touch
//! what:
//! - `Shared` (all threads and submitters): the injector, the stealers, the
//!   sleep state. Submitters only push and, when someone sleeps, notify.
//! - `WorkerLocal` (one per pool thread, never shared): its LIFO deque. A
//!   job spawned from a pool thread goes to its own deque; others steal.
//!
//! Must not know what a job does: it runs `FnOnce` and catches panics.
//! Why a parked thread is never missed: see README.md beside this file.

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// How a pool is built.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub name: String,
    pub threads: usize,
    /// How long an idle thread looks for work before parking.
    pub spin: Duration,
    /// Pin thread i to CPU (first_cpu + i) mod ncpus.
    pub pin_first_cpu: Option<usize>,
    /// Pin thread i to `cpus[i % len]` (`server --cpus`); wins over
    /// `pin_first_cpu`.
    pub cpus: Option<Arc<[usize]>>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            name: "ringflow".into(),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            spin: Duration::from_micros(50),
            pin_first_cpu: None,
            cpus: None,
        }
    }
}

/// Longest a parked thread sleeps before looking again on its own; a safety
/// net, not part of the wake-up protocol.
const PARK_TIMEOUT: Duration = Duration::from_secs(1);

struct Shared {
    id: usize,
    injector: Injector<Job>,
    stealers: Vec<Stealer<Job>>,
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    spin: Duration,
}

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The pool this thread serves (0: none) and its local deque.
    static CURRENT: Cell<(usize, *const Worker<Job>)> = const { Cell::new((0, std::ptr::null())) };
}

/// A fixed set of threads running jobs, stealing from each other when idle.
pub struct ThreadPool {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    size: usize,
}

impl ThreadPool {
    pub fn new(options: PoolOptions) -> std::io::Result<ThreadPool> {
        let threads = options.threads.max(1);
        let workers: Vec<Worker<Job>> = (0..threads).map(|_| Worker::new_lifo()).collect();
        let shared = Arc::new(Shared {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            injector: Injector::new(),
            stealers: workers.iter().map(Worker::stealer).collect(),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            spin: options.spin,
        });
        let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut handles = Vec::with_capacity(threads);
        for (index, local) in workers.into_iter().enumerate() {
            let shared = shared.clone();
            let pin = match &options.cpus {
                Some(cpus) if !cpus.is_empty() => Some(cpus[index % cpus.len()]),
                _ => options.pin_first_cpu.map(|first| (first + index) % ncpus),
            };
            let handle = std::thread::Builder::new().name(format!("{}-{index}", options.name)).spawn(move || {
                if let Some(cpu) = pin {
                    pin_to_cpu(cpu);
                }
                worker_main(&shared, index, local)
            })?;
            handles.push(handle);
        }
        Ok(ThreadPool { shared, threads: Mutex::new(handles), size: threads })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the calling thread is one of this pool's.
    pub fn on_pool_thread(&self) -> bool {
        CURRENT.with(|c| c.get().0 == self.shared.id)
    }

    /// Runs `job` on some pool thread.
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        self.spawn_boxed(Box::new(job));
    }

    pub fn spawn_boxed(&self, job: Job) {
        let id = self.shared.id;
        let pushed_locally = CURRENT.with(|c| {
            let (pool, local) = c.get();
            if pool == id && !local.is_null() {
                // SAFETY: `local` points at the deque owned by this very
                // thread's `worker_main` frame, which outlives every job it
                // runs; only this thread dereferences it.
                unsafe { (*local).push(job) };
                None
            } else {
                Some(job)
            }
        });
        if let Some(job) = pushed_locally {
            self.shared.injector.push(job);
        }
        self.shared.notify_one();
    }

    /// Stops the threads after the jobs already queued have run.
    pub fn shutdown(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _guard = self.shared.sleep_lock.lock();
            self.shared.wake.notify_all();
        }
        let handles = std::mem::take(&mut *self.threads.lock());
        let me = std::thread::current().id();
        for handle in handles {
            // A pool thread dropping its own pool cannot join itself.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn notify_one(&self) {
        // Pairs with the SeqCst increment of `sleepers` in `park`: either we
        // see the sleeper, or the sleeper's re-check sees our job.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.sleep_lock.lock();
            self.wake.notify_one();
        }
    }

    fn find_job(&self, index: usize, local: &Worker<Job>) -> Option<Job> {
        if let Some(job) = local.pop() {
            return Some(job);
        }
        loop {
            let mut retry = false;
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(job) => return Some(job),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let n = self.stealers.len();
            for k in 1..n {
                match self.stealers[(index + k) % n].steal() {
                    Steal::Success(job) => return Some(job),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// Parks until notified (or the safety timeout). Returns a job found by
    /// the re-check, if any.
    fn park(&self, index: usize, local: &Worker<Job>) -> Option<Job> {
        let mut guard = self.sleep_lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let found = self.find_job(index, local);
        if found.is_none() && !self.shutdown.load(Ordering::SeqCst) {
            self.wake.wait_for(&mut guard, PARK_TIMEOUT);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        found
    }
}

fn run_job(job: Job) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(job)) {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        tracing::error!("a job panicked on a pool thread: {what}");
    }
}

fn worker_main(shared: &Shared, index: usize, local: Worker<Job>) {
    CURRENT.with(|c| c.set((shared.id, &local as *const Worker<Job>)));
    'outer: loop {
        if let Some(job) = shared.find_job(index, &local) {
            run_job(job);
            continue;
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let spin_start = Instant::now();
        let mut rounds = 0u32;
        while spin_start.elapsed() < shared.spin {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if let Some(job) = shared.find_job(index, &local) {
                run_job(job);
                continue 'outer;
            }
            rounds += 1;
            if rounds % 64 == 0 {
                std::thread::yield_now();
            }
        }
        if let Some(job) = shared.park(index, &local) {
            run_job(job);
        }
    }
    CURRENT.with(|c| c.set((0, std::ptr::null())));
}

/// Pins the calling thread to `cpu`; failures are logged, not fatal.
pub fn pin_to_cpu(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
            tracing::warn!("cannot pin thread to cpu {cpu}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::mpsc;

    fn pool(threads: usize, spin_us: u64) -> ThreadPool {
        ThreadPool::new(PoolOptions {
            name: "test".into(),
            threads,
            spin: Duration::from_micros(spin_us),
            pin_first_cpu: None,
            cpus: None,
        })
        .unwrap()
    }

    #[test]
    fn listed_cpus_pin_the_threads_in_turn() {
        let Some(allowed) = crate::executor::cpu_list::allowed_cpus() else {
            return;
        };
        let cpus: Arc<[usize]> = allowed.iter().rev().copied().collect();
        let pool =
            ThreadPool::new(PoolOptions { threads: cpus.len(), cpus: Some(cpus.clone()), ..pool_options() }).unwrap();
        let (tx, rx) = mpsc::channel();
        let barrier = Arc::new(Barrier::new(cpus.len()));
        for _ in 0..cpus.len() {
            let (tx, barrier) = (tx.clone(), barrier.clone());
            // Every thread takes one job: each waits for all the others.
            pool.spawn(move || {
                let name = std::thread::current().name().unwrap_or_default().to_string();
                let index: usize = name.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap();
                let mask = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
                let on: Vec<usize> = (0..nix::sched::CpuSet::count()).filter(|&c| mask.is_set(c).unwrap()).collect();
                barrier.wait();
                tx.send((index, on)).unwrap();
            });
        }
        for _ in 0..cpus.len() {
            let (index, on) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(on, [cpus[index]], "thread {index}");
        }
        pool.shutdown();
    }

    fn pool_options() -> PoolOptions {
        PoolOptions { name: "pinned".into(), spin: Duration::from_micros(20), ..PoolOptions::default() }
    }

    #[test]
    fn runs_every_job_from_inside_and_outside() {
        let p = Arc::new(pool(2, 10));
        let (tx, rx) = mpsc::channel();
        for i in 0..1000 {
            let tx = tx.clone();
            let p2 = p.clone();
            p.spawn(move || {
                // Half the jobs spawn a child from the pool thread (local deque).
                if i % 2 == 0 {
                    let tx = tx.clone();
                    p2.spawn(move || tx.send(1).unwrap());
                }
                tx.send(1).unwrap();
            });
        }
        let total: usize = (0..1500).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).sum();
        assert_eq!(total, 1500);
    }

    #[test]
    fn two_threads_really_run_concurrently() {
        // Both jobs must be inside the barrier at once, or neither returns.
        let p = pool(2, 10);
        let barrier = Arc::new(Barrier::new(2));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let (b, tx) = (barrier.clone(), tx.clone());
            p.spawn(move || {
                b.wait();
                tx.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(10)).expect("both jobs ran at the same time");
        }
    }

    #[test]
    fn parked_threads_wake_for_new_work() {
        // Zero spin: every idle period parks, so each job exercises the wake path.
        let p = pool(2, 0);
        for _ in 0..200 {
            let (tx, rx) = mpsc::channel();
            p.spawn(move || tx.send(()).unwrap());
            rx.recv_timeout(Duration::from_millis(50)).expect("a parked thread was woken (not the 1 s safety net)");
        }
    }

    #[test]
    fn panicking_job_does_not_kill_the_pool() {
        let p = pool(1, 0);
        p.spawn(|| panic!("kernel bug"));
        let (tx, rx) = mpsc::channel();
        p.spawn(move || tx.send(7).unwrap());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 7);
    }
}
