//! Criterion benches of the in-process executor: the trivial step through a
//! callable, a 1000-node chain of scalar adds (time per step; divide by
//! 1000 for ns per node), and 8 independent 256×256 MatMul branches with 1
//! pool thread and with every core (their ratio is the fan-out speedup).
//! `ringflow bench step-inproc chain fanout` reports the same figures with
//! baselines; these are for criterion's regression tracking.

use criterion::{Criterion, criterion_group, criterion_main};
use ringflow::Tensor;
use ringflow::graph::builder::{chain_graph, fanout_graph, trivial_add_graph};
use ringflow::session::{RunOptions, Session, SessionOptions, create_session};
use std::hint::black_box;

fn callable(session: &dyn Session, feed: &str, fetch: &str) -> u64 {
    session.make_callable(&[feed.to_string()], &[fetch.to_string()], &[]).expect("callable")
}

fn trivial_step(c: &mut Criterion) {
    let s = create_session(trivial_add_graph(), &SessionOptions::default()).unwrap();
    let h = callable(s.as_ref(), "x:0", "y:0");
    let x = Tensor::scalar(1.0f32);
    let options = RunOptions::default();
    c.bench_function("step_inproc_callable", |b| {
        b.iter(|| black_box(s.run_callable(h, vec![x.clone()], &options).unwrap()))
    });
}

fn chain(c: &mut Criterion) {
    let s = create_session(chain_graph(1000), &SessionOptions::default()).unwrap();
    let h = callable(s.as_ref(), "x:0", "y:0");
    let x = Tensor::scalar(0.0f32);
    let options = RunOptions::default();
    c.bench_function("chain_1000_scalar_adds", |b| {
        b.iter(|| black_box(s.run_callable(h, vec![x.clone()], &options).unwrap()))
    });
}

fn fanout(c: &mut Criterion) {
    let x =
        Tensor::build::<f32>([256, 256], |v| v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 13) as f32 / 13.0))
            .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("fanout_8_matmul_256");
    group.sample_size(20);
    for threads in [1, cores] {
        let options = SessionOptions { threads_per_device: threads, ..SessionOptions::default() };
        let s = create_session(fanout_graph(8, 256), &options).unwrap();
        let h = callable(s.as_ref(), "x:0", "total:0");
        let run = RunOptions::default();
        group.bench_function(format!("{threads}_threads"), |b| {
            b.iter(|| black_box(s.run_callable(h, vec![x.clone()], &run).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, trivial_step, chain, fanout);
criterion_main!(benches);
