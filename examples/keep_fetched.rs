//! A client that keeps what it fetches, against one that drops it: starts
//! a 2-task cluster of server processes from RINGFLOW_BINARY (shared
//! memory between this process and task 0), fetches PARTS Fills of
//! ELEMENTS floats each made on task 0 (written straight into this
//! process's ring) for STEPS steps per reader, and prints each reader's
//! p50/p99 step time (and the p50 of its last quarter of steps) with task 0's ring counters over its steps. Readers
//! take turns on the same connection, in this order:
//!
//! - `drop`: every step's tensors are dropped before the next step;
//! - `window:K`: the last K steps' tensors stay alive (a rolling window);
//! - `all`: every step's tensors stay alive until the reader ends (a
//!   client appending each result to a history), so the ring's worth of
//!   bytes passes under tensors kept far longer than a lap;
//! - `every:K`: every K-th step's tensors stay alive until the reader
//!   ends (a sample of the results), the others are dropped at once.
//!
//!     cargo run --release --example keep_fetched -- target/release/ringflow 1000 65536 1 drop window:4 all

use ringflow::graph::builder::GraphBuilder;
use ringflow::server::local_cluster::LocalCluster;
use ringflow::session::{RunOptions, SessionOptions, create_session};
use ringflow::{DType, Tensor};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: keep_fetched RINGFLOW_BINARY STEPS ELEMENTS PARTS READER... (drop | window:K | all | every:K)";
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        return Err(usage.into());
    }
    let binary = PathBuf::from(&args[1]);
    let steps: usize = args[2].parse()?;
    let elements: i32 = args[3].parse()?;
    let parts: usize = args[4].parse()?;
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[elements])?);
    let x = b.placeholder("x", DType::F32);
    let fetches: Vec<String> =
        (0..parts).map(|i| b.binary(&format!("fill_{i}"), "Fill", &dims, &x, DType::F32)).collect();
    let cluster = LocalCluster::start(&binary, 2, &Default::default())?;
    let session =
        create_session(b.finish(), &SessionOptions { target: cluster.target(0), ..SessionOptions::default() })?;
    let handle = session.make_callable(&["x".to_string()], &fetches, &[])?;
    let options = RunOptions::default();
    for reader in &args[5..] {
        // Steps' results kept: the last `window`, and every `sample`-th.
        let (window, sample) = match reader.as_str() {
            "drop" => (0, 0),
            "all" => (usize::MAX, 0),
            other => match (other.strip_prefix("window:"), other.strip_prefix("every:")) {
                (Some(k), _) => (k.parse()?, 0),
                (_, Some(k)) => (0, k.parse::<usize>()?),
                _ => return Err(usage.into()),
            },
        };
        let mut sampled = Vec::new();
        let before = ringflow::cli::stats_cmd::fetch(&cluster.target(0))?;
        let mut kept: VecDeque<Vec<Tensor>> = VecDeque::new();
        let mut took: Vec<Duration> = Vec::with_capacity(steps);
        for step in 0..steps {
            let start = Instant::now();
            let (out, _) = session.run_callable(handle, vec![Tensor::scalar(step as f32)], &options)?;
            took.push(start.elapsed());
            if out.iter().any(|t| t.as_slice::<f32>().map_or(true, |s| s[s.len() - 1] != step as f32)) {
                return Err(format!("step {step}: a fetched tensor does not hold the fed value").into());
            }
            if sample > 0 && step % sample == 0 {
                sampled.push(out);
                continue;
            }
            kept.push_back(out);
            while kept.len() > window {
                kept.pop_front();
            }
        }
        drop((kept, sampled));
        let after = ringflow::cli::stats_cmd::fetch(&cluster.target(0))?;
        let mut last_quarter = took[steps - steps / 4..].to_vec();
        last_quarter.sort();
        took.sort();
        let us = |took: &[Duration], q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!(
            "{reader:>10}: p50 {:8.1} us  p99 {:8.1} us  last quarter p50 {:8.1} us  ring frames {:5}  socket frames {:5}  space stalls {}",
            us(&took, 0.5),
            us(&took, 0.99),
            us(&last_quarter, 0.5),
            after.shm_frames - before.shm_frames,
            after.shm_socket_frames - before.shm_socket_frames,
            after.shm_space_stalls - before.shm_space_stalls,
        );
    }
    session.release_callable(handle)?;
    session.close()?;
    cluster.shutdown();
    Ok(())
}
