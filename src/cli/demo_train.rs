//! `ringflow demo --train`: trains a model exported from TensorFlow on a
//! local cluster of one ps task and two worker tasks.
//!
//! Owns: the training demo's flow and output. The two graphs (one per
//! worker, placed by `tf.compat.v1.train.replica_device_setter`: variables
//! on `/job:ps/task:0`), the batches and TensorFlow's losses are compiled
//! into the binary (`tools/golden/train_demo.py` exports them).
//!
//! First one worker trains alone, step for step against TensorFlow's
//! losses; then, after a Reset, both workers' clients train at once through
//! their own masters on the variables they share on the ps task
//! (between-graph replication), and the demo reports the steps per second.

use crate::bench::LatencyRecorder;
use crate::error::{Result, Status};
use crate::graph::graph_from_pb_bytes;
use crate::server::local_cluster::{LocalCluster, LocalClusterOptions, current_binary};
use crate::session::{RunOptions, Session, SessionExt, SessionOptions, create_session};
use crate::tensor::Tensor;
use crate::tensor::npy::read_npy_from;
use std::time::Instant;

const WORKER_GRAPHS: [&[u8]; 2] = [
    include_bytes!("../../tests/fixtures/train-demo/worker0.pb"),
    include_bytes!("../../tests/fixtures/train-demo/worker1.pb"),
];
const BATCHES_X: &[u8] = include_bytes!("../../tests/fixtures/train-demo/x.npy");
const BATCHES_LABELS: &[u8] = include_bytes!("../../tests/fixtures/train-demo/labels.npy");
const TF_LOSSES: &[u8] = include_bytes!("../../tests/fixtures/train-demo/tf_losses.npy");

/// The relative difference from TensorFlow's loss a step may show.
const LOSS_RTOL: f32 = 1e-5;

/// One worker's step as a callable: feeds x and labels, fetches the loss,
/// runs the update.
struct Trainer {
    session: Box<dyn Session>,
    step: u64,
}

impl Trainer {
    fn connect(cluster: &LocalCluster, worker: usize) -> Result<Trainer> {
        let graph = graph_from_pb_bytes(WORKER_GRAPHS[worker])?;
        let target = cluster
            .target_of("worker", worker)
            .ok_or_else(|| Status::internal(format!("the demo cluster has no /job:worker/task:{worker}")))?;
        let session = create_session(graph, &SessionOptions { target, ..SessionOptions::default() })?;
        let step = session.make_callable(
            &["x:0".to_string(), "labels:0".to_string()],
            &["loss:0".to_string()],
            &["train".to_string()],
        )?;
        Ok(Trainer { session, step })
    }

    fn train(&self, batch: &Batch) -> Result<f32> {
        let (out, _) = self.session.run_callable(
            self.step,
            vec![batch.x.clone(), batch.labels.clone()],
            &RunOptions::default(),
        )?;
        out[0].scalar_value::<f32>()
    }

    fn close(self) -> Result<()> {
        self.session.release_callable(self.step)?;
        self.session.close()
    }
}

struct Batch {
    x: Tensor,
    labels: Tensor,
}

fn batches() -> Result<Vec<Batch>> {
    let x = read_npy_from(BATCHES_X, "bundled x.npy")?;
    let labels = read_npy_from(BATCHES_LABELS, "bundled labels.npy")?;
    let (steps, batch, features) = match *x.dims() {
        [s, b, f] => (s, b, f),
        _ => return Err(Status::internal(format!("bundled x.npy is {}, not [steps, batch, features]", x.shape()))),
    };
    let xs = x.as_slice::<f32>()?;
    let ls = labels.as_slice::<i64>()?;
    if ls.len() != steps * batch {
        return Err(Status::internal(format!("bundled labels.npy is {}, not [{steps}, {batch}]", labels.shape())));
    }
    (0..steps)
        .map(|s| {
            Ok(Batch {
                x: Tensor::from_slice([batch, features], &xs[s * batch * features..(s + 1) * batch * features])?,
                labels: Tensor::from_slice([batch], &ls[s * batch..(s + 1) * batch])?,
            })
        })
        .collect()
}

pub fn demo_train(steps_per_worker: usize) -> Result<()> {
    let batches = batches()?;
    let tf_losses = read_npy_from(TF_LOSSES, "bundled tf_losses.npy")?;
    let tf_losses = tf_losses.as_slice::<f32>()?.to_vec();
    println!("starting a local cluster: 1 ps task, 2 worker tasks ...");
    let jobs = [("ps".to_string(), 1), ("worker".to_string(), 2)];
    let cluster = LocalCluster::start_jobs(&current_binary()?, &jobs, &LocalClusterOptions::default())?;
    for (task, address) in cluster.spec().tasks() {
        println!("  {task} on {address}");
    }
    println!(
        "model: MLP 8-32-4 exported from TensorFlow (replica_device_setter: variables on /job:ps/task:0), \
         sparse softmax cross-entropy, Momentum 0.9, batch {}",
        batches[0].labels.dims()[0]
    );

    println!("\n1) worker 0 trains alone, each step's loss against TensorFlow's:");
    let solo = Trainer::connect(&cluster, 0)?;
    solo.session.run_simple(&[], &[], &["init"])?;
    let mut worst = 0f32;
    let started = Instant::now();
    for (step, (batch, &expected)) in batches.iter().zip(&tf_losses).enumerate() {
        let loss = solo.train(batch)?;
        let rel = (loss - expected).abs() / expected.abs().max(f32::MIN_POSITIVE);
        worst = worst.max(rel);
        if rel > LOSS_RTOL {
            return Err(Status::internal(format!(
                "step {step}: loss {loss} differs from TensorFlow's {expected} by {rel:.2e} (relative)"
            )));
        }
        if step % 5 == 0 || step + 1 == tf_losses.len() {
            println!("  step {step:>3}  loss {loss:.6}  TensorFlow {expected:.6}");
        }
    }
    let solo_secs = started.elapsed().as_secs_f64();
    println!(
        "  {} steps match TensorFlow (largest relative difference {worst:.1e}), {:.0} steps/s",
        tf_losses.len(),
        tf_losses.len() as f64 / solo_secs
    );
    solo.session.reset(&[])?;
    solo.close()?;

    println!("\n2) Reset; both workers train at once on the variables they share on the ps task:");
    let trainers = [Trainer::connect(&cluster, 0)?, Trainer::connect(&cluster, 1)?];
    trainers[0].session.run_simple(&[], &[], &["init"])?;
    let report_every = (steps_per_worker / 4).max(1);
    let started = Instant::now();
    let results: Vec<Result<(Vec<f32>, LatencyRecorder)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = trainers
            .iter()
            .enumerate()
            .map(|(worker, trainer)| {
                let batches = &batches;
                scope.spawn(move || -> Result<(Vec<f32>, LatencyRecorder)> {
                    let mut losses = Vec::with_capacity(steps_per_worker);
                    let mut latency = LatencyRecorder::default();
                    for step in 0..steps_per_worker {
                        // The workers read the data in different orders, as
                        // shards of one dataset would.
                        let batch = &batches[(step * 2 + worker) % batches.len()];
                        let begun = Instant::now();
                        losses.push(trainer.train(batch)?);
                        latency.record(begun.elapsed());
                        if (step + 1) % report_every == 0 {
                            let window = &losses[losses.len().saturating_sub(report_every)..];
                            let mean = window.iter().sum::<f32>() / window.len() as f32;
                            println!(
                                "  worker {worker}  step {:>5}  mean loss of the last {} steps {mean:.4}",
                                step + 1,
                                window.len()
                            );
                        }
                    }
                    Ok((losses, latency))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Status::internal("a worker's client thread panicked"))))
            .collect()
    });
    let both_secs = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for (worker, result) in results.into_iter().enumerate() {
        let (losses, latency) = result?;
        println!(
            "  worker {worker}: step p50 {:.1} us, p99 {:.1} us",
            latency.percentile_us(50.0),
            latency.percentile_us(99.0)
        );
        all.push(losses);
    }
    let first = mean_of(&all, 0..report_every.min(steps_per_worker));
    let last = mean_of(&all, steps_per_worker.saturating_sub(report_every)..steps_per_worker);
    println!(
        "  {} steps in {:.2} s: {:.0} steps/s over both workers; mean loss {first:.4} -> {last:.4}",
        2 * steps_per_worker,
        both_secs,
        (2 * steps_per_worker) as f64 / both_secs
    );
    if last >= first {
        return Err(Status::internal(format!(
            "the shared model did not learn: mean loss {first:.4} at the start, {last:.4} at the end"
        )));
    }
    for trainer in trainers {
        trainer.close()?;
    }
    cluster.shutdown();
    println!("cluster stopped");
    Ok(())
}

fn mean_of(losses: &[Vec<f32>], steps: std::ops::Range<usize>) -> f32 {
    let picked: Vec<f32> = losses.iter().flat_map(|l| l[steps.clone()].iter().copied()).collect();
    picked.iter().sum::<f32>() / picked.len().max(1) as f32
}
