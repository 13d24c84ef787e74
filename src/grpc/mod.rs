//! TensorFlow's MasterService over gRPC: TensorFlow's own client
//! (`tf.compat.v1.Session("grpc://host:port")`) drives a ringflow server.
//! The server's one port tells the two protocols apart by their first
//! bytes (`net::Server` hands a connection that opens with HTTP/2's
//! preface to [`master_service`]); `grpc://host:port` targets reach it
//! from Rust through [`client`].
//!
//! Owns: TensorFlow's message structs ([`proto`]), TensorProto conversion
//! ([`tensor_proto`]), gRPC framing over HTTP/2 ([`wire`]), the server
//! ([`master_service`]) and the client session ([`client`]). Must not
//! touch the native wire format, the executor or graph partitioning: a
//! decoded call goes through the master like a native one.

pub mod client;
pub mod master_service;
pub mod prediction_service;
pub mod proto;
pub mod tensor_proto;
pub mod wire;

pub use client::{GrpcChannel, GrpcSession};
pub use master_service::GrpcMasterService;
