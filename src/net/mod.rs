//! The network transport under the master and workers: rkyv frames read in
//! place, tensors received into the buffers they are used from, io_uring
//! sockets with a plain-socket fallback speaking the same bytes.
//!
//! Owns: the wire format ([`frame`], [`reader`]), the message types
//! ([`message`]), the byte movers ([`io`]), request/response ([`rpc`]) and
//! the transport benchmarks ([`bench`](mod@bench)). Must not know graphs, ops or
//! executors: `message` names `GraphSpec` as a field type, nothing more.
//!
//! Layers, bottom up: `io` moves bytes; `frame`/`reader` turn bytes into
//! frames without I/O (fuzzed); `rpc` pairs requests with responses. The
//! README beside this file has the wire format, where received bytes go,
//! and why the client's leader/follower reading never strands a waiter.
//!
//! ```
//! use ringflow::net::message::{self, PayloadList, RecvTensorRequest, RecvTensorResponse};
//! use ringflow::net::{Client, Method, Reply, Request, Server, Service, TransportOptions};
//! use ringflow::Tensor;
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//!
//! struct Producer;
//! impl Service for Producer {
//!     fn handle(&self, request: Request, reply: Reply) {
//!         // Cheap: answered inline on the transport thread.
//!         let key = match request.meta::<RecvTensorRequest>() {
//!             Ok(req) => req.rendezvous_key.to_string(),
//!             Err(status) => return reply.err(status),
//!         };
//!         let t = Tensor::from_slice::<f32>([2], &[1.0, key.len() as f32]).unwrap();
//!         let mut payloads = PayloadList::new();
//!         let resp = RecvTensorResponse { tensor: payloads.add(&t) };
//!         match message::encode(&resp) {
//!             Ok(meta) => reply.ok(&meta, payloads.tensors()),
//!             Err(status) => reply.err(status),
//!         }
//!     }
//! }
//!
//! let server = Server::bind("127.0.0.1:0", Arc::new(Producer), TransportOptions::default())?;
//! let client = Client::connect(&server.local_addr().to_string(), TransportOptions::default())?;
//! let request = RecvTensorRequest { step_id: 1, rendezvous_key: "k".into() };
//! let deadline = Instant::now() + Duration::from_secs(5);
//! let response = client.call(Method::RecvTensor, &message::encode(&request)?, &[], deadline)?;
//! let tensor = response.meta::<RecvTensorResponse>()?.tensor.resolve(&response.payloads)?;
//! assert_eq!(tensor.as_slice::<f32>()?, &[1.0, 1.0]);
//! server.shutdown();
//! # Ok::<(), ringflow::Status>(())
//! ```

pub mod bench;
pub mod frame;
pub mod io;
pub mod message;
pub mod reader;
pub mod rpc;
pub mod shm;

pub use frame::{FrameError, FrameKind, FrameLimits, ReceivedFrame};
pub use io::TransportKind;
pub use message::{Method, TensorRef};
pub use rpc::{
    BackChannel, ChannelCache, Client, ClusterSecret, Http2Handoff, PendingCall, Reply, Request, Response,
    SMALL_META_BYTES, SecretSetting, Server, Service, SmallCall, SmallReply, TransportOptions,
};
