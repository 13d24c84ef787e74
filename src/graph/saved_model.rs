//! SavedModel directories, as `tf.saved_model.save`, Keras `model.export`
//! and TF1's `SavedModelBuilder` write them: `saved_model.pb` decoded into
//! the meta graph that carries the wanted tags, its signatures (input and
//! output keys mapped to tensor names), how to restore its variables (the
//! saver's filename tensor and restore op) and how to initialize the rest
//! (tables: the init op, fed the paths of its asset files).
//!
//! Owns: decoding `saved_model.pb` (our own prost structs for the fields
//! read; the rest is skipped) and picking the meta graph. Must not run
//! anything: `session::saved_model` restores and serves.

use super::DataType;
use super::import::{data_type_of, proto::GraphDef, proto::TensorShapeProto};
use crate::error::{Result, Status};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The wire form: only the fields read here (protobuf field numbers as
/// TensorFlow's `saved_model.proto` and `meta_graph.proto` define them).
/// `SignatureDef` and `TensorInfo` are also what TensorFlow Serving's
/// `GetModelMetadata` answers with.
pub mod wire {
    use super::{GraphDef, HashMap, TensorShapeProto};

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SavedModel {
        #[prost(message, repeated, tag = "2")]
        pub meta_graphs: Vec<MetaGraphDef>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MetaGraphDef {
        #[prost(message, optional, tag = "1")]
        pub meta_info_def: Option<MetaInfoDef>,
        #[prost(message, optional, tag = "2")]
        pub graph_def: Option<GraphDef>,
        #[prost(message, optional, tag = "3")]
        pub saver_def: Option<SaverDef>,
        #[prost(map = "string, message", tag = "4")]
        pub collection_def: HashMap<String, CollectionDef>,
        #[prost(map = "string, message", tag = "5")]
        pub signature_def: HashMap<String, SignatureDef>,
        #[prost(message, repeated, tag = "6")]
        pub asset_file_def: Vec<AssetFileDef>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MetaInfoDef {
        #[prost(string, repeated, tag = "4")]
        pub tags: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SaverDef {
        #[prost(string, tag = "1")]
        pub filename_tensor_name: String,
        #[prost(string, tag = "2")]
        pub save_tensor_name: String,
        #[prost(string, tag = "3")]
        pub restore_op_name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CollectionDef {
        #[prost(message, optional, tag = "1")]
        pub node_list: Option<NodeList>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeList {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SignatureDef {
        #[prost(map = "string, message", tag = "1")]
        pub inputs: HashMap<String, TensorInfo>,
        #[prost(map = "string, message", tag = "2")]
        pub outputs: HashMap<String, TensorInfo>,
        #[prost(string, tag = "3")]
        pub method_name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorInfo {
        /// Set for a dense tensor; sparse and composite tensors (fields 4
        /// and 5) leave it empty.
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int32, tag = "2")]
        pub dtype: i32,
        #[prost(message, optional, tag = "3")]
        pub tensor_shape: Option<TensorShapeProto>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AssetFileDef {
        #[prost(message, optional, tag = "1")]
        pub tensor_info: Option<TensorInfo>,
        #[prost(string, tag = "2")]
        pub filename: String,
    }
}

/// The signature TensorFlow stores its init op under (not one to serve).
pub const INIT_OP_SIGNATURE: &str = "__saved_model_init_op";

/// The collections TF1 SavedModels name their init op in, newest first.
const INIT_OP_COLLECTIONS: [&str; 2] = ["saved_model_main_op", "legacy_init_op"];

/// The tag of the meta graph a server loads.
pub const SERVE_TAG: &str = "serve";

/// One end of a signature: a dense tensor of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub tensor: String,
    pub dtype: DataType,
    /// `None`: unknown rank; `-1`: an unknown dimension.
    pub shape: Option<Vec<i64>>,
}

impl std::fmt::Display for TensorInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dtype = match self.dtype {
            DataType::Tensor(d) => format!("{d:?}").to_lowercase(),
            other => format!("{other:?}").to_lowercase(),
        };
        match &self.shape {
            None => write!(f, "{} {dtype} [unknown rank]", self.tensor),
            Some(dims) => {
                let dims: Vec<String> =
                    dims.iter().map(|&d| if d < 0 { "?".to_string() } else { d.to_string() }).collect();
                write!(f, "{} {dtype} [{}]", self.tensor, dims.join(","))
            }
        }
    }
}

/// A function the model serves: its inputs and outputs by key.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub method: String,
    pub inputs: BTreeMap<String, TensorInfo>,
    pub outputs: BTreeMap<String, TensorInfo>,
}

/// How the model's variables come back: feed the checkpoint prefix to
/// `filename_tensor`, run `restore_op`.
#[derive(Debug, Clone, PartialEq)]
pub struct Restore {
    pub filename_tensor: String,
    pub restore_op: String,
}

/// The meta graph picked from a SavedModel, ready to load.
#[derive(Debug)]
pub struct MetaGraph {
    pub dir: PathBuf,
    pub tags: Vec<String>,
    /// As stored: `graph::import::graph_from_proto` makes it runnable.
    pub graph_def: GraphDef,
    /// Sorted by name; the init op's signature left out.
    pub signatures: BTreeMap<String, Signature>,
    /// Signatures that cannot be served here, and why (a sparse or
    /// composite input or output); the others load and serve.
    pub unservable: BTreeMap<String, String>,
    /// `None` when the model has no variables to restore.
    pub restore: Option<Restore>,
    /// The op that initializes tables and the like, run once after restoring.
    pub init_op: Option<String>,
    /// What the init op is fed: each asset placeholder's tensor and the
    /// file it names (under `assets/`).
    pub assets: Vec<(String, PathBuf)>,
}

impl MetaGraph {
    /// The checkpoint prefix of the model's variables
    /// (`variables/variables`), when its index file is there.
    pub fn variables_prefix(&self) -> Option<PathBuf> {
        let prefix = self.dir.join("variables").join("variables");
        prefix.with_extension("index").is_file().then_some(prefix)
    }

    pub fn signature(&self, name: &str) -> Result<&Signature> {
        if let Some(why) = self.unservable.get(name) {
            return Err(Status::unimplemented(format!("SavedModel {}: {why}", self.dir.display())));
        }
        self.signatures.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.signatures.keys().map(String::as_str).collect();
            Status::not_found(format!(
                "SavedModel {} has no signature '{name}' (it has: {})",
                self.dir.display(),
                known.join(", ")
            ))
        })
    }
}

/// Reads `dir/saved_model.pb` and picks the meta graph whose tags are
/// exactly `tags` (as a set; TensorFlow's loader asks the same). Errors
/// name the file and list the tag sets it holds.
pub fn load_meta_graph(dir: &Path, tags: &[String]) -> Result<MetaGraph> {
    let file = dir.join("saved_model.pb");
    let bytes = std::fs::read(&file).map_err(|e| {
        let text = dir.join("saved_model.pbtxt");
        let hint =
            if text.is_file() { " (only saved_model.pbtxt is there: text SavedModels are not read)" } else { "" };
        Status::not_found(format!("cannot read SavedModel {}: {e}{hint}", file.display()))
    })?;
    let here = |e: Status| e.context(file.display());
    let model = wire::SavedModel::decode(bytes.as_slice())
        .map_err(|e| here(Status::invalid_argument(format!("not a binary SavedModel: {e}"))))?;
    let wanted: std::collections::BTreeSet<&str> = tags.iter().map(String::as_str).collect();
    let tags_of = |m: &wire::MetaGraphDef| m.meta_info_def.as_ref().map(|i| i.tags.clone()).unwrap_or_default();
    let picked = model
        .meta_graphs
        .iter()
        .find(|m| tags_of(m).iter().map(String::as_str).collect::<std::collections::BTreeSet<_>>() == wanted)
        .ok_or_else(|| {
            let held: Vec<String> = model.meta_graphs.iter().map(|m| format!("[{}]", tags_of(m).join(","))).collect();
            here(Status::not_found(format!(
                "no meta graph tagged [{}] (it holds: {})",
                tags.join(","),
                if held.is_empty() { "none".to_string() } else { held.join(" ") }
            )))
        })?;
    meta_graph_of(dir, tags_of(picked), picked).map_err(here)
}

fn meta_graph_of(dir: &Path, tags: Vec<String>, def: &wire::MetaGraphDef) -> Result<MetaGraph> {
    let graph_def = def.graph_def.clone().ok_or_else(|| Status::invalid_argument("the meta graph has no graph"))?;
    let mut signatures = BTreeMap::new();
    let mut unservable = BTreeMap::new();
    let mut init_op = None;
    for (name, sig) in &def.signature_def {
        if name == INIT_OP_SIGNATURE {
            // Its one output names the op (written as a tensor name).
            init_op = sig.outputs.values().next().map(|info| op_of(&info.name).to_string());
            continue;
        }
        let ends = |map: &HashMap<String, wire::TensorInfo>, side: &str| -> Result<BTreeMap<String, TensorInfo>> {
            map.iter()
                .map(|(key, info)| {
                    if info.name.is_empty() {
                        return Err(Status::unimplemented(format!(
                            "signature '{name}' {side} '{key}' is a sparse or composite tensor, which is not served"
                        )));
                    }
                    Ok((key.clone(), tensor_info_of(info)))
                })
                .collect()
        };
        match (ends(&sig.inputs, "input"), ends(&sig.outputs, "output")) {
            (Ok(inputs), Ok(outputs)) => {
                signatures.insert(name.clone(), Signature { method: sig.method_name.clone(), inputs, outputs });
            }
            (Err(why), _) | (_, Err(why)) => {
                unservable.insert(name.clone(), why.message.clone());
            }
        }
    }
    if init_op.is_none() {
        init_op = INIT_OP_COLLECTIONS
            .iter()
            .find_map(|c| def.collection_def.get(*c)?.node_list.as_ref()?.value.first().map(|n| op_of(n).to_string()));
    }
    let restore = def.saver_def.as_ref().filter(|s| !s.restore_op_name.is_empty()).map(|s| Restore {
        filename_tensor: s.filename_tensor_name.clone(),
        restore_op: op_of(&s.restore_op_name).to_string(),
    });
    let assets = def
        .asset_file_def
        .iter()
        .filter_map(|a| {
            let info = a.tensor_info.as_ref()?;
            Some((info.name.clone(), dir.join("assets").join(&a.filename)))
        })
        .collect();
    Ok(MetaGraph { dir: dir.to_path_buf(), tags, graph_def, signatures, unservable, restore, init_op, assets })
}

/// `name:0` → `name`; `^name` → `name`.
fn op_of(name: &str) -> &str {
    let name = name.strip_prefix('^').unwrap_or(name);
    name.split_once(':').map_or(name, |(op, _)| op)
}

fn tensor_info_of(info: &wire::TensorInfo) -> TensorInfo {
    let shape = info
        .tensor_shape
        .as_ref()
        .filter(|s| !s.unknown_rank)
        .map(|s| s.dim.iter().map(|d| d.size).collect::<Vec<i64>>());
    // TensorFlow writes no shape at all for some scalars' signatures: read
    // a missing shape as unknown, never as a scalar.
    let shape = if info.tensor_shape.is_none() { None } else { shape };
    TensorInfo { tensor: info.name.clone(), dtype: data_type_of(info.dtype), shape }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::builder::GraphBuilder;
    use crate::tensor::DType;

    fn info(name: &str, dtype: i32) -> wire::TensorInfo {
        wire::TensorInfo { name: name.into(), dtype, tensor_shape: None }
    }

    fn write_model(dir: &Path, metas: Vec<wire::MetaGraphDef>) {
        std::fs::write(dir.join("saved_model.pb"), wire::SavedModel { meta_graphs: metas }.encode_to_vec()).unwrap();
    }

    fn meta(tags: &[&str]) -> wire::MetaGraphDef {
        let mut b = GraphBuilder::new();
        b.placeholder("x", DType::F32);
        let graph = crate::graph::graph_to_pb_bytes(&b.finish());
        wire::MetaGraphDef {
            meta_info_def: Some(wire::MetaInfoDef { tags: tags.iter().map(|t| t.to_string()).collect() }),
            graph_def: Some(GraphDef::decode(graph.as_slice()).unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn picks_the_meta_graph_by_its_tag_set_and_reads_its_signatures() {
        let dir = tempfile::tempdir().unwrap();
        let mut serving = meta(&["serve"]);
        serving.signature_def.insert(
            "serving_default".into(),
            wire::SignatureDef {
                inputs: [("x".to_string(), info("x:0", 1))].into(),
                outputs: [("y".to_string(), info("y:0", 9))].into(),
                method_name: "tensorflow/serving/predict".into(),
            },
        );
        serving.signature_def.insert(
            INIT_OP_SIGNATURE.into(),
            wire::SignatureDef { outputs: [("k".to_string(), info("init_all:0", 0))].into(), ..Default::default() },
        );
        serving.saver_def = Some(wire::SaverDef {
            filename_tensor_name: "saver_filename:0".into(),
            save_tensor_name: "save:0".into(),
            restore_op_name: "restore".into(),
        });
        serving
            .asset_file_def
            .push(wire::AssetFileDef { tensor_info: Some(info("vocab_path:0", 7)), filename: "v.txt".into() });
        write_model(dir.path(), vec![meta(&["train", "serve"]), serving]);

        let picked = load_meta_graph(dir.path(), &["serve".into()]).unwrap();
        assert_eq!(picked.tags, ["serve"]);
        assert_eq!(picked.signatures.keys().collect::<Vec<_>>(), ["serving_default"]);
        let sig = picked.signature("serving_default").unwrap();
        assert_eq!(sig.inputs["x"].tensor, "x:0");
        assert_eq!(sig.outputs["y"].dtype, DataType::Tensor(DType::I64));
        assert_eq!(picked.init_op.as_deref(), Some("init_all"));
        assert_eq!(
            picked.restore,
            Some(Restore { filename_tensor: "saver_filename:0".into(), restore_op: "restore".into() })
        );
        assert_eq!(picked.assets, [("vocab_path:0".to_string(), dir.path().join("assets/v.txt"))]);
        assert_eq!(picked.variables_prefix(), None, "no variables/variables.index");
        let missing = picked.signature("predict").unwrap_err().to_string();
        assert!(missing.contains("'predict'") && missing.contains("serving_default"), "{missing}");

        let both = load_meta_graph(dir.path(), &["serve".into(), "train".into()]).unwrap();
        assert_eq!(both.tags, ["train", "serve"]);
    }

    #[test]
    fn a_tf1_model_names_its_init_op_in_a_collection() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = meta(&["serve"]);
        m.collection_def.insert(
            "legacy_init_op".into(),
            wire::CollectionDef { node_list: Some(wire::NodeList { value: vec!["legacy_init".into()] }) },
        );
        write_model(dir.path(), vec![m]);
        assert_eq!(load_meta_graph(dir.path(), &["serve".into()]).unwrap().init_op.as_deref(), Some("legacy_init"));
    }

    #[test]
    fn errors_name_the_file_and_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let none = load_meta_graph(dir.path(), &["serve".into()]).unwrap_err().to_string();
        assert!(none.contains("saved_model.pb"), "{none}");

        std::fs::write(dir.path().join("saved_model.pbtxt"), "meta_graphs {}").unwrap();
        let text = load_meta_graph(dir.path(), &["serve".into()]).unwrap_err().to_string();
        assert!(text.contains("pbtxt"), "{text}");

        write_model(dir.path(), vec![meta(&["train"])]);
        let tags = load_meta_graph(dir.path(), &["serve".into()]).unwrap_err().to_string();
        assert!(tags.contains("[serve]") && tags.contains("[train]"), "{tags}");

        std::fs::write(dir.path().join("saved_model.pb"), b"\xff\xff\xff").unwrap();
        let garbage = load_meta_graph(dir.path(), &["serve".into()]).unwrap_err().to_string();
        assert!(garbage.contains("saved_model.pb") && garbage.contains("not a binary SavedModel"), "{garbage}");
    }

    #[test]
    fn a_signature_with_sparse_ends_is_refused_by_name_and_the_others_serve() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = meta(&["serve"]);
        m.signature_def.insert(
            "s".into(),
            wire::SignatureDef { inputs: [("ids".to_string(), info("", 9))].into(), ..Default::default() },
        );
        m.signature_def.insert(
            "dense".into(),
            wire::SignatureDef { inputs: [("x".to_string(), info("x:0", 1))].into(), ..Default::default() },
        );
        write_model(dir.path(), vec![m]);
        let picked = load_meta_graph(dir.path(), &["serve".into()]).unwrap();
        assert!(picked.signature("dense").is_ok());
        let err = picked.signature("s").unwrap_err();
        assert_eq!(err.code, crate::error::Code::Unimplemented);
        assert!(err.message.contains("'ids'") && err.message.contains("sparse"), "{err}");
    }
}
