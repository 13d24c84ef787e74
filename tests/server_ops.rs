//! Operating a server: `ringflow stats` and `/metrics` against a real
//! server process after a few steps (the counts are the steps taken), and
//! `ringflow cluster show` deriving a cluster from Slurm's environment.

use ringflow::DType;
use ringflow::Tensor;
use ringflow::cli::bench_remote::trivial_remote_graph;
use ringflow::graph::builder::GraphBuilder;
use ringflow::session::{RunOptions, SessionOptions, create_session};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ringflow"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A one-task server with `/metrics`, killed when dropped.
struct ServerProcess {
    child: Child,
    address: String,
    metrics: String,
}

impl ServerProcess {
    fn start() -> ServerProcess {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("cluster.toml");
        let address = format!("127.0.0.1:{}", free_port());
        std::fs::write(&spec, format!("[cluster]\nworker = [\"{address}\"]\n")).unwrap();
        let mut child = Command::new(binary())
            .args(["server", "--job", "worker", "--task", "0", "--metrics-port", "0", "--exit-on-stdin-eof"])
            .arg("--cluster")
            .arg(&spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let metrics = loop {
            let line = lines_rx.recv_timeout(Duration::from_secs(20)).expect("the server prints its metrics address");
            if let Some(rest) = line.split_once("metrics on http://") {
                break rest.1.trim_end_matches("/metrics").to_string();
            }
        };
        ServerProcess { child, address, metrics }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stats_json(address: &str) -> serde_json::Value {
    let out = Command::new(binary())
        .args(["stats", "--json", "--target", &format!("ringflow://{address}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Parses Prometheus text: `name{labels} value` per sample line, keyed by
/// `name{labels}`; every sample's metric has a TYPE line.
fn scrape(address: &str) -> HashMap<String, f64> {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    let typed: Vec<&str> =
        body.lines().filter_map(|l| l.strip_prefix("# TYPE ")).map(|l| l.split(' ').next().unwrap()).collect();
    let mut samples = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
        let name = series.split('{').next().unwrap();
        let family = name.strip_suffix("_sum").or_else(|| name.strip_suffix("_count")).unwrap_or(name);
        assert!(typed.contains(&family), "{name} has no TYPE line");
        samples.insert(series.to_string(), value.parse::<f64>().unwrap_or_else(|_| panic!("bad value: {line}")));
    }
    samples
}

#[test]
fn stats_and_metrics_count_a_live_servers_steps() {
    let server = ServerProcess::start();
    let target = format!("ringflow://{}", server.address);
    let fresh = stats_json(&server.address);
    assert_eq!(fresh["steps"], 0);
    assert_eq!(fresh["task"], "/job:worker/replica:0/task:0");

    let mut b = GraphBuilder::new();
    let x = b.placeholder("x", DType::F32);
    let one = b.constant("one", &Tensor::scalar(1.0f32));
    b.binary("y", "AddV2", &x, &one, DType::F32);
    let session = create_session(b.finish(), &SessionOptions { target, ..SessionOptions::default() }).unwrap();
    let handle = session.make_callable(&["x".to_string()], &["y".to_string()], &[]).unwrap();
    for i in 0..5 {
        let (out, _) = session.run_callable(handle, vec![Tensor::scalar(i as f32)], &RunOptions::default()).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[i as f32 + 1.0]);
    }
    // A step that fails: no such callable.
    assert!(session.run_callable(handle + 1000, vec![Tensor::scalar(0.0f32)], &RunOptions::default()).is_err());

    let stats = stats_json(&server.address);
    assert_eq!(stats["steps"], 6, "{stats}");
    assert_eq!(stats["step_errors"], 1, "{stats}");
    assert_eq!(stats["graph_runs"], 5, "{stats}");
    assert_eq!(stats["graph_run_errors"], 0, "{stats}");
    assert_eq!(stats["master_sessions"], 1, "{stats}");
    assert_eq!(stats["sessions_created"], 1, "{stats}");
    assert_eq!(stats["step_latency"]["count"], 6, "{stats}");
    let latency = &stats["step_latency"];
    let (p50, p99, max) =
        (latency["p50_ns"].as_u64().unwrap(), latency["p99_ns"].as_u64().unwrap(), latency["max_ns"].as_u64().unwrap());
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{latency}");
    assert!(stats["bytes_sent"].as_u64().unwrap() > 0 && stats["bytes_received"].as_u64().unwrap() > 0, "{stats}");

    let metrics = scrape(&server.metrics);
    let task = "task=\"/job:worker/replica:0/task:0\"";
    assert_eq!(metrics[&format!("ringflow_steps_total{{{task}}}")], 6.0);
    assert_eq!(metrics[&format!("ringflow_step_errors_total{{{task}}}")], 1.0);
    assert_eq!(metrics[&format!("ringflow_graph_runs_total{{{task}}}")], 5.0);
    assert_eq!(metrics[&format!("ringflow_master_sessions{{{task}}}")], 1.0);
    assert_eq!(metrics[&format!("ringflow_step_latency_seconds_count{{{task}}}")], 6.0);
    let median = metrics[&format!("ringflow_step_latency_seconds{{{task},quantile=\"0.5\"}}")];
    assert!((median - p50 as f64 / 1e9).abs() < 1e-9, "{median} s against {p50} ns");
    assert!(metrics[&format!("ringflow_sent_bytes_total{{{task}}}")] > 0.0);

    session.close().unwrap();
    let closed = ringflow::cli::stats_cmd::fetch(&format!("ringflow://{}", server.address)).unwrap();
    assert_eq!(closed.master_sessions, 0);
    assert_eq!(closed.steps, 6);
}

#[test]
fn a_two_task_step_counts_a_graph_run_on_each_task() {
    let cluster = ringflow::server::local_cluster::LocalCluster::start(binary(), 2, &Default::default()).unwrap();
    let session = create_session(
        trivial_remote_graph(),
        &SessionOptions { target: cluster.target(0), ..SessionOptions::default() },
    )
    .unwrap();
    let handle = session.make_callable(&["x".to_string()], &["y".to_string()], &[]).unwrap();
    for _ in 0..3 {
        session.run_callable(handle, vec![Tensor::scalar(1.0f32)], &RunOptions::default()).unwrap();
    }
    let master = ringflow::cli::stats_cmd::fetch(&cluster.target(0)).unwrap();
    let other = ringflow::cli::stats_cmd::fetch(&cluster.target(1)).unwrap();
    assert_eq!((master.steps, other.steps), (3, 0));
    assert_eq!(other.graph_runs, 3, "{other:?}");
    assert!(other.bytes_received > 0 && other.bytes_sent > 0);
    session.close().unwrap();
}

fn cluster_show(env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut command = Command::new(binary());
    command.args(["cluster", "show"]).args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("SLURM_") || name == "TF_CONFIG" {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn cluster_show_derives_slurm_clusters_and_names_bad_variables() {
    let slurm = [
        ("SLURM_JOB_NODELIST", "node[01-02],gpu-[1-2]-ib"),
        ("SLURM_TASKS_PER_NODE", "2(x3),1"),
        ("SLURM_NTASKS", "7"),
        ("SLURM_PROCID", "6"),
        ("SLURM_LOCALID", "0"),
    ];
    let out = cluster_show(&slurm, &["--from", "slurm", "--base-port", "7000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "worker = [\"node01:7000\", \"node01:7001\", \"node02:7000\", \"node02:7001\", \"gpu-1-ib:7000\", \"gpu-1-ib:7001\", \"gpu-2-ib:7000\"]"
        ),
        "{text}"
    );
    assert!(text.contains("# this task: /job:worker/replica:0/task:6 at gpu-2-ib:7000"), "{text}");
    // What it prints is a spec file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("derived.toml");
    std::fs::write(&file, &text).unwrap();
    let again = cluster_show(&[], &["--cluster", file.to_str().unwrap(), "--job", "worker", "--task", "2"]);
    assert!(
        String::from_utf8(again.stdout).unwrap().contains("# this task: /job:worker/replica:0/task:2 at node02:7000")
    );

    let mut bad = slurm;
    bad[1] = ("SLURM_TASKS_PER_NODE", "2(x3");
    let out = cluster_show(&bad, &["--from", "slurm"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("SLURM_TASKS_PER_NODE='2(x3'"), "{err}");
    let out = cluster_show(&[], &["--from", "slurm"]);
    assert!(String::from_utf8(out.stderr).unwrap().contains("SLURM_JOB_NODELIST"));
    let out = cluster_show(&[], &["--from", "pbs"]);
    assert!(String::from_utf8(out.stderr).unwrap().contains("--cluster-from 'pbs'"));
}

#[test]
fn server_refuses_a_bad_cpu_list_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("cluster.toml");
    std::fs::write(&spec, format!("[cluster]\nworker = [\"127.0.0.1:{}\"]\n", free_port())).unwrap();
    for (cpus, expected) in [("0-3x", "--cpus '0-3x'"), ("4095", "CPU 4095")] {
        let out = Command::new(binary())
            .args(["server", "--job", "worker", "--task", "0", "--cpus", cpus, "--cluster"])
            .arg(&spec)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(expected), "{cpus}: {err}");
    }
}
