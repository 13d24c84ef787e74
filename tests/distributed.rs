//! The distributed runtime against real server processes on loopback:
//! golden cases through a remote session, session isolation, extend, partial
//! runs and callables, Reset on every task, CloseSession releasing every
//! worker's graphs, a dead task failing steps instead of hanging them, and
//! a sharded checkpoint saved by one cluster restored by a fresh one.

use ringflow::cli::verify::{GoldenCase, RunMode};
use ringflow::error::Code;
use ringflow::graph::GraphSpec;
use ringflow::graph::builder::GraphBuilder;
use ringflow::net::message as msg;
use ringflow::net::{Client, TransportOptions};
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::{RunOptions, Session, SessionConfig, SessionExt, SessionOptions, create_session};
use ringflow::{DType, Tensor};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringflow"))
}

fn start(tasks: usize) -> LocalCluster {
    LocalCluster::start(binary(), tasks, &LocalClusterOptions::default()).expect("local cluster starts")
}

/// One 2-task cluster shared by the tests that do not break it.
fn shared() -> &'static Mutex<LocalCluster> {
    static CLUSTER: OnceLock<Mutex<LocalCluster>> = OnceLock::new();
    CLUSTER.get_or_init(|| Mutex::new(start(2)))
}

fn target() -> String {
    shared().lock().unwrap_or_else(|e| e.into_inner()).target(0)
}

/// An isolated session: the shared cluster serves tests in parallel, and
/// sessions sharing the tasks' containers would see each other's variables.
fn session_on(target: &str, graph: GraphSpec) -> Box<dyn Session> {
    let config = SessionConfig { isolate_session_state: true, ..SessionConfig::default() };
    create_session(graph, &SessionOptions { target: target.to_string(), config, ..SessionOptions::default() }).unwrap()
}

/// A session sharing the tasks' resource containers (TensorFlow's default).
fn shared_session_on(target: &str, graph: GraphSpec) -> Box<dyn Session> {
    create_session(graph, &SessionOptions { target: target.to_string(), ..SessionOptions::default() }).unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A 4-task cluster for the cases pinned to four tasks, started on first use.
fn shared_four() -> &'static Mutex<LocalCluster> {
    static CLUSTER: OnceLock<Mutex<LocalCluster>> = OnceLock::new();
    CLUSTER.get_or_init(|| Mutex::new(start(4)))
}

fn golden(case: &str, mode: RunMode) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(case);
    let golden = GoldenCase::load(&dir).unwrap();
    let target = match golden.tasks_needed() {
        0..=2 => target(),
        3..=4 => shared_four().lock().unwrap_or_else(|e| e.into_inner()).target(0),
        n => panic!("{case} needs {n} tasks; no shared cluster has that many"),
    };
    let session = session_on(&target, golden.graph.clone());
    golden.check_with(session.as_ref(), mode).unwrap_or_else(|e| panic!("{case} ({mode:?}): {e}"));
    session.close().unwrap();
}

/// Clusters whose servers run with `--transport tcp`: the golden cases run
/// once over TCP too (the clusters above talk over shared memory).
fn tcp_cluster(tasks: usize) -> &'static Mutex<LocalCluster> {
    static TWO: OnceLock<Mutex<LocalCluster>> = OnceLock::new();
    static FOUR: OnceLock<Mutex<LocalCluster>> = OnceLock::new();
    let cell = if tasks <= 2 { &TWO } else { &FOUR };
    cell.get_or_init(|| {
        let options = LocalClusterOptions { force_tcp: true, ..LocalClusterOptions::default() };
        Mutex::new(LocalCluster::start(binary(), tasks.max(2), &options).expect("local cluster starts"))
    })
}

fn golden_over_tcp(case: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(case);
    let golden = GoldenCase::load(&dir).unwrap();
    let tasks = match golden.tasks_needed() {
        0..=2 => 2,
        3..=4 => 4,
        n => panic!("{case} needs {n} tasks; no shared cluster has that many"),
    };
    let target = tcp_cluster(tasks).lock().unwrap_or_else(|e| e.into_inner()).target(0);
    let session = session_on(&target, golden.graph.clone());
    golden.check_with(session.as_ref(), RunMode::Run).unwrap_or_else(|e| panic!("{case} over TCP: {e}"));
    session.close().unwrap();
}

fn address_of(target: &str) -> &str {
    target.strip_prefix("ringflow://").unwrap_or(target)
}

#[test]
fn the_shared_clusters_talk_over_shared_memory_and_the_tcp_ones_do_not() {
    let options = TransportOptions::default();
    if !options.shm.enabled {
        return; // RINGFLOW_TRANSPORT=tcp: every cluster is TCP.
    }
    let shm = Client::connect(address_of(&target()), options.clone()).unwrap();
    assert!(shm.is_shared_memory());
    let tcp_target = tcp_cluster(2).lock().unwrap_or_else(|e| e.into_inner()).target(0);
    let tcp = Client::connect(address_of(&tcp_target), options).unwrap();
    assert!(!tcp.is_shared_memory());
}

macro_rules! golden_remote {
    ($($case:ident),* $(,)?) => {
        mod golden_over_tcp { $( #[test] fn $case() { super::golden_over_tcp(stringify!($case)) } )* }
        mod golden_by_run { $( #[test] fn $case() { super::golden(stringify!($case), super::RunMode::Run) } )* }
        mod golden_by_callable { $( #[test] fn $case() { super::golden(stringify!($case), super::RunMode::Callable) } )* }
        mod golden_by_partial_run { $( #[test] fn $case() { super::golden(stringify!($case), super::RunMode::Partial) } )* }
    };
}

golden_remote!(
    add_scalar,
    array_ops,
    broadcast_reduce,
    color_and_lrn_ops,
    cond_v1,
    cond_v2,
    counter_resource_var,
    detection_ops,
    einsum_ops,
    function_call,
    function_call_stateful,
    image_projective_ops,
    image_decode_ops,
    print_and_format_ops,
    string_array_ops,
    image_resampling_ops,
    keras_attention,
    keras_causal_attention,
    keras_cnn,
    keras_conv3d,
    keras_conv3d_transpose,
    conv3d_gradients,
    keras_embedding,
    keras_lstm,
    keras_gru,
    keras_simple_rnn,
    keras_bidirectional_lstm,
    keras_mobilenet_v2,
    keras_transformer_encoder,
    keras_unet,
    linalg_ops,
    math_ops,
    nd_ops,
    nn_ops,
    parse_example_ops,
    sparse_ops,
    feature_columns,
    numerics_and_quantization_ops,
    ctc_greedy_decoder,
    sampling_ops,
    ctc_loss_dense,
    ctc_loss_sparse,
    fft_nd_ops,
    ragged_ops,
    incomplete_gamma_beta_ops,
    gamma_poisson_sampling_ops,
    linalg_decompositions,
    sqrtm_and_tridiagonal,
    special_functions_scipy,
    keras_mixed_float16,
    keras_mixed_bfloat16,
    narrow_dtype_ops,
    quantize_dequantize_ops,
    set_ops,
    feature_crosses,
    sparse_reduce_and_add_grad,
    keras_mixed_float16_gradients,
    while_v1,
    while_v2,
    fanout_two_tasks,
    while_two_tasks,
    while_v2_two_tasks,
    while_nested_two_tasks,
    while_v2_nested_two_tasks,
    cond_two_tasks,
    cond_v2_two_tasks,
    mlp2_frozen,
    mlp3_two_tasks,
    ref_variable,
    ring_four_tasks,
    sequence_and_segment_ops,
    shapes,
    special_and_counting_ops,
    stateless_random_ops,
    unicode_string_ops,
    uint8_images,
    audio_spectrogram_ops
);

#[test]
fn verify_command_runs_every_case_on_a_local_cluster() {
    let cases: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    let out = std::process::Command::new(binary())
        .arg("verify")
        .arg("--local-cluster")
        .arg("ps=1,worker=4")
        .args(&cases)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Every case either passes or fails with its reason; none crashes the run.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL ")).count(),
        cases.len(),
        "{stdout}"
    );
    for case in cases.iter().filter_map(|c| c.file_name()).map(|n| n.to_string_lossy().into_owned()) {
        assert!(stdout.contains(&format!("PASS {case}\n")), "{case} should pass:\n{stdout}");
    }
    assert!(out.status.success(), "{stdout}");
}

#[test]
fn verify_command_explains_a_pinned_case_without_a_cluster() {
    let case = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs/fanout_two_tasks");
    let out = std::process::Command::new(binary()).arg("verify").arg(&case).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("FAIL fanout_two_tasks") && stdout.contains("--local-cluster 2"), "{stdout}");
}

/// The counter graph of `graph::builder` pinned to `task`.
/// More steps than a connection's `max_in_flight` (4096), each sending a
/// tensor from task 0 to task 1 (a one-way push): pushes never count as
/// requests awaiting an answer, over shared memory and over TCP.
#[test]
fn a_tensor_sent_across_tasks_every_step_runs_past_max_in_flight_steps() {
    let steps = ringflow::net::TransportOptions::default().max_in_flight + 100;
    for (target, transport) in [(target(), "shm"), (tcp_cluster(2).lock().unwrap().target(0), "tcp")] {
        let session = session_on(&target, ringflow::cli::bench_remote::sent_remote_graph());
        let handle = session.make_callable(&strings(&["x"]), &strings(&["y"]), &[]).unwrap();
        for step in 0..steps {
            let (out, _) = session
                .run_callable(handle, vec![Tensor::scalar(step as f32)], &RunOptions::default())
                .unwrap_or_else(|e| panic!("{transport}: step {step}: {e}"));
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &[step as f32 * 2.0 + 1.0], "{transport}: step {step}");
        }
        session.release_callable(handle).unwrap();
        session.close().unwrap();
    }
}

fn counter_graph(task: u32) -> GraphSpec {
    ringflow::graph::builder::counter_graph(&format!("/job:worker/task:{task}"))
}

#[test]
fn sessions_on_one_master_keep_their_variables_apart() {
    let target = target();
    let a = session_on(&target, counter_graph(1));
    let b = session_on(&target, counter_graph(1));
    a.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(a.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    let err = b.run_simple(&[], &["read"], &[]).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    b.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(b.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    assert_eq!(a.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[2.0, 4.0]);
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn two_client_processes_share_variables_by_default() {
    // The second client is another process: `ringflow run` against task 0,
    // with a session of its own that shares the task's variables.
    let cluster = start(1);
    let target = cluster.target(0);
    let a = shared_session_on(&target, counter_graph(0));
    a.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(a.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    let dir = tempfile::tempdir().unwrap();
    let graph_file = dir.path().join("counter.pb");
    std::fs::write(&graph_file, ringflow::graph::graph_to_pb_bytes(&counter_graph(0))).unwrap();
    let out = std::process::Command::new(binary())
        .args(["run", "--graph"])
        .arg(&graph_file)
        .args(["--fetch", "read", "--target", &target])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("[2.0, 4.0]"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(a.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[3.0, 6.0]);
    // An isolated session on the same task keeps its own.
    let isolated = session_on(&target, counter_graph(0));
    let err = isolated.run_simple(&[], &["read"], &[]).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    a.close().unwrap();
}

#[test]
fn between_graph_clients_on_different_masters_share_the_variables_task() {
    // Two clients, each with its own master (task 0 and task 1), their
    // graphs keeping the variable on task 1: alternating steps see each
    // other's updates. Reset through either clears it for both.
    let cluster = start(2);
    let a = shared_session_on(&cluster.target(0), counter_graph(1));
    let b = shared_session_on(&cluster.target(1), counter_graph(1));
    a.run_simple(&[], &[], &["init"]).unwrap();
    for k in 1..=4 {
        let client = if k % 2 == 1 { &a } else { &b };
        let read = client.run_simple(&[], &["read"], &[]).unwrap();
        assert_eq!(read[0].as_slice::<f32>().unwrap(), &[k as f32, 2.0 * k as f32], "step {k}");
    }
    b.reset(&[]).unwrap();
    let err = a.run_simple(&[], &["read"], &[]).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn a_ps_worker_cluster_shares_the_ps_variables_between_worker_clients() {
    // `--local-cluster ps=1,worker=2`: the variable lives on the ps task,
    // each worker's client drives its own master; both see one variable.
    let jobs = ringflow::server::local_cluster::parse_jobs("ps=1,worker=2").unwrap();
    let cluster = LocalCluster::start_jobs(binary(), &jobs, &LocalClusterOptions::default()).unwrap();
    let graph = ringflow::graph::builder::counter_graph("/job:ps/task:0");
    let w0 = shared_session_on(&cluster.target(0), graph.clone());
    let w1 = shared_session_on(&cluster.target(1), graph);
    w0.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(w1.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    assert_eq!(w0.run_simple(&[], &["read"], &[]).unwrap()[0].as_slice::<f32>().unwrap(), &[2.0, 4.0]);
    let devices = w1.list_devices().unwrap();
    assert!(devices.iter().any(|d| d.name.starts_with("/job:ps/replica:0/task:0")), "{devices:?}");
    w0.close().unwrap();
    w1.close().unwrap();
}

#[test]
fn extend_adds_nodes_between_steps() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.set_device("/job:worker/task:1");
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    let s = session_on(&target(), b.finish());
    assert_eq!(
        s.run_simple(&[("x", Tensor::scalar(2.0f32))], &["y"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(),
        3.0
    );
    let mut more = GraphBuilder::new();
    more.set_device("/job:worker/task:0");
    more.binary("z", "Mul", "y:0", "y:0", DType::F32);
    let v = s.extend(more.finish(), 0).unwrap();
    assert_eq!(v, 1);
    assert_eq!(
        s.run_simple(&[("x", Tensor::scalar(2.0f32))], &["z"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(),
        9.0
    );
    let err = s.extend(GraphSpec::default(), 0).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    s.close().unwrap();
}

fn two_stage_graph() -> GraphSpec {
    // c = a + 1 on task 1, d = c * b on task 0.
    let mut b = GraphBuilder::new();
    let a = b.placeholder("a", DType::F32);
    let bb = b.placeholder("b", DType::F32);
    b.set_device("/job:worker/task:1");
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    let c = b.binary("c", "AddV2", &a, &one, DType::F32);
    b.set_device("/job:worker/task:0");
    b.binary("d", "Mul", &c, &bb, DType::F32);
    b.finish()
}

#[test]
fn partial_runs_and_callables_work_remotely() {
    let s = session_on(&target(), two_stage_graph());
    let h = s.partial_run_setup(&strings(&["a", "b"]), &strings(&["c", "d"]), &[]).unwrap();
    let err = s.partial_run(&h, vec![], &strings(&["d"])).unwrap_err();
    assert!(err.message.contains("depends on feed 'a:0'"), "{err}");
    let c = s.partial_run(&h, vec![("a".into(), Tensor::scalar(2.0f32))], &strings(&["c"])).unwrap();
    assert_eq!(c[0].scalar_value::<f32>().unwrap(), 3.0);
    let d = s.partial_run(&h, vec![("b".into(), Tensor::scalar(5.0f32))], &strings(&["d"])).unwrap();
    assert_eq!(d[0].scalar_value::<f32>().unwrap(), 15.0);

    let call = s.make_callable(&strings(&["a", "b"]), &strings(&["d", "c"]), &[]).unwrap();
    for i in 0..50 {
        let (out, _) = s
            .run_callable(call, vec![Tensor::scalar(i as f32), Tensor::scalar(2.0f32)], &RunOptions::default())
            .unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), (i as f32 + 1.0) * 2.0);
        assert_eq!(out[1].scalar_value::<f32>().unwrap(), i as f32 + 1.0);
    }
    s.release_callable(call).unwrap();
    assert!(s.run_callable(call, vec![], &RunOptions::default()).is_err());
    s.close().unwrap();
}

/// `links` chained 256×256 MatMuls on task 1 whose end is fetched on task
/// 0: seconds of work, which a cancel must cut short.
fn long_chain_graph(links: usize) -> GraphSpec {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.set_device("/job:worker/task:1");
    let last = b.matmul_chain(&x, links, DType::F32);
    b.set_device("/job:worker/task:0");
    b.unary("end", "Identity", &last, DType::F32);
    b.finish()
}

#[test]
fn a_client_cancel_stops_a_remote_step_and_the_session_stays_usable() {
    let s: std::sync::Arc<dyn Session> = session_on(&target(), long_chain_graph(4000)).into();
    let x = Tensor::from_slice([256usize, 256], &vec![1.0f32 / 256.0; 256 * 256]).unwrap();
    let call = s.make_callable(&strings(&["x"]), &strings(&["end"]), &[]).unwrap();
    for run_callable in [false, true] {
        let cancel = ringflow::executor::CancellationToken::new();
        let options = RunOptions { cancel: Some(cancel.clone()), ..RunOptions::default() };
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            cancel.cancel();
        });
        let start = Instant::now();
        let err = if run_callable {
            s.run_callable(call, vec![x.clone()], &options).unwrap_err()
        } else {
            s.run(&options, vec![("x".into(), x.clone())], &strings(&["end"]), &[]).unwrap_err()
        };
        canceller.join().unwrap();
        assert_eq!(err.code, Code::Cancelled, "{err}");
        assert!(err.message.contains("cancelled by the client"), "{err}");
        // 4000 MatMuls take tens of seconds here; the cancel ends the step
        // after the one running when it arrives.
        assert!(start.elapsed() < Duration::from_secs(8), "{:?}", start.elapsed());
        // The cancelled step's parts are gone: a short step runs at once.
        let one = Tensor::from_slice([256usize, 256], &vec![0.0f32; 256 * 256]).unwrap();
        let out = s.run(&RunOptions::default(), vec![("x".into(), one)], &strings(&["m0"]), &[]).unwrap();
        assert_eq!(out.0[0].as_slice::<f32>().unwrap()[0], 0.0);
    }
    s.close().unwrap();
}

#[test]
fn traced_steps_report_nodes_of_every_task() {
    let s = session_on(&target(), two_stage_graph());
    let options = RunOptions { trace: true, ..RunOptions::default() };
    let started = std::time::SystemTime::now();
    let (_, meta) = s
        .run(
            &options,
            vec![("a".into(), Tensor::scalar(1.0f32)), ("b".into(), Tensor::scalar(1.0f32))],
            &strings(&["d"]),
            &[],
        )
        .unwrap();
    let on = |task: &str| meta.step_stats.iter().any(|n| n.device.contains(task));
    assert!(on("task:0") && on("task:1"), "{:?}", meta.step_stats);
    // Times are wall-clock microseconds (TensorFlow's all_start_micros), so
    // a tensor's _Send in one process precedes its _Recv's end in another.
    let epoch_us = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
    let (before, after) = (epoch_us(started), epoch_us(std::time::SystemTime::now()));
    for n in &meta.step_stats {
        assert!(before <= n.start_us && n.start_us <= n.end_us && n.end_us <= after, "{n:?} not within the step");
    }
    let sends: Vec<_> = meta.step_stats.iter().filter(|n| n.op == "_Send").collect();
    let recvs: Vec<_> = meta.step_stats.iter().filter(|n| n.op == "_Recv").collect();
    assert!(
        !sends.is_empty() && !recvs.is_empty(),
        "a cross-task step has a traced _Send and _Recv: {:?}",
        meta.step_stats
    );
    for recv in &recvs {
        assert!(
            sends.iter().any(|send| send.start_us <= recv.end_us && send.device != recv.device),
            "{recv:?} vs {sends:?}"
        );
    }
    s.close().unwrap();
}

#[test]
fn reset_clears_variables_on_every_task() {
    let mut graph = counter_graph(0);
    let mut other = counter_graph(1);
    for n in &mut other.nodes {
        n.name = format!("t1/{}", n.name);
        for i in &mut n.inputs {
            i.node = format!("t1/{}", i.node);
        }
        for c in &mut n.control_inputs {
            *c = format!("t1/{c}");
        }
    }
    graph.nodes.extend(other.nodes);
    let s = session_on(&target(), graph);
    s.run_simple(&[], &[], &["init", "t1/init"]).unwrap();
    let out = s.run_simple(&[], &["read", "t1/read"], &[]).unwrap();
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &[1.0, 2.0]);
    s.reset(&[]).unwrap();
    for fetch in ["read", "t1/read"] {
        let err = s.run_simple(&[], &[fetch], &[]).unwrap_err();
        assert_eq!(err.code, Code::FailedPrecondition, "{fetch}: {err}");
    }
    s.close().unwrap();
}

fn worker_status(address: &str, session: &str) -> (u64, u64) {
    let client = Client::connect(address, TransportOptions::default()).unwrap();
    let response = client
        .call_rpc(
            &msg::GetStatusRequest { session_handle: session.to_string(), ..Default::default() },
            &[],
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
    let meta = response.meta::<msg::GetStatusResponse>().unwrap();
    (meta.registered_graphs.to_native(), meta.sessions.to_native())
}

#[test]
fn close_session_releases_every_workers_graphs() {
    // A cluster of its own, so other tests' sessions do not count.
    let cluster = start(2);
    let s = ringflow::session::remote::RemoteSession::create(
        cluster.address(0),
        two_stage_graph(),
        &SessionOptions::default(),
    )
    .unwrap();
    s.run_simple(&[("a", Tensor::scalar(1.0f32)), ("b", Tensor::scalar(2.0f32))], &["d"], &[]).unwrap();
    s.run_simple(&[("a", Tensor::scalar(1.0f32))], &["c"], &[]).unwrap();
    for task in 0..2 {
        let (graphs, sessions) = worker_status(cluster.address(task), s.handle());
        assert!(graphs >= 1, "task {task} has {graphs} graphs before close");
        assert_eq!(sessions, 1, "task {task}");
    }
    s.close().unwrap();
    for task in 0..2 {
        assert_eq!(worker_status(cluster.address(task), s.handle()), (0, 0), "task {task} after close");
    }
}

#[test]
fn a_dead_task_fails_the_step_naming_it_instead_of_hanging() {
    let mut cluster = start(2);
    let s = session_on(&cluster.target(0), two_stage_graph());
    s.run_simple(&[("a", Tensor::scalar(1.0f32)), ("b", Tensor::scalar(2.0f32))], &["d"], &[]).unwrap();
    cluster.kill(1);
    let start = Instant::now();
    let err = s.run_simple(&[("a", Tensor::scalar(1.0f32)), ("b", Tensor::scalar(2.0f32))], &["d"], &[]).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(err.message.contains("/job:worker/replica:0/task:1"), "{err}");
    // The session keeps serving steps that avoid task 1.
    let out = s.run_simple(&[("b", Tensor::scalar(3.0f32))], &["b"], &[]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 3.0);
}

/// `tasks` servers of one cluster running in this process, on loopback.
/// The ports are picked free, then bound by the servers: a connection
/// another test opens in between may take one, so a set-up that finds its
/// port taken starts over on fresh ones.
fn in_process_servers(tasks: usize) -> Vec<ringflow::server::Server> {
    use ringflow::cluster::{ClusterSpec, TaskId};
    use ringflow::server::{Server, ServerOptions};
    for attempt in 1.. {
        let listeners: Vec<_> = (0..tasks).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let ports: Vec<u16> = listeners.iter().map(|l| l.local_addr().unwrap().port()).collect();
        drop(listeners);
        let spec = ClusterSpec::workers(ports.iter().map(|p| format!("127.0.0.1:{p}")).collect());
        let started: Result<Vec<Server>, _> = (0..tasks as u32)
            .map(|i| Server::start(ServerOptions::new(spec.clone(), TaskId { job: "worker".into(), index: i })))
            .collect();
        match started {
            Ok(servers) => return servers,
            Err(e) if attempt < 5 && e.message.contains("already in use") => continue,
            Err(e) => panic!("in-process servers on {ports:?}: {e}"),
        }
    }
    unreachable!("the loop returns or panics")
}

#[test]
fn a_server_in_this_process_is_reached_without_a_socket_or_with_one() {
    let servers = in_process_servers(2);
    let target = format!("ringflow://{}", servers[0].address());
    for local_shortcut in [true, false] {
        let options = SessionOptions { target: target.clone(), local_shortcut, ..SessionOptions::default() };
        let s = create_session(two_stage_graph(), &options).unwrap();
        let out = s.run_simple(&[("a", Tensor::scalar(4.0f32)), ("b", Tensor::scalar(3.0f32))], &["d"], &[]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), 15.0, "local_shortcut {local_shortcut}");
        s.close().unwrap();
    }
    assert_eq!(servers[0].master().unwrap().num_sessions(), 0);
    for s in servers {
        s.shutdown();
    }
}

#[test]
fn tensors_for_the_master_task_come_back_over_the_connection_it_opened() {
    let servers = in_process_servers(2);
    // In process, so the client reaches task 0's master without a socket.
    let options =
        SessionOptions { target: format!("ringflow://{}", servers[0].address()), ..SessionOptions::default() };
    let s = create_session(two_stage_graph(), &options).unwrap();
    let traced = RunOptions { trace: true, ..RunOptions::default() };
    for step in 0..50 {
        let a = Tensor::scalar(step as f32);
        let (out, meta) =
            s.run(&traced, vec![("a".into(), a), ("b".into(), Tensor::scalar(3.0f32))], &strings(&["d"]), &[]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), (step as f32 + 1.0) * 3.0);
        // c crossed from task 1 to task 0 as a tensor.
        let crossed = meta.step_stats.iter().any(|n| n.op == "_Recv" && n.device.contains("task:0"));
        assert!(crossed, "{:?}", meta.step_stats);
    }
    // Task 1 pushed c back over task 0's connection to it: it never
    // opened one of its own to task 0.
    assert_eq!(servers[0].connections(), 0, "task 1 connected to task 0");
    assert_eq!(servers[1].connections(), 1);
    s.close().unwrap();
    for s in servers {
        s.shutdown();
    }
}

#[test]
fn a_fed_value_goes_straight_to_the_task_that_reads_it() {
    let addresses: Vec<String> = {
        let cluster = shared().lock().unwrap_or_else(|e| e.into_inner());
        (0..2).map(|t| cluster.address(t).to_string()).collect()
    };
    let traced = RunOptions { trace: true, ..RunOptions::default() };
    let ops_on = |stats: &[ringflow::executor::NodeStats], op: &str| -> Vec<String> {
        stats.iter().filter(|n| n.op == op).map(|n| n.device.clone()).collect()
    };

    // x is pinned to task 0 but only task 1 reads it: task 1 gets it with
    // its RunGraph, and task 0 has nothing to run.
    let s = ringflow::session::remote::RemoteSession::create(
        &addresses[0],
        ringflow::cli::bench_remote::trivial_remote_graph(),
        &SessionOptions::default(),
    )
    .unwrap();
    let (out, meta) = s.run(&traced, vec![("x".into(), Tensor::scalar(41.0f32))], &strings(&["y"]), &[]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 42.0);
    let args = ops_on(&meta.step_stats, "_Arg");
    assert!(args.len() == 1 && args[0].contains("task:1"), "{:?}", meta.step_stats);
    assert!(ops_on(&meta.step_stats, "_Send").is_empty(), "nothing crosses between tasks: {:?}", meta.step_stats);
    assert_eq!(worker_status(&addresses[0], s.handle()).0, 0, "task 0 registered no graph");
    assert_eq!(worker_status(&addresses[1], s.handle()).0, 1);
    s.close().unwrap();

    // A value computed from x on task 0 still crosses as a tensor.
    let s = session_on(&format!("ringflow://{}", addresses[0]), ringflow::cli::bench_remote::sent_remote_graph());
    let (out, meta) = s.run(&traced, vec![("x".into(), Tensor::scalar(20.0f32))], &strings(&["y"]), &[]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 41.0);
    let (sends, recvs) = (ops_on(&meta.step_stats, "_Send"), ops_on(&meta.step_stats, "_Recv"));
    assert!(sends.len() == 1 && sends[0].contains("task:0"), "{:?}", meta.step_stats);
    assert!(recvs.len() == 1 && recvs[0].contains("task:1"), "{:?}", meta.step_stats);
    s.close().unwrap();
}

#[test]
fn run_with_trace_prints_every_node_of_the_step_on_every_task() {
    // x * 2 on task 0, sent to task 1 for + 1.
    let graph = ringflow::cli::bench_remote::sent_remote_graph();
    let dir = tempfile::tempdir().unwrap();
    let graph_file = dir.path().join("sent.pb");
    std::fs::write(&graph_file, ringflow::graph::graph_to_pb_bytes(&graph)).unwrap();
    let x_file = dir.path().join("x.npy");
    ringflow::tensor::npy::write_npy(&Tensor::scalar(3.0f32), &x_file).unwrap();
    let out = std::process::Command::new(binary())
        .args(["run", "--graph"])
        .arg(&graph_file)
        .arg("--feed")
        .arg(format!("x:0={}", x_file.display()))
        .args(["--fetch", "y:0", "--trace", "--target", &target()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("y:0 (float32 [])") && stdout.contains('7'), "3 * 2 + 1: {stdout}");
    let trace = stdout.split_once("step trace:").map(|(_, t)| t).unwrap_or_else(|| panic!("a trace: {stdout}"));
    let row = |node: &str| {
        trace.lines().find(|l| l.split_whitespace().last() == Some(node)).unwrap_or_else(|| panic!("{node} in {trace}"))
    };
    assert!(row("doubled").contains("/job:worker/replica:0/task:0/") && row("doubled").contains(" Mul "), "{trace}");
    assert!(row("y").contains("/job:worker/replica:0/task:1/") && row("y").contains(" AddV2 "), "{trace}");
    assert!(trace.lines().any(|l| l.contains(" _Send ")) && trace.lines().any(|l| l.contains(" _Recv ")), "{trace}");
}

/// `x` (string) fed and copied on task 0, read by an Identity pinned on
/// task 1; a string constant on task 1 read back through task 0.
fn string_two_task_graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let x = b.placeholder("x", DType::String);
    let x0 = b.unary("x0", "Identity", &x, DType::String);
    b.set_device("/job:worker/task:1");
    b.unary("y", "Identity", &x0, DType::String);
    let names = Tensor::from_strings([3], &[&b"w"[..], b"", b"\xffbias"]).unwrap();
    let c = b.constant("names", &names);
    b.set_device("/job:worker/task:0");
    b.unary("names_on_0", "Identity", &c, DType::String);
    b.finish()
}

#[test]
fn string_tensors_cross_between_tasks_and_back_to_the_client() {
    let target = target();
    let s = session_on(&target, string_two_task_graph());
    let fed =
        Tensor::from_strings([2, 2], &[&b"model.ckpt"[..], b"", b"\x00non-utf8\xfe", "x".repeat(10_000).as_bytes()])
            .unwrap();
    let traced = RunOptions { trace: true, ..RunOptions::default() };
    let fetches: Vec<String> = ["y", "names_on_0", "x0"].iter().map(|s| s.to_string()).collect();
    let (out, meta) = s.run(&traced, vec![("x".into(), fed.clone())], &fetches, &[]).unwrap();
    assert!(out[0].bit_eq(&fed), "{:?}", out[0]);
    assert_eq!(out[1].strings().unwrap().to_vec(), vec![&b"w"[..], b"", b"\xffbias"]);
    assert!(out[2].bit_eq(&fed));
    let on = |op: &str, task: &str| meta.step_stats.iter().any(|n| n.op == op && n.device.contains(task));
    assert!(on("_Send", "task:0") && on("_Recv", "task:1"), "x0 crosses to task 1: {:?}", meta.step_stats);
    assert!(on("_Send", "task:1") && on("_Recv", "task:0"), "names cross to task 0: {:?}", meta.step_stats);
    let err = s.run_simple(&[("x", Tensor::scalar(1i32))], &["y"], &[]).unwrap_err();
    assert!(err.message.contains("expects string"), "{err}");
    s.close().unwrap();

    // The same through `ringflow run`: a numpy bytes feed, printed fetches.
    let dir = tempfile::tempdir().unwrap();
    let graph_file = dir.path().join("strings.pb");
    std::fs::write(&graph_file, ringflow::graph::graph_to_pb_bytes(&string_two_task_graph())).unwrap();
    let feed_file = dir.path().join("x.npy");
    let feed = Tensor::from_strings([2], &[&b"model.ckpt-7"[..], b"it's \xff"]).unwrap();
    ringflow::tensor::npy::write_npy(&feed, &feed_file).unwrap();
    let out = std::process::Command::new(binary())
        .args(["run", "--graph"])
        .arg(&graph_file)
        .arg("--feed")
        .arg(format!("x={}", feed_file.display()))
        .args(["--fetch", "y", "--fetch", "names_on_0", "--target", &target])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("y (string [2]):\n[b'model.ckpt-7', b\"it's \\xff\"]"), "{stdout}");
    assert!(stdout.contains("names_on_0 (string [3]):\n[b'w', b'', b'\\xffbias']"), "{stdout}");
}

/// `train_checkpoint_ps_sharded`'s graph, fed batch `b` of the case.
fn checkpoint_case_batch(b: usize) -> Vec<(String, Tensor)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs/train_checkpoint_ps_sharded");
    ["x", "labels"]
        .iter()
        .map(|name| {
            let path = dir.join(format!("batch{b}_{name}_0.npy"));
            (format!("{name}:0"), ringflow::tensor::npy::read_npy(path).unwrap())
        })
        .collect()
}

/// The loss of batch `b` before its update, then the update.
fn train_on(session: &dyn Session, b: usize) -> f32 {
    let loss = session.run(&RunOptions::default(), checkpoint_case_batch(b), &strings(&["loss:0"]), &[]).unwrap().0;
    session.run(&RunOptions::default(), checkpoint_case_batch(b), &[], &strings(&["train"])).unwrap();
    loss[0].scalar_value::<f32>().unwrap()
}

#[test]
fn a_fresh_cluster_restores_a_sharded_checkpoint_and_trains_on_as_the_first_would() {
    // Saver(sharded=True) over variables on the ps task and a global step
    // on the worker: each task's SaveV2 writes its shard, one task merges.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs/train_checkpoint_ps_sharded");
    let graph = ringflow::graph::load_graph(dir.join("graph.pb")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let prefix = scratch.path().join("model.ckpt").to_string_lossy().into_owned();
    let prefix_feed = || vec![("save/Const:0".to_string(), Tensor::string_scalar(&prefix))];
    let jobs = ringflow::server::local_cluster::parse_jobs("ps=1,worker=1").unwrap();

    let first = LocalCluster::start_jobs(binary(), &jobs, &LocalClusterOptions::default()).unwrap();
    let session = shared_session_on(&first.default_target(), graph.clone());
    session.run_simple(&[], &[], &["init"]).unwrap();
    train_on(session.as_ref(), 0);
    train_on(session.as_ref(), 1);
    session.run(&RunOptions::default(), prefix_feed(), &[], &strings(&["save/Identity"])).unwrap();
    let continued = [train_on(session.as_ref(), 2), train_on(session.as_ref(), 3)];
    session.close().unwrap();
    first.shutdown();

    let mut files: Vec<String> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["model.ckpt.data-00000-of-00002", "model.ckpt.data-00001-of-00002", "model.ckpt.index"]);

    let second = LocalCluster::start_jobs(binary(), &jobs, &LocalClusterOptions::default()).unwrap();
    let session = shared_session_on(&second.default_target(), graph);
    // No initializer: restoring assigns every variable, the optimizer's
    // slots and the global step included.
    session.run(&RunOptions::default(), prefix_feed(), &[], &strings(&["save/restore_all"])).unwrap();
    let resumed = [train_on(session.as_ref(), 2), train_on(session.as_ref(), 3)];
    assert_eq!(resumed, continued, "losses after the restore");
    let step = session.run_simple(&[], &["global_step_value:0"], &[]).unwrap();
    assert_eq!(step[0].scalar_value::<i64>().unwrap(), 4);
    session.close().unwrap();
    second.shutdown();
}

/// The `train_ps_momentum` golden case: variables on the ps task, the step
/// placed by `replica_device_setter`, TensorFlow's loss for each batch.
fn ps_training_case() -> GoldenCase {
    GoldenCase::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs/train_ps_momentum"))
        .unwrap()
}

fn ps_worker_cluster() -> (LocalCluster, String, String) {
    let jobs = ringflow::server::local_cluster::parse_jobs("ps=1,worker=2").unwrap();
    let cluster = LocalCluster::start_jobs(binary(), &jobs, &LocalClusterOptions::default()).unwrap();
    let (w0, w1) = (cluster.target_of("worker", 0).unwrap(), cluster.target_of("worker", 1).unwrap());
    (cluster, w0, w1)
}

fn train_step(session: &dyn Session, step: &ringflow::cli::verify::LoadedStep) -> Tensor {
    let names: Vec<String> = step.fetches.iter().map(|(n, _)| n.clone()).collect();
    let (out, _) = session.run(&RunOptions::default(), step.feeds.clone(), &names, &step.targets).unwrap();
    out.into_iter().next().unwrap()
}

#[test]
fn worker_clients_taking_turns_train_the_ps_variables_as_one_tensorflow_session_does() {
    // Between-graph replication: each worker's client has its own master
    // and its own copy of the graph; the variables live once, on the ps
    // task. Taking turns, the two clients make TensorFlow's one-session
    // sequence of updates, so every loss and the final variables match it.
    let case = ps_training_case();
    let (_cluster, w0, w1) = ps_worker_cluster();
    let clients = [shared_session_on(&w0, case.graph.clone()), shared_session_on(&w1, case.graph.clone())];
    for (i, step) in case.steps.iter().enumerate() {
        let client = &clients[i % 2];
        let names: Vec<String> = step.fetches.iter().map(|(n, _)| n.clone()).collect();
        let (out, _) = client.run(&RunOptions::default(), step.feeds.clone(), &names, &step.targets).unwrap();
        for ((name, want), got) in step.fetches.iter().zip(&out) {
            got.all_close(want, 1e-5, 1e-6).unwrap_or_else(|why| panic!("step {i} (client {}), {name}: {why}", i % 2));
        }
    }
    for c in clients {
        c.close().unwrap();
    }
}

#[test]
fn worker_clients_training_at_once_share_one_model_that_learns() {
    // Both clients step concurrently on the shared variables (updates
    // interleave as the ps task receives them); the model both see learns.
    let case = ps_training_case();
    let (_cluster, w0, w1) = ps_worker_cluster();
    let a = shared_session_on(&w0, case.graph.clone());
    a.run(&RunOptions::default(), vec![], &[], &case.steps[0].targets).unwrap();
    let batches: Vec<_> = case.steps.iter().filter(|s| !s.feeds.is_empty()).collect();
    let first = train_step(a.as_ref(), batches[0]).scalar_value::<f32>().unwrap();
    let graph = case.graph.clone();
    let steps_each = 150;
    std::thread::scope(|scope| {
        for (k, target) in [&w0, &w1].into_iter().enumerate() {
            let graph = graph.clone();
            let batches = &batches;
            scope.spawn(move || {
                let client = shared_session_on(target, graph);
                for s in 0..steps_each {
                    let loss = train_step(client.as_ref(), batches[(s + k) % batches.len()]);
                    assert!(loss.scalar_value::<f32>().unwrap().is_finite(), "client {k} step {s}");
                }
                client.close().unwrap();
            });
        }
    });
    let after = train_step(a.as_ref(), batches[0]).scalar_value::<f32>().unwrap();
    assert!(after < 0.8 * first, "the shared model did not learn: loss {first} -> {after}");
    a.close().unwrap();
}

#[test]
fn an_isolated_session_on_a_ps_cluster_trains_its_own_variables() {
    let case = ps_training_case();
    let (_cluster, w0, w1) = ps_worker_cluster();
    let shared = shared_session_on(&w0, case.graph.clone());
    shared.run(&RunOptions::default(), vec![], &[], &case.steps[0].targets).unwrap();
    let isolated = session_on(&w1, case.graph.clone());
    // Its own variables are not initialized, whatever the shared ones are.
    let batch = case.steps.iter().find(|s| !s.feeds.is_empty()).unwrap();
    let names: Vec<String> = batch.fetches.iter().map(|(n, _)| n.clone()).collect();
    let err = isolated.run(&RunOptions::default(), batch.feeds.clone(), &names, &batch.targets).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    shared.close().unwrap();
    isolated.close().unwrap();
}

/// A client that keeps a fetched result keeps its span of the master's
/// ring to it (the result is read in place): later results flow around it,
/// lapping the 160 MiB ring, with no wait and none over the socket.
#[test]
fn results_a_client_keeps_leave_the_masters_ring_flowing() {
    if !ringflow::net::shm::enabled_by_env() {
        return; // RINGFLOW_TRANSPORT=tcp: no ring to check.
    }
    let cluster = start(1);
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let zeros = b.constant("zeros", &Tensor::zeros(DType::F32, [1 << 20]).unwrap());
    b.binary("y", "AddV2", &x, &zeros, DType::F32);
    let s = session_on(&cluster.target(0), b.finish());
    let run = |v: f32| s.run_simple(&[("x", Tensor::scalar(v))], &["y"], &[]).unwrap().remove(0);
    let kept = run(-1.0);
    for step in 0..50 {
        let y = run(step as f32);
        assert!(y.as_slice::<f32>().unwrap().iter().all(|&v| v == step as f32), "step {step}");
    }
    assert!(kept.as_slice::<f32>().unwrap().iter().all(|&v| v == -1.0), "the kept result was overwritten");
    let (frames, socket, stalls) = ring_counters(cluster.address(0));
    assert!(frames >= 51, "the results went through the ring: {frames} frames");
    assert_eq!((socket, stalls), (0, 0), "200 MiB of results lapped the ring around the kept one without waiting");
    s.close().unwrap();
}

/// A client that keeps every result (a history of 700 of 256 KiB, more
/// than the 160 MiB ring) is lent them in the ring up to three quarters of
/// it and gets the rest copied out as they arrive: the master's ring never
/// fills and no answer waits or takes the socket.
#[test]
fn a_client_keeping_every_result_leaves_the_masters_ring_flowing() {
    if !ringflow::net::shm::enabled_by_env() {
        return; // RINGFLOW_TRANSPORT=tcp: no ring to check.
    }
    let cluster = start(1);
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[64 << 10]).unwrap());
    b.binary("y", "Fill", &dims, &x, DType::F32);
    let s = session_on(&cluster.target(0), b.finish());
    let copied_out_before = ringflow::counters::snapshot().shm_bytes_copied_out;
    let steps = 700;
    let history: Vec<Tensor> = (0..steps)
        .map(|step| s.run_simple(&[("x", Tensor::scalar(step as f32))], &["y"], &[]).unwrap().remove(0))
        .collect();
    for (step, y) in history.iter().enumerate() {
        assert!(y.as_slice::<f32>().unwrap().iter().all(|&v| v == step as f32), "result {step} changed while kept");
    }
    let copied_out = ringflow::counters::snapshot().shm_bytes_copied_out - copied_out_before;
    // Lent while they fill at most three quarters of the ring; copied on.
    let (share, of) = ringflow::net::shm::ring::LENT_BYTES_SHARE;
    let lent_at_most = ringflow::net::shm::ShmOptions::default().ring_bytes / of * share;
    assert!(copied_out >= steps as u64 * (256 << 10) - lent_at_most, "{copied_out} bytes copied out");
    let (frames, socket, stalls) = ring_counters(cluster.address(0));
    assert!(frames >= steps as u64, "the results went through the ring: {frames} frames");
    assert_eq!((socket, stalls), (0, 0), "175 MiB of kept results never filled the 160 MiB ring");
    s.close().unwrap();
}

/// `Sum(x)` over axis 0 (a 1-D `x`).
fn sum_all(b: &mut GraphBuilder, name: &str, x: &str) -> String {
    use ringflow::graph::{AttrValue, DataType};
    let axis = b.constant(&format!("{name}_axis"), &Tensor::from_slice::<i32>([1], &[0]).unwrap());
    b.add(
        name,
        "Sum",
        &[x, &axis],
        vec![
            ("T", AttrValue::Type(DataType::Tensor(DType::F32))),
            ("Tidx", AttrValue::Type(DataType::Tensor(DType::I32))),
            ("keep_dims", AttrValue::Bool(false)),
        ],
    )
}

/// A task's frames sent through shared-memory rings, over sockets
/// instead, and its waits for ring space that ran out.
fn ring_counters(address: &str) -> (u64, u64, u64) {
    let mut options = TransportOptions::default();
    options.shm.enabled = false;
    let client = Client::connect(address, options).unwrap();
    let stats = client.call_rpc(&msg::GetStatsRequest {}, &[], Instant::now() + Duration::from_secs(10)).unwrap();
    let stats = stats.meta::<msg::GetStatsResponse>().unwrap();
    (stats.shm_frames.to_native(), stats.shm_socket_frames.to_native(), stats.shm_space_stalls.to_native())
}

fn shm_frames_in_place(address: &str) -> u64 {
    shm_sent_in_place(address).0
}

/// A task's frames sent through shared memory with tensors its kernels
/// wrote in the ring, and those tensors' bytes.
fn shm_sent_in_place(address: &str) -> (u64, u64) {
    let mut options = TransportOptions::default();
    options.shm.enabled = false;
    let client = Client::connect(address, options).unwrap();
    let stats = client.call_rpc(&msg::GetStatsRequest {}, &[], Instant::now() + Duration::from_secs(10)).unwrap();
    let stats = stats.meta::<msg::GetStatsResponse>().unwrap();
    (stats.shm_frames_in_place.to_native(), stats.shm_bytes_in_place.to_native())
}

/// Whether kernels write tensors that cross into shared memory here
/// (not under RINGFLOW_TRANSPORT=tcp or RINGFLOW_SHM_IN_PLACE=0).
fn placing_in_shared_memory() -> bool {
    ringflow::net::shm::enabled_by_env() && ringflow::net::shm::write_in_place_by_env()
}

/// 1 MiB of f32: large enough to be placed.
const PLACED_FILL_ELEMENTS: i32 = 1 << 18;

/// `on_1 = Fill(x)` on task 1 and `on_0 = Fill(x + x)` on task 0, each of
/// [`PLACED_FILL_ELEMENTS`], `x` fed on task 1.
fn fills_on_both_tasks(b: &mut GraphBuilder) -> (String, String) {
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[PLACED_FILL_ELEMENTS]).unwrap());
    b.set_device("/job:worker/task:1");
    let x = b.placeholder("x", DType::F32);
    let on_1 = b.binary("on_1", "Fill", &dims, &x, DType::F32);
    b.set_device("/job:worker/task:0");
    let x2 = b.binary("x2", "AddV2", &x, &x, DType::F32);
    let on_0 = b.binary("on_0", "Fill", &dims, &x2, DType::F32);
    (on_1, on_0)
}

/// A 1 MiB Fill on each task feeds a Sum on the other: over shared memory
/// each Fill writes its output straight into the ring it is sent through
/// (task 1's back over the connection task 0's RunGraph came on, task 0's
/// over its own connection to task 1), and the local Sum of the same
/// tensor reads it there too. Every value is right in every step.
#[test]
fn tensors_sent_between_tasks_are_written_in_place_by_their_kernels() {
    if !placing_in_shared_memory() {
        return;
    }
    const N: i32 = PLACED_FILL_ELEMENTS;
    let mut b = GraphBuilder::new();
    let (on_1, on_0) = fills_on_both_tasks(&mut b);
    b.set_device("/job:worker/task:1");
    let local_1 = sum_all(&mut b, "local_1", &on_1);
    b.set_device("/job:worker/task:0");
    let local_0 = sum_all(&mut b, "local_0", &on_0);
    let from_1 = sum_all(&mut b, "from_1", &on_1);
    b.set_device("/job:worker/task:1");
    let from_0 = sum_all(&mut b, "from_0", &on_0);
    let graph = b.finish();

    let target = target();
    let (task0, task1) = {
        let cluster = shared().lock().unwrap_or_else(|e| e.into_inner());
        (cluster.address(0).to_string(), cluster.address(1).to_string())
    };
    let before = (shm_frames_in_place(&task0), shm_frames_in_place(&task1));
    let s = session_on(&target, graph);
    const STEPS: u64 = 12;
    for step in 0..STEPS {
        let v = step as f32 + 1.0;
        let got = s.run_simple(&[("x", Tensor::scalar(v))], &[&local_1, &from_1, &local_0, &from_0], &[]).unwrap();
        let sums: Vec<f32> = got.iter().map(|t| t.scalar_value::<f32>().unwrap()).collect();
        let n = N as f32;
        assert_eq!(sums, vec![n * v, n * v, n * 2.0 * v, n * 2.0 * v], "step {step}");
    }
    s.close().unwrap();
    let after = (shm_frames_in_place(&task0), shm_frames_in_place(&task1));
    // Other tests share the cluster: they can only add.
    assert!(after.0 - before.0 >= STEPS, "task 0 wrote {} of {STEPS} in place", after.0 - before.0);
    assert!(after.1 - before.1 >= STEPS, "task 1 wrote {} of {STEPS} in place", after.1 - before.1);
}

/// A fetched 1 MiB Fill is written by its kernel into the ring its answer
/// leaves through: on task 0 (the master) into the client's, so the
/// RunStep answer carries it without a copy; on task 1 into task 0's, so
/// the RunGraph answer does (task 0 then copies it on to the client). A
/// cluster of its own, so the counts are exactly these steps'.
#[test]
fn fetched_tensors_are_written_in_place_by_their_kernels() {
    if !placing_in_shared_memory() {
        return;
    }
    const N: i32 = PLACED_FILL_ELEMENTS;
    let mut b = GraphBuilder::new();
    let (on_1, on_0) = fills_on_both_tasks(&mut b);
    // A second large output on each task, for answers carrying two.
    b.set_device("/job:worker/task:0");
    let also_0 = b.binary("also_0", "Fill", "dims", "x", DType::F32);
    // A large tensor no kernel builds in place: the answer copies it
    // into a span of its own beside the one written in place.
    let kept = b.constant("kept", &Tensor::build::<f32>([N as usize], |s| s.fill(3.0)).unwrap());
    // 2 MiB made after on_0 (from its sum): with on_0 held at the first
    // pages of a quiet ring, it is placed behind it.
    let dims2 = b.constant("dims2", &Tensor::from_slice::<i32>([1], &[2 * N]).unwrap());
    let sum_0 = sum_all(&mut b, "sum_0", &on_0);
    let after_0 = b.binary("after_0", "Fill", &dims2, &sum_0, DType::F32);
    // Six at once under long names: the answer's head outgrows a slot.
    let many: Vec<String> = (0..6)
        .map(|i| {
            let name = format!("an_output_whose_name_is_long_enough_to_fill_a_ring_slot_quickly_{i}");
            b.binary(&name, "Fill", "dims", "x", DType::F32)
        })
        .collect();
    b.set_device("/job:worker/task:1");
    let also_1 = b.binary("also_1", "Fill", "dims", "x", DType::F32);
    let graph = b.finish();

    let cluster = start(2);
    let (task0, task1) = (cluster.address(0).to_string(), cluster.address(1).to_string());
    let s = session_on(&cluster.target(0), graph);
    const STEPS: u64 = 8;
    const MIB: f64 = (1 << 20) as f64;
    let (mut placed, mut placed_mib) = (Vec::new(), Vec::new());
    // The third fetch list puts a small tensor after the large one: the
    // answer carries it first, in the slot with the head. The last two
    // fetch two large tensors computed on one task.
    for fetches in [
        vec![on_0.as_str()],
        vec![on_1.as_str()],
        vec![on_0.as_str(), "x2"],
        vec![also_0.as_str(), "x2", on_0.as_str()],
        vec![also_1.as_str(), on_1.as_str()],
        vec![on_0.as_str(), kept.as_str()],
        vec![on_0.as_str(), after_0.as_str()],
        many.iter().map(String::as_str).collect(),
    ] {
        let before = (shm_sent_in_place(&task0), shm_sent_in_place(&task1));
        for step in 0..STEPS {
            let v = step as f32 + 1.0;
            let got = s.run_simple(&[("x", Tensor::scalar(v))], &fetches, &[]).unwrap();
            for (name, got) in fetches.iter().zip(&got) {
                if *name == "x2" {
                    assert_eq!(got.scalar_value::<f32>().unwrap(), 2.0 * v);
                    continue;
                }
                let (want, len) = match *name {
                    n if n == on_0 => (2.0 * v, N),
                    n if n == kept => (3.0, N),
                    n if n == after_0 => (2.0 * v * N as f32, 2 * N),
                    _ => (v, N),
                };
                let values = got.as_slice::<f32>().unwrap();
                assert_eq!(values.len(), len as usize);
                assert!(values.iter().all(|&e| e == want), "{fetches:?}, step {step}: {name} not all {want}");
            }
        }
        let after = (shm_sent_in_place(&task0), shm_sent_in_place(&task1));
        placed.push((after.0.0 - before.0.0, after.1.0 - before.1.0));
        placed_mib.push((after.0.1 - before.0.1) as f64 / MIB / STEPS as f64);
    }
    s.close().unwrap();
    assert_eq!(placed[0], (STEPS, 0), "on_0 fetched: task 0 answers each step from the client's ring");
    assert_eq!(placed[1], (0, STEPS), "on_1 fetched: task 1 answers each RunGraph from task 0's ring");
    assert_eq!(placed[2], (STEPS, 0), "on_0 and x2 fetched: the small one rides in the slot");
    assert_eq!(placed[3], (STEPS, 0), "two large fetches on task 0: one answer over two spans");
    assert_eq!(placed[4], (0, STEPS), "two large fetches on task 1: one RunGraph answer over two spans");
    assert_eq!(placed[5], (STEPS, 0), "a fetch written in place beside one copied: one split answer");
    assert_eq!(placed[6], (STEPS, 0), "two large fetches made one after the other: one answer");
    assert_eq!(placed[7], (STEPS, 0), "six large fetches whose answer's head starts a span");
    // MiB per step task 0 sent where its kernels wrote them: on_1 crosses
    // twice, and the master copies it on to the client.
    assert_eq!(placed_mib, [1.0, 0.0, 1.0, 2.0, 0.0, 1.0, 3.0, 6.0], "on_0 at the first pages leaves after_0 room");
}

/// Servers started with `--shm-hugetlb` offer rings on the host's
/// reserved huge pages where its pool holds them (their maps show
/// hugetlbfs pages) and on regular pages where there is no pool; steps
/// between them run either way.
#[test]
fn servers_asked_for_huge_pages_use_them_or_regular_pages() {
    if !placing_in_shared_memory() {
        return;
    }
    let pool_free = ringflow::net::shm::region::huge_pages_free_bytes();
    let options = LocalClusterOptions { extra_args: vec!["--shm-hugetlb".into()], ..LocalClusterOptions::default() };
    let cluster = LocalCluster::start(binary(), 2, &options).unwrap();
    const N: i32 = PLACED_FILL_ELEMENTS;
    let mut b = GraphBuilder::new();
    let (on_1, on_0) = fills_on_both_tasks(&mut b);
    b.set_device("/job:worker/task:0");
    let from_1 = sum_all(&mut b, "from_1", &on_1);
    b.set_device("/job:worker/task:1");
    let from_0 = sum_all(&mut b, "from_0", &on_0);
    let s = session_on(&cluster.target(0), b.finish());
    for step in 0..3 {
        let v = step as f32 + 1.0;
        let got = s.run_simple(&[("x", Tensor::scalar(v))], &[&from_1, &from_0], &[]).unwrap();
        let sums: Vec<f32> = got.iter().map(|t| t.scalar_value::<f32>().unwrap()).collect();
        assert_eq!(sums, vec![N as f32 * v, N as f32 * 2.0 * v], "step {step}");
    }
    let on_hugetlb: Vec<u64> = (0..2).map(|task| ring_hugetlb_bytes(cluster.pid(task).unwrap())).collect();
    s.close().unwrap();
    // The regions the two tasks offer each other, with the default rings.
    const REGION: u64 = 161 << 21;
    if pool_free == 0 {
        assert_eq!(on_hugetlb, [0, 0], "no pool: regular pages");
    } else if pool_free >= 4 * REGION {
        assert!(on_hugetlb.iter().all(|&b| b > 0), "{pool_free} bytes in the pool, rings on {on_hugetlb:?}");
    }
}

/// Bytes of hugetlbfs pages in process `pid`'s shared-memory rings.
fn ring_hugetlb_bytes(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut bytes, mut inside) = (0, false);
    for line in smaps.lines() {
        let Some(first) = line.split_whitespace().next() else { continue };
        if !first.ends_with(':') {
            inside = line.contains("memfd:ringflow-shm");
        } else if inside && first == "Shared_Hugetlb:" {
            bytes += line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) << 10;
        }
    }
    bytes
}

/// `LocalClusterOptions::task_cpus` holds each task's process, every
/// thread of it, to its CPU (what `bench step-remote --pin-threads` uses).
#[test]
fn a_local_clusters_tasks_can_be_held_to_cpus() {
    let allowed = std::fs::read_to_string("/proc/self/status").unwrap();
    let Some(list) = allowed.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) else { return };
    let first: usize = list.trim().split([',', '-']).next().unwrap().parse().unwrap();
    let last: usize = list.trim().rsplit([',', '-']).next().unwrap().parse().unwrap();
    let options = LocalClusterOptions { task_cpus: vec![last, first], ..LocalClusterOptions::default() };
    let cluster = LocalCluster::start(binary(), 2, &options).unwrap();
    for (task, cpu) in [(0, last), (1, first)] {
        let pid = cluster.pid(task).unwrap();
        let threads: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten().collect();
        assert!(threads.len() > 1, "task {task} runs more than one thread");
        for thread in threads {
            // A thread may end between the listing and this read.
            let Ok(status) = std::fs::read_to_string(thread.path().join("status")) else { continue };
            let Some(cpus) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) else { continue };
            assert_eq!(cpus.trim(), cpu.to_string(), "task {task}, thread {:?}", thread.file_name());
        }
    }
    // Still a working cluster: d = (a + 1) * b across both tasks.
    let s = session_on(&cluster.target(0), two_stage_graph());
    let feeds = [("a", Tensor::scalar(2.0f32)), ("b", Tensor::scalar(4.0f32))];
    let d = s.run_simple(&feeds, &["d"], &[]).unwrap();
    assert_eq!(d[0].scalar_value::<f32>().unwrap(), 12.0);
}
