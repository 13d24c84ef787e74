//! The shared-memory channel across real processes: a peer killed in the
//! middle of a transfer leaves the survivor erroring, unmapped and serving;
//! an idle channel's reader sleeps without waking.
//!
//! One test in this binary on purpose: it counts this process's mappings of
//! channel regions, which a test running beside it would disturb.

use ringflow::net::message::Method;
use ringflow::net::shm::region::mapped_regions;
use ringflow::net::{Client, Reply, Request, Server, Service, TransportOptions};
use ringflow::tensor::{DType, Tensor};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CHILD_ADDR: &str = "RINGFLOW_SHM_TEST_SERVER";

/// Counts the requests that carried a tensor.
#[derive(Default)]
struct Sink {
    large: AtomicUsize,
}

impl Service for Sink {
    fn handle(&self, request: Request, reply: Reply) {
        if !request.payloads.is_empty() {
            self.large.fetch_add(1, Ordering::AcqRel);
        }
        reply.ok(b"ok", &[]);
    }
}

fn shm_options() -> TransportOptions {
    let mut options = TransportOptions { connect_timeout_ms: 5_000, ..TransportOptions::default() };
    options.shm.enabled = true;
    options.shm.ring_bytes = 64 << 20;
    options
}

/// The child: connects over shared memory and sends 24 MiB tensors until
/// it is killed.
fn run_child(addr: &str) {
    let client = Client::connect(addr, shm_options()).expect("child connects");
    assert!(client.is_shared_memory(), "child fell back to TCP");
    let big = Tensor::zeros(DType::F32, [6 << 20]).unwrap();
    loop {
        let _ = client.call(Method::Ping, b"big", std::slice::from_ref(&big), Instant::now() + Duration::from_secs(30));
    }
}

#[test]
fn a_peer_killed_mid_transfer_leaves_the_survivor_unmapped_and_serving() {
    if let Ok(addr) = std::env::var(CHILD_ADDR) {
        run_child(&addr);
        return;
    }
    if !ringflow::net::shm::enabled_by_env() {
        return; // RINGFLOW_TRANSPORT=tcp: nothing to check here.
    }
    let sink = Arc::new(Sink::default());
    let server = Server::bind("127.0.0.1:0", sink.clone(), shm_options()).unwrap();
    let addr = server.local_addr().to_string();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "a_peer_killed_mid_transfer_leaves_the_survivor_unmapped_and_serving", "--nocapture"])
            .env(CHILD_ADDR, &addr)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let before = sink.large.load(Ordering::Acquire);
        let until = Instant::now() + Duration::from_secs(20);
        while sink.large.load(Ordering::Acquire) < before + 2 + round && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(300));
        }
        assert!(sink.large.load(Ordering::Acquire) >= before + 2, "the child's transfers never arrived");
        assert!(mapped_regions() >= 1, "the server maps the child's region");
        // Killed while it writes its next tensor into the ring.
        child.kill().unwrap();
        child.wait().unwrap();
        // The survivor notices (its socket closed), closes the connection
        // and unmaps the region once the last tensor over it is gone.
        let until = Instant::now() + Duration::from_secs(5);
        while (server.connections() > 0 || mapped_regions() > 0) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.connections(), 0, "round {round}: the dead peer's connection is still open");
        assert_eq!(mapped_regions(), 0, "round {round}: the dead peer's region is still mapped");
        // And serves on, over shared memory again.
        let client = Client::connect(&addr, shm_options()).unwrap();
        assert!(client.is_shared_memory());
        let t = Tensor::from_slice::<f32>([2], &[1.0, 2.0]).unwrap();
        let resp = client.call(Method::Ping, b"x", &[t], Instant::now() + Duration::from_secs(10)).unwrap();
        assert_eq!(resp.meta_bytes(), b"ok");
        drop(client);
        let until = Instant::now() + Duration::from_secs(5);
        while mapped_regions() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    // An idle connection's reader sleeps until a frame or a hang-up: its
    // thread does not wake (a reader polling in 10 ms slices woke ~50
    // times in this half second).
    let client = Client::connect(&addr, shm_options()).unwrap();
    assert!(client.is_shared_memory());
    client.call(Method::Ping, b"x", &[], Instant::now() + Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let (threads, before) = connection_thread_wakeups();
    assert!(threads >= 1, "no rf-conn thread found to watch");
    std::thread::sleep(Duration::from_millis(500));
    let woke = connection_thread_wakeups().1 - before;
    assert!(woke <= 5, "an idle shared-memory connection's reader woke {woke} times in 0.5 s");
    drop(client);

    server.shutdown();
    assert_eq!(mapped_regions(), 0);
}

/// How many connection threads (the server's readers) this process has,
/// and their voluntary context switches, summed.
fn connection_thread_wakeups() -> (usize, u64) {
    let (mut threads, mut total) = (0, 0);
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("rf-conn") {
            continue;
        }
        threads += 1;
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    (threads, total)
}
