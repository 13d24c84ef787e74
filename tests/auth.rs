//! The cluster secret against real server processes: this test process
//! holds the right secret (as `--secret-file` would give it), so sessions
//! work; peers with no secret or a wrong one are refused before anything
//! they send is decoded, gRPC peers are refused, and the servers serve on.

use ringflow::error::Code;
use ringflow::graph::builder::trivial_add_graph;
use ringflow::net::message as msg;
use ringflow::net::{Client, ClusterSecret, SecretSetting, TransportOptions};
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::{SessionExt, SessionOptions, create_session};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The secret file, written once and made this process's default.
fn secret_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("ringflow-auth-test-{}.secret", std::process::id()));
        std::fs::write(&path, "correct horse battery staple\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        SecretSetting::set_process_default(SecretSetting::from_file(&path));
        path
    })
}

fn cluster() -> LocalCluster {
    secret_file();
    LocalCluster::start(Path::new(env!("CARGO_BIN_EXE_ringflow")), 2, &LocalClusterOptions::default()).unwrap()
}

fn options(secret: SecretSetting) -> TransportOptions {
    TransportOptions { secret, connect_timeout_ms: 3_000, ..TransportOptions::default() }
}

fn status_call(client: &Client) -> ringflow::Result<()> {
    client.call_rpc(&msg::GetStatusRequest::default(), &[], Instant::now() + Duration::from_secs(5)).map(drop)
}

#[test]
fn the_right_secret_works_and_a_missing_or_wrong_one_is_refused() {
    let cluster = cluster();
    // Both tasks hold the secret too: a step across them works.
    let s =
        create_session(trivial_add_graph(), &SessionOptions { target: cluster.target(0), ..SessionOptions::default() })
            .unwrap();
    let out = s.run_simple(&[], &["c"], &[]);
    assert!(out.is_ok() || out.as_ref().is_err_and(|e| e.code != Code::Unauthenticated), "{out:?}");
    let right = Client::connect(cluster.address(0), options(SecretSetting::process_default())).unwrap();
    status_call(&right).unwrap();

    let err = Client::connect(cluster.address(0), options(SecretSetting::Open)).unwrap_err();
    assert_eq!(err.code, Code::Unauthenticated, "{err}");
    assert!(err.message.contains("requires the cluster secret"), "{err}");
    let wrong = SecretSetting::Key(Arc::new(ClusterSecret::from_bytes(b"wrong", "test".into())));
    let err = Client::connect(cluster.address(1), options(wrong)).unwrap_err();
    assert_eq!(err.code, Code::Unauthenticated, "{err}");
    assert!(err.message.contains("proof is wrong"), "{err}");
    let unreadable = SecretSetting::from_file(Path::new("/nonexistent/ringflow.secret"));
    let err = Client::connect(cluster.address(0), options(unreadable)).unwrap_err();
    assert!(err.message.contains("/nonexistent/ringflow.secret"), "{err}");
    status_call(&right).unwrap();
}

#[test]
fn an_unproved_peer_is_refused_before_its_requests_are_decoded() {
    let cluster = cluster();
    // A hello without a nonce, then a request anyway: the server answers
    // the hello with an error and closes, never reading the request.
    let hello =
        msg::encode(&msg::Hello { protocol_version: ringflow::net::frame::PROTOCOL_VERSION, ..Default::default() })
            .unwrap();
    let limits = ringflow::net::FrameLimits::default();
    let mut bytes =
        ringflow::net::frame::OutgoingFrame::new(ringflow::net::FrameKind::Hello, 0, 0, &hello, &[], &limits)
            .unwrap()
            .to_vec();
    let request = msg::encode(&msg::GetStatusRequest::default()).unwrap();
    bytes.extend(
        ringflow::net::frame::OutgoingFrame::new(
            ringflow::net::FrameKind::Request,
            msg::Method::GetStatus as u16,
            1,
            &request,
            &[],
            &limits,
        )
        .unwrap()
        .to_vec(),
    );
    let mut raw = std::net::TcpStream::connect(cluster.address(0)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(&bytes).unwrap();
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    let frame = ringflow::net::frame::decode_frame(&answer, &limits).expect("one error frame, then close");
    assert_eq!(frame.header.kind, ringflow::net::FrameKind::Error);
    assert_eq!(answer.len() as u64, frame.header.frame_len(), "nothing but the refusal");
    // gRPC cannot prove the secret: refused at once.
    let mut grpc = std::net::TcpStream::connect(cluster.address(0)).unwrap();
    grpc.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    grpc.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let closed = grpc.read_to_end(&mut sink);
    let reset = closed.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset);
    assert!((closed.is_ok() || reset) && sink.is_empty(), "gRPC: {closed:?}, {} bytes", sink.len());
    let right = Client::connect(cluster.address(0), options(SecretSetting::process_default())).unwrap();
    status_call(&right).unwrap();
}
