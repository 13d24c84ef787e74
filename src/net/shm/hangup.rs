//! The hang-up watch: one thread per process sleeps in epoll on the socket
//! of every shared-memory channel, and when a peer hangs up (its process
//! died, or it closed the connection) rings that channel's own doorbell.
//! So a channel's reader sleeps on its futex with no timeout: an idle
//! connection costs no wake-ups, and a dead peer is noticed at once.
//!
//! Owns: the epoll set, its thread, and the table from registration to the
//! channel's [`HangupSignal`]. Must not read rings or frames: it only sets
//! the signal's flag and rings the doorbell; the reader decides what a
//! hang-up means (it drains what was published first).
//!
//! Each registration watches a duplicate of the socket's descriptor, owned
//! by the [`Watched`] guard: the number stays ours until the guard removes
//! it from the set, so a socket number reused after the connection closes
//! can never be mistaken for (or removed in place of) the old one.

use super::doorbell;
use super::region::{Direction, SharedRegion};
use foldhash::{HashMap, HashMapExt};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use parking_lot::Mutex;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What the watch does for one channel when its peer hangs up.
pub struct HangupSignal {
    hung_up: AtomicBool,
    region: Arc<SharedRegion>,
    /// The direction the channel reads: its doorbell wakes the reader.
    rx_direction: Direction,
}

impl HangupSignal {
    pub fn new(region: Arc<SharedRegion>, rx_direction: Direction) -> HangupSignal {
        HangupSignal { hung_up: AtomicBool::new(false), region, rx_direction }
    }

    pub fn hung_up(&self) -> bool {
        self.hung_up.load(Ordering::Acquire)
    }

    fn fire(&self) {
        self.hung_up.store(true, Ordering::Release);
        self.nudge();
    }

    fn nudge(&self) {
        doorbell::ring(&self.region.ring(self.rx_direction).doorbell().seq);
    }
}

/// One socket in the watch; dropping it takes the socket out.
pub struct Watched {
    id: u64,
    socket: OwnedFd,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Watched(#{}, fd {})", self.id, self.socket.as_raw_fd())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Ok(watch) = watch() {
            let _ = watch.epoll.delete(&self.socket);
            watch.targets.lock().remove(&self.id);
        }
    }
}

/// Adds `socket` to the watch: `signal` fires once when it hangs up.
pub fn watch_socket(socket: RawFd, signal: Arc<HangupSignal>) -> Result<Watched, String> {
    let watch = watch()?;
    // SAFETY: the caller's socket is open for this call; the duplicate is
    // a new descriptor we own.
    let duplicate = unsafe { libc::fcntl(socket, libc::F_DUPFD_CLOEXEC, 0) };
    if duplicate < 0 {
        return Err(format!("duplicating the socket to watch: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel just gave us this descriptor.
    let socket = unsafe { OwnedFd::from_raw_fd(duplicate) };
    let id = watch.next_id.fetch_add(1, Ordering::Relaxed);
    watch.targets.lock().insert(id, signal);
    let flags = EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLONESHOT;
    if let Err(e) = watch.epoll.add(socket.as_fd(), EpollEvent::new(flags, id)) {
        watch.targets.lock().remove(&id);
        return Err(format!("watching the socket: {e}"));
    }
    Ok(Watched { id, socket })
}

struct Watch {
    epoll: Epoll,
    targets: Mutex<HashMap<u64, Arc<HangupSignal>>>,
    next_id: AtomicU64,
    running: AtomicBool,
}

fn watch() -> Result<&'static Watch, String> {
    static WATCH: OnceLock<Result<&'static Watch, String>> = OnceLock::new();
    WATCH.get_or_init(start).clone()
}

fn start() -> Result<&'static Watch, String> {
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| format!("epoll_create: {e}"))?;
    let watch: &'static Watch = Box::leak(Box::new(Watch {
        epoll,
        targets: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        running: AtomicBool::new(true),
    }));
    std::thread::Builder::new()
        .name("rf-shm-hangup".into())
        .spawn(move || run(watch))
        .map_err(|e| format!("starting the hang-up watch: {e}"))?;
    Ok(watch)
}

fn run(watch: &'static Watch) {
    let mut events = [EpollEvent::empty(); 32];
    loop {
        let ready = match watch.epoll.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                // Readers asleep without a timeout are woken to see that
                // they must now check their sockets themselves.
                tracing::error!("the shared-memory hang-up watch failed ({e}); readers fall back to polling");
                watch.running.store(false, Ordering::Release);
                let targets: Vec<_> = watch.targets.lock().values().cloned().collect();
                targets.iter().for_each(|signal| signal.nudge());
                return;
            }
        };
        for event in &events[..ready] {
            let target = watch.targets.lock().get(&event.data()).cloned();
            if let Some(signal) = target {
                signal.fire();
            }
        }
    }
}

/// Whether the watch is running: without it, readers sleep in bounded
/// slices and check their sockets themselves.
pub fn running() -> bool {
    watch().is_ok_and(|w| w.running.load(Ordering::Acquire))
}
