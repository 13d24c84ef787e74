//! Traces and `bench graph` as a user runs them: real server processes on
//! loopback, files parsed back. Checks what the trace holds and that the
//! tasks' clocks line up within the bound the file records, never how fast.

use ringflow::Tensor;
use ringflow::server::local_cluster::{LocalCluster, LocalClusterOptions};
use ringflow::session::{RunOptions, SessionOptions, create_session};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn ringflow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ringflow")).args(args).output().expect("run ringflow")
}

fn succeeds(args: &[&str]) -> String {
    let out = ringflow(args);
    assert!(
        out.status.success(),
        "ringflow {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs").join(name)
}

fn read_trace(path: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the trace file is written"))
        .expect("the trace file is JSON")
}

fn events<'a>(trace: &'a Json, ph: &str) -> Vec<&'a Json> {
    trace["traceEvents"].as_array().expect("traceEvents is a list").iter().filter(|e| e["ph"] == ph).collect()
}

/// Checks the trace-event structure every trace file has; returns the
/// task name of each process id.
fn check_structure(trace: &Json) -> BTreeMap<u64, String> {
    let mut processes = BTreeMap::new();
    for e in events(trace, "M").into_iter().filter(|e| e["name"] == "process_name") {
        let name = e["args"]["name"].as_str().unwrap().to_string();
        assert!(processes.insert(e["pid"].as_u64().unwrap(), name).is_none(), "one process_name per pid");
    }
    let names: BTreeSet<&String> = processes.values().collect();
    assert_eq!(names.len(), processes.len(), "one process per task: {processes:?}");
    let named_threads: BTreeSet<(u64, u64)> = events(trace, "M")
        .into_iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    for e in events(trace, "X") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(processes.contains_key(&pid) && named_threads.contains(&(pid, tid)), "{e}");
        assert!(e["ts"].as_f64().is_some() && e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
        let op = e["args"]["op"].as_str().unwrap();
        let device = e["args"]["device"].as_str().unwrap();
        assert!(device.starts_with(&processes[&pid]), "{device} is on task {}", processes[&pid]);
        if op == "_Send" || op == "_Recv" {
            assert_eq!(e["cat"], "transfer", "{e}");
            assert!(e["args"]["bytes"].as_u64().is_some(), "{e}");
            assert!(!e["args"]["rendezvous_key"].as_str().unwrap().is_empty(), "{e}");
        }
        if op == "_Recv" {
            assert_eq!(e["args"]["wait_us"].as_f64(), e["dur"].as_f64(), "{e}");
        }
    }
    check_tracks_nest(trace);
    processes
}

/// Checks that a viewer can stack every track's slices: in file order
/// (which viewers use to break ties of start time), each slice nests in the
/// one still open before it on its track, or starts after that one ends.
fn check_tracks_nest(trace: &Json) {
    let mut open: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut last_start: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for e in events(trace, "X") {
        let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let start = e["ts"].as_f64().unwrap();
        let end = start + e["dur"].as_f64().unwrap();
        let previous = last_start.insert(track, start).unwrap_or(f64::MIN);
        assert!(previous <= start, "slices are written in start order per track: {e}");
        let stack = open.entry(track).or_default();
        while stack.last().is_some_and(|&(_, open_end)| open_end <= start) {
            stack.pop();
        }
        if let Some(&(open_start, open_end)) = stack.last() {
            assert!(open_start <= start && end <= open_end, "{e} overlaps [{open_start}, {open_end}] without nesting");
        }
        stack.push((start, end));
    }
}

/// Checks that flows pair every cross-task send with its receive: each id
/// starts once at a `_Send`'s track and ends once, no earlier, at the
/// track of the `_Recv` with the same rendezvous key. Returns the count.
fn check_flows(trace: &Json) -> usize {
    let slices = events(trace, "X");
    let at = |e: &Json, op: &str| -> Vec<String> {
        let (pid, tid, ts) = (&e["pid"], &e["tid"], e["ts"].as_f64().unwrap());
        slices
            .iter()
            .filter(|x| x["pid"] == *pid && x["tid"] == *tid && x["args"]["op"] == op)
            .filter(|x| {
                let start = x["ts"].as_f64().unwrap();
                start <= ts && ts <= start + x["dur"].as_f64().unwrap()
            })
            .map(|x| x["args"]["rendezvous_key"].as_str().unwrap().to_string())
            .collect()
    };
    let starts: BTreeMap<u64, &Json> = events(trace, "s").into_iter().map(|e| (e["id"].as_u64().unwrap(), e)).collect();
    let ends: BTreeMap<u64, &Json> = events(trace, "f").into_iter().map(|e| (e["id"].as_u64().unwrap(), e)).collect();
    assert_eq!(starts.len(), events(trace, "s").len(), "flow ids are unique");
    assert_eq!(starts.keys().collect::<Vec<_>>(), ends.keys().collect::<Vec<_>>(), "every flow starts and ends");
    for (id, s) in &starts {
        let f = ends[id];
        assert!(s["ts"].as_f64().unwrap() <= f["ts"].as_f64().unwrap(), "s before f: {s} {f}");
        assert_eq!(f["bp"], "e");
        let sent = at(s, "_Send");
        let received = at(f, "_Recv");
        assert!(
            sent.iter().any(|k| received.contains(k)),
            "flow {id} binds a _Send ({sent:?}) and a _Recv ({received:?}) with one key"
        );
    }
    starts.len()
}

#[test]
fn verify_traces_every_step_of_a_loop_across_two_tasks_with_each_crossing_paired() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("verify.json");
    let run = ringflow(&[
        "verify",
        "--local-cluster",
        "2",
        "--trace-file",
        file.to_str().unwrap(),
        case("while_two_tasks").to_str().unwrap(),
        case("mlp3_two_tasks").to_str().unwrap(),
    ]);
    let (out, err) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{out}{err}");
    assert!(out.contains("PASS while_two_tasks") && out.contains("PASS mlp3_two_tasks"), "{out}");
    assert!(!err.contains('\u{1b}') && !err.contains("cases"), "no progress drawn on a pipe: {err:?}");
    let trace = read_trace(&file);
    let processes = check_structure(&trace);
    let tasks: Vec<&str> = processes.values().map(String::as_str).collect();
    assert_eq!(tasks, ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]);
    let steps = trace["otherData"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "two loop steps and the MLP's one: {steps:?}");
    let slices = events(&trace, "X");
    let ops: BTreeSet<&str> = slices.iter().map(|e| e["args"]["op"].as_str().unwrap()).collect();
    for op in ["_Send", "_Recv", "MatMul", "Enter", "Merge"] {
        assert!(ops.contains(op), "a {op} node: {ops:?}");
    }
    // Loop iterations cross under keys of their own: n = 5 iterations each
    // send the body's value back, so there are many more flows than steps.
    let flows = check_flows(&trace);
    assert!(flows >= 10, "{flows} flows");
    assert_eq!(trace["otherData"]["transfers_paired"].as_u64(), Some(flows as u64));
    let moved: u64 =
        slices.iter().filter(|e| e["args"]["op"] == "_Recv").map(|e| e["args"]["bytes"].as_u64().unwrap()).sum();
    assert!(moved > 0, "received tensors have sizes");
}

#[test]
fn tasks_on_one_host_are_found_to_share_a_clock_within_the_recorded_bound() {
    let cluster = LocalCluster::start(Path::new(env!("CARGO_BIN_EXE_ringflow")), 2, &LocalClusterOptions::default())
        .expect("local cluster starts");
    let session = create_session(
        ringflow::cli::bench_remote::sent_remote_graph(),
        &SessionOptions { target: cluster.target(0), ..SessionOptions::default() },
    )
    .expect("session");
    let traced = RunOptions { trace: true, ..RunOptions::default() };
    let (out, metadata) =
        session.run(&traced, vec![("x".into(), Tensor::scalar(3.0f32))], &["y".into()], &[]).expect("step");
    assert_eq!(out[0].as_slice::<f32>().unwrap(), [7.0]);
    assert_eq!(metadata.clocks.len(), 2, "{:?}", metadata.clocks);
    for clock in &metadata.clocks {
        // Both servers read this host's clock: the true offset is 0.
        assert!(clock.midpoint_offset_us.unsigned_abs() <= clock.bound_us, "{clock:?}");
        assert_eq!(clock.offset_us, 0, "{clock:?}");
        assert!(clock.samples >= 4 && clock.bound_us >= clock.min_rtt_us / 2, "{clock:?}");
    }
    let remote = metadata.clocks.iter().find(|c| c.task.ends_with("task:1")).expect("task 1's clock");
    // Task 1 answers over loopback, quickly: over shared memory a probe's
    // round trip can take under a microsecond, which whole-microsecond
    // readings may record as 0.
    assert!(remote.min_rtt_us < 3_000, "task 1 answers over loopback: {remote:?}");
    // On one clock, a value arrives after it was sent.
    let stats = |op: &str| metadata.step_stats.iter().find(|n| n.op == op).unwrap_or_else(|| panic!("a {op}"));
    let (send, recv) = (stats("_Send"), stats("_Recv"));
    assert_eq!(send.rendezvous_key, recv.rendezvous_key);
    assert_eq!((send.bytes, recv.bytes), (4, 4), "one f32");
    assert!(send.start_us <= recv.end_us, "{send:?} {recv:?}");
    session.close().unwrap();
    cluster.shutdown();
}

#[test]
fn bench_graph_times_a_graph_on_a_local_cluster_and_traces_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.json");
    let mlp = case("mlp3_two_tasks");
    let feed = format!("x:0={}", mlp.join("step0_feed_x_0.npy").display());
    let out = succeeds(&[
        "bench",
        "graph",
        mlp.join("graph.pb").to_str().unwrap(),
        "--feed",
        &feed,
        "--fetch",
        "y:0",
        "--local-cluster",
        "2",
        "--steps",
        "40",
        "--json",
        "--trace-file",
        file.to_str().unwrap(),
    ]);
    let figures: Vec<Json> = out.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    let metric = |m: &str| figures.iter().find(|f| f["metric"] == m).unwrap_or_else(|| panic!("a {m} row: {out}"));
    for (m, unit) in [("p50", "us"), ("p99", "us"), ("p999", "us"), ("steps_per_second", "steps/s")] {
        let f = metric(m);
        assert_eq!((f["scenario"].as_str(), f["unit"].as_str()), (Some("graph"), Some(unit)), "{f}");
        let (value, baseline) = (f["value"].as_f64().unwrap(), f["baseline"].as_f64().unwrap());
        assert!(value > 0.0 && baseline > 0.0 && value.is_finite(), "{f}");
        assert!((f["ratio"].as_f64().unwrap() - value / baseline).abs() < 1e-9 * value / baseline, "{f}");
        assert!(f["threads"].as_u64().unwrap() >= 1, "{f}");
    }
    let (p50, p99, p999) = (metric("p50"), metric("p99"), metric("p999"));
    assert!(p50["value"].as_f64() <= p99["value"].as_f64() && p99["value"].as_f64() <= p999["value"].as_f64());
    let trace = read_trace(&file);
    assert_eq!(check_structure(&trace).len(), 2, "both tasks ran part of the step");
    assert_eq!(check_flows(&trace), 2, "the MLP crosses to task 1 and back");
}

#[test]
fn run_traces_an_in_process_step_as_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let add = case("add_scalar");
    let case_json: Json = serde_json::from_str(&std::fs::read_to_string(add.join("case.json")).unwrap()).unwrap();
    let step = &case_json["steps"][0];
    let mut args: Vec<String> = vec!["run".into(), "--graph".into(), add.join("graph.pb").display().to_string()];
    for (name, npy) in step["feeds"].as_object().unwrap() {
        args.extend(["--feed".into(), format!("{name}={}", add.join(npy.as_str().unwrap()).display())]);
    }
    for name in step["fetches"].as_object().unwrap().keys() {
        args.extend(["--fetch".into(), name.clone()]);
    }
    args.extend(["--trace-file".into(), file.display().to_string()]);
    succeeds(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let trace = read_trace(&file);
    assert_eq!(check_structure(&trace).len(), 1);
    assert!(!events(&trace, "X").is_empty());
    assert_eq!(check_flows(&trace), 0, "nothing crosses in one task");
}

#[test]
fn bench_graph_names_what_is_wrong_with_its_input() {
    let missing = ringflow(&["bench", "graph", "/nonexistent/g.pb", "--fetch", "y:0"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/g.pb"), "{missing:?}");
    let graph = case("mlp3_two_tasks").join("graph.pb");
    let no_fetch = ringflow(&["bench", "graph", graph.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&no_fetch.stderr).contains("--fetch"), "{no_fetch:?}");
    let stray = ringflow(&["bench", "chain", "--fetch", "y:0"]);
    assert!(String::from_utf8_lossy(&stray.stderr).contains("bench graph"), "{stray:?}");
}
