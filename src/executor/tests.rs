//! Executor tests below the session: the barrier's error choice, plans over
//! two devices joined by a rendezvous, frame reuse across steps, and
//! concurrent steps on one executor.

use super::*;
use crate::cluster::DeviceName;
use crate::error::{Code, Status};
use crate::graph::{PartitionOptions, builder::GraphBuilder, partition};
use crate::ops::{ResourceMgr, Value};
use crate::tensor::{DType, Tensor};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

fn device(id: u32) -> Arc<Device> {
    let pool = ThreadPool::new(PoolOptions { name: format!("t{id}"), threads: 1, ..PoolOptions::default() }).unwrap();
    Arc::new(Device::new(DeviceName::cpu("localhost", 0, 0, id), Arc::new(pool)))
}

/// Runs `executors` for one step with `feeds`; returns the retvals.
fn run_step(executors: &[Arc<Executor>], feeds: Vec<Tensor>, retvals: usize) -> Result<Vec<Option<Value>>, Status> {
    let step = Arc::new(StepContext::local(
        1,
        Args::Ready(feeds.into_iter().map(|t| Some(Value::Tensor(t))).collect()),
        retvals,
        false,
    ));
    let (tx, rx) = mpsc::channel();
    let barrier = ExecutorBarrier::new(executors.len(), step.clone(), Box::new(move |r| tx.send(r).unwrap()));
    for e in executors {
        let b = barrier.clone();
        e.run_async(step.clone(), Box::new(move |r| b.partition_done(r)));
    }
    rx.recv_timeout(Duration::from_secs(10)).expect("the step ended")?;
    Ok(step.frame.retvals.take_all())
}

/// A float `_Arg` or `_Retval` with its `index`.
fn index_node(b: &mut GraphBuilder, name: &str, op: &str, inputs: &[&str], index: i64) -> String {
    b.add(
        name,
        op,
        inputs,
        vec![
            ("T", crate::graph::AttrValue::Type(crate::graph::DataType::Tensor(DType::F32))),
            ("index", crate::graph::AttrValue::Int(index)),
        ],
    )
}

/// `y = (x + 1) * 2`, with the add on CPU:0 and the multiply on CPU:1,
/// partitioned by device and built into two executors.
fn two_device_executors() -> Vec<Arc<Executor>> {
    let mut b = GraphBuilder::new();
    b.set_device("/job:localhost/replica:0/task:0/device:CPU:0");
    let x = index_node(&mut b, "x", "_Arg", &[], 0);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    let s = b.binary("s", "AddV2", &x, &one, DType::F32);
    b.set_device("/job:localhost/replica:0/task:0/device:CPU:1");
    let two = b.constant("two", &Tensor::scalar(2.0f32));
    let y = b.binary("y", "Mul", &s, &two, DType::F32);
    retval(&mut b, "out", &y, 0);
    let devices = [device(0), device(1)];
    let parts: BTreeMap<String, _> = partition(
        &b.finish(),
        &PartitionOptions {
            location_of: &|d: &DeviceName| d.to_string(),
            incarnation_of: &|_: &str| 1,
            feeds_to_consumers: false,
        },
    )
    .unwrap();
    assert_eq!(parts.len(), 2);
    parts.values().zip(devices).map(|(g, d)| Executor::new(g, d, Arc::new(ResourceMgr::default())).unwrap()).collect()
}

#[test]
fn two_partitions_meet_in_the_rendezvous_step_after_step() {
    let executors = two_device_executors();
    for i in 0..200 {
        let out = run_step(&executors, vec![Tensor::scalar(i as f32)], 1).unwrap();
        let y = out[0].clone().unwrap().into_tensor().unwrap();
        assert_eq!(y.scalar_value::<f32>().unwrap(), (i as f32 + 1.0) * 2.0);
    }
}

#[test]
fn concurrent_steps_on_the_same_executors_do_not_mix() {
    let executors = Arc::new(two_device_executors());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let executors = executors.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let x = (t * 1000 + i) as f32;
                    let out = run_step(&executors, vec![Tensor::scalar(x)], 1).unwrap();
                    assert_eq!(
                        out[0].clone().unwrap().into_tensor().unwrap().scalar_value::<f32>().unwrap(),
                        (x + 1.0) * 2.0
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn barrier_keeps_the_real_error_over_the_cancellations_it_caused() {
    let step = Arc::new(StepContext::local(7, Args::Ready(vec![]), 0, false));
    let (tx, rx) = mpsc::channel();
    let barrier = ExecutorBarrier::new(3, step.clone(), Box::new(move |r| tx.send(r).unwrap()));
    barrier.partition_done(Err(Status::cancelled("aborted by a peer")));
    barrier.partition_done(Err(Status::invalid_argument("node 'bad' (Foo): broken")));
    assert!(rx.try_recv().is_err(), "the barrier waits for every partition");
    barrier.partition_done(Ok(()));
    let err = rx.recv().unwrap().unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(step.is_cancelled());
}

#[test]
fn a_cancelled_step_ends_and_its_frame_is_reused_clean() {
    let executors = two_device_executors();
    // Cancel before running: no node starts, the step still ends.
    let step =
        Arc::new(StepContext::local(3, Args::Ready(vec![Some(Value::Tensor(Tensor::scalar(1.0f32)))]), 1, false));
    step.cancel(Status::cancelled("client gave up"));
    let (tx, rx) = mpsc::channel();
    let barrier = ExecutorBarrier::new(2, step.clone(), Box::new(move |r| tx.send(r).unwrap()));
    for e in &executors {
        let b = barrier.clone();
        e.run_async(step.clone(), Box::new(move |r| b.partition_done(r)));
    }
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap_err().code, Code::Cancelled);
    let out = run_step(&executors, vec![Tensor::scalar(5.0f32)], 1).unwrap();
    assert_eq!(out[0].clone().unwrap().into_tensor().unwrap().scalar_value::<f32>().unwrap(), 12.0);
}

fn retval(b: &mut GraphBuilder, name: &str, input: &str, index: i64) {
    index_node(b, name, "_Retval", &[input], index);
}

/// `_TestCount` with `n` outputs (leaving `skip` unset when given).
fn count_node(b: &mut GraphBuilder, name: &str, n: i64, skip: Option<i64>) {
    let mut attrs = vec![("n", crate::graph::AttrValue::Int(n))];
    if let Some(skip) = skip {
        attrs.push(("skip", crate::graph::AttrValue::Int(skip)));
    }
    b.add(name, "_TestCount", &[], attrs);
}

fn executor_of(b: GraphBuilder) -> Vec<Arc<Executor>> {
    vec![Executor::new(&b.finish(), device(0), Arc::new(ResourceMgr::default())).unwrap()]
}

fn scalars(out: Vec<Option<Value>>) -> Vec<f32> {
    out.into_iter().map(|v| v.unwrap().into_tensor().unwrap().scalar_value::<f32>().unwrap()).collect()
}

#[test]
fn a_kernel_with_three_outputs_feeds_each_consumer_step_after_step() {
    // Outputs 1, 2, 3: port 0 feeds two adds, port 1 one, port 2 a retval.
    let mut b = GraphBuilder::new();
    count_node(&mut b, "c", 3, None);
    let s = b.binary("s", "AddV2", "c:0", "c:1", DType::F32);
    let t = b.binary("t", "Mul", "c:0", "c:0", DType::F32);
    retval(&mut b, "r0", &s, 0);
    retval(&mut b, "r1", &t, 1);
    retval(&mut b, "r2", "c:2", 2);
    let executors = executor_of(b);
    for _ in 0..50 {
        assert_eq!(scalars(run_step(&executors, vec![], 3).unwrap()), [3.0, 1.0, 3.0]);
    }
}

#[test]
fn an_output_a_kernel_left_unset_fails_the_step_and_names_the_node() {
    // One output and one consumer (the direct hand-on path), and three
    // outputs (the general path).
    for (n, skip) in [(1, 0), (3, 1)] {
        let mut b = GraphBuilder::new();
        count_node(&mut b, "c", n, Some(skip));
        let y = b.unary("y", "Identity", &format!("c:{skip}"), DType::F32);
        retval(&mut b, "r", &y, 0);
        let executors = executor_of(b);
        let err = run_step(&executors, vec![], 1).unwrap_err();
        assert_eq!(err.code, Code::Internal, "{err}");
        assert!(err.message.contains(&format!("node 'c' (_TestCount): output {skip} was not set")), "{err}");
    }
}

#[test]
fn a_node_whose_only_edge_is_a_control_edge_runs_its_successor() {
    // `a` has one output and one out edge, a control edge to `d`.
    let mut b = GraphBuilder::new();
    count_node(&mut b, "a", 1, None);
    count_node(&mut b, "d", 2, None);
    b.control("d", "a");
    let y = b.binary("y", "AddV2", "d:0", "d:1", DType::F32);
    retval(&mut b, "r", &y, 0);
    let executors = executor_of(b);
    for _ in 0..20 {
        assert_eq!(scalars(run_step(&executors, vec![], 1).unwrap()), [3.0]);
    }
}

#[test]
fn a_long_chain_adds_up_step_after_step() {
    let mut b = GraphBuilder::new();
    let mut prev = index_node(&mut b, "x", "_Arg", &[], 0);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    for i in 0..300 {
        prev = b.binary(&format!("add_{i}"), "AddV2", &prev, &one, DType::F32);
    }
    retval(&mut b, "r", &prev, 0);
    let executors = executor_of(b);
    for step in 0..20 {
        let out = run_step(&executors, vec![Tensor::scalar(step as f32)], 1).unwrap();
        assert_eq!(scalars(out), [step as f32 + 300.0]);
    }
}

/// Memory for outputs, one fresh block per ask; remembers where each went.
#[derive(Default)]
struct RecordingPlacement {
    given: std::sync::Mutex<Vec<usize>>,
}

/// 64 bytes on a 64-byte boundary, as placed memory must be.
#[repr(align(64))]
struct Block(#[allow(dead_code)] [u8; 64]);

impl crate::tensor::placement::OutputPlacement for RecordingPlacement {
    fn place(&self, len: usize) -> Option<crate::tensor::placement::PlacedBytes> {
        let mut blocks: Vec<Block> = (0..len.div_ceil(64)).map(|_| Block([0; 64])).collect();
        let ptr = std::ptr::NonNull::new(blocks.as_mut_ptr().cast::<u8>())?;
        self.given.lock().unwrap().push(ptr.as_ptr() as usize);
        Some(crate::tensor::placement::PlacedBytes { ptr, keep: Arc::new(blocks) })
    }
}

/// `big = Fill([32768], x)` (128 KiB) fetched through two Identities, and
/// a small Fill fetched directly.
fn fetch_through_identities() -> Vec<Arc<Executor>> {
    let mut b = GraphBuilder::new();
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[1 << 15]).unwrap());
    let small_dims = b.constant("small_dims", &Tensor::from_slice::<i32>([1], &[4]).unwrap());
    let x = index_node(&mut b, "x", "_Arg", &[], 0);
    let big = b.binary("big", "Fill", &dims, &x, DType::F32);
    let once = b.unary("once", "Identity", &big, DType::F32);
    let twice = b.unary("twice", "Identity", &once, DType::F32);
    retval(&mut b, "out", &twice, 0);
    let small = b.binary("small", "Fill", &small_dims, &x, DType::F32);
    retval(&mut b, "small_out", &small, 1);
    executor_of(b)
}

/// Step `step` of `executors[0]` fed `x`, its `retvals` fetched with
/// `placement` offered for them.
fn run_placed(
    executors: &[Arc<Executor>],
    step: u64,
    x: f32,
    retvals: usize,
    placement: &Arc<RecordingPlacement>,
) -> Vec<Tensor> {
    let ctx = Arc::new(
        StepContext::local(step, Args::Ready(vec![Some(Value::Tensor(Tensor::scalar(x)))]), retvals, false)
            .with_retval_placement(Some(placement.clone())),
    );
    let (tx, rx) = mpsc::channel();
    executors[0].run_async(ctx.clone(), Box::new(move |r| tx.send(r).unwrap()));
    rx.recv_timeout(Duration::from_secs(10)).expect("the step ended").unwrap();
    ctx.frame.retvals.take_all().into_iter().map(|v| v.unwrap().into_tensor().unwrap()).collect()
}

#[test]
fn a_fetched_output_is_written_where_the_caller_is_answered_even_through_identities() {
    let executors = fetch_through_identities();
    let placement = Arc::new(RecordingPlacement::default());
    for step in 0..3u64 {
        let v = step as f32 + 0.5;
        let mut out = run_placed(&executors, step, v, 2, &placement).into_iter();
        let (big, small) = (out.next().unwrap(), out.next().unwrap());
        assert!(big.as_slice::<f32>().unwrap().iter().all(|&e| e == v));
        assert_eq!(small.as_slice::<f32>().unwrap(), &[v; 4]);
        let given = placement.given.lock().unwrap().clone();
        assert_eq!(given.len(), step as usize + 1, "one placement per step: the large fetch only");
        assert_eq!(big.as_bytes().as_ptr() as usize, given[step as usize], "Fill wrote the fetch where it was placed");
    }
    // Without a placement the same plan fetches from the heap.
    let out = run_step(&executors, vec![Tensor::scalar(2.0f32)], 2).unwrap();
    let big = out[0].clone().unwrap().into_tensor().unwrap();
    assert!(big.as_slice::<f32>().unwrap().iter().all(|&e| e == 2.0));
    assert_eq!(placement.given.lock().unwrap().len(), 3);
}

/// A kernel of several outputs whose output 0 is fetched writes it where
/// the caller is answered: FusedBatchNormGrad's `dx` (128 KiB).
#[test]
fn output_0_of_a_kernel_with_several_outputs_is_written_where_it_is_fetched() {
    use crate::graph::AttrValue;
    let mut b = GraphBuilder::new();
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([4], &[1, 8, 8, 512]).unwrap());
    let x = index_node(&mut b, "x", "_Arg", &[], 0);
    let dy = b.binary("dy", "Fill", &dims, &x, DType::F32);
    let ones = b.constant("ones", &Tensor::build::<f32>([512], |s| s.fill(1.0)).unwrap());
    let zeros = b.constant("zeros", &Tensor::zeros(DType::F32, [512]).unwrap());
    let grad = b.add(
        "grad",
        "FusedBatchNormGrad",
        &[&dy, &dy, &ones, &zeros, &ones],
        vec![
            ("T", AttrValue::Type(crate::graph::DataType::Tensor(DType::F32))),
            ("is_training", AttrValue::Bool(false)),
            ("epsilon", AttrValue::Float(0.0)),
        ],
    );
    retval(&mut b, "dx", &grad, 0);
    let executors = executor_of(b);
    let placement = Arc::new(RecordingPlacement::default());
    for step in 0..2u64 {
        let v = step as f32 + 1.5;
        let dx = run_placed(&executors, step, v, 1, &placement).remove(0);
        // Unit variance, unit scale: dx = dy.
        assert!(dx.as_slice::<f32>().unwrap().iter().all(|&e| e == v), "step {step}");
        let given = placement.given.lock().unwrap().clone();
        assert_eq!(given.len(), step as usize + 1, "one placement per step");
        assert_eq!(dx.as_bytes().as_ptr() as usize, given[step as usize], "dx was written where it was placed");
    }
}
