//! A loaded SavedModel: its graph in a session on any target, its
//! variables restored from `variables/` and its tables initialized (the
//! steps TensorFlow's own loader takes), then served by signature: inputs
//! and outputs named by their keys, checked against the signature.
//!
//! Owns: the load sequence and signature runs. Must not decode protobuf
//! (`graph::saved_model` does) nor know where the session runs.

use super::{RunOptions, Session, SessionOptions, create_session};
use crate::error::{Result, Status};
use crate::graph::DataType;
use crate::graph::saved_model::{MetaGraph, Signature, load_meta_graph};
use crate::tensor::Tensor;
use std::path::Path;

/// A signature step in the graph's own names.
pub struct SignatureStep {
    /// Graph tensor name and value, one per input key.
    pub feeds: Vec<(String, Tensor)>,
    /// Output key and the graph tensor it names, in the order asked.
    pub fetches: Vec<(String, String)>,
}

impl SignatureStep {
    /// The graph tensors to fetch, in order.
    pub fn fetch_names(&self) -> Vec<String> {
        self.fetches.iter().map(|(_, tensor)| tensor.clone()).collect()
    }
}

/// A SavedModel ready to serve.
pub struct LoadedModel {
    meta: MetaGraph,
    session: Box<dyn Session>,
}

impl LoadedModel {
    /// Reads `dir`'s meta graph tagged `tags`, creates a session for it on
    /// `options.target`, restores its variables and runs its init op.
    pub fn load(dir: impl AsRef<Path>, tags: &[String], options: &SessionOptions) -> Result<LoadedModel> {
        let dir = dir.as_ref();
        let mut meta = load_meta_graph(dir, tags)?;
        let graph = crate::graph::import::graph_from_proto(&std::mem::take(&mut meta.graph_def))
            .map_err(|e| e.context(format_args!("SavedModel {}", dir.display())))?;
        let session = create_session(graph, options)?;
        let model = LoadedModel { meta, session };
        model.restore_and_initialize().map_err(|e| e.context(format_args!("loading SavedModel {}", dir.display())))?;
        Ok(model)
    }

    fn restore_and_initialize(&self) -> Result<()> {
        if let (Some(restore), Some(prefix)) = (&self.meta.restore, self.meta.variables_prefix()) {
            let prefix = Tensor::string_scalar(prefix.to_string_lossy().as_bytes());
            self.session
                .run(
                    &RunOptions::default(),
                    vec![(restore.filename_tensor.clone(), prefix)],
                    &[],
                    std::slice::from_ref(&restore.restore_op),
                )
                .map_err(|e| e.context(format_args!("restoring variables (op '{}')", restore.restore_op)))?;
        }
        if let Some(init) = &self.meta.init_op {
            let mut feeds = Vec::with_capacity(self.meta.assets.len());
            for (tensor, file) in &self.meta.assets {
                if !file.is_file() {
                    return Err(Status::not_found(format!(
                        "asset file {} (fed to {tensor}) is missing",
                        file.display()
                    )));
                }
                feeds.push((tensor.clone(), Tensor::string_scalar(file.to_string_lossy().as_bytes())));
            }
            self.session
                .run(&RunOptions::default(), feeds, &[], std::slice::from_ref(init))
                .map_err(|e| e.context(format_args!("running the init op '{init}'")))?;
        }
        Ok(())
    }

    pub fn meta_graph(&self) -> &MetaGraph {
        &self.meta
    }

    pub fn session(&self) -> &dyn Session {
        self.session.as_ref()
    }

    pub fn signature(&self, name: &str) -> Result<&Signature> {
        self.meta.signature(name)
    }

    /// The graph tensors of a signature step: `inputs` by key (every input
    /// the signature has, each of its dtype) and `outputs` by key (empty:
    /// all, in key order).
    pub fn resolve(&self, signature: &str, inputs: Vec<(String, Tensor)>, outputs: &[String]) -> Result<SignatureStep> {
        let sig = self.signature(signature)?;
        let keys = |map: &std::collections::BTreeMap<String, _>| map.keys().cloned().collect::<Vec<_>>().join(", ");
        let mut feeds = Vec::with_capacity(inputs.len());
        for (key, tensor) in inputs {
            let info = sig.inputs.get(&key).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "signature '{signature}' has no input '{key}' (its inputs: {})",
                    keys(&sig.inputs)
                ))
            })?;
            if let DataType::Tensor(want) = info.dtype
                && want != tensor.dtype()
            {
                return Err(Status::invalid_argument(format!(
                    "signature '{signature}' input '{key}' is {want:?}, fed {:?}",
                    tensor.dtype()
                )));
            }
            if feeds.iter().any(|(name, _)| *name == info.tensor) {
                return Err(Status::invalid_argument(format!("signature '{signature}' input '{key}' fed twice")));
            }
            feeds.push((info.tensor.clone(), tensor));
        }
        if let Some(missing) = sig.inputs.iter().find(|(_, info)| !feeds.iter().any(|(n, _)| *n == info.tensor)) {
            return Err(Status::invalid_argument(format!(
                "signature '{signature}' input '{}' is not fed (its inputs: {})",
                missing.0,
                keys(&sig.inputs)
            )));
        }
        let fetches = if outputs.is_empty() {
            sig.outputs.iter().map(|(key, info)| (key.clone(), info.tensor.clone())).collect()
        } else {
            outputs
                .iter()
                .map(|key| {
                    let info = sig.outputs.get(key).ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "signature '{signature}' has no output '{key}' (its outputs: {})",
                            keys(&sig.outputs)
                        ))
                    })?;
                    Ok((key.clone(), info.tensor.clone()))
                })
                .collect::<Result<Vec<_>>>()?
        };
        Ok(SignatureStep { feeds, fetches })
    }

    /// Runs `signature` on `inputs` (by key) and returns `outputs` (by
    /// key; empty: all, in key order).
    pub fn run(
        &self,
        signature: &str,
        inputs: Vec<(String, Tensor)>,
        outputs: &[String],
    ) -> Result<Vec<(String, Tensor)>> {
        self.run_with(&RunOptions::default(), signature, inputs, outputs)
    }

    /// [`run`](Self::run) with `options` (a deadline, a cancellation).
    pub fn run_with(
        &self,
        options: &RunOptions,
        signature: &str,
        inputs: Vec<(String, Tensor)>,
        outputs: &[String],
    ) -> Result<Vec<(String, Tensor)>> {
        let step = self.resolve(signature, inputs, outputs)?;
        let names = step.fetch_names();
        let (tensors, _) = self
            .session
            .run(options, step.feeds, &names, &[])
            .map_err(|e| e.context(format_args!("signature '{signature}'")))?;
        Ok(step.fetches.into_iter().map(|(key, _)| key).zip(tensors).collect())
    }

    pub fn close(&self) -> Result<()> {
        self.session.close()
    }

    /// The loaded session itself (restored and initialized), for callables
    /// and partial runs on the signature's tensors.
    pub fn into_session(self) -> Box<dyn Session> {
        self.session
    }
}

/// The signature TensorFlow's exporters name the default.
pub const DEFAULT_SIGNATURE: &str = "serving_default";

/// The tags to load when none are named: a server's.
pub fn default_tags() -> Vec<String> {
    vec![crate::graph::saved_model::SERVE_TAG.to_string()]
}
