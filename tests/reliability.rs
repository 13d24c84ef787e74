//! Failure detection, recovery, collection and limits against real server
//! processes on loopback: a killed task fails its step within the bound and
//! serves the same session once restarted; a stopped task is caught by
//! heartbeats and rejoins; a vanished client's graphs and a dead master's
//! worker sessions are released; idle and slow-loris connections do not
//! keep a real client from being served; hostile graphs and feeds get their
//! errors while the server serves on; a soak of 4 clients.

use ringflow::error::Code;
use ringflow::graph::builder::GraphBuilder;
use ringflow::graph::{AttrValue, DataType, GraphSpec, ShapeSpec};
use ringflow::net::message as msg;
use ringflow::net::{Client, TransportOptions};
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::{RunOptions, Session, SessionExt, SessionOptions, create_session};
use ringflow::{DType, Tensor};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringflow"))
}

fn cluster(tasks: usize, extra_args: &[&str]) -> LocalCluster {
    let options = LocalClusterOptions {
        extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        ..LocalClusterOptions::default()
    };
    LocalCluster::start(binary(), tasks, &options).expect("local cluster starts")
}

fn session_on(target: &str, graph: GraphSpec) -> Box<dyn Session> {
    create_session(graph, &SessionOptions { target: target.to_string(), ..SessionOptions::default() }).unwrap()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn ty(d: DType) -> AttrValue {
    AttrValue::Type(DataType::Tensor(d))
}

/// `links` chained 256×256 MatMuls on task 1, fetched on task 0 (seconds of
/// work), a resource variable `v` on task 1, and a short step `short` across
/// both.
fn graph(links: usize) -> GraphSpec {
    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    b.set_device("/job:worker/task:1");
    let last = b.matmul_chain(&x, links, DType::F32);
    let v = b.add(
        "v",
        "VarHandleOp",
        &[],
        vec![("dtype", ty(DType::F32)), ("shape", AttrValue::Shape(ShapeSpec::known(&[])))],
    );
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.add("init", "AssignVariableOp", &[&v, &one], vec![("dtype", ty(DType::F32))]);
    let value = b.add("value", "ReadVariableOp", &[&v], vec![("dtype", ty(DType::F32))]);
    let a = b.placeholder("a", DType::F32);
    let doubled = b.binary("doubled", "AddV2", &a, &a, DType::F32);
    b.set_device("/job:worker/task:0");
    b.unary("end", "Identity", &last, DType::F32);
    b.unary("short", "Identity", &doubled, DType::F32);
    b.unary("read", "Identity", &value, DType::F32);
    b.finish()
}

fn short_step(s: &dyn Session) -> ringflow::Result<f32> {
    let out = s.run_simple(&[("a", Tensor::scalar(2.0f32))], &["short"], &[])?;
    Ok(out[0].scalar_value::<f32>().unwrap())
}

fn ones() -> Tensor {
    Tensor::from_slice([256usize, 256], &vec![1.0f32 / 256.0; 256 * 256]).unwrap()
}

/// Starts the long step on a thread (registered first, so what a failure
/// interrupts is the step); returns when it ended, and when.
fn long_step(s: Arc<dyn Session>) -> std::thread::JoinHandle<(ringflow::Result<()>, Instant)> {
    let call = s.make_callable(&strings(&["x"]), &strings(&["end"]), &[]).unwrap();
    std::thread::spawn(move || {
        let result = s.run_callable(call, vec![ones()], &RunOptions::default()).map(drop);
        (result, Instant::now())
    })
}

#[test]
fn a_killed_task_fails_its_step_in_time_and_serves_the_same_session_once_restarted() {
    let mut cluster = cluster(2, &[]);
    let s: Arc<dyn Session> = session_on(&cluster.target(0), graph(20_000)).into();
    s.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(s.run_simple(&[], &["read"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 1.0);
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    let running = long_step(s.clone());
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    cluster.kill(1);
    let (result, ended) = running.join().unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(err.message.contains("task:1"), "{err}");
    eprintln!("killed: the step failed {:?} after the kill", ended - killed);
    assert!(ended - killed < Duration::from_secs(2), "the step ended {:?} after the kill", ended - killed);
    cluster.restart(1).unwrap();
    // The same client session: set up again on the new process.
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    // The variable lived on the restarted task: gone, and reading it says so.
    let err = s.run_simple(&[], &["read"], &[]).unwrap_err();
    assert_eq!(err.code, Code::FailedPrecondition, "{err}");
    assert!(err.message.contains("variable v") && err.message.contains("task:1"), "{err}");
    s.run_simple(&[], &[], &["init"]).unwrap();
    assert_eq!(s.run_simple(&[], &["read"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 1.0);
    s.close().unwrap();
}

fn signal(cluster: &LocalCluster, task: usize, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(cluster.pid(task).unwrap() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
}

#[test]
fn a_stopped_task_is_caught_by_heartbeats_and_rejoins_when_continued() {
    use nix::sys::signal::Signal;
    let cluster = cluster(2, &[]);
    let s: Arc<dyn Session> = session_on(&cluster.target(0), graph(20_000)).into();
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    let running = long_step(s.clone());
    std::thread::sleep(Duration::from_millis(300));
    let stopped = Instant::now();
    signal(&cluster, 1, Signal::SIGSTOP);
    let (result, ended) = running.join().unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(err.message.contains("task:1") && err.message.contains("heartbeat"), "{err}");
    // 500 ms between heartbeats + 1.5 s without an answer; slack for a
    // loaded 2-core machine.
    eprintln!("stopped: the step failed {:?} after the stop", ended - stopped);
    assert!(ended - stopped < Duration::from_millis(2_800), "caught {:?} after the stop", ended - stopped);
    // While it is stopped, new steps on it fail at once instead of hanging.
    let started = Instant::now();
    let err = short_step(s.as_ref()).unwrap_err();
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_millis(2_800), "{:?}", started.elapsed());
    signal(&cluster, 1, Signal::SIGCONT);
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    s.close().unwrap();
}

#[test]
fn a_stopped_master_fails_its_clients_step_instead_of_hanging_it() {
    use nix::sys::signal::Signal;
    let cluster = cluster(2, &[]);
    let s: Arc<dyn Session> = session_on(&cluster.target(0), graph(20_000)).into();
    let running = long_step(s.clone());
    std::thread::sleep(Duration::from_millis(300));
    let stopped = Instant::now();
    signal(&cluster, 0, Signal::SIGSTOP);
    let (result, ended) = running.join().unwrap();
    signal(&cluster, 0, Signal::SIGCONT);
    let err = result.unwrap_err();
    eprintln!("stopped master: the step failed {:?} after the stop", ended - stopped);
    assert_eq!(err.code, Code::Unavailable, "{err}");
    assert!(err.message.contains("stopped answering") && err.message.contains(cluster.address(0)), "{err}");
    // A ping after 1 s of step, unanswered for 2 s; slack for a loaded host.
    assert!(ended - stopped < Duration::from_secs(5), "{:?}", ended - stopped);
}

fn worker_status(address: &str, session: &str) -> (u64, u64) {
    let client = Client::connect(address, TransportOptions::default()).unwrap();
    let request = msg::GetStatusRequest { session_handle: session.to_string(), ..Default::default() };
    let response = client.call_rpc(&request, &[], Instant::now() + Duration::from_secs(5)).unwrap();
    let meta = response.meta::<msg::GetStatusResponse>().unwrap();
    (meta.registered_graphs.to_native(), meta.sessions.to_native())
}

fn eventually(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_vanished_client_has_its_graphs_released_after_the_idle_time() {
    let cluster = cluster(2, &["--session-idle-timeout-s", "1"]);
    let s = ringflow::session::remote::RemoteSession::create(
        &cluster.target(0).replace("ringflow://", ""),
        graph(1),
        &SessionOptions::default(),
    )
    .unwrap();
    assert_eq!(short_step(&s).unwrap(), 4.0);
    let handle = s.handle().to_string();
    assert_eq!(worker_status(cluster.address(1), &handle), (1, 1));
    // The client goes away without closing its session.
    std::mem::forget(s);
    eventually("task 0 and task 1 release the session", Duration::from_secs(8), || {
        (0..2).all(|t| worker_status(cluster.address(t), &handle) == (0, 0))
    });
}

#[test]
fn a_dead_masters_worker_sessions_are_released_and_live_ones_kept() {
    let mut cluster = cluster(3, &["--worker-idle-timeout-s", "1"]);
    let kept = session_on(&cluster.target(0), graph(1));
    let s = session_on(&cluster.target(2), graph(1));
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    assert_eq!(short_step(kept.as_ref()).unwrap(), 4.0);
    // Task 0's master heartbeats keep its session on task 1 alive although
    // no step runs; task 2's master dies and its session goes.
    std::mem::forget(s);
    cluster.kill(2);
    eventually("task 1 keeps only the live master's session", Duration::from_secs(8), || {
        worker_status(cluster.address(1), "").1 == 1
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(worker_status(cluster.address(1), "").1, 1);
    assert_eq!(short_step(kept.as_ref()).unwrap(), 4.0);
}

/// `(threads, RSS in KiB)` of a process, from /proc.
fn threads_and_rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

/// Raises this process's descriptor limit as far as allowed; returns it.
fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    getrlimit(Resource::RLIMIT_NOFILE).unwrap().0
}

#[test]
fn idle_and_slow_loris_connections_do_not_stop_a_real_client() {
    let cluster = cluster(2, &[]);
    let address = cluster.address(0).to_string();
    let pid = cluster.pid(0).unwrap();
    let s = session_on(&cluster.target(0), graph(1));
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    let before = threads_and_rss(pid);
    let idle_count = (raise_fd_limit().saturating_sub(200) as usize).min(2000);
    let idle: Vec<std::net::TcpStream> =
        (0..idle_count).filter_map(|_| std::net::TcpStream::connect(&address).ok()).collect();
    // Slow loris: a valid hello header, one byte at a time.
    let hello =
        msg::encode(&msg::Hello { protocol_version: ringflow::net::frame::PROTOCOL_VERSION, ..Default::default() })
            .unwrap();
    let frame = ringflow::net::frame::OutgoingFrame::new(
        ringflow::net::FrameKind::Hello,
        0,
        0,
        &hello,
        &[],
        &ringflow::net::FrameLimits::default(),
    )
    .unwrap()
    .to_vec();
    let mut loris: Vec<std::net::TcpStream> =
        (0..20).filter_map(|_| std::net::TcpStream::connect(&address).ok()).collect();
    let mut steps = 0;
    let mut peak = before;
    for byte in 0..4 {
        for peer in &mut loris {
            let _ = peer.write_all(&frame[byte..byte + 1]);
        }
        let until = Instant::now() + Duration::from_millis(250);
        while Instant::now() < until {
            assert_eq!(short_step(s.as_ref()).unwrap(), 4.0, "step {steps} with {} idle peers", idle.len());
            steps += 1;
        }
        let now = threads_and_rss(pid);
        peak = (peak.0.max(now.0), peak.1.max(now.1));
    }
    eprintln!(
        "{} idle + {} slow-loris connections: {steps} steps served; server threads {} -> {} (peak), RSS {} -> {} KiB (peak)",
        idle.len(),
        loris.len(),
        before.0,
        peak.0,
        before.1,
        peak.1
    );
    assert!(idle.len() >= 500, "only {} connections could be opened", idle.len());
    assert!(peak.0 <= before.0 + 4, "threads grew from {} to {}", before.0, peak.0);
    assert!(peak.1 <= before.1 + 32 * 1024, "RSS grew from {} to {} KiB", before.1, peak.1);
    // After the handshake timeout (3 s) the server has dropped them all.
    drop(idle);
    drop(loris);
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
}

#[test]
fn hostile_headers_graphs_and_feeds_get_their_errors_and_the_server_serves_on() {
    use std::io::Read;
    let cluster = cluster(2, &[]);
    let pid = cluster.pid(0).unwrap();
    let s = session_on(&cluster.target(0), graph(1));
    let rss_before = threads_and_rss(pid).1;
    // Hellos that announce a huge body, a wrong version, or garbage.
    let mut header = [0u8; 64];
    header[..4].copy_from_slice(b"RFLW");
    header[4..6].copy_from_slice(&ringflow::net::frame::PROTOCOL_VERSION.to_le_bytes());
    header[6] = 1;
    header[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    header[56..64].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let mut wrong_version = header;
    wrong_version[4..6].copy_from_slice(&999u16.to_le_bytes());
    for bytes in [&header[..], &wrong_version[..], b"GET / HTTP/1.1\r\n\r\n".as_slice(), &[0xff; 64][..]] {
        for _ in 0..4 {
            let mut raw = std::net::TcpStream::connect(cluster.address(0)).unwrap();
            raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            raw.write_all(bytes).unwrap();
            let mut sink = Vec::new();
            assert!(raw.read_to_end(&mut sink).is_ok(), "the server closes a hostile hello");
        }
        assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    }
    let rss_after = threads_and_rss(pid).1;
    assert!(rss_after < rss_before + 16 * 1024, "hostile hellos cost memory: {rss_before} -> {rss_after} KiB");

    let target = cluster.target(0);
    let expect = |graph: GraphSpec, fetch: &str, code: Code, names: &str| {
        let result = create_session(graph, &SessionOptions { target: target.clone(), ..SessionOptions::default() })
            .and_then(|s| s.run_simple(&[], &[fetch], &[]));
        let err = result.err().unwrap_or_else(|| panic!("{names}: no error"));
        assert_eq!(err.code, code, "{err}");
        assert!(err.message.contains(names), "{err}");
    };
    // An op nobody implements.
    let mut b = GraphBuilder::new();
    let x = b.constant("x", &Tensor::scalar(1.0f32));
    b.unary("weird", "NoSuchOpAnywhere", &x, DType::F32);
    expect(b.finish(), "weird", Code::NotFound, "NoSuchOpAnywhere");
    // A cycle.
    let mut b = GraphBuilder::new();
    let x = b.constant("x", &Tensor::scalar(1.0f32));
    b.binary("p", "AddV2", &x, &x, DType::F32);
    let mut cyclic = b.finish();
    let p = cyclic.nodes.iter().position(|n| n.name == "p").unwrap();
    cyclic.nodes[p].inputs[1].node = "q".into();
    let mut q = cyclic.nodes[p].clone();
    q.name = "q".into();
    q.inputs[1].node = "p".into();
    cyclic.nodes.push(q);
    expect(cyclic, "q", Code::InvalidArgument, "cycle");
    // A reshape to 2^62 elements.
    let mut b = GraphBuilder::new();
    let x = b.constant("x", &Tensor::scalar(1.0f32));
    let shape = b.constant("shape", &Tensor::from_slice::<i64>([2], &[1 << 31, 1 << 31]).unwrap());
    b.binary("huge", "Reshape", &x, &shape, DType::F32);
    expect(b.finish(), "huge", Code::InvalidArgument, "huge");
    let mut b = GraphBuilder::new();
    let zeros_shape = b.constant("shape", &Tensor::from_slice::<i64>([2], &[1 << 31, 1 << 31]).unwrap());
    let zero = b.constant("zero", &Tensor::scalar(0.0f32));
    b.binary("filled", "Fill", &zeros_shape, &zero, DType::F32);
    let err = create_session(b.finish(), &SessionOptions { target: target.clone(), ..SessionOptions::default() })
        .and_then(|s| s.run_simple(&[], &["filled"], &[]))
        .unwrap_err();
    assert!(matches!(err.code, Code::InvalidArgument | Code::ResourceExhausted), "{err}");
    assert!(err.message.contains("filled"), "{err}");
    // A feed of the wrong dtype.
    let err = s.run_simple(&[("a", Tensor::scalar(2i32))], &["short"], &[]).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument, "{err}");
    assert!(err.message.contains("'a"), "{err}");
    // Through it all, the server served on.
    assert_eq!(short_step(s.as_ref()).unwrap(), 4.0);
    assert!(threads_and_rss(pid).1 < rss_before + 64 * 1024);
}

#[test]
fn a_soak_of_four_clients_keeps_every_process_flat() {
    let steps: usize = std::env::var("RINGFLOW_SOAK_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let cluster = cluster(2, &[]);
    let pids = [cluster.pid(0).unwrap(), cluster.pid(1).unwrap()];
    let target = cluster.target(0);
    let warm = steps / 10;
    let barrier = Arc::new(std::sync::Barrier::new(5));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (target, barrier) = (target.clone(), barrier.clone());
            std::thread::spawn(move || {
                let s = session_on(&target, graph(1));
                for i in 0..steps {
                    if i == warm {
                        barrier.wait();
                    }
                    let a = (c * steps + i) as f32;
                    let out = s.run_simple(&[("a", Tensor::scalar(a))], &["short"], &[]).unwrap();
                    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 2.0 * a, "client {c} step {i}");
                }
                s.close().unwrap();
            })
        })
        .collect();
    barrier.wait();
    let warmed: Vec<u64> = pids.iter().map(|&p| threads_and_rss(p).1).collect();
    let started = Instant::now();
    for c in clients {
        c.join().unwrap();
    }
    let end: Vec<u64> = pids.iter().map(|&p| threads_and_rss(p).1).collect();
    eprintln!(
        "soak: 4 clients x {steps} steps; after warm-up {:?} s: RSS KiB {warmed:?} -> {end:?}",
        started.elapsed().as_secs_f32()
    );
    for (w, e) in warmed.iter().zip(&end) {
        assert!(*e <= w + 16 * 1024, "RSS grew from {w} to {e} KiB");
    }
}
