//! `ringflow run`: one step of a GraphDef, or one signature of a SavedModel
//! (loaded: variables restored, init op run), feeds from .npy files,
//! fetches printed or written as .npy, and with `--trace` the step's
//! per-node timings (RunMetadata's step stats) as a table. String tensors
//! travel as numpy bytes arrays (`|S<n>`, or `<U<n>` on input) and print as
//! bytes literals, as numpy shows them.
//!
//! Owns: parsing `NAME=FILE.npy` feed arguments and writing outputs. Must
//! not know how sessions work beyond the `Session` trait.

use crate::error::{Result, Status};
use crate::executor::NodeStats;
use crate::graph::load_graph;
use crate::session::saved_model::LoadedModel;
use crate::session::{RunOptions, SessionOptions, create_session};
use crate::tensor::{Tensor, npy};
use std::path::{Path, PathBuf};

/// What a run steps: a GraphDef, or a SavedModel's signature (whose feeds
/// and fetches are its input and output keys).
pub enum Source {
    Graph(PathBuf),
    SavedModel { dir: PathBuf, tags: Vec<String>, signature: String },
}

impl Source {
    fn label(&self) -> String {
        match self {
            Source::Graph(path) => path.display().to_string(),
            Source::SavedModel { dir, signature, .. } => format!("{} signature '{signature}'", dir.display()),
        }
    }
}

pub struct RunArgs {
    pub source: Source,
    pub feeds: Vec<String>,
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
    pub out: Option<PathBuf>,
    pub target: String,
    /// Collect the step's per-node stats.
    pub trace: bool,
    /// Also write them as Chrome trace-event JSON here (implies `trace`).
    pub trace_file: Option<PathBuf>,
}

/// What one `ringflow run` step gave back.
pub struct RunOutcome {
    pub outputs: Vec<(String, Tensor)>,
    /// Every node the step ran, in any task (empty unless traced).
    pub step_stats: Vec<NodeStats>,
}

/// `x:0=feeds/x.npy` → ("x:0", tensor).
pub fn parse_feed(arg: &str) -> Result<(String, Tensor)> {
    let (name, file) = arg
        .split_once('=')
        .ok_or_else(|| Status::invalid_argument(format!("--feed '{arg}': expected NAME=FILE.npy")))?;
    if name.is_empty() {
        return Err(Status::invalid_argument(format!("--feed '{arg}': empty tensor name")));
    }
    Ok((name.to_string(), npy::read_npy(file)?))
}

/// A file name for a fetched tensor: `a/b:0` → `a_b_0.npy`.
pub fn output_file_name(fetch: &str) -> String {
    let safe: String =
        fetch.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect();
    format!("{safe}.npy")
}

pub fn run(args: &RunArgs) -> Result<RunOutcome> {
    let feeds = args.feeds.iter().map(|f| parse_feed(f)).collect::<Result<Vec<_>>>()?;
    let session_options = SessionOptions { target: args.target.clone(), ..SessionOptions::default() };
    let options = RunOptions { trace: args.trace || args.trace_file.is_some(), ..RunOptions::default() };
    let (named, metadata) = match &args.source {
        Source::Graph(path) => {
            if args.fetches.is_empty() && args.targets.is_empty() {
                return Err(Status::invalid_argument("name at least one --fetch or --op"));
            }
            let session = create_session(load_graph(path)?, &session_options)?;
            let (outputs, metadata) = session.run(&options, feeds, &args.fetches, &args.targets)?;
            session.close()?;
            (args.fetches.iter().cloned().zip(outputs).collect::<Vec<_>>(), metadata)
        }
        Source::SavedModel { dir, tags, signature } => {
            let model = LoadedModel::load(dir, tags, &session_options)?;
            let step = model.resolve(signature, feeds, &args.fetches)?;
            let names = step.fetch_names();
            let (outputs, metadata) = model
                .session()
                .run(&options, step.feeds, &names, &[])
                .map_err(|e| e.context(format_args!("signature '{signature}'")))?;
            model.close()?;
            (step.fetches.into_iter().map(|(key, _)| key).zip(outputs).collect(), metadata)
        }
    };
    if let Some(path) = &args.trace_file {
        let label = format!("{} step", args.source.label());
        super::trace_file::write_trace_file(
            path,
            &[super::trace_file::TracedStep { label, metadata: metadata.clone() }],
        )?;
    }
    if let Some(dir) = &args.out {
        write_outputs(dir, &named)?;
    }
    Ok(RunOutcome { outputs: named, step_stats: metadata.step_stats })
}

/// The step's nodes by start time, one line each: start (µs after the
/// first node started), duration, thread, device, op, node.
pub fn format_trace(stats: &[NodeStats]) -> String {
    let mut nodes: Vec<&NodeStats> = stats.iter().collect();
    nodes.sort_by_key(|n| (n.start_us, n.end_us));
    let first = nodes.first().map_or(0, |n| n.start_us);
    let last = nodes.iter().map(|n| n.end_us).max().unwrap_or(first);
    let mut table = format!(
        "step trace: {} nodes over {} us (the first step of a fresh session: caches cold, buffers new)\n{:>9} {:>9} {:>7}  {:<46} {:<16} node\n",
        nodes.len(),
        last - first,
        "start_us",
        "dur_us",
        "thread",
        "device",
        "op"
    );
    for n in nodes {
        table.push_str(&format!(
            "{:>9} {:>9} {:>7}  {:<46} {:<16} {}\n",
            n.start_us - first,
            n.end_us.saturating_sub(n.start_us),
            n.thread,
            n.device,
            n.op,
            n.node
        ));
    }
    table
}

fn write_outputs(dir: &Path, outputs: &[(String, Tensor)]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Status::permission_denied(format!("cannot create {}: {e}", dir.display())))?;
    for (name, tensor) in outputs {
        npy::write_npy(tensor, dir.join(output_file_name(name)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::builder::GraphBuilder;
    use crate::tensor::DType;

    #[test]
    fn string_feeds_and_fetches_go_through_npy_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = GraphBuilder::new();
        let x = b.placeholder("x", DType::String);
        b.unary("y", "Identity", &x, DType::String);
        let graph = dir.path().join("g.pb");
        std::fs::write(&graph, crate::graph::graph_to_pb_bytes(&b.finish())).unwrap();
        let feed = Tensor::from_strings([3], &[&b"save/Const"[..], b"", b"\xff\x01"]).unwrap();
        let feed_file = dir.path().join("x.npy");
        npy::write_npy(&feed, &feed_file).unwrap();
        let out_dir = dir.path().join("out");
        let args = RunArgs {
            source: Source::Graph(graph),
            feeds: vec![format!("x:0={}", feed_file.display())],
            fetches: vec!["y:0".into()],
            targets: vec![],
            out: Some(out_dir.clone()),
            target: String::new(),
            trace: false,
            trace_file: None,
        };
        let outcome = run(&args).unwrap();
        assert!(outcome.outputs[0].1.bit_eq(&feed));
        assert_eq!(outcome.outputs[0].1.to_string(), r"[b'save/Const', b'', b'\xff\x01']");
        let written = npy::read_npy(out_dir.join(output_file_name("y:0"))).unwrap();
        assert!(written.bit_eq(&feed));
    }
}
