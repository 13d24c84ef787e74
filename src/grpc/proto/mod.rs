//! TensorFlow's MasterService messages as prost structs, with TensorFlow's
//! field numbers (`master.proto`, `config.proto`, `tensor.proto`,
//! `step_stats.proto`, `device_attributes.proto`, `named_tensor.proto`).
//! The GraphDef is the importer's own ([`crate::graph::import::proto`]).
//!
//! Owns: the message layouts only. Must not convert or interpret them:
//! tensors convert in [`super::tensor_proto`], requests are served in
//! [`super::master_service`]. Fields TensorFlow's client sends that ringflow
//! ignores (GPU options, graph options, debug options...) are left out:
//! prost skips unknown fields while decoding.

pub mod serving;

use crate::graph::import::proto::{GraphDef, TensorShapeProto};
use bytes::Bytes;
use std::collections::HashMap;

/// `tensor.proto`. `tensor_content` is a `Bytes` so that a decoded request
/// shares the received buffer and an answer shares the tensor's storage.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    #[prost(int32, tag = "3")]
    pub version_number: i32,
    #[prost(bytes = "bytes", tag = "4")]
    pub tensor_content: Bytes,
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    #[prost(float, repeated, tag = "9")]
    pub scomplex_val: Vec<f32>,
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    #[prost(double, repeated, tag = "12")]
    pub dcomplex_val: Vec<f64>,
    #[prost(int32, repeated, tag = "13")]
    pub half_val: Vec<i32>,
    #[prost(uint32, repeated, tag = "16")]
    pub uint32_val: Vec<u32>,
    #[prost(uint64, repeated, tag = "17")]
    pub uint64_val: Vec<u64>,
}

/// `named_tensor.proto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedTensorProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub tensor: Option<TensorProto>,
}

/// `config.proto`'s ConfigProto: the fields a session honours.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigProto {
    #[prost(map = "string, int32", tag = "1")]
    pub device_count: HashMap<String, i32>,
    #[prost(int32, tag = "2")]
    pub intra_op_parallelism_threads: i32,
    #[prost(int32, tag = "5")]
    pub inter_op_parallelism_threads: i32,
    #[prost(bool, tag = "7")]
    pub allow_soft_placement: bool,
    #[prost(bool, tag = "8")]
    pub log_device_placement: bool,
    #[prost(int64, tag = "11")]
    pub operation_timeout_in_ms: i64,
    #[prost(bool, tag = "15")]
    pub isolate_session_state: bool,
}

/// `config.proto`'s RunOptions.TraceLevel: `NO_TRACE` is 0, every other
/// level asks for step stats.
pub const NO_TRACE: i32 = 0;
pub const FULL_TRACE: i32 = 3;

/// `config.proto`'s RunOptions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunOptions {
    #[prost(int32, tag = "1")]
    pub trace_level: i32,
    #[prost(int64, tag = "2")]
    pub timeout_in_ms: i64,
    #[prost(int32, tag = "3")]
    pub inter_op_thread_pool: i32,
    #[prost(bool, tag = "5")]
    pub output_partition_graphs: bool,
}

/// `config.proto`'s RunMetadata.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunMetadata {
    #[prost(message, optional, tag = "1")]
    pub step_stats: Option<StepStats>,
}

/// `config.proto`'s CallableOptions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CallableOptions {
    #[prost(string, repeated, tag = "1")]
    pub feed: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub fetch: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub target: Vec<String>,
    #[prost(message, optional, tag = "4")]
    pub run_options: Option<RunOptions>,
    #[prost(bool, tag = "8")]
    pub fetch_skip_sync: bool,
}

/// `step_stats.proto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StepStats {
    #[prost(message, repeated, tag = "1")]
    pub dev_stats: Vec<DeviceStepStats>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceStepStats {
    #[prost(string, tag = "1")]
    pub device: String,
    #[prost(message, repeated, tag = "2")]
    pub node_stats: Vec<NodeExecStats>,
    #[prost(map = "uint32, string", tag = "3")]
    pub thread_names: HashMap<u32, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeExecStats {
    #[prost(string, tag = "1")]
    pub node_name: String,
    #[prost(int64, tag = "2")]
    pub all_start_micros: i64,
    #[prost(int64, tag = "3")]
    pub op_start_rel_micros: i64,
    #[prost(int64, tag = "4")]
    pub op_end_rel_micros: i64,
    #[prost(int64, tag = "5")]
    pub all_end_rel_micros: i64,
    #[prost(string, tag = "8")]
    pub timeline_label: String,
    #[prost(uint32, tag = "10")]
    pub thread_id: u32,
}

/// `device_attributes.proto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceAttributes {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub device_type: String,
    #[prost(int64, tag = "4")]
    pub memory_limit: i64,
    #[prost(fixed64, tag = "6")]
    pub incarnation: u64,
    #[prost(string, tag = "7")]
    pub physical_device_desc: String,
}

// `master.proto`, in the order of the service's methods.

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateSessionRequest {
    #[prost(message, optional, tag = "1")]
    pub graph_def: Option<GraphDef>,
    #[prost(message, optional, tag = "2")]
    pub config: Option<ConfigProto>,
    #[prost(string, tag = "3")]
    pub target: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateSessionResponse {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(int64, tag = "2")]
    pub graph_version: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExtendSessionRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(message, optional, tag = "2")]
    pub graph_def: Option<GraphDef>,
    #[prost(int64, tag = "3")]
    pub current_graph_version: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExtendSessionResponse {
    #[prost(int64, tag = "4")]
    pub new_graph_version: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialRunSetupRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(string, repeated, tag = "2")]
    pub feed: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub fetch: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub target: Vec<String>,
    #[prost(int64, tag = "5")]
    pub request_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialRunSetupResponse {
    #[prost(string, tag = "1")]
    pub partial_run_handle: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunStepRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(message, repeated, tag = "2")]
    pub feed: Vec<NamedTensorProto>,
    #[prost(string, repeated, tag = "3")]
    pub fetch: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub target: Vec<String>,
    #[prost(message, optional, tag = "5")]
    pub options: Option<RunOptions>,
    #[prost(string, tag = "6")]
    pub partial_run_handle: String,
    #[prost(bool, tag = "7")]
    pub store_errors_in_response_body: bool,
    #[prost(int64, tag = "8")]
    pub request_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunStepResponse {
    #[prost(message, repeated, tag = "1")]
    pub tensor: Vec<NamedTensorProto>,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<RunMetadata>,
    /// TensorFlow's `error.Code`; set (with the message) instead of the
    /// call's grpc-status when the request stores errors in the body.
    #[prost(int32, tag = "3")]
    pub status_code: i32,
    #[prost(string, tag = "4")]
    pub status_error_message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResetRequest {
    #[prost(string, repeated, tag = "1")]
    pub container: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub device_filters: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResetResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListDevicesRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListDevicesResponse {
    #[prost(message, repeated, tag = "1")]
    pub local_device: Vec<DeviceAttributes>,
    #[prost(message, repeated, tag = "2")]
    pub remote_device: Vec<DeviceAttributes>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MakeCallableRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(message, optional, tag = "2")]
    pub options: Option<CallableOptions>,
    #[prost(int64, tag = "3")]
    pub request_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MakeCallableResponse {
    #[prost(int64, tag = "1")]
    pub handle: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunCallableRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(int64, tag = "2")]
    pub handle: i64,
    #[prost(message, repeated, tag = "3")]
    pub feed: Vec<TensorProto>,
    #[prost(int64, tag = "4")]
    pub request_id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RunCallableResponse {
    #[prost(message, repeated, tag = "1")]
    pub fetch: Vec<TensorProto>,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<RunMetadata>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseCallableRequest {
    #[prost(string, tag = "1")]
    pub session_handle: String,
    #[prost(int64, tag = "2")]
    pub handle: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseCallableResponse {}
