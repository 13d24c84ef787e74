//! The io_uring driver: one ring per thread that does I/O, created on first
//! use with the setup flags the kernel accepts, opcodes probed once.
//!
//! Owns: the thread-local ring and its completions. Each operation is
//! submitted and its completion reaped before the call returns; a receive
//! whose deadline passes is cancelled and its completion still awaited,
//! because the buffer belongs to the kernel until then (TigerBeetle's and
//! monoio's rule). Waiting spins on the completion queue for a bounded time
//! (entering the kernel only when it flags pending task work), then sleeps
//! in `io_uring_enter` with a timeout.
//!
//! Must not know about frames: it moves bytes for [`super`].

use super::{MAX_IOVECS, RecvOutcome, Wait, advance_iovecs, to_iovecs};
use crate::alloc::Region;
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::cell::RefCell;
use std::io;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const RING_ENTRIES: u32 = 64;
/// Most bytes one send operation carries (results are 32-bit).
const MAX_SEND_BYTES: usize = 1 << 30;
const PARK_SLICE: Duration = Duration::from_millis(250);

/// What the probe found.
#[derive(Debug, Clone)]
pub struct UringFeatures {
    pub send_zc: bool,
    pub setup_flags: &'static str,
}

impl std::fmt::Display for UringFeatures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "setup {}, sendmsg_zc {}", self.setup_flags, if self.send_zc { "yes" } else { "no" })
    }
}

/// Setup flag sets tried in order; the first the kernel accepts is used by
/// every ring of the process.
#[derive(Clone, Copy)]
enum Setup {
    /// Completions' task work runs when we enter the kernel (flagged in the
    /// SQ ring), so a spinning thread is not interrupted by IPIs.
    CoopTaskrunSingleIssuer,
    /// Task work deferred to our own `io_uring_enter(GETEVENTS)` calls.
    DeferTaskrun,
    Plain,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::CoopTaskrunSingleIssuer => "COOP_TASKRUN|TASKRUN_FLAG|SINGLE_ISSUER",
            Setup::DeferTaskrun => "DEFER_TASKRUN|TASKRUN_FLAG|SINGLE_ISSUER",
            Setup::Plain => "default",
        }
    }

    fn build(self) -> io::Result<IoUring> {
        let mut builder = IoUring::builder();
        match self {
            Setup::CoopTaskrunSingleIssuer => {
                builder.setup_coop_taskrun().setup_taskrun_flag().setup_single_issuer();
            }
            Setup::DeferTaskrun => {
                builder.setup_defer_taskrun().setup_taskrun_flag().setup_single_issuer();
            }
            Setup::Plain => {}
        }
        builder.build(RING_ENTRIES)
    }
}

struct Probed {
    setup: Setup,
    features: UringFeatures,
}

fn probed() -> &'static Result<Probed, String> {
    static PROBE: OnceLock<Result<Probed, String>> = OnceLock::new();
    PROBE.get_or_init(|| {
        if std::env::var_os("RINGFLOW_NO_URING").is_some() {
            return Err("disabled by RINGFLOW_NO_URING".into());
        }
        let mut last_err = String::new();
        let order: &[Setup] = match std::env::var("RINGFLOW_URING_SETUP").as_deref() {
            Ok("plain") => &[Setup::Plain],
            Ok("defer") => &[Setup::DeferTaskrun, Setup::Plain],
            Ok("coop") => &[Setup::CoopTaskrunSingleIssuer, Setup::Plain],
            _ => &[Setup::CoopTaskrunSingleIssuer, Setup::Plain],
        };
        for &setup in order {
            let ring = match setup.build() {
                Ok(ring) => ring,
                Err(e) => {
                    last_err = match e.raw_os_error() {
                        Some(libc::EPERM) => {
                            format!("io_uring_setup: {e} (blocked by seccomp or sysctl kernel.io_uring_disabled?)")
                        }
                        Some(libc::ENOSYS) => {
                            format!("io_uring_setup: {e} (kernel without io_uring)")
                        }
                        Some(libc::ENOMEM) => format!("io_uring_setup: {e} (memlock limit?)"),
                        _ => format!("io_uring_setup: {e}"),
                    };
                    continue;
                }
            };
            let mut probe = io_uring::Probe::new();
            if let Err(e) = ring.submitter().register_probe(&mut probe) {
                return Err(format!("probing io_uring opcodes: {e}"));
            }
            for (code, name) in [
                (opcode::SendMsg::CODE, "SENDMSG"),
                (opcode::Recv::CODE, "RECV"),
                (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
            ] {
                if !probe.is_supported(code) {
                    return Err(format!("kernel lacks io_uring opcode {name}"));
                }
            }
            return Ok(Probed {
                setup,
                features: UringFeatures {
                    send_zc: probe.is_supported(opcode::SendMsgZc::CODE),
                    setup_flags: setup.name(),
                },
            });
        }
        Err(last_err)
    })
}

/// Whether io_uring can be used here, and with what.
pub fn probe() -> Result<UringFeatures, String> {
    probed().as_ref().map(|p| p.features.clone()).map_err(Clone::clone)
}

struct Ring {
    ring: IoUring,
    next_user_data: u64,
    /// Completions reaped while waiting for another one.
    stash: Vec<(u64, i32, u32)>,
    /// The region registered as this ring's fixed buffer 0 (kept alive:
    /// the kernel holds its pages until the ring is gone), or the id of a
    /// region whose registration failed (not retried).
    fixed: Option<Region>,
    failed_region: Option<u64>,
}

thread_local! {
    static RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
}

fn with_ring<T>(f: impl FnOnce(&mut Ring) -> io::Result<T>) -> io::Result<T> {
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let setup = match probed() {
                Ok(p) => p.setup,
                Err(reason) => return Err(io::Error::other(reason.clone())),
            };
            *slot = Some(Ring {
                ring: setup.build()?,
                next_user_data: 1,
                stash: Vec::new(),
                fixed: None,
                failed_region: None,
            });
        }
        f(slot.as_mut().expect("initialised above"))
    })
}

impl Ring {
    /// The fixed-buffer index of `region` in this ring, registering it on
    /// first use. `None` when it cannot be registered (logged once).
    fn fixed_index(&mut self, region: &Region) -> Option<u16> {
        if let Some(fixed) = &self.fixed {
            return (fixed.id() == region.id()).then_some(0);
        }
        if self.failed_region == Some(region.id()) {
            return None;
        }
        let iovec = region.iovec();
        // SAFETY: the region's mapping stays valid while `self.fixed` holds
        // a handle to it, which is as long as the ring exists.
        match unsafe { self.ring.submitter().register_buffers(&[iovec]) } {
            Ok(()) => {
                self.fixed = Some(region.clone());
                Some(0)
            }
            Err(e) => {
                let limit = crate::alloc::memlock_limit_bytes()
                    .map_or("unlimited".to_string(), |b| format!("{} KiB", b / 1024));
                tracing::warn!(
                    "cannot register {region:?} with io_uring as a fixed buffer: {e} \
                     (`ulimit -l` is {limit}; each ring pins the region again); \
                     receiving into it with plain receives"
                );
                self.failed_region = Some(region.id());
                None
            }
        }
    }

    fn user_data(&mut self) -> u64 {
        self.next_user_data = self.next_user_data.wrapping_add(1).max(1);
        self.next_user_data
    }

    /// Queues `entry` and submits it.
    ///
    /// # Safety
    /// Whatever `entry` points to must stay valid until its completion is
    /// reaped.
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: forwarded contract.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit()?;
        }
        self.ring.submit()?;
        Ok(())
    }

    fn take_stashed(&mut self, user_data: u64) -> Option<(i32, u32)> {
        let at = self.stash.iter().position(|c| c.0 == user_data)?;
        let (_, res, flags) = self.stash.swap_remove(at);
        Some((res, flags))
    }

    fn reap(&mut self, user_data: u64) -> Option<(i32, u32)> {
        if let Some(found) = self.take_stashed(user_data) {
            return Some(found);
        }
        let mut found = None;
        for cqe in self.ring.completion() {
            if found.is_none() && cqe.user_data() == user_data {
                found = Some((cqe.result(), cqe.flags()));
            } else {
                self.stash.push((cqe.user_data(), cqe.result(), cqe.flags()));
            }
        }
        found
    }

    /// Waits for the completion of `user_data`: spins for `spin`, then
    /// sleeps in the kernel. `None` when `deadline` passes first.
    fn wait(&mut self, user_data: u64, spin: Duration, deadline: Option<Instant>) -> io::Result<Option<(i32, u32)>> {
        let spin_start = Instant::now();
        let spin_until = spin_start + spin;
        loop {
            if let Some(found) = self.reap(user_data) {
                return Ok(Some(found));
            }
            if self.ring.submission().taskrun() || self.ring.submission().cq_overflow() {
                self.ring.submit()?;
                continue;
            }
            if Instant::now() >= spin_until {
                break;
            }
            super::spin_pause(spin_start);
        }
        loop {
            if let Some(found) = self.reap(user_data) {
                return Ok(Some(found));
            }
            let slice = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(PARK_SLICE)
                }
                None => PARK_SLICE,
            };
            let ts = types::Timespec::from(slice);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

fn spin_on_socket() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| !matches!(std::env::var("RINGFLOW_URING_SPIN").as_deref(), Ok("ring")))
}

/// # Safety
/// `ptr` must be valid for writes of `len` bytes nobody reads meanwhile.
pub unsafe fn recv(fd: RawFd, ptr: *mut u8, len: usize, wait: Wait<'_>) -> io::Result<RecvOutcome> {
    let wait_all = wait.wait_all(len);
    // A wait-all receive of a large body has nothing to gain from spinning.
    let mut spin = if wait_all { Duration::ZERO } else { wait.spin };
    if !spin.is_zero() && spin_on_socket() {
        // Spin by polling the socket itself: a receive submitted to the ring
        // while the socket is empty arms a poll whose completion comes back
        // through task work, which costs more than the syscall it saves.
        // Only once the spin is over is the receive handed to the ring,
        // where the thread sleeps.
        let spin_start = Instant::now();
        let spin_until = spin_start + spin;
        loop {
            // SAFETY: `ptr`/`len` are valid for writes per our contract.
            let n = unsafe { libc::recv(fd, ptr.cast(), len, libc::MSG_DONTWAIT) };
            if n > 0 {
                return Ok(RecvOutcome::Data(n as usize));
            }
            if n == 0 {
                return Ok(RecvOutcome::Eof);
            }
            let err = io::Error::last_os_error();
            if !matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                return Err(err);
            }
            if Instant::now() >= spin_until {
                break;
            }
            super::spin_pause(spin_start);
        }
        spin = Duration::ZERO;
    }
    let len = len.min(u32::MAX as usize) as u32;
    let flags = if wait_all { libc::MSG_WAITALL } else { 0 };
    with_ring(|ring| {
        loop {
            let user_data = ring.user_data();
            let in_region = wait.region.filter(|r| {
                let base = r.base_ptr() as usize;
                (ptr as usize) >= base && (ptr as usize) + len as usize <= base + r.len()
            });
            let fixed = match in_region {
                Some(region) if !wait_all => ring.fixed_index(region),
                _ => None,
            };
            let entry = match fixed {
                // A read into registered memory: the kernel skips pinning and
                // mapping the pages on every receive.
                Some(index) => opcode::ReadFixed::new(types::Fd(fd), ptr, len, index).build().user_data(user_data),
                None => opcode::Recv::new(types::Fd(fd), ptr, len).flags(flags).build().user_data(user_data),
            };
            // SAFETY: the buffer is valid per our contract, and we do not
            // return before this operation's completion is reaped (below, or
            // after the cancel).
            unsafe { ring.push(entry)? };
            let (res, _flags) = match ring.wait(user_data, spin, wait.deadline)? {
                Some(done) => done,
                None => {
                    let cancel_data = ring.user_data();
                    let cancel = opcode::AsyncCancel::new(user_data).build().user_data(cancel_data);
                    // SAFETY: a cancel refers to no memory.
                    unsafe { ring.push(cancel)? };
                    let done = ring.wait(user_data, Duration::ZERO, None)?.expect("a wait without deadline completes");
                    // Reap the cancel's own completion so it does not linger
                    // (its result does not matter).
                    ring.wait(cancel_data, Duration::ZERO, None)?;
                    if done.0 == -libc::ECANCELED || done.0 == -libc::EINTR {
                        return Ok(RecvOutcome::TimedOut);
                    }
                    done
                }
            };
            return match res {
                n if n > 0 => Ok(RecvOutcome::Data(n as usize)),
                0 => Ok(RecvOutcome::Eof),
                e if e == -libc::EINTR || e == -libc::EAGAIN => continue,
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
    })
}

/// Whether sends the socket can take at once go through the ring as well
/// (`RINGFLOW_URING_SEND=ring`). By default they are plain `sendmsg`
/// calls: a send through the ring (submit, inline issue, completion
/// reaped) cost a 64-byte round trip more than the syscall (pingpong with
/// both ends pinned, five alternating pairs: 1.17-1.21x the raw round trip
/// through the ring, 1.15-1.17x with `sendmsg`). The ring takes over when
/// the socket is full, and for zero-copy sends.
fn sends_through_ring() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| matches!(std::env::var("RINGFLOW_URING_SEND").as_deref(), Ok("ring")))
}

/// One send that does not wait (MSG_DONTWAIT: it returns at once, with
/// what the socket took); returns the bytes sent, 0 when it took none.
pub fn send_some(fd: RawFd, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    let mut iovs = to_iovecs(slices);
    if iovs.is_empty() {
        return Ok(0);
    }
    if !sends_through_ring() {
        return super::sendmsg_now(fd, &mut iovs);
    }
    ring_send_some(fd, &iovs)
}

/// [`send_some`] through the ring.
fn ring_send_some(fd: RawFd, iovs: &[libc::iovec]) -> io::Result<usize> {
    let mut batch = super::IoVecs::with_capacity(iovs.len().min(MAX_IOVECS));
    fill_batch(iovs, MAX_SEND_BYTES, &mut batch);
    with_ring(|ring| {
        loop {
            // SAFETY: zeroed msghdr is a valid "no address, no control" header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = batch.as_mut_ptr();
            msg.msg_iovlen = batch.len() as _;
            let user_data = ring.user_data();
            let entry = if batch.len() == 1 {
                // One slice (a frame without payloads): plain SEND.
                opcode::Send::new(types::Fd(fd), batch[0].iov_base as *const u8, batch[0].iov_len as u32)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                    .build()
            } else {
                opcode::SendMsg::new(types::Fd(fd), &msg)
                    .flags((libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) as u32)
                    .build()
            }
            .user_data(user_data);
            // SAFETY: `msg`, `batch` and the slices outlive the operation:
            // its completion is reaped below before they go.
            unsafe { ring.push(entry)? };
            let (res, _) = ring.wait(user_data, Duration::ZERO, None)?.expect("a wait without deadline completes");
            return match res {
                n if n >= 0 => Ok(n as usize),
                e if e == -libc::EAGAIN => Ok(0),
                e if e == -libc::EINTR => continue,
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
    })
}

/// Copies into `batch` the leading iovecs of `iovs` that one send carries:
/// at most [`MAX_IOVECS`] of them and `max_bytes` in all (the last clipped).
fn fill_batch(iovs: &[libc::iovec], max_bytes: usize, batch: &mut super::IoVecs) {
    batch.clear();
    let mut total = 0usize;
    for iov in iovs.iter().take(MAX_IOVECS) {
        let take = iov.iov_len.min(max_bytes - total);
        batch.push(libc::iovec { iov_base: iov.iov_base, iov_len: take });
        total += take;
        if total == max_bytes {
            break;
        }
    }
}

pub fn send_all(
    fd: RawFd,
    slices: &[IoSlice<'_>],
    zerocopy: bool,
    spin: Duration,
    deadline: Instant,
) -> io::Result<()> {
    let zerocopy = zerocopy && probe().map(|f| f.send_zc).unwrap_or(false);
    let mut iovs = to_iovecs(slices);
    let mut first = 0;
    if !zerocopy && !sends_through_ring() {
        // What the socket takes now goes out without the ring; the ring
        // waits for room for the rest.
        let sent = super::sendmsg_now(fd, &mut iovs)?;
        advance_iovecs(&mut iovs, &mut first, sent);
        if first == iovs.len() {
            return Ok(());
        }
    }
    with_ring(|ring| {
        let mut batch = super::IoVecs::with_capacity(iovs.len().min(MAX_IOVECS));
        while first < iovs.len() {
            // io_uring refuses (EINVAL) a send whose iovecs add up to more
            // than it can count in one completion, so one operation carries
            // at most MAX_SEND_BYTES; the rest goes in the next.
            fill_batch(&iovs[first..], MAX_SEND_BYTES, &mut batch);
            let count = batch.len();
            // SAFETY: zeroed msghdr is a valid "no address, no control" header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = batch.as_mut_ptr();
            msg.msg_iovlen = count as _;
            let user_data = ring.user_data();
            let entry = if zerocopy {
                opcode::SendMsgZc::new(types::Fd(fd), &msg).flags(libc::MSG_NOSIGNAL as u32).build()
            } else if count == 1 {
                // One slice (a frame without payloads): plain SEND skips
                // importing a msghdr and an iovec array.
                let iov = batch[0];
                opcode::Send::new(types::Fd(fd), iov.iov_base as *const u8, iov.iov_len.min(u32::MAX as usize) as u32)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            } else {
                opcode::SendMsg::new(types::Fd(fd), &msg).flags(libc::MSG_NOSIGNAL as u32).build()
            }
            .user_data(user_data);
            // SAFETY: `msg`, `batch` and the slices they point to outlive the
            // operation: we reap its completion (and, for zero-copy, its
            // buffer notification) before leaving this iteration.
            unsafe { ring.push(entry)? };
            let (res, flags) = match ring.wait(user_data, spin, Some(deadline))? {
                Some(done) => done,
                None => {
                    // Cancel, and still reap the send (and its zero-copy
                    // notification): the kernel owns the pages until then.
                    let cancel_data = ring.user_data();
                    let cancel = opcode::AsyncCancel::new(user_data).build().user_data(cancel_data);
                    // SAFETY: a cancel refers to no memory.
                    unsafe { ring.push(cancel)? };
                    let (_, flags) =
                        ring.wait(user_data, Duration::ZERO, None)?.expect("a wait without deadline completes");
                    if zerocopy && cqueue::more(flags) {
                        loop {
                            let (_, nflags) =
                                ring.wait(user_data, Duration::ZERO, None)?.expect("a wait without deadline completes");
                            if cqueue::notif(nflags) {
                                break;
                            }
                        }
                    }
                    ring.wait(cancel_data, Duration::ZERO, None)?;
                    return Err(super::send_timed_out());
                }
            };
            if zerocopy && cqueue::more(flags) {
                // The kernel still references the pages until it posts the
                // notification.
                loop {
                    let (_, nflags) = ring.wait(user_data, spin, None)?.expect("a wait without deadline completes");
                    if cqueue::notif(nflags) {
                        break;
                    }
                }
            }
            if res < 0 {
                if res == -libc::EINTR || res == -libc::EAGAIN {
                    continue;
                }
                return Err(io::Error::from_raw_os_error(-res));
            }
            advance_iovecs(&mut iovs, &mut first, res as usize);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_cut_at_the_byte_and_iovec_limits() {
        let data = [0u8; 64];
        let iov = |len: usize| libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: len };
        let mut batch = super::super::IoVecs::new();
        fill_batch(&[iov(10), iov(30), iov(5)], 25, &mut batch);
        assert_eq!(batch.iter().map(|i| i.iov_len).collect::<Vec<_>>(), [10, 15]);
        fill_batch(&[iov(10), iov(5)], 25, &mut batch);
        assert_eq!(batch.iter().map(|i| i.iov_len).collect::<Vec<_>>(), [10, 5]);
        let many: Vec<_> = (0..MAX_IOVECS + 7).map(|_| iov(1)).collect();
        fill_batch(&many, usize::MAX, &mut batch);
        assert_eq!(batch.len(), MAX_IOVECS);
    }

    #[test]
    fn send_and_receive_through_the_ring() {
        if probe().is_err() {
            return; // io_uring unavailable here; the socket driver is tested elsewhere.
        }
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let head = [1u8; 100];
        let body = vec![2u8; 5000];
        let slices = [IoSlice::new(&head), IoSlice::new(&body)];
        let far = Instant::now() + Duration::from_secs(10);
        send_all(a.as_raw_fd(), &slices, false, Duration::ZERO, far).unwrap();
        let mut got = vec![0u8; 5100];
        let mut filled = 0;
        while filled < got.len() {
            let wait = Wait {
                spin: Duration::from_micros(10),
                deadline: Some(Instant::now() + Duration::from_secs(10)),
                fill: false,
                region: None,
            };
            // SAFETY: `got[filled..]` is ours and not read until this returns.
            let outcome = unsafe { recv(b.as_raw_fd(), got[filled..].as_mut_ptr(), got.len() - filled, wait) }.unwrap();
            match outcome {
                RecvOutcome::Data(n) => filled += n,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(got[..100].iter().all(|&x| x == 1) && got[100..].iter().all(|&x| x == 2));
        // What does not fit the socket buffer at once: the first part goes
        // out as a plain sendmsg, the ring sends the rest as room appears.
        let big: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let sender = {
            let a = a.try_clone().unwrap();
            let big = big.clone();
            std::thread::spawn(move || send_all(a.as_raw_fd(), &[IoSlice::new(&big)], false, Duration::ZERO, far))
        };
        let mut got_big = vec![0u8; big.len()];
        let mut filled = 0;
        while filled < got_big.len() {
            let wait = Wait { spin: Duration::ZERO, deadline: Some(far), fill: false, region: None };
            // SAFETY: `got_big[filled..]` is ours and not read until this returns.
            match unsafe { recv(b.as_raw_fd(), got_big[filled..].as_mut_ptr(), got_big.len() - filled, wait) }.unwrap()
            {
                RecvOutcome::Data(n) => filled += n,
                other => panic!("unexpected {other:?}"),
            }
        }
        sender.join().unwrap().unwrap();
        assert!(got_big == big, "bytes differ after a send split between sendmsg and the ring");
        // The ring's non-blocking send (RINGFLOW_URING_SEND=ring) takes
        // what the socket has room for.
        let iovs = to_iovecs(&slices);
        let sent = ring_send_some(a.as_raw_fd(), &iovs).unwrap();
        assert_eq!(sent, 5100);
        let mut echo = vec![0u8; 5100];
        let mut filled = 0;
        while filled < echo.len() {
            let wait = Wait { spin: Duration::ZERO, deadline: Some(far), fill: false, region: None };
            // SAFETY: as above.
            match unsafe { recv(b.as_raw_fd(), echo[filled..].as_mut_ptr(), echo.len() - filled, wait) }.unwrap() {
                RecvOutcome::Data(n) => filled += n,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(echo[..100].iter().all(|&x| x == 1) && echo[100..].iter().all(|&x| x == 2));
        // A receive whose deadline passes is cancelled and reported as such.
        let wait = Wait {
            spin: Duration::ZERO,
            deadline: Some(Instant::now() + Duration::from_millis(20)),
            fill: false,
            region: None,
        };
        // SAFETY: as above.
        let outcome = unsafe { recv(b.as_raw_fd(), got.as_mut_ptr(), got.len(), wait) }.unwrap();
        assert_eq!(outcome, RecvOutcome::TimedOut);
    }
}
