//! Two real processes on loopback: the ringflow binary serves (its hidden
//! bench peer, an echo service) over one transport, this test calls it over
//! the other. io_uring and the socket fallback speak the same bytes.

use ringflow::net::io::{TransportKind, select_driver};
use ringflow::net::{Client, Method, TransportOptions};
use ringflow::tensor::{DType, Tensor};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Peer {
    child: Child,
    addr: String,
}

impl Peer {
    fn spawn(transport: &str) -> Peer {
        Self::spawn_with(transport, &[], Stdio::inherit())
    }

    fn spawn_with(transport: &str, env: &[(&str, &str)], stderr: Stdio) -> Peer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringflow"))
            .args(["__net-peer", "rpc", &format!("--transport={transport}"), "--spin-us=10"])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn ringflow peer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("READY ").expect("READY line").to_string();
        Peer { child, addr }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.child.stdin.take()); // the peer exits when stdin closes
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "peer exited with {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("peer did not shut down within 10 s");
    }
}

fn tensors() -> Vec<Tensor> {
    vec![
        Tensor::from_slice::<f32>([2, 2], &[1.0, -2.5, f32::NAN, 0.0]).unwrap(),
        Tensor::from_slice::<i64>([3], &[i64::MIN, 0, i64::MAX]).unwrap(),
        Tensor::from_slice::<bool>([2], &[true, false]).unwrap(),
        Tensor::zeros(DType::F64, [0, 3]).unwrap(),
        Tensor::build::<i32>([1 << 20], |s| s.iter_mut().enumerate().for_each(|(i, v)| *v = i as i32 ^ 0x5a5a))
            .unwrap(),
    ]
}

#[test]
fn io_uring_and_socket_processes_interoperate() {
    let uring = select_driver(TransportKind::Uring).is_ok();
    let mut pairs = vec![("socket", TransportKind::Socket)];
    if uring {
        pairs.push(("socket", TransportKind::Uring));
        pairs.push(("uring", TransportKind::Socket));
        pairs.push(("uring", TransportKind::Uring));
    } else {
        eprintln!("io_uring unavailable here: only socket<->socket is checked");
    }
    let sent = tensors();
    for (server, client_kind) in pairs {
        let peer = Peer::spawn(server);
        let client = Client::connect(
            &peer.addr,
            TransportOptions { transport: client_kind, spin_us: 10, ..TransportOptions::default() },
        )
        .unwrap();
        for round in 0..3u8 {
            let meta = [b'e', b'c', b'h', b'o', round];
            let resp = client
                .call(Method::Ping, &meta, &sent, Instant::now() + Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("server {server}, client {client_kind:?}: {e}"));
            assert_eq!(resp.meta_bytes(), &meta);
            assert_eq!(resp.payloads.len(), sent.len());
            for (got, want) in resp.payloads.iter().zip(&sent) {
                assert!(got.bit_eq(want), "server {server}, client {client_kind:?}");
                assert!(resp.frame().expect("a frame with payloads").buffer().contains(got.data_ptr()));
            }
        }
    }
}

#[test]
fn without_io_uring_the_fallback_is_chosen_and_logged() {
    // RINGFLOW_NO_URING makes the probe fail as a seccomp-blocked
    // io_uring_setup would; `auto` must fall back and say so.
    let mut peer = Peer::spawn_with("auto", &[("RINGFLOW_NO_URING", "1")], Stdio::piped());
    let client = Client::connect(&peer.addr, TransportOptions::default()).unwrap();
    let resp = client.call(Method::Ping, b"hi", &[], Instant::now() + Duration::from_secs(30)).unwrap();
    assert_eq!(resp.meta_bytes(), b"hi");
    drop(resp);
    drop(client);
    let mut stderr = peer.child.stderr.take().unwrap();
    drop(peer); // waits for the peer to exit
    let mut log = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut log).unwrap();
    assert!(log.contains("io_uring unavailable") && log.contains("socket fallback"), "peer log: {log}");
}
