//! Benchmarks across processes on a local cluster: the trivial remote step,
//! a 64 MiB tensor crossing tasks, and fan-out/fan-in over 2, 4 and 8 tasks.
//! Each reports a raw baseline measured in the same run: a spinning TCP
//! ping-pong between two processes, or raw TCP bulk bandwidth; the remote
//! step also the bare relay of its messages through three processes.
//!
//! Owns: these scenarios. Must not assert speed.

use crate::bench::{self, Figure, LatencyRecorder};
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
    /// `--transport shm`: step-remote and transfer-remote over the
    /// shared-memory channel, against the same run's TCP step or memcpy.
    pub shm: bool,
    /// `--pin-threads`: step-remote over shared memory places the client
    /// and both tasks' processes on CPUs of their own where there are
    /// enough (see `StepPlacement`).
    pub pin: bool,
}

/// A cluster on TCP: the figures without `--transport shm` are TCP's.
fn cluster(tasks: usize) -> Result<LocalCluster> {
    LocalCluster::start(&current_binary()?, tasks, &LocalClusterOptions { force_tcp: true, ..Default::default() })
}

/// A cluster whose tasks (and this client) talk over shared memory.
fn shm_cluster(tasks: usize) -> Result<LocalCluster> {
    LocalCluster::start(&current_binary()?, tasks, &LocalClusterOptions::default())
}

fn session(cluster: &LocalCluster, graph: GraphSpec) -> Result<Box<dyn Session>> {
    create_session(graph, &SessionOptions { target: cluster.target(0), ..SessionOptions::default() })
}

fn make_callable(s: &dyn Session, feeds: &[&str], fetches: &[&str]) -> Result<u64> {
    let names = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    s.make_callable(&names(feeds), &names(fetches), &[])
}

/// A callable of `graph` (feed `x`, fetch `fetch`) on `cluster`, run step by step.
struct TimedStep {
    session: Box<dyn Session>,
    handle: u64,
    feeds: Vec<Tensor>,
    options: RunOptions,
}

impl TimedStep {
    fn new(cluster: &LocalCluster, graph: GraphSpec, fetch: &str) -> Result<TimedStep> {
        Self::fetching(cluster, graph, &[fetch])
    }

    fn fetching(cluster: &LocalCluster, graph: GraphSpec, fetches: &[&str]) -> Result<TimedStep> {
        let session = session(cluster, graph)?;
        let handle = make_callable(session.as_ref(), &["x"], fetches)?;
        Ok(TimedStep { session, handle, feeds: vec![Tensor::scalar(1.0f32)], options: RunOptions::default() })
    }

    fn step(&mut self) -> Result<Duration> {
        let start = Instant::now();
        let (out, _) = self.session.run_callable(self.handle, self.feeds.clone(), &self.options)?;
        let took = start.elapsed();
        std::hint::black_box(out);
        Ok(took)
    }

    fn close(self) -> Result<()> {
        self.session.release_callable(self.handle)?;
        self.session.close()
    }
}

/// Steps and baselines take turns in blocks of this many, each turn after
/// 1 ms of untimed runs: longer than any peer spins on after its turn
/// (100 µs) and than a sleeping peer takes to wake.
const TURN_BLOCK: usize = 250;

fn step_turns(iterations: usize) -> bench::Turns {
    bench::Turns { iterations, block: TURN_BLOCK, settle: Duration::from_millis(1), warmup: bench::WARMUP }
}

/// The raw baselines' messages: 64 B, as a trivial step's frames are small.
const RAW_MESSAGE_BYTES: usize = 64;

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
        return step_remote_against(other, iters, opts.shm);
    }
    if opts.shm {
        return step_remote_shm(iters, opts.pin);
    }
    let c = cluster(2)?;
    let mut trivial = TimedStep::new(&c, trivial_remote_graph(), "y")?;
    let mut sent = TimedStep::new(&c, sent_remote_graph(), "y")?;
    let mut raw = net_bench::RawEcho::pingpong_apart(RAW_MESSAGE_BYTES)?;
    let mut relay = net_bench::RawEcho::relay(RAW_MESSAGE_BYTES)?;
    let [steps, steps_sent, raw, relay] =
        bench::interleaved([&mut || trivial.step(), &mut || sent.step(), &mut raw, &mut relay], step_turns(iters))?;
    trivial.close()?;
    sent.close()?;
    c.shutdown();
    let turns = format!(
        "; steps and baselines take turns in blocks of {TURN_BLOCK}, each after 1 ms untimed, \
         after {} ms of untimed turns",
        bench::WARMUP.as_millis()
    );
    let fed = format!(
        "client process -> master (task 0, x fed) -> task 1 (x + 1, x delivered with its RunGraph) -> client; \
         baseline: raw spinning TCP round trip, 64 B, two processes pinned to two CPUs, same run{turns}"
    );
    let sent_note =
        "as p50/p99, but task 0 computes x * 2 and sends it to task 1 (_Send/_Recv across processes); same baseline";
    let mut figures = Vec::new();
    for (timed, suffix, note) in [(&steps, "", fed.as_str()), (&steps_sent, "-sent", sent_note)] {
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("step-remote", &format!("p{p:.0}{suffix}"), timed.percentile_us(p), "us", 1)
                    .with_baseline(raw.percentile_us(p))
                    .with_note(note),
            );
        }
    }
    figures.push(
        Figure::new("step-remote", "p50-over-relay", steps.percentile_us(50.0) / relay.percentile_us(50.0), "x", 1)
            .with_note("p50 / p50-raw-relay: what the runtime adds to the bare path of a step's messages"),
    );
    for p in [50.0, 99.0] {
        figures.push(
            Figure::new("step-remote", &format!("p{p:.0}-raw-relay"), relay.percentile_us(p), "us", 1)
                .with_baseline(raw.percentile_us(p))
                .with_note(format!(
                    "no runtime: 64 B from this process through a relay process to an echo process and back \
                     (a step's path), every end spinning then yielding as ringflow's waits do: what 3 processes \
                     cost on this machine; same baseline{turns}"
                )),
        );
    }
    Ok(figures)
}

/// Both clusters on the same transport (TCP, or shared memory with
/// `shm`): a comparison of builds, not of transports.
fn step_remote_against(other: &std::path::Path, iters: usize, shm: bool) -> Result<Vec<Figure>> {
    let ours = if shm { shm_cluster(2)? } else { cluster(2)? };
    let theirs = LocalCluster::start(other, 2, &LocalClusterOptions { force_tcp: !shm, ..Default::default() })
        .map_err(|e| e.context(format_args!("starting servers from {}", other.display())))?;
    let transport = if shm { "shared memory" } else { "TCP" };
    let note = format!(
        "{transport}; baseline: the same steps on servers from {}, both clusters up at once, the client alternating blocks of {TURN_BLOCK} steps",
        other.display()
    );
    let mut figures = Vec::new();
    for (graph, suffix) in [(trivial_remote_graph(), ""), (sent_remote_graph(), "-sent")] {
        let mut mine = TimedStep::new(&ours, graph.clone(), "y")?;
        let mut baseline = TimedStep::new(&theirs, graph, "y")?;
        let [mine_rec, baseline_rec] =
            bench::interleaved([&mut || mine.step(), &mut || baseline.step()], step_turns(iters))?;
        mine.close()?;
        baseline.close()?;
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("step-remote", &format!("p{p:.0}{suffix}"), mine_rec.percentile_us(p), "us", 1)
                    .with_baseline(baseline_rec.percentile_us(p))
                    .with_note(note.clone()),
            );
        }
    }
    ours.shutdown();
    theirs.shutdown();
    Ok(figures)
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
/// The trivial remote step over shared memory against the same step over
/// TCP: both clusters run at once and take turns.
/// Where a pinned step-remote runs: the client (this thread), task 0 (the
/// master) and task 1 each on a CPU of their own given three; given two,
/// the master alone on one, since it is on the step's path twice: on 2
/// vCPUs a trivial step took 8.9 µs with the master alone and 12.6–13.2 µs
/// with it sharing a CPU with the client or task 1 (`step_loop`, 20,000
/// steps, processes held by `taskset`), and unpinned runs land near one or
/// the other.
struct StepPlacement {
    client: usize,
    tasks: Vec<usize>,
}

impl StepPlacement {
    fn choose() -> Result<Option<StepPlacement>> {
        let cpus = net_bench::allowed_cpus()?;
        Ok(match cpus.as_slice() {
            [client, master, worker, ..] => Some(StepPlacement { client: *client, tasks: vec![*master, *worker] }),
            [shared, master] => Some(StepPlacement { client: *shared, tasks: vec![*master, *shared] }),
            _ => None,
        })
    }

    fn describe(&self) -> String {
        format!(
            "pinned: client on CPU {}, task 0 on CPU {}, task 1 on CPU {}",
            self.client, self.tasks[0], self.tasks[1]
        )
    }
}

fn step_remote_shm(iters: usize, pin: bool) -> Result<Vec<Figure>> {
    if !crate::net::shm::enabled_by_env() {
        return Err(Status::invalid_argument("step-remote shm: RINGFLOW_TRANSPORT turns shared memory off"));
    }
    let placement = if pin { StepPlacement::choose()? } else { None };
    let task_cpus = placement.as_ref().map(|p| p.tasks.clone()).unwrap_or_default();
    let _on_client_cpu = placement.as_ref().map(|p| net_bench::ThreadOnCpu::enter(p.client)).transpose()?;
    let binary = current_binary()?;
    let shm =
        LocalCluster::start(&binary, 2, &LocalClusterOptions { task_cpus: task_cpus.clone(), ..Default::default() })?;
    let tcp =
        LocalCluster::start(&binary, 2, &LocalClusterOptions { force_tcp: true, task_cpus, ..Default::default() })?;
    let mut on_shm = TimedStep::new(&shm, trivial_remote_graph(), "y")?;
    let mut on_tcp = TimedStep::new(&tcp, trivial_remote_graph(), "y")?;
    let [shm_rec, tcp_rec] = bench::interleaved([&mut || on_shm.step(), &mut || on_tcp.step()], step_turns(iters))?;
    let [shm_idle_rec, tcp_idle_rec] = bench::interleaved(
        [&mut AfterIdle(&mut on_shm) as &mut dyn bench::Timed<Status>, &mut AfterIdle(&mut on_tcp)],
        step_turns(iters),
    )?;
    on_shm.close()?;
    on_tcp.close()?;
    shm.shutdown();
    tcp.shutdown();
    let pinning = placement.map_or_else(|| "unpinned".to_string(), |p| p.describe());
    let note = format!(
        "client process -> master (task 0, x fed) -> task 1 (x + 1) -> client, every hop over shared memory; \
         baseline: the same step on a second 2-task cluster forced to TCP (--transport tcp), same run, \
         turns in blocks of {TURN_BLOCK} after {} ms of untimed turns; {pinning}",
        bench::WARMUP.as_millis()
    );
    let idle_note = format!(
        "as p50_shm, but every turn of {TURN_BLOCK} steps (and its 1 ms untimed) comes after {} ms with the \
         machine idle, as steps in bursts do; baseline: the TCP cluster, the same way; {pinning}",
        IDLE_GAP.as_millis()
    );
    let mut figures = Vec::new();
    for (rec, base, suffix, note) in
        [(&shm_rec, &tcp_rec, "", &note), (&shm_idle_rec, &tcp_idle_rec, "_after_idle", &idle_note)]
    {
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("step-remote", &format!("p{p:.0}_shm{suffix}"), rec.percentile_us(p), "us", 1)
                    .with_baseline(base.percentile_us(p))
                    .with_note(note.clone()),
            );
        }
    }
    Ok(figures)
}

/// The idle stretch before every turn of `p50_shm_after_idle`: long
/// enough that every waiting thread has gone to sleep, short enough that
/// /proc/stat windows mix it with the steps.
const IDLE_GAP: Duration = Duration::from_millis(7);

/// A [`TimedStep`] whose turns each end with [`IDLE_GAP`] of sleep.
struct AfterIdle<'a>(&'a mut TimedStep);

impl bench::Timed<Status> for AfterIdle<'_> {
    fn run_once(&mut self) -> Result<Duration> {
        self.0.step()
    }

    fn turn_over(&mut self) {
        std::thread::sleep(IDLE_GAP);
    }
}

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
    if opts.shm {
        return transfer_remote_shm(bytes, elements, iters);
    }
    let c = cluster(2)?;
    let mut run = TracedTransfer::new(&c, elements, iters)?;
    for _ in 0..iters {
        run.step()?;
    }
    run.close()?;
    c.shutdown();
    let crossing = run.crossing();
    let gbps = bytes as f64 / crossing.as_secs_f64() / 1e9;
    let payload = vec![1u8; bytes as usize];
    let mib = bytes as f64 / (1 << 20) as f64;
    let raw = net_bench::raw_bulk(
        &net_bench::BenchOptions { bulk_iterations: iters.max(5), ..net_bench::BenchOptions::default() },
        &payload,
        0,
    )?;
    Ok(vec![
        Figure::new("transfer-remote", "bandwidth", gbps, "GB/s", 1).with_baseline(raw).with_note(format!(
            "{mib:.0} MiB filled on task 1, summed on task 0; p50 crossing {:.2} ms, from _Send start (task 1) to _Recv end (task 0) in traced steps; baseline: raw TCP bulk, same run",
            crossing.as_secs_f64() * 1e3,
        )),
        Figure::new("transfer-remote", "p50_step", run.steps.percentile_us(50.0) / 1e3, "ms", 1)
            .with_note("the whole traced step: fill, crossing, sum, fetch"),
    ])
}

/// Fill on task 1, Sum on task 0, traced, step by step: each step's
/// crossing (`_Send` start to `_Recv` end) and whole time.
struct TracedTransfer {
    session: Box<dyn Session>,
    handle: u64,
    crossings: LatencyRecorder,
    steps: LatencyRecorder,
}

impl TracedTransfer {
    fn new(cluster: &LocalCluster, elements: usize, iters: usize) -> Result<TracedTransfer> {
        let session = session(cluster, fill_and_sum(elements, 1, 0))?;
        let handle = session.make_callable(&[], &["total".to_string()], &[])?;
        let run = TracedTransfer {
            session,
            handle,
            crossings: LatencyRecorder::default(),
            steps: LatencyRecorder::default(),
        };
        for _ in 0..(iters / 10).max(2) {
            run.run_traced()?;
        }
        Ok(run)
    }

    fn run_traced(&self) -> Result<(Duration, u64)> {
        let traced = RunOptions { trace: true, ..RunOptions::default() };
        let start = Instant::now();
        let (_, metadata) = self.session.run_callable(self.handle, Vec::new(), &traced)?;
        Ok((start.elapsed(), crossing_us(&metadata.step_stats)?.max(1)))
    }

    fn step(&mut self) -> Result<()> {
        let (took, crossing_us) = self.run_traced()?;
        self.steps.record(took);
        self.crossings.record(Duration::from_micros(crossing_us));
        Ok(())
    }

    fn crossing(&self) -> Duration {
        Duration::from_nanos(self.crossings.percentile_ns(50.0) as u64)
    }

    fn close(&self) -> Result<()> {
        self.session.release_callable(self.handle)?;
        self.session.close()
    }
}

/// `elements` of Fills of the fed `x` on task 0 (the master), in `parts`
/// tensors of equal size, fetched by this process step by step: written
/// straight into the answer's ring where the server allows.
struct FetchedFill {
    step: TimedStep,
    steps: LatencyRecorder,
}

impl FetchedFill {
    fn new(cluster: &LocalCluster, elements: usize, parts: usize, iters: usize) -> Result<FetchedFill> {
        let mut b = GraphBuilder::new();
        b.set_device("/job:worker/task:0");
        let each = elements / parts;
        let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[each as i32])?);
        let x = b.placeholder("x", DType::F32);
        let fills: Vec<String> =
            (0..parts).map(|i| b.binary(&format!("big_{i}"), "Fill", &dims, &x, DType::F32)).collect();
        let fetches: Vec<&str> = fills.iter().map(String::as_str).collect();
        let step = TimedStep::fetching(cluster, b.finish(), &fetches)?;
        let (outputs, _) = step.session.run_callable(step.handle, step.feeds.clone(), &step.options)?;
        let fetched: usize = outputs.iter().map(Tensor::num_elements).sum();
        if fetched != each * parts || outputs.len() != parts {
            return Err(Status::data_loss(format!("fetched {fetched} elements of {elements} in {parts} tensors")));
        }
        let mut run = FetchedFill { step, steps: LatencyRecorder::default() };
        for _ in 0..(iters / 10).max(2) {
            run.step.step()?;
        }
        Ok(run)
    }

    fn step(&mut self) -> Result<()> {
        self.steps.record(self.step.step()?);
        Ok(())
    }
}

/// Over shared memory, two clusters in turns: one where Fill writes its
/// output straight into the peer's ring (the default), one where the
/// tensor is copied into the ring when sent (`--transport shm-copy`); a
/// memcpy of the same bytes after each pair of steps is the baseline of
/// the copied crossing.
fn transfer_remote_shm(bytes: u64, elements: usize, iters: usize) -> Result<Vec<Figure>> {
    if !crate::net::shm::enabled_by_env() {
        return Err(Status::invalid_argument("transfer-remote shm: RINGFLOW_TRANSPORT turns shared memory off"));
    }
    let in_place_cluster = shm_cluster(2)?;
    let copy_cluster = LocalCluster::start(
        &current_binary()?,
        2,
        &LocalClusterOptions { extra_args: vec!["--transport".into(), "shm-copy".into()], ..Default::default() },
    )?;
    let mut in_place = TracedTransfer::new(&in_place_cluster, elements, iters)?;
    let mut copied = TracedTransfer::new(&copy_cluster, elements, iters)?;
    let mut fetched_in_place = FetchedFill::new(&in_place_cluster, elements, 1, iters)?;
    let mut fetched_copied = FetchedFill::new(&copy_cluster, elements, 1, iters)?;
    let mut halves_in_place = FetchedFill::new(&in_place_cluster, elements, 2, iters)?;
    let mut halves_copied = FetchedFill::new(&copy_cluster, elements, 2, iters)?;
    let source = vec![1u8; bytes as usize];
    let mut copy_to = source.clone();
    let mut copies = LatencyRecorder::default();
    for _ in 0..iters {
        in_place.step()?;
        copied.step()?;
        fetched_in_place.step()?;
        fetched_copied.step()?;
        halves_in_place.step()?;
        halves_copied.step()?;
        let start = Instant::now();
        copy_to.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut copy_to);
        copies.record(start.elapsed());
    }
    in_place.close()?;
    copied.close()?;
    for fetched in [fetched_in_place.step, fetched_copied.step, halves_in_place.step, halves_copied.step] {
        fetched.close()?;
    }
    in_place_cluster.shutdown();
    copy_cluster.shutdown();
    let mib = bytes as f64 / (1 << 20) as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p50_ms = |steps: &LatencyRecorder| steps.percentile_us(50.0) / 1e3;
    let policy = crate::net::shm::region::shmem_huge_policy().unwrap_or_else(|| "unknown".into());
    let memcpy = bytes as f64 / (copies.percentile_ns(50.0) / 1e9) / 1e9;
    let copied_gbps = bytes as f64 / copied.crossing().as_secs_f64() / 1e9;
    Ok(vec![
        Figure::new("transfer-remote", "bandwidth_shm", copied_gbps, "GB/s", 1).with_baseline(memcpy).with_note(format!(
            "{mib:.0} MiB filled on task 1, summed on task 0, copied into the shared-memory ring when sent (--transport shm-copy); \
             p50 crossing {:.2} ms, from _Send start (task 1) to _Recv end (task 0) in traced steps; \
             shmem_enabled: {policy}; baseline: p50 memcpy of the same bytes into a warm private buffer in one process, in turns with the steps",
            ms(copied.crossing()),
        )),
        Figure::new("transfer-remote", "p50_crossing_shm", ms(in_place.crossing()), "ms", 1)
            .with_baseline(ms(copied.crossing()))
            .with_note(
                "the same crossing when Fill writes its output straight into task 0's ring (the default): \
                 nothing is copied when it is sent; baseline: the copied crossing above, same run, in turns",
            ),
        Figure::new("transfer-remote", "p50_step_shm", in_place.steps.percentile_us(50.0) / 1e3, "ms", 1)
            .with_baseline(copied.steps.percentile_us(50.0) / 1e3)
            .with_note("the whole traced step (fill, crossing, sum, fetch) written in place; baseline: the same step copied into the ring, same run, in turns"),
        Figure::new("transfer-remote", "p50_fetch_shm", p50_ms(&fetched_in_place.steps), "ms", 1)
            .with_baseline(p50_ms(&fetched_copied.steps))
            .with_note(format!(
                "{mib:.0} MiB filled on task 0 and fetched by this process, Fill writing it into the ring the RunStep answer leaves through (the default); \
                 baseline: the same step on the shm-copy cluster, which copies it into the ring when answering, same run, in turns"
            )),
        Figure::new("transfer-remote", "p50_fetch_halves_shm", p50_ms(&halves_in_place.steps), "ms", 1)
            .with_baseline(p50_ms(&halves_copied.steps))
            .with_note(format!(
                "the same {mib:.0} MiB as two Fills of half the size, both fetched: one answer whose two payloads each lie in a span of their own; \
                 baseline: the same step on the shm-copy cluster, same run, in turns"
            )),
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
    let mut raw = net_bench::RawEcho::pingpong_apart(RAW_MESSAGE_BYTES)?;
    let mut figures = Vec::new();
    for tasks in [2usize, 4, 8, 16].into_iter().filter(|&t| t <= opts.max_tasks.max(2)) {
        let c = cluster(tasks)?;
        let mut fan = TimedStep::new(&c, fan_graph(tasks), "total")?;
        let [rec, raw] = bench::interleaved([&mut || fan.step(), &mut raw], step_turns(iters))?;
        fan.close()?;
        c.shutdown();
        let note = format!(
            "{tasks} tasks, x fanned out from task 0 and summed back; baseline: raw spinning TCP round trip (two CPUs), \
             same run, taking turns with the steps in blocks of {TURN_BLOCK}"
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

/// `train-step`'s models, exported by `tools/golden/train_demo.py`: one SGD
/// step of an MLP, variables on task 1, compute on task 0.
const TRAIN_MODELS: [(&str, &[u8], [usize; 3], usize); 2] = [
    ("small", include_bytes!("../../tests/fixtures/train-bench/small.pb"), [6, 8, 10], 16),
    ("medium", include_bytes!("../../tests/fixtures/train-bench/medium.pb"), [256, 1024, 10], 256),
];

/// One training step as a callable (feeds x and labels, fetches the loss,
/// runs `train`) on a session of `graph` at `target` ("" in process).
struct TrainStep {
    session: Box<dyn Session>,
    handle: u64,
    feeds: Vec<Tensor>,
}

impl TrainStep {
    fn new(graph: GraphSpec, target: String, [inputs, _, classes]: [usize; 3], batch: usize) -> Result<TrainStep> {
        let session = create_session(graph, &SessionOptions { target, ..SessionOptions::default() })?;
        session.run(&RunOptions::default(), Vec::new(), &[], &["init".to_string()])?;
        let handle = session.make_callable(
            &["x:0".to_string(), "labels:0".to_string()],
            &["loss:0".to_string()],
            &["train".to_string()],
        )?;
        // Inputs that keep the loss finite over many thousand steps.
        let x: Vec<f32> = (0..batch * inputs).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
        let labels: Vec<i64> = (0..batch).map(|i| (i % classes) as i64).collect();
        let feeds = vec![Tensor::from_slice([batch, inputs], &x)?, Tensor::from_slice([batch], &labels)?];
        Ok(TrainStep { session, handle, feeds })
    }

    fn step(&mut self) -> Result<Duration> {
        let start = Instant::now();
        let (out, _) = self.session.run_callable(self.handle, self.feeds.clone(), &RunOptions::default())?;
        let took = start.elapsed();
        let loss = out[0].scalar_value::<f32>()?;
        if !loss.is_finite() {
            return Err(Status::internal(format!("train-step: the loss became {loss}")));
        }
        Ok(took)
    }

    fn close(self) -> Result<()> {
        self.session.release_callable(self.handle)?;
        self.session.close()
    }
}

/// One SGD step of the small and the medium MLP with the variables on task
/// 1 and the compute on task 0, against the same graph in one process on
/// one device (no pins: the forward and backward kernels and the update,
/// no crossing), steps taking turns.
pub fn train_step(opts: &RemoteBenchOptions) -> Result<Vec<Figure>> {
    let c = cluster(2)?;
    let mut figures = Vec::new();
    for (name, graph_pb, sizes, batch) in TRAIN_MODELS {
        let graph = crate::graph::graph_from_pb_bytes(graph_pb)?;
        let mut unpinned = graph.clone();
        unpinned.nodes.iter_mut().for_each(|n| n.device.clear());
        let mut remote = TrainStep::new(graph, c.target(0), sizes, batch)?;
        let mut local = TrainStep::new(unpinned, String::new(), sizes, batch)?;
        let small = name == "small";
        let iterations = match (opts.iterations, small) {
            (0, true) => 5_000,
            (0, false) => 400,
            (n, _) => n,
        };
        let block = if small { TURN_BLOCK } else { 20 };
        let turns = bench::Turns { iterations, block, settle: Duration::from_millis(1), warmup: bench::WARMUP };
        let [remote_rec, local_rec] = bench::interleaved([&mut || remote.step(), &mut || local.step()], turns)?;
        remote.close()?;
        local.close()?;
        let layers = sizes.map(|s| s.to_string()).join("-");
        for p in [50.0, 99.0] {
            figures.push(
                Figure::new("train-step", &format!("p{p:.0}_{name}"), remote_rec.percentile_us(p), "us", 1)
                    .with_baseline(local_rec.percentile_us(p))
                    .with_note(format!(
                        "one SGD step of an MLP {layers} (batch {batch}, exported from TensorFlow): variables on \
                         task 1, compute on task 0, client in this process fetching the loss; baseline: the same \
                         graph unpinned in one process on one device, same run, steps taking turns in blocks of \
                         {block}; default pool threads per device"
                    )),
            );
        }
    }
    c.shutdown();
    Ok(figures)
}
