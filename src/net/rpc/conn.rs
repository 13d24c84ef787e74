//! One TCP connection as both ends see it: the socket, the send lock that
//! keeps frames whole, reading the next frame, and the hello exchange.
//!
//! Owns: the socket and the rule that a frame is written by one thread at a
//! time, start to end, by the thread that has it (so a reply computed inline
//! goes out without waking anyone). Must not know what a request means.

use super::TransportOptions;
use crate::error::{Code, Status};
use crate::net::frame::{FrameError, FrameKind, FrameLimits, OutgoingFrame, ReceivedFrame};
use crate::net::io::{self, Driver, RecvOutcome, Wait};
use crate::net::message::{self, ErrorMeta};
use crate::net::reader::FrameReader;
use crate::tensor::Tensor;
use parking_lot::Mutex;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Transport failures, typed inside `net` and turned into a [`Status`] at
/// the API.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("malformed frame from {peer}: {source}")]
    Frame { peer: String, source: FrameError },
    #[error("{op} on connection to {peer}: {source}")]
    Io { peer: String, op: &'static str, source: std::io::Error },
    #[error("connection to {peer} closed")]
    Closed { peer: String },
    #[error("handshake with {peer}: {reason}")]
    Handshake { peer: String, reason: String },
    #[error("cluster secret with {peer}: {reason}")]
    Auth { peer: String, reason: String },
    #[error("timed out waiting for {peer}")]
    TimedOut { peer: String },
}

impl NetError {
    pub fn to_status(&self) -> Status {
        let code = match self {
            NetError::Frame { .. } => Code::InvalidArgument,
            NetError::TimedOut { .. } => Code::DeadlineExceeded,
            NetError::Auth { .. } => Code::Unauthenticated,
            _ => Code::Unavailable,
        };
        Status::new(code, self.to_string())
    }
}

/// Frames a writer thread sends, in order. While `writer_running`, every
/// reply goes through here (so frames never interleave); the first one may
/// be partly sent already (`head_sent` bytes).
#[derive(Default)]
struct Outbox {
    queue: std::collections::VecDeque<OutgoingFrame>,
    head_sent: usize,
    writer_running: bool,
}

pub(crate) struct Conn {
    stream: TcpStream,
    pub(crate) driver: Driver,
    pub(crate) peer: String,
    send_lock: Mutex<()>,
    /// Replies waiting for the socket while the writer thread drains them
    /// (see [`Conn::send_reply`]).
    outbox: Mutex<Outbox>,
    pub(crate) limits: FrameLimits,
    pub(crate) spin: Duration,
    pub(crate) send_timeout: Duration,
    zerocopy_min_bytes: u64,
    closed: AtomicBool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, driver: Driver, peer: String, options: &TransportOptions) -> Conn {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on {peer}: {e}");
        }
        Conn {
            stream,
            driver,
            peer,
            send_lock: Mutex::new(()),
            outbox: Mutex::new(Outbox::default()),
            limits: options.frame_limits(),
            spin: options.spin(),
            send_timeout: Duration::from_millis(options.send_timeout_ms),
            zerocopy_min_bytes: options.zerocopy_send_min_bytes,
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Shuts the socket down both ways: wakes this connection's reader
    /// (its receive completes with end-of-stream) and fails later sends.
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Encodes and sends one frame, whole, on the calling thread, within
    /// the send timeout.
    pub(crate) fn send(
        &self,
        kind: FrameKind,
        method: u16,
        request_id: u64,
        meta: &[u8],
        payloads: &[Tensor],
    ) -> Result<(), NetError> {
        let deadline = Instant::now() + self.send_timeout;
        self.send_by(kind, method, request_id, meta, payloads, deadline)
    }

    /// Like [`send`](Self::send), giving up at `deadline`.
    pub(crate) fn send_by(
        &self,
        kind: FrameKind,
        method: u16,
        request_id: u64,
        meta: &[u8],
        payloads: &[Tensor],
        deadline: Instant,
    ) -> Result<(), NetError> {
        let frame = OutgoingFrame::new(kind, method, request_id, meta, payloads, &self.limits)
            .map_err(|source| NetError::Frame { peer: self.peer.clone(), source })?;
        self.send_frame(&frame, deadline)
    }

    /// Sends `frame` whole. Any I/O failure (a timeout included) closes the
    /// connection: part of the frame may be on the wire, and nothing can
    /// follow it.
    pub(crate) fn send_frame(&self, frame: &OutgoingFrame, deadline: Instant) -> Result<(), NetError> {
        if self.is_closed() {
            return Err(NetError::Closed { peer: self.peer.clone() });
        }
        let zerocopy = frame.payload_data_bytes() >= self.zerocopy_min_bytes;
        let slices = frame.io_slices();
        let Some(_whole_frame) = self.send_lock.try_lock_until(deadline) else {
            return Err(NetError::TimedOut { peer: self.peer.clone() });
        };
        io::send_all(self.driver, self.fd(), &slices, zerocopy, self.spin, deadline).map_err(|source| {
            self.close();
            if source.kind() == std::io::ErrorKind::TimedOut {
                NetError::TimedOut { peer: self.peer.clone() }
            } else {
                NetError::Io { peer: self.peer.clone(), op: "send", source }
            }
        })
    }

    /// Sends a reply without ever waiting on the peer: the frame goes out
    /// now if the socket takes it whole; otherwise the rest is queued for a
    /// writer thread, so the replying thread (often the connection's
    /// reader) never blocks on a peer that is not reading. The writer gives
    /// up, closing the connection, when a frame takes longer than the send
    /// timeout.
    ///
    /// Order: frames are sent whole, in the order replies reach the queue.
    /// The inline attempt holds `send_lock` and checks the outbox under it,
    /// and only a holder of `send_lock` starts the writer, so no inline send
    /// can slip between a queued frame's parts.
    pub(crate) fn send_reply(self: &Arc<Self>, frame: OutgoingFrame) -> Result<(), NetError> {
        if self.is_closed() {
            return Err(NetError::Closed { peer: self.peer.clone() });
        }
        let _send = self.send_lock.lock();
        let mut outbox = self.outbox.lock();
        if outbox.writer_running {
            outbox.queue.push_back(frame);
            return Ok(());
        }
        drop(outbox);
        let total = frame.header.frame_len() as usize;
        let sent = io::send_some(self.driver, self.fd(), &frame.io_slices(), 0).map_err(|source| {
            self.close();
            NetError::Io { peer: self.peer.clone(), op: "send", source }
        })?;
        if sent == total {
            return Ok(());
        }
        let mut outbox = self.outbox.lock();
        outbox.queue.push_front(frame);
        outbox.head_sent = sent;
        outbox.writer_running = true;
        drop(outbox);
        let conn = self.clone();
        let spawned = std::thread::Builder::new().name("rf-writer".into()).spawn(move || conn.drain_outbox());
        if let Err(e) = spawned {
            self.close();
            return Err(NetError::Io { peer: self.peer.clone(), op: "spawn writer", source: e });
        }
        Ok(())
    }

    /// The writer thread: sends queued frames until the outbox is empty.
    fn drain_outbox(&self) {
        loop {
            let (frame, skip) = {
                let mut outbox = self.outbox.lock();
                match outbox.queue.pop_front() {
                    Some(frame) => (frame, std::mem::take(&mut outbox.head_sent)),
                    None => {
                        outbox.writer_running = false;
                        return;
                    }
                }
            };
            let slices = frame.io_slices();
            let rest = io::skip_slices(&slices, skip);
            let zerocopy = frame.payload_data_bytes() >= self.zerocopy_min_bytes;
            let deadline = Instant::now() + self.send_timeout;
            if let Err(e) = io::send_all(self.driver, self.fd(), &rest, zerocopy, self.spin, deadline) {
                tracing::warn!("closing connection to {}: reply not sent: {e}", self.peer);
                self.close();
                let mut outbox = self.outbox.lock();
                outbox.queue.clear();
                outbox.writer_running = false;
                return;
            }
        }
    }

    pub(crate) fn send_error(self: &Arc<Self>, request_id: u64, method: u16, status: &Status) -> Result<(), NetError> {
        let meta = message::encode(&ErrorMeta { code: status.code as u8, message: status.message.clone() })
            .map_err(|s| NetError::Handshake { peer: self.peer.clone(), reason: s.into_message() })?;
        let frame = OutgoingFrame::new(FrameKind::Error, method, request_id, &meta, &[], &self.limits)
            .map_err(|source| NetError::Frame { peer: self.peer.clone(), source })?;
        self.send_reply(frame)
    }

    /// The next frame: one already buffered, or received now. `Ok(None)`
    /// when the deadline passes; end of stream is [`NetError::Closed`]
    /// (with a frame cut short it is a truncation error).
    /// Reads the next frame, spinning up to `spin` on an empty socket
    /// before sleeping on it.
    pub(crate) fn read_frame(
        &self,
        reader: &mut FrameReader,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<ReceivedFrame>, NetError> {
        let frame_error = |source| NetError::Frame { peer: self.peer.clone(), source };
        loop {
            if let Some(frame) = reader.next_frame().map_err(frame_error)? {
                return Ok(Some(frame));
            }
            let (ptr, len) = reader.recv_space().map_err(frame_error)?;
            let region = reader.region().cloned();
            let wait = Wait { spin, deadline, fill: reader.expects_exact(), region: region.as_ref() };
            // SAFETY: `recv_space` hands out bytes nobody reads until they
            // are committed; the driver returns only once it is done with
            // them.
            let outcome = unsafe { io::recv(self.driver, self.fd(), ptr, len, wait) };
            match outcome {
                Ok(RecvOutcome::Data(n)) => reader.commit(n),
                Ok(RecvOutcome::TimedOut) => return Ok(None),
                Ok(RecvOutcome::Eof) if reader.is_idle() => {
                    return Err(NetError::Closed { peer: self.peer.clone() });
                }
                Ok(RecvOutcome::Eof) => {
                    return Err(frame_error(FrameError::InconsistentLengths(
                        "connection closed in the middle of a frame".into(),
                    )));
                }
                Err(source) => {
                    return Err(NetError::Io { peer: self.peer.clone(), op: "recv", source });
                }
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}
