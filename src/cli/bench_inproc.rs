//! In-process benchmarks: the trivial step through a callable, the cost per
//! node of a long chain, and the speedup of independent MatMul branches
//! with the pool's threads. Each reports a baseline measured in the same
//! run, with no runtime around it: a direct call of the same kernel, and for
//! the fan-out also the same products on plain threads (what the machine's
//! cores give at that thread count).
//!
//! Owns: these scenarios and the demo. Must not assert speed: it measures
//! and reports.

use crate::bench::{Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::graph::builder::{chain_graph, fanout_graph, fanout_weights, trivial_add_graph};
use crate::graph::{AttrValue, DataType, NodeSpec};
use crate::ops::matmul::{Gemm, Strided};
use crate::ops::{KernelInit, OpContext, ResourceMgr, Value, lookup};
use crate::session::{RunOptions, Session, SessionOptions, create_session};
use crate::tensor::{DType, Tensor};
use parking_lot::Mutex;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    let signature = def.resolve(&node)?;
    let kernel = def.build_kernel(&KernelInit { node: &node, signature: &signature })?;
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

/// Iterations of the counting loop per step of `while-loop`.
const LOOP_ITERATIONS: i32 = 10_000;

/// A built AddV2 kernel of `dtype`, for direct calls.
fn add_kernel(dtype: DType) -> Result<Box<dyn crate::ops::OpKernel>> {
    let node = NodeSpec::new("add", "AddV2").attr("T", AttrValue::Type(DataType::Tensor(dtype)));
    let def = lookup("AddV2").ok_or_else(|| Status::not_found("AddV2 is not registered"))?;
    let signature = def.resolve(&node)?;
    def.build_kernel(&KernelInit { node: &node, signature: &signature })
}

/// `while i < n: i += 1; s += 1.0` (v1 control flow, 10,000 iterations a
/// step): nanoseconds per iteration, against the body's two AddV2 kernels
/// called directly in a Rust loop with their outputs fed back.
pub fn while_loop(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let iters = iters_or(opts, 200);
    let options = SessionOptions::default();
    let session = create_session(crate::graph::builder::counting_loop_graph(10), &options)?;
    let handle = callable(session.as_ref(), &["n:0"], &["s_out:0"])?;
    let n = Tensor::scalar(LOOP_ITERATIONS);
    let run_options = RunOptions::default();
    let steps = time_each(iters, || {
        let (out, _) = session.run_callable(handle, vec![n.clone()], &run_options)?;
        if out[0].scalar_value::<f32>()? != LOOP_ITERATIONS as f32 {
            return Err(Status::internal("the loop computed a wrong count"));
        }
        Ok(())
    })?;
    session.close()?;
    let (add_i, add_s) = (add_kernel(DType::I32)?, add_kernel(DType::F32)?);
    let resources = ResourceMgr::default();
    let (one_i, one_f) = (Tensor::scalar(1i32), Tensor::scalar(1.0f32));
    let direct = time_each(iters, || {
        let (mut i, mut s) = (Tensor::scalar(0i32), Tensor::scalar(0.0f32));
        for _ in 0..LOOP_ITERATIONS {
            let mut inputs = [Some(Value::Tensor(i)), Some(Value::Tensor(one_i.clone()))];
            let mut outputs = [None];
            add_i.compute(&mut OpContext::new(&mut inputs, &mut outputs, &resources))?;
            i = outputs[0].take().and_then(|v| v.into_tensor().ok()).ok_or_else(|| Status::internal("no sum"))?;
            let mut inputs = [Some(Value::Tensor(s)), Some(Value::Tensor(one_f.clone()))];
            add_s.compute(&mut OpContext::new(&mut inputs, &mut outputs, &resources))?;
            s = outputs[0].take().and_then(|v| v.into_tensor().ok()).ok_or_else(|| Status::internal("no sum"))?;
        }
        std::hint::black_box((&i, &s));
        Ok(())
    })?;
    let per_iteration = |rec: &LatencyRecorder, p: f64| rec.percentile_ns(p) / LOOP_ITERATIONS as f64;
    let note =
        "v1 while loop, 10,000 iterations a step, callable; baseline: the body's two AddV2 kernels called directly";
    Ok(vec![
        Figure::new("while-loop", "per_iteration", per_iteration(&steps, 50.0), "ns", options.threads_per_device)
            .with_baseline(per_iteration(&direct, 50.0))
            .with_note(note),
        Figure::new("while-loop", "per_iteration_p99", per_iteration(&steps, 99.0), "ns", options.threads_per_device)
            .with_baseline(per_iteration(&direct, 99.0))
            .with_note(note),
    ])
}

/// `conv`: a 3×3 SAME convolution of a [4, 32, 32, 32] image to 64
/// channels (a ResNet-style layer), 1 pool thread.
const CONV_INPUT: [usize; 4] = [4, 32, 32, 32];
const CONV_OUT: usize = 64;

/// Conv2D through a callable, against the gemm it reduces to (the same
/// [rows, 9·C] × [9·C, out] products on an already-built patch matrix,
/// called directly): what im2col and the runtime add to the library call.
pub fn conv(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let iters = iters_or(opts, 200);
    let [n, h, w, c] = CONV_INPUT;
    let patch = 9 * c;
    let mut b = crate::graph::builder::GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let weights: Vec<f32> = (0..patch * CONV_OUT).map(|i| ((i * 7919) % 13) as f32 / 13.0 - 0.5).collect();
    let f = b.constant("f", &Tensor::from_slice::<f32>([3, 3, c, CONV_OUT], &weights)?);
    let ints = |v: &[i64]| AttrValue::List(crate::graph::AttrList::Int(v.to_vec()));
    b.add(
        "y",
        "Conv2D",
        &[&x, &f],
        vec![
            ("T", AttrValue::Type(DataType::Tensor(DType::F32))),
            ("strides", ints(&[1, 1, 1, 1])),
            ("padding", AttrValue::Bytes(b"SAME".to_vec())),
        ],
    );
    let options = SessionOptions { threads_per_device: 1, ..SessionOptions::default() };
    let session = create_session(b.finish(), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["y:0"])?;
    let image: Vec<f32> = (0..n * h * w * c).map(|i| (i % 17) as f32 / 17.0).collect();
    let xt = Tensor::from_slice::<f32>(CONV_INPUT, &image)?;
    let run_options = RunOptions::default();
    let steps = time_each(iters, || {
        let (out, _) = session.run_callable(handle, vec![xt.clone()], &run_options)?;
        std::hint::black_box(out);
        Ok(())
    })?;
    session.close()?;
    let rows = h * w;
    let cols: Vec<f32> = (0..rows * patch).map(|i| (i % 17) as f32 / 17.0).collect();
    let mut out = vec![0.0f32; rows * CONV_OUT];
    let direct = time_each(iters, || {
        for _ in 0..n {
            <f32 as Gemm>::gemm_over(
                [rows, patch, CONV_OUT],
                Strided::row_major(&cols, patch),
                Strided::row_major(&weights, CONV_OUT),
                &mut out,
            );
        }
        std::hint::black_box(&out);
        Ok(())
    })?;
    let note = "Conv2D 3x3 SAME [4,32,32,32] -> 64, callable, 1 thread; baseline: its gemms called directly";
    Ok(vec![
        Figure::new("conv", "p50", steps.percentile_us(50.0), "us", 1)
            .with_baseline(direct.percentile_us(50.0))
            .with_note(note),
        Figure::new("conv", "p99", steps.percentile_us(99.0), "us", 1)
            .with_baseline(direct.percentile_us(99.0))
            .with_note(note),
    ])
}

const FANOUT_BRANCHES: usize = 8;
const FANOUT_SIZE: usize = 256;

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
    let session = create_session(fanout_graph(FANOUT_BRANCHES, FANOUT_SIZE), &options)?;
    let handle = callable(session.as_ref(), &["x:0"], &["total:0"])?;
    Ok((session, handle))
}

/// The fan-out graph's arithmetic with no runtime around it: the same
/// products by direct gemm calls on a crew of plain threads, each claiming
/// products one at a time from a counter (so a slower vCPU simply takes
/// fewer), handed the step by the calling thread and summed there after,
/// as a session's caller hands a step to its pool. What this machine gives
/// for this work at a thread count, measured in the same run as the graph:
/// on a shared host one vCPU is at times much slower than another, and no
/// runtime can beat that.
struct RawFanout {
    x: Vec<f32>,
    weights: Vec<Vec<f32>>,
    products: Vec<Mutex<Vec<f32>>>,
    total: Mutex<Vec<f32>>,
    next: AtomicUsize,
    size: usize,
}

/// Threads that run [`RawFanout::step`]'s products: started once, woken
/// per step by a barrier, as a pool's parked threads are.
struct RawCrew {
    go: Barrier,
    done: Barrier,
    stop: AtomicBool,
}

impl RawFanout {
    fn new(branches: usize, size: usize, x: &Tensor) -> Result<RawFanout> {
        Ok(RawFanout {
            x: x.as_slice::<f32>()?.to_vec(),
            weights: (0..branches).map(|i| fanout_weights(i, size)).collect(),
            products: (0..branches).map(|_| Mutex::new(vec![0.0; size * size])).collect(),
            total: Mutex::new(vec![0.0; size * size]),
            next: AtomicUsize::new(0),
            size,
        })
    }

    fn multiply_until_none_left(&self) {
        let n = self.size;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(out) = self.products.get(i) else { return };
            <f32 as Gemm>::gemm_over(
                [n, n, n],
                Strided::row_major(&self.x, n),
                Strided::row_major(&self.weights[i], n),
                &mut out.lock(),
            );
        }
    }

    /// One step: the crew multiplies, this thread sums.
    fn step(&self, crew: &RawCrew) -> Duration {
        let start = Instant::now();
        self.next.store(0, Ordering::Relaxed);
        crew.go.wait();
        crew.done.wait();
        let mut total = self.total.lock();
        total.copy_from_slice(&self.products[0].lock());
        for product in &self.products[1..] {
            total.iter_mut().zip(product.lock().iter()).for_each(|(t, p)| *t += p);
        }
        std::hint::black_box(&*total);
        start.elapsed()
    }

    /// Runs `measure` while a crew of `threads` threads stands by for its
    /// steps; they are released and joined when it returns. With `pin`,
    /// crew thread i runs on CPU i, as a pinned session's pool thread i does.
    fn with_crew<R>(&self, threads: usize, pin: bool, measure: impl FnOnce(&RawCrew) -> R) -> R {
        let crew =
            RawCrew { go: Barrier::new(threads + 1), done: Barrier::new(threads + 1), stop: AtomicBool::new(false) };
        let cpus = cores();
        std::thread::scope(|scope| {
            for i in 0..threads {
                let crew = &crew;
                scope.spawn(move || {
                    if pin {
                        crate::executor::pool::pin_to_cpu(i % cpus);
                    }
                    loop {
                        crew.go.wait();
                        if crew.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        self.multiply_until_none_left();
                        crew.done.wait();
                    }
                });
            }
            let result = measure(&crew);
            crew.stop.store(true, Ordering::Relaxed);
            crew.go.wait();
            result
        })
    }
}

/// p50 step times of several step functions measured round-robin, so all
/// see the same machine (this one is shared and noisy).
fn interleaved(steps: &mut [&mut dyn FnMut() -> Result<Duration>], iters: usize) -> Result<Vec<f64>> {
    for _ in 0..(iters / 10).max(2) {
        for step in steps.iter_mut() {
            step()?;
        }
    }
    let mut recorders: Vec<LatencyRecorder> = steps.iter().map(|_| LatencyRecorder::default()).collect();
    for _ in 0..iters {
        for (step, recorder) in steps.iter_mut().zip(&mut recorders) {
            recorder.record(step()?);
        }
    }
    Ok(recorders.iter().map(|r| r.percentile_us(50.0)).collect())
}

/// One timed step through a session's callable.
fn callable_step(session: &(Box<dyn Session>, u64), x: &Tensor) -> Result<Duration> {
    let start = Instant::now();
    let (out, _) = session.0.run_callable(session.1, vec![x.clone()], &RunOptions::default())?;
    std::hint::black_box(out);
    Ok(start.elapsed())
}

pub fn fanout(opts: &BenchOptions) -> Result<Vec<Figure>> {
    let iters = iters_or(opts, 200);
    let x = Tensor::build::<f32>([FANOUT_SIZE, FANOUT_SIZE], |v| {
        v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 13) as f32 / 13.0)
    })?;
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
    let raw = RawFanout::new(FANOUT_BRANCHES, FANOUT_SIZE, &x)?;
    let mut figures = Vec::new();
    for threads in counts {
        let many = fanout_session(threads, opts.pin)?;
        let p50s = raw.with_crew(1, opts.pin, |crew1| {
            raw.with_crew(threads, opts.pin, |crew_n| {
                interleaved(
                    &mut [
                        &mut || callable_step(&one, &x),
                        &mut || callable_step(&many, &x),
                        &mut || Ok(raw.step(crew1)),
                        &mut || Ok(raw.step(crew_n)),
                    ],
                    iters,
                )
            })
        })?;
        let [t1, tn, raw1, raw_n] = p50s[..] else {
            return Err(Status::internal("four interleaved step functions gave another number of medians"));
        };
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
        figures.push(Figure::new("fanout", "raw_speedup", raw1 / raw_n, "x", threads).with_note(format!(
            "the same {FANOUT_BRANCHES} products by direct gemm calls on plain threads claiming them from a \
             counter, summed by the caller, 1 thread / this many (p50 {raw1:.0} / {raw_n:.0} us){}: what this machine gives",
            if opts.pin { "; crew threads pinned as the pool's" } else { "" }
        )));
        figures.push(
            Figure::new("fanout", "speedup", t1 / tn, "x", threads).with_baseline(raw1 / raw_n).with_note(
                "p50 step time with 1 pool thread / with this many (interleaved runs); baseline: raw_speedup",
            ),
        );
    }
    one.0.close()?;
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionExt;

    #[test]
    fn the_raw_fan_out_computes_what_the_graph_computes() {
        let x =
            Tensor::build::<f32>([32, 32], |v| v.iter_mut().enumerate().for_each(|(i, e)| *e = (i % 5) as f32 - 2.0))
                .expect("x");
        let session =
            create_session(fanout_graph(3, 32), &SessionOptions { threads_per_device: 2, ..Default::default() })
                .expect("session");
        let graph_total = session.run_simple(&[("x:0", x.clone())], &["total:0"], &[]).expect("a step").remove(0);
        let raw = RawFanout::new(3, 32, &x).expect("raw");
        for threads in [1, 2, 3] {
            raw.with_crew(threads, threads == 2, |crew| raw.step(crew));
            let raw_total = raw.total.lock();
            let expected = graph_total.as_slice::<f32>().expect("f32");
            assert_eq!(raw_total.len(), expected.len());
            for (i, (r, g)) in raw_total.iter().zip(expected).enumerate() {
                assert!(
                    (r - g).abs() <= 1e-4 * g.abs().max(1.0),
                    "element {i} with {threads} threads: raw {r}, graph {g}"
                );
            }
        }
    }
}
