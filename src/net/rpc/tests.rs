//! RPC tests over real loopback sockets, for each available driver and
//! across drivers (one side io_uring, the other the socket fallback).

use super::*;
use crate::error::Code;
use crate::net::frame::{FrameKind, FrameLimits, HEADER_BYTES, OutgoingFrame};
use crate::net::io::{TransportKind, uring};
use crate::net::message::{self, Method, PayloadList, RecvTensorRequest, RecvTensorResponse};
use crate::tensor::{DType, Tensor};
use parking_lot::Mutex;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The transports under test: TCP over each driver, and (as `Auto`)
/// the shared-memory channel, whose socket uses the automatic driver.
fn kinds() -> Vec<TransportKind> {
    let mut kinds = tcp_kinds();
    kinds.push(TransportKind::Auto);
    kinds
}

fn tcp_kinds() -> Vec<TransportKind> {
    let mut kinds = vec![TransportKind::Socket];
    if uring::probe().is_ok() {
        kinds.push(TransportKind::Uring);
    }
    kinds
}

/// `Auto` offers and accepts shared memory; the TCP kinds never do.
fn options(kind: TransportKind) -> TransportOptions {
    let mut options = TransportOptions {
        transport: kind,
        spin_us: 5,
        recv_chunk_bytes: 16 << 10,
        connect_timeout_ms: 2_000,
        ..TransportOptions::default()
    };
    options.shm.enabled = kind == TransportKind::Auto;
    options.shm.ring_bytes = 8 << 20;
    options
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

/// Echoes meta and payloads (Ping); answers RecvTensor with a tensor;
/// stashes pushes; checks that request payloads lie in the receive buffer.
#[derive(Default)]
struct TestService {
    pushes: Mutex<Vec<(Method, Vec<Tensor>)>>,
    copies_seen: Mutex<usize>,
    held: Mutex<Vec<Reply>>,
    /// Hello names of the peers that asked for a push back.
    pushed_back_to: Mutex<Vec<String>>,
    /// Small calls answered by `handle_small`.
    small_answered: std::sync::atomic::AtomicUsize,
}

impl Service for TestService {
    fn handle(&self, request: Request, reply: Reply) {
        for t in &request.payloads {
            if !request.frame().buffer().contains(t.data_ptr()) {
                *self.copies_seen.lock() += 1;
            }
        }
        match request.method() {
            Method::Ping if request.meta_bytes() == b"hold" => self.held.lock().push(reply),
            Method::Ping if request.meta_bytes() == b"drop" => drop(reply),
            Method::Ping if request.meta_bytes() == b"push-back" => {
                // The request's tensors go back as pushes, ahead of the reply.
                let channel = request.back_channel().expect("a server's request has a back channel");
                self.pushed_back_to.lock().push(channel.peer_name().to_string());
                for (step_id, t) in request.payloads.iter().enumerate() {
                    let mut list = PayloadList::new();
                    let push = message::TensorPush {
                        session_handle: String::new(),
                        step_id: step_id as u64,
                        rendezvous_key: "back".into(),
                        tensor: list.add(t),
                        dead: false,
                    };
                    channel.push_msg(&push, list.tensors()).unwrap();
                }
                reply.ok(b"pushed", &[]);
            }
            Method::Ping if request.meta_bytes().starts_with(b"slow") => {
                let meta = request.meta_bytes().to_vec();
                let delay_us = u64::from(meta[4]) * 300;
                let payloads = request.payloads.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_micros(delay_us));
                    reply.ok(&meta, &payloads);
                });
            }
            Method::Ping => reply.ok(request.meta_bytes(), &request.payloads),
            Method::RecvTensor => {
                let req = request.meta::<RecvTensorRequest>().unwrap();
                let t = Tensor::from_slice::<i64>([2], &[req.step_id.to_native() as i64, 7]).unwrap();
                let mut list = PayloadList::new();
                let resp = RecvTensorResponse { tensor: list.add(&t) };
                reply.ok(&message::encode(&resp).unwrap(), list.tensors());
            }
            method if request.is_one_way() => {
                self.pushes.lock().push((method, request.payloads.clone()));
            }
            other => reply.err(crate::error::Status::unimplemented(format!("{other}"))),
        }
    }

    /// Answers `Ping`s whose metadata starts with `small`: `small-err`
    /// with an error, `small-panic` by panicking, any other by echoing
    /// it; everything else goes to `handle`.
    fn handle_small(&self, call: &SmallCall<'_>) -> Option<SmallReply> {
        let meta = call.meta_bytes();
        if call.method() != Method::Ping || !meta.starts_with(b"small") {
            return None;
        }
        self.small_answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match meta {
            b"small-err" => Some(SmallReply::Err(crate::error::Status::failed_precondition("small and wrong"))),
            b"small-panic" => panic!("a small handler that panics"),
            _ => SmallReply::ok(meta),
        }
    }
}

fn start(kind: TransportKind) -> (Server, Arc<TestService>) {
    let service = Arc::new(TestService::default());
    let server = Server::bind("127.0.0.1:0", service.clone(), options(kind)).unwrap();
    (server, service)
}

fn every_dtype_tensors() -> Vec<Tensor> {
    vec![
        Tensor::from_slice::<f32>([2, 2], &[1.5, -0.0, f32::INFINITY, 3.0]).unwrap(),
        Tensor::from_slice::<f64>([3], &[f64::MIN, f64::NAN, 1e-300]).unwrap(),
        Tensor::from_slice::<i32>([1, 1, 2], &[i32::MIN, i32::MAX]).unwrap(),
        Tensor::from_slice::<i64>([2], &[i64::MIN, 42]).unwrap(),
        Tensor::from_slice::<bool>([5], &[true, false, false, true, true]).unwrap(),
        Tensor::zeros(DType::I64, [0]).unwrap(),
        Tensor::zeros(DType::F32, [3, 0, 2]).unwrap(),
        Tensor::scalar(1.25f64),
        // Larger than the 16 KiB receive chunk: takes the large-frame path.
        Tensor::build::<f32>([300_000], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32 * 0.25)).unwrap(),
    ]
}

#[test]
fn tensors_of_every_dtype_round_trip_bit_exact_without_copies() {
    for server_kind in kinds() {
        for client_kind in kinds() {
            let (server, service) = start(server_kind);
            let client = Client::connect(&server.local_addr().to_string(), options(client_kind)).unwrap();
            let both_shm = server_kind == TransportKind::Auto && client_kind == TransportKind::Auto;
            assert_eq!(client.is_shared_memory(), both_shm, "{server_kind:?} server, {client_kind:?} client");
            let tensors = every_dtype_tensors();
            for _ in 0..3 {
                let resp = client.call(Method::Ping, b"echo", &tensors, soon()).unwrap();
                assert_eq!(resp.meta_bytes(), b"echo");
                assert_eq!(resp.payloads.len(), tensors.len());
                for (got, want) in resp.payloads.iter().zip(&tensors) {
                    assert!(got.bit_eq(want), "{server_kind:?}->{client_kind:?}: {got:?}");
                    assert!(got.is_borrowed());
                    assert!(
                        resp.frame().expect("a frame with payloads").buffer().contains(got.data_ptr()),
                        "response tensor was copied out of the receive buffer"
                    );
                }
            }
            assert_eq!(*service.copies_seen.lock(), 0, "request tensor outside its receive buffer");
            server.shutdown();
        }
    }
}

#[test]
fn typed_request_and_response_in_place() {
    for kind in kinds() {
        let (server, _) = start(kind);
        let client = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let req = RecvTensorRequest { step_id: 99, rendezvous_key: "a;1;b;x:0;0:0".into() };
        let resp = client.call_rpc(&req, &[], soon()).unwrap();
        let archived = resp.meta::<RecvTensorResponse>().unwrap();
        let t = archived.tensor.resolve(&resp.payloads).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap(), &[99, 7]);
        assert!(resp.frame().expect("a frame with payloads").buffer().contains(t.data_ptr()));
        // A method the service does not implement comes back as a Status.
        let err = client
            .call(Method::GetStatus, &message::encode(&message::GetStatusRequest::default()).unwrap(), &[], soon())
            .unwrap_err();
        assert_eq!(err.code, Code::Unimplemented);
    }
}

/// Runs `calls(client, t)` on six threads sharing one client of a fresh
/// server, for every transport.
fn on_six_threads(calls: fn(&Client, u8)) {
    for kind in kinds() {
        let (server, _) = start(kind);
        let client = Arc::new(Client::connect(&server.local_addr().to_string(), options(kind)).unwrap());
        let threads: Vec<_> = (0..6u8)
            .map(|t| {
                let client = client.clone();
                std::thread::spawn(move || calls(&client, t))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        server.shutdown();
    }
}

#[test]
fn many_concurrent_calls_on_one_connection_complete_out_of_order() {
    on_six_threads(|client, t| {
        // Overlapping calls from this thread too (start, then wait).
        for round in 0..8u8 {
            let pending: Vec<_> = (0..3u8)
                .map(|k| {
                    let delay = (t * 7 + round * 3 + k * 5) % 10;
                    let meta = [b's', b'l', b'o', b'w', delay, t, round, k];
                    let payload = Tensor::from_slice::<i32>([3], &[t as i32, round as i32, k as i32]).unwrap();
                    (meta, client.start_call(Method::Ping, &meta, &[payload]).unwrap())
                })
                .collect();
            for (meta, call) in pending.into_iter().rev() {
                let resp = call.wait(soon()).unwrap();
                assert_eq!(resp.meta_bytes(), &meta);
                assert_eq!(
                    resp.payloads[0].as_slice::<i32>().unwrap(),
                    &[meta[5] as i32, meta[6] as i32, meta[7] as i32]
                );
            }
        }
    });
}

/// Blocking calls (each leads the connection while nobody else reads)
/// and started calls (which register and may follow) mixed on one
/// connection: every caller gets its own answer, whoever read it.
#[test]
fn blocking_and_started_calls_mixed_on_one_connection_each_get_their_answer() {
    on_six_threads(|client, t| {
        for round in 0..12u8 {
            let delay = (t * 5 + round * 3) % 7;
            let meta = [b's', b'l', b'o', b'w', delay, t, round, 0];
            let payload = Tensor::from_slice::<i32>([2], &[t as i32, round as i32]).unwrap();
            let resp = match (t + round) % 3 {
                0 => client.start_call(Method::Ping, &meta, &[payload]).unwrap().wait(soon()),
                _ => client.call(Method::Ping, &meta, &[payload], soon()),
            }
            .unwrap();
            assert_eq!(resp.meta_bytes(), &meta, "thread {t} round {round}");
            assert_eq!(resp.payloads[0].as_slice::<i32>().unwrap(), &[t as i32, round as i32]);
        }
    });
}

#[test]
fn pushes_arrive_one_way() {
    for kind in kinds() {
        let (server, service) = start(kind);
        let client = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let t = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        push_tensor(&client, 1, "k", &t);
        // A call after the push on the same connection is answered after it.
        client.call(Method::Ping, b"x", &[], soon()).unwrap();
        let pushes = service.pushes.lock();
        assert_eq!(pushes.len(), 1);
        assert_eq!(pushes[0].0, Method::TensorPush);
        assert!(pushes[0].1[0].bit_eq(&t));
    }
}

/// A server refusing requests past `max_in_flight`, and a client of it.
fn start_with_max_in_flight(kind: TransportKind, max_in_flight: usize) -> (Server, Arc<TestService>, Client) {
    let service = Arc::new(TestService::default());
    let server_options = TransportOptions { max_in_flight, ..options(kind) };
    let server = Server::bind("127.0.0.1:0", service.clone(), server_options).unwrap();
    let client = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
    (server, service, client)
}

#[test]
fn pushes_never_count_in_flight_however_many_arrive() {
    for kind in kinds() {
        let (server, service, client) = start_with_max_in_flight(kind, 2);
        let t = Tensor::from_slice::<f32>([1], &[3.0]).unwrap();
        for step in 0..10 {
            push_tensor(&client, step, "k", &t);
            // A call after each push: refused if the pushes counted.
            let answer = client.call(Method::Ping, b"x", &[], soon());
            assert_eq!(answer.unwrap().meta_bytes(), b"x", "{kind:?}: after {} pushes", step + 1);
        }
        assert_eq!(service.pushes.lock().len(), 10, "{kind:?}");
        server.shutdown();
    }
}

#[test]
fn a_server_pushes_back_over_the_connection_a_request_came_on() {
    for (server_kind, client_kind) in kinds().into_iter().flat_map(|a| kinds().into_iter().map(move |b| (a, b))) {
        let (server, service) = start(server_kind);
        let inbound = Arc::new(TestService::default());
        let weak: std::sync::Weak<dyn Service> = Arc::downgrade(&(inbound.clone() as Arc<dyn Service>));
        let named = TransportOptions { name: "/job:worker/replica:0/task:0".into(), ..options(client_kind) };
        let client = Client::connect_serving(&server.local_addr().to_string(), named, Some(weak)).unwrap();
        let small = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        let large = every_dtype_tensors().pop().unwrap();
        let resp = client.call(Method::Ping, b"push-back", &[small.clone(), large.clone()], soon()).unwrap();
        assert_eq!(resp.meta_bytes(), b"pushed");
        // Both pushes were read and served before the reply completed the call.
        let pushes = inbound.pushes.lock();
        assert_eq!(pushes.len(), 2, "{server_kind:?} -> {client_kind:?}");
        assert!(pushes.iter().all(|(m, _)| *m == Method::TensorPush));
        assert!(pushes[0].1[0].bit_eq(&small) && pushes[1].1[0].bit_eq(&large));
        assert_eq!(*service.pushed_back_to.lock(), vec!["/job:worker/replica:0/task:0".to_string()]);
        // The connection keeps working both ways.
        client.call(Method::Ping, b"x", &[], soon()).unwrap();
        assert_eq!(server.connections(), 1);
    }
}

#[test]
fn a_push_to_a_client_that_serves_none_closes_only_that_connection() {
    for kind in kinds() {
        let (server, _service) = start(kind);
        let addr = server.local_addr().to_string();
        let deaf = Client::connect(&addr, options(kind)).unwrap();
        let t = Tensor::scalar(1.0f32);
        let err = deaf.call(Method::Ping, b"push-back", &[t], soon()).unwrap_err();
        assert_eq!(err.code, Code::Unavailable, "{err}");
        assert!(err.message.contains("unexpected Push frame"), "{err}");
        assert!(deaf.is_dead());
        let other = Client::connect(&addr, options(kind)).unwrap();
        other.call(Method::Ping, b"x", &[], soon()).unwrap();
    }
}

#[test]
fn deadlines_dropped_replies_and_dead_connections_fail_promptly() {
    for kind in kinds() {
        let (server, service) = start(kind);
        let addr = server.local_addr().to_string();
        let client = Arc::new(Client::connect(&addr, options(kind)).unwrap());
        let err = client.call(Method::Ping, b"hold", &[], Instant::now() + Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.code, Code::DeadlineExceeded, "{err}");
        let err = client.call(Method::Ping, b"drop", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::Internal, "{err}");
        assert!(err.message.contains("without a reply"), "{err}");
        // Calls waiting on a server that goes away fail with Unavailable
        // naming the peer.
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let client = client.clone();
                std::thread::spawn(move || client.call(Method::Ping, b"hold", &[], soon()))
            })
            .collect();
        while service.held.lock().len() < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let started = Instant::now();
        server.shutdown();
        for w in waiters {
            let err = w.join().unwrap().unwrap_err();
            assert_eq!(err.code, Code::Unavailable, "{err}");
            assert!(err.message.contains(&addr), "{err}");
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(client.is_dead());
        let err = client.call(Method::Ping, b"x", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::Unavailable);
    }
}

#[test]
fn channel_cache_reconnects_after_the_connection_dies() {
    let kind = TransportKind::Socket;
    let (server, _) = start(kind);
    let addr = server.local_addr().to_string();
    let cache = ChannelCache::new(options(kind));
    let first = cache.get(&addr).unwrap();
    assert!(Arc::ptr_eq(&first, &cache.get(&addr).unwrap()));
    first.call(Method::Ping, b"a", &[], soon()).unwrap();
    server.shutdown();
    let service = Arc::new(TestService::default());
    let again = Server::bind(&addr, service, options(kind)).unwrap();
    let second = cache.get(&addr).unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    second.call(Method::Ping, b"b", &[], soon()).unwrap();
    again.shutdown();
}

/// A raw TCP connection to `server` that has said a valid hello and read
/// the server's.
fn raw_after_hello(server: &Server) -> TcpStream {
    let mut raw = TcpStream::connect(server.local_addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let hello = message::encode(&message::Hello {
        protocol_version: crate::net::frame::PROTOCOL_VERSION,
        ..Default::default()
    })
    .unwrap();
    let hello = OutgoingFrame::new(FrameKind::Hello, 0, 0, &hello, &[], &FrameLimits::default()).unwrap();
    raw.write_all(&hello.to_vec()).unwrap();
    let theirs = read_raw_frame(&mut raw);
    assert_eq!(theirs.header.kind, FrameKind::Hello);
    raw
}

/// The next whole frame on a raw connection.
fn read_raw_frame(raw: &mut TcpStream) -> crate::net::frame::ReceivedFrame {
    let limits = FrameLimits::default();
    let mut bytes = vec![0u8; HEADER_BYTES];
    raw.read_exact(&mut bytes).unwrap();
    let header = crate::net::frame::FrameHeader::decode(&bytes, &limits).unwrap();
    bytes.resize(HEADER_BYTES + usize::try_from(header.body_len).unwrap(), 0);
    raw.read_exact(&mut bytes[HEADER_BYTES..]).unwrap();
    crate::net::frame::decode_frame(&bytes, &limits).unwrap()
}

/// Sends `bytes` on a raw connection (after a valid hello) and checks the
/// server closes it, while a well-behaved client keeps being served.
fn assert_rejected(what: &str, server: &Server, good: &Client, bytes: &[u8], close_after_send: bool) {
    let mut raw = raw_after_hello(server);
    let _ = raw.write_all(bytes);
    if close_after_send {
        let _ = raw.shutdown(std::net::Shutdown::Write);
    }
    // Drain until the server closes (an error frame may come first).
    let mut sink = Vec::new();
    let closed = raw.read_to_end(&mut sink).is_ok();
    assert!(closed, "{what}: server did not close the connection");
    good.call(Method::Ping, b"still serving", &[], soon())
        .unwrap_or_else(|e| panic!("{what}: good client not served: {e}"));
}

#[test]
fn malformed_frames_close_only_their_connection() {
    for kind in kinds() {
        let (server, _) = start(kind);
        let good = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let limits = FrameLimits::default();
        let valid = OutgoingFrame::new(
            FrameKind::Request,
            Method::Ping as u16,
            1,
            b"ok",
            &[Tensor::from_slice::<i32>([2], &[1, 2]).unwrap()],
            &limits,
        )
        .unwrap()
        .to_vec();
        // Wrong magic.
        let mut bad = valid.clone();
        bad[..4].copy_from_slice(b"HTTP");
        assert_rejected("wrong magic", &server, &good, &bad, false);
        // Truncated frame, then end of stream.
        assert_rejected("truncated", &server, &good, &valid[..valid.len() - 10], true);
        // Lengths past the buffer/limit: an 8 TiB body.
        let mut bad = valid.clone();
        bad[48..56].copy_from_slice(&(8u64 << 40).to_le_bytes());
        assert_rejected("8 TiB body", &server, &good, &bad, false);
        // Lengths that do not add up.
        let mut bad = valid.clone();
        bad[24..32].copy_from_slice(&100u64.to_le_bytes());
        assert_rejected("inconsistent lengths", &server, &good, &bad, false);
        // Corrupted archive inside a well-formed frame.
        let req = message::encode(&RecvTensorRequest { step_id: 1, rendezvous_key: "key".repeat(10) }).unwrap();
        let mut meta = req.to_vec();
        // The root (step_id, rendezvous_key) is at the end; point the key's
        // relative offset far outside the archive.
        let n = meta.len();
        meta[n - 4..n].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
        let bad =
            OutgoingFrame::new(FrameKind::Request, Method::RecvTensor as u16, 2, &meta, &[], &limits).unwrap().to_vec();
        assert_rejected("corrupted archive", &server, &good, &bad, false);
        // A payload table that lies about the payload.
        let mut bad = valid.clone();
        bad[HEADER_BYTES + 8] = 99; // dtype code
        assert_rejected("bad payload table", &server, &good, &bad, false);
        // A client frame kind a server never accepts.
        let mut bad = valid.clone();
        bad[6] = FrameKind::Response as u8;
        assert_rejected("response kind", &server, &good, &bad, false);
        // Oversized under a small configured cap.
        let small = Server::bind(
            "127.0.0.1:0",
            Arc::new(TestService::default()),
            TransportOptions { max_frame_bytes: 4096, ..options(kind) },
        )
        .unwrap();
        let small_good = Client::connect(&small.local_addr().to_string(), options(kind)).unwrap();
        let big = OutgoingFrame::new(
            FrameKind::Request,
            Method::Ping as u16,
            3,
            b"",
            &[Tensor::zeros(DType::F32, [2048]).unwrap()],
            &limits,
        )
        .unwrap()
        .to_vec();
        assert_rejected("oversized", &small, &small_good, &big, false);
        // A client refuses to send a frame over its own cap, and stays usable.
        let capped = Client::connect(
            &server.local_addr().to_string(),
            TransportOptions { max_frame_bytes: 1024, ..options(kind) },
        )
        .unwrap();
        let err = capped.call(Method::Ping, b"", &[Tensor::zeros(DType::F32, [2048]).unwrap()], soon()).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument, "{err}");
        capped.call(Method::Ping, b"small", &[], soon()).unwrap();
        small.shutdown();
        server.shutdown();
    }
}

#[test]
fn a_request_of_an_unknown_method_is_refused_and_its_connection_serves_on() {
    let (server, _) = start(TransportKind::Socket);
    let mut raw = raw_after_hello(&server);
    let limits = FrameLimits::default();
    let unknown = (0..=u16::MAX).find(|&n| Method::from_u16(n).is_none()).unwrap();
    let frame =
        |kind, method, id, meta: &[u8]| OutgoingFrame::new(kind, method, id, meta, &[], &limits).unwrap().to_vec();
    // A push of it is dropped unanswered; a request of it is answered.
    raw.write_all(&frame(FrameKind::Push, unknown, 6, b"x")).unwrap();
    raw.write_all(&frame(FrameKind::Request, unknown, 7, b"x")).unwrap();
    let refused = read_raw_frame(&mut raw);
    assert_eq!((refused.header.kind, refused.header.request_id), (FrameKind::Error, 7));
    let error = message::view::<message::ErrorMeta>(refused.meta_bytes()).unwrap();
    assert_eq!(Code::from_u8(error.code), Code::Unimplemented);
    assert!(error.message.as_str().contains(&format!("unknown method number {unknown}")), "{}", error.message.as_str());
    raw.write_all(&frame(FrameKind::Request, Method::Ping as u16, 8, b"after")).unwrap();
    let answer = read_raw_frame(&mut raw);
    assert_eq!((answer.header.kind, answer.header.request_id), (FrameKind::Response, 8));
    assert_eq!(answer.meta_bytes(), b"after");
    server.shutdown();
}

#[test]
fn a_client_that_never_says_hello_is_dropped() {
    let (server, _) = start(TransportKind::Socket);
    let mut raw = TcpStream::connect(server.local_addr()).unwrap();
    raw.write_all(&[0u8; 64]).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = Vec::new();
    assert!(raw.read_to_end(&mut sink).is_ok());
    assert!(sink.is_empty(), "no hello is sent to a peer that failed its own");
    let _ = mpsc::channel::<()>();
    server.shutdown();
}

#[test]
fn frames_received_into_a_registered_region() {
    use crate::alloc::{LockPolicy, Region, RegionOptions};
    // Registered regions are where the socket path receives.
    for kind in tcp_kinds() {
        let region =
            Region::new(&RegionOptions { bytes: 8 * (16 << 10), slot_bytes: 16 << 10, lock: LockPolicy::IfAllowed })
                .unwrap();
        let (server, _) = start(kind);
        let client = Client::connect(
            &server.local_addr().to_string(),
            TransportOptions {
                recv_region: Some(region.clone()),
                // No spin: every receive goes through the ring (fixed reads).
                spin_us: 0,
                ..options(kind)
            },
        )
        .unwrap();
        let base = region.base_ptr() as usize;
        for round in 0..20i32 {
            let t = Tensor::from_slice::<i32>([4], &[round, 1, 2, 3]).unwrap();
            let resp = client.call(Method::Ping, b"r", std::slice::from_ref(&t), soon()).unwrap();
            let got = &resp.payloads[0];
            assert!(got.bit_eq(&t), "{kind:?}");
            let at = got.data_ptr() as usize;
            assert!((base..base + region.len()).contains(&at), "{kind:?}: not in the region");
        }
        server.shutdown();
    }
}

/// A peer that completes the hello and then never reads again.
fn deaf_server() -> (String, std::thread::JoinHandle<()>, mpsc::Sender<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut header = [0u8; HEADER_BYTES];
        stream.read_exact(&mut header).unwrap();
        let body_len = u64::from_le_bytes(header[48..56].try_into().unwrap()) as usize;
        let mut body = vec![0u8; body_len];
        stream.read_exact(&mut body).unwrap();
        let hello = message::encode(&message::Hello {
            protocol_version: crate::net::frame::PROTOCOL_VERSION,
            ..Default::default()
        })
        .unwrap();
        let hello = OutgoingFrame::new(FrameKind::Hello, 0, 0, &hello, &[], &FrameLimits::default()).unwrap();
        stream.write_all(&hello.to_vec()).unwrap();
        let _ = stop_rx.recv_timeout(Duration::from_secs(30));
        drop(stream);
    });
    (addr, handle, stop_tx)
}

#[test]
fn a_peer_that_stops_reading_cannot_hold_a_sender_past_its_deadline() {
    let big = Tensor::zeros(DType::F32, [16 << 20]).unwrap(); // 64 MiB
    // The deaf peer answers no shared-memory offer: TCP clients only.
    for kind in tcp_kinds() {
        let (addr, handle, stop) = deaf_server();
        let client = Client::connect(&addr, options(kind)).unwrap();
        let started = Instant::now();
        let err = client
            .call(Method::Ping, b"big", std::slice::from_ref(&big), Instant::now() + Duration::from_millis(300))
            .unwrap_err();
        assert_eq!(err.code, Code::DeadlineExceeded, "{kind:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(10), "{kind:?}: send hung");
        // The half-sent frame poisoned the stream: the connection is closed.
        assert!(client.is_dead());
        let err = client.call(Method::Ping, b"x", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::Unavailable);
        let _ = stop.send(());
        handle.join().unwrap();
    }
}

#[test]
fn a_client_that_stops_reading_cannot_stall_the_server() {
    let big = Tensor::zeros(DType::F32, [16 << 20]).unwrap(); // 64 MiB echoed back
    for kind in kinds() {
        let service = Arc::new(TestService::default());
        let server =
            Server::bind("127.0.0.1:0", service, TransportOptions { send_timeout_ms: 300, ..options(kind) }).unwrap();
        // A client that sends one big echo request and never reads.
        let deaf = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let pending = deaf.start_call(Method::Ping, b"echo", std::slice::from_ref(&big)).unwrap();
        // Others are still served, and shutdown does not hang.
        let good = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        good.call(Method::Ping, b"fine", &[], soon()).unwrap();
        let started = Instant::now();
        server.shutdown();
        assert!(started.elapsed() < Duration::from_secs(10), "{kind:?}: shutdown hung");
        drop(pending);
    }
}

#[test]
fn large_requests_pipelined_on_one_connection_all_complete() {
    // Each echo is larger than the socket buffers both ways: the server's
    // replies queue for its writer instead of blocking its reader, so the
    // caller's later sends still drain.
    let big = Tensor::build::<i32>([2 << 20], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as i32)).unwrap(); // 8 MiB
    for kind in kinds() {
        let (server, _) = start(kind);
        let client = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let calls: Vec<_> = (0..4u8)
            .map(|i| client.start_call(Method::Ping, &[b'e', i], std::slice::from_ref(&big)).unwrap())
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            let resp = call.wait(soon()).unwrap();
            assert_eq!(resp.meta_bytes(), &[b'e', i as u8]);
            assert!(resp.payloads[0].bit_eq(&big), "{kind:?}");
        }
        server.shutdown();
    }
}

// ---------------------------------------------------------------------------
// The shared-memory channel's own cases (the tests above run over it too).

fn shm_options(ring_bytes: u64) -> TransportOptions {
    let mut options = options(TransportKind::Auto);
    options.shm.ring_bytes = ring_bytes;
    options
}

/// A server and a client connected over shared memory with rings of
/// `ring_bytes`.
fn shm_pair(ring_bytes: u64) -> (Arc<TestService>, Server, Client) {
    let service = Arc::new(TestService::default());
    let server = Server::bind("127.0.0.1:0", service.clone(), shm_options(ring_bytes)).unwrap();
    let client = Client::connect(&server.local_addr().to_string(), shm_options(ring_bytes)).unwrap();
    assert!(client.is_shared_memory());
    (service, server, client)
}

#[test]
fn large_tensors_cross_the_ring_in_place_both_ways() {
    let (service, server, client) = shm_pair(8 << 20);
    let big = Tensor::build::<f32>([1 << 20], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)).unwrap();
    for _ in 0..6 {
        let resp = client.call(Method::Ping, b"big", std::slice::from_ref(&big), soon()).unwrap();
        assert!(resp.payloads[0].bit_eq(&big));
        assert!(
            resp.frame().expect("a frame with payloads").buffer().is_lent(),
            "the response's payload is read where the server wrote it"
        );
    }
    assert_eq!(*service.copies_seen.lock(), 0, "requests' payloads lie in their frames' buffers");
    // Small frames are copied out, so a tensor kept for long holds no ring space.
    let small = Tensor::from_slice::<i32>([3], &[1, 2, 3]).unwrap();
    let resp = client.call(Method::Ping, b"small", std::slice::from_ref(&small), soon()).unwrap();
    assert!(!resp.frame().expect("a frame with payloads").buffer().is_lent());
    server.shutdown();
}

/// A client asking for rings of reserved huge pages gets shared memory
/// either way: on hugetlbfs where the host's pool holds the region, on
/// regular pages (after one log line) where it does not.
#[test]
fn rings_ask_for_reserved_huge_pages_and_use_regular_ones_without_them() {
    let pool_free = crate::net::shm::region::huge_pages_free_bytes();
    let server = Server::bind("127.0.0.1:0", Arc::new(TestService::default()), shm_options(8 << 20)).unwrap();
    let mut options = shm_options(8 << 20);
    options.shm.hugetlb = true;
    let client = Client::connect(&server.local_addr().to_string(), options).unwrap();
    assert!(client.is_shared_memory());
    let region_bytes = crate::net::shm::region::Layout::new(1024, 8 << 20).unwrap().total;
    match client.shm_on_hugetlb() {
        Some(true) => assert!(pool_free >= region_bytes, "on hugetlbfs with {pool_free} bytes free in the pool"),
        Some(false) => assert!(pool_free < region_bytes + (2 << 20), "regular pages with {pool_free} bytes free"),
        None => panic!("no shared-memory channel"),
    }
    let big = Tensor::build::<f32>([1 << 20], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)).unwrap();
    for _ in 0..3 {
        let resp = client.call(Method::Ping, b"big", std::slice::from_ref(&big), soon()).unwrap();
        assert!(resp.payloads[0].bit_eq(&big));
    }
    server.shutdown();
}

#[test]
fn frames_larger_than_the_ring_cross_the_socket_in_order() {
    let (server, _) =
        (Server::bind("127.0.0.1:0", Arc::new(TestService::default()), shm_options(64 << 10)).unwrap(), ());
    let client = Client::connect(&server.local_addr().to_string(), shm_options(64 << 10)).unwrap();
    assert!(client.is_shared_memory());
    let tensors: Vec<Tensor> = (0..12)
        .map(|i| {
            let n = if i % 3 == 0 { 100_000 } else { 1 + i * 700 };
            Tensor::build::<i32>([n], |s| s.iter_mut().enumerate().for_each(|(j, v)| *v = (i * 1000 + j) as i32))
                .unwrap()
        })
        .collect();
    // Pipelined: large (socket) and small (ring) frames interleave both ways.
    let pending: Vec<_> =
        tensors.iter().map(|t| client.start_call(Method::Ping, b"echo", std::slice::from_ref(t)).unwrap()).collect();
    for (call, want) in pending.into_iter().zip(&tensors) {
        let resp = call.wait(soon()).unwrap();
        assert!(resp.payloads[0].bit_eq(want));
    }
    server.shutdown();
}

#[test]
fn shared_memory_falls_back_to_tcp_when_it_cannot_be_set_up() {
    use crate::net::shm::ShmFault;
    let cases: [(&str, Option<ShmFault>, Option<ShmFault>, bool); 4] = [
        ("memfd unavailable", Some(ShmFault::Memfd), None, true),
        ("client's unix socket unavailable", Some(ShmFault::UnixSocket), None, true),
        ("server's unix socket unavailable", None, Some(ShmFault::UnixSocket), true),
        ("server forces TCP", None, None, false),
    ];
    for (what, client_fault, server_fault, server_enabled) in cases {
        let mut server_options = shm_options(1 << 20);
        server_options.shm.fault = server_fault;
        server_options.shm.enabled = server_enabled;
        let server = Server::bind("127.0.0.1:0", Arc::new(TestService::default()), server_options).unwrap();
        let mut client_options = shm_options(1 << 20);
        client_options.shm.fault = client_fault;
        let client = Client::connect(&server.local_addr().to_string(), client_options).unwrap();
        assert!(!client.is_shared_memory(), "{what}");
        let t = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        let resp = client.call(Method::Ping, b"x", std::slice::from_ref(&t), soon()).unwrap();
        assert!(resp.payloads[0].bit_eq(&t), "{what}");
        server.shutdown();
    }
}

#[test]
fn a_shared_memory_connection_ends_when_either_side_closes() {
    let (server, _) =
        (Server::bind("127.0.0.1:0", Arc::new(TestService::default()), shm_options(1 << 20)).unwrap(), ());
    let addr = server.local_addr().to_string();
    let client = Client::connect(&addr, shm_options(1 << 20)).unwrap();
    assert!(client.is_shared_memory());
    // A call waiting on a reply that never comes ends at the server's shutdown.
    let held = client.start_call(Method::Ping, b"hold", &[]).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let started = Instant::now();
    server.shutdown();
    let err = held.wait(soon()).unwrap_err();
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A server whose client went away closes that connection.
    let (server, _) =
        (Server::bind("127.0.0.1:0", Arc::new(TestService::default()), shm_options(1 << 20)).unwrap(), ());
    let client = Client::connect(&server.local_addr().to_string(), shm_options(1 << 20)).unwrap();
    client.call(Method::Ping, b"x", &[], soon()).unwrap();
    assert_eq!(server.connections(), 1);
    drop(client);
    let until = Instant::now() + Duration::from_secs(5);
    while server.connections() > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.connections(), 0);
    server.shutdown();
}

/// Pushes `t` as `TensorPush` `step_id` under `key`.
fn push_tensor(client: &Client, step_id: u64, key: &str, t: &Tensor) {
    let mut list = PayloadList::new();
    let push = message::TensorPush {
        session_handle: String::new(),
        step_id,
        rendezvous_key: key.into(),
        tensor: list.add(t),
        dead: false,
    };
    client.push_msg(&push, list.tensors()).unwrap();
}

#[test]
fn a_frame_that_cannot_fit_around_kept_spans_waits_once_and_later_ones_take_the_socket() {
    // The server keeps every pushed tensor: the 512 KiB ones are lent from
    // the 4 MiB ring until they fill three quarters of it less one (the
    // next would pass that share: copied out). Past them, no 2 MiB push
    // ever fits.
    let (service, server, client) = shm_pair(4 << 20);
    let (small, large) = (8, 8);
    let tensors: Vec<Tensor> = (0..small + large)
        .map(|i| Tensor::build::<f32>([if i < small { 128 << 10 } else { 512 << 10 }], |s| s.fill(i as f32)).unwrap())
        .collect();
    for (step_id, t) in tensors.iter().enumerate() {
        push_tensor(&client, step_id as u64, "keep", t);
        if step_id < small {
            // Handled (lent or copied out) before the next: eight of them
            // fill the ring unless the reader has copied some out, and a
            // reader slower than SPACE_WAIT would send one over the socket.
            client.call(Method::Ping, b"handled", &[], soon()).unwrap();
        }
    }
    // A call after the pushes: its answer means every push was handled.
    client.call(Method::Ping, b"after", &[], soon()).unwrap();
    let stats = client.shm_stats().unwrap();
    assert_eq!(stats.socket_frames, large as u64, "{stats:?}: the 2 MiB frames went over the socket");
    assert_eq!(stats.space_stalls, 1, "{stats:?}: only the first frame that found no room waited for it");
    assert_kept_in_order(&service, &tensors);
    server.shutdown();
}

/// The server kept every push, `sent` in order, each intact.
fn assert_kept_in_order(service: &TestService, sent: &[Tensor]) {
    let kept = service.pushes.lock();
    assert_eq!(kept.len(), sent.len());
    for (i, (_, got)) in kept.iter().enumerate() {
        assert!(got[0].bit_eq(&sent[i]), "push {i} arrived intact, in order, and stayed so");
    }
}

#[test]
fn a_reader_keeping_every_tensor_leaves_the_ring_flowing() {
    // The server keeps every pushed tensor, 200 of 64 KiB (three laps of
    // the 4 MiB ring): they stay lent from the ring up to three quarters of
    // it, the rest are copied out as they arrive, and every push goes
    // through the ring.
    let (service, server, client) = shm_pair(4 << 20);
    let pushes = 200;
    let tensors: Vec<Tensor> =
        (0..pushes).map(|i| Tensor::build::<f32>([16 << 10], |s| s.fill(i as f32)).unwrap()).collect();
    for (step_id, t) in tensors.iter().enumerate() {
        push_tensor(&client, step_id as u64, "keep every one", t);
        // Handled before the next: a reader that fell behind by more than
        // the ring's free quarter for SPACE_WAIT would see one over the
        // socket, whatever it lends.
        client.call(Method::Ping, b"handled", &[], soon()).unwrap();
    }
    let stats = client.shm_stats().unwrap();
    assert_eq!((stats.socket_frames, stats.space_stalls), (0, 0), "{stats:?}: every push went through the ring");
    assert_kept_in_order(&service, &tensors);
    server.shutdown();
}

#[test]
fn frames_go_around_a_span_the_reader_keeps_without_stalling() {
    // The server keeps the first pushed tensor (lent from the ring) and
    // lets every later one go: the later ones lap the 4 MiB ring five
    // times around the kept one, all through the ring.
    let (service, server, client) = shm_pair(4 << 20);
    let kept = Tensor::build::<f32>([128 << 10], |s| s.fill(-1.0)).unwrap();
    for step_id in 0..41u64 {
        let t = if step_id == 0 {
            kept.clone()
        } else {
            Tensor::build::<f32>([128 << 10], |s| s.fill(step_id as f32)).unwrap()
        };
        push_tensor(&client, step_id, "keep the first", &t);
        // Its answer means the push was handled.
        client.call(Method::Ping, b"after", &[], soon()).unwrap();
        let mut pushes = service.pushes.lock();
        assert!(pushes.last().unwrap().1[0].bit_eq(&t), "push {step_id} arrived intact");
        pushes.truncate(1);
    }
    let stats = client.shm_stats().unwrap();
    assert_eq!(
        (stats.socket_frames, stats.space_stalls),
        (0, 0),
        "{stats:?}: every frame went through the ring at once"
    );
    let pushes = service.pushes.lock();
    assert!(pushes[0].1[0].bit_eq(&kept), "the kept tensor was never overwritten");
    drop(pushes);
    server.shutdown();
}

#[test]
fn a_server_refuses_requests_past_max_in_flight_counting_only_those_answered_later() {
    for kind in kinds() {
        let (server, service, client) = start_with_max_in_flight(kind, 2);
        // Answered inline: never in flight, however many.
        for _ in 0..100 {
            client.call(Method::Ping, b"x", &[], soon()).unwrap();
        }
        let held: Vec<_> = (0..2).map(|_| client.start_call(Method::Ping, b"hold", &[]).unwrap()).collect();
        while service.held.lock().len() < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = client.call(Method::Ping, b"x", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted, "{kind:?}: {err}");
        assert!(err.message.contains("2 requests in flight"), "{kind:?}: {err}");
        // A small call, which the service would answer where it lies, too.
        let err = client.call(Method::Ping, b"small", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted, "{kind:?}: a small call past the limit: {err}");
        assert_eq!(service.small_answered.load(std::sync::atomic::Ordering::Relaxed), 0, "{kind:?}");
        // Answered from another thread: out of flight again.
        let replies: Vec<Reply> = std::mem::take(&mut *service.held.lock());
        std::thread::spawn(move || replies.into_iter().for_each(|r| r.ok(b"late", &[]))).join().unwrap();
        for call in held {
            assert_eq!(call.wait(soon()).unwrap().meta_bytes(), b"late");
        }
        let answer = client.call(Method::Ping, b"x", &[], soon()).unwrap();
        assert_eq!(answer.meta_bytes(), b"x", "{kind:?}");
        // One answered later by a thread of its own, one inline, in turn.
        for _ in 0..20 {
            assert_eq!(client.call(Method::Ping, b"slow\x01", &[], soon()).unwrap().meta_bytes(), b"slow\x01");
            assert_eq!(client.call(Method::Ping, b"y", &[], soon()).unwrap().meta_bytes(), b"y");
        }
        let held: Vec<_> = (0..2).map(|_| client.start_call(Method::Ping, b"hold", &[]).unwrap()).collect();
        while service.held.lock().len() < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = client.call(Method::Ping, b"x", &[], soon()).unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted, "{kind:?}: the count came back to zero: {err}");
        drop(service.held.lock().drain(..).collect::<Vec<_>>());
        for call in held {
            assert_eq!(call.wait(soon()).unwrap_err().code, Code::Internal);
        }
        server.shutdown();
    }
}

#[test]
fn small_calls_are_answered_where_they_lie_over_shared_memory_and_by_handle_otherwise() {
    use std::sync::atomic::Ordering::Relaxed;
    for kind in kinds() {
        let (server, service) = start(kind);
        let client = Client::connect(&server.local_addr().to_string(), options(kind)).unwrap();
        let lane = kind == TransportKind::Auto;
        assert_eq!(client.is_shared_memory(), lane);
        // Up to a line's worth of metadata takes the lane over shared
        // memory; over TCP the same call reaches `handle`, which echoes.
        let longest = [b"small".as_slice(), &[b'.'; SMALL_META_BYTES - 5]].concat();
        for meta in [b"small".as_slice(), b"small:abc", &longest] {
            let resp = client.call(Method::Ping, meta, &[], soon()).unwrap();
            assert_eq!(resp.meta_bytes(), meta, "{kind:?}");
            assert_eq!(resp.frame().is_none(), lane, "{kind:?}: a line's answer has no frame");
        }
        assert_eq!(service.small_answered.load(Relaxed), if lane { 3 } else { 0 }, "{kind:?}");
        // One byte more is not a small call: `handle` answers it.
        let too_long = [longest.as_slice(), b"."].concat();
        assert_eq!(client.call(Method::Ping, &too_long, &[], soon()).unwrap().meta_bytes(), too_long.as_slice());
        // Nor is one with a payload.
        let t = Tensor::from_slice::<f32>([1], &[4.0]).unwrap();
        let resp = client.call(Method::Ping, b"small", std::slice::from_ref(&t), soon()).unwrap();
        assert!(resp.payloads[0].bit_eq(&t));
        assert_eq!(service.small_answered.load(Relaxed), if lane { 3 } else { 0 }, "{kind:?}");
        // Declined by `handle_small`: answered by `handle`.
        assert_eq!(client.call(Method::Ping, b"x", &[], soon()).unwrap().meta_bytes(), b"x");
        let answer = client.call(Method::Ping, b"small-err", &[], soon());
        if lane {
            let err = answer.unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (Code::FailedPrecondition, "small and wrong"));
            // A panicking small handler answers Internal and the
            // connection serves on.
            let err = client.call(Method::Ping, b"small-panic", &[], soon()).unwrap_err();
            assert_eq!(err.code, Code::Internal, "{err}");
            assert!(err.message.contains("panicked"), "{err}");
            assert_eq!(client.call(Method::Ping, b"small:after", &[], soon()).unwrap().meta_bytes(), b"small:after");
        } else {
            assert_eq!(answer.unwrap().meta_bytes(), b"small-err", "`handle` echoes it");
        }
        // A small push still reaches `handle` (one-way: nothing to answer).
        let abort = message::AbortStep { session_handle: String::new(), step_id: 9, code: 1, message: String::new() };
        client.push_msg(&abort, &[]).unwrap();
        client.call(Method::Ping, b"x", &[], soon()).unwrap();
        assert_eq!(service.pushes.lock().last().map(|p| p.0), Some(Method::AbortStep), "{kind:?}");
        // Started calls (followers, answered through the pending table)
        // get their small answers too.
        let started: Vec<_> = (0..8u8)
            .map(|i| (i, client.start_call(Method::Ping, &[b's', b'm', b'a', b'l', b'l', i], &[]).unwrap()))
            .collect();
        for (i, call) in started {
            assert_eq!(call.wait(soon()).unwrap().meta_bytes(), &[b's', b'm', b'a', b'l', b'l', i]);
        }
        server.shutdown();
    }
}

#[test]
fn a_small_call_whose_metadata_fails_validation_closes_only_its_connection() {
    let (_service, server, _client) = shm_pair(8 << 20);
    let addr = server.local_addr().to_string();
    let bad = Client::connect(&addr, shm_options(8 << 20)).unwrap();
    assert!(bad.is_shared_memory());
    // Eight bytes are no archived GetStatusRequest.
    let err = bad.call(Method::GetStatus, &[0xff; 8], &[], soon()).unwrap_err();
    assert!(matches!(err.code, Code::InvalidArgument | Code::Unavailable), "{err}");
    let good = Client::connect(&addr, shm_options(8 << 20)).unwrap();
    assert_eq!(good.call(Method::Ping, b"small", &[], soon()).unwrap().meta_bytes(), b"small");
    server.shutdown();
}
