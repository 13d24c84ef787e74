//! [`Server`]: accepts connections and hands each request to a [`Service`]
//! on the connection's transport thread, with a [`Reply`] that any thread
//! may complete later.
//!
//! Owns: the listener, one transport thread per connection (each spins then
//! sleeps on its own socket, so a request on an idle connection is seen
//! without a wake-up while the spin lasts), and shutdown. Must not know what
//! a method does.
//!
//! Threads: `acceptor` (blocking accept) and one `conn` thread per peer.
//! `shutdown` stops the acceptor by shutting the listening socket, then
//! shuts every connection's socket (its pending receive ends), and joins
//! all of them. A malformed frame closes only its own connection.

use super::TransportOptions;
use super::conn::{Conn, Incoming, NetError};
use super::origin::{Origin, OriginRef, ServingScope};
use crate::error::{Result, Status};
use crate::net::frame::{FrameKind, FrameParts, ReceivedFrame};
use crate::net::io::{self, Driver};
use crate::net::message::{self, Method, OneWay, Validated};
use crate::net::reader::FrameReader;
use crate::net::shm::{LineFrame, LineMeta};
use crate::tensor::Tensor;
use parking_lot::Mutex;
use rkyv::Archive;
use rkyv::api::high::HighValidator;
use rkyv::bytecheck::CheckBytes;
use rkyv::{Portable, rancor};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

/// What a server does with requests. `handle` runs on a transport thread:
/// it must not block. Cheap requests are answered inline (the fastest
/// path); long work moves elsewhere with the `Reply`.
pub trait Service: Send + Sync + 'static {
    fn handle(&self, request: Request, reply: Reply);

    /// Answers a small call where it lies, if this service can: one whose
    /// request carries no payloads and at most [`SMALL_META_BYTES`] of
    /// metadata, arriving where such a call crosses in one cache line (a
    /// shared-memory channel). No [`Request`] or [`Reply`] is built for
    /// it: the answer goes straight into the peer's ring from the serving
    /// thread. `None` (the default) hands the call to
    /// [`handle`](Self::handle) like any other. The server's rules hold
    /// as for `handle`: the metadata was validated for its method, a call
    /// past `max_in_flight` is refused before it gets here, and a panic
    /// answers `Internal`. Must not block.
    fn handle_small(&self, _call: &SmallCall<'_>) -> Option<SmallReply> {
        None
    }
}

/// The most metadata a small call's request (and its answer) carries:
/// what crosses a shared-memory channel in one cache line.
pub const SMALL_META_BYTES: usize = crate::net::shm::LINE_META_BYTES;

/// A small call, lent to [`Service::handle_small`] for the time it takes
/// to answer it.
pub struct SmallCall<'a> {
    method: Method,
    request_id: u64,
    meta: &'a LineMeta,
    validated: Validated,
    origin: &'a Origin,
}

impl SmallCall<'_> {
    pub fn method(&self) -> Method {
        self.method
    }
    pub fn request_id(&self) -> u64 {
        self.request_id
    }
    pub fn peer(&self) -> &str {
        &self.origin.peer
    }
    /// As [`Request::peer_name`].
    pub fn peer_name(&self) -> &Arc<str> {
        &self.origin.peer_name
    }
    pub fn meta_bytes(&self) -> &[u8] {
        self.meta.as_bytes()
    }
    /// As [`Request::meta`].
    pub fn meta<M: Archive>(&self) -> Result<&M::Archived>
    where
        M::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + 'static,
    {
        // SAFETY: `validated` came from validating these bytes, which are
        // a copy nobody writes.
        unsafe { message::view_validated::<M>(self.meta.as_bytes(), self.validated) }
    }
}

/// What [`Service::handle_small`] answers.
#[derive(Debug)]
pub enum SmallReply {
    /// The response's metadata (an encoded message, or a `Ping`'s bytes).
    Ok(LineMeta),
    Err(Status),
}

impl SmallReply {
    /// A response of `meta`, or `None` when it is longer than
    /// [`SMALL_META_BYTES`] (answer through [`Service::handle`] then).
    pub fn ok(meta: &[u8]) -> Option<SmallReply> {
        LineMeta::new(meta).map(SmallReply::Ok)
    }
}

/// Takes over connections that open with HTTP/2's preface (gRPC clients,
/// such as TensorFlow's): the server peeks at a new connection's first
/// byte, without consuming it, and hands such a socket over whole.
pub trait Http2Handoff: Send + Sync + 'static {
    fn take_over(&self, stream: std::net::TcpStream, peer: &str);
}

/// A received request: its metadata is read in place, its payloads are
/// tensors over the receive buffer.
pub struct Request {
    method: Method,
    origin: OriginRef,
    frame: ReceivedFrame,
    /// What `frame`'s metadata was checked as on arrival.
    validated: Validated,
    one_way: bool,
    /// Zero-copy views into the receive buffer, in frame order.
    pub payloads: Vec<Tensor>,
}

impl Request {
    /// A push that arrived on a client's connection, for the client's
    /// inbound [`Service`].
    pub(crate) fn pushed(
        method: Method,
        origin: &Arc<Origin>,
        mut frame: ReceivedFrame,
        validated: Validated,
    ) -> Request {
        let payloads = frame.take_payloads();
        Request { method, origin: OriginRef::new(origin), frame, validated, one_way: true, payloads }
    }
    pub fn method(&self) -> Method {
        self.method
    }
    pub fn peer(&self) -> &str {
        &self.origin.peer
    }
    /// Who the peer said it is in its hello: a server's task name
    /// (`/job:J/replica:R/task:T`), or whatever name a client chose.
    pub fn peer_name(&self) -> &Arc<str> {
        &self.origin.peer_name
    }
    /// Pushes to the peer over the connection this request came on (see
    /// [`BackChannel`]); `None` for a push a client received.
    pub fn back_channel(&self) -> Option<BackChannel> {
        let conn = self.origin.conn.as_ref()?;
        Some(BackChannel { conn: conn.clone(), peer_name: self.origin.peer_name.clone() })
    }
    /// Memory the answer to this request may carry tensors from without
    /// a copy (the client's shared-memory ring), if the connection has one.
    pub fn output_placement(&self) -> Option<crate::tensor::placement::SharedPlacement> {
        self.origin.conn.as_ref()?.output_placement()
    }
    pub fn request_id(&self) -> u64 {
        self.frame.header.request_id
    }
    pub fn is_one_way(&self) -> bool {
        self.one_way
    }
    pub fn meta_bytes(&self) -> &[u8] {
        self.frame.meta_bytes()
    }
    /// The archived metadata in place, validated (on arrival, when `M` is
    /// the type its method names; here otherwise).
    pub fn meta<M: Archive>(&self) -> Result<&M::Archived>
    where
        M::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + 'static,
    {
        // SAFETY: `validated` came from validating this frame's metadata when
        // it arrived; the frame is never replaced and a received frame's
        // bytes are never written again.
        unsafe { message::view_validated::<M>(self.frame.meta_bytes(), self.validated) }
    }
    /// The receive buffer the request lies in (for no-copy checks).
    pub fn frame(&self) -> &ReceivedFrame {
        &self.frame
    }
}

/// One-way frames from a server to the client at the other end of an
/// accepted connection. The client reads them only while it waits for a
/// response on that connection, so a push sent before the reply to a
/// request is always read (frames arrive in order), and one sent with no
/// request outstanding may wait until the client's next call. Sends never
/// wait on the peer (the reply path's outbox), so any thread may push.
#[derive(Clone)]
pub struct BackChannel {
    conn: Arc<Conn>,
    peer_name: Arc<str>,
}

impl BackChannel {
    /// The name the client gave in its hello.
    pub fn peer_name(&self) -> &Arc<str> {
        &self.peer_name
    }

    pub fn peer(&self) -> &str {
        &self.conn.peer
    }

    /// As [`Client::output_placement`](crate::net::rpc::Client::output_placement), for this connection.
    pub fn output_placement(&self) -> Option<crate::tensor::placement::SharedPlacement> {
        self.conn.output_placement()
    }

    /// Encodes and pushes a one-way message (see [`OneWay`]).
    pub fn push_msg<M>(&self, msg: &M, payloads: &[Tensor]) -> Result<()>
    where
        M: OneWay + message::Encode,
    {
        let meta = message::encode(msg)?;
        let parts =
            FrameParts { kind: FrameKind::Push, method: M::METHOD as u16, request_id: 0, meta: &meta, payloads };
        self.conn.reply(parts).map_err(|e| e.to_status())
    }
}

/// The answer to one request, sendable from any thread. Dropping it
/// unanswered sends an `Internal` error, so a caller never waits forever
/// on a forgotten request.
pub struct Reply {
    target: Option<ReplyTarget>,
}

struct ReplyTarget {
    /// A server's connection: `conn` is set.
    origin: OriginRef,
    request_id: u64,
    method: Method,
    /// The dispatch that handed this reply out (see `Origin::answered`).
    serial: u64,
}

impl Reply {
    pub(crate) fn one_way() -> Reply {
        Reply { target: None }
    }

    /// True for pushes: answering does nothing.
    pub fn is_one_way(&self) -> bool {
        self.target.is_none()
    }

    /// Sends the response: `meta` (an encoded message) and its payloads.
    /// Send failures mean the connection is gone; they are logged.
    pub fn ok(mut self, meta: &[u8], payloads: &[Tensor]) {
        let Some(target) = self.target.take() else {
            return;
        };
        send_response(target.conn(), target.method, target.request_id, meta, payloads);
        target.origin.answered(target.serial);
    }

    /// Sends an error response.
    pub fn err(mut self, status: Status) {
        if let Some(target) = self.target.take() {
            target.send_error(&status);
            target.origin.answered(target.serial);
        }
    }
}

impl ReplyTarget {
    fn conn(&self) -> &Arc<Conn> {
        self.origin.conn.as_ref().expect("replies go back over a server's connection")
    }

    fn send_error(&self, status: &Status) {
        send_error(self.conn(), self.method, self.request_id, status);
    }
}

/// Sends the response to request `request_id`. Send failures mean the
/// connection is gone; they are logged. A response the limits refuse is
/// answered `ResourceExhausted` instead.
fn send_response(conn: &Arc<Conn>, method: Method, request_id: u64, meta: &[u8], payloads: &[Tensor]) {
    let sent = conn.reply(FrameParts { kind: FrameKind::Response, method: method as u16, request_id, meta, payloads });
    match sent {
        Ok(()) => {}
        Err(NetError::Frame { source, .. }) => {
            let status = Status::resource_exhausted(format!("{method} response cannot be sent: {source}"));
            send_error(conn, method, request_id, &status);
        }
        Err(e) => tracing::debug!("reply to {method}: {e}"),
    }
}

fn send_error(conn: &Arc<Conn>, method: Method, request_id: u64, status: &Status) {
    if let Err(e) = conn.send_error(request_id, method as u16, status) {
        tracing::debug!("error reply to {method}: {e}");
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(target) = self.target.take() {
            target.send_error(&Status::internal(format!("{} request was dropped without a reply", target.method)));
            target.origin.answered(target.serial);
        }
    }
}

const _: () = {
    const fn is_send<T: Send>() {}
    // A reply may be completed from any thread; a request may be moved to
    // the thread that does the work.
    is_send::<Reply>();
    is_send::<Request>();
};

pub(super) struct Shared {
    service: Arc<dyn Service>,
    pub(super) options: TransportOptions,
    driver: Driver,
    pub(super) stopping: AtomicBool,
    next_conn_id: AtomicU64,
    pub(super) live: Mutex<HashMap<u64, Arc<Conn>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub(super) http2: std::sync::OnceLock<Arc<dyn Http2Handoff>>,
}

/// A listening server. Dropping it shuts it down.
pub struct Server {
    local_addr: SocketAddr,
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    pub fn bind(addr: &str, service: Arc<dyn Service>, options: TransportOptions) -> Result<Server> {
        let driver = io::select_driver(options.transport)
            .map_err(|e| Status::unavailable(format!("transport for server at {addr}: {e}")))?;
        let listener =
            TcpListener::bind(addr).map_err(|e| Status::unavailable(format!("cannot listen on {addr}: {e}")))?;
        let local_addr = listener.local_addr()?;
        let listener = Arc::new(listener);
        let shared = Arc::new(Shared {
            service,
            options,
            driver,
            stopping: AtomicBool::new(false),
            next_conn_id: AtomicU64::new(1),
            live: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            http2: std::sync::OnceLock::new(),
        });
        let acceptor = {
            let listener = listener.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("rf-accept-{}", local_addr.port()))
                .spawn(move || accept_loop(&listener, &shared))
                .map_err(|e| Status::internal(format!("spawning acceptor: {e}")))?
        };
        tracing::debug!("server on {local_addr} ({})", driver.name());
        Ok(Server { local_addr, listener, shared, acceptor: Some(acceptor) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn driver(&self) -> Driver {
        self.shared.driver
    }

    /// Hands connections that open with HTTP/2's preface to `handoff` from
    /// now on (once; later calls are ignored). Without one, every
    /// connection is read as native and nothing is peeked.
    pub fn hand_http2_to(&self, handoff: Arc<dyn Http2Handoff>) {
        let _ = self.shared.http2.set(handoff);
    }

    /// Connections currently open.
    pub fn connections(&self) -> usize {
        self.shared.live.lock().len()
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::Release);
        // SAFETY: shutdown(2) on a descriptor we own (kept open by `listener`);
        // it makes the blocked accept return.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        let _ = acceptor.join();
        for conn in self.shared.live.lock().values() {
            conn.close();
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    super::greeter::run(listener, shared, |stream, peer, hello| spawn_connection(shared, stream, peer, hello));
}

/// Gives a connection that finished its handshake a thread of its own.
fn spawn_connection(shared: &Arc<Shared>, stream: std::net::TcpStream, peer: String, hello: message::Hello) {
    if let Err(e) = stream.set_nonblocking(false) {
        tracing::warn!("connection from {peer}: {e}");
        return;
    }
    tracing::debug!("connection from {peer} ({}, incarnation {:#x})", hello.name, hello.incarnation);
    let conn = Arc::new(Conn::new(stream, shared.driver, peer.clone(), &shared.options));
    let id = shared.next_conn_id.fetch_add(1, Ordering::Relaxed);
    shared.live.lock().insert(id, conn.clone());
    let thread_shared = shared.clone();
    let peer_name: Arc<str> = Arc::from(hello.name.as_str());
    let spawned = std::thread::Builder::new().name(format!("rf-conn-{id}")).spawn(move || {
        serve_connection(&conn, &thread_shared, peer_name);
        conn.close();
        thread_shared.live.lock().remove(&id);
    });
    let mut threads = shared.threads.lock();
    threads.retain(|t| !t.is_finished());
    match spawned {
        Ok(handle) => threads.push(handle),
        Err(e) => {
            tracing::warn!("spawning a thread for {peer}: {e}");
            shared.live.lock().remove(&id);
        }
    }
}

fn serve_connection(conn: &Arc<Conn>, shared: &Shared, peer_name: Arc<str>) {
    let options = &shared.options;
    let mut reader = match FrameReader::new(conn.limits, options.recv_chunk_bytes, options.recv_region.clone()) {
        Ok(reader) => reader,
        Err(e) => {
            tracing::warn!("connection from {}: {e}", conn.peer);
            return;
        }
    };
    let origin = Arc::new(Origin::new(Arc::from(conn.peer.as_str()), peer_name, Some(conn.clone())));
    let scope = ServingScope::enter(origin);
    let mut first_frame = true;
    loop {
        let frame = match conn.read_incoming(&mut reader, conn.spin, None) {
            Ok(Some(Incoming::Frame(frame))) => frame,
            Ok(Some(Incoming::Line(line))) => {
                // Lines come only once shared memory was negotiated, so
                // never as the first frame.
                first_frame = false;
                if let Err(reason) = dispatch_line(conn, shared, &scope, line) {
                    tracing::warn!("closing connection from {}: {reason}", conn.peer);
                    return;
                }
                continue;
            }
            Ok(None) => continue,
            Err(NetError::Closed { .. }) => {
                tracing::debug!("connection from {} closed", conn.peer);
                return;
            }
            Err(e) => {
                if !shared.stopping.load(Ordering::Acquire) {
                    tracing::warn!("closing connection: {e}");
                }
                return;
            }
        };
        if std::mem::take(&mut first_frame) && crate::net::shm::is_control(frame.header.kind) {
            let deadline = std::time::Instant::now() + options.connect_timeout();
            let mut control = conn.control(&mut reader);
            match crate::net::shm::answer_offer(&mut control, frame.meta_bytes(), &options.shm, conn.limits, deadline) {
                Ok(Some(channel)) => conn.attach_shm(channel),
                Ok(None) => {}
                Err(reason) => {
                    tracing::warn!("closing connection from {}: transport negotiation: {reason}", conn.peer);
                    return;
                }
            }
            continue;
        }
        if let Err(reason) = dispatch(conn, shared, &scope, frame) {
            tracing::warn!("closing connection from {}: {reason}", conn.peer);
            return;
        }
    }
}

/// What a request frame was checked to be before its handler sees it.
struct Checked {
    method: Method,
    one_way: bool,
    validated: Validated,
}

/// Checks a frame from a client: a request or a push, of a known method,
/// whose metadata validates as that method's. `Ok(None)`: an unknown
/// method, answered (or, for a push, dropped) here. `Err` is a protocol
/// violation that closes the connection.
#[inline]
fn check_request(
    conn: &Arc<Conn>,
    origin: &Origin,
    kind: FrameKind,
    method: u16,
    request_id: u64,
    meta: &[u8],
) -> std::result::Result<Option<Checked>, String> {
    let one_way = match kind {
        FrameKind::Request => false,
        FrameKind::Push => true,
        kind => return Err(unexpected_kind(kind)),
    };
    let Some(known) = Method::from_u16(method) else {
        unknown_method(conn, origin, one_way, method, request_id);
        return Ok(None);
    };
    // Every archive is checked before a handler reads it; a corrupted one
    // means a broken or hostile peer.
    match message::validate_request(known, meta) {
        Ok(validated) => Ok(Some(Checked { method: known, one_way, validated })),
        Err(status) => Err(refuse_invalid(conn, one_way, known, request_id, &status)),
    }
}

#[cold]
#[inline(never)]
fn unexpected_kind(kind: FrameKind) -> String {
    format!("unexpected {kind:?} frame from a client")
}

#[cold]
#[inline(never)]
fn unknown_method(conn: &Arc<Conn>, origin: &Origin, one_way: bool, method: u16, request_id: u64) {
    if !one_way {
        let status = Status::unimplemented(format!("unknown method number {method}"));
        let _ = conn.send_error(request_id, method, &status);
    } else {
        tracing::warn!("dropping push of unknown method {method} from {}", origin.peer);
    }
}

#[cold]
#[inline(never)]
fn refuse_invalid(conn: &Arc<Conn>, one_way: bool, known: Method, request_id: u64, status: &Status) -> String {
    if !one_way {
        let _ = conn.send_error(request_id, known as u16, status);
    }
    format!("{known} request {request_id}: {}", status.message)
}

/// A request refused for the peer's in-flight count, when it is at
/// `max_in_flight`.
fn over_in_flight(origin: &Origin, shared: &Shared) -> Option<Status> {
    let outstanding = origin.in_flight();
    (outstanding >= shared.options.max_in_flight).then(|| {
        Status::resource_exhausted(format!("{outstanding} requests in flight from {} (max_in_flight)", origin.peer))
    })
}

/// Hands one frame to the service. `Err` is a protocol violation that
/// closes the connection.
fn dispatch(
    conn: &Arc<Conn>,
    shared: &Shared,
    scope: &ServingScope,
    frame: ReceivedFrame,
) -> std::result::Result<(), String> {
    let header = frame.header;
    let checked =
        check_request(conn, scope.origin(), header.kind, header.method, header.request_id, frame.meta_bytes())?;
    match checked {
        Some(checked) => {
            dispatch_checked(shared, scope, checked, frame);
            Ok(())
        }
        None => Ok(()),
    }
}

/// The small-call lane: a line frame's request is offered to
/// [`Service::handle_small`] on the spot and answered from the serving
/// thread, with no frame, `Request` or `Reply` built; anything else
/// (a push, a call the service declines) goes on as a frame.
fn dispatch_line(
    conn: &Arc<Conn>,
    shared: &Shared,
    scope: &ServingScope,
    line: LineFrame,
) -> std::result::Result<(), String> {
    let origin = scope.origin();
    let Some(checked) = check_request(conn, origin, line.kind, line.method, line.request_id, line.meta_bytes())? else {
        return Ok(());
    };
    if !checked.one_way && over_in_flight(origin, shared).is_none() {
        let call = SmallCall {
            method: checked.method,
            request_id: line.request_id,
            meta: &line.meta,
            validated: checked.validated,
            origin,
        };
        let service = &shared.service;
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| service.handle_small(&call)));
        let method = checked.method;
        match &answer {
            Ok(None) => {}
            Ok(Some(SmallReply::Ok(meta))) => {
                if let Err(e) = conn.reply_line(method as u16, line.request_id, meta) {
                    tracing::debug!("reply to {method}: {e}");
                }
                return Ok(());
            }
            Ok(Some(SmallReply::Err(status))) => {
                send_error(conn, method, line.request_id, status);
                return Ok(());
            }
            Err(_) => {
                tracing::error!("small-call handler for {method} from {} panicked", origin.peer);
                let status = Status::internal(format!("{method} request failed: its handler panicked"));
                send_error(conn, method, line.request_id, &status);
                return Ok(());
            }
        }
    }
    let frame = conn.frame_of_line(line).map_err(|e| e.to_string())?;
    dispatch_checked(shared, scope, checked, frame);
    Ok(())
}

/// Runs a checked request's handler with its reply (or refuses it past
/// `max_in_flight`). A one-way request (a push) has nothing to answer, so
/// it never enters the serving scope's in-flight count: counted there, each
/// push would stay in flight for good, and a connection carrying one push a
/// step (a tensor sent across tasks) would refuse every request after
/// `max_in_flight` steps.
fn dispatch_checked(shared: &Shared, scope: &ServingScope, checked: Checked, mut frame: ReceivedFrame) {
    let Checked { method, one_way, validated } = checked;
    let origin = scope.origin();
    let request_id = frame.header.request_id;
    let payloads = frame.take_payloads();
    let run = |reply: Reply| {
        let request = Request { method, origin: OriginRef::new(origin), frame, validated, one_way, payloads };
        let service = &shared.service;
        // A panicking handler drops its Reply while unwinding (which
        // answers Internal); the connection keeps serving.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| service.handle(request, reply)));
        if outcome.is_err() {
            tracing::error!("handler for {method} from {} panicked", origin.peer);
        }
    };
    if one_way {
        run(Reply::one_way());
        return;
    }
    scope.dispatch(|serial| {
        let target = ReplyTarget { origin: OriginRef::new(origin), request_id, method, serial };
        let reply = Reply { target: Some(target) };
        match over_in_flight(origin, shared) {
            Some(status) => reply.err(status),
            None => run(reply),
        }
    });
}
