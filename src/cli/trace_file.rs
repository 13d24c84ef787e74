//! `--trace-file FILE.json`: traced steps as Chrome trace-event JSON, which
//! Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per
//! task, one track per (device, thread) within it (and an extra lane where
//! `_Recv` waits overlap without nesting), every node a complete
//! event (`"ph":"X"`), and a flow arrow (`"ph":"s"` → `"ph":"f"`, one id)
//! from each `_Send` to the `_Recv` with the same rendezvous key. Times are
//! on the master's clock (the master moved every task's stats by the
//! task's estimated offset); `otherData.clocks` keeps each offset and its
//! error bound.
//!
//! Owns: the file's layout. Must not run steps or estimate clocks: callers
//! hand in the steps' [`RunMetadata`].

use crate::error::{Result, Status};
use crate::executor::NodeStats;
use crate::master::RunMetadata;
use crate::master::clock::TaskClock;
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::path::Path;

/// One traced step and what to call it in the file.
pub struct TracedStep {
    pub label: String,
    pub metadata: RunMetadata,
}

/// `/job:J/replica:R/task:T` of a device name (the whole name if it has no
/// device part).
fn task_of(device: &str) -> &str {
    device.find("/device:").map_or(device, |i| &device[..i])
}

/// `CPU:0` of a device name.
fn short_device(device: &str) -> &str {
    device.find("/device:").map_or(device, |i| &device[i + "/device:".len()..])
}

fn is_send(n: &NodeStats) -> bool {
    n.op == "_Send" || n.op == "_HostSend"
}

fn is_recv(n: &NodeStats) -> bool {
    n.op == "_Recv" || n.op == "_HostRecv"
}

/// The destination device of a rendezvous key `src;inc;dst;name;frame:iter`.
fn key_part(key: &str, index: usize) -> &str {
    key.split(';').nth(index).unwrap_or("")
}

/// A track: one thread of one device of one task.
type ThreadKey<'a> = (&'a str, &'a str, u32);

/// Where each node's slice goes: its lane within its thread's track.
///
/// Trace viewers draw a thread's slices as a stack, so on one track two
/// slices must either nest or not overlap. A `_Recv` slice spans its wait,
/// while its thread runs other nodes, so the waits of successive loop
/// iterations can overlap partially; such a slice goes to the first extra
/// lane of its thread where it nests (`CPU:0 thread 3 (2)`). Slices are
/// placed in start order, longer first on ties, which is also the order
/// they are written in: viewers break ties by file order, and an enclosing
/// slice must come before what it encloses.
struct Layout<'a> {
    /// (step index, node index) in placement order, each with its lane.
    order: Vec<((usize, usize), usize)>,
    /// Lanes used per thread (at least 1).
    lanes: BTreeMap<ThreadKey<'a>, usize>,
}

fn layout(steps: &[TracedStep]) -> Layout<'_> {
    let mut per_thread: BTreeMap<ThreadKey<'_>, Vec<(usize, usize)>> = BTreeMap::new();
    for (s, step) in steps.iter().enumerate() {
        for (i, n) in step.metadata.step_stats.iter().enumerate() {
            per_thread.entry((task_of(&n.device), n.device.as_str(), n.thread)).or_default().push((s, i));
        }
    }
    let node = |(s, i): (usize, usize)| &steps[s].metadata.step_stats[i];
    let mut order = Vec::new();
    let mut lanes = BTreeMap::new();
    for (thread, mut nodes) in per_thread {
        nodes.sort_by_key(|&at| (node(at).start_us, std::cmp::Reverse(node(at).end_us)));
        // Per lane, the ends of the slices still open, innermost last.
        let mut open: Vec<Vec<u64>> = Vec::new();
        for at in nodes {
            let (start, end) = (node(at).start_us, node(at).end_us.max(node(at).start_us));
            let mut placed = None;
            for (lane, ends) in open.iter_mut().enumerate() {
                // Later slices start no earlier, so what has ended stays closed.
                while ends.last().is_some_and(|&e| e <= start) {
                    ends.pop();
                }
                if placed.is_none() && ends.last().is_none_or(|&e| end <= e) {
                    ends.push(end);
                    placed = Some(lane);
                }
            }
            let lane = placed.unwrap_or_else(|| {
                open.push(vec![end]);
                open.len() - 1
            });
            order.push((at, lane));
        }
        lanes.insert(thread, open.len().max(1));
    }
    order.sort_by_key(|&(at, _)| (node(at).start_us, std::cmp::Reverse(node(at).end_us)));
    Layout { order, lanes }
}

/// The trace of `steps` as one JSON document.
pub fn chrome_trace(steps: &[TracedStep]) -> Json {
    let nodes = || steps.iter().flat_map(|s| s.metadata.step_stats.iter());
    // Times relative to the first node, so the viewer's axis starts at 0.
    let origin_us = nodes().map(|n| n.start_us).min().unwrap_or(0);
    let rel = |t: u64| t.saturating_sub(origin_us);

    let mut pids: BTreeMap<&str, u64> = BTreeMap::new();
    for n in nodes() {
        pids.entry(task_of(&n.device)).or_insert(0);
    }
    // Tasks in name order (job, then task index as written).
    for (i, pid) in pids.values_mut().enumerate() {
        *pid = i as u64 + 1;
    }
    let Layout { order, lanes } = layout(steps);
    // Thread ids per task: each thread's lanes in a row, in name order.
    let mut tids: BTreeMap<(ThreadKey<'_>, usize), u64> = BTreeMap::new();
    let mut per_task: BTreeMap<&str, u64> = BTreeMap::new();
    for (&thread, &count) in &lanes {
        for lane in 0..count {
            let next = per_task.entry(thread.0).or_insert(0);
            *next += 1;
            tids.insert((thread, lane), *next);
        }
    }
    let lane_of: BTreeMap<(usize, usize), usize> = order.iter().copied().collect();
    let track = |at: (usize, usize)| -> (u64, u64) {
        let n = &steps[at.0].metadata.step_stats[at.1];
        let thread = (task_of(&n.device), n.device.as_str(), n.thread);
        (pids[thread.0], tids[&(thread, lane_of[&at])])
    };

    let mut events = Vec::new();
    for (task, pid) in &pids {
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": task}}));
        events
            .push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}));
    }
    for (((task, device, thread), lane), tid) in &tids {
        let name = match lane {
            0 => format!("{} thread {thread}", short_device(device)),
            _ => format!("{} thread {thread} ({})", short_device(device), lane + 1),
        };
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pids[task], "tid": tid, "args": {"name": name}}));
        events.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": pids[task], "tid": tid, "args": {"sort_index": tid}}),
        );
    }

    for &(at, _) in &order {
        let step = &steps[at.0];
        let n = &step.metadata.step_stats[at.1];
        let (pid, tid) = track(at);
        let mut args = json!({"op": n.op, "device": n.device, "step": step.label});
        if !n.frame.is_empty() {
            args["frame"] = json!(n.frame);
            args["iter"] = json!(n.iter);
        }
        let transfer = is_send(n) || is_recv(n);
        if transfer {
            args["bytes"] = json!(n.bytes);
            args["rendezvous_key"] = json!(n.rendezvous_key);
            if is_send(n) {
                args["to"] = json!(key_part(&n.rendezvous_key, 2));
            } else {
                args["from"] = json!(key_part(&n.rendezvous_key, 0));
                // A `_Recv` is timed from its wait to its value's arrival.
                args["wait_us"] = json!(n.end_us.saturating_sub(n.start_us));
            }
        }
        events.push(json!({
            "ph": "X",
            "name": n.node,
            "cat": if transfer { "transfer" } else { "node" },
            "pid": pid,
            "tid": tid,
            "ts": rel(n.start_us),
            "dur": n.end_us.saturating_sub(n.start_us),
            "args": args,
        }));
    }

    let mut flow_id = 0u64;
    let mut transfers = 0u64;
    for (step_index, step) in steps.iter().enumerate() {
        let stats = &step.metadata.step_stats;
        let sends: BTreeMap<&str, usize> = stats
            .iter()
            .enumerate()
            .filter(|(_, n)| is_send(n) && !n.rendezvous_key.is_empty())
            .map(|(i, n)| (n.rendezvous_key.as_str(), i))
            .collect();
        for (recv_index, recv) in stats.iter().enumerate().filter(|(_, n)| is_recv(n)) {
            let Some(&send_index) = sends.get(recv.rendezvous_key.as_str()) else { continue };
            let send = &stats[send_index];
            flow_id += 1;
            transfers += 1;
            let (send_pid, send_tid) = track((step_index, send_index));
            let (recv_pid, recv_tid) = track((step_index, recv_index));
            let label = format!("{} bytes", recv.bytes);
            // The arrow leaves the send as it starts and lands as the value
            // arrives (the receive's end). Each end sits half a microsecond
            // inside its slice where the slice is that long, so it binds to
            // that slice and not to a neighbour starting or ending there.
            let inside = |n: &NodeStats| n.end_us.saturating_sub(n.start_us).min(1) as f64 / 2.0;
            let start_ts = rel(send.start_us) as f64 + inside(send);
            let end_ts = (rel(recv.end_us) as f64 - inside(recv)).max(start_ts.min(rel(recv.end_us) as f64));
            // Only the start carries args: viewers merge a flow's args and
            // warn when both ends name the same one.
            events.push(json!({
                "ph": "s", "id": flow_id, "name": label, "cat": "transfer", "bp": "e",
                "pid": send_pid, "tid": send_tid, "ts": start_ts,
                "args": {"step": step_index},
            }));
            events.push(json!({
                "ph": "f", "id": flow_id, "name": label, "cat": "transfer", "bp": "e",
                "pid": recv_pid, "tid": recv_tid, "ts": end_ts,
            }));
        }
    }

    // Every task's clock, once (the first step that carried it).
    let mut clocks: BTreeMap<&str, &TaskClock> = BTreeMap::new();
    for c in steps.iter().flat_map(|s| s.metadata.clocks.iter()) {
        clocks.entry(c.task.as_str()).or_insert(c);
    }
    let max_bound_us = clocks.values().map(|c| c.bound_us).max().unwrap_or(0);
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": concat!("ringflow ", env!("CARGO_PKG_VERSION")),
            "time_origin_epoch_us": origin_us,
            "clock": "the master's wall clock; each task's stamps moved by its estimated offset \
                      (round trips at the session's first traced step; error within bound_us)",
            "clocks": clocks.values().collect::<Vec<_>>(),
            "max_clock_error_us": max_bound_us,
            "steps": steps.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(),
            "transfers_paired": transfers,
        },
    })
}

/// Writes `steps` to `path` as Chrome trace-event JSON.
pub fn write_trace_file(path: &Path, steps: &[TracedStep]) -> Result<()> {
    let text = serde_json::to_string(&chrome_trace(steps))
        .map_err(|e| Status::internal(format!("cannot encode the trace for {}: {e}", path.display())))?;
    std::fs::write(path, text)
        .map_err(|e| Status::permission_denied(format!("cannot write trace file {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK0: &str = "/job:worker/replica:0/task:0";
    const TASK1: &str = "/job:worker/replica:0/task:1";

    fn node(task: &str, name: &str, op: &str, start_us: u64, end_us: u64, thread: u32) -> NodeStats {
        NodeStats {
            node: name.into(),
            op: op.into(),
            device: format!("{task}/device:CPU:0"),
            start_us,
            end_us,
            thread,
            frame: String::new(),
            iter: 0,
            rendezvous_key: String::new(),
            bytes: 0,
        }
    }

    fn transfer(mut n: NodeStats, key: &str, bytes: u64) -> NodeStats {
        n.rendezvous_key = key.into();
        n.bytes = bytes;
        n
    }

    fn step() -> TracedStep {
        let key = format!("{TASK1}/device:CPU:0;7;{TASK0}/device:CPU:0;edge_3_h;0:0");
        TracedStep {
            label: "step 0".into(),
            metadata: RunMetadata {
                step_stats: vec![
                    node(TASK0, "x", "_Arg", 1_000, 1_001, 4),
                    transfer(node(TASK0, "h/_recv", "_Recv", 1_002, 1_090, 4), &key, 64),
                    node(TASK1, "h", "MatMul", 1_010, 1_040, 9),
                    transfer(node(TASK1, "h/_send", "_Send", 1_041, 1_043, 9), &key, 64),
                    node(TASK1, "other", "Tanh", 1_010, 1_020, 11),
                ],
                clocks: vec![
                    TaskClock {
                        task: TASK0.into(),
                        offset_us: 0,
                        midpoint_offset_us: 1,
                        bound_us: 2,
                        min_rtt_us: 0,
                        samples: 8,
                    },
                    TaskClock {
                        task: TASK1.into(),
                        offset_us: 5,
                        midpoint_offset_us: 35,
                        bound_us: 30,
                        min_rtt_us: 56,
                        samples: 8,
                    },
                ],
            },
        }
    }

    fn events<'a>(trace: &'a Json, ph: &str) -> Vec<&'a Json> {
        trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).collect()
    }

    #[test]
    fn tasks_are_processes_threads_are_tracks_and_nodes_are_complete_events() {
        let trace = chrome_trace(&[step()]);
        let processes: Vec<&Json> = events(&trace, "M").into_iter().filter(|e| e["name"] == "process_name").collect();
        let names: Vec<&str> = processes.iter().map(|e| e["args"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, [TASK0, TASK1]);
        let threads: Vec<&Json> = events(&trace, "M").into_iter().filter(|e| e["name"] == "thread_name").collect();
        assert_eq!(threads.len(), 3, "task 0 thread 4, task 1 threads 9 and 11: {threads:?}");
        let slices = events(&trace, "X");
        assert_eq!(slices.len(), 5);
        let matmul = slices.iter().find(|e| e["name"] == "h").unwrap();
        assert_eq!((matmul["ts"].as_u64(), matmul["dur"].as_u64()), (Some(10), Some(30)));
        assert_eq!(matmul["pid"], processes[1]["pid"]);
        let recv = slices.iter().find(|e| e["name"] == "h/_recv").unwrap();
        assert_eq!(recv["args"]["wait_us"], 88);
        assert_eq!(recv["args"]["bytes"], 64);
        assert_eq!(recv["args"]["from"], format!("{TASK1}/device:CPU:0"));
        assert_eq!(trace["otherData"]["max_clock_error_us"], 30);
        assert_eq!(trace["otherData"]["clocks"][1]["offset_us"], 5);
    }

    #[test]
    fn each_send_starts_a_flow_that_its_receive_ends() {
        let trace = chrome_trace(&[step(), TracedStep { label: "step 1".into(), ..step() }]);
        let starts = events(&trace, "s");
        let ends = events(&trace, "f");
        assert_eq!((starts.len(), ends.len()), (2, 2));
        assert_ne!(starts[0]["id"], starts[1]["id"], "ids are unique across steps");
        for (s, f) in starts.iter().zip(&ends) {
            assert_eq!(s["id"], f["id"]);
            assert!(s["ts"].as_f64().unwrap() <= f["ts"].as_f64().unwrap());
            assert_eq!(f["bp"], "e");
        }
        assert_eq!(trace["otherData"]["transfers_paired"], 2);
    }

    #[test]
    fn a_send_without_its_receive_draws_no_arrow() {
        let mut lone = step();
        lone.metadata.step_stats.retain(|n| n.op != "_Recv");
        let trace = chrome_trace(&[lone]);
        assert!(events(&trace, "s").is_empty() && events(&trace, "f").is_empty());
    }

    /// Checks what viewers need of a track: in file order, each slice
    /// either nests in the one still open before it or starts after it ends.
    fn assert_tracks_nest(trace: &Json) {
        // Per (pid, tid), the slices still open: start, end, name.
        type Open = Vec<(u64, u64, String)>;
        let mut open: BTreeMap<(u64, u64), Open> = BTreeMap::new();
        for e in events(trace, "X") {
            let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let (start, end) = (e["ts"].as_u64().unwrap(), e["ts"].as_u64().unwrap() + e["dur"].as_u64().unwrap());
            let stack = open.entry(track).or_default();
            while stack.last().is_some_and(|s| s.1 <= start) {
                stack.pop();
            }
            if let Some(parent) = stack.last() {
                assert!(parent.0 <= start && end <= parent.1, "{} overlaps {parent:?} on {track:?}", e["name"]);
            }
            stack.push((start, end, e["name"].as_str().unwrap().to_string()));
        }
    }

    #[test]
    fn an_enclosing_slice_is_written_before_what_it_encloses() {
        // Stats in the order a thread records them: the first layer ends
        // before the receive it ran under, which started at the same time.
        let key = format!("{TASK1}/device:CPU:0;7;{TASK0}/device:CPU:0;act;0:0");
        let mut step = step();
        step.metadata.step_stats = vec![
            node(TASK0, "x", "_Arg", 1_000, 1_000, 4),
            node(TASK0, "layer1", "MatMul", 1_000, 1_003, 4),
            transfer(node(TASK0, "act/_recv", "_Recv", 1_000, 1_013, 4), &key, 896),
            node(TASK0, "layer3", "MatMul", 1_013, 1_014, 4),
        ];
        let trace = chrome_trace(&[step]);
        let names: Vec<&str> = events(&trace, "X").iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["act/_recv", "layer1", "x", "layer3"]);
        assert_tracks_nest(&trace);
    }

    #[test]
    fn waits_that_overlap_without_nesting_get_a_lane_of_their_own() {
        // Two iterations' receives wait at once on one thread, each ending
        // after the other started; the loop's nodes run between them.
        let key = |i: u64| format!("{TASK1}/device:CPU:0;7;{TASK0}/device:CPU:0;v;f:{i}");
        let mut step = step();
        step.metadata.step_stats = vec![
            transfer(node(TASK0, "v/_recv", "_Recv", 1_000, 1_400, 3), &key(0), 4),
            transfer(node(TASK0, "v/_recv", "_Recv", 1_070, 1_900, 3), &key(1), 4),
            node(TASK0, "merge", "Merge", 1_401, 1_402, 3),
            node(TASK0, "next", "NextIteration", 1_402, 1_403, 3),
            node(TASK0, "exit", "Exit", 1_901, 1_902, 3),
            node(TASK1, "v", "Tanh", 1_001, 1_002, 9),
            transfer(node(TASK1, "v/_send", "_Send", 1_390, 1_391, 9), &key(0), 4),
            transfer(node(TASK1, "v/_send", "_Send", 1_890, 1_891, 9), &key(1), 4),
        ];
        let trace = chrome_trace(&[step]);
        assert_tracks_nest(&trace);
        let threads: Vec<String> = events(&trace, "M")
            .into_iter()
            .filter(|e| e["name"] == "thread_name" && e["pid"] == 1)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(threads, ["CPU:0 thread 3", "CPU:0 thread 3 (2)"]);
        let slices = events(&trace, "X");
        let tid =
            |name: &str, ts: u64| slices.iter().find(|e| e["name"] == name && e["ts"] == ts).unwrap()["tid"].clone();
        assert_eq!((tid("v/_recv", 0), tid("v/_recv", 70)), (json!(1), json!(2)));
        assert_eq!((tid("merge", 401), tid("exit", 901)), (json!(1), json!(1)));
        // Each arrow lands on its own receive's lane.
        let lands: Vec<Json> = events(&trace, "f").iter().map(|f| f["tid"].clone()).collect();
        assert_eq!(lands, [json!(1), json!(2)]);
    }

    #[test]
    fn only_a_flow_start_carries_args() {
        let trace = chrome_trace(&[step()]);
        assert_eq!(events(&trace, "s")[0]["args"]["step"], 0);
        assert!(events(&trace, "f")[0].get("args").is_none());
    }
}
