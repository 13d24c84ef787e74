//! TensorFlow's MasterService over gRPC against real `ringflow server`
//! processes: the requests TensorFlow 2.21's client sent (captured bytes in
//! tests/fixtures/grpc) decoded and replayed, a session's lifecycle, golden
//! cases through every session API, errors as TensorFlow's codes, a step
//! timeout, two clients at once, and HTTP/2 that is not a gRPC call
//! refused while both kinds of client keep being served on the one port.

use ringflow::cli::verify::{GoldenCase, RunMode};
use ringflow::error::Code;
use ringflow::graph::GraphSpec;
use ringflow::graph::builder::{GraphBuilder, counting_loop_graph};
use ringflow::grpc::GrpcChannel;
use ringflow::grpc::proto;
use ringflow::grpc::tensor_proto::{tensor_from_proto, tensor_to_proto};
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::{RunOptions, Session, SessionConfig, SessionExt, SessionOptions, create_session};
use ringflow::{DType, Tensor};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

const CALL: Duration = Duration::from_secs(30);

fn shared() -> &'static Mutex<LocalCluster> {
    static CLUSTER: OnceLock<Mutex<LocalCluster>> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let binary = Path::new(env!("CARGO_BIN_EXE_ringflow"));
        Mutex::new(LocalCluster::start(binary, 2, &LocalClusterOptions::default()).expect("local cluster starts"))
    })
}

/// Worker task 0's address, where both protocols are served.
fn address() -> String {
    shared().lock().unwrap_or_else(|e| e.into_inner()).address(0).to_string()
}

fn grpc_session(graph: GraphSpec) -> Box<dyn Session> {
    let config = SessionConfig { isolate_session_state: true, ..SessionConfig::default() };
    let options = SessionOptions { target: format!("grpc://{}", address()), config, ..SessionOptions::default() };
    create_session(graph, &options).expect("gRPC session")
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/grpc").join(format!("{name}.bin"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode<M: prost::Message + Default>(name: &str) -> M {
    M::decode(&fixture(name)[..]).unwrap_or_else(|e| panic!("{name}.bin does not decode: {e}"))
}

fn feed_values(feed: &proto::NamedTensorProto) -> Vec<f32> {
    let tensor = tensor_from_proto(feed.tensor.as_ref().expect("feed has a tensor"), &feed.name).unwrap();
    tensor.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn captured_tensorflow_requests_decode() {
    let create: proto::CreateSessionRequest = decode("CreateSession");
    let graph = create.graph_def.expect("CreateSession carries the graph");
    let ops: Vec<(&str, &str)> = graph.node.iter().map(|n| (n.name.as_str(), n.op.as_str())).collect();
    assert!(ops.contains(&("x", "Placeholder")) && ops.contains(&("y", "AddV2")), "{ops:?}");
    assert!(create.target.starts_with("grpc://"), "{}", create.target);
    assert!(create.config.is_some());

    let step: proto::RunStepRequest = decode("RunStep");
    assert_eq!(step.fetch, strings(&["y:0"]));
    assert_eq!(step.feed.len(), 1);
    assert_eq!(step.feed[0].name, "x:0");
    assert_eq!(feed_values(&step.feed[0]), [1.0, 2.0, 3.0]);
    assert!(step.store_errors_in_response_body, "TensorFlow's client stores errors in the body");
    let options = step.options.clone().expect("RunOptions");
    assert_eq!((options.timeout_in_ms, options.trace_level), (5000, proto::FULL_TRACE));

    let extend: proto::ExtendSessionRequest = decode("ExtendSession");
    assert_eq!(extend.session_handle, create_handle_of(&step));
    let added: Vec<&str> = extend.graph_def.as_ref().unwrap().node.iter().map(|n| n.name.as_str()).collect();
    assert!(added.contains(&"z") && !added.contains(&"x"), "only new nodes: {added:?}");

    let extended: proto::RunStepRequest = decode("RunStep_extended");
    assert_eq!((extended.fetch.clone(), feed_values(&extended.feed[0])), (strings(&["z:0"]), vec![4.0]));

    let make: proto::MakeCallableRequest = decode("MakeCallable");
    let callable = make.options.unwrap();
    assert_eq!((callable.feed, callable.fetch), (strings(&["x:0"]), strings(&["z:0"])));
    let run: proto::RunCallableRequest = decode("RunCallable");
    let fed = tensor_from_proto(&run.feed[0], "feed").unwrap();
    assert_eq!(fed.as_slice::<f32>().unwrap(), [5.0]);
    let release: proto::ReleaseCallableRequest = decode("ReleaseCallable");
    assert_eq!(release.handle, run.handle);

    let setup: proto::PartialRunSetupRequest = decode("PartialRunSetup");
    assert_eq!((setup.feed, setup.fetch), (strings(&["x:0"]), strings(&["y:0", "z:0"])));
    let partial: proto::RunStepRequest = decode("RunStep_partial");
    assert!(!partial.partial_run_handle.is_empty());
    assert_eq!((partial.fetch.clone(), feed_values(&partial.feed[0])), (strings(&["y:0"]), vec![6.0]));

    let devices: proto::ListDevicesRequest = decode("ListDevices");
    assert_eq!(devices.session_handle, create_handle_of(&step));
    let close: proto::CloseSessionRequest = decode("CloseSession");
    assert_eq!(close.session_handle, create_handle_of(&step));
    let reset: proto::ResetRequest = decode("Reset");
    assert_eq!(reset.container, strings(&["captured"]));
}

fn create_handle_of(step: &proto::RunStepRequest) -> String {
    step.session_handle.clone()
}

fn outputs_of(response: &proto::RunStepResponse) -> Vec<(String, Vec<f32>)> {
    assert_eq!(response.status_code, 0, "{}", response.status_error_message);
    response
        .tensor
        .iter()
        .map(|t| {
            let tensor = tensor_from_proto(t.tensor.as_ref().unwrap(), &t.name).unwrap();
            (t.name.clone(), tensor.as_slice::<f32>().unwrap().to_vec())
        })
        .collect()
}

/// TensorFlow's requests, as captured, replayed on a server (session and
/// callable handles swapped for the ones this server gave).
#[test]
fn captured_tensorflow_session_replays() {
    let channel = GrpcChannel::connect(&address()).unwrap();
    let created: proto::CreateSessionResponse =
        channel.call("CreateSession", &decode::<proto::CreateSessionRequest>("CreateSession"), CALL).unwrap();
    let handle = created.session_handle;

    let mut step: proto::RunStepRequest = decode("RunStep");
    step.session_handle = handle.clone();
    let answer: proto::RunStepResponse = channel.call("RunStep", &step, CALL).unwrap();
    assert_eq!(outputs_of(&answer), [("y:0".to_string(), vec![2.0, 3.0, 4.0])]);
    let stats = answer.metadata.and_then(|m| m.step_stats).expect("FULL_TRACE returns step stats");
    assert!(stats.dev_stats.iter().flat_map(|d| &d.node_stats).any(|n| n.node_name == "y"));

    let mut extend: proto::ExtendSessionRequest = decode("ExtendSession");
    extend.session_handle = handle.clone();
    let extended: proto::ExtendSessionResponse = channel.call("ExtendSession", &extend, CALL).unwrap();
    assert_eq!(extended.new_graph_version, 1);
    let mut step: proto::RunStepRequest = decode("RunStep_extended");
    step.session_handle = handle.clone();
    let answer: proto::RunStepResponse = channel.call("RunStep", &step, CALL).unwrap();
    assert_eq!(outputs_of(&answer), [("z:0".to_string(), vec![10.0])]);

    let mut make: proto::MakeCallableRequest = decode("MakeCallable");
    make.session_handle = handle.clone();
    let made: proto::MakeCallableResponse = channel.call("MakeCallable", &make, CALL).unwrap();
    let mut run: proto::RunCallableRequest = decode("RunCallable");
    (run.session_handle, run.handle) = (handle.clone(), made.handle);
    let ran: proto::RunCallableResponse = channel.call("RunCallable", &run, CALL).unwrap();
    assert_eq!(tensor_from_proto(&ran.fetch[0], "z").unwrap().as_slice::<f32>().unwrap(), [12.0]);
    let mut release: proto::ReleaseCallableRequest = decode("ReleaseCallable");
    (release.session_handle, release.handle) = (handle.clone(), made.handle);
    channel.call::<_, proto::ReleaseCallableResponse>("ReleaseCallable", &release, CALL).unwrap();

    let mut setup: proto::PartialRunSetupRequest = decode("PartialRunSetup");
    setup.session_handle = handle.clone();
    let partial: proto::PartialRunSetupResponse = channel.call("PartialRunSetup", &setup, CALL).unwrap();
    let mut step: proto::RunStepRequest = decode("RunStep_partial");
    (step.session_handle, step.partial_run_handle) = (handle.clone(), partial.partial_run_handle.clone());
    let answer: proto::RunStepResponse = channel.call("RunStep", &step, CALL).unwrap();
    assert_eq!(outputs_of(&answer), [("y:0".to_string(), vec![7.0])]);
    let rest = proto::RunStepRequest {
        session_handle: handle.clone(),
        fetch: strings(&["z:0"]),
        partial_run_handle: partial.partial_run_handle,
        store_errors_in_response_body: true,
        ..Default::default()
    };
    let answer: proto::RunStepResponse = channel.call("RunStep", &rest, CALL).unwrap();
    assert_eq!(outputs_of(&answer), [("z:0".to_string(), vec![14.0])]);

    let mut devices: proto::ListDevicesRequest = decode("ListDevices");
    devices.session_handle = handle.clone();
    let listed: proto::ListDevicesResponse = channel.call("ListDevices", &devices, CALL).unwrap();
    assert_eq!((listed.local_device.len(), listed.remote_device.len()), (1, 1));
    assert!(listed.local_device[0].name.starts_with("/job:worker/replica:0/task:0/"));

    let mut close: proto::CloseSessionRequest = decode("CloseSession");
    close.session_handle = handle.clone();
    channel.call::<_, proto::CloseSessionResponse>("CloseSession", &close, CALL).unwrap();
    channel.call::<_, proto::ResetResponse>("Reset", &decode::<proto::ResetRequest>("Reset"), CALL).unwrap();
    let after = channel.call::<_, proto::RunStepResponse>("RunStep", &step, CALL).unwrap();
    assert_eq!(after.status_code, Code::Aborted as i32, "a closed session's step: {}", after.status_error_message);
}

#[test]
fn session_lifecycle_create_extend_run_close() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    let session = grpc_session(b.finish());
    assert_eq!(session.graph_version().unwrap(), 0);
    let y = session.run_simple(&[("x:0", Tensor::from_slice([2], &[1.0f32, 5.0]).unwrap())], &["y:0"], &[]).unwrap();
    assert_eq!(y[0].as_slice::<f32>().unwrap(), [2.0, 6.0]);

    let mut more = GraphBuilder::new();
    let two = more.constant("two", &Tensor::scalar(2.0f32));
    more.binary("z", "Mul", "y", &two, DType::F32);
    assert_eq!(session.extend(more.finish(), 0).unwrap(), 1);
    let stale = GraphBuilder::new().finish();
    assert_eq!(session.extend(stale, 0).unwrap_err().code, Code::FailedPrecondition);
    let z = session.run_simple(&[("x:0", Tensor::scalar(3.0f32))], &["z:0", "y:0"], &[]).unwrap();
    assert_eq!((z[0].scalar_value::<f32>().unwrap(), z[1].scalar_value::<f32>().unwrap()), (8.0, 4.0));

    let (outputs, metadata) = session
        .run(
            &RunOptions { trace: true, ..RunOptions::default() },
            vec![("x:0".into(), Tensor::scalar(0.5f32))],
            &strings(&["z:0"]),
            &[],
        )
        .unwrap();
    assert_eq!(outputs[0].scalar_value::<f32>().unwrap(), 3.0);
    assert!(metadata.step_stats.iter().any(|n| n.node == "z" && n.op == "Mul"), "{:?}", metadata.step_stats);

    let devices = session.list_devices().unwrap();
    assert_eq!(devices.len(), 2);
    session.close().unwrap();
    let e = session.run_simple(&[("x:0", Tensor::scalar(1.0f32))], &["y:0"], &[]).unwrap_err();
    assert_eq!(e.code, Code::Aborted, "{e}");
}

fn golden(case: &str, mode: RunMode) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(case);
    let golden = GoldenCase::load(&dir).unwrap();
    let session = grpc_session(golden.graph.clone());
    golden.check_with(session.as_ref(), mode).unwrap_or_else(|e| panic!("{case} ({mode:?}) over gRPC: {e}"));
    session.close().unwrap();
}

#[test]
fn golden_cases_over_grpc() {
    for case in ["add_scalar", "mlp3_two_tasks", "fanout_two_tasks", "cond_v2", "counter_resource_var", "keras_cnn"] {
        golden(case, RunMode::Run);
    }
}

#[test]
fn golden_cases_by_callable_and_partial_run_over_grpc() {
    for case in ["mlp3_two_tasks", "array_ops", "while_v1"] {
        golden(case, RunMode::Callable);
        golden(case, RunMode::Partial);
    }
}

/// A tensor larger than HTTP/2's windows and frames crosses both ways.
#[test]
fn large_tensors_cross_in_many_frames() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.unary("y", "Identity", &x, DType::F32);
    let session = grpc_session(b.finish());
    let values: Vec<f32> = (0..6 << 20).map(|i| i as f32).collect();
    let fed = Tensor::from_slice([values.len()], &values).unwrap();
    let y = session.run_simple(&[("x:0", fed.clone())], &["y:0"], &[]).unwrap();
    assert!(y[0].bit_eq(&fed), "24 MiB came back changed");
    session.close().unwrap();
}

#[test]
fn errors_carry_tensorflows_codes() {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.unary("y", "Identity", &x, DType::F32);
    let session = grpc_session(b.finish());
    let e = session.run_simple(&[("nope:0", Tensor::scalar(1.0f32))], &["y:0"], &[]).unwrap_err();
    assert!(matches!(e.code, Code::InvalidArgument | Code::NotFound), "{e}");
    assert!(e.message.contains("nope"), "the error names the tensor: {e}");

    // Without store_errors_in_response_body the code rides in grpc-status.
    let channel = GrpcChannel::connect(&address()).unwrap();
    let request = proto::RunStepRequest {
        session_handle: "no-such-session".into(),
        fetch: strings(&["y:0"]),
        ..Default::default()
    };
    let e = channel.call::<_, proto::RunStepResponse>("RunStep", &request, CALL).unwrap_err();
    assert_eq!(e.code, Code::Aborted, "{e}");
    let in_body = proto::RunStepRequest { store_errors_in_response_body: true, ..request };
    let answer: proto::RunStepResponse = channel.call("RunStep", &in_body, CALL).unwrap();
    assert_eq!(answer.status_code, Code::Aborted as i32);
    assert!(answer.status_error_message.contains("no-such-session"), "{}", answer.status_error_message);

    let bad_feed = proto::RunCallableRequest { session_handle: "x".into(), ..Default::default() };
    let e = channel.call::<_, proto::RunCallableResponse>("RunCallable", &bad_feed, CALL).unwrap_err();
    assert_eq!(e.code, Code::Aborted);
    let e = channel.call::<_, proto::CloseSessionResponse>("Teleport", &proto::CloseSessionRequest::default(), CALL);
    assert_eq!(e.unwrap_err().code, Code::Unimplemented);
    session.close().unwrap();
}

#[test]
fn step_timeout_is_deadline_exceeded() {
    let session = grpc_session(counting_loop_graph(10));
    let short = session.run_simple(&[("n:0", Tensor::scalar(50i32))], &["i_out:0"], &[]).unwrap();
    assert_eq!(short[0].scalar_value::<i32>().unwrap(), 50);
    let options = RunOptions { timeout: Some(Duration::from_millis(200)), ..RunOptions::default() };
    let started = std::time::Instant::now();
    let e = session
        .run(&options, vec![("n:0".into(), Tensor::scalar(2_000_000_000i32))], &strings(&["i_out:0"]), &[])
        .unwrap_err();
    assert_eq!(e.code, Code::DeadlineExceeded, "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "the step ended at {:?}", started.elapsed());
    let again = session.run_simple(&[("n:0", Tensor::scalar(7i32))], &["i_out:0"], &[]).unwrap();
    assert_eq!(again[0].scalar_value::<i32>().unwrap(), 7);
    session.close().unwrap();
}

#[test]
fn two_clients_at_once() {
    let workers: Vec<_> = (0..2)
        .map(|client| {
            std::thread::spawn(move || {
                let session = grpc_session(ringflow::graph::builder::trivial_add_graph());
                for i in 0..200 {
                    let x = (client * 1000 + i) as f32;
                    let y = session.run_simple(&[("x:0", Tensor::scalar(x))], &["y:0"], &[]).unwrap();
                    assert_eq!(y[0].scalar_value::<f32>().unwrap(), x + 1.0);
                }
                session.close().unwrap();
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

/// Calls that overlap on one connection (one session, two threads) run
/// off the connection's thread and all complete.
#[test]
fn overlapping_calls_on_one_connection() {
    let session = grpc_session(ringflow::graph::builder::trivial_add_graph());
    std::thread::scope(|scope| {
        for client in 0..2 {
            let session = &session;
            scope.spawn(move || {
                for i in 0..200 {
                    let x = (client * 1000 + i) as f32;
                    let y = session.run_simple(&[("x:0", Tensor::scalar(x))], &["y:0"], &[]).unwrap();
                    assert_eq!(y[0].scalar_value::<f32>().unwrap(), x + 1.0);
                }
            });
        }
    });
    session.close().unwrap();
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads what the server sends until it closes; panics if it does not
/// close within 10 s.
fn read_until_closed(stream: &mut std::net::TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
            // A signal delivered to this thread interrupts the read
            // (EINTR, seen once in a full run): read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("the server kept the connection open: {e}"),
        }
    }
}

/// HTTP/2 frame types in a byte stream of whole frames.
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let len = (bytes[0] as usize) << 16 | (bytes[1] as usize) << 8 | bytes[2] as usize;
        types.push(bytes[3]);
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    types
}

/// A native and a gRPC session both still work.
fn both_kinds_still_served() {
    let native = create_session(
        ringflow::graph::builder::trivial_add_graph(),
        &SessionOptions {
            target: format!("ringflow://{}", address()),
            local_shortcut: false,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let y = native.run_simple(&[("x:0", Tensor::scalar(1.0f32))], &["y:0"], &[]).unwrap();
    assert_eq!(y[0].scalar_value::<f32>().unwrap(), 2.0);
    native.close().unwrap();
    let grpc = grpc_session(ringflow::graph::builder::trivial_add_graph());
    let y = grpc.run_simple(&[("x:0", Tensor::scalar(2.0f32))], &["y:0"], &[]).unwrap();
    assert_eq!(y[0].scalar_value::<f32>().unwrap(), 3.0);
    grpc.close().unwrap();
}

#[test]
fn broken_http2_gets_an_http2_error_and_the_port_keeps_serving() {
    // The preface, then garbage where the SETTINGS frame belongs: a GOAWAY.
    let mut stream = std::net::TcpStream::connect(address()).unwrap();
    stream.write_all(PREFACE).unwrap();
    stream.write_all(&[0xff; 64]).unwrap();
    let answer = read_until_closed(&mut stream);
    assert!(frame_types(&answer).contains(&0x7), "expected a GOAWAY frame, got {:?}", frame_types(&answer));

    // Half a preface, then silence ended by closing: nothing breaks.
    let mut stream = std::net::TcpStream::connect(address()).unwrap();
    stream.write_all(&PREFACE[..6]).unwrap();
    drop(stream);
    both_kinds_still_served();
}

/// Valid HTTP/2 that is not a gRPC call: HTTP errors (405, 415) or a gRPC
/// status for a gRPC-shaped request the service cannot take.
#[test]
fn http2_requests_that_are_not_grpc_calls_are_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let address = address();
    let outcomes = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
        let (sender, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut outcomes = Vec::new();
        let cases: [(&str, &str, &str, &[u8]); 4] = [
            ("GET", "/tensorflow.MasterService/RunStep", "application/grpc", b""),
            ("POST", "/tensorflow.MasterService/RunStep", "text/plain", b"hello"),
            ("POST", "/other.Service/Call", "application/grpc", &[0, 0, 0, 0, 0]),
            ("POST", "/tensorflow.MasterService/RunStep", "application/grpc", &[0, 0, 0, 0, 9, 1]),
        ];
        for (method, path, content_type, body) in cases {
            let mut sender = sender.clone().ready().await.unwrap();
            let request = http::Request::builder()
                .method(method)
                .uri(format!("http://{address}{path}"))
                .header("content-type", content_type)
                .body(())
                .unwrap();
            let (response, mut stream) = sender.send_request(request, false).unwrap();
            stream.send_data(bytes::Bytes::copy_from_slice(body), true).unwrap();
            let response = response.await.unwrap();
            let status = response.headers().get("grpc-status").map(|v| v.to_str().unwrap().to_string());
            outcomes.push((response.status().as_u16(), status));
        }
        outcomes
    });
    assert_eq!(
        outcomes,
        [
            (405, None),
            (415, None),
            (200, Some((Code::Unimplemented as u8).to_string())),
            (200, Some((Code::InvalidArgument as u8).to_string())),
        ]
    );
    both_kinds_still_served();
}

#[test]
fn tensor_protos_in_every_encoding_feed_a_step() {
    let channel = GrpcChannel::connect(&address()).unwrap();
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F64);
    b.unary("y", "Identity", &x, DType::F64);
    let s = b.placeholder("s", DType::String);
    b.unary("t", "Identity", &s, DType::String);
    let request = proto::CreateSessionRequest {
        graph_def: Some(ringflow::graph::import::graph_to_proto(&b.finish())),
        ..Default::default()
    };
    let created: proto::CreateSessionResponse = channel.call("CreateSession", &request, CALL).unwrap();
    let shape = |dims: &[i64]| {
        Some(ringflow::graph::import::proto::TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| ringflow::graph::import::proto::tensor_shape_proto::Dim { size, name: String::new() })
                .collect(),
            unknown_rank: false,
        })
    };
    // A scalar broadcast from one double_val, and strings in string_val.
    let x = proto::TensorProto { dtype: 2, tensor_shape: shape(&[2, 2]), double_val: vec![1.5], ..Default::default() };
    let s = proto::TensorProto {
        dtype: 7,
        tensor_shape: shape(&[2]),
        string_val: vec![b"tf".to_vec(), b"\xff".to_vec()],
        ..Default::default()
    };
    let step = proto::RunStepRequest {
        session_handle: created.session_handle,
        feed: vec![
            proto::NamedTensorProto { name: "x:0".into(), tensor: Some(x) },
            proto::NamedTensorProto { name: "s:0".into(), tensor: Some(s) },
        ],
        fetch: strings(&["t:0", "y:0"]),
        ..Default::default()
    };
    let answer: proto::RunStepResponse = channel.call("RunStep", &step, CALL).unwrap();
    let t = &answer.tensor[0];
    assert_eq!(
        (t.name.as_str(), &t.tensor.as_ref().unwrap().string_val),
        ("t:0", &vec![b"tf".to_vec(), b"\xff".to_vec()])
    );
    let y = tensor_from_proto(answer.tensor[1].tensor.as_ref().unwrap(), "y").unwrap();
    assert_eq!((y.dims(), y.as_slice::<f64>().unwrap()), (&[2usize, 2][..], &[1.5; 4][..]));
    let back = tensor_to_proto(&y).unwrap();
    assert_eq!(back.tensor_content.len(), 32, "answers use tensor_content, as TensorFlow's servers do");
}
