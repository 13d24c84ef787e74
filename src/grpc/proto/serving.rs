//! TensorFlow Serving's messages as prost structs, with its field numbers
//! (`model.proto`, `predict.proto`, `classification.proto`,
//! `regression.proto`, `inference.proto`, `input.proto`,
//! `get_model_metadata.proto`, `get_model_status.proto`, `status.proto`);
//! the SignatureDefs
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

/// `input.proto`'s `Input`: one of its two example lists. Each Example is
/// kept as the bytes it came in (an embedded message and a `bytes` field
/// share protobuf's wire form), which is what the signature is fed.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Input {
    #[prost(message, optional, tag = "1")]
    pub example_list: Option<ExampleList>,
    #[prost(message, optional, tag = "2")]
    pub example_list_with_context: Option<ExampleListWithContext>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExampleList {
    /// Serialized `tensorflow.Example`s.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub examples: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExampleListWithContext {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub examples: Vec<Vec<u8>>,
    /// A serialized `tensorflow.Example` every example extends.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub context: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ClassificationRequest {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(message, optional, tag = "2")]
    pub input: Option<Input>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ClassificationResponse {
    #[prost(message, optional, tag = "1")]
    pub result: Option<ClassificationResult>,
    #[prost(message, optional, tag = "2")]
    pub model_spec: Option<ModelSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ClassificationResult {
    #[prost(message, repeated, tag = "1")]
    pub classifications: Vec<Classifications>,
}

/// One example's classes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Classifications {
    #[prost(message, repeated, tag = "1")]
    pub classes: Vec<Class>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Class {
    #[prost(string, tag = "1")]
    pub label: String,
    #[prost(float, tag = "2")]
    pub score: f32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegressionRequest {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(message, optional, tag = "2")]
    pub input: Option<Input>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegressionResponse {
    #[prost(message, optional, tag = "1")]
    pub result: Option<RegressionResult>,
    #[prost(message, optional, tag = "2")]
    pub model_spec: Option<ModelSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RegressionResult {
    #[prost(message, repeated, tag = "1")]
    pub regressions: Vec<Regression>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Regression {
    #[prost(float, tag = "1")]
    pub value: f32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MultiInferenceRequest {
    #[prost(message, repeated, tag = "1")]
    pub tasks: Vec<InferenceTask>,
    #[prost(message, optional, tag = "2")]
    pub input: Option<Input>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InferenceTask {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    /// `tensorflow/serving/classify` or `tensorflow/serving/regress`.
    #[prost(string, tag = "2")]
    pub method_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MultiInferenceResponse {
    #[prost(message, repeated, tag = "1")]
    pub results: Vec<InferenceResult>,
}

/// One task's answer: `classification_result` or `regression_result` (a
/// oneof in `inference.proto`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferenceResult {
    #[prost(message, optional, tag = "1")]
    pub model_spec: Option<ModelSpec>,
    #[prost(message, optional, tag = "2")]
    pub classification_result: Option<ClassificationResult>,
    #[prost(message, optional, tag = "3")]
    pub regression_result: Option<RegressionResult>,
}
