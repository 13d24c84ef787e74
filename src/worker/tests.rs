//! Worker behaviour that needs no master: a step's own deadline.

use super::*;
use crate::cluster::DeviceName;
use crate::graph::builder::nodes::{f32_const, identity};
use crate::graph::{Endpoint, Graph, GraphSpec, PartitionOptions, partition, place, prune};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Task 0's half of `y = identity(c)` with `c` on task 1: a `_Recv` that
/// nothing will ever satisfy, since task 1 never runs.
fn half_waiting_for_task_1() -> GraphSpec {
    let spec = GraphSpec { nodes: vec![f32_const("c", 1.0).on("/job:worker/task:1"), identity("y", "c")] };
    let client = prune(&Graph::build(spec).unwrap(), &[], &[Endpoint::new("y", 0)], &[]).unwrap();
    let devices = [DeviceName::cpu("worker", 0, 0, 0), DeviceName::cpu("worker", 0, 1, 0)];
    let placed = place(&Graph::build(client.graph).unwrap(), &devices, &devices[0]).unwrap();
    let mut parts = partition(
        &placed,
        &PartitionOptions {
            location_of: &|d: &DeviceName| d.task_name(),
            incarnation_of: &|_: &str| 1,
            feeds_to_consumers: false,
        },
    )
    .unwrap();
    parts.remove("/job:worker/replica:0/task:0").unwrap()
}

#[test]
fn a_step_past_its_deadline_ends_on_the_worker_without_its_master() {
    let worker = Worker::new(&WorkerOptions { job: "worker".into(), ..WorkerOptions::default() }).unwrap();
    let cluster = ClusterInfo {
        tasks: vec![
            ("/job:worker/replica:0/task:0".into(), "127.0.0.1:1".into()),
            ("/job:worker/replica:0/task:1".into(), "127.0.0.1:2".into()),
        ],
    };
    worker.create_worker_session("s", &cluster, true).unwrap();
    let graph = worker.register_graph("s", half_waiting_for_task_1(), false).unwrap();
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let request = RunGraphRequest {
        session_handle: "s".into(),
        graph_handle: graph,
        step_id: 7,
        feeds: Vec::new(),
        fetches: Vec::new(),
        partial: None,
        deadline: Some(start + Duration::from_millis(50)),
        collect_stats: false,
        return_route: None,
        reply_placement: None,
    };
    // Nobody aborts this step: only the worker's own timer can end it.
    assert!(worker.run_graph(request, Box::new(move |r| tx.send(r).unwrap())).is_none());
    let result = rx.recv_timeout(Duration::from_secs(10)).expect("the step ended");
    let err = result.err().expect("the step cannot succeed");
    assert_eq!(err.code, crate::error::Code::DeadlineExceeded, "{err}");
    assert!(err.message.contains("step 7 passed its deadline on /job:worker/replica:0/task:0"), "{err}");
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert_eq!(worker.session("s").unwrap().graph_mgr.running_steps(), 0);
}
