//! The network transport under the master and workers: rkyv frames read in
//! place, tensors received into the buffers they are used from, io_uring
//! sockets with a plain-socket fallback speaking the same bytes.
//!
//! Owns: the wire format ([`frame`], [`reader`]), the message types
//! ([`message`]), the byte movers ([`io`]), request/response ([`rpc`]) and
//! the transport benchmarks ([`bench`]). Must not know graphs, ops or
//! executors: `message` names `GraphSpec` as a field type, nothing more.
//!
//! Layers, bottom up: `io` moves bytes; `frame`/`reader` turn bytes into
//! frames without I/O (fuzzed); `rpc` pairs requests with responses.

pub mod bench;
pub mod frame;
pub mod io;
pub mod message;
pub mod reader;
pub mod rpc;

pub use frame::{FrameError, FrameKind, FrameLimits, ReceivedFrame};
pub use io::TransportKind;
pub use message::{Method, TensorRef};
pub use rpc::{
    ChannelCache, Client, PendingCall, Reply, Request, Response, Server, Service, TransportOptions,
};
