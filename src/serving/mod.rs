//! A model server as TensorFlow Serving is one: named models, each a base
//! path of numbered version directories holding a SavedModel, the newest
//! version of each loaded into a session on this server's master and
//! served by signature over TensorFlow Serving's gRPC API
//! (`grpc::prediction_service`) and its REST API ([`rest`]).
//!
//! Owns: which models and versions are served ([`Models`]), finding the
//! one a request names (`ModelSpec`: name, version or label, signature)
//! and the predict call on it. Must not decode either wire format (protobuf
//! in `grpc`, JSON in [`json`]) nor run steps other than through
//! `session::saved_model::LoadedModel`.

pub mod config;
pub mod inference;
pub mod json;
pub mod rest;

pub use config::{ModelConfig, VersionPolicy, parse_model_config_file, parse_model_flag};

use crate::error::{Result, Status};
use crate::graph::DataType;
use crate::graph::saved_model::Signature;
use crate::session::saved_model::{DEFAULT_SIGNATURE, LoadedModel};
use crate::session::{RunOptions, SessionOptions};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One loaded version of a model.
pub struct ServedVersion {
    pub version: i64,
    pub dir: PathBuf,
    pub model: LoadedModel,
}

/// A model by name: its base path and the versions loaded from it.
pub struct ServedModel {
    pub name: String,
    pub base_path: PathBuf,
    /// Loaded versions, by number (TensorFlow Serving's default policy:
    /// the newest one alone).
    pub versions: BTreeMap<i64, Arc<ServedVersion>>,
    /// Labels naming versions (`version_labels` in a config file).
    pub labels: BTreeMap<String, i64>,
}

/// What a request asks for: TensorFlow Serving's `ModelSpec`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    pub name: String,
    /// `None`: the newest loaded version.
    pub version: Option<i64>,
    /// A version by label instead of number.
    pub label: Option<String>,
    /// Empty: `serving_default`.
    pub signature: String,
}

impl ModelRequest {
    pub fn signature_or_default(&self) -> &str {
        if self.signature.is_empty() { DEFAULT_SIGNATURE } else { &self.signature }
    }
}

/// A prediction: the version that made it, the signature run and the
/// outputs by key (in key order, or in the order a filter asked).
pub struct Prediction {
    pub version: i64,
    pub signature: String,
    pub outputs: Vec<(String, Tensor)>,
}

/// The state TensorFlow Serving reports for a loaded version.
pub const STATE_AVAILABLE: i32 = 30;

/// The models one server serves.
pub struct Models {
    models: BTreeMap<String, ServedModel>,
    /// A predict's deadline when its call sets none.
    default_timeout: Option<std::time::Duration>,
}

impl Models {
    /// Loads the newest version of each configured model into a session
    /// made with `options` (each its own state: two models may name the
    /// same variables). Any model that does not load fails the whole
    /// server, naming the model and the directory.
    pub fn load(configs: &[ModelConfig], options: &SessionOptions) -> Result<Models> {
        let mut models = BTreeMap::new();
        let mut options = options.clone();
        options.config.isolate_session_state = true;
        for config in configs {
            if models.contains_key(&config.name) {
                return Err(Status::invalid_argument(format!("model '{}' is configured twice", config.name)));
            }
            let in_model = |e: Status| e.context(format_args!("model '{}'", config.name));
            let available = versions_in(&config.base_path).map_err(in_model)?;
            let wanted: Vec<(i64, PathBuf)> = match &config.policy {
                VersionPolicy::Latest(n) => available[available.len().saturating_sub(*n)..].to_vec(),
                VersionPolicy::All => available.clone(),
                VersionPolicy::Specific(numbers) => numbers
                    .iter()
                    .map(|v| {
                        available.iter().find(|(n, _)| n == v).cloned().ok_or_else(|| {
                            in_model(Status::not_found(format!(
                                "version {v} is not under {} (it holds: {})",
                                config.base_path.display(),
                                list_versions(&available)
                            )))
                        })
                    })
                    .collect::<Result<_>>()?,
            };
            let mut versions = BTreeMap::new();
            for (version, dir) in wanted {
                let model = LoadedModel::load(&dir, &config.tags, &options).map_err(in_model)?;
                tracing::info!("model '{}' version {version} loaded from {}", config.name, dir.display());
                versions.insert(version, Arc::new(ServedVersion { version, dir, model }));
            }
            for (label, version) in &config.labels {
                if !versions.contains_key(version) {
                    return Err(in_model(Status::invalid_argument(format!(
                        "label '{label}' names version {version}, which is not loaded"
                    ))));
                }
            }
            models.insert(
                config.name.clone(),
                ServedModel {
                    name: config.name.clone(),
                    base_path: config.base_path.clone(),
                    versions,
                    labels: config.labels.clone(),
                },
            );
        }
        Ok(Models { models, default_timeout: None })
    }

    /// Gives predicts whose call sets no deadline this one.
    pub fn with_default_timeout(mut self, timeout: Option<std::time::Duration>) -> Models {
        self.default_timeout = timeout;
        self
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    pub fn model(&self, name: &str) -> Result<&ServedModel> {
        self.models.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.names().collect();
            Status::not_found(format!(
                "no model named '{name}' is served (served: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ))
        })
    }

    /// The version a request names: by number, by label, else the newest.
    pub fn version(&self, request: &ModelRequest) -> Result<&Arc<ServedVersion>> {
        let model = self.model(&request.name)?;
        let loaded = || model.versions.keys().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let number = match (&request.version, &request.label) {
            (Some(_), Some(_)) => {
                return Err(Status::invalid_argument(format!(
                    "model '{}': a request names a version or a label, not both",
                    model.name
                )));
            }
            (Some(v), None) => *v,
            (None, Some(label)) => *model.labels.get(label).ok_or_else(|| {
                Status::not_found(format!("model '{}' has no version labelled '{label}'", model.name))
            })?,
            (None, None) => *model
                .versions
                .keys()
                .next_back()
                .ok_or_else(|| Status::unavailable(format!("model '{}' has no version loaded", model.name)))?,
        };
        model.versions.get(&number).ok_or_else(|| {
            Status::not_found(format!("model '{}' version {number} is not loaded (loaded: {})", model.name, loaded()))
        })
    }

    /// The signature a request names, on the version it names.
    pub fn signature(&self, request: &ModelRequest) -> Result<(&Arc<ServedVersion>, &Signature)> {
        let version = self.version(request)?;
        let signature = version
            .model
            .signature(request.signature_or_default())
            .map_err(|e| e.context(format_args!("model '{}' version {}", request.name, version.version)))?;
        Ok((version, signature))
    }

    /// Runs the signature a request names on `inputs` (by key), returning
    /// `output_filter`'s outputs (empty: all).
    pub fn predict(
        &self,
        request: &ModelRequest,
        inputs: Vec<(String, Tensor)>,
        output_filter: &[String],
    ) -> Result<Prediction> {
        self.predict_with(request, inputs, output_filter, None)
    }

    /// [`predict`](Self::predict) within `timeout` (`None`: the default
    /// timeout, if any).
    pub fn predict_with(
        &self,
        request: &ModelRequest,
        inputs: Vec<(String, Tensor)>,
        output_filter: &[String],
        timeout: Option<std::time::Duration>,
    ) -> Result<Prediction> {
        let version = self.version(request)?;
        let signature = request.signature_or_default();
        let options = RunOptions { timeout: timeout.or(self.default_timeout), ..RunOptions::default() };
        let outputs = version
            .model
            .run_with(&options, signature, inputs, output_filter)
            .map_err(|e| e.context(format_args!("model '{}' version {}", request.name, version.version)))?;
        Ok(Prediction { version: version.version, signature: signature.to_string(), outputs })
    }

    /// The versions of a model a status request asks about (one, or all
    /// loaded), each available.
    pub fn status(&self, request: &ModelRequest) -> Result<Vec<i64>> {
        if request.version.is_some() || request.label.is_some() {
            return Ok(vec![self.version(request)?.version]);
        }
        Ok(self.model(&request.name)?.versions.keys().copied().collect())
    }

    /// Closes every model's session.
    pub fn close(&self) {
        for model in self.models.values() {
            for version in model.versions.values() {
                if let Err(e) = version.model.close() {
                    tracing::warn!("closing model '{}' version {}: {e}", model.name, version.version);
                }
            }
        }
    }
}

/// TensorFlow's name of a dtype (`DT_FLOAT`), as TensorFlow Serving's
/// JSON metadata writes it.
pub fn tf_dtype_name(dtype: DataType) -> String {
    use crate::tensor::DType;
    match dtype {
        DataType::Tensor(d) => match d {
            DType::F32 => "DT_FLOAT",
            DType::F64 => "DT_DOUBLE",
            DType::I32 => "DT_INT32",
            DType::I64 => "DT_INT64",
            DType::Bool => "DT_BOOL",
            DType::String => "DT_STRING",
            DType::U8 => "DT_UINT8",
            DType::U64 => "DT_UINT64",
            DType::Complex64 => "DT_COMPLEX64",
            DType::F16 => "DT_HALF",
            DType::BF16 => "DT_BFLOAT16",
            DType::I8 => "DT_INT8",
            DType::I16 => "DT_INT16",
            DType::U16 => "DT_UINT16",
            DType::U32 => "DT_UINT32",
        }
        .to_string(),
        DataType::Resource => "DT_RESOURCE".to_string(),
        DataType::Variant => "DT_VARIANT".to_string(),
        DataType::Unsupported(n) => format!("DT_{n}"),
    }
}

/// The version directories under `base_path`, oldest first: numbered
/// subdirectories holding `saved_model.pb`, TensorFlow Serving's layout.
pub fn versions_in(base_path: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let entries = std::fs::read_dir(base_path)
        .map_err(|e| Status::not_found(format!("cannot read model base path {}: {e}", base_path.display())))?;
    let mut versions = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(number) = name.to_str().and_then(|n| n.parse::<i64>().ok()) else {
            continue;
        };
        let dir = entry.path();
        if number >= 0 && dir.join("saved_model.pb").is_file() {
            versions.push((number, dir));
        }
    }
    versions.sort();
    if versions.is_empty() {
        let hint = if base_path.join("saved_model.pb").is_file() {
            format!(
                "; it is a SavedModel itself: TensorFlow Serving's layout puts each version in a numbered directory ({}/1/saved_model.pb)",
                base_path.display()
            )
        } else {
            String::new()
        };
        return Err(Status::not_found(format!(
            "no version under {} (a numbered directory holding saved_model.pb){hint}",
            base_path.display()
        )));
    }
    Ok(versions)
}

fn list_versions(versions: &[(i64, PathBuf)]) -> String {
    versions.iter().map(|(v, _)| v.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(case: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved-models").join(case)
    }

    fn base_with_versions(versions: &[i64]) -> tempfile::TempDir {
        let base = tempfile::tempdir().unwrap();
        for v in versions {
            std::os::unix::fs::symlink(fixture("keras_mlp_export"), base.path().join(v.to_string())).unwrap();
        }
        std::fs::create_dir(base.path().join("not-a-version")).unwrap();
        base
    }

    fn config(name: &str, base: &Path) -> ModelConfig {
        ModelConfig { name: name.into(), base_path: base.to_path_buf(), ..ModelConfig::default() }
    }

    #[test]
    fn the_newest_numbered_version_is_found_and_others_are_ignored() {
        let base = base_with_versions(&[1, 10, 2]);
        let found: Vec<i64> = versions_in(base.path()).unwrap().into_iter().map(|(v, _)| v).collect();
        assert_eq!(found, [1, 2, 10]);
    }

    #[test]
    fn a_bare_saved_model_as_base_path_is_refused_with_the_layout_to_use() {
        let err = versions_in(&fixture("keras_mlp_export")).unwrap_err().to_string();
        assert!(err.contains("keras_mlp_export/1/saved_model.pb"), "{err}");
    }

    #[test]
    fn requests_find_versions_by_number_label_or_newest_and_name_what_is_missing() {
        let base = base_with_versions(&[3, 7]);
        let mut cfg = config("mlp", base.path());
        cfg.policy = VersionPolicy::Specific(vec![3, 7]);
        cfg.labels.insert("stable".into(), 3);
        let models = Models::load(&[cfg], &SessionOptions::default()).unwrap();
        let request = |version, label: Option<&str>| ModelRequest {
            name: "mlp".into(),
            version,
            label: label.map(str::to_string),
            signature: String::new(),
        };
        assert_eq!(models.version(&request(None, None)).unwrap().version, 7);
        assert_eq!(models.version(&request(Some(3), None)).unwrap().version, 3);
        assert_eq!(models.version(&request(None, Some("stable"))).unwrap().version, 3);
        let missing = models.version(&request(Some(5), None)).err().unwrap().to_string();
        assert!(missing.contains("version 5") && missing.contains("3, 7"), "{missing}");
        let unknown = models.model("other").err().unwrap().to_string();
        assert!(unknown.contains("'other'") && unknown.contains("mlp"), "{unknown}");
        let x = Tensor::from_slice([1, 4], &[0.5f32, -1.0, 2.0, 0.0]).unwrap();
        let prediction = models.predict(&request(None, None), vec![("x".into(), x)], &[]).unwrap();
        assert_eq!(prediction.version, 7);
        assert_eq!(prediction.outputs[0].0, "output_0");
        assert_eq!(models.status(&request(None, None)).unwrap(), [3, 7]);
        models.close();
    }
}
