//! The one binary's commands: `run`, `verify`, `bench`, `demo` (and, with
//! the distributed runtime, `server` and `devices`), plus the hidden
//! `__net-peer` the transport benchmarks start as their other process.
//!
//! Owns: argument parsing (clap) and the commands' output. Each command's
//! work lives in its own file; this one only dispatches.

pub mod bench_graph;
pub mod bench_inproc;
pub mod bench_remote;
pub mod bench_serving;
pub mod cluster_cmd;
pub mod demo;
pub mod demo_train;
pub mod inspect;
pub mod progress;
pub mod run;
pub mod server_cmd;
pub mod stats_cmd;
pub mod trace_file;
pub mod verify;

use crate::bench::{Figure, STEAL_WARN_PCT, print_figures};
use crate::error::{Result, Status};
use crate::host::CpuTimes;
use crate::net::bench::{self as net_bench, PeerArgs};
use crate::net::io::TransportKind;
use crate::session::{SessionOptions, create_session};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "ringflow", version, about = "A distributed dataflow-graph runtime, rebuilt for latency")]
pub struct Cli {
    /// File holding the cluster secret every connection must prove (both
    /// ends; default: $RINGFLOW_SECRET_FILE). Without one, anyone who
    /// reaches a server's port may use it.
    #[arg(long, global = true, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one step of a GraphDef, or one signature of a SavedModel, and
    /// print (or write) the fetches.
    Run {
        /// Binary GraphDef (.pb).
        #[arg(long, required_unless_present = "saved_model", conflicts_with = "saved_model")]
        graph: Option<PathBuf>,
        /// SavedModel directory: its variables are restored and its init op
        /// run, then `--signature` runs with feeds and fetches named by key.
        #[arg(long, value_name = "DIR")]
        saved_model: Option<PathBuf>,
        /// SavedModel: the meta graph's tags (repeatable; default: serve).
        #[arg(long = "tag", requires = "saved_model")]
        tags: Vec<String>,
        /// SavedModel: the signature to run.
        #[arg(long, default_value = "serving_default", requires = "saved_model")]
        signature: String,
        /// NAME=FILE.npy, e.g. x:0=feeds/x.npy; with --saved-model, KEY=FILE.npy
        /// for each input key of the signature (repeatable).
        #[arg(long = "feed")]
        feeds: Vec<String>,
        /// Tensor to fetch, e.g. y:0; with --saved-model an output key
        /// (default: every output) (repeatable).
        #[arg(long = "fetch")]
        fetches: Vec<String>,
        /// Op to run as a target, e.g. init (repeatable; not with --saved-model).
        #[arg(long = "op", conflicts_with = "saved_model")]
        targets: Vec<String>,
        /// Write each fetch as DIR/NAME.npy instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Session target ("" = in process).
        #[arg(long, default_value = "")]
        target: String,
        /// Also print the step's per-node timings (start, duration, thread,
        /// device, op, node) after the outputs.
        #[arg(long)]
        trace: bool,
        /// Write the step's timeline (every task, node and transfer) as
        /// Chrome trace-event JSON, for Perfetto or chrome://tracing.
        #[arg(long, value_name = "FILE.json")]
        trace_file: Option<PathBuf>,
    },
    /// List a GraphDef's ops (with counts), the ones this runtime lacks,
    /// pinned devices, placeholders and likely outputs; exits 0 only if
    /// everything in it is supported.
    Inspect {
        /// Binary GraphDef (.pb).
        graph: PathBuf,
    },
    /// Print every op this runtime runs, one per line.
    Ops,
    /// Check golden case directories (graph.pb or a SavedModel, + case.json) against their
    /// expected outputs; exits 0 only if all pass.
    Verify {
        /// Session target: "" (in process), ringflow://host:port or grpc://host:port.
        #[arg(long, default_value = "", conflicts_with = "local_cluster")]
        target: String,
        /// Start N worker tasks (/job:worker/task:0..N-1), or the jobs
        /// listed (ps=1,worker=2), as child processes on loopback and run
        /// the cases through a session on worker task 0.
        #[arg(long, value_name = "N|JOB=N,...")]
        local_cluster: Option<String>,
        /// Case directories.
        #[arg(required = true)]
        cases: Vec<PathBuf>,
        /// Trace every step of every case into one Chrome trace-event JSON file.
        #[arg(long, value_name = "FILE.json")]
        trace_file: Option<PathBuf>,
    },
    /// Serve one task of a cluster (MasterService and WorkerService on one port).
    Server {
        /// Cluster spec file (TOML: a cluster table of job = ["host:port", ...]).
        #[arg(long)]
        cluster: Option<PathBuf>,
        /// Read the cluster (and possibly the task) from $TF_CONFIG.
        #[arg(long)]
        tf_config: bool,
        /// This task's job name.
        #[arg(long)]
        job: Option<String>,
        /// This task's index in its job.
        #[arg(long)]
        task: Option<u32>,
        /// both (default), master or worker.
        #[arg(long, default_value = "both")]
        role: String,
        /// CPU devices this task offers.
        #[arg(long, default_value_t = 1)]
        cpu_devices: usize,
        /// Threads per device pool (default: all cores).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Bind this address instead of the task's address in the spec.
        #[arg(long)]
        listen: Option<String>,
        /// Exit when standard input closes (a launcher's lifeline).
        #[arg(long, hide = true)]
        exit_on_stdin_eof: bool,
        #[command(flatten)]
        limits: server_cmd::LimitArgs,
        /// Derive the cluster and this task from the environment: `slurm`
        /// (SLURM_JOB_NODELIST, SLURM_PROCID, SLURM_LOCALID, ...).
        #[arg(long, value_name = "ENV")]
        cluster_from: Option<String>,
        /// With --cluster-from slurm: a node's tasks listen on this port + SLURM_LOCALID.
        #[arg(long)]
        base_port: Option<u16>,
        /// Pin the device pools' threads to these CPUs (e.g. 0-3,8); with
        /// no --threads, one thread per CPU listed.
        #[arg(long, value_name = "LIST")]
        cpus: Option<String>,
        /// Serve Prometheus text on http://HOST:P/metrics (HOST: the bound address's).
        #[arg(long, value_name = "P")]
        metrics_port: Option<u16>,
        /// auto (shared memory with peers on this host, else TCP; kernels
        /// write tensors sent to such a peer straight into its ring),
        /// shm-copy (shared memory, every sent tensor copied into the ring;
        /// also `RINGFLOW_SHM_IN_PLACE=0`) or tcp (never shared memory;
        /// also `RINGFLOW_TRANSPORT=tcp`).
        #[arg(long, default_value = "auto")]
        transport: String,
        /// Make the shared-memory rings this server offers of the host's
        /// reserved huge pages (`vm.nr_hugepages`; regular pages when too
        /// few are free). Also `RINGFLOW_SHM_HUGETLB=1`.
        #[arg(long)]
        shm_hugetlb: bool,
        #[command(flatten)]
        models: server_cmd::ModelArgs,
    },
    /// Serve SavedModels as TensorFlow Serving does (its flags, its gRPC
    /// PredictionService on --port, its REST API on --rest_api_port).
    Serve(server_cmd::ServeArgs),
    /// List the devices of the cluster a master serves.
    Devices {
        /// ringflow://host:port or grpc://host:port of any task.
        #[arg(long)]
        target: String,
    },
    /// Inspect cluster specs.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// A live server's counters: steps, errors, bytes, sessions, step latency.
    Stats {
        /// ringflow://host:port of the server.
        #[arg(long)]
        target: String,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Measure scenarios against raw baselines taken in the same run:
    /// step-inproc, chain, fanout, pingpong, bulk, step-remote, train-step,
    /// transfer-remote, scale; or time any graph's step with
    /// `bench graph G.pb --fetch T [--feed N=F.npy] [--local-cluster N | --target URL]`
    /// (or a SavedModel directory's signature: `bench graph DIR [--signature S] --feed KEY=F.npy`).
    Bench {
        /// Scenarios (default: step-inproc chain fanout pingpong bulk).
        scenarios: Vec<String>,
        /// One JSON object per figure instead of a table.
        #[arg(long)]
        json: bool,
        /// Bulk tensor size (e.g. 64MiB, 2.5GiB).
        #[arg(long)]
        size: Option<String>,
        /// Measured iterations per scenario (default: each scenario's own).
        #[arg(long, alias = "iters")]
        iterations: Option<usize>,
        /// Pool threads for the parallel scenario (default: 2, 4, 8, 16 up to the core count).
        #[arg(long)]
        threads: Option<usize>,
        /// Transports for pingpong/bulk: uring, socket (default: both).
        #[arg(long, value_delimiter = ',')]
        transport: Vec<String>,
        /// Bounded spin before sleeping, microseconds (transport scenarios).
        #[arg(long)]
        spin_us: Option<u64>,
        /// Zero-copy send for frames with at least this many payload bytes
        /// (a size, or `off`).
        #[arg(long)]
        zerocopy_min: Option<String>,
        /// Largest cluster for the scale scenario (2, 4, 8, 16 up to this; default 8).
        #[arg(long)]
        max_tasks: Option<usize>,
        /// Pin threads to cores: fanout's pool threads; pingpong's client
        /// and peer processes to two different cores (raw and ringflow alike);
        /// step-remote over shm: client, task 0 and task 1 each on a core of
        /// its own (given two cores, task 0 alone), both clusters alike.
        #[arg(long)]
        pin_threads: bool,
        /// step-remote: compare with servers run from this binary (another
        /// build) instead of the raw round trip, steps interleaved.
        #[arg(long, value_name = "BINARY")]
        against: Option<std::path::PathBuf>,
        #[command(flatten)]
        graph: bench_graph::GraphBenchArgs,
    },
    /// Run a bundled multi-layer graph and report its outputs and step latency;
    /// with --train, train a bundled model on a ps/worker cluster.
    Demo {
        /// Steps to time (with --train: steps per worker when both train).
        #[arg(long, default_value_t = 3000)]
        steps: usize,
        /// Train: one ps and two workers with between-graph replication,
        /// checked against TensorFlow's losses.
        #[arg(long)]
        train: bool,
        /// Write one traced step (after the timed ones) as Chrome trace-event JSON.
        #[arg(long, value_name = "FILE.json", conflicts_with = "train")]
        trace_file: Option<PathBuf>,
    },
    /// The other process of a transport benchmark (internal).
    #[command(name = "__net-peer", hide = true)]
    NetPeer {
        mode: String,
        #[arg(long, default_value = "auto")]
        transport: String,
        #[arg(long, default_value_t = 64)]
        msg_bytes: usize,
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
        /// Run the whole peer process on this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// `raw-relay`: the echo peer to pass each message on to.
        #[arg(long)]
        next: Option<String>,
        /// Raw modes: yield the core while spinning, as ringflow's waits do.
        #[arg(long)]
        yielding: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClusterAction {
    /// Print the cluster spec (as TOML) and the task a server would derive.
    Show {
        /// Derive from the environment: `slurm`.
        #[arg(long = "from", value_name = "ENV")]
        from: Option<String>,
        /// Read $TF_CONFIG.
        #[arg(long)]
        tf_config: bool,
        /// Cluster spec file (TOML).
        #[arg(long)]
        cluster: Option<PathBuf>,
        #[arg(long)]
        job: Option<String>,
        #[arg(long)]
        task: Option<u32>,
        /// With --from slurm: a node's tasks listen on this port + SLURM_LOCALID.
        #[arg(long)]
        base_port: Option<u16>,
    },
}

/// Parses `64MiB`, `2.5GiB`, `1000`, `16KB` into bytes.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| Status::invalid_argument(format!("'{text}' is not a size")))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => return Err(Status::invalid_argument(format!("unknown size unit '{other}' in '{text}'"))),
    };
    Ok((value * scale as f64).round() as u64)
}

fn parse_transport(text: &str) -> Result<TransportKind> {
    TransportKind::parse(text).ok_or_else(|| Status::invalid_argument(format!("unknown transport '{text}'")))
}

fn exit_code(result: Result<bool>) -> i32 {
    match result {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// Parses arguments, runs the command, returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let secret = match &cli.secret_file {
        Some(path) => crate::net::SecretSetting::from_file(path),
        None => crate::net::SecretSetting::from_env(),
    };
    if let Err(e) = secret.check() {
        return exit_code(Err(e));
    }
    crate::net::SecretSetting::set_process_default(secret);
    exit_code(dispatch(cli.command))
}

fn dispatch(command: Command) -> Result<bool> {
    match command {
        Command::Run {
            graph,
            saved_model,
            tags,
            signature,
            feeds,
            fetches,
            targets,
            out,
            target,
            trace,
            trace_file,
        } => {
            let source = match (graph, saved_model) {
                (Some(graph), _) => run::Source::Graph(graph),
                (None, Some(dir)) => run::Source::SavedModel {
                    dir,
                    tags: if tags.is_empty() { crate::session::saved_model::default_tags() } else { tags },
                    signature,
                },
                (None, None) => return Err(Status::invalid_argument("name --graph or --saved-model")),
            };
            let outcome = run::run(&run::RunArgs {
                source,
                feeds,
                fetches,
                targets,
                out: out.clone(),
                target,
                trace,
                trace_file,
            })?;
            let outputs = &outcome.outputs;
            match out {
                Some(dir) => {
                    for (name, _) in outputs {
                        println!("{name} -> {}", dir.join(run::output_file_name(name)).display());
                    }
                }
                None => {
                    for (name, tensor) in outputs {
                        println!("{name} ({} {}):\n{tensor}", tensor.dtype(), tensor.shape());
                    }
                }
            }
            if trace {
                print!("{}", run::format_trace(&outcome.step_stats));
            }
            Ok(true)
        }
        Command::Ops => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            for name in crate::ops::registry::op_names() {
                // A reader that stopped early (`ringflow ops | head`) is not an error.
                if writeln!(out, "{name}").is_err() {
                    break;
                }
            }
            Ok(true)
        }
        Command::Inspect { graph } => {
            let report = inspect::inspect(&graph)?;
            print!("{}", inspect::format_report(&graph, &report));
            Ok(report.runnable())
        }
        Command::Verify { target, local_cluster, cases, trace_file } => {
            let cluster = match local_cluster {
                Some(jobs) => Some(crate::server::local_cluster::LocalCluster::start_jobs(
                    &crate::server::local_cluster::current_binary()?,
                    &crate::server::local_cluster::parse_jobs(&jobs)?,
                    &Default::default(),
                )?),
                None => None,
            };
            let target = cluster.as_ref().map_or(target, |c| c.default_target());
            let mut all_passed = true;
            let mut traced = Vec::new();
            let progress = progress::Progress::new(cases.len() as u64, "cases");
            for dir in &cases {
                let name =
                    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
                progress.set_message(name.clone());
                let mut record = |case: &str, step: usize, metadata| {
                    traced.push(trace_file::TracedStep { label: format!("{case} step {step}"), metadata });
                };
                let record: Option<&mut verify::StepRecorder<'_>> =
                    if trace_file.is_some() { Some(&mut record) } else { None };
                // A case expects fresh state: its session keeps its variables to itself.
                let config = crate::master::SessionConfig { isolate_session_state: true, ..Default::default() };
                let options = SessionOptions { target: target.clone(), config, ..SessionOptions::default() };
                let result = if verify::is_saved_model_case(dir) {
                    verify::SavedModelCase::load(dir).and_then(|case| case.check(&options))
                } else {
                    verify::verify_case_traced(dir, record, &|case| {
                        let needed = case.jobs_needed();
                        let wanted = match needed.as_slice() {
                            [(job, n)] if job == "worker" => n.to_string(),
                            _ => needed.iter().map(|(job, n)| format!("{job}={n}")).collect::<Vec<_>>().join(","),
                        };
                        if target.is_empty() && !needed.is_empty() {
                            return Err(Status::failed_precondition(format!(
                                "the graph pins nodes to tasks of a cluster; run with --local-cluster {wanted} or --target"
                            )));
                        }
                        if let Some(c) = &cluster {
                            if let Some((job, n)) = needed.iter().find(|(job, n)| c.tasks_of(job) < *n) {
                                return Err(Status::failed_precondition(format!(
                                    "the graph pins nodes to {n} tasks of job '{job}'; the local cluster has {} (try --local-cluster {wanted})",
                                    c.tasks_of(job)
                                )));
                            }
                        }
                        create_session(case.graph.clone(), &options)
                    })
                };
                progress.inc(1);
                match result {
                    Ok(()) => progress.println(&format!("PASS {name}")),
                    Err(e) => {
                        all_passed = false;
                        progress.println(&format!("FAIL {name}: {e}"));
                    }
                }
            }
            progress.finish();
            if let Some(path) = &trace_file {
                trace_file::write_trace_file(path, &traced)?;
            }
            Ok(all_passed)
        }
        Command::Bench {
            scenarios,
            json,
            size,
            iterations,
            threads,
            transport,
            spin_us,
            zerocopy_min,
            max_tasks,
            pin_threads,
            against,
            graph,
        } => {
            type PathBench = fn(&std::path::Path, &bench_graph::GraphBenchArgs) -> Result<Vec<crate::bench::Figure>>;
            let path_bench: Option<(PathBench, &str)> = match scenarios.first().map(String::as_str) {
                Some("graph") => Some((
                    bench_graph::bench_graph,
                    "bench graph takes one GraphDef or SavedModel: ringflow bench graph G.pb --fetch T [--feed N=F.npy] ... \
                     or ringflow bench graph DIR [--signature S] --feed KEY=F.npy ...",
                )),
                Some("serving") => Some((
                    bench_serving::bench_serving,
                    "bench serving takes one SavedModel: ringflow bench serving DIR [--signature S] --feed KEY=F.npy ...",
                )),
                _ => None,
            };
            if let Some((run, usage)) = path_bench {
                let [_, path] = scenarios.as_slice() else {
                    return Err(Status::invalid_argument(usage));
                };
                let cpu_before = CpuTimes::now();
                let mut figures = run(std::path::Path::new(path), &graph)?;
                let steal = cpu_before.zip(CpuTimes::now()).and_then(|(b, a)| b.steal_pct_until(&a));
                figures.iter_mut().for_each(|f| f.host_steal_pct = steal);
                print_figures(&figures, json);
                return Ok(true);
            }
            if graph.any() || graph.trace_file.is_some() {
                return Err(Status::invalid_argument(
                    "--feed, --fetch, --op, --target, --local-cluster, --steps, --trace-file, --signature and --tag are for `bench graph G.pb|DIR`",
                ));
            }
            let scenarios = if scenarios.is_empty() {
                [
                    "step-inproc",
                    "chain",
                    "while-loop",
                    "conv",
                    "fanout",
                    "pingpong",
                    "bulk",
                    "step-remote",
                    "train-step",
                    "transfer-remote",
                    "scale",
                ]
                .map(String::from)
                .to_vec()
            } else {
                scenarios
            };
            let inproc = bench_inproc::BenchOptions {
                iters: iterations.unwrap_or(0),
                threads: threads.unwrap_or(0),
                pin: pin_threads,
            };
            let mut net = net_bench::BenchOptions::default();
            if let Some(size) = &size {
                net.bulk_bytes = parse_size(size)?;
                if net.bulk_bytes >= 1 << 30 {
                    net.bulk_iterations = 1; // a multi-GiB tensor crosses once
                }
            }
            if let Some(n) = iterations {
                net.pingpong_iterations = n;
                net.bulk_iterations = n;
            }
            if !transport.is_empty() {
                net.transports = transport.iter().map(|t| parse_transport(t)).collect::<Result<_>>()?;
            }
            if let Some(zc) = zerocopy_min {
                net.zerocopy_send_min_bytes = match zc.as_str() {
                    "off" | "never" => u64::MAX,
                    size => parse_size(size)?,
                };
            }
            if let Some(spin) = spin_us {
                net.spin_us = spin;
            }
            net.pin = pin_threads;
            let remote = bench_remote::RemoteBenchOptions {
                iterations: iterations.unwrap_or(0),
                bulk_bytes: if size.is_some() { net.bulk_bytes } else { 0 },
                max_tasks: max_tasks.unwrap_or(8),
                against,
                shm: transport.iter().any(|t| t.trim().eq_ignore_ascii_case("shm")),
                pin: pin_threads,
            };
            let mut figures: Vec<Figure> = Vec::new();
            let progress = progress::Progress::new(scenarios.len() as u64, "scenarios");
            for scenario in &scenarios {
                progress.set_message(scenario.clone());
                let cpu_before = CpuTimes::now();
                let mut found = match scenario.as_str() {
                    "step-inproc" => bench_inproc::step_inproc(&inproc)?,
                    "chain" => bench_inproc::chain(&inproc)?,
                    "while-loop" => bench_inproc::while_loop(&inproc)?,
                    "conv" => bench_inproc::conv(&inproc)?,
                    "fanout" => bench_inproc::fanout(&inproc)?,
                    "pingpong" => net_bench::bench_pingpong(&net)?,
                    "bulk" => net_bench::bench_bulk(&net)?,
                    "step-remote" => bench_remote::step_remote(&remote)?,
                    "train-step" => bench_remote::train_step(&remote)?,
                    "transfer-remote" => bench_remote::transfer_remote(&remote)?,
                    "scale" => bench_remote::scale(&remote)?,
                    other => {
                        return Err(Status::invalid_argument(format!(
                            "unknown bench scenario '{other}' (known: step-inproc, chain, while-loop, conv, fanout, pingpong, bulk, step-remote, train-step, transfer-remote, scale)"
                        )));
                    }
                };
                let steal = cpu_before.zip(CpuTimes::now()).and_then(|(before, after)| before.steal_pct_until(&after));
                if let Some(pct) = steal {
                    found.iter_mut().for_each(|f| f.host_steal_pct = Some(pct));
                    if pct > STEAL_WARN_PCT {
                        eprintln!(
                            "warning: the hypervisor stole {pct:.0}% of this machine's CPU time while '{scenario}' ran; \
                             its figures say more about the host's load than about ringflow"
                        );
                    }
                }
                progress.inc(1);
                if !json {
                    // Print as we go: some scenarios take a while.
                    progress.suspend(|| print_figures(&found, false));
                }
                figures.append(&mut found);
            }
            progress.finish();
            if json {
                print_figures(&figures, true);
            }
            Ok(true)
        }
        Command::NetPeer { mode, transport, msg_bytes, spin_us, cpu, next, yielding } => {
            net_bench::run_peer(&PeerArgs {
                mode,
                transport: parse_transport(&transport)?,
                msg_bytes,
                spin_us,
                cpu,
                next,
                yielding,
            })
            .map(|()| true)
        }
        Command::Demo { steps, train: false, trace_file } => demo::demo(steps, trace_file.as_deref()).map(|()| true),
        Command::Demo { steps, train: true, .. } => demo_train::demo_train(steps).map(|()| true),
        Command::Server {
            cluster,
            tf_config,
            job,
            task,
            role,
            cpu_devices,
            threads,
            listen,
            exit_on_stdin_eof,
            limits,
            cluster_from,
            base_port,
            cpus,
            metrics_port,
            transport,
            shm_hugetlb,
            models,
        } => server_cmd::serve(&server_cmd::ServerArgs {
            cluster: cluster_cmd::ClusterArgs { cluster, tf_config, cluster_from, job, task, base_port },
            role,
            cpu_devices,
            threads,
            listen,
            exit_on_stdin_eof,
            cpus,
            metrics_port,
            limits,
            transport,
            shm_hugetlb,
            models,
        })
        .map(|()| true),
        Command::Serve(args) => server_cmd::serve_models(&args).map(|()| true),
        Command::Cluster { action: ClusterAction::Show { from, tf_config, cluster, job, task, base_port } } => {
            let args = cluster_cmd::ClusterArgs { cluster, tf_config, cluster_from: from, job, task, base_port };
            print!("{}", cluster_cmd::show(&args)?);
            Ok(true)
        }
        Command::Stats { target, json } => {
            print!("{}", stats_cmd::stats(&target, json)?);
            Ok(true)
        }
        Command::Devices { target } => {
            let devices = match crate::session::parse_grpc_target(&target) {
                Some(address) => crate::grpc::client::list_cluster_devices(address?)?,
                None => crate::session::remote::list_cluster_devices(crate::session::parse_target(&target)?)?,
            };
            for device in devices {
                println!("{} ({}, incarnation {:#x})", device.name, device.device_type, device.incarnation);
            }
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("2.5GiB").unwrap(), 5 << 29);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert_eq!(parse_size("16KB").unwrap(), 16_000);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3XB").is_err());
    }
}
