//! In-process session tests: the Session API end to end, the executor's
//! parallelism, failure and timeout behaviour, variables, partial runs,
//! callables, and a multi-threaded stress run.

use super::*;
use crate::error::Code;
use crate::graph::builder::counter_graph;
use crate::graph::builder::nodes::{f32_const, identity, placeholder};
use crate::graph::builder::{GraphBuilder, chain_graph};
use crate::graph::{AttrValue, NodeSpec};
use crate::tensor::DType;
use std::sync::Arc;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn session_with(graph: GraphSpec, cpu_devices: usize, threads: usize) -> Box<dyn Session> {
    let options = SessionOptions { cpu_devices, threads_per_device: threads, ..SessionOptions::default() };
    create_session(graph, &options).unwrap()
}

fn scalar(t: &Tensor) -> f32 {
    t.scalar_value::<f32>().unwrap()
}

#[test]
fn smoke_feed_fetch_identity() {
    let g = GraphSpec { nodes: vec![placeholder("x"), identity("y", "x"), f32_const("c", 2.5), identity("d", "c")] };
    let s = create_session(g, &SessionOptions::default()).unwrap();
    let out = s.run_simple(&[("x", Tensor::scalar(1.5f32))], &["y:0", "d"], &[]).unwrap();
    assert_eq!(scalar(&out[0]), 1.5);
    assert_eq!(scalar(&out[1]), 2.5);
    let err = s.run_simple(&[], &["y:0"], &[]).unwrap_err();
    assert!(err.message.contains("You must feed a value for placeholder tensor 'x'"), "{err}");
    let err = s.run_simple(&[("x", Tensor::scalar(1i32))], &["y:0"], &[]).unwrap_err();
    assert_eq!(err.message, "feed 'x:0' expects float32, got a int32 tensor of shape []");
}

#[test]
fn string_tensors_feed_and_fetch_through_identity_across_devices() {
    let mut b = GraphBuilder::new();
    b.set_device("/device:CPU:0");
    let x = b.placeholder("x", DType::String);
    let names = Tensor::from_strings([3], &[&b"w"[..], b"", b"\xffbias"]).unwrap();
    let c = b.constant("names", &names);
    b.set_device("/device:CPU:1");
    b.unary("y", "Identity", &x, DType::String);
    b.unary("z", "Identity", &c, DType::String);
    let s = session_with(b.finish(), 2, 1);
    let fed = Tensor::from_strings([2, 2], &["model.ckpt", "", "\u{e9}t\u{e9}", "x".repeat(1000).as_str()]).unwrap();
    let out = s.run_simple(&[("x", fed.clone())], &["y", "z", "x"], &[]).unwrap();
    assert!(out[0].bit_eq(&fed) && out[1].bit_eq(&names) && out[2].bit_eq(&fed), "{out:?}");
    assert_eq!(out[0].strings().unwrap().get(2), Some("\u{e9}t\u{e9}".as_bytes()));
    let err = s.run_simple(&[("x", Tensor::scalar(1.0f32))], &["y"], &[]).unwrap_err();
    assert_eq!(err.message, "feed 'x:0' expects string, got a float32 tensor of shape []");
    let out = s.run_simple(&[("x", Tensor::string_scalar("a"))], &["y"], &[]).unwrap();
    assert_eq!(out[0].string_value().unwrap(), b"a");
}

#[test]
fn arithmetic_on_strings_fails_naming_the_node_op_and_dtype() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::String);
    b.binary("sum", "AddV2", &x, &x, DType::String);
    let err = create_session(b.finish(), &SessionOptions::default())
        .and_then(|s| s.run_simple(&[("x", Tensor::string_scalar("a"))], &["sum"], &[]))
        .unwrap_err();
    assert!(err.message.contains("'sum'") && err.message.contains("AddV2 does not support dtype string"), "{err}");
}

#[test]
fn parallel_branches_run_concurrently() {
    // Each _TestMeet returns only when both are inside compute at once.
    let meet = |name: &str| {
        NodeSpec::new(name, "_TestMeet")
            .attr("group", AttrValue::Bytes(b"parallel_branches".to_vec()))
            .attr("count", AttrValue::Int(2))
    };
    let g = GraphSpec { nodes: vec![meet("a"), meet("b")] };
    let s = session_with(g, 1, 2);
    let out = s.run_simple(&[], &["a", "b"], &[]).unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn failing_kernel_aborts_a_blocked_recv_in_another_partition() {
    // `fail` runs on CPU:0 after a delay, so `y` on CPU:1 is already waiting
    // in the rendezvous for it; the step must end with fail's error.
    let g = GraphSpec {
        nodes: vec![
            NodeSpec::new("fail", "_TestFail").attr("delay_ms", AttrValue::Int(50)).on("/device:CPU:0"),
            identity("y", "fail").on("/device:CPU:1"),
        ],
    };
    let s = session_with(g, 2, 1);
    let start = std::time::Instant::now();
    let err = s.run_simple(&[], &["y"], &[]).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert_eq!(err.message, "node 'fail' (_TestFail): the test kernel failed on purpose");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_failing_partition_aborts_its_own_wait_for_a_peer_that_waits_for_it() {
    // CPU:0 fails, then would receive `y` from CPU:1, which waits for
    // CPU:0's failed value: neither part can finish unless the failure
    // aborts the step's rendezvous at once.
    let g = GraphSpec {
        nodes: vec![
            f32_const("x", 1.0).on("/device:CPU:0"),
            NodeSpec::new("fail", "_TestFail").attr("delay_ms", AttrValue::Int(20)).on("/device:CPU:0"),
            identity("y", "fail").on("/device:CPU:1"),
            NodeSpec::new("z", "AddV2")
                .input("y", 0)
                .input("x", 0)
                .attr("T", AttrValue::Type(crate::graph::DataType::Tensor(crate::tensor::DType::F32)))
                .on("/device:CPU:0"),
        ],
    };
    let s = session_with(g, 2, 1);
    let options = RunOptions { timeout: Some(std::time::Duration::from_secs(20)), ..RunOptions::default() };
    let err = s.run(&options, vec![], &strings(&["z"]), &[]).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument, "{err}");
    assert!(err.message.contains("the test kernel failed on purpose"), "{err}");
}

#[test]
fn timeout_is_deadline_exceeded_and_the_session_stays_usable() {
    let g = GraphSpec {
        nodes: vec![NodeSpec::new("slow", "_TestSleep").attr("ms", AttrValue::Int(400)), f32_const("c", 3.0)],
    };
    let s = session_with(g, 1, 1);
    let options = RunOptions { timeout: Some(std::time::Duration::from_millis(30)), ..RunOptions::default() };
    let start = std::time::Instant::now();
    let err = s.run(&options, vec![], &strings(&["slow"]), &[]).unwrap_err();
    assert_eq!(err.code, Code::DeadlineExceeded, "{err}");
    // The pool runs the slow kernel; the caller returns at its deadline.
    assert!(start.elapsed() < std::time::Duration::from_millis(300), "{:?}", start.elapsed());
    let out = s.run_simple(&[], &["c"], &[]).unwrap();
    assert_eq!(scalar(&out[0]), 3.0);
    // The slow step can also finish when given the time.
    let out = s.run_simple(&[], &["slow"], &[]).unwrap();
    assert_eq!(scalar(&out[0]), 1.0);
}

#[test]
fn a_step_finishing_after_its_deadline_is_deadline_exceeded() {
    // A cheap kernel runs inline on the caller's thread, which cannot watch
    // the clock meanwhile; the result still reports the overrun.
    let g = GraphSpec {
        nodes: vec![
            NodeSpec::new("slow", "_TestSleep").attr("ms", AttrValue::Int(60)).attr("cheap", AttrValue::Bool(true)),
        ],
    };
    let s = session_with(g, 1, 1);
    let options = RunOptions { timeout: Some(std::time::Duration::from_millis(10)), ..RunOptions::default() };
    let err = s.run(&options, vec![], &strings(&["slow"]), &[]).unwrap_err();
    assert_eq!(err.code, Code::DeadlineExceeded, "{err}");
}

#[test]
fn a_client_cancel_ends_a_blocked_step_and_the_session_stays_usable() {
    // `after` waits on CPU:1 for a tensor the slow kernel on CPU:0 has not made.
    let g = GraphSpec {
        nodes: vec![
            NodeSpec::new("slow", "_TestSleep").attr("ms", AttrValue::Int(2000)).on("/device:CPU:0"),
            identity("after", "slow").on("/device:CPU:1"),
            f32_const("c", 3.0).on("/device:CPU:1"),
        ],
    };
    let s: Arc<dyn Session> = Arc::from(session_with(g, 2, 1));
    let cancel = crate::executor::CancellationToken::new();
    let options = RunOptions { cancel: Some(cancel.clone()), ..RunOptions::default() };
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(30));
        cancel.cancel();
    });
    let start = std::time::Instant::now();
    let err = s.run(&options, vec![], &strings(&["after"]), &[]).unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.code, Code::Cancelled, "{err}");
    assert!(err.message.contains("cancelled by the client"), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_millis(1500), "{:?}", start.elapsed());
    assert_eq!(scalar(&s.run_simple(&[], &["c"], &[]).unwrap()[0]), 3.0);
    // A token cancelled before the step starts fails it without running it,
    // callables included.
    let err = s.run(&options, vec![], &strings(&["c"]), &[]).unwrap_err();
    assert_eq!(err.code, Code::Cancelled, "{err}");
    let callable = s.make_callable(&[], &strings(&["c"]), &[]).unwrap();
    assert_eq!(s.run_callable(callable, vec![], &options).unwrap_err().code, Code::Cancelled);
    assert_eq!(scalar(&s.run_callable(callable, vec![], &RunOptions::default()).unwrap().0[0]), 3.0);
}

#[test]
fn operation_timeout_applies_to_every_step() {
    let g = GraphSpec { nodes: vec![NodeSpec::new("slow", "_TestSleep").attr("ms", AttrValue::Int(300))] };
    let options = SessionOptions {
        config: SessionConfig {
            operation_timeout: Some(std::time::Duration::from_millis(20)),
            ..SessionConfig::default()
        },
        ..SessionOptions::default()
    };
    let s = create_session(g, &options).unwrap();
    assert_eq!(s.run_simple(&[], &["slow"], &[]).unwrap_err().code, Code::DeadlineExceeded);
}

#[test]
fn variables_persist_across_steps_and_reset_clears_them() {
    let s = session_with(counter_graph(""), 1, 1);
    let err = s.run_simple(&[], &["read"], &[]).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    assert!(err.message.contains("variable v"), "{err}");
    s.run_simple(&[], &[], &["init"]).unwrap();
    for step in 1..=3 {
        let out = s.run_simple(&[], &["read"], &[]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[step as f32, 2.0 * step as f32]);
    }
    s.reset(&[]).unwrap();
    assert_eq!(s.run_simple(&[], &["read"], &[]).unwrap_err().code, Code::FailedPrecondition);
}

#[test]
fn extend_adds_nodes_and_rejects_stale_versions() {
    let s = session_with(GraphSpec { nodes: vec![placeholder("x")] }, 1, 1);
    assert_eq!(s.graph_version().unwrap(), 0);
    let v1 = s.extend(GraphSpec { nodes: vec![identity("y", "x")] }, 0).unwrap();
    assert_eq!(v1, 1);
    let out = s.run_simple(&[("x", Tensor::scalar(4.0f32))], &["y"], &[]).unwrap();
    assert_eq!(scalar(&out[0]), 4.0);
    let err = s.extend(GraphSpec { nodes: vec![identity("z", "x")] }, 0).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition);
    assert!(err.message.contains("version"), "{err}");
    let err = s.extend(GraphSpec { nodes: vec![identity("y", "x")] }, 1).unwrap_err();
    assert!(err.message.contains("duplicate node name 'y'"), "{err}");
}

fn partial_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    let a = b.placeholder("a", DType::F32);
    let bb = b.placeholder("b", DType::F32);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    let c = b.binary("c", "AddV2", &a, &one, DType::F32);
    b.binary("d", "Mul", &c, &bb, DType::F32);
    b.finish()
}

#[test]
fn partial_runs_deliver_fetches_as_feeds_arrive() {
    let s = session_with(partial_graph(), 1, 1);
    let h = s.partial_run_setup(&strings(&["a", "b"]), &strings(&["c", "d"]), &[]).unwrap();
    let err = s.partial_run(&h, vec![], &strings(&["d"])).unwrap_err();
    assert!(err.message.contains("depends on feed 'a:0'"), "{err}");
    let c = s.partial_run(&h, vec![("a".into(), Tensor::scalar(2.0f32))], &strings(&["c"])).unwrap();
    assert_eq!(scalar(&c[0]), 3.0);
    let err = s.partial_run(&h, vec![("a".into(), Tensor::scalar(2.0f32))], &[]).unwrap_err();
    assert!(err.message.contains("already been fed"), "{err}");
    let d = s.partial_run(&h, vec![("b".into(), Tensor::scalar(5.0f32))], &strings(&["d"])).unwrap();
    assert_eq!(scalar(&d[0]), 15.0);
    // Finished: the handle is gone.
    assert!(s.partial_run(&h, vec![], &strings(&["c"])).is_err());
}

#[test]
fn callables_run_without_names_and_release() {
    let s = session_with(partial_graph(), 1, 1);
    let h = s.make_callable(&strings(&["a", "b"]), &strings(&["d", "c"]), &[]).unwrap();
    let (out, _) =
        s.run_callable(h, vec![Tensor::scalar(1.0f32), Tensor::scalar(3.0f32)], &RunOptions::default()).unwrap();
    assert_eq!((scalar(&out[0]), scalar(&out[1])), (6.0, 2.0));
    s.release_callable(h).unwrap();
    assert!(s.run_callable(h, vec![], &RunOptions::default()).is_err());
}

#[test]
fn run_metadata_has_node_stats_when_traced() {
    let s = session_with(partial_graph(), 1, 1);
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let (_, meta) = s
        .run(
            &options,
            vec![("a".into(), Tensor::scalar(1.0f32)), ("b".into(), Tensor::scalar(1.0f32))],
            &strings(&["d"]),
            &[],
        )
        .unwrap();
    let names: Vec<&str> = meta.step_stats.iter().map(|n| n.node.as_str()).collect();
    assert!(names.contains(&"c") && names.contains(&"d"), "{names:?}");
    assert!(meta.step_stats.iter().all(|n| n.end_us >= n.start_us && n.device.ends_with("CPU:0")));
}

#[test]
fn close_releases_graphs_and_later_calls_fail() {
    let s = local::LocalSession::direct(partial_graph(), &SessionOptions::default()).unwrap();
    s.run_simple(&[("a", Tensor::scalar(1.0f32))], &["c"], &[]).unwrap();
    assert_eq!(s.registered_graphs(), 1);
    s.close().unwrap();
    assert_eq!(s.registered_graphs(), 0);
    assert_eq!(s.run_simple(&[("a", Tensor::scalar(1.0f32))], &["c"], &[]).unwrap_err().code, Code::Cancelled);
}

#[test]
fn list_devices_names_every_cpu() {
    let s = session_with(partial_graph(), 3, 1);
    let names: Vec<String> = s.list_devices().unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, (0..3).map(|i| format!("/job:localhost/replica:0/task:0/device:CPU:{i}")).collect::<Vec<_>>());
}

#[test]
fn a_chain_runs_on_one_thread() {
    let s = session_with(chain_graph(200), 1, 2);
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let (out, meta) = s.run(&options, vec![("x".into(), Tensor::scalar(0.0f32))], &strings(&["y"]), &[]).unwrap();
    assert_eq!(scalar(&out[0]), 200.0);
    let threads: std::collections::HashSet<u32> = meta.step_stats.iter().map(|n| n.thread).collect();
    assert_eq!(threads.len(), 1, "a chain of cheap nodes hopped threads");
}

#[test]
fn stress_10000_steps_from_4_threads() {
    let s: Arc<dyn Session> = Arc::from(session_with(partial_graph(), 2, 2));
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..2500 {
                    let (a, b) = ((t * 10_000 + i) as f32, (i % 7) as f32);
                    let out =
                        s.run_simple(&[("a", Tensor::scalar(a)), ("b", Tensor::scalar(b))], &["d", "c"], &[]).unwrap();
                    assert_eq!(scalar(&out[0]), (a + 1.0) * b);
                    assert_eq!(scalar(&out[1]), a + 1.0);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn runtime_shape_errors_name_the_node_the_op_and_the_shapes() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("a", DType::F32);
    let y = b.placeholder("b", DType::F32);
    b.binary("c", "AddV2", &x, &y, DType::F32);
    b.matmul("m", &x, &y, DType::F32);
    let s = session_with(b.finish(), 1, 1);
    let a = Tensor::zeros(DType::F32, [2, 3]).unwrap();
    let bad = Tensor::zeros(DType::F32, [4]).unwrap();
    let err = s.run_simple(&[("a", a.clone()), ("b", bad.clone())], &["c"], &[]).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert_eq!(err.message, "node 'c' (AddV2): Incompatible shapes: [2,3] vs. [4]");
    let err = s.run_simple(&[("a", a), ("b", Tensor::zeros(DType::F32, [4, 5]).unwrap())], &["m"], &[]).unwrap_err();
    assert!(err.message.starts_with("node 'm' (MatMul): Matrix size-incompatible"), "{err}");
    assert!(err.message.contains("[2,3]") && err.message.contains("[4,5]"), "{err}");
}

#[test]
fn a_small_matmul_stays_on_the_thread_that_made_it_ready() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.matmul("y", &x, &x, DType::F32);
    let s = session_with(b.finish(), 1, 2);
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let thread_of = |side: usize| {
        let x = Tensor::from_slice([side, side], &vec![1.0f32; side * side]).unwrap();
        let (out, meta) = s.run(&options, vec![("x".into(), x)], &strings(&["y"]), &[]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap()[0], side as f32);
        let of = |op: &str| meta.step_stats.iter().find(|n| n.op == op).map(|n| n.thread).unwrap();
        (of("_Arg"), of("MatMul"))
    };
    // 8³ multiply-adds: less work than a wake-up of a pool thread.
    let (arg, matmul) = thread_of(8);
    assert_eq!(arg, matmul, "a tiny MatMul hopped to the pool");
    // 128³: worth another thread.
    let (arg, matmul) = thread_of(128);
    assert_ne!(arg, matmul, "a large MatMul stayed inline");
}
