//! TensorFlow Serving's messages as prost structs, with its field numbers
//! (`model.proto`, `predict.proto`, `get_model_metadata.proto`,
//! `get_model_status.proto`, `status.proto`); the SignatureDefs
//! GetModelMetadata answers with are `graph::saved_model`'s.
//!
//! Owns: the message layouts only. Must not interpret them: requests are
//! served in [`crate::grpc::prediction_service`]. Fields ringflow ignores
//! (streamed-predict options, client ids, request options) are left out.

use super::TensorProto;
pub use crate::graph::saved_model::wire::{SignatureDef, TensorInfo};
use std::collections::HashMap;

/// `google.protobuf.Int64Value`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64Value {
    #[prost(int64, tag = "1")]
    pub value: i64,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelSpec {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub version: Option<Int64Value>,
    #[prost(string, tag = "3")]
    pub signature_name: String,
    #[prost(string, tag = "4")]
    pub version_label: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PredictRequest {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(map = "string, message", tag = "2")]
    pub inputs: HashMap<String, TensorProto>,
    #[prost(string, repeated, tag = "3")]
    pub output_filter: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PredictResponse {
    #[prost(map = "string, message", tag = "1")]
    pub outputs: HashMap<String, TensorProto>,
    #[prost(message, optional, tag = "2")]
    pub model_spec: Option<ModelSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetModelMetadataRequest {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(string, repeated, tag = "2")]
    pub metadata_field: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetModelMetadataResponse {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(map = "string, message", tag = "2")]
    pub metadata: HashMap<String, Any>,
}

/// What `metadata["signature_def"]` holds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SignatureDefMap {
    #[prost(map = "string, message", tag = "1")]
    pub signature_def: HashMap<String, SignatureDef>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetModelStatusRequest {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetModelStatusResponse {
    #[prost(message, repeated, tag = "1")]
    pub model_version_status: Vec<ModelVersionStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelVersionStatus {
    #[prost(int64, tag = "1")]
    pub version: i64,
    /// `ModelVersionStatus.State`: 30 is AVAILABLE.
    #[prost(int32, tag = "2")]
    pub state: i32,
    #[prost(message, optional, tag = "3")]
    pub status: Option<StatusProto>,
}

/// `tensorflow.serving.StatusProto`: `error_code` 0 is OK.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusProto {
    #[prost(int32, tag = "1")]
    pub error_code: i32,
    #[prost(string, tag = "2")]
    pub error_message: String,
}
