//! ringflow: a distributed dataflow-graph runtime on the design of
//! TensorFlow's distributed runtime, rebuilt for latency.
//!
//! The layers, bottom up (see ARCHITECTURE.md for a step's path):
//! - [`tensor`]: dtypes, shapes, shared aligned tensors, .npy I/O.
//! - [`graph`]: the graph model, GraphDef import, validate, prune, place,
//!   partition.
//! - [`ops`]: the op registry and kernels.
//! - [`alloc`]: the global allocator, aligned I/O buffers, registered regions.
//! - [`net`]: frames, messages, io_uring and socket transport, RPC.

pub mod alloc;
pub mod bench;
pub mod checkpoint;
pub mod cli;
pub mod cluster;
pub mod coarse_clock;
pub mod counters;
pub mod error;
pub mod executor;
pub mod graph;
pub mod grpc;
pub mod host;
pub mod master;
pub mod net;
pub mod ops;
pub mod server;
pub mod serving;
pub mod session;
pub mod tensor;
pub mod worker;

pub use error::{Code, Result, Status};
pub use tensor::{DType, Shape, Tensor};
