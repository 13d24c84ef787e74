//! In-process benchmarks: the trivial step through a callable, the cost per
//! node of a long chain, and the speedup of independent MatMul branches
//! with the pool's threads. Each reports a baseline measured in the same
//! run: a direct call of the same kernel, with no runtime around it.
//!
//! Owns: these scenarios and the demo. Must not assert speed: it measures
//! and reports.

use crate::bench::{Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::graph::builder::{chain_graph, fanout_graph, trivial_add_graph};
use crate::graph::{AttrValue, DataType, NodeSpec};
use crate::ops::{KernelInit, OpContext, ResourceMgr, Value, lookup};
use crate::session::{RunOptions, Session, SessionOptions, create_session};
use crate::tensor::{DType, Tensor};
use std::time::{Duration, Instant};

pub struct BenchOptions {
    pub iters: usize,
    pub threads: usize,
}

fn iters_or(opts: &BenchOptions, default: usize) -> usize {
    if opts.iters == 0 { default } else { opts.iters }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Times `f` `iters` times after `iters / 10` warm-up calls.
fn time_each(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<LatencyRecorder> {
    for _ in 0..(iters / 10).max(1) {
        f()?;
    }
    let mut rec = LatencyRecorder::default();
    for _ in 0..iters {
        let start = Instant::now();
        f()?;
        rec.record(start.elapsed());
    }
    Ok(rec)
}

/// A direct AddV2 kernel call on a scalar: allocation of the output and the
/// arithmetic, nothing else. The floor a runtime adds its overhead to.
fn direct_add_kernel(iters: usize) -> Result<LatencyRecorder> {
    let node = NodeSpec::new("add", "AddV2").attr("T", AttrValue::Type(DataType::Tensor(DType::F32)));
    let def = lookup("AddV2").ok_or_else(|| Status::not_found("AddV2 is not registered"))?;
    let signature = (def.signature)(&node)?;
    let crate::ops::Implementation::Kernel(build) = def.implementation else {
        return Err(Status::internal("AddV2 is not a kernel"));
    };
    let kernel = build(&KernelInit { node: &node, signature: &signature })?;
    let resources = ResourceMgr::default();
    let (x, one) = (Tensor::scalar(1.0f32), Tensor::scalar(1.0f32));
    time_each(iters, || {
        let mut inputs = [Some(Value::Tensor(x.clone())), Some(Value::Tensor(one.clone()))];
        let mut outputs = [None];
        kernel.compute(&mut OpContext::new(&mut inputs, &mut outputs, &resources))?;
        std::hint::black_box(&outputs);
        Ok(())
    })
}

fn callable(session: &dyn Session, feeds: &[&str], fetches: &[&str]) -> Result<u64> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    session.make_callable(&s(feeds), &s(fetches), &[])
}

pub fn step_inproc(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let iters = iters_or(opts, 50_000);
    let options = SessionOptions::default();
    let session = create_session(trivial_add_graph(), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["y:0"])?;
    let x = Tensor::scalar(1.0f32);
    let run_options = RunOptions::default();
    let steps = time_each(iters, || {
        let (out, _) = session.run_callable(handle, vec![x.clone()], &run_options)?;
        std::hint::black_box(out);
        Ok(())
    })?;
    let direct = direct_add_kernel(iters)?;
    session.close()?;
    let threads = options.threads_per_device;
    let note = "callable, y = x + 1; baseline: direct AddV2 kernel call";
    Ok(vec![
        Figure::new("step-inproc", "p50", steps.percentile_us(50.0), "us", threads)
            .with_baseline(direct.percentile_us(50.0))
            .with_note(note),
        Figure::new("step-inproc", "p99", steps.percentile_us(99.0), "us", threads)
            .with_baseline(direct.percentile_us(99.0))
            .with_note(note),
    ])
}

pub fn chain(opts: &BenchOptions) -> Result<Vec<Figure>> {
    const LENGTH: usize = 1000;
    let iters = iters_or(opts, 2_000);
    let options = SessionOptions::default();
    let session = create_session(chain_graph(LENGTH), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["y:0"])?;
    let x = Tensor::scalar(0.0f32);
    let run_options = RunOptions::default();
    let steps = time_each(iters, || {
        let (out, _) = session.run_callable(handle, vec![x.clone()], &run_options)?;
        if out[0].scalar_value::<f32>()? != LENGTH as f32 {
            return Err(Status::internal("the chain computed a wrong sum"));
        }
        Ok(())
    })?;
    let direct = direct_add_kernel(iters * 10)?;
    session.close()?;
    let per_node = |p: f64| steps.percentile_ns(p) / LENGTH as f64;
    let note = "1000 scalar AddV2, callable; baseline: direct AddV2 kernel call";
    Ok(vec![
        Figure::new("chain", "p50", per_node(50.0), "ns", 1).with_baseline(direct.percentile_ns(50.0)).with_note(note),
        Figure::new("chain", "p99", per_node(99.0), "ns", 1).with_baseline(direct.percentile_ns(99.0)).with_note(note),
    ])
}

fn fanout_median(threads: usize, iters: usize, x: &Tensor) -> Result<Duration> {
    let options = SessionOptions { threads_per_device: threads, ..SessionOptions::default() };
    let session = create_session(fanout_graph(8, 256), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["total:0"])?;
    let run_options = RunOptions::default();
    let steps = time_each(iters, || {
        let (out, _) = session.run_callable(handle, vec![x.clone()], &run_options)?;
        std::hint::black_box(out);
        Ok(())
    })?;
    session.close()?;
    Ok(Duration::from_nanos(steps.percentile_ns(50.0) as u64))
}

pub fn fanout(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let iters = iters_or(opts, 200);
    let x =
        Tensor::build::<f32>([256, 256], |v| v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 13) as f32 / 13.0))?;
    let counts: Vec<usize> = if opts.threads > 0 {
        vec![opts.threads]
    } else {
        let n = cores();
        let mut c: Vec<usize> = [2, 4, 8, 16].into_iter().filter(|&t| t <= n).collect();
        if !c.contains(&n) {
            c.push(n);
        }
        c
    };
    let one = fanout_median(1, iters, &x)?;
    let mut figures = vec![
        Figure::new("fanout", "p50_step", one.as_secs_f64() * 1e6, "us", 1)
            .with_note("8 x MatMul 256x256 + AddN, 1 pool thread"),
    ];
    for threads in counts {
        let t = fanout_median(threads, iters, &x)?;
        figures.push(
            Figure::new("fanout", "p50_step", t.as_secs_f64() * 1e6, "us", threads)
                .with_baseline(one.as_secs_f64() * 1e6)
                .with_note("baseline: the same graph with 1 pool thread"),
        );
        figures.push(
            Figure::new("fanout", "speedup", one.as_secs_f64() / t.as_secs_f64(), "x", threads)
                .with_note("p50 step time with 1 thread / with this many"),
        );
    }
    Ok(figures)
}
