//! Criterion benches of the hand-offs a step is made of: a `_Send` meeting
//! its `_Recv` in the local rendezvous (value first, and receiver first),
//! a job handed to a device pool and seen done (thread spinning, and
//! thread parked: the wake-up), and a 64-byte native RPC round trip over
//! loopback TCP within one process. `ringflow bench pingpong` reports the
//! round trip across processes against a raw baseline; these are for
//! criterion's regression tracking. Under `cargo test` each runs once.

use criterion::{Criterion, criterion_group, criterion_main};
use ringflow::Tensor;
use ringflow::executor::{LocalRendezvous, PoolOptions, Rendezvous, RendezvousKey, ThreadPool};
use ringflow::net::{Client, Method, Reply, Request, Server, Service, TransportOptions};
use ringflow::ops::Value;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn key() -> RendezvousKey {
    RendezvousKey::parse(
        "/job:worker/replica:0/task:0/device:CPU:0;00000000000000ff;/job:worker/replica:0/task:1/device:CPU:0;edge_7_y_0;0:0",
    )
    .expect("a valid rendezvous key")
}

fn rendezvous(c: &mut Criterion) {
    let key = key();
    let value = Tensor::scalar(1.0f32);
    let table = LocalRendezvous::new();
    let mut group = c.benchmark_group("rendezvous_local");
    group.bench_function("send_then_recv", |b| {
        b.iter(|| {
            table.send(&key, Value::Tensor(value.clone())).unwrap();
            table.recv_async(&key, Box::new(|v| drop(black_box(v))));
        })
    });
    group.bench_function("recv_then_send", |b| {
        b.iter(|| {
            table.recv_async(&key, Box::new(|v| drop(black_box(v))));
            table.send(&key, Value::Tensor(value.clone())).unwrap();
        })
    });
    group.finish();
}

/// Hands one job to a 1-thread pool and spins until it has run.
fn handoff(pool: &ThreadPool, done: &Arc<AtomicU64>, round: u64) {
    let flag = done.clone();
    pool.spawn(move || flag.store(round, Ordering::Release));
    while done.load(Ordering::Acquire) != round {
        std::hint::spin_loop();
    }
}

fn pool_wakeup(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool_handoff");
    // Spinning: the job arrives within the idle thread's spin window.
    // Parked: the thread sleeps (no spin, and a pause longer than any
    // spin before each hand-off), so each costs a futex wake-up.
    for (name, spin, pause) in [
        ("thread_spinning", Duration::from_millis(50), Duration::ZERO),
        ("thread_parked", Duration::ZERO, Duration::from_micros(200)),
    ] {
        let pool = ThreadPool::new(PoolOptions { name: name.into(), threads: 1, spin, ..PoolOptions::default() })
            .expect("a pool thread starts");
        let done = Arc::new(AtomicU64::new(0));
        let mut round = 0;
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                    round += 1;
                    let start = Instant::now();
                    handoff(&pool, &done, round);
                    total += start.elapsed();
                }
                total
            })
        });
        pool.shutdown();
    }
    group.finish();
}

struct Echo;

impl Service for Echo {
    fn handle(&self, request: Request, reply: Reply) {
        reply.ok(request.meta_bytes(), &request.payloads);
    }
}

fn loopback_round_trip(c: &mut Criterion) {
    let options = TransportOptions { name: "bench".into(), ..TransportOptions::default() };
    let server = Server::bind("127.0.0.1:0", Arc::new(Echo), options.clone()).expect("loopback server");
    let client = Client::connect(&server.local_addr().to_string(), options).expect("loopback client");
    let message = [7u8; 64];
    c.bench_function("rpc_loopback_round_trip_64B", |b| {
        b.iter(|| {
            let response = client.call(Method::Ping, &message, &[], Instant::now() + Duration::from_secs(10)).unwrap();
            black_box(response.meta_bytes().len())
        })
    });
    drop(client);
    server.shutdown();
}

criterion_group!(benches, rendezvous, pool_wakeup, loopback_round_trip);
criterion_main!(benches);
