//! `ringflow serve` as a drop-in for TensorFlow Serving: SavedModels laid
//! out in numbered version directories, served over TensorFlow Serving's
//! gRPC API (PredictionService Predict and GetModelMetadata, ModelService
//! GetModelStatus) and its REST API (`/v1/models/...`, row and columnar
//! JSON), each answer checked against the outputs TensorFlow gave for the
//! same inputs; versions by number and label; the errors a wrong request
//! gets, each naming its culprit, with the server serving on; and
//! `ringflow server --model` on a cluster task.

use ringflow::cli::verify::{ATOL, RTOL, SavedModelCase, Tolerance};
use ringflow::grpc::GrpcChannel;
use ringflow::grpc::proto::serving as tfs;
use ringflow::grpc::tensor_proto::{tensor_from_proto, tensor_to_proto};
use ringflow::{DType, Tensor};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

const PREDICTION: &str = "tensorflow.serving.PredictionService";
const MODEL_SERVICE: &str = "tensorflow.serving.ModelService";
const TIMEOUT: Duration = Duration::from_secs(30);

/// The case whose signature calls change its variables: its own test.
const TRAINING_CASE: &str = "tf_module_training";

/// Every SavedModel case in the fixtures but the training one, by name.
fn cases() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved-models");
    let mut cases: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("case.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != TRAINING_CASE)
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "the SavedModel fixtures are there: {cases:?}");
    cases
}

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringflow"))
}

fn case_dir(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved-models").join(case)
}

/// `N` distinct free loopback ports: reserved together, then released.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// A model server process, killed when dropped, over a base directory of
/// models in TensorFlow Serving's layout.
struct ModelServer {
    child: Child,
    grpc: String,
    rest: String,
    _models: tempfile::TempDir,
}

impl ModelServer {
    /// `ringflow serve` with a config file: every case as a model of its
    /// own name at version 1; `keras_mlp_export` also as `mlp` with
    /// versions 1 and 2 (labelled `stable` and `canary`) and `training`.
    fn start() -> ModelServer {
        let models = tempfile::tempdir().unwrap();
        let mut config = String::from("model_config_list {\n");
        let mut add = |name: &str, case: &str, versions: &[i64], extra: &str| {
            let base = models.path().join(name);
            std::fs::create_dir_all(&base).unwrap();
            for v in versions {
                std::os::unix::fs::symlink(case_dir(case), base.join(v.to_string())).unwrap();
            }
            config.push_str(&format!(
                "  config {{ name: '{name}' base_path: '{}' model_platform: 'tensorflow' {extra} }}\n",
                base.display()
            ));
        };
        for case in cases() {
            add(&case, &case, &[1], "");
        }
        add("training", TRAINING_CASE, &[1], "");
        add(
            "mlp",
            "keras_mlp_export",
            &[1, 2],
            "model_version_policy { all {} } version_labels { key: 'stable' value: 1 } version_labels { key: 'canary' value: 2 }",
        );
        config.push_str("}\n");
        let config_file = models.path().join("models.config");
        std::fs::write(&config_file, config).unwrap();
        let [port, rest_port] = free_ports();
        let mut child = Command::new(binary())
            .args(["serve", "--exit-on-stdin-eof", "--threads", "2"])
            .arg(format!("--port={port}"))
            .arg(format!("--rest_api_port={rest_port}"))
            .arg(format!("--model_config_file={}", config_file.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        loop {
            let line = lines_rx.recv_timeout(Duration::from_secs(120)).expect("the server prints its REST address");
            if line.contains("REST API on") {
                break;
            }
        }
        ModelServer {
            child,
            grpc: format!("127.0.0.1:{port}"),
            rest: format!("127.0.0.1:{rest_port}"),
            _models: models,
        }
    }

    fn shared() -> &'static ModelServer {
        static SERVER: OnceLock<ModelServer> = OnceLock::new();
        SERVER.get_or_init(ModelServer::start)
    }

    fn channel(&self) -> GrpcChannel {
        GrpcChannel::connect(&self.grpc).unwrap()
    }

    /// One HTTP/1.1 request on a fresh connection: status and JSON body.
    fn http(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.rest).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        http_on(&mut stream, method, path, body, true)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes one request on `stream` and reads its answer (by Content-Length).
fn http_on(stream: &mut TcpStream, method: &str, path: &str, body: Option<&str>, close: bool) -> (u16, Value) {
    let body = body.unwrap_or("");
    let connection = if close { "close" } else { "keep-alive" };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_answer(stream)
}

fn read_answer(stream: &mut TcpStream) -> (u16, Value) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .unwrap();
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    let text = String::from_utf8(body).unwrap();
    // TensorFlow Serving writes NaN and Infinity bare; no case has them.
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

fn spec(name: &str, version: Option<i64>, label: &str, signature: &str) -> Option<tfs::ModelSpec> {
    Some(tfs::ModelSpec {
        name: name.into(),
        version: version.map(|value| tfs::Int64Value { value }),
        signature_name: signature.into(),
        version_label: label.into(),
    })
}

fn predict_request(
    spec: Option<tfs::ModelSpec>,
    inputs: &[(String, Tensor)],
    filter: &[String],
) -> tfs::PredictRequest {
    tfs::PredictRequest {
        model_spec: spec,
        inputs: inputs.iter().map(|(k, t)| (k.clone(), tensor_to_proto(t).unwrap())).collect(),
        output_filter: filter.to_vec(),
    }
}

fn predict(
    channel: &GrpcChannel,
    request: &tfs::PredictRequest,
) -> ringflow::error::Result<(tfs::PredictResponse, Vec<(String, Tensor)>)> {
    let response: tfs::PredictResponse = channel.call_service(PREDICTION, "Predict", request, TIMEOUT)?;
    let mut outputs: Vec<(String, Tensor)> =
        response.outputs.iter().map(|(k, p)| (k.clone(), tensor_from_proto(p, k).unwrap())).collect();
    outputs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((response, outputs))
}

fn check_outputs(what: &str, got: &[(String, Tensor)], expected: &[(String, Tensor)], tolerance: Option<Tolerance>) {
    let Tolerance { rtol, atol } = tolerance.unwrap_or(Tolerance { rtol: RTOL, atol: ATOL });
    assert_eq!(got.len(), expected.len(), "{what}: outputs {:?}", got.iter().map(|(k, _)| k).collect::<Vec<_>>());
    for (key, want) in expected {
        let (_, tensor) = got.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{what}: no output '{key}'"));
        tensor.all_close(want, rtol, atol).unwrap_or_else(|why| panic!("{what}: output '{key}': {why}"));
    }
}

#[test]
fn tensorflow_servings_predict_over_grpc_gives_tensorflows_outputs_for_every_case() {
    let server = ModelServer::shared();
    let channel = server.channel();
    for case in cases() {
        let case = case.as_str();
        let loaded = SavedModelCase::load(&case_dir(case)).unwrap();
        for (i, step) in loaded.steps.iter().enumerate() {
            let keys: Vec<String> = step.outputs.iter().map(|(k, _)| k.clone()).collect();
            let request = predict_request(spec(case, None, "", &step.signature), &step.inputs, &keys);
            let (response, got) = predict(&channel, &request).unwrap_or_else(|e| panic!("{case} step {i}: {e}"));
            let answered = response.model_spec.unwrap();
            assert_eq!((answered.name.as_str(), answered.version.unwrap().value), (case, 1));
            assert_eq!(answered.signature_name, step.signature);
            check_outputs(&format!("{case} step {i}"), &got, &step.outputs, loaded.file.tolerance);
        }
    }
}

#[test]
fn a_training_signature_called_over_grpc_updates_the_served_variables() {
    let server = ModelServer::shared();
    let channel = server.channel();
    let loaded = SavedModelCase::load(&case_dir(TRAINING_CASE)).unwrap();
    assert!(loaded.steps.len() > 1 && loaded.steps.iter().any(|s| s.signature != loaded.steps[0].signature));
    for (i, step) in loaded.steps.iter().enumerate() {
        let request = predict_request(spec("training", None, "", &step.signature), &step.inputs, &[]);
        let (_, got) = predict(&channel, &request).unwrap_or_else(|e| panic!("training step {i}: {e}"));
        check_outputs(&format!("training step {i}"), &got, &step.outputs, loaded.file.tolerance);
    }
}

#[test]
fn versions_are_found_by_number_label_or_newest_and_reported_by_status_and_metadata() {
    let server = ModelServer::shared();
    let channel = server.channel();
    let loaded = SavedModelCase::load(&case_dir("keras_mlp_export")).unwrap();
    let step = &loaded.steps[0];
    for (version, label, want) in [(None, "", 2), (Some(1), "", 1), (None, "stable", 1), (None, "canary", 2)] {
        let request = predict_request(spec("mlp", version, label, ""), &step.inputs, &[]);
        let (response, got) = predict(&channel, &request).unwrap();
        assert_eq!(response.model_spec.unwrap().version.unwrap().value, want, "{version:?} {label}");
        check_outputs("mlp", &got, &step.outputs, None);
    }

    let status: tfs::GetModelStatusResponse = channel
        .call_service(
            MODEL_SERVICE,
            "GetModelStatus",
            &tfs::GetModelStatusRequest { model_spec: spec("mlp", None, "", "") },
            TIMEOUT,
        )
        .unwrap();
    let versions: Vec<(i64, i32)> = status.model_version_status.iter().map(|s| (s.version, s.state)).collect();
    assert_eq!(versions, [(1, 30), (2, 30)]);

    let request = tfs::GetModelMetadataRequest {
        model_spec: spec("mlp", Some(1), "", ""),
        metadata_field: vec!["signature_def".into()],
    };
    let metadata: tfs::GetModelMetadataResponse =
        channel.call_service(PREDICTION, "GetModelMetadata", &request, TIMEOUT).unwrap();
    assert_eq!(metadata.model_spec.unwrap().version.unwrap().value, 1);
    let any = &metadata.metadata["signature_def"];
    assert_eq!(any.type_url, "type.googleapis.com/tensorflow.serving.SignatureDefMap");
    let map = <tfs::SignatureDefMap as prost::Message>::decode(any.value.as_slice()).unwrap();
    let default = &map.signature_def["serving_default"];
    assert_eq!(default.method_name, "tensorflow/serving/predict");
    assert_eq!(default.inputs["x"].dtype, 1, "DT_FLOAT");
    let dims: Vec<i64> = default.inputs["x"].tensor_shape.as_ref().unwrap().dim.iter().map(|d| d.size).collect();
    assert_eq!(dims, [-1, 4]);
    assert!(default.outputs.contains_key("output_0"));

    let (code, body) = server.http("GET", "/v1/models/mlp", None);
    assert_eq!(code, 200);
    assert_eq!(body["model_version_status"].as_array().unwrap().len(), 2);
    assert_eq!(body["model_version_status"][1]["state"], "AVAILABLE");
    let (code, body) = server.http("GET", "/v1/models/mlp/labels/stable", None);
    assert_eq!((code, body["model_version_status"][0]["version"].as_str()), (200, Some("1")));
    let (code, body) = server.http("GET", "/v1/models/mlp/versions/2/metadata", None);
    assert_eq!(code, 200);
    assert_eq!(body["model_spec"]["version"], "2");
    let x = &body["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["x"];
    assert_eq!(x["dtype"], "DT_FLOAT");
    assert_eq!(x["tensor_shape"]["dim"][1]["size"], "4");
}

/// A tensor as a nested JSON list (strings as text).
fn json_of(tensor: &Tensor) -> Value {
    fn nest(values: &[Value], dims: &[usize]) -> Value {
        match dims {
            [] => values[0].clone(),
            [n, inner @ ..] => {
                let step = if *n == 0 { 0 } else { values.len() / n };
                Value::Array((0..*n).map(|i| nest(&values[i * step..(i + 1) * step], inner)).collect())
            }
        }
    }
    let flat: Vec<Value> = match tensor.dtype() {
        DType::String => {
            tensor.strings().unwrap().iter().map(|s| Value::String(String::from_utf8(s.to_vec()).unwrap())).collect()
        }
        DType::I64 => tensor.as_slice::<i64>().unwrap().iter().map(|&v| json!(v)).collect(),
        DType::I32 => tensor.as_slice::<i32>().unwrap().iter().map(|&v| json!(v)).collect(),
        _ => tensor.to_f64_vec().into_iter().map(|v| json!(v)).collect(),
    };
    nest(&flat, tensor.dims())
}

/// JSON numbers nested as `expected`'s dims, compared within tolerance.
fn check_json(what: &str, got: &Value, expected: &Tensor) {
    fn flatten(value: &Value, out: &mut Vec<f64>, dims: &mut Vec<usize>, depth: usize) {
        match value {
            Value::Array(items) => {
                if dims.len() == depth {
                    dims.push(items.len());
                }
                items.iter().for_each(|item| flatten(item, out, dims, depth + 1));
            }
            other => out.push(other.as_f64().unwrap_or_else(|| panic!("not a number: {other}"))),
        }
    }
    let (mut values, mut dims) = (Vec::new(), Vec::new());
    flatten(got, &mut values, &mut dims, 0);
    assert_eq!(dims, expected.dims(), "{what}: dims");
    let tensor = Tensor::from_slice(dims.as_slice(), &values).unwrap();
    tensor
        .all_close(&Tensor::from_slice(expected.dims(), &expected.to_f64_vec()).unwrap(), RTOL * 10.0, ATOL * 10.0)
        .unwrap_or_else(|why| panic!("{what}: {why}"));
}

#[test]
fn the_rest_api_answers_rows_and_columns_as_tensorflow_serving_does() {
    let server = ModelServer::shared();
    for case in ["keras_mlp_export", "keras_text_export", "keras_categorical_export", "tf_module_signatures"] {
        let loaded = SavedModelCase::load(&case_dir(case)).unwrap();
        let step = &loaded.steps[0];
        let signature = &step.signature;
        // Columnar: every input whole, every output whole.
        let inputs: serde_json::Map<String, Value> = step.inputs.iter().map(|(k, t)| (k.clone(), json_of(t))).collect();
        let body = json!({"signature_name": signature, "inputs": inputs}).to_string();
        let (code, answer) = server.http("POST", &format!("/v1/models/{case}:predict"), Some(&body));
        assert_eq!(code, 200, "{case}: {answer}");
        for (key, expected) in &step.outputs {
            let got = if step.outputs.len() == 1 { &answer["outputs"] } else { &answer["outputs"][key] };
            check_json(&format!("{case} columnar '{key}'"), got, expected);
        }
        // Rows: one object of named inputs per batch row.
        let rows = step.inputs[0].1.dims()[0];
        let instances: Vec<Value> = (0..rows)
            .map(|r| Value::Object(step.inputs.iter().map(|(k, t)| (k.clone(), json_of(t)[r].clone())).collect()))
            .collect();
        let body = json!({"signature_name": signature, "instances": instances}).to_string();
        let (code, answer) = server.http("POST", &format!("/v1/models/{case}/versions/1:predict"), Some(&body));
        assert_eq!(code, 200, "{case}: {answer}");
        let predictions = answer["predictions"].as_array().unwrap();
        assert_eq!(predictions.len(), rows);
        for (key, expected) in &step.outputs {
            let column: Vec<Value> =
                predictions.iter().map(|p| if step.outputs.len() == 1 { p.clone() } else { p[key].clone() }).collect();
            check_json(&format!("{case} rows '{key}'"), &Value::Array(column), expected);
        }
    }
}

#[test]
fn keep_alive_and_chunked_and_100_continue_requests_are_served_on_one_connection() {
    let server = ModelServer::shared();
    let mut stream = TcpStream::connect(&server.rest).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let body = r#"{"instances": [[1, 2, 3, 4]]}"#;
    for _ in 0..3 {
        let (code, answer) = http_on(&mut stream, "POST", "/v1/models/mlp:predict", Some(body), false);
        assert_eq!((code, answer["predictions"].as_array().unwrap().len()), (200, 1));
    }
    // A chunked body, split mid-value, announced with Expect: 100-continue.
    let (a, b) = body.split_at(10);
    write!(
        stream,
        "POST /v1/models/mlp:predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    .unwrap();
    let mut continue_line = [0u8; 25];
    stream.read_exact(&mut continue_line).unwrap();
    assert_eq!(&continue_line, b"HTTP/1.1 100 Continue\r\n\r\n");
    write!(stream, "{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len()).unwrap();
    let (code, answer) = read_answer(&mut stream);
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["predictions"][0].as_array().unwrap().len(), 3);
}

/// The classify/regress case: its examples (step 0) and, per step, the
/// expected outputs.
const EXAMPLES_CASE: &str = "tf1_classify_regress";

fn example_list(examples: &Tensor, context: Option<&[u8]>) -> Option<tfs::Input> {
    let examples: Vec<Vec<u8>> = examples.strings().unwrap().iter().map(<[u8]>::to_vec).collect();
    Some(match context {
        None => tfs::Input { example_list: Some(tfs::ExampleList { examples }), example_list_with_context: None },
        Some(context) => tfs::Input {
            example_list: None,
            example_list_with_context: Some(tfs::ExampleListWithContext { examples, context: Some(context.to_vec()) }),
        },
    })
}

/// The context example the case's last two steps put in front of each
/// example, recovered from step 4's inputs (its bytes before step 0's).
fn context_of(case: &SavedModelCase) -> Vec<u8> {
    let plain = case.steps[0].inputs[0].1.strings().unwrap().get(0).unwrap().to_vec();
    let joined = case.steps[4].inputs[0].1.strings().unwrap().get(0).unwrap().to_vec();
    assert!(joined.ends_with(&plain), "step 4 is step 0 behind a context");
    joined[..joined.len() - plain.len()].to_vec()
}

fn output<'a>(step: &'a ringflow::cli::verify::SignatureCall, key: &str) -> &'a Tensor {
    &step.outputs.iter().find(|(k, _)| k == key).unwrap().1
}

/// Scores (and labels, where the signature has them) as TensorFlow gave.
fn check_classes(what: &str, got: &tfs::ClassificationResult, scores: &Tensor, labels: Option<&Tensor>) {
    let [examples, classes] = scores.dims().try_into().unwrap();
    assert_eq!(got.classifications.len(), examples, "{what}");
    let want = scores.as_slice::<f32>().unwrap();
    for (i, c) in got.classifications.iter().enumerate() {
        assert_eq!(c.classes.len(), classes, "{what}");
        for (j, class) in c.classes.iter().enumerate() {
            let at = i * classes + j;
            assert!((class.score - want[at]).abs() <= 1e-6, "{what}: score [{i}][{j}] {} vs {}", class.score, want[at]);
            let label = labels.map(|l| l.strings().unwrap().get(at).unwrap().to_vec()).unwrap_or_default();
            assert_eq!(class.label.as_bytes(), label, "{what}: label [{i}][{j}]");
        }
    }
}

fn values_close(what: &str, got: &[f32], want: &Tensor) {
    let want = want.as_slice::<f32>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)), "{what}: {got:?} vs {want:?}");
}

#[test]
fn classify_regress_and_multi_inference_answer_as_tensorflow_serving_does() {
    let server = ModelServer::shared();
    let channel = server.channel();
    let case = SavedModelCase::load(&case_dir(EXAMPLES_CASE)).unwrap();
    let examples = &case.steps[0].inputs[0].1;
    let context = context_of(&case);
    let model = |signature: &str| spec(EXAMPLES_CASE, None, "", signature);

    // Classify: labels and scores, then scores alone; with a context.
    let request = tfs::ClassificationRequest { model_spec: model(""), input: example_list(examples, None) };
    let answer: tfs::ClassificationResponse = channel.call_service(PREDICTION, "Classify", &request, TIMEOUT).unwrap();
    let answered = answer.model_spec.unwrap();
    assert_eq!((answered.version.unwrap().value, answered.signature_name.as_str()), (1, "serving_default"));
    let step = &case.steps[0];
    check_classes("classify", &answer.result.unwrap(), output(step, "scores"), Some(output(step, "classes")));
    let request = tfs::ClassificationRequest { model_spec: model("scores_only"), input: example_list(examples, None) };
    let answer: tfs::ClassificationResponse = channel.call_service(PREDICTION, "Classify", &request, TIMEOUT).unwrap();
    check_classes("scores only", &answer.result.unwrap(), output(&case.steps[1], "scores"), None);
    let request = tfs::ClassificationRequest { model_spec: model(""), input: example_list(examples, Some(&context)) };
    let answer: tfs::ClassificationResponse = channel.call_service(PREDICTION, "Classify", &request, TIMEOUT).unwrap();
    let step = &case.steps[4];
    check_classes(
        "classify with context",
        &answer.result.unwrap(),
        output(step, "scores"),
        Some(output(step, "classes")),
    );

    // Regress, with and without a context.
    for (context, step) in [(None, 2), (Some(context.as_slice()), 5)] {
        let request = tfs::RegressionRequest { model_spec: model("regress"), input: example_list(examples, context) };
        let answer: tfs::RegressionResponse = channel.call_service(PREDICTION, "Regress", &request, TIMEOUT).unwrap();
        let values: Vec<f32> = answer.result.unwrap().regressions.iter().map(|r| r.value).collect();
        values_close(&format!("regress, step {step}"), &values, output(&case.steps[step], "outputs"));
    }

    // MultiInference: both kinds on one input, answered in the order asked.
    let task =
        |signature: &str, method: &str| tfs::InferenceTask { model_spec: model(signature), method_name: method.into() };
    let request = tfs::MultiInferenceRequest {
        tasks: vec![
            task("regress", "tensorflow/serving/regress"),
            task("serving_default", "tensorflow/serving/classify"),
        ],
        input: example_list(examples, None),
    };
    let answer: tfs::MultiInferenceResponse =
        channel.call_service(PREDICTION, "MultiInference", &request, TIMEOUT).unwrap();
    let [regressed, classified] = answer.results.try_into().unwrap();
    assert_eq!(regressed.model_spec.unwrap().signature_name, "regress");
    let values: Vec<f32> = regressed.regression_result.unwrap().regressions.iter().map(|r| r.value).collect();
    values_close("multi regress", &values, output(&case.steps[2], "outputs"));
    let step = &case.steps[0];
    check_classes(
        "multi classify",
        &classified.classification_result.unwrap(),
        output(step, "scores"),
        Some(output(step, "classes")),
    );

    // The REST API, with the examples as JSON features.
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(case_dir(EXAMPLES_CASE).join("examples.json")).unwrap()).unwrap();
    let body = json!({"examples": json["examples"]}).to_string();
    let (code, answer) = server.http("POST", &format!("/v1/models/{EXAMPLES_CASE}:classify"), Some(&body));
    assert_eq!(code, 200, "{answer}");
    let rest_classes = tfs::ClassificationResult {
        classifications: answer["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|classes| tfs::Classifications {
                classes: classes
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|pair| tfs::Class {
                        label: pair[0].as_str().unwrap().into(),
                        score: pair[1].as_f64().unwrap() as f32,
                    })
                    .collect(),
            })
            .collect(),
    };
    check_classes("REST classify", &rest_classes, output(step, "scores"), Some(output(step, "classes")));
    let body =
        json!({"signature_name": "regress", "examples": json["examples"], "context": json["context"]}).to_string();
    let (code, answer) = server.http("POST", &format!("/v1/models/{EXAMPLES_CASE}/versions/1:regress"), Some(&body));
    assert_eq!(code, 200, "{answer}");
    let values: Vec<f32> = answer["result"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    values_close("REST regress with context", &values, output(&case.steps[5], "outputs"));

    // Wrong requests name what is wrong; the model serves on.
    let classify_err = |request: &tfs::ClassificationRequest| {
        let got: ringflow::error::Result<tfs::ClassificationResponse> =
            channel.call_service(PREDICTION, "Classify", request, TIMEOUT);
        got.err().unwrap()
    };
    let predict_sig =
        classify_err(&tfs::ClassificationRequest { model_spec: model("predict"), input: example_list(examples, None) });
    assert!(
        predict_sig.message.contains("'predict'") && predict_sig.message.contains("tensorflow/serving/predict"),
        "{predict_sig}"
    );
    let empty = classify_err(&tfs::ClassificationRequest { model_spec: model(""), input: None });
    assert!(empty.message.contains("Input is empty"), "{empty}");
    let regress_on_classifier = tfs::RegressionRequest { model_spec: model(""), input: example_list(examples, None) };
    let got: ringflow::error::Result<tfs::RegressionResponse> =
        channel.call_service(PREDICTION, "Regress", &regress_on_classifier, TIMEOUT);
    let err = got.err().unwrap();
    assert!(err.message.contains("regression signature method_name"), "{err}");
    for (tasks, culprit) in [
        (
            vec![task("regress", "tensorflow/serving/regress"), task("regress", "tensorflow/serving/regress")],
            "Duplicate evaluation of signature: regress",
        ),
        (
            vec![
                task("regress", "tensorflow/serving/regress"),
                tfs::InferenceTask {
                    model_spec: spec("mlp", None, "", ""),
                    method_name: "tensorflow/serving/classify".into(),
                },
            ],
            "same model name",
        ),
        (vec![task("predict", "tensorflow/serving/predict")], "Unsupported signature method_name"),
    ] {
        let request = tfs::MultiInferenceRequest { tasks, input: example_list(examples, None) };
        let got: ringflow::error::Result<tfs::MultiInferenceResponse> =
            channel.call_service(PREDICTION, "MultiInference", &request, TIMEOUT);
        let err = got.err().unwrap();
        assert!(err.message.contains(culprit), "{err}");
    }
    for (body, culprit) in [
        (r#"{"examples": [{"x": []}]}"#, "example 0, feature 'x'"),
        (r#"{"examples": [{"x": [1, "a"]}]}"#, "feature 'x'"),
        (r#"{"examples": {"x": 1}}"#, "'examples' must be a list"),
        (r#"{"instances": [1]}"#, "no 'examples'"),
    ] {
        let (code, answer) = server.http("POST", &format!("/v1/models/{EXAMPLES_CASE}:classify"), Some(body));
        let message = answer["error"].as_str().unwrap_or_default();
        assert_eq!(code, 400, "{body}: {answer}");
        assert!(message.contains(culprit), "{body}: {message}");
    }
    let request = tfs::ClassificationRequest { model_spec: model(""), input: example_list(examples, None) };
    let answer: tfs::ClassificationResponse = channel.call_service(PREDICTION, "Classify", &request, TIMEOUT).unwrap();
    let step = &case.steps[0];
    check_classes(
        "classify after errors",
        &answer.result.unwrap(),
        output(step, "scores"),
        Some(output(step, "classes")),
    );
}

#[test]
fn wrong_requests_name_their_culprit_and_the_server_serves_on() {
    let server = ModelServer::shared();
    let channel = server.channel();
    let x = Tensor::from_slice([1, 4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let grpc_err = |request: &tfs::PredictRequest| predict(&channel, request).err().unwrap();

    let unknown = grpc_err(&predict_request(spec("nope", None, "", ""), &[("x".into(), x.clone())], &[]));
    assert_eq!(unknown.code, ringflow::error::Code::NotFound);
    assert!(unknown.message.contains("'nope'") && unknown.message.contains("mlp"), "{unknown}");
    let version = grpc_err(&predict_request(spec("mlp", Some(9), "", ""), &[("x".into(), x.clone())], &[]));
    assert!(version.message.contains("version 9") && version.message.contains("1, 2"), "{version}");
    let key = grpc_err(&predict_request(spec("mlp", None, "", ""), &[("y".into(), x.clone())], &[]));
    assert_eq!(key.code, ringflow::error::Code::InvalidArgument);
    assert!(key.message.contains("'y'") && key.message.contains("mlp"), "{key}");
    let signature = grpc_err(&predict_request(spec("mlp", None, "", "classify"), &[("x".into(), x.clone())], &[]));
    assert!(signature.message.contains("'classify'") && signature.message.contains("serving_default"), "{signature}");
    let filter = grpc_err(&predict_request(spec("mlp", None, "", ""), &[("x".into(), x.clone())], &["logits".into()]));
    assert!(filter.message.contains("'logits'") && filter.message.contains("output_0"), "{filter}");
    let ints = Tensor::from_slice([1, 4], &[1i64, 2, 3, 4]).unwrap();
    let dtype = grpc_err(&predict_request(spec("mlp", None, "", ""), &[("x".into(), ints)], &[]));
    assert!(dtype.message.contains("'x'"), "{dtype}");
    let nospec = grpc_err(&predict_request(None, &[], &[]));
    assert!(nospec.message.contains("model_spec"), "{nospec}");
    let reload: ringflow::error::Result<tfs::PredictResponse> =
        channel.call_service(MODEL_SERVICE, "HandleReloadConfigRequest", &tfs::PredictRequest::default(), TIMEOUT);
    assert_eq!(reload.err().unwrap().code, ringflow::error::Code::Unimplemented);

    for (path, body, want_code, culprit) in [
        ("/v1/models/nope:predict", r#"{"instances": [[1, 2, 3, 4]]}"#, 404, "'nope'"),
        ("/v1/models/mlp:predict", r#"{"instances": [[1, 2, 3, 4]"#, 400, "not JSON"),
        ("/v1/models/mlp:predict", r#"{"inputs": {"y": [[1, 2, 3, 4]]}}"#, 400, "'y'"),
        ("/v1/models/mlp:predict", r#"{"instances": [[1, 2, 3, 4], [1, 2]]}"#, 400, "rectangular"),
        ("/v1/models/mlp:predict", r#"{"instances": [["a", 2, 3, 4]]}"#, 400, "element 0"),
        ("/v1/models/mlp/versions/7:predict", r#"{"instances": [[1, 2, 3, 4]]}"#, 404, "version 7"),
        ("/v1/models/mlp:classify", r#"{"examples": [{"x": 1}]}"#, 400, "tensorflow/serving/classify. Was"),
        ("/v1/models/mlp:explain", "{}", 501, "':explain'"),
        ("/v2/models/mlp:predict", "{}", 400, "/v2/models/mlp"),
    ] {
        let (code, answer) = server.http("POST", path, Some(body));
        let message = answer["error"].as_str().unwrap_or_default();
        assert_eq!(code, want_code, "{path} {body}: {answer}");
        assert!(message.contains(culprit), "{path} {body}: {message}");
    }

    let loaded = SavedModelCase::load(&case_dir("keras_mlp_export")).unwrap();
    let step = &loaded.steps[0];
    let (_, got) = predict(&channel, &predict_request(spec("mlp", None, "", ""), &step.inputs, &[])).unwrap();
    check_outputs("mlp after errors", &got, &step.outputs, None);
}

#[test]
fn a_cluster_task_serves_models_with_the_model_flag_once_its_peers_are_up() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("cnn");
    std::fs::create_dir(&base).unwrap();
    std::os::unix::fs::symlink(case_dir("keras_cnn_export"), base.join("5")).unwrap();
    let [a, b, rest] = free_ports();
    let spec_file = dir.path().join("cluster.toml");
    std::fs::write(&spec_file, format!("[cluster]\nworker = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\n")).unwrap();
    let start = |task: &str, extra: &[String]| {
        Command::new(binary())
            .args(["server", "--job", "worker", "--task", task, "--exit-on-stdin-eof", "--cluster"])
            .arg(&spec_file)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The serving task starts first: it waits for task 1 before it loads
    // the model, as servers deployed one per node start in any order.
    let mut serving = start("0", &[format!("--model=cnn={}", base.display()), format!("--rest-api-port={rest}")]);
    std::thread::sleep(Duration::from_millis(300));
    let mut other = start("1", &[]);
    let stdout = serving.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines.by_ref().map_while(Result::ok).any(|line| line.contains("REST API on"));
    assert!(ready, "the serving task prints its REST address");

    let loaded = SavedModelCase::load(&case_dir("keras_cnn_export")).unwrap();
    let step = &loaded.steps[0];
    let channel = GrpcChannel::connect(&format!("127.0.0.1:{a}")).unwrap();
    let (response, got) = predict(&channel, &predict_request(spec("cnn", None, "", ""), &step.inputs, &[])).unwrap();
    assert_eq!(response.model_spec.unwrap().version.unwrap().value, 5);
    check_outputs("cnn on a cluster task", &got, &step.outputs, loaded.file.tolerance);
    let mut stream = TcpStream::connect(format!("127.0.0.1:{rest}")).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let (code, body) = http_on(&mut stream, "GET", "/v1/models/cnn", None, true);
    assert_eq!((code, body["model_version_status"][0]["version"].as_str()), (200, Some("5")));
    for child in [&mut serving, &mut other] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn bench_serving_times_both_apis_against_the_in_process_call() {
    let dir = case_dir("keras_mlp_export");
    let feed = format!("x={}", dir.join("input_x.npy").display());
    let out = Command::new(binary())
        .args(["bench", "serving"])
        .arg(&dir)
        .args(["--feed", &feed, "--steps", "30", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let figures: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for metric in ["p50_grpc", "p99_grpc", "p50_rest", "p99_rest"] {
        let f = figures.iter().find(|f| f["metric"] == metric).unwrap_or_else(|| panic!("{metric}: {text}"));
        assert_eq!((f["scenario"].as_str(), f["unit"].as_str()), (Some("serving"), Some("us")), "{f}");
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
    }
    let wrong = Command::new(binary()).args(["bench", "serving"]).arg(dir.join("variables")).output().unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not a SavedModel directory"));
}
