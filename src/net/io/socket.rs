//! The plain-socket fallback driver: `recv(MSG_DONTWAIT)` spun for a
//! bounded time, then `ppoll`; `sendmsg` of all slices at once.
//!
//! Owns: nothing but syscalls on a caller's descriptor. Used when io_uring
//! is unavailable (container seccomp, old kernel) or forced with
//! `RINGFLOW_TRANSPORT=socket`. Sockets stay in blocking mode; only the
//! receive is made non-blocking per call, so either driver can use a socket.

use super::{MAX_IOVECS, RecvOutcome, Wait, advance_iovecs, to_iovecs};
use std::io;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Longest single sleep, so a wait re-checks its deadline at least this
/// often even if the clock and the kernel disagree.
const PARK_SLICE: Duration = Duration::from_millis(250);

/// # Safety
/// `ptr` must be valid for writes of `len` bytes nobody reads meanwhile.
pub unsafe fn recv(fd: RawFd, ptr: *mut u8, len: usize, wait: Wait<'_>) -> io::Result<RecvOutcome> {
    if wait.wait_all(len) {
        loop {
            // SAFETY: `ptr`/`len` are valid for writes per the caller's
            // contract. Blocks until `len` bytes, end of stream or shutdown.
            let n = unsafe { libc::recv(fd, ptr.cast(), len, libc::MSG_WAITALL) };
            match n {
                n if n > 0 => return Ok(RecvOutcome::Data(n as usize)),
                0 => return Ok(RecvOutcome::Eof),
                _ => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        }
    }
    let try_recv = || -> io::Result<Option<RecvOutcome>> {
        // SAFETY: `ptr`/`len` are valid for writes per the caller's contract.
        let n = unsafe { libc::recv(fd, ptr.cast(), len, libc::MSG_DONTWAIT) };
        if n > 0 {
            return Ok(Some(RecvOutcome::Data(n as usize)));
        }
        if n == 0 {
            return Ok(Some(RecvOutcome::Eof));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(err),
        }
    };
    let spin_start = Instant::now();
    let spin_until = spin_start + wait.spin;
    loop {
        if let Some(outcome) = try_recv()? {
            return Ok(outcome);
        }
        if Instant::now() >= spin_until {
            break;
        }
        super::spin_pause(spin_start);
    }
    loop {
        let slice = match wait.remaining() {
            Some(left) if left.is_zero() => return Ok(RecvOutcome::TimedOut),
            Some(left) => left.min(PARK_SLICE),
            None => PARK_SLICE,
        };
        poll_fd(fd, libc::POLLIN, slice)?;
        if let Some(outcome) = try_recv()? {
            return Ok(outcome);
        }
    }
}

/// Waits up to `timeout` for `events` on `fd` (readiness is re-checked by
/// the caller, so a timeout is not an error).
pub(crate) fn poll_fd(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    let ts =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: one valid pollfd and a valid timespec; no signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

pub fn send_all(fd: RawFd, slices: &[IoSlice<'_>], deadline: Instant) -> io::Result<()> {
    let mut iovs = to_iovecs(slices);
    let mut first = 0;
    while first < iovs.len() {
        let count = (iovs.len() - first).min(MAX_IOVECS);
        // SAFETY: zeroed msghdr is a valid "no address, no control" header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iovs[first..].as_mut_ptr();
        msg.msg_iovlen = count as _;
        // Non-blocking, so a peer that stops reading cannot hold this thread
        // past its deadline.
        // SAFETY: the iovecs point into `slices`, alive for this call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n < 0 {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(super::send_timed_out());
                    }
                    poll_fd(fd, libc::POLLOUT, left.min(PARK_SLICE))?;
                    continue;
                }
                _ => return Err(err),
            }
        }
        advance_iovecs(&mut iovs, &mut first, n as usize);
    }
    Ok(())
}
