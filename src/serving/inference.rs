//! TensorFlow Serving's tf.Example APIs: `Classify`, `Regress` and
//! `MultiInference` run a classify or regress signature (method name
//! `tensorflow/serving/classify` or `tensorflow/serving/regress`, what
//! Estimator exports and `classification_signature_def` /
//! `regression_signature_def` write) whose one input, `inputs`, takes
//! serialized `tf.train.Example`s, and answer per example: a list of
//! (label, score) classes, or one value.
//!
//! Owns: the examples' input tensor (a context Example's bytes in front of
//! each example's, which protobuf reads as a merge, the example's own
//! features winning), checking the signature and its outputs as TensorFlow
//! Serving does (with its messages), and the per-example results. Must not
//! decode either wire format (`grpc::prediction_service`, [`super::rest`]
//! and [`super::json`] do) nor run steps other than through [`Models`].

use super::{ModelRequest, Models, ServedVersion};
use crate::error::{Result, Status};
use crate::graph::DataType;
use crate::graph::saved_model::Signature;
use crate::session::RunOptions;
use crate::tensor::{DType, Tensor};
use std::sync::Arc;
use std::time::Duration;

pub const CLASSIFY_METHOD: &str = "tensorflow/serving/classify";
pub const REGRESS_METHOD: &str = "tensorflow/serving/regress";
/// The input key of both signature kinds.
pub const EXAMPLES_INPUT: &str = "inputs";
pub const CLASSES_OUTPUT: &str = "classes";
pub const SCORES_OUTPUT: &str = "scores";
pub const REGRESS_OUTPUT: &str = "outputs";

/// Serialized Examples, and a context Example every one of them extends
/// (TensorFlow Serving's `ExampleList` / `ExampleListWithContext`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExampleInput {
    pub examples: Vec<Vec<u8>>,
    pub context: Option<Vec<u8>>,
}

impl ExampleInput {
    /// The signature's input: a string vector, one serialized Example per
    /// element, each behind the context's bytes.
    pub fn tensor(&self) -> Result<Tensor> {
        if self.examples.is_empty() {
            return Err(Status::invalid_argument("Input is empty."));
        }
        let context = self.context.as_deref().unwrap_or_default();
        let joined: Vec<Vec<u8>> = self.examples.iter().map(|example| [context, example.as_slice()].concat()).collect();
        Tensor::from_strings([joined.len()], &joined)
    }
}

/// One class of one example: its label (empty when the signature has no
/// `classes` output) and score (0 when it has no `scores`).
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub label: Vec<u8>,
    pub score: f32,
}

/// A Classify answer: the version and signature that made it, the classes
/// of each example in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub version: i64,
    pub signature: String,
    pub classes: Vec<Vec<Class>>,
}

/// A Regress answer: one value per example.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub version: i64,
    pub signature: String,
    pub values: Vec<f32>,
}

/// One task of a MultiInference answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Inference {
    Classification(Classification),
    Regression(Regression),
}

/// One task of a MultiInference request: a signature of the model, and the
/// method it is called by.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceTask {
    pub request: ModelRequest,
    pub method: String,
}

impl Models {
    /// Runs the classify signature `request` names on `input`.
    pub fn classify(
        &self,
        request: &ModelRequest,
        input: &ExampleInput,
        timeout: Option<Duration>,
    ) -> Result<Classification> {
        let (version, signature) = self.example_signature(request, CLASSIFY_METHOD, "classification")?;
        let outputs = classify_outputs(signature)?;
        let run = self.run_examples(request, version, input, &outputs, timeout)?;
        let classes = classes_of(input.examples.len(), &run).map_err(|e| in_signature(e, request, version))?;
        Ok(Classification { version: version.version, signature: request.signature_or_default().to_string(), classes })
    }

    /// Runs the regress signature `request` names on `input`.
    pub fn regress(
        &self,
        request: &ModelRequest,
        input: &ExampleInput,
        timeout: Option<Duration>,
    ) -> Result<Regression> {
        let (version, signature) = self.example_signature(request, REGRESS_METHOD, "regression")?;
        if signature.outputs.len() != 1 {
            return Err(in_signature(Status::invalid_argument("Expected one output Tensor."), request, version));
        }
        if !signature.outputs.contains_key(REGRESS_OUTPUT) {
            return Err(in_signature(
                Status::failed_precondition(format!(
                    "No regression outputs found in SignatureDef (it has: {})",
                    keys(&signature.outputs)
                )),
                request,
                version,
            ));
        }
        let run = self.run_examples(request, version, input, &[REGRESS_OUTPUT.to_string()], timeout)?;
        let values = values_of(input.examples.len(), &run).map_err(|e| in_signature(e, request, version))?;
        Ok(Regression { version: version.version, signature: request.signature_or_default().to_string(), values })
    }

    /// Runs several classify and regress signatures of one model version on
    /// the same examples, in the order asked.
    pub fn multi_inference(
        &self,
        tasks: &[InferenceTask],
        input: &ExampleInput,
        timeout: Option<Duration>,
    ) -> Result<Vec<Inference>> {
        let Some(first) = tasks.first() else {
            return Err(Status::invalid_argument("MultiInferenceRequest names no task"));
        };
        let mut seen = std::collections::BTreeSet::new();
        for task in tasks {
            let spec = &task.request;
            if spec.name != first.request.name {
                return Err(Status::invalid_argument(format!(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name: '{}' and '{}'",
                    first.request.name, spec.name
                )));
            }
            if (spec.version, &spec.label) != (first.request.version, &first.request.label) {
                return Err(Status::invalid_argument(format!(
                    "All ModelSpecs in a MultiInferenceRequest must access the same version of model '{}'",
                    spec.name
                )));
            }
            if !seen.insert(spec.signature_or_default()) {
                return Err(Status::invalid_argument(format!(
                    "Duplicate evaluation of signature: {}",
                    spec.signature_or_default()
                )));
            }
            if task.method != CLASSIFY_METHOD && task.method != REGRESS_METHOD {
                return Err(Status::unimplemented(format!(
                    "Unsupported signature method_name: '{}' (signature '{}'; MultiInference runs {CLASSIFY_METHOD} and {REGRESS_METHOD})",
                    task.method,
                    spec.signature_or_default()
                )));
            }
        }
        tasks
            .iter()
            .map(|task| match task.method.as_str() {
                CLASSIFY_METHOD => self.classify(&task.request, input, timeout).map(Inference::Classification),
                _ => self.regress(&task.request, input, timeout).map(Inference::Regression),
            })
            .collect()
    }

    /// The signature `request` names, checked to be a `method` signature
    /// over one `inputs` tensor.
    fn example_signature(
        &self,
        request: &ModelRequest,
        method: &str,
        kind: &str,
    ) -> Result<(&Arc<ServedVersion>, &Signature)> {
        let (version, signature) = self.signature(request)?;
        let refuse = |message: String| Err(in_signature(Status::invalid_argument(message), request, version));
        if signature.method != method {
            return refuse(format!("Expected {kind} signature method_name to be {method}. Was: {}", signature.method));
        }
        if signature.inputs.len() != 1 {
            return refuse(format!("Expected one input Tensor (it has: {})", keys(&signature.inputs)));
        }
        match signature.inputs.get(EXAMPLES_INPUT) {
            None => Err(in_signature(
                Status::failed_precondition(format!(
                    "No {kind} inputs found in SignatureDef: its input is '{}', not '{EXAMPLES_INPUT}'",
                    keys(&signature.inputs)
                )),
                request,
                version,
            )),
            Some(info) if info.dtype != DataType::Tensor(DType::String) => {
                refuse(format!("input '{EXAMPLES_INPUT}' must be serialized tf.Examples (a string tensor)"))
            }
            Some(_) => Ok((version, signature)),
        }
    }

    fn run_examples(
        &self,
        request: &ModelRequest,
        version: &ServedVersion,
        input: &ExampleInput,
        outputs: &[String],
        timeout: Option<Duration>,
    ) -> Result<Vec<(String, Tensor)>> {
        let examples = input.tensor()?;
        let options = RunOptions { timeout: timeout.or(self.default_timeout), ..RunOptions::default() };
        version
            .model
            .run_with(&options, request.signature_or_default(), vec![(EXAMPLES_INPUT.to_string(), examples)], outputs)
            .map_err(|e| e.context(format_args!("model '{}' version {}", request.name, version.version)))
    }
}

/// A classify signature's outputs to fetch: `classes`, `scores` or both,
/// and nothing else.
fn classify_outputs(signature: &Signature) -> Result<Vec<String>> {
    let count = signature.outputs.len();
    if count != 1 && count != 2 {
        return Err(Status::invalid_argument(format!(
            "Expected one or two output Tensors, found {count} ({})",
            keys(&signature.outputs)
        )));
    }
    let outputs: Vec<String> = [CLASSES_OUTPUT, SCORES_OUTPUT]
        .into_iter()
        .filter(|key| signature.outputs.contains_key(*key))
        .map(str::to_string)
        .collect();
    if outputs.is_empty() {
        return Err(Status::failed_precondition(format!(
            "Expected classification signature outputs to contain at least one of \"{CLASSES_OUTPUT}\" or \"{SCORES_OUTPUT}\" (it has: {})",
            keys(&signature.outputs)
        )));
    }
    Ok(outputs)
}

fn output<'a>(run: &'a [(String, Tensor)], key: &str) -> Option<&'a Tensor> {
    run.iter().find(|(k, _)| k == key).map(|(_, t)| t)
}

/// Checks a classes or scores output: `[examples, classes]` of `dtype`.
fn check_matrix(what: &str, tensor: &Tensor, dtype: DType, examples: usize) -> Result<usize> {
    if tensor.rank() != 2 {
        return Err(Status::invalid_argument(format!(
            "Expected {what} Tensor shape: [batch_size num_classes] but got {}",
            tensor.shape()
        )));
    }
    if tensor.dtype() != dtype {
        return Err(Status::invalid_argument(format!(
            "Expected {what} Tensor of {}. Got: {}",
            super::tf_dtype_name(DataType::Tensor(dtype)),
            super::tf_dtype_name(DataType::Tensor(tensor.dtype()))
        )));
    }
    if tensor.dims()[0] != examples {
        return Err(Status::invalid_argument(format!(
            "Expected {what} output batch size of {examples}. Got: {}",
            tensor.dims()[0]
        )));
    }
    Ok(tensor.dims()[1])
}

/// Each example's classes from the `classes` and `scores` outputs.
fn classes_of(examples: usize, run: &[(String, Tensor)]) -> Result<Vec<Vec<Class>>> {
    let classes = output(run, CLASSES_OUTPUT);
    let scores = output(run, SCORES_OUTPUT);
    let labels_count = classes.map(|c| check_matrix("classes", c, DType::String, examples)).transpose()?;
    let scores_count = scores.map(|s| check_matrix("scores", s, DType::F32, examples)).transpose()?;
    let per_example = match (labels_count, scores_count) {
        (Some(l), Some(s)) if l != s => {
            return Err(Status::invalid_argument(format!(
                "Tensors class and score should match in dim_size(1). Got {l} vs. {s}"
            )));
        }
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => 0,
    };
    let labels = classes.map(Tensor::strings).transpose()?;
    let scores = scores.map(|s| s.as_slice::<f32>()).transpose()?;
    Ok((0..examples)
        .map(|i| {
            (0..per_example)
                .map(|c| {
                    let at = i * per_example + c;
                    Class {
                        label: labels.as_ref().and_then(|l| l.get(at)).unwrap_or_default().to_vec(),
                        score: scores.map_or(0.0, |s| s[at]),
                    }
                })
                .collect()
        })
        .collect())
}

/// Each example's value from the `outputs` output: `[examples]` or
/// `[examples, 1]` float32.
fn values_of(examples: usize, run: &[(String, Tensor)]) -> Result<Vec<f32>> {
    let tensor = output(run, REGRESS_OUTPUT)
        .ok_or_else(|| Status::internal(format!("the regress signature answered without '{REGRESS_OUTPUT}'")))?;
    let dims = tensor.dims();
    if !(dims.len() == 1 || (dims.len() == 2 && dims[1] == 1)) {
        return Err(Status::invalid_argument(format!(
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got {}",
            tensor.shape()
        )));
    }
    if dims[0] != examples {
        return Err(Status::invalid_argument(format!(
            "Input batch size did not match output batch size: {examples} vs. {}",
            dims[0]
        )));
    }
    if tensor.dtype() != DType::F32 {
        return Err(Status::invalid_argument(format!(
            "Expected output Tensor of DT_FLOAT. Got: {}",
            super::tf_dtype_name(DataType::Tensor(tensor.dtype()))
        )));
    }
    Ok(tensor.as_slice::<f32>()?.to_vec())
}

fn in_signature(e: Status, request: &ModelRequest, version: &ServedVersion) -> Status {
    e.context(format_args!(
        "model '{}' version {} signature '{}'",
        request.name,
        version.version,
        request.signature_or_default()
    ))
}

fn keys<V>(map: &std::collections::BTreeMap<String, V>) -> String {
    if map.is_empty() { "none".to_string() } else { map.keys().cloned().collect::<Vec<_>>().join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(dims: [usize; 2], values: &[&str]) -> Tensor {
        Tensor::from_strings(dims, values).unwrap()
    }

    #[test]
    fn a_context_goes_in_front_of_each_example_and_an_empty_input_is_refused() {
        let input = ExampleInput { examples: vec![b"ab".to_vec(), b"c".to_vec()], context: Some(b"xy".to_vec()) };
        let tensor = input.tensor().unwrap();
        let got: Vec<&[u8]> = tensor.strings().unwrap().iter().collect();
        assert_eq!(got, [&b"xyab"[..], b"xyc"]);
        let err = ExampleInput::default().tensor().unwrap_err();
        assert_eq!(err.message, "Input is empty.");
    }

    #[test]
    fn classes_pair_labels_with_scores_and_either_may_be_missing() {
        let labels = strings([2, 2], &["a", "b", "c", "d"]);
        let scores = Tensor::from_slice([2, 2], &[0.1f32, 0.9, 0.6, 0.4]).unwrap();
        let run = vec![("classes".to_string(), labels.clone()), ("scores".to_string(), scores.clone())];
        let got = classes_of(2, &run).unwrap();
        assert_eq!(got[1][0], Class { label: b"c".to_vec(), score: 0.6 });
        let only_scores = classes_of(2, &[("scores".to_string(), scores)]).unwrap();
        assert_eq!(only_scores[0][1], Class { label: vec![], score: 0.9 });
        let only_labels = classes_of(2, &[("classes".to_string(), labels)]).unwrap();
        assert_eq!(only_labels[0][1], Class { label: b"b".to_vec(), score: 0.0 });
    }

    #[test]
    fn malformed_outputs_are_refused_with_tensorflow_servings_messages() {
        let labels = strings([2, 2], &["a", "b", "c", "d"]);
        let three = Tensor::from_slice([2, 3], &[0f32; 6]).unwrap();
        let err = classes_of(2, &[("classes".into(), labels.clone()), ("scores".into(), three)]).unwrap_err();
        assert!(err.message.contains("should match in dim_size(1). Got 2 vs. 3"), "{err}");
        let err = classes_of(3, &[("classes".into(), labels)]).unwrap_err();
        assert!(err.message.contains("batch size of 3. Got: 2"), "{err}");
        let ints = Tensor::from_slice([2, 1], &[1i64, 2]).unwrap();
        let err = classes_of(2, &[("scores".into(), ints)]).unwrap_err();
        assert!(err.message.contains("scores Tensor of DT_FLOAT. Got: DT_INT64"), "{err}");
        let wide = Tensor::from_slice([2, 2], &[0f32; 4]).unwrap();
        let err = values_of(2, &[("outputs".into(), wide)]).unwrap_err();
        assert!(err.message.contains("[batch_size] or [batch_size, 1] but got"), "{err}");
        let column = Tensor::from_slice([2, 1], &[1.5f32, -2.0]).unwrap();
        assert_eq!(values_of(2, &[("outputs".into(), column)]).unwrap(), [1.5, -2.0]);
    }
}
