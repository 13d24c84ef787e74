//! `ringflow demo`: the README's main command. Starts a local cluster of two
//! worker processes, runs the bundled 3-layer MLP exported from TensorFlow
//! (its layers pinned to alternate tasks) through a session on task 0,
//! checks the output against TensorFlow's, and reports step latency.
//!
//! Owns: the demo's flow and output. The graph and TensorFlow's expected
//! output are compiled into the binary, so the demo needs no files.

use crate::bench::LatencyRecorder;
use crate::error::{Result, Status};
use crate::graph::graph_from_pb_bytes;
use crate::server::local_cluster::{LocalCluster, LocalClusterOptions, current_binary};
use crate::session::{RunOptions, SessionOptions, create_session};
use crate::tensor::npy::read_npy_from;
use std::time::Instant;

const GRAPH: &[u8] = include_bytes!("../../tests/fixtures/tf-graphs/mlp3_two_tasks/graph.pb");
const FEED: &[u8] = include_bytes!("../../tests/fixtures/tf-graphs/mlp3_two_tasks/step0_feed_x_0.npy");
const EXPECTED: &[u8] = include_bytes!("../../tests/fixtures/tf-graphs/mlp3_two_tasks/step0_expect_y_0.npy");

pub fn demo(steps: usize, trace_file: Option<&std::path::Path>) -> Result<()> {
    let graph = graph_from_pb_bytes(GRAPH)?;
    let x = read_npy_from(FEED, "bundled feed x:0")?;
    let expected = read_npy_from(EXPECTED, "bundled expected y:0")?;
    println!("starting a local cluster of 2 worker processes ...");
    let cluster = LocalCluster::start(&current_binary()?, 2, &LocalClusterOptions::default())?;
    for (task, address) in cluster.spec().tasks() {
        println!("  {task} on {address}");
    }
    let options = SessionOptions { target: cluster.target(0), ..SessionOptions::default() };
    let session = create_session(graph, &options)?;
    let devices = session.list_devices()?;
    println!("cluster devices: {}", devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "));
    println!("graph: 3-layer MLP exported from TensorFlow; layers 1 and 3 on task 0, layer 2 on task 1");

    let handle = session.make_callable(&["x:0".to_string()], &["y:0".to_string()], &[])?;
    let (out, _) = session.run_callable(handle, vec![x.clone()], &RunOptions::default())?;
    let y = &out[0];
    println!("y:0 = softmax output, {} {}", y.dtype(), y.shape());
    let values = y.as_slice::<f32>()?;
    let row = y.dims().last().copied().unwrap_or(values.len()).min(values.len());
    println!("  first row: {:?}", &values[..row]);
    y.all_close(&expected, 1e-5, 1e-6)
        .map_err(|why| Status::internal(format!("the demo's output differs from TensorFlow's: {why}")))?;
    println!("  matches TensorFlow's output (rtol 1e-5, atol 1e-6)");

    let warmup = (steps / 10).max(10);
    for _ in 0..warmup {
        session.run_callable(handle, vec![x.clone()], &RunOptions::default())?;
    }
    let mut latency = LatencyRecorder::default();
    for _ in 0..steps {
        let start = Instant::now();
        session.run_callable(handle, vec![x.clone()], &RunOptions::default())?;
        latency.record(start.elapsed());
    }
    println!(
        "step latency over {steps} steps (client -> master on task 0 -> task 1 -> task 0 -> client): p50 {:.1} us, p99 {:.1} us",
        latency.percentile_us(50.0),
        latency.percentile_us(99.0)
    );
    if let Some(path) = trace_file {
        let traced = RunOptions { trace: true, ..RunOptions::default() };
        let (_, metadata) = session.run_callable(handle, vec![x.clone()], &traced)?;
        let label = format!("demo step (after {steps} timed steps)");
        super::trace_file::write_trace_file(path, &[super::trace_file::TracedStep { label, metadata }])?;
        println!("trace of one step written to {}", path.display());
    }
    session.release_callable(handle)?;
    session.close()?;
    cluster.shutdown();
    println!("cluster stopped");
    Ok(())
}
