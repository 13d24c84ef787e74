//! The byte movers: send a frame's slices, receive into the reader's space,
//! each with a bounded spin before the thread sleeps.
//!
//! Owns: the choice of driver ([`Driver::Uring`] or [`Driver::Socket`]),
//! made once per process from [`TransportKind`] and a probe, and logged; the
//! per-thread io_uring (`uring`); the plain-socket fallback (`socket`).
//! Must not know about frames' meaning, requests or services.
//!
//! Both drivers move the same bytes (the wire format is above this layer),
//! so an io_uring peer and a fallback peer interoperate. Operations are
//! synchronous for their caller: a buffer handed to the kernel belongs to
//! the operation until its completion is reaped, even when the caller's
//! deadline passes (the receive is cancelled and its completion awaited).

pub(crate) mod socket;

/// How long a spin-wait spins purely before it starts yielding its core
/// (`RINGFLOW_PURE_SPIN_US`, default 10).
pub fn pure_spin() -> std::time::Duration {
    static PURE: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *PURE.get_or_init(|| {
        let us = std::env::var("RINGFLOW_PURE_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
        std::time::Duration::from_micros(us)
    })
}

/// One round of a bounded spin-wait that began at `spin_start`: pure
/// spinning at first (a reply that comes within microseconds is seen at
/// once), then giving the core away each round if anyone else can run.
///
/// The pure phase needs a spare core ([`crate::host::has_spare_core`]: one
/// lately idle, or no thread kept waiting for a core): on a machine with
/// fewer cores than spinning threads (a client, a master and a worker on 2
/// cores), a spinner that does not yield holds the core the thread with the
/// awaited message needs. There every wait yields from its first round:
/// step-remote on 2 cores, 10 alternating pairs, p50 41-68 µs (3.4-4.3× the
/// raw round trip) against 52-97 µs (4.1-6.9×) with a 10 µs pure phase and
/// the session's client asleep. Two busy processes on 2 cores keep nobody
/// waiting, and spin purely: a one-task step over shared memory, 200,000
/// steps, three alternating pairs, p50 3.41-3.58 µs against 3.93-4.45 µs
/// yielding every round.
#[inline]
pub fn spin_pause(spin_start: std::time::Instant) {
    let now = std::time::Instant::now();
    if may_spin_purely(spin_start, now) {
        std::hint::spin_loop();
    } else {
        yield_core(now);
    }
}

/// Gives the core away for one round of a spin-wait whose round began at
/// `round_start`, and says how long that took. Every yield is reported to
/// [`crate::host::note_yield`]: two in a row that another thread used end
/// pure spinning in this process for a while (threads queue for cores),
/// where idle stretches between bursts of work would keep the idle-time
/// windows saying a core is spare; one that finds nobody else to run
/// restores it.
#[inline]
pub fn yield_core(round_start: std::time::Instant) -> std::time::Duration {
    std::thread::yield_now();
    let took = round_start.elapsed();
    crate::host::note_yield(round_start, took);
    took
}

/// Whether a spin-wait that began at `spin_start` is, at `now`, still in
/// its pure phase with a spare core to spin on.
#[inline]
fn may_spin_purely(spin_start: std::time::Instant, now: std::time::Instant) -> bool {
    now.saturating_duration_since(spin_start) < pure_spin() && crate::host::has_spare_core_at(now)
}

/// Polls a spin-wait makes between two looks at the clock when it may
/// spin purely ([`spin_until`]).
const POLL_BURST: u32 = 8;

/// Like [`spin_pause`], for a wait whose condition is one load and whose
/// round has just read the clock (`now`, for its deadline): while the
/// wait may spin purely, polls `ready` up to [`POLL_BURST`] times with a
/// pause between. So a round reads the clock once (about 35 ns here), for
/// its deadline, the pure phase and the spare-core sampler together,
/// instead of three times for every poll, and a spinner sees a published
/// frame that much sooner. Returns at the first `true`; when the round
/// yielded its core instead, how long from `now` that took.
#[inline]
pub fn spin_until(
    spin_start: std::time::Instant,
    now: std::time::Instant,
    mut ready: impl FnMut() -> bool,
) -> Option<std::time::Duration> {
    if may_spin_purely(spin_start, now) {
        for _ in 0..POLL_BURST {
            if ready() {
                return None;
            }
            std::hint::spin_loop();
        }
        None
    } else {
        Some(yield_core(now))
    }
}

pub(crate) mod uring;

use crate::alloc::Region;
use std::io;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Which transport a process asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    /// io_uring when the probe succeeds, else the socket fallback.
    #[default]
    Auto,
    /// io_uring, or an error when unavailable.
    Uring,
    /// Plain sockets (readv/sendmsg/poll), forced.
    Socket,
}

impl TransportKind {
    /// Reads `RINGFLOW_TRANSPORT` (`auto`, `uring`/`io_uring`, `socket`;
    /// `tcp` and `shm` pick the driver automatically: whether shared memory
    /// is offered is `net::shm::ShmOptions`'s choice, from the same variable).
    pub fn from_env() -> TransportKind {
        match std::env::var("RINGFLOW_TRANSPORT") {
            Ok(v) => TransportKind::parse(&v).unwrap_or_else(|| {
                tracing::warn!("RINGFLOW_TRANSPORT={v:?} is not auto|tcp|shm|uring|socket; using auto");
                TransportKind::Auto
            }),
            Err(_) => TransportKind::Auto,
        }
    }

    pub fn parse(s: &str) -> Option<TransportKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" | "tcp" | "shm" => Some(TransportKind::Auto),
            "uring" | "io_uring" | "io-uring" => Some(TransportKind::Uring),
            "socket" | "sockets" | "fallback" => Some(TransportKind::Socket),
            _ => None,
        }
    }
}

/// The driver a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Uring,
    Socket,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::Uring => "io_uring",
            Driver::Socket => "socket",
        }
    }
}

/// Resolves a requested kind to a driver, probing io_uring once per
/// process. `Uring` fails with the probe's reason when it is unavailable.
pub fn select_driver(kind: TransportKind) -> io::Result<Driver> {
    match kind {
        TransportKind::Socket => Ok(Driver::Socket),
        TransportKind::Uring => match uring::probe() {
            Ok(_) => Ok(Driver::Uring),
            Err(reason) => Err(io::Error::other(format!("io_uring unavailable: {reason}"))),
        },
        TransportKind::Auto => {
            static LOGGED: OnceLock<Driver> = OnceLock::new();
            Ok(*LOGGED.get_or_init(|| match uring::probe() {
                Ok(features) => {
                    tracing::info!("transport: io_uring ({features})");
                    Driver::Uring
                }
                Err(reason) => {
                    tracing::warn!("transport: io_uring unavailable ({reason}); using the socket fallback");
                    Driver::Socket
                }
            }))
        }
    }
}

/// How long to spin before sleeping, and when to give up.
#[derive(Debug, Clone, Copy)]
pub struct Wait<'a> {
    pub spin: Duration,
    pub deadline: Option<Instant>,
    /// The caller expects at least `len` more bytes (a large frame's body):
    /// without a deadline, one receive may wait for all of them
    /// (MSG_WAITALL), which saves a wake-up per socket-buffer's worth.
    pub fill: bool,
    /// The registered region the receive buffer may lie in: the io_uring
    /// driver registers it with the thread's ring (once) and receives into
    /// it with fixed-buffer reads.
    pub region: Option<&'a Region>,
}

/// Receives at least this long may be filled in one wait-all operation.
pub(crate) const FILL_MIN_BYTES: usize = 64 << 10;

impl Wait<'_> {
    pub(crate) fn wait_all(&self, len: usize) -> bool {
        self.fill && self.deadline.is_none() && len >= FILL_MIN_BYTES
    }
}

impl Wait<'_> {
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvOutcome {
    Data(usize),
    /// The peer closed the connection.
    Eof,
    TimedOut,
}

/// Receives at most `len` bytes into `ptr`.
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes that nobody reads until
/// this returns.
pub unsafe fn recv(driver: Driver, fd: RawFd, ptr: *mut u8, len: usize, wait: Wait<'_>) -> io::Result<RecvOutcome> {
    let outcome = match driver {
        // SAFETY: forwarded contract.
        Driver::Uring => unsafe { uring::recv(fd, ptr, len, wait) },
        // SAFETY: forwarded contract.
        Driver::Socket => unsafe { socket::recv(fd, ptr, len, wait) },
    };
    if let Ok(RecvOutcome::Data(n)) = outcome {
        crate::counters::count_received(n);
    }
    outcome
}

/// Sends every byte of `slices`, in order, or fails with `TimedOut` once
/// `deadline` passes (the stream then holds part of the bytes: the caller
/// must close it). `zerocopy` asks for zero-copy send where the driver has
/// it.
pub fn send_all(
    driver: Driver,
    fd: RawFd,
    slices: &[IoSlice<'_>],
    zerocopy: bool,
    spin: Duration,
    deadline: Instant,
) -> io::Result<()> {
    match driver {
        Driver::Uring => uring::send_all(fd, slices, zerocopy, spin, deadline),
        Driver::Socket => socket::send_all(fd, slices, deadline),
    }?;
    crate::counters::count_sent(slices.iter().map(|s| s.len()).sum());
    Ok(())
}

/// One non-blocking send of `slices` after skipping their first `skip`
/// bytes; returns how many bytes went out (0 when the socket buffer is
/// full).
pub fn send_some(driver: Driver, fd: RawFd, slices: &[IoSlice<'_>], skip: usize) -> io::Result<usize> {
    let sent = match driver {
        Driver::Uring => uring::send_some(fd, &skip_slices(slices, skip)),
        Driver::Socket => socket_send_some(fd, slices, skip),
    }?;
    crate::counters::count_sent(sent);
    Ok(sent)
}

fn socket_send_some(fd: RawFd, slices: &[IoSlice<'_>], skip: usize) -> io::Result<usize> {
    let mut iovs = to_iovecs(slices);
    let mut first = 0;
    advance_iovecs(&mut iovs, &mut first, skip);
    sendmsg_now(fd, &mut iovs[first..])
}

/// One `sendmsg` of (at most [`MAX_IOVECS`] of) `iovs` that does not wait:
/// the bytes the socket took, 0 when it took none.
pub(crate) fn sendmsg_now(fd: RawFd, iovs: &mut [libc::iovec]) -> io::Result<usize> {
    if iovs.is_empty() {
        return Ok(0);
    }
    // SAFETY: zeroed msghdr is a valid "no address, no control" header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iovs.as_mut_ptr();
    msg.msg_iovlen = iovs.len().min(MAX_IOVECS) as _;
    loop {
        // SAFETY: the iovecs point into memory the caller keeps alive for
        // this call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(err),
        }
    }
}

/// The slices of one frame: a head and a few payloads with their padding,
/// kept on the stack (a send allocates nothing for them).
pub type FrameSlices<'a> = smallvec::SmallVec<[IoSlice<'a>; 4]>;

/// The kernel's view of [`FrameSlices`].
pub(crate) type IoVecs = smallvec::SmallVec<[libc::iovec; 4]>;

/// `slices` without their first `skip` bytes.
pub fn skip_slices<'a>(slices: &[IoSlice<'a>], mut skip: usize) -> FrameSlices<'a> {
    let mut out = FrameSlices::with_capacity(slices.len());
    for slice in slices {
        let bytes: &'a [u8] = {
            // SAFETY: an IoSlice<'a> is a view of `'a` bytes; rebuilding the
            // slice with its own pointer and length keeps that lifetime.
            unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) }
        };
        if skip >= bytes.len() {
            skip -= bytes.len();
            continue;
        }
        out.push(IoSlice::new(&bytes[skip..]));
        skip = 0;
    }
    out
}

pub(crate) fn send_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "send did not complete before its deadline (peer not reading?)")
}

/// Largest number of iovecs one send takes (Linux's IOV_MAX).
pub(crate) const MAX_IOVECS: usize = 1024;

/// Advances `iovs[*first..]` past `sent` bytes.
pub(crate) fn advance_iovecs(iovs: &mut [libc::iovec], first: &mut usize, mut sent: usize) {
    while sent > 0 && *first < iovs.len() {
        let iov = &mut iovs[*first];
        if sent >= iov.iov_len {
            sent -= iov.iov_len;
            *first += 1;
        } else {
            // SAFETY (arithmetic): `sent` < iov_len, so still inside the slice.
            iov.iov_base = (iov.iov_base as *mut u8).wrapping_add(sent).cast();
            iov.iov_len -= sent;
            sent = 0;
        }
    }
    while *first < iovs.len() && iovs[*first].iov_len == 0 {
        *first += 1;
    }
}

pub(crate) fn to_iovecs(slices: &[IoSlice<'_>]) -> IoVecs {
    slices
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_iovecs_handles_partial_and_whole_slices() {
        let a = [1u8; 10];
        let b = [2u8; 5];
        let slices = [IoSlice::new(&a), IoSlice::new(&[]), IoSlice::new(&b)];
        let mut iovs = to_iovecs(&slices);
        assert_eq!(iovs.len(), 2);
        let mut first = 0;
        advance_iovecs(&mut iovs, &mut first, 4);
        assert_eq!((first, iovs[0].iov_len), (0, 6));
        advance_iovecs(&mut iovs, &mut first, 8);
        assert_eq!((first, iovs[1].iov_len), (1, 3));
        advance_iovecs(&mut iovs, &mut first, 3);
        assert_eq!(first, 2);
    }

    #[test]
    fn skipping_slices_drops_whole_and_partial_prefixes() {
        let a = [1u8, 2, 3];
        let b = [4u8, 5];
        let slices = [IoSlice::new(&a), IoSlice::new(&b)];
        let flat = |s: FrameSlices<'_>| s.iter().flat_map(|x| x.iter().copied()).collect::<Vec<u8>>();
        assert_eq!(flat(skip_slices(&slices, 0)), [1, 2, 3, 4, 5]);
        assert_eq!(flat(skip_slices(&slices, 2)), [3, 4, 5]);
        assert_eq!(flat(skip_slices(&slices, 3)), [4, 5]);
        assert_eq!(flat(skip_slices(&slices, 9)), Vec::<u8>::new());
    }

    #[test]
    fn transport_kind_parses() {
        assert_eq!(TransportKind::parse("socket"), Some(TransportKind::Socket));
        assert_eq!(TransportKind::parse("IO_URING"), Some(TransportKind::Uring));
        assert_eq!(TransportKind::parse("bogus"), None);
    }
}
