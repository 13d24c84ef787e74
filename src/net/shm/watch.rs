//! The channel watch: one thread per process that sleeps in epoll and does
//! the two things no channel end can do for itself while it sleeps.
//! - **Hang-ups.** It watches the socket of every shared-memory channel and,
//!   when a peer hangs up (its process died, or it closed the connection),
//!   rings that channel's own doorbell. So a reader sleeps on its futex with
//!   no timeout: an idle connection costs no wake-ups, and a dead peer is
//!   noticed at once.
//! - **Idle trims.** A sender whose frames reached far into its ring asks
//!   for a trim; once the channel has sent nothing that large for a while,
//!   the watch returns the ring's free pages past a kept prefix to the
//!   kernel, so a connection that once moved a large tensor does not keep
//!   that memory resident for its whole life.
//!
//! Owns: the epoll set, its thread, the table from registration to the
//! channel's [`HangupSignal`], and the list of pending trims. Must not read
//! rings or frames: it sets a flag and rings a doorbell, or calls
//! [`Trim::trim`]; the channel decides what a hang-up means (its reader
//! drains what was published first) and which bytes are free.
//!
//! Each hang-up registration watches a duplicate of the socket's
//! descriptor, owned by the [`Watched`] guard: the number stays ours until
//! the guard removes it from the set, so a socket number reused after the
//! connection closes can never be mistaken for (or removed in place of) the
//! old one. The thread sleeps with no timeout unless a trim is pending.

use super::doorbell;
use super::region::{Direction, SharedRegion};
use foldhash::{HashMap, HashMapExt};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use parking_lot::Mutex;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

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

/// A channel's sending end, as the watch sees it for idle trims.
pub trait Trim: Send + Sync {
    /// When the trim may run (the last large frame plus the idle time).
    fn due(&self) -> Instant;
    /// Trims if due; `false` when it was not yet due (ask again at
    /// [`due`](Self::due)).
    fn trim(&self, now: Instant) -> bool;
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

/// Asks for `target`'s trim at its [`Trim::due`] time. The caller asks once
/// per trim (until `trim` runs) and holds the only strong reference that
/// matters: a channel that closes first is simply forgotten.
pub fn schedule_trim(target: Weak<dyn Trim>) {
    if let Ok(watch) = watch() {
        watch.trims.lock().push(target);
        let one = 1u64;
        // SAFETY: writes 8 bytes from a local to our eventfd; a full
        // counter (EAGAIN) already means "look again".
        unsafe { libc::write(watch.nudge.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// Whether the watch is running: without it, readers sleep in bounded
/// slices and check their sockets themselves.
pub fn running() -> bool {
    watch().is_ok_and(|w| w.running.load(Ordering::Acquire))
}

/// The epoll datum of the nudge eventfd (registrations count from 1).
const NUDGE: u64 = 0;

struct Watch {
    epoll: Epoll,
    targets: Mutex<HashMap<u64, Arc<HangupSignal>>>,
    next_id: AtomicU64,
    running: AtomicBool,
    /// Wakes the thread when a trim is scheduled.
    nudge: OwnedFd,
    trims: Mutex<Vec<Weak<dyn Trim>>>,
}

fn watch() -> Result<&'static Watch, String> {
    static WATCH: OnceLock<Result<&'static Watch, String>> = OnceLock::new();
    WATCH.get_or_init(start).clone()
}

fn start() -> Result<&'static Watch, String> {
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| format!("epoll_create: {e}"))?;
    // SAFETY: eventfd takes no pointers; the result is checked.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor the kernel just gave us.
    let nudge = unsafe { OwnedFd::from_raw_fd(raw) };
    epoll
        .add(nudge.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, NUDGE))
        .map_err(|e| format!("watching the nudge: {e}"))?;
    let watch: &'static Watch = Box::leak(Box::new(Watch {
        epoll,
        targets: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(NUDGE + 1),
        running: AtomicBool::new(true),
        nudge,
        trims: Mutex::new(Vec::new()),
    }));
    std::thread::Builder::new()
        .name("rf-shm-watch".into())
        .spawn(move || run(watch))
        .map_err(|e| format!("starting the channel watch: {e}"))?;
    Ok(watch)
}

fn run(watch: &'static Watch) {
    let mut events = [EpollEvent::empty(); 32];
    loop {
        let timeout = match next_trim(watch) {
            None => EpollTimeout::NONE,
            Some(due) => {
                let ms = due.saturating_duration_since(Instant::now()).as_millis().saturating_add(1);
                EpollTimeout::try_from(ms.min(60_000) as i32).unwrap_or(EpollTimeout::ZERO)
            }
        };
        let ready = match watch.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                // Readers asleep without a timeout are woken to see that
                // they must now check their sockets themselves.
                tracing::error!("the shared-memory channel watch failed ({e}); readers fall back to polling");
                watch.running.store(false, Ordering::Release);
                let targets: Vec<_> = watch.targets.lock().values().cloned().collect();
                targets.iter().for_each(|signal| signal.nudge());
                return;
            }
        };
        for event in &events[..ready] {
            if event.data() == NUDGE {
                let mut count = 0u64;
                // SAFETY: reads at most 8 bytes into a local from our
                // non-blocking eventfd.
                unsafe { libc::read(watch.nudge.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
                continue;
            }
            let target = watch.targets.lock().get(&event.data()).cloned();
            if let Some(signal) = target {
                signal.fire();
            }
        }
        run_due_trims(watch);
    }
}

/// The earliest due time among pending trims (dropping closed channels).
fn next_trim(watch: &Watch) -> Option<Instant> {
    let mut trims = watch.trims.lock();
    trims.retain(|t| t.strong_count() > 0);
    trims.iter().filter_map(Weak::upgrade).map(|t| t.due()).min()
}

fn run_due_trims(watch: &Watch) {
    let now = Instant::now();
    // Taken out of the list first: a trim locks its channel's producer,
    // which a sender scheduling a trim may hold while it takes the list.
    let pending = std::mem::take(&mut *watch.trims.lock());
    let mut again = Vec::new();
    for weak in pending {
        let Some(target) = weak.upgrade() else { continue };
        if target.due() > now || !target.trim(now) {
            again.push(weak);
        }
    }
    watch.trims.lock().extend(again);
}
