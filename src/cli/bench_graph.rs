//! `ringflow bench graph G.pb`: times any graph's step. The step runs as a
//! callable (feeds, fetches and targets fixed once, as a training loop
//! runs it) in process, on a target, or on a local cluster of child
//! processes, taking turns in blocks with a one-node step (`Const` →
//! `Identity` on the session's default device) on the same target: the
//! floor any step pays there, measured in the same run. The first block of
//! each is a warm-up; after the timed steps, one traced step can be
//! written as a trace file.
//!
//! Owns: the scenario's session setup, its figures and its trace step.
//! Must not parse the command line beyond its own arguments.

use super::progress::Progress;
use super::run::parse_feed;
use super::trace_file::{TracedStep, write_trace_file};
use crate::bench::{self, Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::graph::builder::GraphBuilder;
use crate::graph::{GraphSpec, load_graph};
use crate::server::local_cluster::{LocalCluster, current_binary, parse_jobs};
use crate::session::saved_model::{DEFAULT_SIGNATURE, LoadedModel, default_tags};
use crate::session::{RunOptions, Session, SessionOptions, create_session};
use crate::tensor::{DType, Tensor};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Timed steps when `--steps` is not given.
const DEFAULT_STEPS: usize = 1_000;

/// Graph steps and baseline steps take turns in blocks of at most this many.
const TURN_BLOCK: usize = 250;

/// `bench graph`'s own arguments (flattened into `ringflow bench`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct GraphBenchArgs {
    /// bench graph: feed NAME=FILE.npy (repeatable).
    #[arg(long = "feed", value_name = "NAME=FILE.npy")]
    pub feeds: Vec<String>,
    /// bench graph: tensor to fetch (repeatable).
    #[arg(long = "fetch", value_name = "TENSOR")]
    pub fetches: Vec<String>,
    /// bench graph: op to run as a target (repeatable).
    #[arg(long = "op", value_name = "OP")]
    pub targets: Vec<String>,
    /// bench graph: session target ("" in process, ringflow://host:port, grpc://host:port).
    #[arg(long, conflicts_with = "local_cluster")]
    pub target: Option<String>,
    /// bench graph: start N worker tasks (or ps=1,worker=2) as child
    /// processes on loopback and run through worker task 0.
    #[arg(long, value_name = "N|JOB=N,...")]
    pub local_cluster: Option<String>,
    /// bench graph: timed steps (default 1000; the first block of min(steps, 250) is an untimed warm-up).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Write one traced step (after the timed ones) as Chrome trace-event JSON.
    #[arg(long, value_name = "FILE.json")]
    pub trace_file: Option<PathBuf>,
    /// bench graph of a SavedModel directory: the signature to time
    /// (default serving_default; --feed and --fetch then name its keys).
    #[arg(long, value_name = "NAME")]
    pub signature: Option<String>,
    /// bench graph of a SavedModel directory: its meta graph's tags (default serve).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
}

impl GraphBenchArgs {
    /// Whether any argument only `bench graph` takes was given.
    pub fn any(&self) -> bool {
        !(self.feeds.is_empty() && self.fetches.is_empty() && self.targets.is_empty())
            || self.target.is_some()
            || self.local_cluster.is_some()
            || self.steps.is_some()
            || self.signature.is_some()
            || !self.tags.is_empty()
    }
}

/// A one-node step: what a step costs on a target before any work.
fn floor_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    let c = b.constant("floor/c", &Tensor::scalar(1.0f32));
    b.unary("floor/y", "Identity", &c, DType::F32);
    b.finish()
}

struct Callable {
    session: Box<dyn Session>,
    handle: u64,
    feeds: Vec<Tensor>,
}

impl Callable {
    fn new(
        session: Box<dyn Session>,
        feeds: Vec<(String, Tensor)>,
        fetches: &[String],
        targets: &[String],
    ) -> Result<Callable> {
        let names: Vec<String> = feeds.iter().map(|(n, _)| n.clone()).collect();
        let handle = session.make_callable(&names, fetches, targets)?;
        Ok(Callable { session, handle, feeds: feeds.into_iter().map(|(_, t)| t).collect() })
    }

    fn step(&self, options: &RunOptions) -> Result<(Duration, crate::session::RunMetadata)> {
        let start = Instant::now();
        let (out, metadata) = self.session.run_callable(self.handle, self.feeds.clone(), options)?;
        let took = start.elapsed();
        std::hint::black_box(out);
        Ok((took, metadata))
    }

    fn close(self) -> Result<()> {
        self.session.release_callable(self.handle)?;
        self.session.close()
    }
}

/// Runs `bench graph GRAPH` and returns its figures.
pub fn bench_graph(graph_path: &Path, args: &GraphBenchArgs) -> Result<Vec<Figure>> {
    let saved_model = graph_path.is_dir();
    if args.fetches.is_empty() && args.targets.is_empty() && !saved_model {
        return Err(Status::invalid_argument("bench graph: name at least one --fetch or --op"));
    }
    if !saved_model && (args.signature.is_some() || !args.tags.is_empty()) {
        return Err(Status::invalid_argument("bench graph: --signature and --tag are for a SavedModel directory"));
    }
    let steps = args.steps.unwrap_or(DEFAULT_STEPS);
    if steps == 0 {
        return Err(Status::invalid_argument("bench graph: --steps must be at least 1"));
    }
    let feeds = args.feeds.iter().map(|f| parse_feed(f)).collect::<Result<Vec<_>>>()?;
    let cluster = match &args.local_cluster {
        Some(jobs) => Some(LocalCluster::start_jobs(&current_binary()?, &parse_jobs(jobs)?, &Default::default())?),
        None => None,
    };
    let target = match &cluster {
        Some(c) => c.default_target(),
        None => args.target.clone().unwrap_or_default(),
    };
    let options = SessionOptions { target: target.clone(), ..SessionOptions::default() };
    let subject = if saved_model {
        // Loaded (restored, initialized), then its signature timed by key.
        let tags = if args.tags.is_empty() { default_tags() } else { args.tags.clone() };
        let signature = args.signature.as_deref().unwrap_or(DEFAULT_SIGNATURE);
        let model = LoadedModel::load(graph_path, &tags, &options)?;
        let step = model.resolve(signature, feeds, &args.fetches)?;
        let names = step.fetch_names();
        Callable::new(model.into_session(), step.feeds, &names, &args.targets)
    } else {
        Callable::new(create_session(load_graph(graph_path)?, &options)?, feeds, &args.fetches, &args.targets)
    }
    .map_err(|e| e.context(format_args!("bench graph {}", graph_path.display())))?;
    let floor = Callable::new(create_session(floor_graph(), &options)?, Vec::new(), &["floor/y:0".into()], &[])?;

    let block = steps.min(TURN_BLOCK);
    // Counts the graph's steps, warm-up included (each turn's few untimed
    // settling steps would take it a little past its length).
    let progress = Progress::new((steps + block) as u64, "steps");
    progress.set_message(graph_path.display().to_string());
    let untraced = RunOptions::default();
    let turns = bench::Turns { iterations: steps, block, settle: Duration::from_millis(1), warmup: Duration::ZERO };
    let started = Instant::now();
    let [graph_steps, floor_steps]: [LatencyRecorder; 2] = bench::interleaved(
        [
            &mut || {
                progress.inc(1);
                subject.step(&untraced).map(|(took, _)| took)
            },
            &mut || floor.step(&untraced).map(|(took, _)| took),
        ],
        turns,
    )?;
    let elapsed = started.elapsed();
    progress.finish();

    if let Some(path) = &args.trace_file {
        let (_, metadata) = subject.step(&RunOptions { trace: true, ..RunOptions::default() })?;
        write_trace_file(
            path,
            &[TracedStep { label: format!("{} (after {steps} timed steps)", graph_path.display()), metadata }],
        )?;
    }
    subject.close()?;
    floor.close()?;
    if let Some(c) = cluster {
        c.shutdown();
    }

    let place = if target.is_empty() { "in process".to_string() } else { format!("on {target}") };
    let note = format!(
        "{} {place}, {steps} steps as a callable; baseline: a one-node step (Const -> Identity) on the same target, \
         taking turns in blocks of {block} ({:.1} s in all)",
        graph_path.display(),
        elapsed.as_secs_f64()
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut figures = Vec::new();
    for (metric, p) in [("p50", 50.0), ("p99", 99.0), ("p999", 99.9)] {
        figures.push(
            Figure::new("graph", metric, graph_steps.percentile_us(p), "us", threads)
                .with_baseline(floor_steps.percentile_us(p))
                .with_note(&note),
        );
    }
    let per_second = |r: &LatencyRecorder| if r.mean_us() > 0.0 { 1e6 / r.mean_us() } else { 0.0 };
    figures.push(
        Figure::new("graph", "steps_per_second", per_second(&graph_steps), "steps/s", threads)
            .with_baseline(per_second(&floor_steps))
            .with_note("back to back from one client thread: 1 / mean step time; baseline: the one-node step's"),
    );
    Ok(figures)
}
