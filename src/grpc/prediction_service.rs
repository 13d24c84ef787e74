//! TensorFlow Serving's gRPC services on a server that serves models
//! (`ringflow serve`, `ringflow server --model`): `PredictionService`'s
//! `Predict`, `Classify`, `Regress`, `MultiInference` and
//! `GetModelMetadata`, and `ModelService`'s
//! `GetModelStatus`, so that TensorFlow Serving's own clients
//! (`tensorflow_serving.apis.prediction_service_pb2_grpc`) call ringflow
//! unchanged. The calls arrive on the master's gRPC front end
//! ([`super::master_service`]), which hands these paths here.
//!
//! Owns: decoding these requests and encoding their answers. Must not
//! pick versions or run steps itself: [`Models`] does.

use super::proto::TensorProto;
use super::proto::serving as proto;
use super::tensor_proto::{tensor_from_proto, tensor_to_proto};
use super::wire;
use crate::error::{Result, Status};
use crate::graph::DataType;
use crate::graph::import::proto::{TensorShapeProto, tensor_shape_proto};
use crate::graph::import::tf_number_of;
use crate::graph::saved_model::TensorInfo;
use crate::serving::inference::{Classification, ExampleInput, Inference, InferenceTask, Regression};
use crate::serving::{ModelRequest, Models, STATE_AVAILABLE};
use bytes::Bytes;
use std::time::Duration;

pub const PREDICTION_SERVICE: &str = "tensorflow.serving.PredictionService";
pub const MODEL_SERVICE: &str = "tensorflow.serving.ModelService";

/// Answers `/{service}/{method}`.
pub fn dispatch(
    models: &Models,
    service: &str,
    method: &str,
    message: Bytes,
    call_timeout: Option<Duration>,
) -> Result<Bytes> {
    match (service, method) {
        (PREDICTION_SERVICE, "Predict") => {
            let request: proto::PredictRequest = wire::decode(message, "PredictRequest")?;
            Ok(wire::encode_message(&predict(models, request, call_timeout)?))
        }
        (PREDICTION_SERVICE, "GetModelMetadata") => {
            let request: proto::GetModelMetadataRequest = wire::decode(message, "GetModelMetadataRequest")?;
            Ok(wire::encode_message(&metadata(models, request)?))
        }
        (PREDICTION_SERVICE, "Classify") => {
            let request: proto::ClassificationRequest = wire::decode(message, "ClassificationRequest")?;
            Ok(wire::encode_message(&classify(models, request, call_timeout)?))
        }
        (PREDICTION_SERVICE, "Regress") => {
            let request: proto::RegressionRequest = wire::decode(message, "RegressionRequest")?;
            Ok(wire::encode_message(&regress(models, request, call_timeout)?))
        }
        (PREDICTION_SERVICE, "MultiInference") => {
            let request: proto::MultiInferenceRequest = wire::decode(message, "MultiInferenceRequest")?;
            Ok(wire::encode_message(&multi_inference(models, request, call_timeout)?))
        }
        (MODEL_SERVICE, "GetModelStatus") => {
            let request: proto::GetModelStatusRequest = wire::decode(message, "GetModelStatusRequest")?;
            Ok(wire::encode_message(&status(models, request)?))
        }
        (MODEL_SERVICE, "HandleReloadConfigRequest") => Err(Status::unimplemented(
            "ModelService/HandleReloadConfigRequest: models are loaded when the server starts",
        )),
        _ => Err(Status::unimplemented(format!("/{service}/{method} is not a method ringflow serves"))),
    }
}

fn model_request(spec: Option<proto::ModelSpec>) -> Result<ModelRequest> {
    let spec = spec.ok_or_else(|| Status::invalid_argument("the request has no model_spec"))?;
    if spec.name.is_empty() {
        return Err(Status::invalid_argument("model_spec names no model"));
    }
    Ok(ModelRequest {
        name: spec.name,
        version: spec.version.map(|v| v.value),
        label: (!spec.version_label.is_empty()).then_some(spec.version_label),
        signature: spec.signature_name,
    })
}

fn answered_spec(name: &str, version: i64, signature: &str) -> proto::ModelSpec {
    proto::ModelSpec {
        name: name.to_string(),
        version: Some(proto::Int64Value { value: version }),
        signature_name: signature.to_string(),
        version_label: String::new(),
    }
}

fn predict(
    models: &Models,
    request: proto::PredictRequest,
    timeout: Option<Duration>,
) -> Result<proto::PredictResponse> {
    let spec = model_request(request.model_spec)?;
    let inputs = request
        .inputs
        .iter()
        .map(|(key, proto)| Ok((key.clone(), tensor_from_proto(proto, &format!("input '{key}'"))?)))
        .collect::<Result<Vec<_>>>()?;
    let prediction = models.predict_with(&spec, inputs, &request.output_filter, timeout)?;
    let outputs = prediction
        .outputs
        .iter()
        .map(|(key, tensor)| Ok((key.clone(), tensor_to_proto(tensor)?)))
        .collect::<Result<std::collections::HashMap<String, TensorProto>>>()?;
    Ok(proto::PredictResponse {
        outputs,
        model_spec: Some(answered_spec(&spec.name, prediction.version, &prediction.signature)),
    })
}

/// The examples of a Classify, Regress or MultiInference request.
fn example_input(input: Option<proto::Input>) -> Result<ExampleInput> {
    match input {
        Some(proto::Input { example_list: Some(list), example_list_with_context: None }) => {
            Ok(ExampleInput { examples: list.examples, context: None })
        }
        Some(proto::Input { example_list: None, example_list_with_context: Some(list) }) => {
            Ok(ExampleInput { examples: list.examples, context: list.context })
        }
        Some(proto::Input { example_list: Some(_), example_list_with_context: Some(_) }) => {
            Err(Status::invalid_argument("the request's input has both example_list and example_list_with_context"))
        }
        _ => Err(Status::invalid_argument("Input is empty.")),
    }
}

fn classification_result(classification: &Classification) -> proto::ClassificationResult {
    proto::ClassificationResult {
        classifications: classification
            .classes
            .iter()
            .map(|classes| proto::Classifications {
                classes: classes
                    .iter()
                    .map(|c| proto::Class { label: String::from_utf8_lossy(&c.label).into_owned(), score: c.score })
                    .collect(),
            })
            .collect(),
    }
}

fn regression_result(regression: &Regression) -> proto::RegressionResult {
    proto::RegressionResult {
        regressions: regression.values.iter().map(|&value| proto::Regression { value }).collect(),
    }
}

fn classify(
    models: &Models,
    request: proto::ClassificationRequest,
    timeout: Option<Duration>,
) -> Result<proto::ClassificationResponse> {
    let spec = model_request(request.model_spec)?;
    let classification = models.classify(&spec, &example_input(request.input)?, timeout)?;
    Ok(proto::ClassificationResponse {
        result: Some(classification_result(&classification)),
        model_spec: Some(answered_spec(&spec.name, classification.version, &classification.signature)),
    })
}

fn regress(
    models: &Models,
    request: proto::RegressionRequest,
    timeout: Option<Duration>,
) -> Result<proto::RegressionResponse> {
    let spec = model_request(request.model_spec)?;
    let regression = models.regress(&spec, &example_input(request.input)?, timeout)?;
    Ok(proto::RegressionResponse {
        result: Some(regression_result(&regression)),
        model_spec: Some(answered_spec(&spec.name, regression.version, &regression.signature)),
    })
}

fn multi_inference(
    models: &Models,
    request: proto::MultiInferenceRequest,
    timeout: Option<Duration>,
) -> Result<proto::MultiInferenceResponse> {
    let tasks = request
        .tasks
        .into_iter()
        .map(|task| Ok(InferenceTask { request: model_request(task.model_spec)?, method: task.method_name }))
        .collect::<Result<Vec<_>>>()?;
    let inferences = models.multi_inference(&tasks, &example_input(request.input)?, timeout)?;
    let results = tasks
        .iter()
        .zip(&inferences)
        .map(|(task, inference)| match inference {
            Inference::Classification(c) => proto::InferenceResult {
                model_spec: Some(answered_spec(&task.request.name, c.version, &c.signature)),
                classification_result: Some(classification_result(c)),
                regression_result: None,
            },
            Inference::Regression(r) => proto::InferenceResult {
                model_spec: Some(answered_spec(&task.request.name, r.version, &r.signature)),
                classification_result: None,
                regression_result: Some(regression_result(r)),
            },
        })
        .collect();
    Ok(proto::MultiInferenceResponse { results })
}

/// The type URL TensorFlow Serving's clients unpack `signature_def` by.
const SIGNATURE_DEF_MAP_URL: &str = "type.googleapis.com/tensorflow.serving.SignatureDefMap";

fn metadata(models: &Models, request: proto::GetModelMetadataRequest) -> Result<proto::GetModelMetadataResponse> {
    let spec = model_request(request.model_spec)?;
    if request.metadata_field.is_empty() {
        return Err(Status::invalid_argument("GetModelMetadata: metadata_field names nothing (ask for signature_def)"));
    }
    if let Some(other) = request.metadata_field.iter().find(|f| *f != "signature_def") {
        return Err(Status::invalid_argument(format!(
            "GetModelMetadata: metadata field '{other}' is not served (only signature_def)"
        )));
    }
    let version = models.version(&spec)?;
    let tensor_info = |info: &TensorInfo| proto::TensorInfo {
        name: info.tensor.clone(),
        dtype: match info.dtype {
            DataType::Tensor(d) => tf_number_of(d),
            DataType::Resource => 20,
            DataType::Variant => 21,
            DataType::Unsupported(n) => n,
        },
        tensor_shape: Some(match &info.shape {
            None => TensorShapeProto { dim: vec![], unknown_rank: true },
            Some(dims) => TensorShapeProto {
                dim: dims.iter().map(|&size| tensor_shape_proto::Dim { size, name: String::new() }).collect(),
                unknown_rank: false,
            },
        }),
    };
    let signature_def = version
        .model
        .meta_graph()
        .signatures
        .iter()
        .map(|(key, sig)| {
            let side = |ends: &std::collections::BTreeMap<String, TensorInfo>| {
                ends.iter().map(|(k, v)| (k.clone(), tensor_info(v))).collect()
            };
            let def = proto::SignatureDef {
                inputs: side(&sig.inputs),
                outputs: side(&sig.outputs),
                method_name: sig.method.clone(),
            };
            (key.clone(), def)
        })
        .collect();
    let map = proto::SignatureDefMap { signature_def };
    let any = proto::Any { type_url: SIGNATURE_DEF_MAP_URL.to_string(), value: prost::Message::encode_to_vec(&map) };
    Ok(proto::GetModelMetadataResponse {
        model_spec: Some(answered_spec(&spec.name, version.version, "")),
        metadata: [("signature_def".to_string(), any)].into_iter().collect(),
    })
}

fn status(models: &Models, request: proto::GetModelStatusRequest) -> Result<proto::GetModelStatusResponse> {
    let spec = model_request(request.model_spec)?;
    let model_version_status = models
        .status(&spec)?
        .into_iter()
        .map(|version| proto::ModelVersionStatus {
            version,
            state: STATE_AVAILABLE,
            status: Some(proto::StatusProto { error_code: 0, error_message: String::new() }),
        })
        .collect();
    Ok(proto::GetModelStatusResponse { model_version_status })
}
