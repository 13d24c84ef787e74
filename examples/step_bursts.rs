//! Remote steps in bursts with the machine idle between them, as a server
//! answering requests sees them: starts a 2-task cluster of server
//! processes from RINGFLOW_BINARY, runs `ringflow bench step-remote`'s
//! trivial graph (x fed on task 0, y = x + 1 on task 1) in blocks of BLOCK
//! steps, each after GAP_MS of sleep and SETTLE_US of untimed steps, and
//! prints the timed steps' latency percentiles. GAP_MS 0 runs the steps
//! back to back. Over shared memory unless RINGFLOW_TRANSPORT=tcp.
//!
//!     cargo run --release --example step_bursts -- target/release/ringflow STEPS [GAP_MS [BLOCK [SETTLE_US]]]
//!
//! A burst of 250 after 7 ms (`... 10000 7 250 1000`) is what `ringflow
//! bench step-remote --transport shm` reports as `p50_shm_after_idle`;
//! single steps after 20 ms (`... 250 20 1 0`) each find every waiting
//! thread asleep.

use ringflow::Tensor;
use ringflow::cli::bench_remote::trivial_remote_graph;
use ringflow::server::local_cluster::LocalCluster;
use ringflow::session::{RunOptions, SessionOptions, create_session};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: step_bursts RINGFLOW_BINARY STEPS [GAP_MS [BLOCK [SETTLE_US]]]";
    let arg = |i: usize| std::env::args().nth(i);
    let binary = PathBuf::from(arg(1).ok_or(usage)?);
    let steps: usize = arg(2).ok_or(usage)?.parse()?;
    let gap = Duration::from_millis(arg(3).map_or(Ok(0), |v| v.parse())?);
    let block: usize = arg(4).map_or(Ok(250), |v| v.parse())?;
    let settle = Duration::from_micros(arg(5).map_or(Ok(1000), |v| v.parse())?);
    if steps == 0 || block == 0 {
        return Err(format!("STEPS and BLOCK must be positive; {usage}").into());
    }
    let cluster = LocalCluster::start(&binary, 2, &Default::default())?;
    let session = create_session(
        trivial_remote_graph(),
        &SessionOptions { target: cluster.target(0), ..SessionOptions::default() },
    )?;
    let handle = session.make_callable(&["x".to_string()], &["y".to_string()], &[])?;
    let x = vec![Tensor::scalar(1.0f32)];
    let options = RunOptions::default();
    let step = || -> Result<Duration, Box<dyn std::error::Error>> {
        let start = Instant::now();
        std::hint::black_box(session.run_callable(handle, x.clone(), &options)?);
        Ok(start.elapsed())
    };
    for _ in 0..2000 {
        step()?;
    }
    let mut took = Vec::with_capacity(steps);
    for i in 0..steps {
        if !gap.is_zero() && i % block == 0 {
            std::thread::sleep(gap);
            let settling = Instant::now();
            while settling.elapsed() < settle {
                step()?;
            }
        }
        took.push(step()?);
    }
    took.sort();
    let at = |p: f64| took[((took.len() - 1) as f64 * p / 100.0).round() as usize].as_secs_f64() * 1e6;
    println!(
        "{steps} steps, blocks of {block} after {gap:?} idle and {settle:?} untimed: p50 {:.1} us, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
        at(50.0),
        at(90.0),
        at(99.0),
        at(99.9),
        at(100.0)
    );
    session.release_callable(handle)?;
    session.close()?;
    cluster.shutdown();
    Ok(())
}
