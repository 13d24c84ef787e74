//! One TCP connection as both ends see it: the socket, the send lock that
//! keeps frames whole, reading the next frame, and the hello exchange.
//!
//! Owns: the socket and the rule that a frame is written by one thread at a
//! time, start to end, by the thread that has it (so a reply computed inline
//! goes out without waking anyone). Must not know what a request means.

use super::TransportOptions;
use crate::error::{Code, Status};
use crate::net::frame::{FrameError, FrameHeader, FrameKind, FrameLimits, FrameParts, OutgoingFrame, ReceivedFrame};
use crate::net::io::{self, Driver, RecvOutcome, Wait};
use crate::net::message::{self, ErrorMeta};
use crate::net::reader::FrameReader;
use crate::net::shm::{self, LineFrame, LineMeta, Placed, Polled, ShmChannel};
use crate::tensor::placement::SharedPlacement;
use parking_lot::Mutex;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a reader takes next: a frame, or a shared-memory line frame by
/// value when it asked for those ([`Conn::read_incoming`]).
pub(crate) enum Incoming {
    Frame(ReceivedFrame),
    Line(LineFrame),
}

/// How a shared-memory read hands over line frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LineFrames {
    /// As they are ([`Incoming::Line`]).
    ByValue,
    /// Converted into frames ([`Incoming::Frame`]).
    AsFrames,
}

/// When a send gives up: the connection's send timeout after the send
/// first has to wait, or `cap` if that is sooner. The clock is read only
/// when a send waits (a lock held, a ring or socket full): most sends do
/// not, and a clock read is about 22 ns of a 0.9 µs shared-memory round
/// trip here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendDeadline {
    cap: Option<Instant>,
}

impl SendDeadline {
    /// The send timeout alone.
    pub(crate) const TIMEOUT: SendDeadline = SendDeadline { cap: None };

    /// The send timeout, but no later than `cap` (a call's own deadline).
    pub(crate) fn at(cap: Instant) -> SendDeadline {
        SendDeadline { cap: Some(cap) }
    }

    /// The instant, for a send that starts waiting now.
    fn resolve(self, send_timeout: Duration) -> Instant {
        self.resolve_from(Instant::now(), send_timeout)
    }

    /// The instant, for a send that started waiting at `now`.
    fn resolve_from(self, now: Instant, send_timeout: Duration) -> Instant {
        let timeout = now + send_timeout;
        self.cap.map_or(timeout, |cap| cap.min(timeout))
    }
}

/// A shared-memory send that has had to wait: since when, and until when.
struct ShmSendWait {
    start: Instant,
    deadline: Instant,
    space_deadline: Instant,
    next_liveness_check: Instant,
}

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
    /// `outbox.writer_running`, written with it: a holder of the send lock
    /// reads it without the outbox lock (only such a holder starts the
    /// writer, so `false` stays true while the lock is held).
    writer_running: AtomicBool,
    pub(crate) limits: FrameLimits,
    /// Whether `limits` admit every shared-memory line frame
    /// (`shm::line_fits`): then none needs a header built to be checked.
    line_fits: bool,
    pub(crate) spin: Duration,
    pub(crate) send_timeout: Duration,
    zerocopy_min_bytes: u64,
    closed: AtomicBool,
    /// The shared-memory channel, once negotiated after the hello: every
    /// later frame goes through it (the socket then carries only frames
    /// too large for the ring, and the peer's liveness).
    shm: std::sync::OnceLock<ShmChannel>,
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
            writer_running: AtomicBool::new(false),
            limits: options.frame_limits(),
            line_fits: shm::line_fits(&options.frame_limits()),
            spin: options.spin(),
            send_timeout: Duration::from_millis(options.send_timeout_ms),
            zerocopy_min_bytes: options.zerocopy_send_min_bytes,
            closed: AtomicBool::new(false),
            shm: std::sync::OnceLock::new(),
        }
    }

    /// Switches this connection to `channel` (negotiation only, before any
    /// request crosses).
    pub(crate) fn attach_shm(&self, mut channel: ShmChannel) {
        channel.watch_socket(self.fd());
        if self.shm.set(channel).is_err() {
            tracing::warn!("connection to {}: a second shared-memory channel ignored", self.peer);
        }
    }

    /// Whether frames cross through shared memory.
    pub(crate) fn is_shared_memory(&self) -> bool {
        self.shm.get().is_some()
    }

    /// What this side sent through its shared-memory channel, if it has one.
    pub(crate) fn shm_stats(&self) -> Option<shm::ShmStats> {
        self.shm.get().map(ShmChannel::stats)
    }

    /// Whether its shared-memory region lies on hugetlbfs pages.
    pub(crate) fn shm_on_hugetlb(&self) -> Option<bool> {
        self.shm.get().map(|channel| channel.region().is_hugetlb())
    }

    /// Memory in the peer's ring for a kernel's output this connection
    /// will send, when it has a shared-memory channel that allows it.
    pub(crate) fn output_placement(&self) -> Option<SharedPlacement> {
        self.shm.get().and_then(ShmChannel::output_placement)
    }

    /// The negotiation's view of this connection and its reader.
    pub(crate) fn control<'a>(&'a self, reader: &'a mut FrameReader) -> ConnControl<'a> {
        ConnControl { conn: self, reader }
    }

    /// Whether the peer's end of the socket is still open (a peek that does
    /// not wait).
    fn peer_alive(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: peeks at most one byte into a local.
        let n = unsafe { libc::recv(self.fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        n > 0 || (n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock)
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
            if let Some(shm) = self.shm.get() {
                shm.wake_reader();
            }
        }
    }

    /// Encodes and sends one frame, whole, on the calling thread, within
    /// the send timeout.
    pub(crate) fn send(&self, parts: FrameParts<'_>) -> Result<(), NetError> {
        self.send_by(parts, SendDeadline::TIMEOUT)
    }

    /// Like [`send`](Self::send), giving up at `deadline`.
    pub(crate) fn send_by(&self, parts: FrameParts<'_>, deadline: SendDeadline) -> Result<(), NetError> {
        if self.sent_as_line(&parts, false) {
            return Ok(());
        }
        let header = self.header_for(&parts)?;
        if self.sent_inline(&header, &parts, false) {
            return Ok(());
        }
        self.send_frame(&OutgoingFrame::with_header(header, parts.meta, parts.payloads), deadline)
    }

    fn header_for(&self, parts: &FrameParts<'_>) -> Result<FrameHeader, NetError> {
        FrameHeader::for_parts(parts, &self.limits)
            .map_err(|source| NetError::Frame { peer: self.peer.clone(), source })
    }

    /// As [`sent_inline`](Self::sent_inline), for a frame of metadata
    /// alone that fits a slot's first line: no header is built first.
    fn sent_as_line(&self, parts: &FrameParts<'_>, behind_outbox: bool) -> bool {
        let Some(shm) = self.shm.get() else {
            return false;
        };
        if !parts.payloads.is_empty() || parts.meta.len() > shm::LINE_META_BYTES || !self.line_fits {
            return false;
        }
        // No send lock: a line frame takes one slot under the producer
        // lock, so it cannot land inside another frame (a split frame's
        // slots are published under one hold of that lock, and a frame
        // sent over the socket follows its marker slot, which the reader
        // takes first). It may pass a frame another thread is still
        // sending, as it could have by being called first; it never passes
        // one this thread sent: sends return once done, and a reply that
        // this thread queued keeps `writer_running` set until it is out.
        if self.is_closed() || (behind_outbox && self.writer_running.load(Ordering::Acquire)) {
            return false;
        }
        shm.try_place_line(parts) == Some(Placed::Sent)
    }

    /// Writes a frame that fits a shared-memory slot straight into the
    /// peer's ring, when that needs no wait: the send lock is free, a slot
    /// is free, and (`behind_outbox`, for replies) no queued reply must go
    /// first. `false` leaves the frame to the general path, which waits,
    /// queues or falls back to the socket as it must.
    fn sent_inline(&self, header: &FrameHeader, parts: &FrameParts<'_>, behind_outbox: bool) -> bool {
        let Some(shm) = self.shm.get() else {
            return false;
        };
        if shm::inline_len(header).is_none() || self.is_closed() {
            return false;
        }
        let Some(_whole_frame) = self.send_lock.try_lock() else {
            return false;
        };
        if behind_outbox && self.writer_running.load(Ordering::Acquire) {
            return false;
        }
        shm.try_place_inline(header, parts.meta, parts.payloads) == Some(Placed::Sent)
    }

    /// Encodes and sends a reply (or a push back to a client) without
    /// waiting on the peer (see [`send_reply`](Self::send_reply)).
    pub(crate) fn reply(self: &Arc<Self>, parts: FrameParts<'_>) -> Result<(), NetError> {
        if self.sent_as_line(&parts, true) {
            return Ok(());
        }
        let header = self.header_for(&parts)?;
        if self.sent_inline(&header, &parts, true) {
            return Ok(());
        }
        self.send_reply(OutgoingFrame::with_header(header, parts.meta, parts.payloads))
    }

    /// As [`reply`](Self::reply), for a response of `meta` alone (a small
    /// call's answer): over shared memory, a line frame written in
    /// fixed-size copies when it needs no wait, as `sent_as_line` would.
    pub(crate) fn reply_line(self: &Arc<Self>, method: u16, request_id: u64, meta: &LineMeta) -> Result<(), NetError> {
        if let Some(shm) = self.shm.get()
            && self.line_fits
            && !self.is_closed()
            && !self.writer_running.load(Ordering::Acquire)
            && shm.try_place_line_meta(FrameKind::Response, method, request_id, meta) == Placed::Sent
        {
            return Ok(());
        }
        self.reply(FrameParts { kind: FrameKind::Response, method, request_id, meta: meta.as_bytes(), payloads: &[] })
    }

    /// Sends `frame` whole. Any I/O failure (a timeout included) closes the
    /// connection: part of the frame may be on the wire, and nothing can
    /// follow it.
    pub(crate) fn send_frame(&self, frame: &OutgoingFrame, deadline: SendDeadline) -> Result<(), NetError> {
        if self.is_closed() {
            return Err(NetError::Closed { peer: self.peer.clone() });
        }
        let mut deadline = deadline;
        let Some(_whole_frame) = self.send_lock.try_lock().or_else(|| {
            let at = deadline.resolve(self.send_timeout);
            deadline = SendDeadline::at(at);
            self.send_lock.try_lock_until(at)
        }) else {
            return Err(NetError::TimedOut { peer: self.peer.clone() });
        };
        if let Some(shm) = self.shm.get() {
            return self.send_frame_shm(shm, frame, deadline);
        }
        self.send_socket_frame(frame, deadline.resolve(self.send_timeout))
    }

    /// Sends `frame` over the socket; the caller holds the send lock (or is
    /// the writer thread).
    fn send_socket_frame(&self, frame: &OutgoingFrame, deadline: Instant) -> Result<(), NetError> {
        let zerocopy = frame.payload_data_bytes() >= self.zerocopy_min_bytes;
        let slices = frame.io_slices();
        io::send_all(self.driver, self.fd(), &slices, zerocopy, self.spin, deadline).map_err(|source| {
            self.close();
            if source.kind() == std::io::ErrorKind::TimedOut {
                NetError::TimedOut { peer: self.peer.clone() }
            } else {
                NetError::Io { peer: self.peer.clone(), op: "send", source }
            }
        })
    }

    /// Sends `frame` through the shared-memory channel: into the ring when
    /// there is room (waiting for the reader to release some, up to
    /// `shm::SPACE_WAIT`, unless the last such wait ran out and the reader
    /// has released nothing since), else over the socket behind a
    /// via-socket marker so that order holds. Waiting for a descriptor slot (a reader that is
    /// behind) lasts until `deadline`, which closes the connection.
    fn send_frame_shm(&self, shm: &ShmChannel, frame: &OutgoingFrame, deadline: SendDeadline) -> Result<(), NetError> {
        // Read from the clock once the first try fails: most frames find
        // room at once.
        let mut waiting: Option<ShmSendWait> = None;
        loop {
            let placed = shm.try_place(frame);
            if placed == Placed::Sent {
                return Ok(());
            }
            let now = Instant::now();
            let wait = waiting.get_or_insert_with(|| {
                let deadline = deadline.resolve_from(now, self.send_timeout);
                ShmSendWait {
                    start: now,
                    deadline,
                    space_deadline: deadline.min(now + shm::SPACE_WAIT),
                    next_liveness_check: now + shm::LIVENESS_SLICE,
                }
            });
            if let Placed::NoSpace { too_large } = placed {
                let stalled = !too_large && shm.ring_stalled();
                let waited_out = !too_large && !stalled && now >= wait.space_deadline;
                if waited_out {
                    shm.note_space_stall();
                }
                if too_large || stalled || waited_out {
                    shm.publish_via_socket();
                    return self.send_socket_frame(frame, wait.deadline);
                }
            }
            if self.is_closed() {
                return Err(NetError::Closed { peer: self.peer.clone() });
            }
            if now >= wait.deadline {
                self.close();
                return Err(NetError::TimedOut { peer: self.peer.clone() });
            }
            if now.duration_since(wait.start) < self.spin {
                io::spin_pause(wait.start);
                continue;
            }
            if now >= wait.next_liveness_check {
                if !self.peer_alive() {
                    self.close();
                    return Err(NetError::Closed { peer: self.peer.clone() });
                }
                wait.next_liveness_check = now + shm::LIVENESS_SLICE;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
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
        if let Some(shm) = self.shm.get() {
            // Into the ring now, or to the writer thread (which may wait for
            // room): the replying thread never waits on the peer.
            if shm.try_place(&frame) == Placed::Sent {
                return Ok(());
            }
            return self.start_writer(frame, 0);
        }
        let total = frame.header.frame_len() as usize;
        let sent = io::send_some(self.driver, self.fd(), &frame.io_slices(), 0).map_err(|source| {
            self.close();
            NetError::Io { peer: self.peer.clone(), op: "send", source }
        })?;
        if sent == total {
            return Ok(());
        }
        self.start_writer(frame, sent)
    }

    /// Queues `frame` (its first `sent` bytes already on the socket) and
    /// starts the writer thread. The caller holds the send lock and saw no
    /// writer running.
    fn start_writer(self: &Arc<Self>, frame: OutgoingFrame, sent: usize) -> Result<(), NetError> {
        let mut outbox = self.outbox.lock();
        outbox.queue.push_front(frame);
        outbox.head_sent = sent;
        outbox.writer_running = true;
        self.writer_running.store(true, Ordering::Release);
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
                        self.writer_running.store(false, Ordering::Release);
                        return;
                    }
                }
            };
            let deadline = Instant::now() + self.send_timeout;
            let sent = match self.shm.get() {
                Some(shm) => self.send_frame_shm(shm, &frame, SendDeadline::at(deadline)),
                None => {
                    let slices = frame.io_slices();
                    let rest = io::skip_slices(&slices, skip);
                    let zerocopy = frame.payload_data_bytes() >= self.zerocopy_min_bytes;
                    io::send_all(self.driver, self.fd(), &rest, zerocopy, self.spin, deadline)
                        .map_err(|source| NetError::Io { peer: self.peer.clone(), op: "send", source })
                }
            };
            if let Err(e) = sent {
                tracing::warn!("closing connection to {}: reply not sent: {e}", self.peer);
                self.close();
                let mut outbox = self.outbox.lock();
                outbox.queue.clear();
                outbox.writer_running = false;
                self.writer_running.store(false, Ordering::Release);
                return;
            }
        }
    }

    pub(crate) fn send_error(self: &Arc<Self>, request_id: u64, method: u16, status: &Status) -> Result<(), NetError> {
        let meta = message::encode(&ErrorMeta { code: status.code as u8, message: status.message.clone() })
            .map_err(|s| NetError::Handshake { peer: self.peer.clone(), reason: s.into_message() })?;
        self.reply(FrameParts { kind: FrameKind::Error, method, request_id, meta: &meta, payloads: &[] })
    }

    /// The next frame: one already buffered, or received now, spinning up
    /// to `spin` on an empty socket or ring before sleeping on it.
    /// `Ok(None)` when the deadline passes; end of stream is
    /// [`NetError::Closed`] (with a frame cut short it is a truncation
    /// error).
    pub(crate) fn read_frame(
        &self,
        reader: &mut FrameReader,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<ReceivedFrame>, NetError> {
        match self.shm.get() {
            Some(shm) => self.read_frame_shm(shm, reader, spin, deadline, LineFrames::AsFrames).map(|next| {
                next.map(|incoming| match incoming {
                    Incoming::Frame(frame) => frame,
                    Incoming::Line(_) => unreachable!("lines come as frames when asked so"),
                })
            }),
            None => self.read_socket_frame(reader, spin, deadline),
        }
    }

    /// As [`read_frame`](Self::read_frame), handing a shared-memory line
    /// frame over by value ([`Incoming::Line`]), for a reader that can
    /// answer or complete a small call from it without a buffer.
    pub(crate) fn read_incoming(
        &self,
        reader: &mut FrameReader,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<Incoming>, NetError> {
        match self.shm.get() {
            Some(shm) => self.read_frame_shm(shm, reader, spin, deadline, LineFrames::ByValue),
            None => Ok(self.read_socket_frame(reader, spin, deadline)?.map(Incoming::Frame)),
        }
    }

    /// A line frame that [`read_incoming`](Self::read_incoming) handed
    /// over, as a frame after all.
    pub(crate) fn frame_of_line(&self, line: LineFrame) -> Result<ReceivedFrame, NetError> {
        let shm = self.shm.get().expect("line frames come only over shared memory");
        let mut rx = shm.rx.lock();
        shm.frame_of_line(&mut rx, line).map_err(|source| NetError::Frame { peer: self.peer.clone(), source })
    }

    /// The next frame from the shared-memory channel (or, after a
    /// via-socket marker, from the socket): spins up to `spin`, then sleeps
    /// on the doorbell until a frame is published, the deadline passes, the
    /// connection closes, or the peer's socket hangs up (the hang-up watch
    /// rings; without it, the sleep is cut into `shm::LIVENESS_SLICE`s that
    /// each end with a look at the socket). Frames published before a
    /// hang-up are still read.
    fn read_frame_shm(
        &self,
        shm: &ShmChannel,
        reader: &mut FrameReader,
        spin: Duration,
        deadline: Option<Instant>,
        lines: LineFrames,
    ) -> Result<Option<Incoming>, NetError> {
        let mut rx = shm.rx.lock();
        // Read at the first empty poll: a frame already there costs no
        // clock read (about 35 ns here), an empty ring one instead of two.
        let mut start = None;
        // A wait past its pure phase, or any wait while this reader shares
        // a core with the peer's or lately gave its core to another thread,
        // is noted for the peer's reader (and the note taken back when this
        // read returns): see `SHARED_CORE_HOLD` and `DESCHEDULED`.
        let mut noted = WaitNote { shm, noted: false };
        let frame_error = |e| NetError::Frame {
            peer: self.peer.clone(),
            source: match e {
                shm::ShmError::Frame(source) => source,
                shm::ShmError::Ring(ring) => FrameError::InconsistentLengths(format!("shared-memory ring: {ring}")),
            },
        };
        loop {
            if rx.socket_frames_due > 0 {
                let frame = self.read_socket_frame(reader, spin, deadline)?;
                if frame.is_some() {
                    rx.socket_frames_due -= 1;
                }
                return Ok(frame.map(Incoming::Frame));
            }
            // Read before the ring is polled: frames the peer published
            // before it hung up are then all visible to the poll.
            let hung_up = shm.peer_hung_up();
            if let Some(line) = shm.poll_line(&mut rx).map_err(frame_error)? {
                return Ok(Some(match lines {
                    LineFrames::ByValue => Incoming::Line(line),
                    LineFrames::AsFrames => {
                        Incoming::Frame(shm.frame_of_line(&mut rx, line).map_err(|e| frame_error(e.into()))?)
                    }
                }));
            }
            let polled = shm.poll(&mut rx).map_err(frame_error)?;
            match polled {
                Polled::Frame(frame) => return Ok(Some(Incoming::Frame(frame))),
                Polled::ViaSocket => {
                    rx.socket_frames_due += 1;
                    continue;
                }
                Polled::Empty => {}
            }
            if self.is_closed() || hung_up {
                return Err(NetError::Closed { peer: self.peer.clone() });
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let start = *start.get_or_insert(now);
            let waited = now.duration_since(start);
            let mut sharing_core = rx.shares_core_until.is_some_and(|until| now < until);
            // Set only for a reader that could move: the note is what lets
            // it (or its peer) leave.
            let contended = rx.contended_until.is_some_and(|until| now < until);
            if !noted.noted && (sharing_core || contended || waited >= io::pure_spin()) {
                noted.noted = true;
                if let Some(shared) = shm.note_waiting(!crate::host::may_leave_cpu(now)) {
                    // A reader whose core other threads take turns on moves
                    // even with no core spare: off its peer's core, the two
                    // stop paying a context switch per message.
                    let may_move = shared.moves && (contended || crate::host::has_spare_core_at(now));
                    if may_move && crate::host::other_cpus().is_some_and(|o| o.leave_current_cpu()) {
                        rx.shares_core_until = None;
                        sharing_core = false;
                    } else {
                        rx.shares_core_until = Some(now + SHARED_CORE_HOLD);
                        sharing_core = true;
                    }
                } else {
                    // The peer's reader waits elsewhere, or not at all.
                    rx.shares_core_until = None;
                    sharing_core = false;
                }
            }
            if waited < spin {
                let yielded = if sharing_core {
                    Some(io::yield_core(now))
                } else {
                    let consumer = &rx.consumer;
                    io::spin_until(start, now, || consumer.has_pending())
                };
                // Timed here, not by the next round: a frame that came while
                // another thread had the core is taken before that round's
                // clock read, and being descheduled so is the case to see.
                // A reader that could not move has no use for knowing.
                if yielded.is_some_and(|took| took >= DESCHEDULED) && crate::host::may_leave_cpu(now) {
                    rx.contended_until = Some(now + SHARED_CORE_HOLD);
                }
                continue;
            }
            if let Some(seq) = rx.consumer.prepare_sleep() {
                let watched = shm.hangup_watched();
                let timeout = match deadline {
                    Some(d) if watched => Some(d - now),
                    None if watched => None,
                    _ => Some(deadline.map_or(shm::LIVENESS_SLICE, |d| (d - now).min(shm::LIVENESS_SLICE))),
                };
                let word = &rx.consumer.memory().doorbell().seq;
                shm::doorbell::wait(word, seq, timeout);
                let quiet = word.load(Ordering::Acquire) == seq;
                rx.consumer.woke();
                if quiet && !watched && !self.peer_alive() {
                    return Err(NetError::Closed { peer: self.peer.clone() });
                }
            }
        }
    }

    /// The next frame from the socket.
    fn read_socket_frame(
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

/// How long a shared-memory reader that found the peer's reader waiting on
/// its own core, and did not move off it, yields from the first round of
/// every wait instead of spinning purely first (unless a note finds the
/// peer elsewhere sooner). Two threads the scheduler stacked on one core
/// (it does, after both slept: the wake-up lands on the waker's core, and
/// neither counts as movable while both run every few µs) each spin
/// through their pure phase while the other waits for the core: a 40 B
/// round trip took 2 × the pure phase + 3 µs (23 µs), in whole blocks of
/// `ringflow bench pingpong` (up to 1% of round trips, its p99). So one
/// reader moves to another core when there is a spare one
/// (`host::OtherCpus::leave_current_cpu`; which one: `ShmChannel::note_waiting`); the
/// other yields meanwhile (two context switches a round trip). After the hold a reader spins purely again and
/// notes the next wait that outlasts the pure phase, so a pair still
/// stacked pays one slow round trip a hold.
const SHARED_CORE_HOLD: Duration = Duration::from_millis(1);

/// A yield that took this long gave the core to another thread: the
/// threshold `host` also counts such yields by ([`crate::host::CORE_TAKEN`];
/// a yield nobody takes returns in about 0.3 µs on the 2 vCPU VMs, handing
/// the core to another process and back takes 3 µs). The reader then notes each
/// wait at once for `SHARED_CORE_HOLD`, and may move off its peer's core
/// with no core spare: three busy processes on two cores (a client, a
/// master and a worker) otherwise keep whatever placement the scheduler
/// gave them, and with the master sharing a core every step pays an extra
/// switch (unpinned step-remote on the 2 vCPU AMD EPYC 7001 VM,
/// alternating runs: near 23.3–24.0 µs in 3 of 4 without this rule, 15.2–16.1
/// µs in 4 of 4 with it; pinned, where it does nothing, 14.9–15.3 against
/// 15.2–15.6 µs).
const DESCHEDULED: Duration = crate::host::CORE_TAKEN;

/// A shared-memory read's note that it waits (`ShmChannel::note_waiting`),
/// taken back when the read returns, whichever way.
struct WaitNote<'a> {
    shm: &'a ShmChannel,
    noted: bool,
}

impl Drop for WaitNote<'_> {
    fn drop(&mut self) {
        if self.noted {
            self.shm.note_wait_over();
        }
    }
}

/// The connection as the shared-memory negotiation sees it: control frames
/// over the socket, before any request.
pub(crate) struct ConnControl<'a> {
    conn: &'a Conn,
    reader: &'a mut FrameReader,
}

impl shm::ControlChannel for ConnControl<'_> {
    fn peer(&self) -> &str {
        &self.conn.peer
    }

    fn send_control(&self, meta: &[u8]) -> Result<(), String> {
        let parts = FrameParts { kind: FrameKind::Transport, method: 0, request_id: 0, meta, payloads: &[] };
        self.conn.send(parts).map_err(|e| e.to_string())
    }

    fn recv_control(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let frame = self
            .conn
            .read_socket_frame(self.reader, self.conn.spin, Some(deadline))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no transport answer before the connect timeout".to_string())?;
        if frame.header.kind != FrameKind::Transport {
            return Err(format!("expected a transport answer, got a {:?} frame", frame.header.kind));
        }
        Ok(frame.meta_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_deadline_is_the_timeout_from_when_it_is_read_capped_by_the_call() {
        let timeout = Duration::from_secs(5);
        let before = Instant::now();
        let resolved = SendDeadline::TIMEOUT.resolve(timeout);
        assert!(resolved >= before + timeout && resolved <= Instant::now() + timeout);
        // A call's own deadline sooner than the timeout wins...
        let soon = before + Duration::from_millis(10);
        assert_eq!(SendDeadline::at(soon).resolve(timeout), soon);
        // ...and a later one does not stretch the send timeout.
        let late = before + Duration::from_secs(60);
        let resolved = SendDeadline::at(late).resolve(timeout);
        assert!(resolved < late && resolved >= before + timeout);
    }
}
