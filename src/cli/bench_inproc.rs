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
    /// Pin pool threads to cores (fanout).
    pub pin: bool,
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

const FANOUT_BRANCHES: usize = 8;

/// The median time one MatMul kernel took inside traced fan-out steps:
/// with more threads it falls while idle threads take row blocks of it
/// (intra-op), and rises where the branches slow each other down (shared
/// caches, clocks, sibling hyperthreads, a slower vCPU).
fn matmul_kernel_us(session: &(Box<dyn Session>, u64), x: &Tensor, steps: usize) -> Result<f64> {
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let mut kernel = LatencyRecorder::default();
    for _ in 0..steps {
        let (_, metadata) = session.0.run_callable(session.1, vec![x.clone()], &options)?;
        let matmuls: Vec<_> = metadata.step_stats.iter().filter(|n| n.op == "MatMul").collect();
        if matmuls.len() != FANOUT_BRANCHES {
            return Err(Status::internal(format!(
                "a traced fan-out step reported {} MatMul nodes, expected {FANOUT_BRANCHES}",
                matmuls.len()
            )));
        }
        for n in &matmuls {
            kernel.record(Duration::from_micros(n.end_us.saturating_sub(n.start_us)));
        }
    }
    Ok(kernel.percentile_us(50.0))
}

/// A fan-out session with `threads` pool threads and its callable.
fn fanout_session(threads: usize, pin: bool) -> Result<(Box<dyn Session>, u64)> {
    let options = SessionOptions { threads_per_device: threads, pin_threads: pin, ..SessionOptions::default() };
    let session = create_session(fanout_graph(FANOUT_BRANCHES, 256), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["total:0"])?;
    Ok((session, handle))
}

/// Step times of two sessions measured alternately, so both see the same
/// machine (this one is shared and noisy).
fn interleaved(
    a: &(Box<dyn Session>, u64),
    b: &(Box<dyn Session>, u64),
    x: &Tensor,
    iters: usize,
) -> Result<(f64, f64)> {
    let options = RunOptions::default();
    let step = |s: &(Box<dyn Session>, u64)| -> Result<Duration> {
        let start = Instant::now();
        let (out, _) = s.0.run_callable(s.1, vec![x.clone()], &options)?;
        std::hint::black_box(out);
        Ok(start.elapsed())
    };
    for _ in 0..(iters / 10).max(2) {
        step(a)?;
        step(b)?;
    }
    let (mut ra, mut rb) = (LatencyRecorder::default(), LatencyRecorder::default());
    for _ in 0..iters {
        ra.record(step(a)?);
        rb.record(step(b)?);
    }
    Ok((ra.percentile_us(50.0), rb.percentile_us(50.0)))
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
    let one = fanout_session(1, opts.pin)?;
    let mut figures = Vec::new();
    for threads in counts {
        let many = fanout_session(threads, opts.pin)?;
        let (t1, tn) = interleaved(&one, &many, &x, iters)?;
        let traced_steps = (iters / 10).max(5);
        let (kernel1, kernel_n) =
            (matmul_kernel_us(&one, &x, traced_steps)?, matmul_kernel_us(&many, &x, traced_steps)?);
        many.0.close()?;
        figures.push(
            Figure::new("fanout", "matmul_kernel_us", kernel_n, "us", threads).with_baseline(kernel1).with_note(
                "median time of one 256x256 MatMul kernel inside a traced step; baseline: the same with 1 pool thread",
            ),
        );
        figures.push(Figure::new("fanout", "p50_step", tn, "us", threads).with_baseline(t1).with_note(format!(
            "8 x MatMul 256x256 + AddN; baseline: the same graph with 1 pool thread, steps interleaved{}",
            if opts.pin { "; threads pinned" } else { "" }
        )));
        figures.push(
            Figure::new("fanout", "speedup", t1 / tn, "x", threads)
                .with_note("p50 step time with 1 pool thread / with this many (interleaved runs)"),
        );
    }
    one.0.close()?;
    Ok(figures)
}
