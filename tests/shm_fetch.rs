//! A client killed while a server writes its fetched tensors straight into
//! the client's ring: the server errors that answer, unmaps the region and
//! serves on.
//!
//! One test in this binary on purpose: it counts this process's mappings of
//! channel regions, which a test running beside it would disturb.

use ringflow::cluster::{ClusterSpec, TaskId};
use ringflow::graph::GraphSpec;
use ringflow::graph::builder::GraphBuilder;
use ringflow::net::shm::region::mapped_regions;
use ringflow::server::{Server, ServerOptions};
use ringflow::session::{SessionExt, SessionOptions, create_session};
use ringflow::tensor::{DType, Tensor};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_TARGET: &str = "RINGFLOW_SHM_FETCH_TEST_TARGET";
const ELEMENTS: i32 = 4 << 20; // 16 MiB of f32

/// `big = Fill([ELEMENTS], x)` and `half = Fill([ELEMENTS / 2], x)` on
/// the one task.
fn graph() -> GraphSpec {
    let mut b = GraphBuilder::new();
    b.set_device("/job:worker/task:0");
    let dims = b.constant("dims", &Tensor::from_slice::<i32>([1], &[ELEMENTS]).unwrap());
    let half_dims = b.constant("half_dims", &Tensor::from_slice::<i32>([1], &[ELEMENTS / 2]).unwrap());
    let x = b.placeholder("x", DType::F32);
    b.binary("big", "Fill", &dims, &x, DType::F32);
    b.binary("half", "Fill", &half_dims, &x, DType::F32);
    b.finish()
}

/// The child: fetches `big`, and every other step `half` with it (one
/// answer over two spans), until it is killed.
fn run_child(target: &str) {
    let session =
        create_session(graph(), &SessionOptions { target: target.to_string(), ..SessionOptions::default() }).unwrap();
    for step in 0u32.. {
        let v = (step % 1000) as f32;
        let fetches: &[&str] = if step % 2 == 0 { &["big"] } else { &["big", "half"] };
        let got = session.run_simple(&[("x", Tensor::scalar(v))], fetches, &[]).unwrap();
        assert_eq!(got.len(), fetches.len());
        for tensor in &got {
            assert!(tensor.as_slice::<f32>().unwrap().iter().all(|&e| e == v));
        }
    }
}

/// This test binary again, as the child fetching from `target` (its
/// stderr piped, to tell why it stopped).
fn spawn_child(target: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_client_killed_while_its_fetches_are_written_in_place_leaves_the_server_unmapped_and_serving",
            "--nocapture",
        ])
        .env(CHILD_TARGET, target)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn start_server() -> Server {
    for attempt in 1.. {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let spec = ClusterSpec::workers(vec![format!("127.0.0.1:{port}")]);
        match Server::start(ServerOptions::new(spec, TaskId { job: "worker".into(), index: 0 })) {
            Ok(server) => return server,
            Err(e) if attempt < 5 && e.message.contains("already in use") => continue,
            Err(e) => panic!("server on port {port}: {e}"),
        }
    }
    unreachable!("the loop returns or panics")
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while !done() {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[test]
fn a_client_killed_while_its_fetches_are_written_in_place_leaves_the_server_unmapped_and_serving() {
    if let Ok(target) = std::env::var(CHILD_TARGET) {
        run_child(&target);
        return;
    }
    if !ringflow::net::shm::enabled_by_env() || !ringflow::net::shm::write_in_place_by_env() {
        return; // RINGFLOW_TRANSPORT=tcp or RINGFLOW_SHM_IN_PLACE=0: nothing is placed.
    }
    let server = start_server();
    let target = format!("ringflow://{}", server.address());
    let placed = || ringflow::counters::snapshot().shm_frames_in_place;
    for round in 0..3 {
        let mut child = spawn_child(&target);
        let before = placed();
        let answered = wait_until(Duration::from_secs(20), || placed() >= before + 3 + round);
        if !answered {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "round {round}: the child's fetches were not answered in place: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert!(mapped_regions() >= 1, "the server maps the child's region");
        // Killed while Fill writes into its ring, or while the answer
        // crosses, or while it checks the values.
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = wait_until(Duration::from_secs(5), || server.connections() == 0 && mapped_regions() == 0);
        assert!(
            gone,
            "round {round}: {} connections and {} region mappings remain after the client died",
            server.connections(),
            mapped_regions()
        );
    }
    // And serves on: a fresh child fetches right values, in place again.
    let mut child = spawn_child(&target);
    let before = placed();
    let answered = wait_until(Duration::from_secs(20), || placed() >= before + 2);
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(still_running, "the last child stopped early: {}", String::from_utf8_lossy(&output.stderr));
    assert!(answered, "the server no longer answers fetches in place");
    server.shutdown();
    assert!(wait_until(Duration::from_secs(5), || mapped_regions() == 0), "regions still mapped after shutdown");
}
