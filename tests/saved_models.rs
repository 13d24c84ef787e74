//! SavedModels as TensorFlow writes them (Keras `model.export` of an MLP,
//! a CNN, recurrent layers, a transformer block, text and integer
//! preprocessing; `tf.saved_model.save` of modules with two signatures, a
//! vocabulary file or a training signature called step after step; TF1's `SavedModelBuilder`), loaded as a server loads them (variables restored,
//! init op run) and served by signature, in process and on a 2-task
//! cluster of real server processes; the errors a wrong call gets, each
//! naming its culprit, with the model serving on; and the CLI's
//! `run --saved-model` and `inspect`.

use ringflow::cli::verify::SavedModelCase;
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::saved_model::{LoadedModel, default_tags};
use ringflow::session::{SessionConfig, SessionOptions};
use ringflow::{DType, Tensor};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CASES: [&str; 15] = [
    "keras_mlp_export",
    "keras_cnn_export",
    "tf_module_signatures",
    "tf1_builder",
    "keras_text_export",
    "tf_module_vocab_file",
    "keras_recurrent_export",
    "keras_transformer_export",
    "keras_categorical_export",
    "tf_module_training",
    "keras_text_bags_export",
    "keras_augment_text_export",
    "tf_module_parse_example",
    "tf1_classify_regress",
    "keras_image_bytes_export",
];

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringflow"))
}

fn case_dir(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved-models").join(case)
}

fn f32s(shape: &[usize], values: &[f32]) -> ringflow::error::Result<Tensor> {
    Tensor::from_slice(shape, values)
}

fn i64s(shape: &[usize], values: &[i64]) -> ringflow::error::Result<Tensor> {
    Tensor::from_slice(shape, values)
}

fn isolated(target: &str) -> SessionOptions {
    let config = SessionConfig { isolate_session_state: true, ..SessionConfig::default() };
    SessionOptions { target: target.to_string(), config, ..SessionOptions::default() }
}

#[test]
fn every_case_serves_tensorflows_outputs_in_process() {
    for case in CASES {
        let loaded = SavedModelCase::load(&case_dir(case)).unwrap();
        loaded.check(&isolated("")).unwrap_or_else(|e| panic!("{case}: {e}"));
    }
}

#[test]
fn every_case_serves_tensorflows_outputs_on_a_cluster() {
    static CLUSTER: OnceLock<LocalCluster> = OnceLock::new();
    let cluster = CLUSTER
        .get_or_init(|| LocalCluster::start(binary(), 2, &LocalClusterOptions::default()).expect("cluster starts"));
    for case in CASES {
        let loaded = SavedModelCase::load(&case_dir(case)).unwrap();
        loaded.check(&isolated(&cluster.target(0))).unwrap_or_else(|e| panic!("{case} on a cluster: {e}"));
    }
}

#[test]
fn wrong_calls_name_their_culprit_and_the_model_serves_on() {
    let model = LoadedModel::load(case_dir("tf_module_signatures"), &default_tags(), &isolated("")).unwrap();
    let features = || ("features".to_string(), f32s(&[1, 3], &[1.0, 2.0, 2.0]).unwrap());
    let err = |r: ringflow::error::Result<Vec<(String, Tensor)>>| r.unwrap_err().to_string();

    let unknown = err(model.run("predict", vec![features()], &[]));
    assert!(unknown.contains("'predict'") && unknown.contains("project") && unknown.contains("shift"), "{unknown}");
    let key = err(model.run("project", vec![("x".into(), f32s(&[1, 3], &[0.0; 3]).unwrap())], &[]));
    assert!(key.contains("no input 'x'") && key.contains("features"), "{key}");
    let missing = err(model.run("shift", vec![("ids".into(), i64s(&[1], &[4]).unwrap())], &[]));
    assert!(missing.contains("input 'step' is not fed"), "{missing}");
    let dtype = err(model.run("project", vec![("features".into(), i64s(&[1, 3], &[1, 2, 3]).unwrap())], &[]));
    assert!(dtype.contains("input 'features'") && dtype.contains("F32") && dtype.contains("I64"), "{dtype}");
    let output = err(model.run("project", vec![features()], &["logits".to_string()]));
    assert!(
        output.contains("no output 'logits'") && output.contains("norm") && output.contains("projected"),
        "{output}"
    );
    let shape = err(model.run("project", vec![("features".into(), f32s(&[1, 2], &[1.0, 2.0]).unwrap())], &[]));
    assert!(shape.contains("signature 'project'"), "{shape}");

    let served = model.run("project", vec![features()], &["norm".to_string()]).unwrap();
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].0, "norm");
    assert_eq!(served[0].1.dtype(), DType::F32);
    assert!((served[0].1.as_slice::<f32>().unwrap()[0] - 3.0).abs() < 1e-6, "|(1,2,2)| = 3: {:?}", served[0].1);
    model.close().unwrap();
}

#[test]
fn a_model_without_its_variables_fails_naming_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(case_dir("keras_mlp_export").join("saved_model.pb"), dir.path().join("saved_model.pb")).unwrap();
    // Nothing to restore: loading succeeds, as TensorFlow's loader does, and
    // a step names the variable it cannot read.
    let model = LoadedModel::load(dir.path(), &default_tags(), &isolated("")).unwrap();
    let x = f32s(&[1, 4], &[0.0; 4]).unwrap();
    let err = model.run("serving_default", vec![("x".into(), x)], &[]).unwrap_err().to_string();
    assert!(err.contains("variable") && err.contains("dense"), "{err}");

    let wrong_tag = LoadedModel::load(case_dir("keras_mlp_export"), &["train".into()], &isolated(""));
    let wrong_tag = wrong_tag.err().expect("no meta graph is tagged train").to_string();
    assert!(wrong_tag.contains("[train]") && wrong_tag.contains("[serve]"), "{wrong_tag}");
}

#[test]
fn a_missing_asset_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let from = case_dir("tf_module_vocab_file");
    for sub in ["", "variables"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), dir.path().join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
    // assets/vocab.txt is not copied.
    let err = LoadedModel::load(dir.path(), &default_tags(), &isolated("")).err().expect("the vocabulary is missing");
    let err = err.to_string();
    assert!(err.contains("vocab.txt") && err.contains("missing"), "{err}");
}

#[test]
fn the_cli_runs_a_signature_and_inspects_a_model() {
    let dir = case_dir("tf1_builder");
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(binary())
        .args(["run", "--saved-model"])
        .arg(&dir)
        .arg("--feed")
        .arg(format!("x={}", dir.join("input_x.npy").display()))
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got = ringflow::tensor::npy::read_npy(out.path().join("y.npy")).unwrap();
    let want = ringflow::tensor::npy::read_npy(dir.join("expect_y.npy")).unwrap();
    got.all_close(&want, 1e-5, 1e-6).unwrap();

    let inspect = Command::new(binary()).arg("inspect").arg(case_dir("tf_module_signatures")).output().unwrap();
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(inspect.status.success(), "{text}{}", String::from_utf8_lossy(&inspect.stderr));
    for line in ["signature 'project'", "signature 'shift'", "input  features:", "output projected:", "variables:"] {
        assert!(text.contains(line), "missing '{line}' in:\n{text}");
    }

    let bad = Command::new(binary())
        .args(["run", "--saved-model"])
        .arg(&dir)
        .args(["--signature", "nope", "--feed"])
        .arg(format!("x={}", dir.join("input_x.npy").display()))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no signature 'nope'"));
}
