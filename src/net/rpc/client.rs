//! [`Client`]: one connection to a server, shared by any number of threads,
//! with many requests in flight completing in any order.
//!
//! Owns: request ids, the pending-call table, and who reads the socket.
//! There is no receiver thread: a caller waiting for its response reads the
//! socket itself (leader/follower). Whoever holds the `reader` lock is the
//! leader; it reads frames and completes the calls they answer, its own or
//! others'. When its own arrives it releases the lock and unparks every
//! waiting follower so one of them leads next. A lone caller therefore
//! spins on the socket for its own answer with no hand-off at all, which is
//! what makes a small round trip as cheap as a raw spinning ping-pong.
//!
//! Why no waiter is stranded: a follower registers its thread in its slot
//! before it tries the lock, and a leader scans the slots only after it has
//! released the lock; a follower that failed `try_lock` did so while the
//! leader held it, so that leader's scan sees the follower and unparks it
//! (a park token is never lost). Followers also sleep in bounded slices.
//!
//! When the connection dies every pending call fails at once with
//! `Unavailable` naming the peer; every wait has a deadline.

use super::TransportOptions;
use super::conn::{Conn, Incoming, NetError, SendDeadline};
use super::leader::{FollowerIds, LeaderGuard, LeaderLock};
use super::origin::Origin;
use super::server::{Reply, Request, Service};
use crate::error::{Code, Result, Status};
use crate::net::frame::{FrameKind, FrameParts, ReceivedFrame};
use crate::net::io;
use crate::net::message::{self, ErrorMeta, Hello, Method, Validated};
use crate::net::message::{OneWay, Rpc};
use crate::net::reader::FrameReader;
use crate::net::shm::LineMeta;
use crate::tensor::Tensor;
use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use rkyv::Archive;
use rkyv::api::high::HighValidator;
use rkyv::bytecheck::CheckBytes;
use rkyv::{Portable, rancor};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Longest a follower sleeps before it looks again.
/// How often a call waiting with [`PendingCall::wait_unless`] asks whether
/// it was abandoned.
pub const ABANDON_POLL: Duration = Duration::from_millis(20);

const FOLLOWER_PARK_SLICE: Duration = Duration::from_millis(5);

/// A response: archived metadata read in place, payload tensors over the
/// receive buffer (kept alive while any of them lives).
pub struct Response {
    body: ResponseBody,
    /// What the body's metadata was checked as on arrival.
    validated: Validated,
    /// Zero-copy views into the receive buffer, in frame order.
    pub payloads: Vec<Tensor>,
}

/// Where a response's metadata lies.
enum ResponseBody {
    Frame(ReceivedFrame),
    /// A shared-memory line frame's, held by value: a small call's answer
    /// needs no buffer.
    Line(LineMeta),
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Response");
        match &self.body {
            ResponseBody::Frame(frame) => out.field("frame", frame),
            ResponseBody::Line(meta) => out.field("line", meta),
        };
        out.field("payloads", &self.payloads).finish()
    }
}

impl Response {
    pub fn meta_bytes(&self) -> &[u8] {
        match &self.body {
            ResponseBody::Frame(frame) => frame.meta_bytes(),
            ResponseBody::Line(meta) => meta.as_bytes(),
        }
    }
    /// The archived metadata in place, validated (on arrival, when `M` is
    /// the type its method names; here otherwise).
    pub fn meta<M: Archive>(&self) -> Result<&M::Archived>
    where
        M::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + 'static,
    {
        // SAFETY: `validated` came from validating these bytes when they
        // arrived; the body is never replaced, and neither a received
        // frame's bytes nor a line's copy are written again.
        unsafe { message::view_validated::<M>(self.meta_bytes(), self.validated) }
    }
    /// The received frame (for no-copy checks); `None` for a small
    /// call's answer taken from a shared-memory line, which has none.
    pub fn frame(&self) -> Option<&ReceivedFrame> {
        match &self.body {
            ResponseBody::Frame(frame) => Some(frame),
            ResponseBody::Line(_) => None,
        }
    }
}

struct CallSlot {
    done: AtomicBool,
    result: Mutex<Option<Result<Response>>>,
    waiter: Mutex<Option<Thread>>,
}

impl CallSlot {
    fn complete(&self, result: Result<Response>) {
        *self.result.lock() = Some(result);
        self.done.store(true, Ordering::Release);
        if let Some(thread) = self.waiter.lock().as_ref() {
            thread.unpark();
        }
    }
}

struct Inner {
    conn: Conn,
    /// Where the pushes this client serves come from (`conn.peer`).
    push_origin: Arc<Origin>,
    /// Serves the one-way frames the server pushes back on this connection
    /// (see `server::BackChannel`); without one, a push is a protocol error.
    inbound: Option<Weak<dyn Service>>,
    /// The leader lock: whoever holds it reads the socket.
    reader: LeaderLock,
    pending: Mutex<HashMap<u64, Arc<CallSlot>>>,
    /// Calls in [`PendingCall::wait_unless`] (see `wake_followers`).
    waiting: AtomicUsize,
    /// Ids of the calls not made by the leader (see `leader.rs`).
    follower_ids: FollowerIds,
    /// Why the connection failed, set once (read without a lock by every call).
    failure: std::sync::OnceLock<Status>,
    options: TransportOptions,
    peer_hello: Hello,
}

/// A connection to one server. Cheap to share (`Arc<Client>`); every method
/// takes `&self`.
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({}, {})", self.inner.conn.peer, self.inner.conn.driver.name())
    }
}

impl Client {
    /// Connects, exchanges hellos, and returns the client.
    pub fn connect(addr: &str, options: TransportOptions) -> Result<Client> {
        Client::connect_serving(addr, options, None)
    }

    /// Like [`connect`](Self::connect), and the one-way frames the server
    /// pushes back on this connection go to `inbound` (on the thread that
    /// reads them: a caller waiting for a response on this connection).
    pub fn connect_serving(
        addr: &str,
        options: TransportOptions,
        inbound: Option<Weak<dyn Service>>,
    ) -> Result<Client> {
        let driver = io::select_driver(options.transport)
            .map_err(|e| Status::unavailable(format!("transport to {addr}: {e}")))?;
        let timeout = options.connect_timeout();
        let deadline = Instant::now() + timeout;
        let addrs: Vec<_> =
            addr.to_socket_addrs().map_err(|e| Status::unavailable(format!("cannot resolve {addr}: {e}")))?.collect();
        let mut last_err = None;
        let mut stream = None;
        for sockaddr in &addrs {
            match TcpStream::connect_timeout(sockaddr, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let stream = stream.ok_or_else(|| {
            Status::unavailable(format!(
                "cannot connect to {addr}: {}",
                last_err.map_or("no address".to_string(), |e| e.to_string())
            ))
        })?;
        let conn = Conn::new(stream, driver, addr.to_string(), &options);
        let mut reader = FrameReader::new(conn.limits, options.recv_chunk_bytes, options.recv_region.clone())
            .map_err(|e| Status::resource_exhausted(format!("receive buffer for {addr}: {e}")))?;
        let peer_hello =
            super::handshake::client_handshake(conn.fd(), &conn.peer, &options, deadline).map_err(|e| e.to_status())?;
        let channel =
            crate::net::shm::negotiate_client(&mut conn.control(&mut reader), &options.shm, conn.limits, deadline)
                .map_err(|reason| Status::unavailable(format!("transport negotiation with {addr}: {reason}")))?;
        if let Some(channel) = channel {
            conn.attach_shm(channel);
        }
        tracing::debug!(
            "connected to {addr} ({}, incarnation {:#x}) over {}",
            peer_hello.name,
            peer_hello.incarnation,
            driver.name()
        );
        Ok(Client {
            inner: Arc::new(Inner {
                push_origin: Origin::pushes_from(Arc::from(conn.peer.as_str())),
                conn,
                inbound,
                reader: LeaderLock::new(reader),
                pending: Mutex::new(HashMap::new()),
                waiting: AtomicUsize::new(0),
                follower_ids: FollowerIds::new(),
                failure: std::sync::OnceLock::new(),
                options,
                peer_hello,
            }),
        })
    }

    pub fn peer(&self) -> &str {
        &self.inner.conn.peer
    }

    /// The server process's incarnation, from its hello.
    pub fn peer_incarnation(&self) -> u64 {
        self.inner.peer_hello.incarnation
    }

    pub fn driver(&self) -> io::Driver {
        self.inner.conn.driver
    }

    /// Whether frames cross through shared memory (the server is on this
    /// host and both sides allow it), rather than the TCP socket.
    pub fn is_shared_memory(&self) -> bool {
        self.inner.conn.is_shared_memory()
    }

    /// What this client sent through its shared-memory channel (frames in
    /// the ring, over the socket instead, waits for space that ran out);
    /// `None` over TCP.
    pub fn shm_stats(&self) -> Option<crate::net::shm::ShmStats> {
        self.inner.conn.shm_stats()
    }

    /// Whether this client's shared-memory rings lie on the host's reserved
    /// huge pages (`ShmOptions::hugetlb`); `None` over TCP.
    pub fn shm_on_hugetlb(&self) -> Option<bool> {
        self.inner.conn.shm_on_hugetlb()
    }

    /// Memory a kernel may write a tensor this client will push into: the
    /// peer's shared-memory ring, when the connection has one.
    pub fn output_placement(&self) -> Option<crate::tensor::placement::SharedPlacement> {
        self.inner.conn.output_placement()
    }

    /// True once the connection has failed; a new `Client` is needed.
    pub fn is_dead(&self) -> bool {
        self.inner.failure.get().is_some()
    }

    /// Checks, without blocking, whether the server closed the connection
    /// while nobody was reading; marks the client dead if so.
    pub fn probe_alive(&self) -> bool {
        if self.is_dead() {
            return false;
        }
        let Some(_reader) = self.inner.reader.try_lock() else {
            return true; // A leader is reading and will notice.
        };
        let mut byte = 0u8;
        // SAFETY: peeks at most one byte into a local.
        let n = unsafe {
            libc::recv(self.inner.conn.fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        let alive = n > 0 || (n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock);
        if !alive {
            self.inner.fail_all(Status::unavailable(format!("connection to {} closed", self.peer())));
        }
        alive
    }

    /// Sends a request and waits for its response until `deadline`.
    pub fn call(&self, method: Method, meta: &[u8], payloads: &[Tensor], deadline: Instant) -> Result<Response> {
        if let Some(reader) = self.inner.reader.try_lock() {
            return self.call_leading(reader, method, meta, payloads, deadline);
        }
        self.start_call_by(method, meta, payloads, SendDeadline::at(deadline))?.wait(deadline)
    }

    /// A call whose caller holds the leader lock from the start (the usual
    /// case: nobody else is reading): it sends, then reads until its own
    /// response, with no call slot, no pending entry and no hand-off.
    /// Calls started meanwhile register as usual and follow; whatever
    /// answers them is delivered to them on the way. (So one call more
    /// than `max_in_flight` may be outstanding: the leader's.)
    fn call_leading(
        &self,
        mut leader: LeaderGuard<'_>,
        method: Method,
        meta: &[u8],
        payloads: &[Tensor],
        deadline: Instant,
    ) -> Result<Response> {
        let inner = &self.inner;
        let answer = (|| {
            inner.check_alive()?;
            let id = leader.next_id();
            let sent = inner.conn.send_by(request_parts(method, id, meta, payloads), SendDeadline::at(deadline));
            if let Err(e) = sent {
                return Err(inner.send_failed(e, method));
            }
            let spin = inner.options.spin();
            loop {
                let frame = match inner.conn.read_incoming(&mut leader.reader, spin, Some(deadline)) {
                    Ok(Some(Incoming::Frame(frame))) => frame,
                    // A small call's answer in a shared-memory line: taken
                    // as it lies, with no buffer or frame built for it.
                    Ok(Some(Incoming::Line(line)))
                        if line.request_id == id && matches!(line.kind, FrameKind::Response | FrameKind::Error) =>
                    {
                        return match outcome(line.kind, line.method, line.meta_bytes()) {
                            Ok(answer) => answer.map(|validated| Response {
                                body: ResponseBody::Line(line.meta),
                                validated,
                                payloads: Vec::new(),
                            }),
                            Err(reason) => Err(inner.protocol_failed(&reason)),
                        };
                    }
                    Ok(Some(Incoming::Line(line))) => match inner.conn.frame_of_line(line) {
                        Ok(frame) => frame,
                        Err(e) => return Err(inner.read_failed(e)),
                    },
                    Ok(None) => return Err(inner.no_response(method)),
                    Err(e) => return Err(inner.read_failed(e)),
                };
                let answers_mine = frame.header.request_id == id
                    && matches!(frame.header.kind, FrameKind::Response | FrameKind::Error);
                if !answers_mine {
                    if let Err(reason) = inner.deliver(frame) {
                        return Err(inner.protocol_failed(&reason));
                    }
                    continue;
                }
                return match inner.answer(frame) {
                    Ok(Some(answer)) => answer,
                    Ok(None) => unreachable!("a response or an error frame is an answer"),
                    Err(reason) => Err(inner.protocol_failed(&reason)),
                };
            }
        })();
        drop(leader);
        inner.wake_followers(0);
        answer
    }

    /// Sends a request and returns at once; [`PendingCall::wait`] collects
    /// the response (so N calls to N peers overlap).
    pub fn start_call(&self, method: Method, meta: &[u8], payloads: &[Tensor]) -> Result<PendingCall> {
        self.start_call_by(method, meta, payloads, SendDeadline::TIMEOUT)
    }

    fn start_call_by(
        &self,
        method: Method,
        meta: &[u8],
        payloads: &[Tensor],
        send_deadline: SendDeadline,
    ) -> Result<PendingCall> {
        let inner = &self.inner;
        inner.check_alive()?;
        let id = inner.follower_ids.next();
        let slot =
            Arc::new(CallSlot { done: AtomicBool::new(false), result: Mutex::new(None), waiter: Mutex::new(None) });
        {
            let mut pending = inner.pending.lock();
            if pending.len() >= inner.options.max_in_flight {
                return Err(Status::resource_exhausted(format!(
                    "{} calls in flight to {} (max_in_flight)",
                    pending.len(),
                    inner.conn.peer
                )));
            }
            // Registered before sending, so the response always finds it.
            pending.insert(id, slot.clone());
        }
        let call = PendingCall { inner: inner.clone(), id, method, slot };
        if let Err(e) = inner.conn.send_by(request_parts(method, id, meta, payloads), send_deadline) {
            return Err(inner.send_failed(e, method));
        }
        Ok(call)
    }

    /// Encodes `request` and calls its method (see [`Rpc`]); the response's
    /// metadata is `R::Response`'s archive (`response.meta::<R::Response>()`).
    pub fn call_rpc<R>(&self, request: &R, payloads: &[Tensor], deadline: Instant) -> Result<Response>
    where
        R: Rpc + message::Encode,
    {
        self.call(R::METHOD, &message::encode(request)?, payloads, deadline)
    }

    /// Encodes and pushes a one-way message (see [`OneWay`]).
    pub fn push_msg<M>(&self, msg: &M, payloads: &[Tensor]) -> Result<()>
    where
        M: OneWay + message::Encode,
    {
        self.push(M::METHOD, &message::encode(msg)?, payloads)
    }

    /// Sends a one-way message (no response, no id).
    pub fn push(&self, method: Method, meta: &[u8], payloads: &[Tensor]) -> Result<()> {
        self.inner.check_alive()?;
        self.inner
            .conn
            .send(FrameParts { kind: FrameKind::Push, method: method as u16, request_id: 0, meta, payloads })
            .map_err(|e| self.inner.send_failed(e, method))
    }

    /// Closes the connection; pending calls fail with `Unavailable`.
    pub fn close(&self) {
        self.inner.fail_all(Status::unavailable(format!("connection to {} closed locally", self.peer())));
    }
}

impl Inner {
    fn check_alive(&self) -> Result<()> {
        match self.failure.get() {
            Some(status) => Err(status.clone()),
            None => Ok(()),
        }
    }

    fn send_failed(&self, error: NetError, method: Method) -> Status {
        match error {
            // Our own frame broke a limit: the connection is fine.
            NetError::Frame { source, .. } => {
                Status::invalid_argument(format!("{method} to {}: {source}", self.conn.peer))
            }
            NetError::TimedOut { .. } => {
                self.fail_all(Status::unavailable(format!(
                    "connection to {} closed: a {method} request could not be sent in time",
                    self.conn.peer
                )));
                Status::deadline_exceeded(format!(
                    "{method} to {}: sending the request did not finish before the deadline",
                    self.conn.peer
                ))
            }
            other => {
                let status = Status::unavailable(format!("{method}: {other}"));
                self.fail_all(status.clone());
                status
            }
        }
    }

    /// Marks the connection failed and fails every pending call.
    fn fail_all(&self, status: Status) {
        // The first failure stays the reason.
        let _ = self.failure.set(status.clone());
        self.conn.close();
        let drained: Vec<_> = self.pending.lock().drain().collect();
        for (_, slot) in drained {
            slot.complete(Err(status.clone()));
        }
    }

    /// Wakes the followers after the leader lock was released. `counted`
    /// is how many of `waiting`'s raises are the caller's own (1 for a
    /// call in [`PendingCall::wait_unless`], which raised it itself, 0
    /// for a small call, which never does).
    #[inline]
    fn wake_followers(&self, counted: usize) {
        // A follower raises `waiting` (`SeqCst`) before it looks at the
        // leader lock (`SeqCst`); a leader released the lock (a `SeqCst`
        // swap, `LeaderGuard::drop`) before it reads `waiting` here
        // (`SeqCst`). In the single order of those four, if this read
        // misses the raise, the release came before the raise and so
        // before the follower's look, which sees the lock free and takes
        // it instead of parking. So a follower that parks is always woken,
        // and a call with no follower pays no locked instruction here (a
        // count of only the caller's own raise: before it was excluded,
        // every call through `wait_unless` took the pending-calls lock).
        if self.waiting.load(Ordering::SeqCst) > counted {
            self.unpark_followers();
        }
    }

    #[cold]
    #[inline(never)]
    fn unpark_followers(&self) {
        for slot in self.pending.lock().values() {
            if !slot.done.load(Ordering::Acquire) {
                if let Some(thread) = slot.waiter.lock().as_ref() {
                    thread.unpark();
                }
            }
        }
    }

    /// Reads and delivers frames until `mine` completes or `deadline`,
    /// spinning up to `spin` on an empty socket before each sleep.
    fn lead(&self, reader: &mut FrameReader, mine: &CallSlot, spin: Duration, deadline: Instant) {
        while !mine.done.load(Ordering::Acquire) {
            match self.conn.read_frame(reader, spin, Some(deadline)) {
                Ok(Some(frame)) => {
                    if let Err(reason) = self.deliver(frame) {
                        self.protocol_failed(&reason);
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.read_failed(e);
                    return;
                }
            }
        }
    }

    fn no_response(&self, method: Method) -> Status {
        Status::deadline_exceeded(format!("{method} to {} got no response before its deadline", self.conn.peer))
    }

    /// The server broke the protocol: the connection closes and every call
    /// on it fails.
    fn protocol_failed(&self, reason: &str) -> Status {
        tracing::warn!("closing connection to {}: {reason}", self.conn.peer);
        let status = Status::unavailable(format!("connection to {} closed: {reason}", self.conn.peer));
        self.fail_all(status.clone());
        status
    }

    /// Reading failed: the connection is gone and every call on it fails.
    fn read_failed(&self, error: NetError) -> Status {
        if !matches!(error, NetError::Closed { .. }) {
            tracing::warn!("closing connection: {error}");
        }
        let status = Status::unavailable(error.to_string());
        self.fail_all(status.clone());
        status
    }

    /// What a response or error frame answers; `None` for a push, served
    /// here. `Err` is a protocol violation.
    fn answer(&self, mut frame: ReceivedFrame) -> std::result::Result<Option<Result<Response>>, String> {
        let header = frame.header;
        if header.kind == FrameKind::Push {
            self.serve_push(frame)?;
            return Ok(None);
        }
        let answer = outcome(header.kind, header.method, frame.meta_bytes())?;
        Ok(Some(answer.map(|validated| {
            let payloads = frame.take_payloads();
            Response { body: ResponseBody::Frame(frame), validated, payloads }
        })))
    }

    /// Hands a frame to the call it answers (or serves a push).
    fn deliver(&self, frame: ReceivedFrame) -> std::result::Result<(), String> {
        let header = frame.header;
        let Some(result) = self.answer(frame)? else {
            return Ok(());
        };
        match self.pending.lock().remove(&header.request_id) {
            Some(slot) => slot.complete(result),
            None => tracing::debug!(
                "response {} from {} arrived after its caller gave up",
                header.request_id,
                self.conn.peer
            ),
        }
        Ok(())
    }
}

impl Inner {
    /// Hands a pushed frame to the inbound service, inline: whatever it
    /// starts (a step waiting for this tensor) runs on this thread.
    fn serve_push(&self, frame: ReceivedFrame) -> std::result::Result<(), String> {
        let Some(service) = self.inbound.as_ref().and_then(Weak::upgrade) else {
            return Err("unexpected Push frame: this client serves no pushes".into());
        };
        let method = Method::from_u16(frame.header.method)
            .ok_or_else(|| format!("push of unknown method {}", frame.header.method))?;
        let validated = message::validate_request(method, frame.meta_bytes())
            .map_err(|status| format!("{method} push: {}", status.message))?;
        let request = Request::pushed(method, &self.push_origin, frame, validated);
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| service.handle(request, Reply::one_way())));
        if outcome.is_err() {
            tracing::error!("handler for {method} pushed by {} panicked", self.conn.peer);
        }
        Ok(())
    }
}

/// What a response or error frame (its kind, method and metadata)
/// answers: the response's metadata validated for its method, or the
/// error it carries. `Err` is a protocol violation.
#[inline]
fn outcome(kind: FrameKind, method: u16, meta: &[u8]) -> std::result::Result<Result<Validated>, String> {
    if kind != FrameKind::Response {
        return error_outcome(kind, meta);
    }
    let Some(known) = Method::from_u16(method) else {
        return Err(refused_response(format_args!("response for unknown method {method}")));
    };
    match message::validate_response(known, meta) {
        Ok(validated) => Ok(Ok(validated)),
        Err(status) => Err(refused_response(format_args!("{known} response: {}", status.message))),
    }
}

/// [`outcome`] of a frame that is not a response: an error frame's status,
/// or the protocol violation.
#[cold]
#[inline(never)]
fn error_outcome(kind: FrameKind, meta: &[u8]) -> std::result::Result<Result<Validated>, String> {
    match kind {
        FrameKind::Error => match message::view::<ErrorMeta>(meta) {
            Ok(err) => Ok(Err(Status::new(Code::from_u8(err.code), err.message.as_str()))),
            Err(status) => Err(format!("bad error frame: {status}")),
        },
        kind => Err(format!("unexpected {kind:?} frame from a server")),
    }
}

/// Why a response is a protocol violation, built off the hot path.
#[cold]
#[inline(never)]
fn refused_response(reason: std::fmt::Arguments<'_>) -> String {
    reason.to_string()
}

/// A request's frame: call `id` of `method`.
fn request_parts<'a>(method: Method, id: u64, meta: &'a [u8], payloads: &'a [Tensor]) -> FrameParts<'a> {
    FrameParts { kind: FrameKind::Request, method: method as u16, request_id: id, meta, payloads }
}

/// A request sent and not yet answered. Dropping it abandons the call (a
/// late response is discarded).
pub struct PendingCall {
    inner: Arc<Inner>,
    id: u64,
    method: Method,
    slot: Arc<CallSlot>,
}

impl PendingCall {
    pub fn method(&self) -> Method {
        self.method
    }

    /// Waits for the response until `deadline` (`DeadlineExceeded` after).
    pub fn wait(self, deadline: Instant) -> Result<Response> {
        self.wait_unless(deadline, &|| false)
    }

    /// Like [`wait`](Self::wait), but gives up (Cancelled) as soon as
    /// `abandoned` says so, checked at least every `ABANDON_POLL`: a step
    /// that failed elsewhere stops waiting for a part that may never answer
    /// (a frozen peer).
    pub fn wait_unless(self, deadline: Instant, abandoned: &dyn Fn() -> bool) -> Result<Response> {
        let inner = &self.inner;
        let slot = &self.slot;
        *slot.waiter.lock() = Some(std::thread::current());
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = WaitingGuard(&inner.waiting);
        let spin = inner.options.spin();
        loop {
            if slot.done.load(Ordering::Acquire) {
                return slot.result.lock().take().unwrap_or_else(|| Err(Status::internal("call completed twice")));
            }
            let now = Instant::now();
            let gave_up = abandoned();
            if now >= deadline || gave_up {
                inner.pending.lock().remove(&self.id);
                // It may have completed between the check and the removal.
                if let Some(result) = slot.result.lock().take() {
                    return result;
                }
                if gave_up {
                    return Err(Status::cancelled(format!(
                        "{} to {} abandoned: its step ended elsewhere",
                        self.method, inner.conn.peer
                    )));
                }
                return Err(inner.no_response(self.method));
            }
            let slice = deadline.min(now + ABANDON_POLL);
            if let Some(mut leader) = inner.reader.try_lock() {
                inner.lead(&mut leader.reader, slot, spin, slice);
                drop(leader);
                inner.wake_followers(1);
                continue;
            }
            // Follower: spin briefly (the leader may deliver our response or
            // step down), then sleep until unparked or the slice ends.
            let spin_until = now + spin;
            let spin_start = now;
            while Instant::now() < spin_until && !slot.done.load(Ordering::Acquire) && inner.reader.is_locked() {
                crate::net::io::spin_pause(spin_start);
            }
            if !slot.done.load(Ordering::Acquire) && inner.reader.is_locked() {
                let left = slice.saturating_duration_since(Instant::now());
                std::thread::park_timeout(left.min(FOLLOWER_PARK_SLICE));
            }
        }
    }
}

/// Lowers `Inner::waiting` when a wait ends, however it ends.
struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if !self.slot.done.load(Ordering::Acquire) {
            self.inner.pending.lock().remove(&self.id);
        }
    }
}

/// Raw descriptor, for tests that break connections on purpose.
#[cfg(test)]
impl Client {
    #[allow(dead_code)]
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.inner.conn.fd()
    }
}

const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Client>();
    is_send_sync::<PendingCall>();
    is_send_sync::<Response>();
};
