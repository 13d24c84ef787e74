//! A steady loop of remote steps for profilers (`perf/`): starts a 2-task
//! cluster of server processes from RINGFLOW_BINARY, runs STEPS steps of
//! `ringflow bench step-remote`'s graph (`trivial`: x fed on task 0, y = x + 1
//! on task 1; `sent`: task 0 computes x * 2 and sends it to task 1), and
//! prints the step count, wall time and the servers' own step counters.
//! No baselines and no timing per step: all a profile sees is steps.
//!
//!     cargo run --release --example step_loop -- target/release/ringflow 20000 [trivial|sent]

use ringflow::Tensor;
use ringflow::cli::bench_remote::{sent_remote_graph, trivial_remote_graph};
use ringflow::server::local_cluster::LocalCluster;
use ringflow::session::{RunOptions, SessionOptions, create_session};
use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: step_loop RINGFLOW_BINARY STEPS [trivial|sent]";
    let binary = PathBuf::from(std::env::args().nth(1).ok_or(usage)?);
    let steps: u64 = std::env::args().nth(2).ok_or(usage)?.parse()?;
    let graph = match std::env::args().nth(3).as_deref() {
        None | Some("trivial") => trivial_remote_graph(),
        Some("sent") => sent_remote_graph(),
        Some(other) => return Err(format!("unknown graph '{other}'; {usage}").into()),
    };
    let cluster = LocalCluster::start(&binary, 2, &Default::default())?;
    let session = create_session(graph, &SessionOptions { target: cluster.target(0), ..SessionOptions::default() })?;
    let handle = session.make_callable(&["x".to_string()], &["y".to_string()], &[])?;
    let x = vec![Tensor::scalar(1.0f32)];
    let options = RunOptions::default();
    let started = Instant::now();
    for _ in 0..steps {
        std::hint::black_box(session.run_callable(handle, x.clone(), &options)?);
    }
    let took = started.elapsed();
    let per_step_us = took.as_secs_f64() * 1e6 / steps.max(1) as f64;
    print!("steps {steps} in {:.3} s ({per_step_us:.1} us per step)", took.as_secs_f64());
    // A new connection's handshake may time out under valgrind: the
    // servers' counters are a bonus, not the loop's result.
    match ringflow::cli::stats_cmd::fetch(&cluster.target(0)) {
        Ok(stats) => println!(
            "; task 0 counted {} steps, p50 {:.1} us, p99 {:.1} us",
            stats.steps,
            stats.step_latency.p50_ns as f64 / 1e3,
            stats.step_latency.p99_ns as f64 / 1e3,
        ),
        Err(e) => println!("; task 0's counters: {e}"),
    }
    session.release_callable(handle)?;
    session.close()?;
    cluster.shutdown();
    Ok(())
}
