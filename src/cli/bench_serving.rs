//! `ringflow bench serving DIR --feed KEY=F.npy ...`: a SavedModel served
//! as TensorFlow Serving serves it, timed from a client: `ringflow serve`
//! runs as a child process with the model as version 1, and this process
//! calls its signature over TensorFlow Serving's gRPC `Predict` (one HTTP/2
//! connection) and its REST API (one keep-alive HTTP/1.1 connection,
//! columnar JSON), taking turns in blocks with the same signature called
//! on the model loaded in this process: the step with no wire at all,
//! measured in the same run.
//!
//! Owns: the child server, the two clients and the figures. Must not
//! parse the command line beyond its own arguments.

use super::bench_graph::GraphBenchArgs;
use super::run::parse_feed;
use crate::bench::{self, Figure, LatencyRecorder};
use crate::error::{Result, Status};
use crate::grpc::GrpcChannel;
use crate::grpc::proto::serving as tfs;
use crate::grpc::tensor_proto::tensor_to_proto;
use crate::server::local_cluster::current_binary;
use crate::session::SessionOptions;
use crate::session::saved_model::{DEFAULT_SIGNATURE, LoadedModel, default_tags};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Timed calls of each kind when `--steps` is not given.
const DEFAULT_STEPS: usize = 1_000;
/// The three kinds of call take turns in blocks of at most this many.
const TURN_BLOCK: usize = 200;
/// Each call's deadline, and the server's time to start.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The model server child, killed when dropped.
struct ServeChild(Child);

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A temporary model base path (the model linked in as version 1),
/// removed when dropped.
struct ModelBase(std::path::PathBuf);

impl ModelBase {
    fn new(dir: &Path) -> Result<ModelBase> {
        let path = std::env::temp_dir().join(format!("ringflow-bench-serving-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| {
            Status::internal(format!("bench serving: creating {} for {}: {e}", path.display(), dir.display()))
        })?;
        Ok(ModelBase(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ModelBase {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `ringflow serve` on `base` (model `m`) and waits for its REST line.
fn start_server(base: &Path, port: u16, rest_port: u16) -> Result<ServeChild> {
    let mut child = Command::new(current_binary()?)
        .arg("serve")
        .arg("--exit-on-stdin-eof")
        .arg(format!("--port={port}"))
        .arg(format!("--rest_api_port={rest_port}"))
        .arg("--model_name=m")
        .arg(format!("--model_base_path={}", base.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Status::unavailable(format!("bench serving: starting the server: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| Status::internal("bench serving: no server stdout"))?;
    let server = ServeChild(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
            if line.contains("REST API on") && tx.send(()).is_err() {
                break;
            }
        }
    });
    rx.recv_timeout(CALL_TIMEOUT).map_err(|_| {
        Status::unavailable("bench serving: the server did not start serving the model (see its log above)")
    })?;
    Ok(server)
}

/// One keep-alive HTTP/1.1 connection posting the same body.
struct RestClient {
    stream: TcpStream,
    request: Vec<u8>,
    buffer: Vec<u8>,
}

impl RestClient {
    fn connect(address: &str, path: &str, body: &str) -> Result<RestClient> {
        let stream = TcpStream::connect(address)
            .map_err(|e| Status::unavailable(format!("bench serving: connecting to {address}: {e}")))?;
        stream.set_read_timeout(Some(CALL_TIMEOUT)).map_err(|e| Status::internal(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes();
        Ok(RestClient { stream, request, buffer: Vec::with_capacity(64 << 10) })
    }

    /// Posts once and reads the whole answer; an answer other than 200 fails.
    fn call(&mut self) -> Result<()> {
        let io = |e: std::io::Error| Status::unavailable(format!("bench serving: REST call: {e}"));
        self.stream.write_all(&self.request).map_err(io)?;
        self.buffer.clear();
        let mut chunk = [0u8; 16 << 10];
        let (head_end, length) = loop {
            let n = self.stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err(Status::unavailable("bench serving: the REST server closed the connection"));
            }
            self.buffer.extend_from_slice(&chunk[..n]);
            if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buffer[..end]).to_ascii_lowercase();
                if !head.starts_with("http/1.1 200") {
                    return Err(Status::internal(format!(
                        "bench serving: REST answered {}",
                        String::from_utf8_lossy(&self.buffer)
                    )));
                }
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                    .ok_or_else(|| Status::internal("bench serving: REST answer without Content-Length"))?;
                break (end + 4, length);
            }
        };
        while self.buffer.len() < head_end + length {
            let n = self.stream.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err(Status::unavailable("bench serving: the REST answer was cut short"));
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    }
}

/// Runs `bench serving DIR` and returns its figures.
pub fn bench_serving(dir: &Path, args: &GraphBenchArgs) -> Result<Vec<Figure>> {
    if !dir.join("saved_model.pb").is_file() {
        return Err(Status::invalid_argument(format!(
            "bench serving: {} is not a SavedModel directory (no saved_model.pb)",
            dir.display()
        )));
    }
    if args.target.is_some() || args.local_cluster.is_some() || !args.targets.is_empty() {
        return Err(Status::invalid_argument("bench serving: --target, --local-cluster and --op are for bench graph"));
    }
    let steps = args.steps.unwrap_or(DEFAULT_STEPS);
    if steps == 0 {
        return Err(Status::invalid_argument("bench serving: --steps must be at least 1"));
    }
    let signature = args.signature.clone().unwrap_or_else(|| DEFAULT_SIGNATURE.to_string());
    let tags = if args.tags.is_empty() { default_tags() } else { args.tags.clone() };
    if tags != default_tags() {
        return Err(Status::invalid_argument(
            "bench serving: the server loads the 'serve' meta graph; --tag is for bench graph",
        ));
    }
    let feeds = args.feeds.iter().map(|f| parse_feed(f)).collect::<Result<Vec<_>>>()?;
    let dir = dir.canonicalize().map_err(|e| Status::not_found(format!("{}: {e}", dir.display())))?;

    // In this process: the baseline, and a check that the signature takes these feeds.
    let model = LoadedModel::load(&dir, &tags, &SessionOptions::default())?;
    model.resolve(&signature, feeds.clone(), &args.fetches)?;

    let base = ModelBase::new(&dir)?;
    std::os::unix::fs::symlink(&dir, base.path().join("1"))
        .map_err(|e| Status::internal(format!("bench serving: linking the model as version 1: {e}")))?;
    let ports = crate::server::local_cluster::free_ports(2)?;
    let (port, rest_port) = (ports[0], ports[1]);
    let server = start_server(base.path(), port, rest_port)?;

    let channel = GrpcChannel::connect(&format!("127.0.0.1:{port}"))?;
    let request = tfs::PredictRequest {
        model_spec: Some(tfs::ModelSpec { name: "m".into(), signature_name: signature.clone(), ..Default::default() }),
        inputs: feeds.iter().map(|(k, t)| Ok((k.clone(), tensor_to_proto(t)?))).collect::<Result<_>>()?,
        output_filter: args.fetches.clone(),
    };
    let body = crate::serving::json::columnar_request(&signature, &feeds)?;
    let mut rest = RestClient::connect(&format!("127.0.0.1:{rest_port}"), "/v1/models/m:predict", &body)?;

    let timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<Duration> {
        let start = Instant::now();
        f()?;
        Ok(start.elapsed())
    };
    let block = steps.min(TURN_BLOCK);
    let turns = bench::Turns { iterations: steps, block, settle: Duration::from_millis(1), warmup: Duration::ZERO };
    let started = Instant::now();
    let [local, grpc, http]: [LatencyRecorder; 3] = bench::interleaved(
        [
            &mut || {
                timed(&mut || {
                    model.run(&signature, feeds.clone(), &args.fetches).map(|out| drop(std::hint::black_box(out)))
                })
            },
            &mut || {
                timed(&mut || {
                    channel
                        .call_service::<_, tfs::PredictResponse>(
                            crate::grpc::prediction_service::PREDICTION_SERVICE,
                            "Predict",
                            &request,
                            CALL_TIMEOUT,
                        )
                        .map(|out| drop(std::hint::black_box(out)))
                })
            },
            &mut || timed(&mut || rest.call()),
        ],
        turns,
    )?;
    let elapsed = started.elapsed();
    drop(server);
    model.close()?;

    let note = |how: &str| {
        format!(
            "{} signature '{signature}' served by `ringflow serve` (a child process) and called {how} from one client thread, \
             {steps} calls; baseline: the same signature called on the model loaded in this process, taking turns in blocks \
             of {block} ({:.1} s in all)",
            dir.display(),
            elapsed.as_secs_f64()
        )
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut figures = Vec::new();
    for (kind, recorder, how) in [
        ("grpc", &grpc, "over TensorFlow Serving's gRPC Predict (one HTTP/2 connection)"),
        ("rest", &http, "over its REST API (columnar JSON, one keep-alive connection)"),
    ] {
        for (metric, p) in [("p50", 50.0), ("p99", 99.0)] {
            figures.push(
                Figure::new("serving", &format!("{metric}_{kind}"), recorder.percentile_us(p), "us", threads)
                    .with_baseline(local.percentile_us(p))
                    .with_note(note(how)),
            );
        }
    }
    Ok(figures)
}
