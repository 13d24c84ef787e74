//! The accept path: one thread accepts connections and carries each through
//! its handshake with `poll(2)`, so a peer that connects and says nothing
//! costs a socket and a 1 KiB buffer until its handshake timeout, never a
//! thread. Only a peer that finished the handshake (and proved the cluster
//! secret, when there is one) gets a connection thread, and at most
//! `max_connections` of those exist.
//!
//! Owns: the listening socket's loop, the connections still in their
//! handshake (oldest first), their deadlines and the hand-over of HTTP/2
//! sockets. Must not read a frame past the handshake: what follows stays in
//! the socket for the connection's reader.

use super::handshake::{Progress, ServerHandshake, ServerStep, SmallFrame};
use super::server::Shared;
use crate::error::{Code, Status};
use crate::net::message::{self, ErrorMeta, Hello};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Pending {
    stream: TcpStream,
    peer: String,
    deadline: Instant,
    small: SmallFrame,
    handshake: ServerHandshake,
    /// Whether its first byte was looked at (HTTP/2 or native).
    sniffed: bool,
    hello_seen: bool,
}

/// What became of a pending connection after its socket was readable.
enum Fate {
    Waiting,
    Accepted(Hello),
    Http2,
    Dropped,
}

/// Runs until the server stops. `established` is called with each
/// connection that finished its handshake.
pub(super) fn run(listener: &TcpListener, shared: &Arc<Shared>, established: impl Fn(TcpStream, String, Hello)) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!("listener cannot be made non-blocking: {e}");
        return;
    }
    let options = &shared.options;
    let mut pending: Vec<Pending> = Vec::new();
    let mut pollfds: Vec<libc::pollfd> = Vec::new();
    let mut evicted = 0u64;
    let mut expired = 0u64;
    let mut last_report = Instant::now();
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        pollfds.clear();
        pollfds.push(libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        pollfds.extend(pending.iter().map(|p| libc::pollfd {
            fd: p.stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // Asleep until a connection, a pending handshake's deadline, or
        // shutdown (which shuts the listening socket down, waking this
        // poll): an idle server's acceptor does not wake.
        let now = Instant::now();
        let wait_ms = match pending.iter().map(|p| p.deadline).min() {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(now).as_micros().div_ceil(1000);
                i32::try_from(left).unwrap_or(i32::MAX)
            }
            None => -1,
        };
        // SAFETY: `pollfds` is a valid array of its length for the call.
        let ready = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!("poll on the accept path: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        // Pending connections first (indices match `pollfds[1..]`), then
        // new ones, so the indices stay valid.
        let mut index = 0;
        let mut slot = 1;
        while index < pending.len() {
            let revents = pollfds[slot].revents;
            slot += 1;
            if revents == 0 {
                index += 1;
                continue;
            }
            match advance(&mut pending[index], shared) {
                Fate::Waiting => index += 1,
                Fate::Accepted(hello) => {
                    let p = pending.remove(index);
                    established(p.stream, p.peer, hello);
                }
                Fate::Http2 => {
                    let p = pending.remove(index);
                    if options.secret.is_set() {
                        // gRPC clients (TensorFlow's among them) cannot
                        // prove the secret, and nothing unproved gets in.
                        tracing::warn!(
                            "refusing gRPC connection from {}: this server requires the cluster secret, which \
                             only the native protocol can prove",
                            p.peer
                        );
                        continue;
                    }
                    match (shared.http2.get(), p.stream.set_nonblocking(false)) {
                        (Some(handoff), Ok(())) => handoff.take_over(p.stream, &p.peer),
                        (_, Err(e)) => tracing::warn!("HTTP/2 connection from {}: {e}", p.peer),
                        (None, _) => {}
                    }
                }
                Fate::Dropped => {
                    pending.remove(index);
                }
            }
        }
        if pollfds[0].revents != 0 {
            accept_all(listener, shared, &mut pending, &mut evicted);
        }
        let now = Instant::now();
        let before = pending.len();
        pending.retain(|p| {
            let alive = p.deadline > now;
            if !alive {
                tracing::debug!(
                    "closing connection from {}: no handshake within {:?}",
                    p.peer,
                    options.handshake_timeout()
                );
            }
            alive
        });
        expired += (before - pending.len()) as u64;
        if (expired > 0 || evicted > 0) && last_report.elapsed() >= Duration::from_secs(10) {
            tracing::warn!(
                "closed {expired} connections that sent no handshake within {:?} and {evicted} over the limit of \
                 {} connections in their handshake",
                options.handshake_timeout(),
                options.max_pending_handshakes
            );
            (expired, evicted, last_report) = (0, 0, Instant::now());
        }
    }
}

fn accept_all(listener: &TcpListener, shared: &Shared, pending: &mut Vec<Pending>, evicted: &mut u64) {
    let options = &shared.options;
    loop {
        let (stream, addr) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors, most likely: make room by closing the
                // connection that has waited longest.
                tracing::warn!("accept: {e}");
                if pending.is_empty() {
                    // Nothing to close: the listener stays readable, so
                    // back off rather than spin on the same failure.
                    std::thread::sleep(Duration::from_millis(10));
                } else {
                    pending.remove(0);
                    *evicted += 1;
                }
                return;
            }
        };
        if let Err(e) = stream.set_nonblocking(true) {
            tracing::debug!("connection from {addr}: {e}");
            continue;
        }
        if pending.len() >= options.max_pending_handshakes.max(1) {
            pending.remove(0);
            *evicted += 1;
        }
        pending.push(Pending {
            stream,
            peer: addr.to_string(),
            deadline: Instant::now() + options.handshake_timeout(),
            small: SmallFrame::new(),
            handshake: ServerHandshake::new(),
            sniffed: false,
            hello_seen: false,
        });
    }
}

fn advance(p: &mut Pending, shared: &Shared) -> Fate {
    let fd = p.stream.as_raw_fd();
    if !p.sniffed {
        p.sniffed = true;
        if shared.http2.get().is_some() {
            let mut first = [0u8; 1];
            // SAFETY: `first` is valid for one byte; MSG_PEEK leaves it queued.
            let got = unsafe { libc::recv(fd, first.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
            if got == 1 && first[0] == b'P' {
                return Fate::Http2;
            }
        }
    }
    loop {
        match p.small.read_from(fd) {
            Ok(Progress::Pending) => return Fate::Waiting,
            Ok(Progress::Done(frame)) => {
                if !std::mem::replace(&mut p.hello_seen, true) && at_connection_limit(shared, fd, &p.peer) {
                    return Fate::Dropped;
                }
                match p.handshake.on_frame(fd, frame, &shared.options) {
                    Ok(ServerStep::Continue) => continue,
                    Ok(ServerStep::Accepted(hello)) => return Fate::Accepted(hello),
                    Err(reason) => {
                        tracing::warn!("refusing connection from {}: {reason}", p.peer);
                        return Fate::Dropped;
                    }
                }
            }
            Err(reason) => {
                if p.small.is_empty() && reason.starts_with("closed before") {
                    tracing::debug!("connection from {} {reason}", p.peer);
                } else {
                    tracing::warn!("refusing connection from {}: {reason}", p.peer);
                }
                return Fate::Dropped;
            }
        }
    }
}

/// Refuses a peer, telling it why, when the server has as many connections
/// as it may.
fn at_connection_limit(shared: &Shared, fd: std::os::fd::RawFd, peer: &str) -> bool {
    let open = shared.live.lock().len();
    if open < shared.options.max_connections {
        return false;
    }
    let status = Status::new(
        Code::ResourceExhausted,
        format!("the server has {open} connections open (max_connections {})", shared.options.max_connections),
    );
    tracing::warn!("refusing connection from {peer}: {}", status.message);
    if let Ok(meta) = message::encode(&ErrorMeta { code: status.code as u8, message: status.message.clone() }) {
        let _ = super::handshake::send_small(fd, crate::net::frame::FrameKind::Error, &meta);
    }
    true
}
