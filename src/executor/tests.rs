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

/// `y = (x + 1) * 2`, with the add on CPU:0 and the multiply on CPU:1,
/// partitioned by device and built into two executors.
fn two_device_executors() -> Vec<Arc<Executor>> {
    let mut b = GraphBuilder::new();
    b.set_device("/job:localhost/replica:0/task:0/device:CPU:0");
    let x = b.add(
        "x",
        "_Arg",
        &[],
        vec![
            ("T", crate::graph::AttrValue::Type(crate::graph::DataType::Tensor(DType::F32))),
            ("index", crate::graph::AttrValue::Int(0)),
        ],
    );
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    let s = b.binary("s", "AddV2", &x, &one, DType::F32);
    b.set_device("/job:localhost/replica:0/task:0/device:CPU:1");
    let two = b.constant("two", &Tensor::scalar(2.0f32));
    let y = b.binary("y", "Mul", &s, &two, DType::F32);
    b.add(
        "out",
        "_Retval",
        &[&y],
        vec![
            ("T", crate::graph::AttrValue::Type(crate::graph::DataType::Tensor(DType::F32))),
            ("index", crate::graph::AttrValue::Int(0)),
        ],
    );
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
