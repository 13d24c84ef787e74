//! `ringflow inspect G.pb` (or a SavedModel directory): what a graph holds
//! and whether this runtime can run it, before running it: its ops with
//! counts (function bodies included), the ops or attrs this runtime lacks
//! (with a node that uses each), the devices pinned, the placeholders, and
//! the likely outputs; for a SavedModel also its signatures, variables and
//! init op.
//!
//! Owns: the report. Must not run the graph.

use crate::error::{Result, Status};
use crate::graph::import::{graph_from_proto, proto};
use crate::graph::saved_model;
use crate::graph::spec::GraphSpec;
use crate::graph::validate::resolve_node;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// What `inspect` found.
#[derive(Debug, Default)]
pub struct Report {
    /// Op → number of nodes (top-level graph and every library function).
    pub op_counts: BTreeMap<String, usize>,
    /// Op → (nodes using it, the first such node, why it cannot run).
    pub unsupported: BTreeMap<String, (usize, String, String)>,
    pub devices: BTreeSet<String>,
    /// (name, dtype, shape) of every placeholder.
    pub placeholders: Vec<(String, String, String)>,
    /// Tensors no node consumes, of nodes that are not sinks by nature.
    pub likely_outputs: Vec<String>,
    pub functions: usize,
    /// Why the graph cannot be imported as a whole, if it cannot.
    pub import_error: Option<String>,
    /// A SavedModel's signatures, variables and init op, one line each.
    pub saved_model: Option<Vec<String>>,
}

impl Report {
    pub fn runnable(&self) -> bool {
        self.unsupported.is_empty() && self.import_error.is_none()
    }
}

/// Inspects the binary GraphDef at `path`, or the SavedModel directory
/// `path` (its meta graph tagged `serve`).
pub fn inspect(path: &Path) -> Result<Report> {
    if path.is_dir() {
        let meta = saved_model::load_meta_graph(path, &[saved_model::SERVE_TAG.to_string()])?;
        let mut report = inspect_def(&meta.graph_def);
        report.saved_model = Some(saved_model_lines(&meta));
        return Ok(report);
    }
    let bytes =
        std::fs::read(path).map_err(|e| Status::not_found(format!("cannot read graph {}: {e}", path.display())))?;
    let def = proto::GraphDef::decode(bytes.as_slice())
        .map_err(|e| Status::invalid_argument(format!("{}: not a binary GraphDef: {e}", path.display())))?;
    Ok(inspect_def(&def))
}

/// What a SavedModel serves and how it loads, one line each.
fn saved_model_lines(meta: &saved_model::MetaGraph) -> Vec<String> {
    let mut lines = vec![format!("meta graph tagged [{}]", meta.tags.join(","))];
    for (name, sig) in &meta.signatures {
        lines.push(format!("signature '{name}' ({})", sig.method));
        for (key, info) in &sig.inputs {
            lines.push(format!("  input  {key}: {info}"));
        }
        for (key, info) in &sig.outputs {
            lines.push(format!("  output {key}: {info}"));
        }
    }
    for (name, why) in &meta.unservable {
        lines.push(format!("signature '{name}': not served ({why})"));
    }
    match (&meta.restore, meta.variables_prefix()) {
        (Some(r), Some(prefix)) => {
            lines.push(format!("variables: {} restored by '{}'", prefix.display(), r.restore_op))
        }
        (_, None) => lines.push("variables: none".to_string()),
        (None, Some(prefix)) => lines.push(format!("variables: {} but no saver to restore them", prefix.display())),
    }
    if let Some(init) = &meta.init_op {
        lines.push(format!("init op: '{init}' ({} asset files)", meta.assets.len()));
    }
    lines
}

fn inspect_def(def: &proto::GraphDef) -> Report {
    let mut report = Report::default();
    let library = def.library.as_ref().map(|l| l.function.as_slice()).unwrap_or_default();
    let function_names: BTreeSet<&str> =
        library.iter().filter_map(|f| f.signature.as_ref()).map(|s| s.name.as_str()).collect();
    report.functions = function_names.len();
    let all_nodes = def.node.iter().chain(library.iter().flat_map(|f| f.node_def.iter()));
    for node in all_nodes {
        *report.op_counts.entry(node.op.clone()).or_default() += 1;
        if !node.device.is_empty() {
            report.devices.insert(node.device.clone());
        }
    }
    match graph_from_proto(def) {
        Ok(graph) => check_nodes(&graph, &mut report),
        Err(e) => report.import_error = Some(e.to_string()),
    }
    for node in &def.node {
        if node.op == "Placeholder" || node.op == "PlaceholderWithDefault" {
            let attr = |k: &str| node.attr.get(k).and_then(|a| a.value.as_ref());
            let dtype = match attr("dtype") {
                Some(proto::attr_value::Value::Type(t)) => dtype_name(*t),
                _ => "?".to_string(),
            };
            let shape = match attr("shape") {
                Some(proto::attr_value::Value::Shape(s)) if s.unknown_rank => "<unknown>".to_string(),
                Some(proto::attr_value::Value::Shape(s)) => {
                    let dims: Vec<String> =
                        s.dim.iter().map(|d| if d.size < 0 { "?".into() } else { d.size.to_string() }).collect();
                    format!("[{}]", dims.join(","))
                }
                _ => "<unknown>".to_string(),
            };
            report.placeholders.push((node.name.clone(), dtype, shape));
        }
    }
    report.likely_outputs = likely_outputs(&def.node);
    let _ = function_names;
    report
}

/// Resolves every node of the expanded graph: an op that is missing, or
/// whose attrs (a dtype, a data format) this runtime refuses, is listed.
fn check_nodes(graph: &GraphSpec, report: &mut Report) {
    for node in &graph.nodes {
        if let Err(e) = resolve_node(node) {
            let entry =
                report.unsupported.entry(node.op.clone()).or_insert_with(|| (0, node.name.clone(), e.message.clone()));
            entry.0 += 1;
        }
    }
}

/// Outputs of nodes nobody reads, leaving out ops that are sinks by nature
/// (initialisers, assignments, savers, no-ops).
fn likely_outputs(nodes: &[proto::NodeDef]) -> Vec<String> {
    let mut consumed: BTreeSet<String> = BTreeSet::new();
    for node in nodes {
        for input in &node.input {
            let name = input.trim_start_matches('^');
            let node_name = name.split(':').next().unwrap_or(name);
            consumed.insert(node_name.to_string());
        }
    }
    let sink = |op: &str| {
        matches!(op, "NoOp" | "Assert" | "SaveV2" | "Save" | "RestoreV2" | "MergeV2Checkpoints" | "Const")
            || op.starts_with("Assign")
            || op.starts_with("Apply")
            || op.starts_with("ResourceApply")
            || op.contains("Variable")
            || op == "VarHandleOp"
    };
    nodes.iter().filter(|n| !consumed.contains(&n.name) && !sink(&n.op)).map(|n| format!("{}:0", n.name)).collect()
}

fn dtype_name(t: i32) -> String {
    match t {
        1 => "float32",
        2 => "float64",
        3 => "int32",
        4 => "uint8",
        5 => "int16",
        6 => "int8",
        7 => "string",
        9 => "int64",
        10 => "bool",
        8 => "complex64",
        14 => "bfloat16",
        17 => "uint16",
        19 => "float16",
        22 => "uint32",
        23 => "uint64",
        20 => "resource",
        21 => "variant",
        _ => return format!("dtype #{t}"),
    }
    .to_string()
}

/// The report as text.
pub fn format_report(path: &Path, report: &Report) -> String {
    let mut out = String::new();
    let nodes: usize = report.op_counts.values().sum();
    let _ = writeln!(
        out,
        "{}: {nodes} nodes, {} ops, {} library functions",
        path.display(),
        report.op_counts.len(),
        report.functions
    );
    if let Some(lines) = &report.saved_model {
        let _ = writeln!(out, "\nSavedModel:");
        for line in lines {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "\nops (count):");
    for (op, count) in &report.op_counts {
        let mark = if report.unsupported.contains_key(op) { "  <- not supported" } else { "" };
        let _ = writeln!(out, "  {op:<32} {count:>6}{mark}");
    }
    if let Some(e) = &report.import_error {
        let _ = writeln!(out, "\ncannot import: {e}");
    }
    if report.unsupported.is_empty() && report.import_error.is_none() {
        let _ = writeln!(out, "\nsupported: every op and attr of this graph runs here");
    } else if !report.unsupported.is_empty() {
        let _ = writeln!(out, "\nnot supported ({} ops):", report.unsupported.len());
        for (op, (count, first, why)) in &report.unsupported {
            let _ = writeln!(out, "  {op} ({count} nodes, e.g. '{first}'): {why}");
        }
    }
    let _ = writeln!(out, "\ndevices pinned: {}", join_or_none(report.devices.iter().cloned()));
    let _ = writeln!(out, "placeholders:");
    if report.placeholders.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for (name, dtype, shape) in &report.placeholders {
        let _ = writeln!(out, "  {name}:0  {dtype} {shape}");
    }
    let _ = writeln!(out, "likely outputs: {}", join_or_none(report.likely_outputs.iter().cloned()));
    out
}

fn join_or_none(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() { "none".to_string() } else { v.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::builder::trivial_add_graph;
    use crate::graph::import::graph_to_pb_bytes;
    use crate::graph::spec::NodeSpec;

    #[test]
    fn a_supported_graph_reports_its_ops_placeholders_and_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.pb");
        std::fs::write(&path, graph_to_pb_bytes(&trivial_add_graph())).unwrap();
        let report = inspect(&path).unwrap();
        assert!(report.runnable(), "{report:?}");
        assert_eq!(report.op_counts["AddV2"], 1);
        assert_eq!(report.placeholders, vec![("x".to_string(), "float32".to_string(), "<unknown>".to_string())]);
        assert_eq!(report.likely_outputs, vec!["y:0".to_string()]);
        assert!(format_report(&path, &report).contains("supported: every op"));
    }

    #[test]
    fn missing_ops_and_refused_dtypes_are_named_with_a_node() {
        let mut g = trivial_add_graph();
        g.nodes.push(NodeSpec::new("mystery", "FrobnicateV7").input("y", 0));
        let mut bad = NodeSpec::new("h", "Identity").input("x", 0);
        bad.attrs
            .insert("T".into(), crate::graph::spec::AttrValue::Type(crate::graph::spec::DataType::Unsupported(18)));
        g.nodes.push(bad);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.pb");
        std::fs::write(&path, graph_to_pb_bytes(&g)).unwrap();
        let report = inspect(&path).unwrap();
        assert!(!report.runnable());
        let (count, first, why) = &report.unsupported["FrobnicateV7"];
        assert_eq!((*count, first.as_str()), (1, "mystery"));
        assert!(why.contains("not registered"), "{why}");
        assert!(report.unsupported.contains_key("Identity"), "{report:?}");
        let text = format_report(&path, &report);
        assert!(text.contains("FrobnicateV7 (1 nodes, e.g. 'mystery')"), "{text}");
    }
}
