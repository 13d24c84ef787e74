//! Benchmarks across processes on a local cluster: the trivial remote step,
//! a 64 MiB tensor crossing tasks, and fan-out/fan-in over 2, 4 and 8 tasks.
//! Each reports a raw baseline measured in the same run: a spinning TCP
//! ping-pong between two processes, or raw TCP bulk bandwidth; the remote
//! step also the bare relay of its messages through three processes.
//!
//! Owns: these scenarios. Must not assert speed.

use crate::bench::{Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::executor::NodeStats;
use crate::graph::builder::GraphBuilder;
use crate::graph::{AttrValue, DataType, GraphSpec};
use crate::net::bench as net_bench;
use crate::server::local_cluster::{LocalCluster, LocalClusterOptions, current_binary};
use crate::session::{RunOptions, Session, SessionOptions, create_session};
use crate::tensor::{DType, Tensor};
use std::time::{Duration, Instant};

pub struct RemoteBenchOptions {
    pub iterations: usize,
    pub bulk_bytes: u64,
    /// Largest cluster for `scale` (2, 4, 8 up to this).
    pub max_tasks: usize,
    /// `step-remote` against servers of another build instead of the raw
    /// round trip: both clusters run at once and the client alternates
    /// blocks of steps between them, so both see the same machine.
    pub against: Option<std::path::PathBuf>,
}

fn cluster(tasks: usize) -> Result<LocalCluster> {
    LocalCluster::start(&current_binary()?, tasks, &LocalClusterOptions::default())
}

fn session(cluster: &LocalCluster, graph: GraphSpec) -> Result<Box<dyn Session>> {
    create_session(graph, &SessionOptions { target: cluster.target(0), ..SessionOptions::default() })
}

fn make_callable(s: &dyn Session, feeds: &[&str], fetches: &[&str]) -> Result<u64> {
    let names = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    s.make_callable(&names(feeds), &names(fetches), &[])
}

fn time_callable(
    s: &dyn Session,
    feeds: &[&str],
    fetches: &[&str],
    values: &[Tensor],
    iters: usize,
) -> Result<LatencyRecorder> {
    let handle = make_callable(s, feeds, fetches)?;
    let options = RunOptions::default();
    for _ in 0..(iters / 10).max(5) {
        s.run_callable(handle, values.to_vec(), &options)?;
    }
    let mut rec = LatencyRecorder::default();
    for _ in 0..iters {
        let start = Instant::now();
        let (out, _) = s.run_callable(handle, values.to_vec(), &options)?;
        rec.record(start.elapsed());
        std::hint::black_box(out);
    }
    s.release_callable(handle)?;
    Ok(rec)
}

/// How the raw baselines run: 64 B messages, 20,000 timed round trips.
fn raw_options() -> net_bench::BenchOptions {
    net_bench::BenchOptions { pingpong_iterations: 20_000, ..net_bench::BenchOptions::default() }
}

fn raw_round_trip() -> Result<LatencyRecorder> {
    net_bench::raw_pingpong(&raw_options())
}

/// `x` fed on task 0, `y = x + 1` on task 1, fetched by this process.
pub fn trivial_remote_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let x = b.placeholder("x", DType::F32);
    b.set_device("/job:worker/task:1");
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    b.finish()
}

/// As [`trivial_remote_graph`], but task 0 computes `x * 2` first, so a
/// tensor made on task 0 crosses to task 1 through `_Send`/`_Recv` (a fed
/// value goes straight to the task that reads it and never takes that path).
pub fn sent_remote_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let x = b.placeholder("x", DType::F32);
    let two = b.constant("two", &Tensor::scalar(2.0f32));
    let doubled = b.binary("doubled", "Mul", &x, &two, DType::F32);
    b.set_device("/job:worker/task:1");
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &doubled, &one, DType::F32);
    b.finish()
}

pub fn step_remote(opts: &RemoteBenchOptions) -> Result<Vec<Figure>> {
    let iters = if opts.iterations == 0 { 5_000 } else { opts.iterations };
    if let Some(other) = &opts.against {
        return step_remote_against(other, iters);
    }
    let c = cluster(2)?;
    let mut timed = Vec::new();
    for graph in [trivial_remote_graph(), sent_remote_graph()] {
        let s = session(&c, graph)?;
        timed.push(time_callable(s.as_ref(), &["x"], &["y"], &[Tensor::scalar(1.0f32)], iters)?);
        s.close()?;
    }
    c.shutdown();
    let raw = raw_round_trip()?;
    let relay = net_bench::raw_relay(&raw_options())?;
    let fed = "client process -> master (task 0, x fed) -> task 1 (x + 1, x delivered with its RunGraph) -> client; baseline: raw spinning TCP round trip, 64 B, two processes, same run";
    let sent =
        "as p50/p99, but task 0 computes x * 2 and sends it to task 1 (_Send/_Recv across processes); same baseline";
    let mut figures = Vec::new();
    for (steps, suffix, note) in [(&timed[0], "", fed), (&timed[1], "-sent", sent)] {
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("step-remote", &format!("p{p:.0}{suffix}"), steps.percentile_us(p), "us", 1)
                    .with_baseline(raw.percentile_us(p))
                    .with_note(note),
            );
        }
    }
    figures.push(
        Figure::new("step-remote", "p50-over-relay", timed[0].percentile_us(50.0) / relay.percentile_us(50.0), "x", 1)
            .with_note("p50 / p50-raw-relay: what the runtime adds to the bare path of a step's messages"),
    );
    for p in [50.0, 99.0] {
        figures.push(
            Figure::new("step-remote", &format!("p{p:.0}-raw-relay"), relay.percentile_us(p), "us", 1)
                .with_baseline(raw.percentile_us(p))
                .with_note(
                    "no runtime: 64 B from this process through a relay process to an echo process and back \
                     (a step's path), every end spinning then yielding as ringflow's waits do: what 3 processes \
                     cost on this machine; same baseline",
                ),
        );
    }
    Ok(figures)
}

/// Steps alternate between the clusters in blocks of this many.
const AB_BLOCK: usize = 250;

fn step_remote_against(other: &std::path::Path, iters: usize) -> Result<Vec<Figure>> {
    let ours = cluster(2)?;
    let theirs = LocalCluster::start(other, 2, &LocalClusterOptions::default())
        .map_err(|e| e.context(format_args!("starting servers from {}", other.display())))?;
    let note = format!(
        "baseline: the same steps on servers from {}, both clusters up at once, the client alternating blocks of {AB_BLOCK} steps",
        other.display()
    );
    let mut figures = Vec::new();
    for (graph, suffix) in [(trivial_remote_graph(), ""), (sent_remote_graph(), "-sent")] {
        let [mine, baseline] = interleaved_steps([&ours, &theirs], &graph, iters)?;
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("step-remote", &format!("p{p:.0}{suffix}"), mine.percentile_us(p), "us", 1)
                    .with_baseline(baseline.percentile_us(p))
                    .with_note(note.clone()),
            );
        }
    }
    ours.shutdown();
    theirs.shutdown();
    Ok(figures)
}

/// `iters` steps of `graph` (feed `x`, fetch `y`) on each cluster, in
/// alternating blocks.
fn interleaved_steps(clusters: [&LocalCluster; 2], graph: &GraphSpec, iters: usize) -> Result<[LatencyRecorder; 2]> {
    let mut sessions = Vec::with_capacity(2);
    for c in clusters {
        let s = session(c, graph.clone())?;
        let handle = make_callable(s.as_ref(), &["x"], &["y"])?;
        sessions.push((s, handle));
    }
    let options = RunOptions::default();
    let feeds = [Tensor::scalar(1.0f32)];
    let mut recorders = [LatencyRecorder::default(), LatencyRecorder::default()];
    let mut measured = 0;
    let mut warm = false;
    while measured < iters {
        for ((s, handle), rec) in sessions.iter().zip(&mut recorders) {
            for _ in 0..AB_BLOCK {
                let start = Instant::now();
                let (out, _) = s.run_callable(*handle, feeds.to_vec(), &options)?;
                if warm {
                    rec.record(start.elapsed());
                }
                std::hint::black_box(out);
            }
        }
        if warm {
            measured += AB_BLOCK;
        }
        warm = true;
    }
    for (s, handle) in sessions {
        s.release_callable(handle)?;
        s.close()?;
    }
    Ok(recorders)
}

fn fill_and_sum(elements: usize, fill_task: u32, sum_task: u32) -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device(&format!("/job:worker/task:{fill_task}"));
    let dims = b
        .constant("dims", &Tensor::from_slice::<i32>([1], &[elements as i32]).unwrap_or_else(|_| Tensor::scalar(0i32)));
    let value = b.constant("value", &Tensor::scalar(1.0f32));
    let big = b.add(
        "big",
        "Fill",
        &[&dims, &value],
        vec![
            ("T", AttrValue::Type(DataType::Tensor(DType::F32))),
            ("index_type", AttrValue::Type(DataType::Tensor(DType::I32))),
        ],
    );
    b.set_device(&format!("/job:worker/task:{sum_task}"));
    let axis = b.constant("axis", &Tensor::from_slice::<i32>([1], &[0]).unwrap_or_else(|_| Tensor::scalar(0i32)));
    b.add(
        "total",
        "Sum",
        &[&big, &axis],
        vec![
            ("T", AttrValue::Type(DataType::Tensor(DType::F32))),
            ("Tidx", AttrValue::Type(DataType::Tensor(DType::I32))),
            ("keep_dims", AttrValue::Bool(false)),
        ],
    );
    b.finish()
}

/// The time one tensor took to cross tasks in a traced step: from the
/// start of its `_Send` (the producer hands it over) to the end of its
/// `_Recv` (the consumer has every byte). Stats carry wall-clock
/// microseconds, so the two processes' times compare on one host.
fn crossing_us(stats: &[NodeStats]) -> Result<u64> {
    let one = |op: &str| -> Result<&NodeStats> {
        let mut found = stats.iter().filter(|n| n.op == op);
        match (found.next(), found.next()) {
            (Some(n), None) => Ok(n),
            _ => Err(Status::internal(format!("transfer-remote: expected one {op} in the step's stats"))),
        }
    };
    let (send, recv) = (one("_Send")?, one("_Recv")?);
    recv.end_us
        .checked_sub(send.start_us)
        .ok_or_else(|| Status::internal("transfer-remote: the tensor arrived before it was sent (clock skew?)"))
}

pub fn transfer_remote(opts: &RemoteBenchOptions) -> Result<Vec<Figure>> {
    let bytes = if opts.bulk_bytes == 0 { 64 << 20 } else { opts.bulk_bytes };
    let elements = usize::try_from(bytes / 4).map_err(|_| Status::invalid_argument("size too large"))?;
    if elements > i32::MAX as usize {
        return Err(Status::invalid_argument("transfer-remote sizes stop at 8 GiB (an int32 element count)"));
    }
    let iters = if opts.iterations == 0 { 15 } else { opts.iterations.min(200) };
    let c = cluster(2)?;
    let s = session(&c, fill_and_sum(elements, 1, 0))?;
    let handle = s.make_callable(&[], &["total".to_string()], &[])?;
    let traced = RunOptions { trace: true, ..RunOptions::default() };
    for _ in 0..(iters / 10).max(2) {
        s.run_callable(handle, Vec::new(), &traced)?;
    }
    let (mut crossings, mut steps) = (LatencyRecorder::default(), LatencyRecorder::default());
    for _ in 0..iters {
        let start = Instant::now();
        let (_, metadata) = s.run_callable(handle, Vec::new(), &traced)?;
        steps.record(start.elapsed());
        crossings.record(Duration::from_micros(crossing_us(&metadata.step_stats)?.max(1)));
    }
    s.release_callable(handle)?;
    s.close()?;
    c.shutdown();
    let crossing = Duration::from_nanos(crossings.percentile_ns(50.0) as u64);
    let gbps = bytes as f64 / crossing.as_secs_f64() / 1e9;
    let payload = vec![1u8; bytes as usize];
    let raw = net_bench::raw_bulk(
        &net_bench::BenchOptions { bulk_iterations: iters.max(5), ..net_bench::BenchOptions::default() },
        &payload,
        0,
    )?;
    let mib = bytes as f64 / (1 << 20) as f64;
    Ok(vec![
        Figure::new("transfer-remote", "bandwidth", gbps, "GB/s", 1).with_baseline(raw).with_note(format!(
            "{mib:.0} MiB filled on task 1, summed on task 0; p50 crossing {:.2} ms, from _Send start (task 1) to _Recv end (task 0) in traced steps; baseline: raw TCP bulk, same run",
            crossing.as_secs_f64() * 1e3,
        )),
        Figure::new("transfer-remote", "p50_step", steps.percentile_us(50.0) / 1e3, "ms", 1)
            .with_note("the whole traced step: fill, crossing, sum, fetch"),
    ])
}

/// `x` on task 0; `y_i = x + i` on task i; `total = AddN(y_*)` on task 0.
pub fn fan_graph(tasks: usize) -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let x = b.placeholder("x", DType::F32);
    let mut parts = Vec::with_capacity(tasks);
    for i in 0..tasks {
        b.set_device(&format!("/job:worker/task:{i}"));
        let c = b.constant(&format!("c_{i}"), &Tensor::scalar(i as f32));
        parts.push(b.binary(&format!("y_{i}"), "AddV2", &x, &c, DType::F32));
    }
    b.set_device("/job:worker/task:0");
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    b.add_n("total", &refs, DType::F32);
    b.finish()
}

pub fn scale(opts: &RemoteBenchOptions) -> Result<Vec<Figure>> {
    let iters = if opts.iterations == 0 { 2_000 } else { opts.iterations };
    let raw = raw_round_trip()?;
    let mut figures = Vec::new();
    for tasks in [2usize, 4, 8, 16].into_iter().filter(|&t| t <= opts.max_tasks.max(2)) {
        let c = cluster(tasks)?;
        let s = session(&c, fan_graph(tasks))?;
        let rec = time_callable(s.as_ref(), &["x"], &["total"], &[Tensor::scalar(1.0f32)], iters)?;
        s.close()?;
        c.shutdown();
        let note = format!(
            "{tasks} tasks, x fanned out from task 0 and summed back; baseline: raw spinning TCP round trip, same run"
        );
        figures.push(
            Figure::new(&format!("scale-{tasks}"), "p50", rec.percentile_us(50.0), "us", tasks)
                .with_baseline(raw.percentile_us(50.0))
                .with_note(note.clone()),
        );
        figures.push(
            Figure::new(&format!("scale-{tasks}"), "p99", rec.percentile_us(99.0), "us", tasks)
                .with_baseline(raw.percentile_us(99.0))
                .with_note(note),
        );
    }
    Ok(figures)
}
